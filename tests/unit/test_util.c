/* test_util.c - the engine's file and text helpers (engine/util/util.c): atomic
 * writes, bounded reads, key=value lookup, durations and sizes as text */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/util/util.h"
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

TEST(atomic_write_replaces_whole_file)
{
	char dir[512], path[600], *text;
	fresh_dir(dir, sizeof dir, "atomic");
	snprintf(path, sizeof path, "%s/f", dir);
	CHECK(dlh_write_atomic(path, "first version\n", 14) == 0);
	CHECK(dlh_write_atomic(path, "2\n", 2) == 0);
	CHECK(dlh_read_file(path, 100, &text, NULL) == 0);
	CHECK(strcmp(text, "2\n") == 0);
	free(text);
	char tmp[700];
	snprintf(tmp, sizeof tmp, "%s/.f.tmp", dir);
	CHECK(access(tmp, F_OK) != 0);
	/* a write that cannot finish leaves the old file whole and no temporary */
	char bad[700];
	snprintf(bad, sizeof bad, "%s/missing-dir/f", dir);
	CHECK(dlh_write_atomic(bad, "x", 1) == -ENOENT);
	CHECK(dlh_read_file(path, 100, &text, NULL) == 0 && !strcmp(text, "2\n"));
	free(text);
}

TEST(read_file_refuses_over_max)
{
	char dir[512], path[600], *text = NULL;
	fresh_dir(dir, sizeof dir, "readmax");
	snprintf(path, sizeof path, "%s/f", dir);
	write_text(path, "0123456789");
	CHECK(dlh_read_file(path, 9, &text, NULL) == -EFBIG);
	CHECK(dlh_read_file(path, 10, &text, NULL) == 0);
	free(text);
	CHECK(dlh_read_file("/nonexistent/x", 10, &text, NULL) == -ENOENT);
}

TEST(kv_get_finds_exact_keys)
{
	char v[32];
	const char *t = "steps=10\nsteps_per_epoch=5\nname=a b\n";
	CHECK(dlh_kv_get(t, "steps_per_epoch", v, sizeof v) == 0 && !strcmp(v, "5"));
	CHECK(dlh_kv_get(t, "steps", v, sizeof v) == 0 && !strcmp(v, "10"));
	CHECK(dlh_kv_get(t, "name", v, sizeof v) == 0 && !strcmp(v, "a b"));
	CHECK(dlh_kv_get(t, "step", v, sizeof v) == -ENOENT);
}

TEST(duration_formats)
{
	char b[32];
	dlh_duration(41, b, sizeof b);
	CHECK(!strcmp(b, "0:41"));
	dlh_duration(3725, b, sizeof b);
	CHECK(!strcmp(b, "1:02:05"));
	dlh_duration(-3, b, sizeof b);
	CHECK(!strcmp(b, "0:00"));
}

TEST(size_text_uses_the_largest_exact_unit)
{
	char t[32];
	dlh_size_text(64LL << 20, t, sizeof t);
	CHECK(!strcmp(t, "64M"));
	dlh_size_text(1536LL << 10, t, sizeof t);
	CHECK(!strcmp(t, "1536K"));
	dlh_size_text(3LL << 40, t, sizeof t);
	CHECK(!strcmp(t, "3T"));
	dlh_size_text(1000, t, sizeof t);
	CHECK(!strcmp(t, "1000"));
}

/* The owner of a job's directory may put links, FIFOs and hard links where
 * the daemon reads and writes: none is followed, waited on or written through. */
