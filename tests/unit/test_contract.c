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
	CHECK(parse("train,1,1,0.1,2.3,0.1,0.01,5,9,1,2,3,4,5,6,7,8", &r) == -EINVAL);  /* 9 extras */
	CHECK(parse("train,1,1,0.1,2.3,0.1,0.01,5,x", &r) == -EINVAL);      /* an extra not a number */
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

TEST(extra_columns_are_a_programs_own_metrics)
{
	struct dlh_metrics_row r;
	struct dlh_metrics_columns c;
	char line[DLH_METRICS_LINE_MAX];

	/* the eight as before, then a number, an empty one, a number */
	CHECK(parse("train,7,1,0.5,2.3,0.1,0.01,5,0.25,,1e3\n", &r) == 0);
	CHECK(r.kind == DLH_ROW_TRAIN && r.step == 7 && r.samples_per_s == 5 && r.nextra == 3);
	CHECK(r.extra[0] == 0.25 && isnan(r.extra[1]) && r.extra[2] == 1000);
	CHECK(dlh_metrics_row_format(&r, line, sizeof line) > 0);
	CHECK_MSG(!strcmp(line, "train,7,1,0.500,2.3,0.1,0.01,5.0,0.25,,1000\n"), "%s", line);
	/* an eval row with empty lr and throughput and an extra after them */
	CHECK(parse("eval,7,1,0.6,1.5,0.5,,,21.5", &r) == 0 && r.nextra == 1 && r.extra[0] == 21.5);
	/* nan, as a program may write an unknown value */
	CHECK(parse("train,8,1,0.5,2.3,nan,nan,nan", &r) == 0 && isnan(r.accuracy) && r.nextra == 0);

	CHECK(dlh_metrics_header_parse(DLH_METRICS_HEADER, strlen(DLH_METRICS_HEADER), &c) == 0 &&
	      c.nextra == 0);
	const char *h = "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s,grad_norm,BLEU_4\r\n";
	CHECK(dlh_metrics_header_parse(h, strlen(h), &c) == 0 && c.nextra == 2);
	CHECK(!strcmp(c.extra[0], "grad_norm") && !strcmp(c.extra[1], "BLEU_4"));
	static const char *const bad[] = {
		"kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s,",            /* empty name */
		"kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s,a,a",         /* twice */
		"kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s,loss",        /* one of the eight */
		"kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s,../x",        /* not a file name */
		"kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s,_x",          /* not a letter first */
		"kind,step,epoch,time_s,loss,accuracy,lr,samples_per_sx",
		"kind,step,epoch,time_s,loss,accuracy,lr",
		"kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s,a,b,c,d,e,f,g,h,i",   /* 9 */
		"kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s,"
		"abcdefghijabcdefghijabcdefghij12",                                   /* 32 characters */
		"train,1,1,0.1,2.3,0.1,0.01,5",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECK_MSG(dlh_metrics_header_parse(bad[i], strlen(bad[i]), &c) == -EINVAL, "%s", bad[i]);
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
	RUN(extra_columns_are_a_programs_own_metrics);
	RUN(formatter_says_when_the_buffer_is_short);
	return CHECK_EXIT();
}
