# 25-planner.sh - estimates before launch, the planner's choice under a
# deadline, dry runs, batch scaling with the lr, actual figures after the run

# plan_field JOB KEY: the value of "KEY value" in the job's plan
plan_field() { sed -n "s/^$2 //p" "$MNT/jobs/$1/plan" | head -1; }

# est JOB KEY: KEY=value of the job's estimate
est() { sed -n "s/^$2=//p" "$MNT/jobs/$1/estimate" | head -1; }

# candidate_time JOB RANKS: the predicted seconds of the "R x cpu" line of the plan
candidate_time() {
	grep -E "^(chosen|candidate) $2 x cpu on 1 node: " "$MNT/jobs/$1/plan" | head -1 |
		sed -E 's/^[^:]*: ([^,]*),.*/\1/' | awk '
		{ s = 0; t = $0
		  if (match(t, /[0-9]+h/)) { s += 3600 * substr(t, RSTART, RLENGTH - 1) }
		  if (match(t, /[0-9]+m/)) { s += 60 * substr(t, RSTART, RLENGTH - 1) }
		  if (match(t, /[0-9.]+s/)) { s += substr(t, RSTART, RLENGTH - 1) }
		  print s }'
}

# the example CNN on all the data: minutes, so 1 and 2 ranks differ clearly
# (the tests that use it only plan it)
cnn_spec() {
	printf '[job]\nname = %s\n' "$1"
	printf '[model]\ntype = cnn\n[train]\nepochs = 2\nbatch_size = 64\nlr = 0.05\n'
	shift
	for l in "$@"; do printf '%s\n' "$l"; done
}

test_dry_run_estimates_and_plans_without_launching() {
	dlh_mount
	cnn_spec dry "[job]" "dry_run = true" > "$STATE/d.ini"
	cp "$STATE/d.ini" "$MNT/jobs/new" || die "submit failed: $(tail -3 "$MNT/jobs/errors")"
	expect_eq "$(cat "$MNT/jobs/1/status")" planned "status of a dry run"
	local k
	for k in step_s epoch_s total_s joules mem_bytes comm_bytes steps; do
		[ -n "$(est 1 $k)" ] || die "estimate lacks $k: $(cat "$MNT/jobs/1/estimate")"
	done
	awk -v t="$(est 1 total_s)" 'BEGIN { exit !(t > 0) }' || die "total_s $(est 1 total_s)"
	grep -q '^chosen [12] x cpu on 1 node: ' "$MNT/jobs/1/plan" || die "plan: $(cat "$MNT/jobs/1/plan")"
	grep -q '^planner fastest' "$MNT/jobs/1/plan" || die "no deadline: the fastest: $(cat "$MNT/jobs/1/plan")"
	grep -q '^candidate ' "$MNT/jobs/1/plan" || die "no next-best candidate: $(cat "$MNT/jobs/1/plan")"
	grep -q '^argv .*dlh-train ' "$MNT/jobs/1/plan" || die "plan without argv: $(cat "$MNT/jobs/1/plan")"
	[ ! -e "$MNT/jobs/1/metrics.csv" ] || [ ! -s "$MNT/jobs/1/metrics.csv" ] || die "a dry run trained"
	[ -z "$(rank_pids 1)" ] || die "a dry run started ranks"
	grep -q '^status=planned' "$MNT/jobs/1/result" || die "result: $(cat "$MNT/jobs/1/result")"
	expect_errno "Device or resource busy" bash -c "echo cancel > '$MNT/jobs/1/ctl'"
	dlh_umount
}

