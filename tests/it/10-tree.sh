# 10-tree.sh - the fixed tree: README, pool, jobs/, and the errno of every misuse

test_root_lists_readme_pool_jobs_queue() {
	dlh_mount
	expect_eq "$(ls "$MNT" | tr '\n' ' ')" "README jobs pool prometheus queue " "ls /"
	grep -q '^jobs/new' "$MNT/README" || die "README does not describe jobs/new"
	dlh_umount
}

test_pool_shows_local_node() {
	dlh_mount
	local host; host=$(ls "$MNT/pool/nodes")
	[ -n "$host" ] || die "no node under pool/nodes"
	expect_eq "$(cat "$MNT/pool/nodes/$host/cpus")" "$(nproc)" "cpus"
	expect_eq "$(cat "$MNT/pool/nodes/$host/cpus_used")" "0" "cpus_used"
	local mem; mem=$(cat "$MNT/pool/nodes/$host/memory")
	[ "$mem" -gt 100000000 ] || die "memory looks wrong: $mem"
	grep -q "^cpu total $(nproc) held 0 free $(nproc)$" "$MNT/pool/summary" || die "summary: $(cat "$MNT/pool/summary")"
	[ -d "$MNT/pool/nodes/$host/gpus" ] || die "gpus/ missing"
	dlh_umount
}

test_sizes_match_content() {
	dlh_mount
	local f
	for f in README pool/summary; do
		expect_eq "$(stat -c %s "$MNT/$f")" "$(cat "$MNT/$f" | wc -c)" "size of $f"
	done
	dlh_umount
}

test_jobs_dir_starts_with_new_and_errors() {
	dlh_mount
	expect_eq "$(ls "$MNT/jobs" | tr '\n' ' ')" "errors index new " "ls jobs"
	expect_eq "$(cat "$MNT/jobs/errors")" "" "errors before any rejection"
	dlh_umount
}

test_readonly_files_refuse_writes_with_eacces() {
	dlh_mount
	expect_errno "Permission denied" sh -c "echo x > '$MNT/README'"
	expect_errno "Permission denied" sh -c "echo x > '$MNT/pool/summary'"
	expect_errno "Permission denied" sh -c "echo x >> '$MNT/jobs/errors'"
	expect_errno "Permission denied" truncate -s 0 "$MNT/README"
	dlh_umount
}

test_tree_cannot_be_changed() {
	dlh_mount
	expect_errno "Permission denied" touch "$MNT/jobs/mine"
	expect_errno "Permission denied" sh -c "echo x > '$MNT/newfile'"
	expect_errno "File exists" mkdir "$MNT/jobs"
	expect_errno "Permission denied" mkdir "$MNT/jobs/7"
	expect_errno "Permission denied" rm "$MNT/README"
	expect_errno "Permission denied" mv "$MNT/README" "$MNT/README2"
	dlh_umount
}

test_errno_enoent_enotdir_eisdir() {
	dlh_mount
	expect_errno "No such file or directory" cat "$MNT/nope"
	expect_errno "No such file or directory" cat "$MNT/jobs/1/status"
	expect_errno "No such file or directory" ls "$MNT/jobs/0"
	expect_errno "Not a directory" ls "$MNT/README/x"
	expect_errno "Is a directory" sh -c "echo x > '$MNT/jobs'"
	expect_errno "Is a directory" cat "$MNT/pool"
	dlh_umount
}

test_help_and_version() {
	"$DLH_BIN/dlhfs" --help | grep -q 'state=DIR' || die "--help does not list -o state"
	"$DLH_BIN/dlhfs" --version | grep -q '^dlhfs ' || die "--version"
	expect_errno "no mountpoint" "$DLH_BIN/dlhfs"
}

test_bad_state_dir_is_reported_before_mounting() {
	local m; m=$(mktemp -d)
	expect_errno "state directory must be an absolute path" "$DLH_BIN/dlhfs" -f -o state=relative "$m"
	expect_errno "cannot use state directory" "$DLH_BIN/dlhfs" -f -o state=/proc/nope "$m"
	mountpoint -q "$m" && die "mounted anyway"
	rmdir "$m"
}
