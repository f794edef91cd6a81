# tests/lib.sh - helpers for the mount tests: mount, wait for conditions, assert
#
# A test file defines functions named test_*; tests/run sources this file and
# the test file, then runs each test_* in a subshell. A test passes when its
# subshell exits 0; `die` fails it with a message; `skip` skips it.

DLH_BUILD=${DLH_BUILD:-build}
DLH_BIN=$(cd "$DLH_BUILD" && pwd)
DLH_ROOT=$(pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

die() { echo "$*" >&2; exit 1; }
skip() { echo "SKIPPED: $*" >&2; exit 77; }

# wait_for SECONDS CMD...: runs CMD every 50 ms until it succeeds; 1 on timeout.
wait_for() {
	local limit=$1; shift
	local end=$((SECONDS + limit))
	until "$@" 2>/dev/null; do
		[ "$SECONDS" -ge "$end" ] && return 1
		sleep 0.05
	done
}

# holds_for SECONDS CMD...: CMD stays true for SECONDS, looked at every
# 0.05 s; returns 1 as soon as it is not (what must not happen for a while:
# a hang timer that must not fire)
holds_for() {
	local limit=$1; shift
	local end=$((SECONDS + limit))
	while [ "$SECONDS" -lt "$end" ]; do
		"$@" 2>/dev/null || return 1
		sleep 0.05
	done
}

# dlh_mount [STATE]: mounts dlhfs in the foreground on a fresh temp dir, with
# the options in DLH_OPTS (e.g. "-o cpus=2"). Sets MNT, STATE, DLH_PID. The
# trap unmounts whatever happens.
dlh_mount() {
	MNT=$(mktemp -d /tmp/dlh-mnt.XXXXXX)
	STATE=${1:-$(mktemp -d /tmp/dlh-state.XXXXXX)}
	DLH_STDERR=$(mktemp /tmp/dlh-stderr.XXXXXX)
	# the suite's one calibration (tests/run), so mounts do not each measure
	if [ -n "${DLH_CALIBRATION:-}" ] && [ ! -e "$STATE/calibration" ]; then
		cp "$DLH_CALIBRATION" "$STATE/calibration"
	fi
	# shellcheck disable=SC2086
	"$DLH_BIN/dlhfs" -f -o "state=$STATE" ${DLH_OPTS:-} "$MNT" 2>"$DLH_STDERR" &
	DLH_PID=$!
	trap dlh_cleanup EXIT
	wait_for 10 mountpoint -q "$MNT" || die "dlhfs did not mount on $MNT: $(cat "$DLH_STDERR")"
	# the FUSE connection's number (fusectl names it so), for dlh_abort
	DLH_CONN=$(mountpoint -d "$MNT" | awk -F: '$1 == 0 { print $2 }')
}

# dlh_abort: aborts the mount's FUSE connection (fusectl), the one way to
# end a daemon whose threads wait on requests to itself (not even SIGKILL
# ends it then); requests in flight fail with ENOTCONN
dlh_abort() {
	[ -n "${DLH_CONN:-}" ] || return 0
	[ -d /sys/fs/fuse/connections/"$DLH_CONN" ] ||
		mount -t fusectl none /sys/fs/fuse/connections 2>/dev/null
	echo 1 > /sys/fs/fuse/connections/"$DLH_CONN"/abort 2>/dev/null
	kill -9 "$DLH_PID" 2>/dev/null
	return 0
}

# dlh_umount: unmounts, waits for the daemon, fails on unexpected stderr.
dlh_umount() {
	fusermount3 -u "$MNT" || die "fusermount3 -u $MNT failed"
	wait "$DLH_PID" || die "dlhfs exited with status $?"
	if [ -s "$DLH_STDERR" ]; then
		die "dlhfs wrote to stderr: $(head -5 "$DLH_STDERR")"
	fi
	rmdir "$MNT"
	rm -f "$DLH_STDERR"
	MNT=
}

# dlh_user VAR: creates a real user (no home, no login) for this test and
# sets VAR to its name; dlh_cleanup removes it. Skips without useradd.
DLH_USERS=()
dlh_user() {
	command -v useradd >/dev/null || skip "no useradd: users cannot be made here"
	[ "$(id -u)" = 0 ] || skip "making users needs root"
	# a name no user or group has (a group outlives its user while another
	# user is in it, and a killed test leaves both behind)
	local name="dlht$$x${#DLH_USERS[@]}" n=0
	while getent passwd "$name" >/dev/null || getent group "$name" >/dev/null; do
		n=$((n + 1)); name="dlht$$x${#DLH_USERS[@]}y$n"
	done
	useradd --no-create-home --shell /usr/sbin/nologin "$name" || die "useradd $name failed"
	DLH_USERS+=("$name")
	trap dlh_cleanup EXIT
	printf -v "$1" '%s' "$name"
}

# as USER CMD...: runs CMD as USER (runuser: no password, no PAM session)
as() { local u=$1; shift; runuser -u "$u" -- "$@"; }

# stall_mount DIR: mounts at DIR (made here) a filesystem whose one file,
# DIR/slow, never answers a read (tests/helpers/stallfs: a dead NFS server);
# stall_kill ends it, and its blocked reads fail; dlh_cleanup does too
stall_mount() {
	mkdir -p "$1"
	"$DLH_BIN/tests/stallfs" -f -o allow_other "$1" &
	STALL_PID=$! STALL_MNT=$1
	trap dlh_cleanup EXIT
	wait_for 10 test -f "$1/slow" || die "stallfs did not mount on $1"
}
stall_kill() {
	[ -n "${STALL_PID:-}" ] && kill -KILL "$STALL_PID" 2>/dev/null && wait "$STALL_PID" 2>/dev/null
	[ -n "${STALL_MNT:-}" ] && fusermount3 -uz "$STALL_MNT" 2>/dev/null
	STALL_PID= STALL_MNT=
	return 0
}

# slowest_read FILE N: reads FILE N times, prints the slowest read in ns;
# fails (naming the read) when one fails or takes over 5 s. Self-contained,
# so that another user can run it: as USER bash -c "$(declare -f slowest_read); ..."
slowest_read() {
	local i t0 t1 worst=0
	for i in $(seq "$2"); do
		t0=$(date +%s%N)
		timeout 5 cat "$1" > /dev/null || { echo "read $i of $1 failed"; return 1; }
		t1=$(date +%s%N)
		[ $((t1 - t0)) -gt "$worst" ] && worst=$((t1 - t0))
	done
	echo "$worst"
}

# refused_beside WORST WHAT PID...: every PID (a background submission) failed
# without hanging, and WORST (ns: the slowest of 100 reads of pool/summary
# meanwhile) is under 100 ms
refused_beside() {
	local worst=$1 what=$2 p
	shift 2
	for p in "$@"; do
		wait "$p" && die "a submission $what was accepted"
		[ $? -eq 124 ] && die "a submission $what hung until timeout"
	done
	echo "measured: slowest of 100 reads of pool/summary beside $# submissions $what: $((worst / 1000000)) ms"
	[ "$worst" -lt 100000000 ] || die "a read of pool/summary took $((worst / 1000000)) ms"
}

# tree_procs PID: "PID UID" of PID and of every process below it, one a line
tree_procs() {
	ps -e -o pid=,ppid=,uid= | awk -v root="$1" '
		{ parent[$1] = $2; uid[$1] = $3 }
		END { for (p in parent) { q = p
			while (q != "" && q != root && q in parent && q != 1) q = parent[q]
			if (q == root) print p, uid[p] } }'
}

# daemon_gone PID: PID has exited (a zombie, not yet waited for, counts)
daemon_gone() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 0
	case $st in Z*) return 0 ;; esac
	return 1
}

