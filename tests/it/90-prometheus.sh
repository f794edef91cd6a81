# 90-prometheus.sh - /dlh/prometheus for node_exporter's textfile collector:
# the real prometheus-node-exporter from Debian scrapes it on localhost (a
# port of 127.0.0.1 only) while a job runs, and its /metrics carries the
# dlhfs_ series of the job and of the pool; promtool (Debian's prometheus)
# finds nothing to say of the file

# scrape PORT: node_exporter's /metrics
scrape() { curl -sf "http://127.0.0.1:$1/metrics"; }

test_node_exporter_scrapes_a_running_jobs_series() {
	local exporter=/usr/bin/prometheus-node-exporter
	[ -x "$exporter" ] || skip "no prometheus-node-exporter (make deps installs it)"
	command -v curl >/dev/null || skip "no curl (make deps installs it)"
	dlh_mount
	printf '[job]\nname = watched\n[data]\ntest_limit = 1000\n[train]\nepochs = 20\ncheckpoint_every = 50\n[resources]\nranks = 2\n' \
		> "$STATE/w.ini"
	cp "$STATE/w.ini" "$MNT/jobs/new" || die "submit: $(tail -2 "$MNT/jobs/errors")"
	wait_for 60 eval '[ "$(csv_rows 1 train)" -ge 5 ]' || die "no rows: $(cat "$MNT/jobs/1/progress")"
	local prom=$MNT/prometheus/dlhfs.prom port=$((20000 + $$ % 20000))
	grep -q '^# TYPE dlhfs_job_step gauge$' "$prom" || die "dlhfs.prom: $(head -20 "$prom")"
	# Prometheus's own linter (names, base units, _total, HELP and TYPE)
	local lint
	command -v promtool >/dev/null || die "no promtool (make deps installs prometheus)"
	lint=$(promtool check metrics < "$prom" 2>&1) || die "promtool check metrics: $lint"
	[ -z "$lint" ] || die "promtool check metrics: $lint"
	"$exporter" --collector.disable-defaults --collector.textfile \
		--collector.textfile.directory="$MNT/prometheus" --web.listen-address="127.0.0.1:$port" \
		> "$STATE/exporter.log" 2>&1 &
	local pid=$! out
	wait_for 10 scrape "$port" || { kill "$pid"; die "node_exporter: $(tail -3 "$STATE/exporter.log")"; }
	out=$(scrape "$port")
	echo "$out" | grep -q '^dlhfs_job_state{job_id="1",name="watched",owner="root",state="running"} 1$' ||
		die "scrape: $(echo "$out" | grep dlhfs_ | head -20)"
	echo "$out" | grep -Eq '^dlhfs_job_step\{job_id="1",name="watched",owner="root"\} [1-9][0-9]*$' ||
		die "scrape: $(echo "$out" | grep dlhfs_job_step)"
	echo "$out" | grep -Eq '^dlhfs_job_steps\{job_id="1",name="watched",owner="root"\} 18740$' ||
		die "scrape: $(echo "$out" | grep dlhfs_job_steps)"
	echo "$out" | grep -Eq '^dlhfs_job_samples_per_second\{job_id="1",[^}]*\} [0-9.e+]+$' ||
		die "scrape: $(echo "$out" | grep samples)"
	echo "$out" | grep -Eq "^dlhfs_devices\{node=\"$(hostname)\",state=\"held\",type=\"cpu\"\} 2$" ||
		die "scrape: $(echo "$out" | grep dlhfs_devices)"
	# the collector takes the file as it is: no parse error of ours
	echo "$out" | grep -q '^node_textfile_scrape_error 0$' || die "scrape error: $(echo "$out" | grep textfile)"
	# the file's mtime is when its data last changed (the job steps: now), not the mount's
	local mt now mounted
	mounted=$(stat -c %Y "$MNT")
	wait_for 5 eval '[ "$(date +%s)" -gt "$mounted" ]'   # a second since the mount
	out=$(scrape "$port")
	mt=$(echo "$out" | sed -n 's/^node_textfile_mtime_seconds{file="[^"]*dlhfs.prom"} //p')
	now=$(date +%s)
	[ -n "$mt" ] || die "no node_textfile_mtime_seconds: $(echo "$out" | grep textfile)"
	awk -v m="$mt" -v n="$now" -v t="$mounted" 'BEGIN { exit !(m > t && m > n - 10 && m <= n + 1) }' ||
		{ kill "$pid"; die "node_textfile_mtime_seconds $mt, now $now, mounted $mounted"; }
	kill "$pid"
	echo "measured: $(echo "$out" | grep -c '^dlhfs_') dlhfs_ samples scraped"
	echo cancel > "$MNT/jobs/1/ctl"
	wait_for 20 job_terminal 1 || die "job 1 did not end"
	dlh_umount
}
