# tests/nodes.sh - several nodes on one machine, for the mount tests: each node
# is a network namespace (dlhnN) with its own hostname and address on a bridge
# this file makes, its own sshd, and a key made here. The filesystem is shared.
# Only addresses inside these namespaces are ever contacted.
#
#   nodes_up N [DOWN...]   make nodes dlhn1..dlhnN (a node listed in DOWN gets
#                          no sshd); NODES_DIR holds keys and the ssh config
#   node_ssh_config        the ssh config file (Host dlhnN -> its address; the
#                          nodes' addresses too): each user logs in as
#                          themselves with the key NODES_DIR/id_USER
#   node_user_key USER     a key for USER, accepted on every node
#   node_sshd_start I [HIDE [FROM]]  start node I's sshd (again); with HIDE, in
#                          a mount namespace of its own where a tmpfs covers the
#                          directory HIDE, empty (a node that cannot see what is
#                          there) or holding a copy of FROM's files (a node
#                          with files of its own at the same paths)
#   nodes_down             remove them all (dlh_cleanup calls it too)
#   nodes_pool [N]         a pool file: this machine ("here", its cores), then
#                          dlhn1..dlhnN (8 cores each until probed)
#   nodes_probed NODE...   every NODE's state is no longer "probing"
#   node_kill I            kill every process of node I (its sshd, mpirun's
#                          daemon, its ranks): the node is lost
#   nodes_said             what the nodes' sshds logged (each sshdI.conf.log),
#                          for a failure's message

NODES_NET=10.77.0           # the bridge's /24
NODES_BRIDGE=dlhbr0

# nodes_can: skips the test with the reason when nodes cannot be made here
nodes_can() {
	[ "$(id -u)" = 0 ] || skip "nodes need root (network namespaces)"
	command -v ip >/dev/null || skip "no ip (iproute2): nodes cannot be made here"
	[ -x /usr/sbin/sshd ] || skip "no sshd (openssh-server: make deps): nodes cannot be made here"
	ip netns add dlhn-probe 2>/dev/null || skip "network namespaces cannot be made here"
	ip netns del dlhn-probe
}

# node_ssh_block PATTERN [ADDRESS]: an ssh config block for hosts PATTERN
# (reached at ADDRESS): each user with their own key, no host key asked
node_ssh_block() {
	printf 'Host %s\n' "$1"
	[ -n "${2:-}" ] && printf '\tHostName %s\n' "$2"
	printf '\tIdentityFile %s/id_%%u\n\tIdentitiesOnly yes\n\tStrictHostKeyChecking no\n' "$NODES_DIR"
	printf '\tUserKnownHostsFile /dev/null\n\tBatchMode yes\n\tConnectTimeout 5\n\tLogLevel ERROR\n'
}

nodes_up() {
	local n=$1 i
	shift
	nodes_can
	nodes_lock nodes
	NODES_DIR=$(mktemp -d /tmp/dlh-nodes.XXXXXX)
	NODES_N=$n
	NODES_DOWN=" $* "
	trap dlh_cleanup EXIT
	# Open MPI between the nodes: only the bridge's addresses
	export OMPI_MCA_oob_tcp_if_include="$NODES_NET.0/24" OMPI_MCA_btl_tcp_if_include="$NODES_NET.0/24"
	ip link add "$NODES_BRIDGE" type bridge || die "cannot make bridge $NODES_BRIDGE"
	ip addr add "$NODES_NET.1/24" dev "$NODES_BRIDGE"
	ip link set "$NODES_BRIDGE" up
	# every user reads the config (and finds their own key by it)
	chmod 755 "$NODES_DIR"
	ssh-keygen -q -t ed25519 -N "" -f "$NODES_DIR/id_root" || die "ssh-keygen failed"
	cp "$NODES_DIR/id_root.pub" "$NODES_DIR/authorized_keys"
	node_ssh_block "$NODES_NET.*" > "$NODES_DIR/ssh_config"
	for i in $(seq "$n"); do
		ip netns add "dlhn$i" || die "cannot make namespace dlhn$i"
		ip link add "dlhv$i" type veth peer name eth0 netns "dlhn$i"
		ip link set "dlhv$i" master "$NODES_BRIDGE" up
		ip -n "dlhn$i" addr add "$NODES_NET.$((10 + i))/24" dev eth0
		ip -n "dlhn$i" link set eth0 up
		ip -n "dlhn$i" link set lo up
		ssh-keygen -q -t ed25519 -N "" -f "$NODES_DIR/host$i" || die "ssh-keygen failed"
		cat > "$NODES_DIR/sshd$i.conf" <<CONF
ListenAddress $NODES_NET.$((10 + i))
HostKey $NODES_DIR/host$i
PidFile $NODES_DIR/sshd$i.pid
AuthorizedKeysFile $NODES_DIR/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AcceptEnv *
CONF
		node_ssh_block "dlhn$i" "$NODES_NET.$((10 + i))" >> "$NODES_DIR/ssh_config"
		case $NODES_DOWN in *" dlhn$i "*) continue ;; esac
		node_sshd_start "$i"
	done
}

