/* check.h - a tiny unit-test harness: one line per case, tallied by tests/run
 *
 * Each case prints `PASS name`, `FAIL name: file:line: what`, or
 * `SKIP name: why`. tests/run counts those lines across all binaries. */
#ifndef DLH_CHECK_H
#define DLH_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failed_;   /* set by a failing CHECK in the running case */
static int check_skipped_;  /* set by SKIP in the running case */
static int check_nfail_;    /* cases failed so far in this binary */

#define CHECK(cond) do { if (!(cond)) { \
	printf("FAIL %s: %s:%d: %s\n", check_name_, __FILE__, __LINE__, #cond); \
	check_failed_ = 1; return; } } while (0)

#define CHECK_MSG(cond, ...) do { if (!(cond)) { \
	printf("FAIL %s: %s:%d: ", check_name_, __FILE__, __LINE__); \
	printf(__VA_ARGS__); printf("\n"); check_failed_ = 1; return; } } while (0)

#define SKIP(why) do { printf("SKIP %s: %s\n", check_name_, why); \
	check_skipped_ = 1; return; } while (0)

#define TEST(fn) static void fn(const char *check_name_)

#define RUN(fn) do { check_failed_ = 0; check_skipped_ = 0; fn(#fn); \
	if (check_failed_) check_nfail_++; \
	else if (!check_skipped_) printf("PASS %s\n", #fn); \
	fflush(stdout); } while (0)

#define CHECK_EXIT() (check_nfail_ ? 1 : 0)

#endif