test_deadline_picks_fewest_joules_that_meet_it() {
	dlh_mount
	# the candidates' times, from a dry run of the same spec without a deadline
	cnn_spec probe "[job]" "dry_run = true" > "$STATE/p.ini"
	cp "$STATE/p.ini" "$MNT/jobs/new" || die "probe: $(tail -3 "$MNT/jobs/errors")"
	local t1 t2
	t1=$(candidate_time 1 1) t2=$(candidate_time 1 2)
	[ -n "$t1" ] && [ -n "$t2" ] || die "plan lacks a candidate: $(cat "$MNT/jobs/1/plan")"
	# (the suite's one calibration decides it: on 2 busy cores it has measured
	# both cores together slower than one, and then 1 rank is estimated faster)
	awk -v a="$t1" -v b="$t2" 'BEGIN { exit !(b < a) }' ||
		skip "on this calibration 2 ranks ($t2 s) are not faster than 1 ($t1 s): $(grep -E '^cpu\.gemm_(flops|all)=' "$STATE/calibration" | tr '\n' ' ')"
	# loose: every configuration meets it, the cheapest in joules wins
	local j1 j2 loose tight
	j1=$(grep -E '^(chosen|candidate) 1 x cpu' "$MNT/jobs/1/plan" | sed -E 's/.*, ([0-9.]+) J,.*/\1/')
	j2=$(grep -E '^(chosen|candidate) 2 x cpu' "$MNT/jobs/1/plan" | sed -E 's/.*, ([0-9.]+) J,.*/\1/')
	loose=$(awk -v a="$t1" 'BEGIN { printf "%d", a * 3 + 60 }')
	cnn_spec loose "[job]" "dry_run = true" "deadline = ${loose}s" > "$STATE/l.ini"
	cp "$STATE/l.ini" "$MNT/jobs/new" || die "loose: $(tail -3 "$MNT/jobs/errors")"
	local want=1; awk -v a="$j1" -v b="$j2" 'BEGIN { exit !(b < a) }' && want=2
	grep -q "^chosen $want x cpu" "$MNT/jobs/2/plan" || die "loose deadline (${loose}s, $j1 J vs $j2 J): $(cat "$MNT/jobs/2/plan")"
	grep -q '^planner fewest joules' "$MNT/jobs/2/plan" || die "$(cat "$MNT/jobs/2/plan")"
	# tight: between the two times: only the faster one meets it
	tight=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%d", (a + b) / 2 }')
	awk -v t="$tight" -v b="$t2" -v a="$t1" 'BEGIN { exit !(t > b && t < a) }' || skip "1 and 2 ranks within a second ($t1 s, $t2 s)"
	cnn_spec tight "[job]" "dry_run = true" "deadline = ${tight}s" > "$STATE/t.ini"
	cp "$STATE/t.ini" "$MNT/jobs/new" || die "tight: $(tail -3 "$MNT/jobs/errors")"
	grep -q '^chosen 2 x cpu' "$MNT/jobs/3/plan" || die "tight deadline ${tight}s: $(cat "$MNT/jobs/3/plan")"
	dlh_umount
}

test_impossible_deadline_is_refused_with_the_best_time() {
	dlh_mount
	cnn_spec never "[job]" "deadline = 1s" > "$STATE/n.ini"
	expect_errno "Invalid argument" cp "$STATE/n.ini" "$MNT/jobs/new"
	grep -q '\[job\] deadline: no configuration .* meets the deadline 1.0s: the fastest, [12] x cpu on 1 node, is estimated at ' \
		"$MNT/jobs/errors" || die "errors: $(tail -3 "$MNT/jobs/errors")"
	[ ! -e "$MNT/jobs/1" ] || die "a refused spec made a job"
	dlh_umount
}

test_scale_batch_scales_lr_linearly_with_warmup() {
	dlh_mount
	slice_spec scaled 1 "[train]" "scale_batch = true" "[job]" "dry_run = true" > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	local plan=$MNT/jobs/1/plan
	expect_eq "$(plan_field 1 global_batch)" 128 "global batch of 2 ranks x 64"
	expect_eq "$(plan_field 1 lr)" 0.1 "lr 0.05 x 128/64"
	grep -q '^lr 0.05 -> 0.1: linear scaling rule' "$plan" || die "plan says why: $(cat "$plan")"
	grep -q '^warmup_steps 0 -> [1-9][0-9]*: ' "$plan" || die "warmup: $(cat "$plan")"
	grep -q -- '--batch 128 .*--lr 0.1 .*--warmup-steps [1-9]' "$plan" || die "argv: $(grep ^argv "$plan")"
	dlh_umount
}

test_after_the_run_the_estimate_has_actuals_and_errors() {
	dlh_mount
	slice_spec act 1 > "$STATE/a.ini"
	cp "$STATE/a.ini" "$MNT/jobs/new" || die "submit: $(tail -3 "$MNT/jobs/errors")"
	local before; before=$(est 1 total_s)
	[ -n "$before" ] || die "no estimate before launch: $(cat "$MNT/jobs/1/estimate")"
	[ -z "$(est 1 actual_total_s)" ] || die "actuals before the run"
	wait_for 120 job_terminal 1 || die "job did not end"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -3 "$MNT/jobs/1/log"))"
	wait_for 10 sh -c "grep -q '^actual_total_s=' '$MNT/jobs/1/estimate'" || die "no actuals: $(cat "$MNT/jobs/1/estimate")"
	expect_eq "$(est 1 total_s)" "$before" "the prediction is kept beside the actuals"
	local a e
	a=$(est 1 actual_total_s) e=$(est 1 error_total_s)
	awk -v a="$a" -v p="$before" -v e="$e" 'BEGIN { d = 100 * (a - p) / a; exit !(a > 0 && (d - e < 0.1 && e - d < 0.1)) }' ||
		die "error_total_s $e is not (actual $a - predicted $before) / actual"
	grep -q "estimate: .* predicted, .* actual" "$MNT/jobs/1/log" || die "log lacks the comparison"
	[ -s "$STATE/history" ] || die "the run did not reach the history"
	dlh_umount
}
