# 92-plots.sh - jobs/<id>/plots/*.svg and report.html of a job trained on a
# slice: well-formed XML with axis titles, and what headless Chromium shows of
# them (tests/helpers/pngcolors.py counts each series' colour in its screenshot)

PLOTS="accuracy.svg loss.svg progress.svg throughput.svg"

# the colour of each series (engine/report/plots.c) and the fewest of its
# pixels a screenshot of report.html must show: a legend swatch alone is
# about 50, a curve hundreds (the shortest, predicted-finish, drew 258 on a
# quiet machine and 146 in a suite beside another on 2 cores: its length
# follows the run's own timing); a blank page 0
PLOT_COLORS="#9ecae1:train-loss #1f77b4:train-loss-smoothed #d62728:test-loss \
#2ca02c:test-accuracy #ff7f0e:train-accuracy-smoothed #9467bd:samples-per-s \
#17becf:actual-steps #8c564b:predicted #e377c2:predicted-finish"
PLOT_PIXELS_MIN=100

# svg_check FILE TITLE...: FILE parses as XML, its root is an SVG <svg>, it
# draws a line, and each TITLE is the whole text of one of its <text>s
svg_check() {
	python3 - "$@" <<-'EOF' || die "$1: not the SVG it should be"
	import sys, xml.etree.ElementTree as E
	ns = '{http://www.w3.org/2000/svg}'
	root = E.parse(sys.argv[1]).getroot()
	assert root.tag == ns + 'svg', root.tag
	texts = [t.text for t in root.iter(ns + 'text')]
	for want in sys.argv[2:]:
	    assert want in texts, f'no text "{want}" in {texts}'
	assert root.find(f'.//{ns}polyline') is not None, 'no line drawn'
	raw = open(sys.argv[1]).read()
	assert 'nan' not in raw and 'inf' not in raw, 'NaN or infinity in the SVG'
	EOF
}

# shot URL PNG W H: headless Chromium's screenshot of URL
shot() {
	timeout 60 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
		--user-data-dir="$STATE/chromium" --screenshot="$2" --window-size="$3,$4" "$1" \
		> "$STATE/chromium.log" 2>&1
	[ -s "$2" ] || die "chromium made no screenshot of $1: $(tail -3 "$STATE/chromium.log")"
}

# colors_shown PNG: "NAME N" for each series colour in the screenshot
colors_shown() {
	local c names=() colors=()
	for c in $PLOT_COLORS; do colors+=("${c%%:*}"); names+=("${c#*:}"); done
	python3 "$DLH_ROOT/tests/helpers/pngcolors.py" "$1" "${colors[@]}" |
		awk -v names="${names[*]}" 'BEGIN { split(names, n, " ") } /^#/ { print n[++i], $2 }'
}

