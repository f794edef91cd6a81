# tests/slurm.sh - a Slurm cluster on one machine, for the mount tests: one
# munged and slurmctld on this machine, one slurmd per node, each node a
# network namespace (dlhsN) with its own hostname (NodeName dlhsN) and
# address on a bridge this file makes. Everything lives in a temp dir
# (SLURM_DIR: slurm.conf, the munge key, state, spool and log dirs); the
# filesystem is shared. Only addresses inside these namespaces are contacted.
#
#   slurm_up N [CPUS [MEM_MB]]  nodes dlhs1..dlhsN in partition "dlh" (CPUS
#                          cores, 2 by default; MEM_MB memory, 1024), every
#                          daemon started and every node idle; exports
#                          SLURM_CONF (Slurm's commands, and dlhfs, find the
#                          cluster by it)
#   slurm_down             stop every daemon (waiting for each to exit), remove
#                          the nodes and the temp dir (dlh_cleanup calls it)
#   slurm_pool [EXTRA...]  a pool file: backend = slurm, partition = dlh
#   slurm_node_state NODE  the node's state as sinfo says it (idle, alloc, ...)
#   slurm_ctld_stop        stop slurmctld alone (Slurm's commands then fail)
#   slurm_ctld_start       start it again on its state; waits for the nodes idle
#   slurm_said             the daemons' last log lines, for a failure's message
#
# Facts this rests on (Debian 12, slurm-wlm 22.05): `ip netns exec` remounts
# /sys and slurmd cannot load its cgroup plugin there, so each slurmd runs
# under nsenter --net (and unshare --uts for its hostname); one munged serves
# every namespace through its socket file; proctrack/linuxproc leaves nothing
# behind on the host; TmpFS has %n so that the nodes' /tmp dirs do not collide.

SLURM_NET=10.78.0          # the bridge's /24 (tests/nodes.sh uses 10.77.0)
SLURM_BRIDGE=dlhsbr0
SLURM_PORT=16817           # slurmctld; slurmd takes the next (Slurm's own: 6817, 6818)
SLURM_PART=dlh

# slurm_can: skips the test with the reason when the cluster cannot be made here
slurm_can() {
	[ "$(id -u)" = 0 ] || skip "a Slurm test cluster needs root (network namespaces, daemons)"
	command -v ip >/dev/null || skip "no ip (iproute2): nodes cannot be made here"
	local p
	for p in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged /usr/bin/sbatch; do
		[ -x "$p" ] || skip "no $p (slurmctld slurmd slurm-client munge: make deps)"
	done
	ip netns add dlhs-probe 2>/dev/null || skip "network namespaces cannot be made here"
	ip netns del dlhs-probe
}

# slurm_wait_gone PID...: waits up to 10 s for each PID to exit, then kills it
slurm_wait_gone() {
	local p i
	for p in "$@"; do
		for i in $(seq 200); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL "$p" 2>/dev/null
	done
	return 0
}

slurm_conf() {
	local n=$1 cpus=$2 mem=$3 i names
	names=$(seq -s, -f 'dlhs%g' 1 "$n")
	cat <<CONF
ClusterName=dlhtest
SlurmctldHost=$(hostname -s)($SLURM_NET.1)
SlurmctldPort=$SLURM_PORT
SlurmdPort=$((SLURM_PORT + 1))
AuthType=auth/munge
AuthInfo=socket=$SLURM_DIR/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/spool/%n
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.%n.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd.%n.log
TmpFS=$SLURM_DIR/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
KillWait=2
MinJobAge=300
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
SlurmctldDebug=info
SlurmdDebug=info
CONF
	for i in $(seq "$n"); do
		echo "NodeName=dlhs$i NodeAddr=$SLURM_NET.$((10 + i)) CPUs=$cpus RealMemory=$mem State=UNKNOWN"
	done
	echo "PartitionName=$SLURM_PART Nodes=$names Default=YES MaxTime=INFINITE State=UP PriorityTier=1"
	# a partition whose jobs preempt (cancel) those of dlhfs's on the same nodes
	echo "PartitionName=${SLURM_PART}urgent Nodes=$names Default=NO MaxTime=INFINITE State=UP PriorityTier=2"
}

# slurm_idle N: sinfo says N nodes idle (not idle*: a node just resumed)
slurm_idle() {
	[ "$(sinfo -h -p "$SLURM_PART" -N -o '%t' 2>/dev/null | grep -cx idle)" -eq "$1" ]
}