dlh_cleanup() {
	stall_kill   # first: a check of the daemon's may be blocked on it
	# readers left running (tail -f) would keep the mount busy
	local p
	for p in $(jobs -p); do
		[ "$p" != "${DLH_PID:-}" ] && kill "$p" 2>/dev/null
	done
	# mounted, as the mount table says (a stat could wait on a stuck daemon,
	# and fails on an aborted one that is still mounted)
	if [ -n "${MNT:-}" ] && awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/self/mounts; then
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null
		wait "$DLH_PID" 2>/dev/null
	fi
	# a daemon still there after its unmount (a test that failed between
	# the two) must not outlive the test, nor hold its nodes' lock
	# (only while it is this shell's job: a reaped pid may be another's now)
	if [ -n "${DLH_PID:-}" ] && jobs -p | grep -qx "$DLH_PID" &&
	   ! wait_for 10 daemon_gone "$DLH_PID"; then
		kill -KILL "$DLH_PID" 2>/dev/null
		wait "$DLH_PID" 2>/dev/null
	fi
	[ -n "${MNT:-}" ] && rmdir "$MNT" 2>/dev/null
	rm -f "${DLH_STDERR:-}"
	# a failed test must not leave ranks behind for the next one
	[ -n "${STATE:-}" ] && pkill -KILL -f -- "--job-dir $STATE/" 2>/dev/null
	[ -n "${STATE:-}" ] && rm -rf "$STATE"
	# a filesystem a test mounted as its state dir (STATE_FS), then its mountpoint
	if [ -n "${STATE_FS:-}" ]; then
		umount "$STATE_FS" 2>/dev/null || umount -l "$STATE_FS" 2>/dev/null
		rmdir "$STATE_FS" 2>/dev/null
		STATE_FS=
	fi
	declare -F nodes_down >/dev/null && nodes_down   # tests/nodes.sh
	declare -F slurm_down >/dev/null && slurm_down   # tests/slurm.sh: after the unmount
	# a mount a test user made (OWN_MNT), and /dev/fuse's mode if the test opened it
	[ -n "${OWN_MNT:-}" ] && { fusermount3 -uz "$OWN_MNT" 2>/dev/null; OWN_MNT=; }
	[ -n "${DLH_FUSE_MODE:-}" ] && { chmod "$DLH_FUSE_MODE" /dev/fuse; DLH_FUSE_MODE=; }
	local u
	for u in "${DLH_USERS[@]}"; do
		pkill -KILL -u "$u" 2>/dev/null
		userdel "$u" 2>/dev/null
	done
	# a user's group that another test user was in outlives the first userdel
	for u in "${DLH_USERS[@]}"; do
		getent group "$u" >/dev/null && groupdel "$u" 2>/dev/null
	done
	DLH_USERS=()
	return 0
}