test_a_finished_jobs_plots_are_svg_with_axes_and_chromium_shows_their_curves() {
	command -v python3 >/dev/null || skip "no python3 (make deps installs it)"
	dlh_mount
	slice_spec plots 3 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 240 job_terminal 1 || die "job did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "status ($(tail -5 "$MNT/jobs/1/log"))"
	expect_eq "$(ls "$MNT/jobs/1/plots" | tr '\n' ' ')" "$PLOTS " "ls plots"
	ls "$MNT/jobs/1" | grep -qx report.html || die "ls jobs/1: $(ls "$MNT/jobs/1")"
	grep -q '^total_s=' "$MNT/jobs/1/estimate" || die "no estimate: $(cat "$MNT/jobs/1/estimate")"
	# global, not local: the EXIT trap runs after this function has returned
	PLOTS_OUT=$(mktemp -d /tmp/dlh-plots.XXXXXX)
	trap 'rm -rf "$PLOTS_OUT"; dlh_cleanup' EXIT
	local out=$PLOTS_OUT f
	for f in $PLOTS; do
		cp "$MNT/jobs/1/plots/$f" "$out/$f" || die "cp plots/$f"
	done
	cp "$MNT/jobs/1/report.html" "$out/report.html" || die "cp report.html"

	svg_check "$out/loss.svg" "job 1 (plots): loss" step loss "train loss" "train loss (smoothed)" "test loss"
	svg_check "$out/accuracy.svg" "job 1 (plots): accuracy" step accuracy "test accuracy" \
		"train batch accuracy (smoothed)"
	svg_check "$out/throughput.svg" "job 1 (plots): throughput" step "samples per second" samples/s
	svg_check "$out/progress.svg" "job 1 (plots): progress" "time since start (s)" step "actual steps" \
		predicted "predicted finish"
	# a plot read through the mount is the same each time (a snapshot of a finished job)
	cmp -s "$out/loss.svg" "$MNT/jobs/1/plots/loss.svg" || die "loss.svg changed between reads"
	grep -q '<title>job 1 (plots): report</title>' "$out/report.html" || die "report.html: $(head -5 "$out/report.html")"
	expect_eq "$(grep -c '<svg xmlns=' "$out/report.html")" 4 "plots inline in report.html"
	grep -q 'status: <b>succeeded</b>' "$out/report.html" || die "report.html has no status"
	grep -q 'class="progress">succeeded: epoch 3/3' "$out/report.html" || die "report.html has no progress"
	local h
	for h in spec plan estimate result metrics; do
		grep -q "<h2>$h</h2>" "$out/report.html" || die "report.html has no $h"
	done
	grep -q '^name = plots$' "$out/report.html" || die "report.html does not show the spec"
	grep -q '^test_accuracy=' "$out/report.html" || die "report.html does not show the result"

	command -v chromium >/dev/null || skip "no chromium (make deps installs it): the SVG checks passed"
	# the check can fail: a page without plots shows none of their colours
	echo '<!DOCTYPE html><title>blank</title>' > "$out/blank.html"
	shot "file://$out/blank.html" "$out/blank.png" 1200 1600
	colors_shown "$out/blank.png" > "$out/blank.txt"
	awk -v min="$PLOT_PIXELS_MIN" '$2 >= min { bad = 1 } END { exit bad }' "$out/blank.txt" ||
		die "a blank page shows plot colours: $(cat "$out/blank.txt")"
	shot "file://$out/report.html" "$out/report.png" 1200 1600
	local ink
	ink=$(python3 "$DLH_ROOT/tests/helpers/pngcolors.py" "$out/report.png" | awk '$1 == "ink" { print $2 }')
	[ "$ink" -gt 20000 ] || die "report.html's screenshot is blank ($ink pixels not white)"
	colors_shown "$out/report.png" > "$out/report.txt"
	echo "measured: report.html screenshot: $ink pixels of ink; series pixels: $(tr '\n' ' ' < "$out/report.txt")"
	awk -v min="$PLOT_PIXELS_MIN" '$2 < min { print "not shown: " $1 " (" $2 " pixels)"; bad = 1 } END { exit bad }' \
		"$out/report.txt" || die "report.html's screenshot lacks curves"
	# an SVG opened alone
	shot "file://$out/loss.svg" "$out/loss.png" 660 380
	colors_shown "$out/loss.png" | awk -v min="$PLOT_PIXELS_MIN" '
		$1 ~ /loss/ && $2 < min { print "loss.svg alone: not shown: " $1; bad = 1 } END { exit bad }' ||
		die "loss.svg's screenshot lacks its curves"
	dlh_umount
}

