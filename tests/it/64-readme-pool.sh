# 64-readme-pool.sh - the README's "Setting up a pool, step by step", followed
# as written by a team that has only the README: a shared filesystem with the
# programs installed on it, nodes named by address, their host keys scanned
# into a known_hosts file the pool's agent config names, a key for each user
# in the keys directory that config names, an ordinary user's job over two
# nodes from a head node outside the pool, and a user without a key told at
# once. The nodes are network namespaces with their own hostname, address and
# sshd (tests/nodes.sh), whose harness config (no host key checking) is used
# only to see that an sshd started, never by the pool. ROOT stands for what
# the README calls / on the machines: ROOT/shared the shared filesystem,
# ROOT/etc/dlh dlhfs's configuration. Nothing outside ROOT is changed but the
# two users this test adds and removes.

source tests/nodes.sh

# readme_user VAR: a user as step 4 has them, with a home (ROOT/home: a
# shared home) and a login shell (useradd's default); dlh_cleanup removes it
readme_user() {
	command -v useradd >/dev/null || skip "no useradd: users cannot be made here"
	local name="dlhr$$${#DLH_USERS[@]}"
	useradd -m -d "$ROOT/home/$name" "$name" || die "useradd $name failed"
	DLH_USERS+=("$name")
	# an account that is not locked (useradd locks it: "!" as its password);
	# the nodes' sshd (UsePAM no) refuses a locked account even a key
	usermod -p '*' "$name" || die "usermod $name failed"
	printf -v "$1" '%s' "$name"
}

