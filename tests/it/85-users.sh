# 85-users.sh - a mount shared by several real users (-o allow_other): what
# each of them sees of the others (users made by the test, removed after)

# world_file TEXT: a file every user may read, holding TEXT; prints its path
world_file() {
	local d f
	d=$(mktemp -d /tmp/dlh-users.XXXXXX)
	chmod 755 "$d"
	f="$d/spec.ini"
	printf '%b' "$1" > "$f"
	chmod 644 "$f"
	echo "$f"
}

test_jobs_errors_shows_each_user_only_their_own_rejections() {
	local a b fa fb fr
	dlh_user a
	dlh_user b
	DLH_OPTS="-o allow_other" dlh_mount
	fa=$(world_file '[train]\nepochs = from_a\n')
	fb=$(world_file '[train]\nepochs = from_b\n')
	fr=$(world_file '[train]\nepochs = from_root\n')
	expect_errno "Invalid argument" as "$a" cp "$fa" "$MNT/jobs/new"
	expect_errno "Invalid argument" as "$b" cp "$fb" "$MNT/jobs/new"
	expect_errno "Invalid argument" cp "$fr" "$MNT/jobs/new"
	local seen_a seen_b seen_root
	seen_a=$(as "$a" cat "$MNT/jobs/errors") || die "$a cannot read jobs/errors"
	seen_b=$(as "$b" cat "$MNT/jobs/errors") || die "$b cannot read jobs/errors"
	seen_root=$(cat "$MNT/jobs/errors")
	case $seen_a in *from_a*) ;; *) die "$a does not see its rejection: $seen_a" ;; esac
	case $seen_a in *from_b*|*from_root*) die "$a sees others' rejections: $seen_a" ;; esac
	case $seen_b in *from_b*) ;; *) die "$b does not see its rejection: $seen_b" ;; esac
	case $seen_b in *from_a*|*from_root*) die "$b sees others' rejections: $seen_b" ;; esac
	for w in from_a from_b from_root; do
		case $seen_root in *"$w"*) ;; *) die "root does not see $w: $seen_root" ;; esac
	done
	# the size a user's stat shows is that of their own view (tail -f follows it)
	expect_eq "$(as "$a" stat -c %s "$MNT/jobs/errors")" "$(as "$a" cat "$MNT/jobs/errors" | wc -c)" "size of $a's jobs/errors"
	rm -rf "$(dirname "$fa")" "$(dirname "$fb")" "$(dirname "$fr")"
	dlh_umount
}

# what a job's owner can put in its directory (links, FIFOs) is never served
# or written through by the daemon, which runs as root
test_links_and_fifos_in_a_job_dir_are_not_served() {
	dlh_mount
	printf '[job]\ncommand = /bin/true\n[resources]\nranks = 1\n' > "$STATE/c.ini"
	cp "$STATE/c.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/status")"
	local jd="$STATE/jobs/1" secret="$STATE/secret"
	echo "root only" > "$secret"
	chmod 600 "$secret"
	ln -s "$secret" "$jd/checkpoints/leak"
	mkfifo "$jd/checkpoints/pipe"
	echo "fine" > "$jd/checkpoints/real.ckpt"
	expect_eq "$(ls "$MNT/jobs/1/checkpoints" | tr '\n' ' ')" "real.ckpt " "ls checkpoints"
	expect_errno "No such file" cat "$MNT/jobs/1/checkpoints/leak"
	expect_errno "No such file" cat "$MNT/jobs/1/checkpoints/pipe"
	expect_eq "$(cat "$MNT/jobs/1/checkpoints/real.ckpt")" fine "a plain checkpoint"
	# metrics.csv and lr_finder made links: not served, no hang
	rm -f "$jd/metrics.csv"
	ln -s "$secret" "$jd/metrics.csv"
	local got p
	got=$(timeout 5 cat "$MNT/jobs/1/metrics.csv" 2>&1)
	case $got in *"root only"*) die "metrics.csv served the link's target" ;; esac
	got=$(timeout 5 cat "$MNT/jobs/1/metrics" 2>&1) || die "metrics: $got"
	case $got in *"root only"*) die "metrics rendered the link's target" ;; esac
	for p in plots/loss.svg report.html; do
		got=$(timeout 5 cat "$MNT/jobs/1/$p" 2>&1) || die "$p: $got"
		case $got in *"root only"*) die "$p rendered the link's target" ;; esac
	done
	# the checkpoints directory itself made a link to the secret's directory
	mv "$jd/checkpoints" "$jd/checkpoints.old"
	ln -s "$STATE" "$jd/checkpoints"
	expect_eq "$(ls "$MNT/jobs/1/checkpoints" | tr '\n' ' ')" "" "ls of a linked checkpoints"
	expect_errno "No such file" cat "$MNT/jobs/1/checkpoints/secret"
	# the log made a link: the daemon's next line does not go through it
	rm -f "$jd/log"
	ln -s "$secret" "$jd/log"
	echo cancel > "$MNT/jobs/1/ctl" 2>/dev/null
	expect_eq "$(cat "$secret")" "root only" "the secret after a logged ctl verb"
	dlh_umount
}