node_ssh_config() { echo "$NODES_DIR/ssh_config"; }

node_user_key() {
	ssh-keygen -q -t ed25519 -N "" -f "$NODES_DIR/id_$1" || die "ssh-keygen for $1 failed"
	chown "$1" "$NODES_DIR/id_$1"
	cat "$NODES_DIR/id_$1.pub" >> "$NODES_DIR/authorized_keys"
}

nodes_pool() {
	local n=${1:-$NODES_N} i cores
	# this machine's cores as the nodes' probes will find them: the same
	# room everywhere, so that ties put ranks here first
	cores=$("$DLH_BIN/dlh-probe" | sed -n 's/^cpus=//p')
	printf '[node here]\nhost = %s\ncpus = %d\n' "$(hostname)" "$cores"
	for i in $(seq "$n"); do
		printf '[node dlhn%d]\nhost = dlhn%d\ncpus = 8\nagent = /usr/bin/ssh -F %s\n' \
			"$i" "$i" "$(node_ssh_config)"
	done
}

nodes_probed() {
	local n
	for n in "$@"; do
		grep -q '^probing' "$MNT/pool/nodes/$n/state" && return 1
	done
	return 0
}

nodes_said() {
	local f
	for f in "$NODES_DIR"/sshd*.conf.log; do
		[ -s "$f" ] && printf '%s:\n%s\n' "${f##*/}" "$(tail -5 "$f")"
	done
	return 0
}

node_kill() {
	ip netns pids "dlhn$1" | xargs -r kill -9
}

# node_sshd_start I: node I's sshd, in its network namespace, under its own
# hostname. nsenter, not `ip netns exec`: that makes a mount namespace too,
# whose copy of a dlhfs mount made before would outlive its unmount.
node_sshd_start() {
	mkdir -p /run/sshd
	if [ -n "${2:-}" ]; then   # before any dlhfs mount: its namespace holds no copy of one
		nsenter --net="/var/run/netns/dlhn$1" unshare --uts --mount --propagation private \
			sh -c 'hostname "$1" && mount -t tmpfs -o mode=0755 none "$3" &&
				{ [ -z "$4" ] || cp -a "$4/." "$3"; } && exec /usr/sbin/sshd -f "$2" -E "$2.log"' \
			- "dlhn$1" "$NODES_DIR/sshd$1.conf" "$2" "${3:-}" || die "sshd of dlhn$1 did not start"
	else
		nsenter --net="/var/run/netns/dlhn$1" unshare --uts sh -c 'hostname "$1"; exec /usr/sbin/sshd -f "$2" -E "$2.log"' \
			- "dlhn$1" "$NODES_DIR/sshd$1.conf" || die "sshd of dlhn$1 did not start"
	fi
	wait_for 10 ssh -F "$NODES_DIR/ssh_config" "dlhn$1" true ||
		die "dlhn$1 does not answer ssh: $(ssh -F "$NODES_DIR/ssh_config" "dlhn$1" true 2>&1)"
}

nodes_down() {
	[ -n "${NODES_DIR:-}" ] || return 0
	local i f
	for f in "$NODES_DIR"/sshd*.pid; do
		[ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	for i in $(seq "${NODES_N:-0}"); do
		ip netns pids "dlhn$i" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "dlhn$i" 2>/dev/null
		ip link del "dlhv$i" 2>/dev/null
	done
	ip link del "$NODES_BRIDGE" 2>/dev/null
	rm -rf "$NODES_DIR"
	NODES_DIR=
	nodes_unlock
	return 0
}