slurm_up() {
	local n=$1 cpus=${2:-2} mem=${3:-1024} i
	slurm_can
	nodes_lock slurm
	SLURM_DIR=$(mktemp -d /tmp/dlh-slurm.XXXXXX)
	SLURM_N=$n
	SLURM_PIDS=()
	trap dlh_cleanup EXIT
	# the jobs' users reach the munge socket and read slurm.conf
	chmod 755 "$SLURM_DIR"
	mkdir -p "$SLURM_DIR/munge" "$SLURM_DIR/state" "$SLURM_DIR/spool" "$SLURM_DIR/tmp"
	chmod 755 "$SLURM_DIR/munge"
	chmod 1777 "$SLURM_DIR/tmp"
	for i in $(seq "$n"); do mkdir -p "$SLURM_DIR/tmp/dlhs$i" && chmod 1777 "$SLURM_DIR/tmp/dlhs$i"; done
	head -c 1024 /dev/urandom > "$SLURM_DIR/munge/munge.key"
	chmod 400 "$SLURM_DIR/munge/munge.key"
	slurm_conf "$n" "$cpus" "$mem" > "$SLURM_DIR/slurm.conf"
	export SLURM_CONF=$SLURM_DIR/slurm.conf
	# Open MPI between the nodes: only the bridge's addresses
	export OMPI_MCA_oob_tcp_if_include="$SLURM_NET.0/24" OMPI_MCA_btl_tcp_if_include="$SLURM_NET.0/24"
	ip link add "$SLURM_BRIDGE" type bridge || die "cannot make bridge $SLURM_BRIDGE"
	ip addr add "$SLURM_NET.1/24" dev "$SLURM_BRIDGE"
	ip link set "$SLURM_BRIDGE" up
	for i in $(seq "$n"); do
		ip netns add "dlhs$i" || die "cannot make namespace dlhs$i"
		ip link add "dlhsv$i" type veth peer name eth0 netns "dlhs$i"
		ip link set "dlhsv$i" master "$SLURM_BRIDGE" up
		ip -n "dlhs$i" addr add "$SLURM_NET.$((10 + i))/24" dev eth0
		ip -n "dlhs$i" link set eth0 up
		ip -n "dlhs$i" link set lo up
	done
	/usr/sbin/munged -F --force --socket="$SLURM_DIR/munge/munge.socket" \
		--key-file="$SLURM_DIR/munge/munge.key" --pid-file="$SLURM_DIR/munge/munged.pid" \
		--log-file="$SLURM_DIR/munge/munged.log" --seed-file="$SLURM_DIR/munge/seed" \
		2>>"$SLURM_DIR/munge/munged.log" &
	SLURM_PIDS+=($!)
	wait_for 10 test -S "$SLURM_DIR/munge/munge.socket" || die "munged did not start: $(slurm_said)"
	/usr/sbin/slurmctld -D -f "$SLURM_CONF" 2>>"$SLURM_DIR/slurmctld.err" &
	SLURM_PIDS+=($!)
	for i in $(seq "$n"); do slurmd_start "$i"; done
	wait_for 30 slurm_idle "$n" || die "the Slurm nodes are not idle: $(sinfo -N 2>&1) $(slurm_said)"
}

# slurmd_start I: node dlhsI's slurmd, in its namespace (SLURM_PIDS[1 + I])
slurmd_start() {
	# nsenter, not `ip netns exec` (see above); exec all the way: $! is slurmd
	nsenter --net="/run/netns/dlhs$1" unshare --uts sh -c \
		'hostname "$1" && exec /usr/sbin/slurmd -D -f "$2" -N "$1"' - "dlhs$1" "$SLURM_CONF" \
		2>>"$SLURM_DIR/slurmd.dlhs$1.err" &
	SLURM_PIDS[$((1 + $1))]=$!
}

# slurm_node_crash I: node dlhsI fails as a machine does: everything on it
# (its slurmd, the steps' slurmstepds, their ranks) ends at once
slurm_node_crash() {
	ip netns pids "dlhs$1" 2>/dev/null | xargs -r kill -9 2>/dev/null
	wait_for 10 eval '[ -z "$(ip netns pids "dlhs$1" 2>/dev/null)" ]' ||
		die "processes left on dlhs$1 after its crash: $(ip netns pids "dlhs$1")"
}

slurm_ctld_stop() {
	kill -TERM "${SLURM_PIDS[1]}" 2>/dev/null
	slurm_wait_gone "${SLURM_PIDS[1]}"
}

slurm_ctld_start() {
	/usr/sbin/slurmctld -D -f "$SLURM_CONF" 2>>"$SLURM_DIR/slurmctld.err" &
	SLURM_PIDS[1]=$!
	wait_for 30 slurm_idle "$SLURM_N" || die "the Slurm nodes are not idle again: $(sinfo -N 2>&1) $(slurm_said)"
}

slurm_said() {
	local f
	for f in "$SLURM_DIR"/*.log "$SLURM_DIR"/*.err "$SLURM_DIR"/munge/munged.log; do
		[ -s "$f" ] && printf '%s:\n%s\n' "${f##*/}" "$(tail -5 "$f")"
	done
	return 0
}

slurm_pool() {
	printf 'backend = slurm\npartition = %s\n' "$SLURM_PART"
	local l
	for l in "$@"; do printf '%s\n' "$l"; done
}

slurm_node_state() { sinfo -h -n "$1" -N -o '%t' | head -1; }

slurm_down() {
	[ -n "${SLURM_DIR:-}" ] || return 0
	local i p
	# the daemons first, slurmd and slurmctld together, then munged
	for p in "${SLURM_PIDS[@]:1}"; do kill -TERM "$p" 2>/dev/null; done
	slurm_wait_gone "${SLURM_PIDS[@]:1}"
	kill -TERM "${SLURM_PIDS[0]}" 2>/dev/null
	slurm_wait_gone "${SLURM_PIDS[0]}"
	for i in $(seq "${SLURM_N:-0}"); do
		# what a job left (there should be nothing: the tests check it)
		ip netns pids "dlhs$i" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "dlhs$i" 2>/dev/null
		ip link del "dlhsv$i" 2>/dev/null
	done
	ip link del "$SLURM_BRIDGE" 2>/dev/null
	rm -rf "$SLURM_DIR"
	SLURM_DIR= SLURM_PIDS=()
	unset SLURM_CONF
	nodes_unlock
	return 0
}