# A running job's plots are drawn from the rows appended since they were
# last drawn (fs/report.c keeps the series); drawn that way, stage by stage
# and with a row cut in two between stages, they end byte for byte as a
# fresh mount draws them from the whole file.
test_a_running_jobs_plots_drawn_as_rows_come_end_as_a_fresh_mount_draws_them() {
	dlh_mount
	local prog=$STATE/stages.sh stage f
	cat > "$prog" <<'PROG'
#!/bin/sh
# a user's program: 4 stages of 150 steps (an eval row every 50), each once
# its pace file (argument 1) has that many lines; a stage ends inside a row,
# which the next one finishes
csv=$DLH_METRICS_CSV
[ -s "$csv" ] || echo kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s > "$csv"
s=0
for stage in 1 2 3 4; do
	until [ "$(wc -l < "$1")" -ge "$stage" ]; do sleep 0.05; done
	[ "$s" = 0 ] || printf '0.%d,0.1,100\n' "$((s % 7))" >> "$csv"
	end=$((stage * 150))
	while [ "$s" -lt "$end" ]; do
		s=$((s + 1))
		if [ "$s" = "$end" ] && [ "$stage" != 4 ]; then
			printf 'train,%d,1,%d.5,%d.%d,' "$s" "$s" "$((3 - s / 200))" "$((s % 10))" >> "$csv"
			break
		fi
		echo "train,$s,1,$s.5,$((3 - s / 200)).$((s % 10)),0.$((s % 9)),0.1,$((100 + s % 13))" >> "$csv"
		[ $((s % 50)) != 0 ] || echo "eval,$s,1,$s.5,$((3 - s / 200)).4,0.$((s / 100)),," >> "$csv"
	done
done
PROG
	chmod 755 "$prog"
	: > "$STATE/pace"
	printf '[job]\nname = stages\ncommand = %s %s\nsteps = 600\n[resources]\nranks = 1\n' \
		"$prog" "$STATE/pace" > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 status_is 1 running || die "job 1 did not start: $(cat "$MNT/jobs/1/progress")"
	PLOTS_OUT=$(mktemp -d /tmp/dlh-plots.XXXXXX)
	trap 'rm -rf "$PLOTS_OUT"; dlh_cleanup' EXIT
	for stage in 1 2 3; do
		echo "$stage" >> "$STATE/pace"
		wait_for 30 eval '[ "$(csv_rows 1 train)" -ge $((stage * 150)) ]' ||
			die "stage $stage not written: $(csv_rows 1 train) train rows"
		for f in $PLOTS; do   # drawn now: the next stage's rows are appended to these
			cat "$MNT/jobs/1/plots/$f" > "$PLOTS_OUT/$stage-$f" || die "cat plots/$f at stage $stage"
		done
	done
	grep -q "<text[^>]*>step</text>" "$PLOTS_OUT/1-loss.svg" || die "stage 1's loss.svg: $(head -c 300 "$PLOTS_OUT/1-loss.svg")"
	cmp -s "$PLOTS_OUT/1-loss.svg" "$PLOTS_OUT/3-loss.svg" && die "loss.svg did not change from stage 1 to 3"
	echo 4 >> "$STATE/pace"
	wait_for 30 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "the staged command ($(tail -3 "$MNT/jobs/1/log"))"
	expect_eq "$(csv_rows 1 train) $(csv_rows 1 eval)" "600 9" "rows written (no eval row after a cut one)"
	for f in $PLOTS; do
		cat "$MNT/jobs/1/plots/$f" > "$PLOTS_OUT/running-$f" || die "cat plots/$f"
	done
	dlh_umount
	dlh_mount "$STATE"   # a daemon that has drawn nothing yet: the whole file
	for f in $PLOTS; do
		cmp "$PLOTS_OUT/running-$f" "$MNT/jobs/1/plots/$f" ||
			die "$f drawn as rows came differs from $f drawn anew: $(diff "$PLOTS_OUT/running-$f" "$MNT/jobs/1/plots/$f" | head -6)"
	done
	echo "measured: 600 train and 9 eval rows in 4 stages; the 4 plots drawn as they came equal those of a fresh mount"
	dlh_umount
}

# before its first step a job's plots say so, and still parse
test_a_queued_jobs_plots_say_no_data_yet() {
	command -v python3 >/dev/null || skip "no python3 (make deps installs it)"
	DLH_OPTS="-o cpus=2" dlh_mount
	slice_spec first 50 > "$STATE/a.ini"
	slice_spec second 1 > "$STATE/b.ini"
	cp "$STATE/a.ini" "$MNT/jobs/new" || die "submit a"
	cp "$STATE/b.ini" "$MNT/jobs/new" || die "submit b"
	expect_eq "$(cat "$MNT/jobs/2/status")" queued "job 2 waits for job 1's cpus"
	local f
	for f in $PLOTS; do
		grep -q '>no data yet<' "$MNT/jobs/2/plots/$f" || die "$f of a queued job: $(head -c 600 "$MNT/jobs/2/plots/$f")"
		python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$MNT/jobs/2/plots/$f" ||
			die "$f of a queued job is not XML"
	done
	grep -q 'status: <b>queued</b>' "$MNT/jobs/2/report.html" || die "report.html of a queued job"
	echo cancel > "$MNT/jobs/2/ctl"
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 30 job_terminal 1 || die "job 1 did not end"
	dlh_umount
}