# expect_eq GOT WANT WHAT
expect_eq() { [ "$1" = "$2" ] || die "$3: got \"$1\", want \"$2\""; }

# expect_errno ERRTEXT CMD...: CMD must fail and print ERRTEXT (strerror text).
expect_errno() {
	local want=$1; shift
	local out
	if out=$("$@" 2>&1); then
		die "expected \"$*\" to fail with \"$want\", it succeeded"
	fi
	case $out in
		*"$want"*) ;;
		*) die "\"$*\": expected \"$want\", got: $out" ;;
	esac
}

# status_is ID WORD
status_is() { [ "$(cat "$MNT/jobs/$1/status")" = "$2" ]; }

# job_terminal ID: status is succeeded, failed, cancelled or planned (a dry run)
job_terminal() {
	case $(cat "$MNT/jobs/$1/status") in succeeded|failed|cancelled|planned) return 0 ;; esac
	return 1
}

# csv_rows ID KIND: rows of that kind in metrics.csv
csv_rows() { grep -c "^$2," "$MNT/jobs/$1/metrics.csv" || true; }

# rank_pids ID: pids of the job's dlh-train processes
rank_pids() {
	local p
	for p in $(pgrep -x dlh-train); do
		tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q -- "--job-dir $STATE/jobs/$1 " && echo "$p"
	done
	return 0
}

# ranks_are ID N: the job has N dlh-train processes
ranks_are() { [ "$(rank_pids "$1" | wc -l)" -eq "$2" ]; }

# no_ranks ID: no dlh-train process of the job is left
no_ranks() { [ -z "$(rank_pids "$1")" ]; }

# slice_spec NAME EPOCHS [EXTRA LINES...]: a spec training on a slice
slice_spec() {
	local name=$1 epochs=$2; shift 2
	printf '[job]\nname = %s\n[data]\ntrain_limit = 4000\ntest_limit = 1000\n' "$name"
	printf '[model]\nlayers = 64\n[train]\nepochs = %s\nbatch_size = 64\nlr = 0.05\ncheckpoint_every = 20\n' "$epochs"
	printf '[resources]\nranks = 2\n'
	for l in "$@"; do printf '%s\n' "$l"; done
}

# torch_python: prints a python3 that imports torch (PATH's, else Debian's)
torch_python() {
	local p
	for p in python3 /usr/bin/python3; do
		p=$(command -v "$p") || continue
		"$p" -c 'import torch' 2>/dev/null && { echo "$p"; return 0; }
	done
	return 1
}

# shared_dir: a directory every user may read (and search), printed
shared_dir() {
	local d
	d=$(mktemp -d /tmp/dlh-shared.XXXXXX)
	chmod 755 "$d"
	echo "$d"
}

# nodes_lock NAME: one test at a time on this machine makes the nodes of
# tests/nodes.sh or tests/slurm.sh (fixed names and addresses): a second
# suite, or a run in a worktree, waits here until the first has removed them.
# A directory, not a held descriptor, so that the daemons a test starts do not
# inherit the lock; one whose owner died is taken over.
nodes_lock() {
	local d=/tmp/dlh-$1.lock i owner
	for i in $(seq 3600); do
		if mkdir "$d" 2>/dev/null; then
			echo "$BASHPID" > "$d/pid"
			NODES_LOCK=$d
			return 0
		fi
		owner=$(cat "$d/pid" 2>/dev/null)
		if [ -n "$owner" ] && ! kill -0 "$owner" 2>/dev/null; then
			rm -rf "$d"
			continue
		fi
		[ "$i" = 1 ] && echo "waiting for $d (held by process ${owner:-?})" >&2
		sleep 0.5
	done
	die "$d held for 30 minutes by process ${owner:-?}"
}

nodes_unlock() {
	[ -n "${NODES_LOCK:-}" ] || return 0
	rm -rf "$NODES_LOCK"
	NODES_LOCK=
}