TEST(job_dir_access_never_follows_what_its_owner_put_there)
{
	char dir[512], path[700], secret[700], *text = NULL;
	struct stat st;
	fresh_dir(dir, sizeof dir, "beneath");
	snprintf(secret, sizeof secret, "%s/secret", tmp_root);
	write_text(secret, "root only\n");
	snprintf(path, sizeof path, "%s/sub", dir);
	CHECK(mkdir(path, 0755) == 0);
	snprintf(path, sizeof path, "%s/sub/plain", dir);
	write_text(path, "ok\n");
	snprintf(path, sizeof path, "%s/link", dir);
	CHECK(symlink(secret, path) == 0);
	snprintf(path, sizeof path, "%s/sub/link", dir);
	CHECK(symlink(secret, path) == 0);
	snprintf(path, sizeof path, "%s/dirlink", dir);
	CHECK(symlink(tmp_root, path) == 0);
	snprintf(path, sizeof path, "%s/fifo", dir);
	CHECK(mkfifo(path, 0600) == 0);

	int fd = dlh_open_beneath(dir, "sub/plain");
	CHECK(fd >= 0);
	close(fd);
	CHECK(dlh_open_beneath(dir, "link") == -ELOOP);
	CHECK(dlh_open_beneath(dir, "sub/link") == -ELOOP);
	CHECK(dlh_open_beneath(dir, "dirlink/secret") < 0);   /* a linked directory */
	CHECK(dlh_open_beneath(dir, "fifo") == -EINVAL);       /* refused at once */
	CHECK(dlh_open_beneath(dir, "../secret") == -EINVAL);
	CHECK(dlh_open_beneath(dir, "sub/..") == -EINVAL);
	CHECK(dlh_open_beneath(dir, "none") == -ENOENT);
	CHECK(dlh_stat_beneath(dir, "sub/plain", &st) == 0 && S_ISREG(st.st_mode));
	CHECK(dlh_stat_beneath(dir, "sub", &st) == 0 && S_ISDIR(st.st_mode));
	CHECK(dlh_stat_beneath(dir, "link", &st) == -ELOOP);
	CHECK(dlh_stat_beneath(dir, "fifo", &st) == -EINVAL);
	CHECK(dlh_stat_beneath(dir, "dirlink/secret", &st) < 0);
	DIR *d = dlh_opendir_beneath(dir, "sub");
	CHECK(d != NULL);
	closedir(d);
	CHECK(dlh_opendir_beneath(dir, "dirlink") == NULL);

	snprintf(path, sizeof path, "%s/link", dir);
	CHECK(dlh_read_file_nofollow(path, 4096, &text, NULL) == -ELOOP);
	CHECK(dlh_read_file(path, 4096, &text, NULL) == 0);  /* the plain read follows */
	free(text);
	snprintf(path, sizeof path, "%s/fifo", dir);
	CHECK(dlh_read_file(path, 4096, &text, NULL) == -EINVAL);
	/* appends: not through a link, not to a second name of another file */
	snprintf(path, sizeof path, "%s/link", dir);
	CHECK(dlh_append_line(path, "owned") == -ELOOP);
	snprintf(path, sizeof path, "%s/hard", dir);
	CHECK(link(secret, path) == 0);
	CHECK(dlh_append_line(path, "owned") == -EPERM);
	/* an atomic write over a link replaces the link, not its target */
	snprintf(path, sizeof path, "%s/.rec.tmp", dir);
	CHECK(symlink(secret, path) == 0);
	snprintf(path, sizeof path, "%s/rec", dir);
	CHECK(dlh_write_atomic(path, "new\n", 4) == 0);
	CHECK(dlh_read_file(secret, 4096, &text, NULL) == 0);
	CHECK_MSG(!strcmp(text, "root only\n"), "the target became \"%s\"", text);
	free(text);
}

/* FNV-1a's published values, and contents that differ hash apart */
TEST(hash_is_fnv1a)
{
	CHECK(dlh_hash("", 0) == 0xcbf29ce484222325ULL);
	CHECK(dlh_hash("a", 1) == 0xaf63dc4c8601ec8cULL);
	CHECK(dlh_hash("running\n", 8) != dlh_hash("queued\n", 7));
}

int main(void)
{
	if (tmp_root_make())
		return 1;
	RUN(atomic_write_replaces_whole_file);
	RUN(job_dir_access_never_follows_what_its_owner_put_there);
	RUN(read_file_refuses_over_max);
	RUN(kv_get_finds_exact_keys);
	RUN(duration_formats);
	RUN(size_text_uses_the_largest_exact_unit);
	RUN(hash_is_fnv1a);
	tmp_root_remove();
	return CHECK_EXIT();
}
