/* test_contract.c - the metrics.csv row: one formatter, one parser (engine/contract) */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "engine/contract/contract.h"
#include "tests/unit/check.h"

static int parse(const char *line, struct dlh_metrics_row *r)
{
	return dlh_metrics_row_parse(line, strlen(line), r);
}

TEST(train_row_formats_as_documented_and_parses_back)
{
	struct dlh_metrics_row r = {
		.kind = DLH_ROW_TRAIN, .step = 12, .epoch = 2, .time_s = 3.25, .loss = 0.5,
		.accuracy = 0.875, .lr = 0.01, .samples_per_s = 12345.67,
	}, back;
	char line[DLH_METRICS_LINE_MAX];
	int n = dlh_metrics_row_format(&r, line, sizeof line);

	CHECK_MSG(n > 0 && !strcmp(line, "train,12,2,3.250,0.5,0.875,0.01,12345.7\n"), "%d %s", n, line);
	CHECK(n == (int)strlen(line));
	CHECK(dlh_metrics_row_parse(line, (size_t)n, &back) == 0);
	CHECK(back.kind == DLH_ROW_TRAIN && back.step == 12 && back.epoch == 2);
	CHECK(back.time_s == 3.25 && back.loss == 0.5 && back.accuracy == 0.875);
	CHECK(fabs(back.lr - 0.01) < 1e-12 && fabs(back.samples_per_s - 12345.7) < 1e-9);
}

TEST(eval_row_leaves_lr_and_throughput_empty)
{
	struct dlh_metrics_row r = {
		.kind = DLH_ROW_EVAL, .step = 100, .epoch = 1, .time_s = 9, .loss = 0.4,
		.accuracy = 0.9, .lr = 5, .samples_per_s = 7,
	}, back;
	char line[DLH_METRICS_LINE_MAX];

	CHECK(dlh_metrics_row_format(&r, line, sizeof line) > 0);
	CHECK_MSG(!strcmp(line, "eval,100,1,9.000,0.4,0.9,,\n"), "%s", line);
	CHECK(parse(line, &back) == 0);
	CHECK(back.kind == DLH_ROW_EVAL && back.step == 100 && back.loss == 0.4 &&
	      back.accuracy == 0.9 && back.lr == 0 && back.samples_per_s == 0);
	/* a program's own eval row may stop after the accuracy */
	CHECK(parse("eval,3,1,0.5,1.5,0.25", &back) == 0 && back.step == 3 && back.accuracy == 0.25);
}

TEST(parser_refuses_what_is_not_a_row)
{
	struct dlh_metrics_row r;

	CHECK(parse(DLH_METRICS_HEADER, &r) == -EINVAL);
	CHECK(parse("", &r) == -EINVAL);
	CHECK(parse("\n", &r) == -EINVAL);
	CHECK(parse("train,1,1,0.1,2.3,0.1,0.01", &r) == -EINVAL);          /* 7 columns */
	CHECK(parse("train,1,1,0.1,2.3,0.1,0.01,5,9", &r) == -EINVAL);      /* 9 columns */
	CHECK(parse("train,1x,1,0.1,2.3,0.1,0.01,5", &r) == -EINVAL);       /* step */
	CHECK(parse("train,-1,1,0.1,2.3,0.1,0.01,5", &r) == -EINVAL);       /* negative step */
	CHECK(parse("train,1,1,0.1,2.3,,0.01,5", &r) == -EINVAL);           /* empty accuracy */
	CHECK(parse("train,1,1,0.1,2.3 ,0.1,0.01,5", &r) == -EINVAL);       /* junk after a number */
	CHECK(parse("test,1,1,0.1,2.3,0.1,0.01,5", &r) == -EINVAL);         /* kind */
	CHECK(parse("eval,1,1,0.1,2.3", &r) == -EINVAL);                    /* 5 columns */
	CHECK(parse("eval,1,1,0.1,2.3,0.5,x,", &r) == -EINVAL);
	CHECK(parse("train,1,1,0.1,2.3,0.1,0.01,5\ntrain,2,1,0.2,2.2,0.1,0.01,5", &r) == -EINVAL);
	char longrow[DLH_METRICS_LINE_MAX + 8];
	memset(longrow, '1', sizeof longrow - 1);
	longrow[sizeof longrow - 1] = '\0';
	memcpy(longrow, "train,", 6);
	CHECK(parse(longrow, &r) == -EINVAL);
	/* a CRLF line as an editor may leave it */
	CHECK(parse("train,4,1,0.1,2.3,0.1,0.01,5\r\n", &r) == 0 && r.step == 4 && r.samples_per_s == 5);
}

TEST(formatter_says_when_the_buffer_is_short)
{
	struct dlh_metrics_row r = { .kind = DLH_ROW_TRAIN, .step = 1, .epoch = 1 };
	char small[10];

	CHECK(dlh_metrics_row_format(&r, small, sizeof small) == -EOVERFLOW);
}

int main(void)
{
	RUN(train_row_formats_as_documented_and_parses_back);
	RUN(eval_row_leaves_lr_and_throughput_empty);
	RUN(parser_refuses_what_is_not_a_row);
	RUN(formatter_says_when_the_buffer_is_short);
	return CHECK_EXIT();
}