# A job's owner may put anything in its directory, run.info included: a
# ctl verb that looks at it (checkpoint asks whether the trainer is up)
# looks at the link, never through it. Followed, a link into the mount
# itself would have the daemon wait on itself.
test_a_link_put_for_run_info_never_stalls_ctl() {
	dlh_mount
	slice_spec linked 200 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 status_is 1 running || die "job 1 did not start: $(cat "$MNT/jobs/1/progress")"
	wait_for 60 test -s "$STATE/jobs/1/run.info" || die "no run.info: $(tail -3 "$MNT/jobs/1/log")"
	ln -sfn "$MNT/jobs/nope" "$STATE/jobs/1/run.info"
	# in the background: before the fix it never returned, and nothing but
	# aborting the connection ended the daemon
	(echo checkpoint > "$MNT/jobs/1/ctl") > "$STATE/ctl.out" 2>&1 &
	local writer=$! got
	if ! wait_for 10 eval '! kill -0 $writer 2>/dev/null'; then
		dlh_abort
		die "echo checkpoint > ctl did not return within 10 s"
	fi
	wait "$writer" && die "checkpoint beside a linked run.info was taken"
	got=$(cat "$STATE/ctl.out")
	case $got in *"Device or resource busy"*) ;; *) die "checkpoint beside a linked run.info: $got" ;; esac
	grep -q 'ctl: "checkpoint": job 1 is starting' "$MNT/jobs/1/log" || die "log: $(tail -2 "$MNT/jobs/1/log")"
	got=$(timeout 5 cat "$MNT/jobs/1/status") || die "status did not answer within 5 s"
	expect_eq "$got" running "status"
	echo cancel > "$MNT/jobs/1/ctl" || die "cancel refused"
	wait_for 30 job_terminal 1 || die "job 1 did not end: $(cat "$MNT/jobs/1/status")"
	dlh_umount
}

# dlh_wait_ok ID: waits for job ID to end and expects it succeeded
dlh_wait_ok() {
	wait_for 120 job_terminal "$1" || die "job $1 did not end: $(cat "$MNT/jobs/$1/progress")"
	expect_eq "$(cat "$MNT/jobs/$1/status")" succeeded "job $1 ($(tail -3 "$MNT/jobs/$1/log"))"
}