test_a_pool_set_up_as_the_readme_says_runs_a_users_job_on_its_nodes_only() {
	local a b i n1=$NODES_NET.11 n2=$NODES_NET.12 t0
	# the nodes, each sshd with the usual AuthorizedKeysFile (the login's
	# ~/.ssh/authorized_keys; root's home is this machine's own, so root's
	# stands in NODES_DIR's file)
	nodes_up 2 dlhn1 dlhn2
	ROOT=$(mktemp -d /tmp/dlh-readme.XXXXXX)
	chmod 755 "$ROOT"
	trap 'dlh_cleanup; rm -rf "$ROOT"' EXIT
	for i in 1 2; do
		sed -i "s|^AuthorizedKeysFile .*|AuthorizedKeysFile .ssh/authorized_keys $NODES_DIR/authorized_keys|" "$NODES_DIR/sshd$i.conf"
		node_sshd_start "$i"
	done
	# Open MPI's interfaces: what dlhfs's environment has (the README's
	# steps do not set them; nodes_up did, for the other tests)
	unset OMPI_MCA_oob_tcp_if_include OMPI_MCA_btl_tcp_if_include

	# 1. a shared filesystem holding the state directory, dlhfs's programs
	# (make install PREFIX=/shared/dlhfs) and the data (Fashion-MNIST's, at
	# its usual path on this same filesystem)
	local shared=$ROOT/shared etc=$ROOT/etc/dlh
	mkdir -p "$shared/dlh/state" "$etc/keys"
	make -s install BUILD="$DLH_BIN" PREFIX="$shared/dlhfs" >"$ROOT/install.log" 2>&1 ||
		die "make install: $(tail -3 "$ROOT/install.log")"

	# 2. each node's host an address; the pool file names the agent of step 3
	for i in 1 2; do
		printf '[node dlhn%d]\nhost = %s.%d\ncpus = 2\nagent = /usr/bin/ssh -F %s/ssh_config\n' \
			"$i" "$NODES_NET" $((10 + i)) "$etc"
	done > "$etc/pool.ini"

	# 3. host keys known: scanned into the known_hosts file of the agent's
	# own config, whose Host block gives each user a key of their own
	ssh-keyscan -T 5 "$n1" "$n2" > "$etc/known_hosts" 2>"$ROOT/keyscan.log" || die "ssh-keyscan: $(cat "$ROOT/keyscan.log")"
	expect_eq "$(awk '{print $1}' "$etc/known_hosts" | sort -u | tr '\n' ' ')" "$n1 $n2 " "known_hosts's hosts"
	cat > "$etc/ssh_config" <<CONF
Host $NODES_NET.*
	IdentityFile $etc/keys/id_%u
	UserKnownHostsFile $etc/known_hosts
	BatchMode yes
	ConnectTimeout 5
CONF

	# 4. a key for every user, accepted on every node: the user's own (made
	# by ssh-keygen, theirs, mode 0600), its public half in their
	# ~/.ssh/authorized_keys (a shared home: once for every node); root's too,
	# for dlhfs's probes
	readme_user a
	readme_user b
	ssh-keygen -q -t ed25519 -N "" -f "$etc/keys/id_$a" || die "ssh-keygen for $a failed"
	chown "$a" "$etc/keys/id_$a" "$etc/keys/id_$a.pub"
	# shellcheck disable=SC2016  # expanded by the user's shell
	as "$a" sh -c 'mkdir -p -m 700 ~/.ssh && cat "$1" >> ~/.ssh/authorized_keys' - "$etc/keys/id_$a.pub" ||
		die "$a's authorized_keys"
	ssh-keygen -q -t ed25519 -N "" -f "$etc/keys/id_root" || die "ssh-keygen for root failed"
	cat "$etc/keys/id_root.pub" >> "$NODES_DIR/authorized_keys"
	# checked as the user, through the pool's agent
	for i in "$n1" "$n2"; do
		as "$a" ssh -F "$etc/ssh_config" "$i" true </dev/null ||
			die "$a cannot reach $i: $(as "$a" ssh -F "$etc/ssh_config" "$i" true 2>&1 </dev/null)"
		ssh -F "$etc/ssh_config" "$i" true </dev/null || die "root cannot reach $i"
	done
	as "$b" ssh -F "$etc/ssh_config" "$n1" true 2>/dev/null </dev/null && die "$b reaches $n1 without a key"

	# 5. the same users everywhere: the nodes share this machine's /etc/passwd

	# 6. cgroups on every node: the namespace nodes share this machine's
	# 7. mount (the installed dlhfs; in the foreground, for the test), then
	# every node's state says up
	DLH_BIN=$shared/dlhfs/bin DLH_OPTS="-o pool=$etc/pool.ini -o allow_other" dlh_mount "$shared/dlh/state"
	trap 'dlh_cleanup; rm -rf "$ROOT"' EXIT
	wait_for 30 nodes_probed dlhn1 dlhn2 || die "still probing: $(cat "$MNT"/pool/nodes/*/state)"
	for i in 1 2; do
		grep -q '^up: .*answers: [0-9]* cpus, ' "$MNT/pool/nodes/dlhn$i/state" ||
			die "dlhn$i: $(cat "$MNT/pool/nodes/dlhn$i/state")"
	done
	grep -q "^head $(hostname) outside the pool: runs mpirun, no rank" "$MNT/pool/summary" ||
		die "summary: $(cat "$MNT/pool/summary")"

	# a's job over both nodes (cp spec /dlh/jobs/new): it runs where the plan says
	slice_spec two 1 'nodes = 2' > "$ROOT/two.ini"
	chmod 644 "$ROOT/two.ini"
	as "$a" cp "$ROOT/two.ini" "$MNT/jobs/new" || die "$a's submission: $(as "$a" tail -2 "$MNT/jobs/errors")"
	wait_for 120 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "$a's job ($(grep -v '^\[rank' "$MNT/jobs/1/log" | tail -4))"
	local r host name got=
	for r in 0 1; do
		host=$(sed -n "s/^rank $r host \([^ ]*\) .*/\1/p" "$MNT/jobs/1/plan")
		name=dlhn$((${host##*.} - 10))
		grep -q "^\[rank $r\] dlh-train: host $name runs rank $r of 2" "$MNT/jobs/1/log" ||
			die "rank $r: planned on $host ($name), log: $(grep "runs rank $r of" "$MNT/jobs/1/log")"
		got="$got $name"
	done
	expect_eq "$(echo "$got" | tr ' ' '\n' | sort | tr '\n' ' ')" " dlhn1 dlhn2 " "the ranks' nodes"
	grep -q "host $(hostname) runs rank" "$MNT/jobs/1/log" && die "a rank ran on the head node"
	grep -q "^argv .* $shared/dlhfs/lib/dlhfs/dlh-train " "$MNT/jobs/1/plan" || die "not the installed dlh-train: $(grep '^argv' "$MNT/jobs/1/plan")"
	expect_eq "$(stat -c %U "$STATE/jobs/1/checkpoints/final.ckpt")" "$a" "the final checkpoint's owner"
	echo "measured: $a's job on$got: $(grep -o 'test_accuracy=.*' "$MNT/jobs/1/result")"

	# b, without a key: the job fails at once, naming node and user
	t0=$SECONDS
	as "$b" cp "$ROOT/two.ini" "$MNT/jobs/new" || die "$b's submission: $(as "$b" tail -2 "$MNT/jobs/errors")"
	wait_for 20 job_terminal 2 || die "job 2: $(cat "$MNT/jobs/2/progress")"
	echo "measured: $b's keyless job ended in $((SECONDS - t0)) s: $(as "$b" cat "$MNT/jobs/2/progress")"
	[ $((SECONDS - t0)) -le 5 ] || die "$b's keyless job took $((SECONDS - t0)) s to fail"
	expect_eq "$(cat "$MNT/jobs/2/status")" failed "$b's job"
	grep -q "^reason=user $b cannot reach node dlhn[12] through \"/usr/bin/ssh -F $etc/ssh_config\" (dlhfs can): .*Permission denied" "$MNT/jobs/2/result" ||
		die "result: $(grep reason "$MNT/jobs/2/result")"
	dlh_umount
}
