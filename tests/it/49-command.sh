# 49-command.sh - a [job] command runs as written: in its job directory,
# every word of its line an argument (no shell, no comment cut)

test_a_roots_command_starts_in_its_job_directory() {
	dlh_mount
	printf '[job]\ncommand = /bin/pwd\n[resources]\nranks = 1\n' > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status"
	grep -qx "\[rank 0\] $STATE/jobs/1" "$MNT/jobs/1/log" || die "log: $(grep rank "$MNT/jobs/1/log")"
	dlh_umount
}

test_a_semicolon_in_a_command_is_an_argument_not_a_comment() {
	dlh_mount
	printf '[job]\ncommand = /bin/echo a ; id\n[resources]\nranks = 1 ; a comment after any other key\n' > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	grep -qx '\[rank 0\] a ; id' "$MNT/jobs/1/log" || die "log: $(grep rank "$MNT/jobs/1/log")"
	grep -qx 'command = /bin/echo a ; id' "$MNT/jobs/1/spec" || die "spec: $(grep command "$MNT/jobs/1/spec")"
	grep -q 'uid=' "$MNT/jobs/1/log" && die "id ran: $(grep uid= "$MNT/jobs/1/log")"
	dlh_umount
}

test_a_state_directory_others_cannot_enter_is_named_when_a_users_run_starts() {
	local a f d
	dlh_user a
	DLH_OPTS="-o allow_other" dlh_mount
	chmod 700 "$STATE"
	d=$(shared_dir)
	printf '[job]\ncommand = /bin/true\n[resources]\nranks = 1\n' > "$d/c.ini"
	chmod 644 "$d/c.ini"
	as "$a" cp "$d/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	grep -q "^reason=the state directory \"$STATE\" (mode 0700) lets no other user reach a job directory" "$MNT/jobs/1/result" ||
		die "result: $(cat "$MNT/jobs/1/result")"
	expect_eq "$(as "$a" cat "$MNT/jobs/1/progress")" "failed: the launch failed" "progress"
	rm -rf "$d"
	dlh_umount
}