test_a_users_jobs_run_as_that_user() {
	local a ua f
	dlh_user a
	ua=$(id -u "$a")
	DLH_OPTS="-o allow_other" dlh_mount
	chmod 711 "$STATE"   # its runs reach their job directories
	# a user's own command, under mpirun
	f=$(world_file '[job]\ncommand = /usr/bin/id -u\n[resources]\nranks = 1\n')
	as "$a" cp "$f" "$MNT/jobs/new" || die "$a's submission: $(tail -2 "$MNT/jobs/errors")"
	dlh_wait_ok 1
	grep -qx "\[rank 0\] $ua" "$STATE/jobs/1/log" || die "the command did not run as uid $ua: $(tail -5 "$STATE/jobs/1/log")"
	grep -q "the run runs as its owner: uid $ua ($a)" "$MNT/jobs/1/log" || die "log: $(grep dlhfs: "$MNT/jobs/1/log")"
	# the built-in trainer: its files are the user's, the daemon's stay root's
	slice_spec owned 1 > "$(dirname "$f")/t.ini"
	chmod 644 "$(dirname "$f")/t.ini"
	as "$a" cp "$(dirname "$f")/t.ini" "$MNT/jobs/new" || die "$a's trainer job: $(tail -2 "$MNT/jobs/errors")"
	dlh_wait_ok 2
	expect_eq "$(stat -c %U "$STATE/jobs/2/checkpoints/final.ckpt")" "$a" "owner of the final checkpoint"
	expect_eq "$(stat -c %U "$STATE/jobs/2/metrics.csv")" "$a" "owner of metrics.csv"
	expect_eq "$(stat -c %U "$STATE/jobs/2/job")" root "owner of the job record"
	as "$a" rm -f "$STATE/jobs/2/job" 2>/dev/null
	[ -f "$STATE/jobs/2/job" ] || die "$a removed the daemon's record of its job"
	# root's job still runs as root
	f=$(world_file '[job]\ncommand = /usr/bin/id -u\n[resources]\nranks = 1\n')
	cp "$f" "$MNT/jobs/new" || die "root's submission"
	dlh_wait_ok 3
	grep -qx "\[rank 0\] 0" "$STATE/jobs/3/log" || die "root's command: $(tail -3 "$STATE/jobs/3/log")"
	# the process table: the run's shepherd, mpirun below it and every rank
	# below that are the user's
	slice_spec long 5000 > "$(dirname "$f")/long.ini"
	chmod 644 "$(dirname "$f")/long.ini"
	as "$a" cp "$(dirname "$f")/long.ini" "$MNT/jobs/new" || die "$a's long job: $(tail -2 "$MNT/jobs/errors")"
	wait_for 30 ranks_are 4 2 || die "job 4 has no 2 ranks: $(cat "$MNT/jobs/4/progress")"
	local launcher procs r
	launcher=$(sed -n 's/^pid=//p' "$STATE/jobs/4/run.handle")
	expect_eq "$(ps -o comm= -p "$launcher")" dlh-shepherd "what holds the run"
	procs=$(tree_procs "$launcher")
	echo "$procs" | while read -r p u; do ps -o comm= -p "$p"; done | grep -qx mpirun ||
		die "no mpirun below the shepherd: $procs"
	for r in $(rank_pids 4); do
		echo "$procs" | grep -q "^$r " || die "rank $r is not below mpirun $launcher: $procs"
	done
	[ "$(echo "$procs" | awk '{print $2}' | sort -u)" = "$ua" ] ||
		die "the shepherd ($launcher) and the processes below it are not all uid $ua: $procs"
	[ "$(echo "$procs" | wc -l)" -ge 4 ] || die "shepherd, mpirun and 2 ranks are not all there: $procs"
	echo cancel > "$MNT/jobs/4/ctl"
	wait_for 30 job_terminal 4 || die "job 4 did not end"
	dlh_umount
}

# a job's files are its owner's (and root's) to read unless it shares them;
# status and progress stay everyone's
test_a_jobs_files_are_private_unless_shared() {
	local a b f
	dlh_user a
	dlh_user b
	DLH_OPTS="-o allow_other" dlh_mount
	chmod 711 "$STATE"
	f=$(world_file '[job]\ncommand = /bin/true\n[resources]\nranks = 1\n')
	as "$a" cp "$f" "$MNT/jobs/new" || die "$a's submission: $(tail -2 "$MNT/jobs/errors")"
	dlh_wait_ok 1
	local p
	for p in spec plan log metrics metrics.csv result report.html plots/loss.svg plots/progress.svg; do
		as "$a" cat "$MNT/jobs/1/$p" > /dev/null || die "$a cannot read its own $p"
		expect_errno "Permission denied" as "$b" cat "$MNT/jobs/1/$p"
	done
	expect_errno "Permission denied" as "$b" ls "$MNT/jobs/1/checkpoints"
	expect_errno "Permission denied" as "$b" ls "$MNT/jobs/1/plots"
	as "$a" ls "$MNT/jobs/1/checkpoints" > /dev/null || die "$a cannot list its checkpoints"
	cat "$MNT/jobs/1/log" > /dev/null || die "root cannot read the log"
	expect_eq "$(as "$b" cat "$MNT/jobs/1/status")" succeeded "status, read by $b"
	as "$b" cat "$MNT/jobs/1/progress" > /dev/null || die "$b cannot read progress"
	expect_eq "$(stat -c %A "$MNT/jobs/1/log")" "-r--------" "mode of a private log"
	# on disk as through the mount: the state dir keeps the job from b
	expect_errno "Permission denied" as "$b" cat "$STATE/jobs/1/log"
	expect_errno "Permission denied" as "$b" ls "$STATE/jobs/1/checkpoints"
	as "$a" cat "$STATE/jobs/1/spec.ini" > /dev/null || die "$a cannot read its own spec on disk"
	expect_errno "Operation not permitted" as "$b" bash -c "echo cancel > $MNT/jobs/1/ctl"
	# shared with everyone
	f=$(world_file '[job]\ncommand = /bin/true\nreadable_by = all\n[resources]\nranks = 1\n')
	as "$a" cp "$f" "$MNT/jobs/new" || die "$a's shared job"
	dlh_wait_ok 2
	as "$b" cat "$MNT/jobs/2/log" > /dev/null || die "$b cannot read a job shared with all"
	as "$b" cat "$STATE/jobs/2/log" > /dev/null || die "$b cannot read a shared job's log on disk"
	expect_eq "$(stat -c %A "$MNT/jobs/2/log")" "-r--r--r--" "mode of a shared log"
	dlh_umount
}

