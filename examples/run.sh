#!/usr/bin/env bash
# examples/run.sh - mount dlhfs at /dlh (if it is not yet) and train one example,
# printing its progress line as it changes, then its result.
#   examples/run.sh [BUILD_DIR] [SPEC]
# Environment: DLH_MOUNT (default /dlh), DLH_STATE (default /var/lib/dlh).
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SPEC=${2:-examples/fashion-mnist-mlp.ini}
MNT=${DLH_MOUNT:-/dlh}
STATE=${DLH_STATE:-/var/lib/dlh}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

mkdir -p "$MNT"
if ! mountpoint -q "$MNT"; then
	"$BUILD/dlhfs" -o "state=$STATE" "$MNT"
	echo "mounted dlhfs at $MNT (state in $STATE)"
fi

# jobs/new opened read-write: write the spec, read back the id or the error
exec 3<>"$MNT/jobs/new"
cat "$SPEC" >&3
answer=$(cat <&3) || true
exec 3>&-
case $answer in
	''|*[!0-9]*)
		echo "the spec was refused (also in $MNT/jobs/errors):" >&2
		echo "$answer" >&2
		exit 1 ;;
esac
id=$answer
echo "submitted $SPEC as $MNT/jobs/$id"
echo "plan:"
sed 's/^/    /' "$MNT/jobs/$id/plan" 2>/dev/null || true

last=
while :; do
	status=$(cat "$MNT/jobs/$id/status")
	line=$(cat "$MNT/jobs/$id/progress")
	[ "$line" != "$last" ] && echo "$line"
	last=$line
	case $status in succeeded|failed|cancelled) break ;; esac
	sleep 2
done
echo "result ($MNT/jobs/$id/result):"
sed 's/^/    /' "$MNT/jobs/$id/result"
echo "still mounted: look around $MNT/jobs/$id, unmount with: fusermount3 -u $MNT"
[ "$status" = succeeded ]
