# 95-install.sh - make install: the programs under PREFIX/lib/dlhfs with
# PREFIX/bin/dlhfs, the man pages dlhfs(8) and dlhfs-spec(5), the systemd
# unit (systemd-analyze verify where it is there), the examples, the Python
# library (it imports where it is installed); an
# installed dlhfs mounts and trains (it finds its tools beside itself)

test_make_install_gives_man_pages_a_unit_and_a_working_dlhfs() {
	command -v man >/dev/null || skip "no man (man-db: make deps installs it)"
	local d
	d=$(mktemp -d /tmp/dlh-install.XXXXXX)
	STATE=$d   # dlh_cleanup removes it
	make -s install BUILD="$DLH_BUILD" DESTDIR="$d/dest" > "$d/make.out" 2>&1 ||
		die "make install DESTDIR: $(tail -3 "$d/make.out")"
	local man8=$d/dest/usr/local/share/man/man8/dlhfs.8 man5=$d/dest/usr/local/share/man/man5/dlhfs-spec.5
	man -l "$man8" 2>/dev/null | grep -q 'dlhfs - a deep-learning harness driven by files' ||
		die "man -l dlhfs.8: $(man -l "$man8" 2>&1 | head -5)"
	man -l "$man5" 2>/dev/null | grep -q 'dlhfs-spec - the job spec of dlhfs' ||
		die "man -l dlhfs-spec.5: $(man -l "$man5" 2>&1 | head -5)"
	man -l "$man5" 2>/dev/null | grep -q 'time_limit_grace' || die "dlhfs-spec(5) lacks keys"
	expect_eq "$(readlink "$d/dest/usr/local/bin/dlhfs")" "../lib/dlhfs/dlhfs" "bin/dlhfs"
	grep -qx 'ExecStart=/usr/local/bin/dlhfs -f -o state=/var/lib/dlh,allow_other /dlh' \
		"$d/dest/usr/local/lib/systemd/system/dlhfs.service" || die "unit: $(grep Exec "$d/dest/usr/local/lib/systemd/system/dlhfs.service")"
	[ -f "$d/dest/usr/local/share/doc/dlhfs/examples/fashion-mnist-mlp.ini" ] || die "no examples"
	# the Python library where /usr/bin/python3 looks under the prefix; it imports from there
	if [ -x /usr/bin/python3 ]; then
		local pydir got
		pydir=$d/dest/usr/local/lib/python$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages
		[ -f "$pydir/dlhfs.py" ] || die "no dlhfs.py in $pydir: $(cd "$d/dest" && find . -name dlhfs.py)"
		got=$(cd "$d" && PYTHONPATH=$pydir /usr/bin/python3 -c 'import dlhfs; print(dlhfs.__file__, dlhfs.init().world_size)' 2>&1) ||
			die "import dlhfs: $got"
		expect_eq "$got" "$pydir/dlhfs.py 1" "the installed dlhfs module"
	fi
	# installed in a prefix of its own: the unit verified, and that dlhfs run
	make -s install BUILD="$DLH_BUILD" PREFIX="$d/p" > "$d/make.out" 2>&1 ||
		die "make install PREFIX: $(tail -3 "$d/make.out")"
	if command -v systemd-analyze >/dev/null; then
		MANPATH=$d/p/share/man systemd-analyze verify "$d/p/lib/systemd/system/dlhfs.service" ||
			die "systemd-analyze verify failed"
	fi
	DLH_BIN=$d/p/bin dlh_mount "$d"   # the state dir beside: dlh_cleanup removes it all
	slice_spec installed 1 > "$STATE/s.ini"
	cp "$STATE/s.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 120 job_terminal 1 || die "job 1: $(cat "$MNT/jobs/1/progress")"
	expect_eq "$(cat "$MNT/jobs/1/status")" succeeded "a job of the installed dlhfs ($(tail -3 "$MNT/jobs/1/log"))"
	grep -q "$d/p/lib/dlhfs/dlh-train " "$MNT/jobs/1/plan" || die "argv: $(grep '^argv' "$MNT/jobs/1/plan")"
	dlh_umount
	# the fstab line (README): mount(8) runs it through mount.fuse3, dlhfs
	# daemonizes; umount(8) ends it
	command -v mount.fuse3 >/dev/null || [ -x /sbin/mount.fuse3 ] || skip "no mount.fuse3 (fuse3)"
	mkdir -p "$d/fstab-state" "$d/mnt"
	[ -n "${DLH_CALIBRATION:-}" ] && cp "$DLH_CALIBRATION" "$d/fstab-state/calibration"
	printf '%s/p/bin/dlhfs#dlhfs %s/mnt fuse state=%s/fstab-state,noauto 0 0\n' "$d" "$d" "$d" > "$d/fstab"
	MNT=$d/mnt   # dlh_cleanup unmounts it whatever happens
	mount -T "$d/fstab" "$d/mnt" || die "mount -T $d/fstab $d/mnt failed"
	wait_for 10 grep -q '^cpu total' "$d/mnt/pool/summary" || die "the fstab mount serves nothing"
	pgrep -f -- "$d/p/bin/dlhfs" >/dev/null || die "no dlhfs daemon behind the fstab mount"
	umount "$d/mnt" || die "umount failed"
	wait_for 10 eval "! pgrep -f -- \"$d/p/bin/dlhfs\" >/dev/null" || die "dlhfs did not exit after umount"
	MNT=
}