# [data] is checked with the submitter's rights, not the daemon's
test_data_is_checked_with_the_submitters_rights() {
	local a b d fm=${DLH_FMNIST:-/usr/share/datasets/fashion-mnist}
	dlh_user a
	dlh_user b
	DLH_OPTS="-o allow_other" dlh_mount
	d=$(mktemp -d /tmp/dlh-users.XXXXXX)
	chmod 755 "$d"
	cp "$fm/train-images-idx3-ubyte.gz" "$d/mine.gz"
	chown "$a" "$d/mine.gz"
	chmod 600 "$d/mine.gz"
	printf '[job]\ndry_run = true\n[data]\ntrain = %s\n' "$d/mine.gz" > "$d/s.ini"
	chmod 644 "$d/s.ini"
	expect_errno "Invalid argument" as "$b" cp "$d/s.ini" "$MNT/jobs/new"
	as "$b" cat "$MNT/jobs/errors" | grep -qF "[data] train: cannot read \"$d/mine.gz\": Permission denied" ||
		die "$b's errors: $(as "$b" cat "$MNT/jobs/errors")"
	as "$a" cp "$d/s.ini" "$MNT/jobs/new" || die "$a's own file: $(as "$a" cat "$MNT/jobs/errors")"
	cp "$d/s.ini" "$MNT/jobs/new" || die "root: $(tail -2 "$MNT/jobs/errors")"
	rm -rf "$d"
	dlh_umount
}

# an ordinary user mounts dlhfs on a directory of their own, with no root
# involved, and trains: everything runs as that user
test_an_ordinary_user_mounts_and_trains_without_root() {
	local a d
	dlh_user a
	# libfuse opens /dev/fuse itself: Debian makes it 0666, some containers 0600
	if [ "$(stat -c %a /dev/fuse)" != 666 ]; then
		DLH_FUSE_MODE=$(stat -c %a /dev/fuse)
		chmod 666 /dev/fuse
	fi
	d=$(mktemp -d /tmp/dlh-own.XXXXXX)
	chmod 755 "$d"
	chown "$a" "$d"
	as "$a" mkdir "$d/mnt" "$d/state"
	OWN_MNT=$d/mnt
	as "$a" "$DLH_BIN/dlhfs" -f -o "state=$d/state" "$d/mnt" 2>"$d/err" &
	wait_for 10 as "$a" test -f "$d/mnt/pool/summary" || die "$a could not mount: $(cat "$d/err")"
	printf '[job]\nname = mine\n[data]\ntrain_limit = 2000\ntest_limit = 500\n[model]\nlayers = 16\n' > "$d/s.ini"
	printf '[train]\nepochs = 1\n[resources]\nranks = 1\n' >> "$d/s.ini"
	chmod 644 "$d/s.ini"
	as "$a" cp "$d/s.ini" "$d/mnt/jobs/new" || die "submission: $(as "$a" cat "$d/mnt/jobs/errors")"
	wait_for 60 as "$a" grep -qxE 'succeeded|failed|cancelled' "$d/mnt/jobs/1/status" ||
		die "the job did not end: $(as "$a" cat "$d/mnt/jobs/1/progress")"
	expect_eq "$(as "$a" cat "$d/mnt/jobs/1/status")" succeeded "status ($(as "$a" tail -3 "$d/mnt/jobs/1/log"))"
	expect_eq "$(stat -c %U "$d/state/jobs/1/checkpoints/final.ckpt")" "$a" "owner of the checkpoint"
	expect_eq "$(stat -c %U "$d/state/jobs/1/job")" "$a" "owner of the job record"
	as "$a" fusermount3 -u "$d/mnt" || die "$a could not unmount"
	OWN_MNT=
	wait
	[ -s "$d/err" ] && die "dlhfs wrote to stderr: $(head -3 "$d/err")"
	rm -rf "$d"
}