# [job] env: every rank gets it, as the owner, over the pool file's [env]
# (which every job gets); a long value on a line of its own; no shell
test_job_env_reaches_every_rank_of_a_users_job_over_the_pools_defaults() {
	local a d long
	dlh_user a
	d=$(shared_dir)
	printf '[node here]\nhost = %s\ncpus = 2\n[env]\nGLOO_SOCKET_IFNAME = lo\nPOOL_DEFAULT = from the pool\n' \
		"$(hostname)" > "$d/pool.ini"
	DLH_OPTS="-o allow_other -o pool=$d/pool.ini -o probe=off" dlh_mount
	chmod 711 "$STATE"
	long=$(head -c 600 /dev/zero | tr '\0' 'v')
	printf '[job]\ncommand = /usr/bin/env\nenv = DLH_TEST_X=1\n' > "$d/bad.ini"
	printf '[job]\ncommand = /usr/bin/env\nenv = GLOO_SOCKET_IFNAME=eth7\nenv = A_B=x ; $(id) `id`\nenv = LONG=%s\n[resources]\nranks = 2\n' \
		"$long" > "$d/c.ini"
	chmod 644 "$d"/*.ini
	expect_errno "Invalid argument" as "$a" cp "$d/bad.ini" "$MNT/jobs/new"
	as "$a" tail -1 "$MNT/jobs/errors" | grep -q 'spec:3: \[job\] env: DLH_TEST_X is set by dlhfs or Open MPI for every rank' ||
		die "errors: $(as "$a" tail -1 "$MNT/jobs/errors")"
	as "$a" cp "$d/c.ini" "$MNT/jobs/new" || die "submit: $(as "$a" tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -3 "$MNT/jobs/1/log"))"
	local r
	for r in 0 1; do
		grep -qx "\[rank $r\] GLOO_SOCKET_IFNAME=eth7" "$MNT/jobs/1/log" || die "rank $r: $(grep "\[rank $r\] GLOO" "$MNT/jobs/1/log")"
		grep -qxF "[rank $r] A_B=x ; \$(id) \`id\`" "$MNT/jobs/1/log" || die "rank $r: $(grep "\[rank $r\] A_B" "$MNT/jobs/1/log")"
		grep -qx "\[rank $r\] LONG=$long" "$MNT/jobs/1/log" || die "rank $r lacks the long value"
		grep -qx "\[rank $r\] POOL_DEFAULT=from the pool" "$MNT/jobs/1/log" || die "rank $r lacks the pool's default"
		grep -qx "\[rank $r\] USER=$a" "$MNT/jobs/1/log" || die "rank $r is not $a's: $(grep "\[rank $r\] USER" "$MNT/jobs/1/log")"
	done
	grep -q 'uid=' "$MNT/jobs/1/log" && die "a shell ran id: $(grep uid= "$MNT/jobs/1/log")"
	# the stored spec keeps every entry, one a line; the plan shows them
	expect_eq "$(grep -c '^env = ' "$MNT/jobs/1/spec")" 3 "env lines of the stored spec"
	grep -q '^env .*GLOO_SOCKET_IFNAME=eth7 ' "$MNT/jobs/1/plan" || die "plan: $(grep '^env' "$MNT/jobs/1/plan")"
	rm -rf "$d"
	dlh_umount
}

# What a program writes in $DLH_OUTPUT_DIR is served in jobs/<id>/output/,
# with the job's privacy
test_a_programs_output_is_in_the_mount_for_its_readers_only() {
	local a b d
	dlh_user a
	dlh_user b
	DLH_OPTS="-o allow_other" dlh_mount
	chmod 711 "$STATE"
	d=$(shared_dir)
	printf '#!/bin/sh\nprintf "weights of %%s\\n" "$USER" > "$DLH_OUTPUT_DIR/model.pt"\n' > "$d/save.sh"
	printf '[job]\ncommand = /bin/sh %s/save.sh\n[resources]\nranks = 1\n' "$d" > "$d/c.ini"
	chmod 644 "$d"/*
	as "$a" cp "$d/c.ini" "$MNT/jobs/new" || die "submit: $(as "$a" tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -3 "$MNT/jobs/1/log"))"
	expect_eq "$(as "$a" ls "$MNT/jobs/1/output")" "model.pt" "ls output as its owner"
	expect_eq "$(as "$a" cat "$MNT/jobs/1/output/model.pt")" "weights of $a" "output/model.pt"
	expect_errno "Permission denied" as "$b" cat "$MNT/jobs/1/output/model.pt"
	expect_errno "Permission denied" as "$b" ls "$MNT/jobs/1/output"
	rm -rf "$d"
	dlh_umount
}

# A command without [resources] ranks runs once (a plain script is not an
# MPI program), and its spec and plan say only what applies to a program:
# no [data], [model], [train], global batch or lr (and a program shorter
# than its profile run runs once: that run was the job's)
test_a_command_without_ranks_runs_once_and_its_spec_and_plan_say_only_what_applies() {
	DLH_OPTS="-o cpus=2" dlh_mount
	printf '[job]\ncommand = /bin/echo once\n' > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -3 "$MNT/jobs/1/log"))"
	expect_eq "$(grep -c '^\[rank [0-9]*\] once$' "$MNT/jobs/1/log")" 1 "ranks that ran ($(grep rank "$MNT/jobs/1/log"))"
	grep -qx '\[rank 0\] once' "$MNT/jobs/1/log" || die "log: $(grep rank "$MNT/jobs/1/log")"
	local spec plan
	spec=$(cat "$MNT/jobs/1/spec")
	grep -qx 'ranks = 1' <<< "$spec" || die "spec ranks: $(grep ranks <<< "$spec")"
	grep -Eq '^\[(data|model|train)\]$|^(epochs|batch_size|lr|layers|type) =' <<< "$spec" &&
		die "the spec has the trainer's keys: $spec"
	grep -qx '\[resources\]' <<< "$spec" || die "spec: $spec"
	plan=$(cat "$MNT/jobs/1/plan")
	grep -qx 'ranks 1' <<< "$plan" || die "plan: $plan"
	grep -Eq '^(global_batch|lr) | batch [0-9]' <<< "$plan" && die "the plan has the trainer's batch or lr: $plan"
	grep -q '^rank 0 host ' <<< "$plan" || die "plan: $plan"
	grep -q '^rank 1 ' <<< "$plan" && die "plan has a second rank: $plan"
	dlh_umount
}

# A command whose spec gives [train] batch_size, lr and scale_batch gets
# the planner's: the global batch, each rank's share and the scaled rate
# (DLH_GLOBAL_BATCH, DLH_BATCH by dlh-rank, DLH_LR), as an ordinary user;
# its spec keeps them and its plan shows them
test_a_command_given_batch_size_and_lr_is_handed_the_planners() {
	local a d
	dlh_user a
	DLH_OPTS="-o allow_other -o cpus=2" dlh_mount
	chmod 711 "$STATE"
	d=$(shared_dir)
	printf '#!/bin/sh
echo "rank=$RANK batch=$DLH_BATCH global=$DLH_GLOBAL_BATCH lr=$DLH_LR"
' > "$d/b.sh"
	printf '[job]
command = /bin/sh %s/b.sh
profile = false
[train]
batch_size = 24
lr = 0.05
scale_batch = true
[resources]
ranks = 2
' \
		"$d" > "$d/c.ini"
	printf '[job]
command = /bin/sh %s/b.sh
[train]
lr = auto
' "$d" > "$d/bad.ini"
	chmod 644 "$d"/*
	expect_errno "Invalid argument" as "$a" cp "$d/bad.ini" "$MNT/jobs/new"
	as "$a" tail -1 "$MNT/jobs/errors" | grep -qF "spec:4: [train] lr: auto is the built-in trainer's range test" ||
		die "errors: $(as "$a" tail -1 "$MNT/jobs/errors")"
	as "$a" cp "$d/c.ini" "$MNT/jobs/new" || die "submit: $(as "$a" tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -3 "$MNT/jobs/1/log"))"
	local r
	for r in 0 1; do
		grep -qx "\[rank $r\] rank=$r batch=24 global=48 lr=0.1" "$MNT/jobs/1/log" ||
			die "rank $r: $(grep "\[rank $r\]" "$MNT/jobs/1/log")"
	done
	local spec plan
	spec=$(as "$a" cat "$MNT/jobs/1/spec")
	for l in '[train]' 'batch_size = 24' 'lr = 0.05' 'scale_batch = true'; do
		grep -qxF "$l" <<< "$spec" || die "spec lacks $l: $spec"
	done
	grep -q '^epochs' <<< "$spec" && die "spec has the trainer's epochs: $spec"
	plan=$(as "$a" cat "$MNT/jobs/1/plan")
	grep -qx 'global_batch 48 (DLH_GLOBAL_BATCH; each rank.s DLH_BATCH below)' <<< "$plan" || die "plan: $plan"
	grep -qx 'lr 0.1 (DLH_LR)' <<< "$plan" || die "plan: $plan"
	grep -q '^rank 1 host .* batch 24$' <<< "$plan" || die "plan: $plan"
	grep -q '^lr 0.05 -> 0.1 (DLH_LR): linear scaling rule' <<< "$plan" || die "plan: $plan"
	rm -rf "$d"
	dlh_umount
}

# [job] deadline beside profile = false: no estimate to meet it by, so
# close() fails with EINVAL and jobs/errors says why
test_a_commands_deadline_without_a_profile_is_refused() {
	dlh_mount
	printf '[job]\ncommand = /bin/true\ndeadline = 1m\nprofile = false\n' > "$STATE/d.ini"
	expect_errno "Invalid argument" cp "$STATE/d.ini" "$MNT/jobs/new"
	tail -1 "$MNT/jobs/errors" | grep -qF 'spec: [job] deadline: a [job] command with profile = false has no estimate to meet it by' ||
		die "errors: $(tail -1 "$MNT/jobs/errors")"
	ls "$MNT/jobs" | grep -q '^[0-9]' && die "a job appeared"
	dlh_umount
}

# A key of the built-in trainer beside a command is refused, naming its line
test_a_trainer_key_beside_a_command_is_refused_naming_its_line() {
	dlh_mount
	printf '[job]\ncommand = /bin/true\n\n[train]\nepochs = 3\n' > "$STATE/t.ini"
	expect_errno "Invalid argument" cp "$STATE/t.ini" "$MNT/jobs/new"
	tail -1 "$MNT/jobs/errors" | grep -qF 'spec:5: [train] epochs: applies to the built-in trainer, not to a [job] command' ||
		die "errors: $(tail -1 "$MNT/jobs/errors")"
	ls "$MNT/jobs" | grep -q '^[0-9]' && die "a job appeared"
	dlh_umount
}

# A command's job stored by an older dlhfs (its spec.ini lists the trainer's
# keys at their defaults, deadline and ranks = auto) is there after a mount:
# what no longer applies is dropped as the spec loads (jobs/<id>/spec shows
# the file as it was stored)
test_a_commands_job_stored_by_an_older_dlhfs_loads_at_mount() {
	dlh_mount
	printf '[job]\nname = old\ncommand = /bin/true\n' > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	dlh_umount
	printf '%s\n' '[job]' 'name = old' 'command = /bin/true' 'steps = 0' 'restart = never' \
		'max_restarts = 3' 'priority = 0' 'preemptible = true' 'time_limit = 0' \
		'time_limit_grace = 0' 'hang_timeout = 0' 'deadline = 0:01:00' 'dry_run = false' \
		'readable_by = owner' '' '[data]' 'train = /nonexistent/train-images-idx3-ubyte.gz' \
		'format = idx' '' '[model]' 'type = mlp' 'layers = 256, 128, 100' 'dropout = 0' '' \
		'[train]' 'epochs = 10' 'batch_size = 64' 'lr = 0.01' 'optimizer = sgd' 'momentum = 0.9' '' \
		'[resources]' 'ranks = auto' 'nodes = auto' 'device = cpu' 'memory = 0' 'disk = 0' \
		> "$STATE/jobs/1/spec.ini"
	dlh_mount "$STATE"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status of the older job"
	expect_eq "$(readlink "$MNT/jobs/old")" 1 "its name"
	grep -qx 'epochs = 10' "$MNT/jobs/1/spec" || die "spec: $(cat "$MNT/jobs/1/spec")"
	dlh_umount
}