# a [data] file on a filesystem that never answers (a dead NFS server) holds
# a FUSE thread no longer than -o data_timeout; its submitter's next specs
# are refused at once until it answers, and everyone else goes on
test_data_on_a_hung_filesystem_holds_nothing() {
	local a b d t0 t1 i worst=0 pids=()
	dlh_user a
	dlh_user b
	DLH_OPTS="-o allow_other -o data_timeout=1" dlh_mount
	d=$(mktemp -d /tmp/dlh-users.XXXXXX)
	chmod 755 "$d"
	stall_mount "$d/hung"
	printf '[job]\ndry_run = true\n[data]\ntrain = %s\n' "$d/hung/slow" > "$d/hung.ini"
	printf '[job]\ndry_run = true\n[data]\ntrain_limit = 512\n' > "$d/good.ini"
	chmod 644 "$d/hung.ini" "$d/good.ini"
	t0=$(date +%s%N)
	expect_errno "Invalid argument" as "$a" cp "$d/hung.ini" "$MNT/jobs/new"
	t1=$(date +%s%N)
	[ $(((t1 - t0) / 1000000)) -lt 3000 ] || die "the refusal took $(((t1 - t0) / 1000000)) ms"
	as "$a" cat "$MNT/jobs/errors" | grep -qF "[data]: the data files did not answer within 1.0 s" ||
		die "$a's errors: $(as "$a" cat "$MNT/jobs/errors")"
	# a's next specs are refused at once while that read is stuck, 20 at a
	# time, and b's reads and submissions go on meanwhile
	for i in $(seq 20); do
		as "$a" timeout 10 cp "$d/hung.ini" "$MNT/jobs/new" 2>/dev/null &
		pids+=($!)
	done
	worst=$(as "$b" bash -c "$(declare -f slowest_read); slowest_read \"\$1\" 100" - "$MNT/pool/summary") ||
		die "$b's reads of pool/summary: $worst"
	refused_beside "$worst" "on a hung filesystem (reads by $b)" "${pids[@]}"
	as "$a" cat "$MNT/jobs/errors" | grep -qF "is still waiting for its data" ||
		die "$a's errors: $(as "$a" cat "$MNT/jobs/errors" | tail -3)"
	as "$b" cp "$d/good.ini" "$MNT/jobs/new" || die "$b's spec: $(as "$b" cat "$MNT/jobs/errors")"
	# the filesystem goes away: the stuck read fails, and a may submit again
	stall_kill
	wait_for 10 as "$a" cp "$d/good.ini" "$MNT/jobs/new" 2>/dev/null ||
		die "$a is still refused: $(as "$a" cat "$MNT/jobs/errors" | tail -2)"
	rm -rf "$d"
	dlh_umount
}

# jobs/index: the job history, every job a line for every reader; the
# accuracy only for those who may read the job's results
test_jobs_index_lists_every_job_and_keeps_results_private() {
	local b
	dlh_user b
	DLH_OPTS="-o allow_other" dlh_mount
	slice_spec idx 1 > "$STATE/idx.ini"
	cp "$STATE/idx.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	dlh_wait_ok 1
	local iso='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z'
	expect_eq "$(head -1 "$MNT/jobs/index")" "id owner status submitted started ended cpu_s peak_mem energy_j accuracy name" "header"
	# as sacct: start, CPU seconds, peak memory and energy (usage, everyone's), then the accuracy (the readers')
	local use="$iso $iso $iso [0-9]+\.[0-9] [0-9.]+[KMG] [0-9]+"
	grep -Eqx "1 root succeeded $use 0\.[0-9]{4} idx" "$MNT/jobs/index" ||
		die "root's index: $(cat "$MNT/jobs/index")"
	as "$b" cat "$MNT/jobs/index" | grep -Eqx "1 root succeeded $use - idx" ||
		die "$b's index: $(as "$b" cat "$MNT/jobs/index")"
	# the CPU time is what the ranks used: some, and no more than 2 ranks on 2 cores can
	local cpu wall
	cpu=$(awk '$1 == 1 { print $7 }' "$MNT/jobs/index")
	wall=$(sed -n 's/^wall_time_s=//p' "$MNT/jobs/1/result")
	awk -v c="$cpu" -v w="$wall" 'BEGIN { exit !(c > 0 && c <= 2.5 * w + 2) }' ||
		die "cpu_s $cpu for a wall time of $wall s with 2 ranks"
	echo "measured: job 1: cpu_s $cpu, wall $wall s, peak_mem $(awk '$1 == 1 { print $8 }' "$MNT/jobs/index")"
	expect_eq "$(stat -c %s "$MNT/jobs/index")" "$(wc -c < "$MNT/jobs/index")" "size of jobs/index"
	dlh_umount
}
