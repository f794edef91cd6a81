/* test_report.c - a job's plots as SVG (engine/report) and the in-order scan
 * of metrics.csv they are fed from (engine/report/metrics.c) */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/report/metrics.h"
#include "engine/report/chart.h"
#include "engine/report/plots.h"
#include "tests/unit/check.h"
#include "tests/unit/tmpdir.h"

#define TAGS_MAX 64   /* nesting the checker follows */

/* 1 when s is well-formed XML as far as our SVG goes: one root element,
 * every tag closed in order, attribute values quoted, '<' never in text,
 * '&' only as an entity. Sets why on failure. */
static int well_formed(const char *s, const char **why)
{
	char stack[TAGS_MAX][32];
	int depth = 0, roots = 0;
	*why = "";
	while (*s) {
		if (*s == '&') {
			size_t n = strspn(s + 1, "#abcdefghijklmnopqrstuvwxyz0123456789");
			if (s[1 + n] != ';' || !n) {
				*why = "a bare &";
				return 0;
			}
			s += n + 2;
			continue;
		}
		if (*s == '>') {
			*why = "a bare >";
			return 0;
		}
		if (*s != '<') {
			if (!depth && !strchr(" \t\r\n", *s)) {
				*why = "text outside the root";
				return 0;
			}
			s++;
			continue;
		}
		if (!strncmp(s, "<!--", 4) || !strncmp(s, "<?", 2)) {
			const char *end = strstr(s, s[1] == '!' ? "-->" : "?>");
			if (!end) {
				*why = "an unclosed comment";
				return 0;
			}
			s = end + 2;
			continue;
		}
		int closing = s[1] == '/';
		const char *name = s + 1 + closing;
		size_t n = strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_");
		if (!n || n >= sizeof stack[0]) {
			*why = "a tag without a name";
			return 0;
		}
		const char *p = name + n;
		char quote = 0;
		for (; *p && (quote || *p != '>'); p++) {
			if (quote && *p == '<') {
				*why = "< in an attribute";
				return 0;
			}
			if (*p == '"' || *p == '\'')
				quote = quote == *p ? 0 : quote ? quote : *p;
		}
		if (!*p) {
			*why = "an unclosed tag";
			return 0;
		}
		int empty = p[-1] == '/';
		if (closing) {
			if (!depth || strncmp(stack[depth - 1], name, n) || stack[depth - 1][n]) {
				*why = "a closing tag out of order";
				return 0;
			}
			depth--;
		} else if (!empty) {
			if (depth == TAGS_MAX) {
				*why = "too deep";
				return 0;
			}
			if (!depth)
				roots++;
			memcpy(stack[depth], name, n);
			stack[depth++][n] = '\0';
		} else if (!depth) {
			roots++;
		}
		s = p + 1;
	}
	if (depth || roots != 1) {
		*why = depth ? "unclosed elements" : "not one root";
		return 0;
	}
	return 1;
}

/* 1 when python3's xml.etree parses the file at path (-1: no python3). */
static int etree_parses(const char *path)
{
	if (system("command -v python3 >/dev/null 2>&1") != 0)
		return -1;
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' %s",
		 path);
	return system(cmd) == 0;
}

/* Occurrences of needle in hay. */
static int count(const char *hay, const char *needle)
{
	int k = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		k++;
	return k;
}

/* Points of the polyline drawn in colour (0: none). */
static int polyline_points(const char *svg, const char *color)
{
	char want[64];
	snprintf(want, sizeof want, "<polyline fill=\"none\" stroke=\"%s\"", color);
	const char *p = strstr(svg, want);
	if (!p || !(p = strstr(p, "points=\"")))
		return 0;
	int k = 0;
	for (p += 8; *p && *p != '"'; p++)
		k += *p == ',';
	return k;
}

static void row(struct dlh_plots *p, enum dlh_row_kind kind, long step, double t, double loss,
		double acc, double rate)
{
	struct dlh_metrics_row r = { .kind = kind, .step = step, .epoch = 1, .time_s = t, .loss = loss,
				     .accuracy = acc, .lr = 0.05, .samples_per_s = rate };
	dlh_plots_feed(p, &r);
}

/* A few hundred steps with evaluations: every plot of it. */
static void small_run(struct dlh_plots *p)
{
	dlh_plots_init(p);
	for (long s = 1; s <= 300; s++) {
		row(p, DLH_ROW_TRAIN, s, 0.05 * (double)s, 2.3 / sqrt((double)s), 1 - 0.9 / sqrt((double)s),
		    1200 + (double)(s % 7));
		if (s % 100 == 0)
			row(p, DLH_ROW_EVAL, s, 0.05 * (double)s + 0.2, 2.0 / sqrt((double)s), 0.8, 0);
	}
}

static const struct dlh_plot_info info = { .job = "job 7 (fmnist)", .predicted_s = 14, .total_steps = 300 };

TEST(every_plot_is_well_formed_xml_with_title_axes_and_legend)
{
	static struct dlh_plots p;
	char dir[512], path[600];
	static const char *const ylabel[DLH_PLOTS] = { ">loss<", ">accuracy<", ">samples per second<", ">step<" };
	fresh_dir(dir, sizeof dir, "well-formed");
	small_run(&p);
	for (int w = 0; w < DLH_PLOTS; w++) {
		struct dlh_buf b = { 0 };
		const char *why;
		CHECK(dlh_plot_svg(&p, (enum dlh_plot)w, &info, &b) == 0);
		CHECK_MSG(well_formed(b.data, &why), "plot %d: %s", w, why);
		CHECK_MSG(!strncmp(b.data, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39), "plot %d", w);
		CHECK_MSG(strstr(b.data, "job 7 (fmnist): "), "plot %d: no title", w);
		CHECK_MSG(strstr(b.data, ylabel[w]), "plot %d: no y axis title %s", w, ylabel[w]);
		CHECK_MSG(strstr(b.data, w == DLH_PLOT_PROGRESS ? ">time since start (s)<" : ">step<"),
			  "plot %d: no x axis title", w);
		CHECK_MSG(count(b.data, "text-anchor=\"end\"") >= 3, "plot %d: y tick labels", w);
		CHECK_MSG(!strstr(b.data, "no data yet"), "plot %d", w);
		snprintf(path, sizeof path, "%s/%d.svg", dir, w);
		write_text(path, b.data);
		int parsed = etree_parses(path);
		CHECK_MSG(parsed != 0, "plot %d: xml.etree does not parse %s", w, path);
		dlh_buf_free(&b);
	}
}

TEST(loss_plot_has_train_raw_smoothed_and_test_series)
{
	static struct dlh_plots p;
	struct dlh_buf b = { 0 };
	small_run(&p);
	CHECK(dlh_plot_svg(&p, DLH_PLOT_LOSS, &info, &b) == 0);
	CHECK(polyline_points(b.data, "#9ecae1") == 300);   /* few rows: every one */
	CHECK(polyline_points(b.data, "#1f77b4") == 300);
	CHECK(polyline_points(b.data, "#d62728") == 3);
	CHECK(count(b.data, "<circle") == 3);               /* the evaluations are dots too */
	CHECK(strstr(b.data, ">train loss (smoothed)<") && strstr(b.data, ">test loss<"));
	dlh_buf_free(&b);
}

TEST(progress_plot_draws_the_estimate_and_its_finish_line)
{
	static struct dlh_plots p;
	struct dlh_buf b = { 0 };
	small_run(&p);
	CHECK(dlh_plot_svg(&p, DLH_PLOT_PROGRESS, &info, &b) == 0);
	CHECK(polyline_points(b.data, "#17becf") == 300);
	CHECK(polyline_points(b.data, "#8c564b") == 2);
	CHECK(strstr(b.data, "stroke-dasharray=\"7 4\""));
	CHECK(strstr(b.data, ">predicted finish<") && strstr(b.data, "stroke=\"#e377c2\""));
	CHECK_MSG(strstr(b.data, ">estimate: 14 s for 300 steps<"), "%s", b.data);
	dlh_buf_free(&b);
	struct dlh_plot_info none = { .job = "job 8" };
	CHECK(dlh_plot_svg(&p, DLH_PLOT_PROGRESS, &none, &b) == 0);
	CHECK(!strstr(b.data, "#8c564b") && !strstr(b.data, "#e377c2"));
	CHECK(strstr(b.data, ">no estimate for this job<"));
	dlh_buf_free(&b);
}

TEST(empty_input_says_no_data_yet_and_keeps_its_axis_titles)
{
	static struct dlh_plots p;
	dlh_plots_init(&p);
	for (int w = 0; w < DLH_PLOTS; w++) {
		struct dlh_buf b = { 0 };
		const char *why;
		CHECK(dlh_plot_svg(&p, (enum dlh_plot)w, &info, &b) == 0);
		CHECK_MSG(well_formed(b.data, &why), "plot %d: %s", w, why);
		CHECK_MSG(strstr(b.data, ">no data yet<"), "plot %d", w);
		CHECK(!strstr(b.data, "<circle"));
		/* progress draws the estimate's line before the first step */
		CHECK(w == DLH_PLOT_PROGRESS ? polyline_points(b.data, "#8c564b") == 2 :
					       !strstr(b.data, "<polyline"));
		CHECK(strstr(b.data, w == DLH_PLOT_PROGRESS ? ">time since start (s)<" : ">step<"));
		dlh_buf_free(&b);
	}
}

TEST(one_row_is_a_dot_on_a_range_around_it)
{
	static struct dlh_plots p;
	struct dlh_buf b = { 0 };
	const char *why;
	dlh_plots_init(&p);
	row(&p, DLH_ROW_TRAIN, 1, 0.5, 2.3, 0.1, 900);
	CHECK(dlh_plot_svg(&p, DLH_PLOT_THROUGHPUT, &info, &b) == 0);
	CHECK(well_formed(b.data, &why));
	CHECK(!strstr(b.data, "no data yet") && !strstr(b.data, "<polyline"));
	CHECK(count(b.data, "<circle") == 1);
	CHECK(strstr(b.data, ">1000<"));   /* the y axis reaches past 900 from 0 */
	dlh_buf_free(&b);
}

TEST(nan_and_infinite_values_never_reach_the_svg)
{
	static struct dlh_plots p;
	struct dlh_buf b = { 0 };
	const char *why;
	dlh_plots_init(&p);
	row(&p, DLH_ROW_TRAIN, 1, 0.1, NAN, NAN, INFINITY);
	row(&p, DLH_ROW_TRAIN, 2, 0.2, 2.0, 0.5, 100);
	row(&p, DLH_ROW_TRAIN, 3, NAN, INFINITY, 0.6, NAN);
	row(&p, DLH_ROW_TRAIN, 4, 0.4, 1.0, -INFINITY, 120);
	row(&p, DLH_ROW_EVAL, 4, 0.5, NAN, NAN, 0);
	CHECK(p.train_rows == 4 && p.eval_rows == 1);
	CHECK(p.loss.fed == 2 && p.test_loss.fed == 0);
	for (int w = 0; w < DLH_PLOTS; w++) {
		CHECK(dlh_plot_svg(&p, (enum dlh_plot)w, &info, &b) == 0);
		CHECK_MSG(well_formed(b.data, &why), "plot %d: %s", w, why);
		CHECK_MSG(!strstr(b.data, "nan") && !strstr(b.data, "inf") && !strstr(b.data, "NaN"), "plot %d: %s", w, b.data);
		b.len = 0;
	}
	/* the smoothed loss skipped the NaN: its first point is 2.0 itself */
	struct dlh_point pts[DLH_PLOT_POINTS_MAX];
	CHECK(dlh_thin_points(&p.loss_smooth, pts) == 2 && fabs(pts[0].y - 2.0) < 1e-9);
	/* a series of huge values alone: left out as well */
	struct dlh_point big[2] = { { 0, 1e308 }, { 1, -1e308 } };
	struct dlh_chart c = { .title = "t", .x_label = "x", .y_label = "y", .nseries = 1,
			       .series = { { .label = "s", .color = "#000000", .pt = big, .n = 2 } } };
	b.len = 0;
	CHECK(dlh_chart_svg(&c, &b) == 0 && strstr(b.data, "no data yet"));
	dlh_buf_free(&b);
}

TEST(a_long_run_is_thinned_to_the_bound_and_keeps_its_extremes)
{
	static struct dlh_plots p;
	struct dlh_buf b = { 0 };
	dlh_plots_init(&p);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long s = 1; s <= 100000; s++) {
		double loss = s == 61234 ? 50.0 : s == 7777 ? -3.0 : 1.0 / (double)s;
		row(&p, DLH_ROW_TRAIN, s, 0.01 * (double)s, loss, 0.5, 1000);
		if (s % 50 == 0)
			row(&p, DLH_ROW_EVAL, s, 0.01 * (double)s, 0.5, 0.9, 0);
	}
	struct dlh_point pts[DLH_PLOT_POINTS_MAX];
	size_t n = dlh_thin_points(&p.loss, pts);
	CHECK_MSG(n <= DLH_PLOT_POINTS_MAX && n > DLH_PLOT_POINTS_MAX / 4, "%zu points", n);
	int spike = 0, dip = 0, ordered = 1;
	for (size_t i = 0; i < n; i++) {
		spike |= pts[i].x == 61234 && pts[i].y == 50.0;
		dip |= pts[i].x == 7777 && pts[i].y == -3.0;
		ordered &= !i || pts[i].x > pts[i - 1].x;
	}
	CHECK(spike && dip && ordered);
	CHECK(pts[0].x == 1);   /* the first step's bucket keeps it: its loss is the highest */
	for (int w = 0; w < DLH_PLOTS; w++) {
		CHECK(dlh_plot_svg(&p, (enum dlh_plot)w, &info, &b) == 0);
		b.len = 0;
	}
	CHECK(dlh_plot_svg(&p, DLH_PLOT_LOSS, &info, &b) == 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(polyline_points(b.data, "#9ecae1") <= DLH_PLOT_POINTS_MAX);
	CHECK(polyline_points(b.data, "#d62728") <= DLH_PLOT_POINTS_MAX);
	CHECK_MSG(b.len < 120 * 1024, "loss.svg of 100k steps is %zu bytes", b.len);
	printf("measured: 100k rows fed and five plots drawn in %.0f ms; loss.svg %zu bytes\n",
	       1e3 * ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec)), b.len);
	dlh_buf_free(&b);
}

TEST(text_is_escaped_for_xml)
{
	struct dlh_point pt[2] = { { 0, 0 }, { 1, 1 } };
	struct dlh_chart c = { .title = "a <b> & \"c\" 'd'\x01", .x_label = "x<", .y_label = "y&",
			       .nseries = 1,
			       .series = { { .label = "</svg>", .color = "#000\"", .pt = pt, .n = 2 } } };
	struct dlh_buf b = { 0 };
	const char *why;
	CHECK(dlh_chart_svg(&c, &b) == 0);
	CHECK_MSG(well_formed(b.data, &why), "%s", why);
	CHECK(strstr(b.data, ">a &lt;b&gt; &amp; &quot;c&quot; &#39;d&#39;?<"));
	CHECK(strstr(b.data, ">x&lt;<") && strstr(b.data, ">y&amp;<") && strstr(b.data, ">&lt;/svg&gt;<"));
	CHECK(count(b.data, "</svg>") == 1);
	dlh_buf_free(&b);
}

TEST(tick_steps_are_one_two_or_five_times_a_power_of_ten)
{
	const struct { double span, want; } cases[] = {
		{ 10, 2 }, { 1, 0.2 }, { 7, 1 }, { 0.03, 0.005 }, { 2300, 500 }, { 1e6, 2e5 }, { 100000, 20000 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		double got = dlh_chart_tick_step(cases[i].span, 6);
		CHECK_MSG(fabs(got - cases[i].want) < 1e-9 * cases[i].want, "span %g: %g, want %g",
			  cases[i].span, got, cases[i].want);
	}
}

/* what dlh_metrics_scan hands over */
struct seen {
	long steps[16];
	int n;
};

static void seen_row(void *ctx, const struct dlh_metrics_row *r)
{
	struct seen *s = ctx;
	if (s->n < 16)
		s->steps[s->n++] = r->kind == DLH_ROW_EVAL ? -r->step : r->step;
}

TEST(scan_reads_complete_rows_in_order_and_only_the_newest_of_a_large_file)
{
	char dir[512], path[600], longline[400];
	struct seen s = { 0 };
	fresh_dir(dir, sizeof dir, "scan");
	snprintf(path, sizeof path, "%s/metrics.csv", dir);
	memset(longline, 'x', sizeof longline - 2);
	longline[sizeof longline - 2] = '\n';
	longline[sizeof longline - 1] = '\0';
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "%strain,1,1,0.1,2.0,0.1,0.05,100\nbogus\n%s", DLH_METRICS_HEADER, longline);
	fprintf(f, "train,2,1,0.2,1.9,0.2,0.05,100\neval,2,1,0.3,1.8,0.3,,\ntrain,3,1,0.3,1.");
	fclose(f);
	CHECK(dlh_metrics_scan(path, 1 << 20, seen_row, &s) == 0);
	CHECK_MSG(s.n == 3 && s.steps[0] == 1 && s.steps[1] == 2 && s.steps[2] == -2, "%d rows", s.n);
	/* the newest 50 bytes: the row cut by the start is not one */
	memset(&s, 0, sizeof s);
	CHECK(dlh_metrics_scan(path, 50, seen_row, &s) == 1);
	CHECK_MSG(s.n == 1 && s.steps[0] == -2, "%d rows, first %ld", s.n, s.steps[0]);
	memset(&s, 0, sizeof s);
	CHECK(dlh_metrics_scan("/nonexistent/metrics.csv", 1 << 20, seen_row, &s) == 0 && s.n == 0);
}

static void plots_feed(void *ctx, const struct dlh_metrics_row *r)
{
	dlh_plots_feed(ctx, r);
}

/* A program's own columns after the eight: named by the header, read by
 * the scan, drawn one plot each, the newest values read back */
TEST(extra_columns_are_drawn_each_and_read_back)
{
	static struct dlh_plots p;
	char dir[512], path[600];
	struct dlh_metrics_columns c;
	struct dlh_metrics m;
	fresh_dir(dir, sizeof dir, "extra");
	snprintf(path, sizeof path, "%s/metrics.csv", dir);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fprintf(f, "kind,step,epoch,time_s,loss,accuracy,lr,samples_per_s,grad_norm,bleu\n");
	for (int s = 1; s <= 40; s++)
		fprintf(f, "train,%d,1,%d,2.0,0.5,0.1,nan,%g,\n", s, s, 1.0 / s);
	fprintf(f, "eval,40,1,41,1.5,0.6,,,,21.5\n");
	fclose(f);
	CHECK(dlh_metrics_columns_read(path, &c) == 0 && c.nextra == 2);
	CHECK(!strcmp(c.extra[0], "grad_norm") && !strcmp(c.extra[1], "bleu"));
	dlh_plots_init(&p);
	CHECK(dlh_metrics_scan(path, 1 << 20, plots_feed, &p) == 0 && p.train_rows == 40);
	struct dlh_buf b = { 0 };
	const char *why;
	CHECK(dlh_plot_extra_svg(&p, 0, "grad_norm", &info, &b) == 0);
	CHECK_MSG(well_formed(b.data, &why), "%s", why);
	CHECK(strstr(b.data, "job 7 (fmnist): grad_norm") && strstr(b.data, ">grad_norm<"));
	CHECK(polyline_points(b.data, "#bcbd22") == 40);
	CHECK(!strstr(b.data, "(eval)"));
	dlh_buf_free(&b);
	CHECK(dlh_plot_extra_svg(&p, 1, "bleu", &info, &b) == 0);
	CHECK(strstr(b.data, ">bleu (eval)<") && count(b.data, "<circle") == 1);
	dlh_buf_free(&b);
	CHECK(dlh_plot_extra_svg(&p, DLH_METRICS_EXTRA_MAX, "x", &info, &b) == -EINVAL);
	CHECK(dlh_metrics_read(path, &m) == 0 && m.have_train && m.have_eval && m.step == 40);
	CHECK(m.cols.nextra == 2 && m.train_nextra == 2 && m.train_extra[0] == 1.0 / 40 &&
	      isnan(m.train_extra[1]) && isnan(m.samples_per_s));
	CHECK(m.eval_nextra == 2 && isnan(m.eval_extra[0]) && m.eval_extra[1] == 21.5);
	/* the eight-column readers see the same rows as before */
	CHECK(m.loss == 2.0 && m.test_accuracy == 0.6);
	/* no header line (yet): no columns */
	f = fopen(path, "w");
	fprintf(f, "kind,step,epoch,time_s,loss,accur");
	fclose(f);
	CHECK(dlh_metrics_columns_read(path, &c) == 0 && c.nextra == 0);
}

int main(void)
{
	if (tmp_root_make())
		return 1;
	RUN(every_plot_is_well_formed_xml_with_title_axes_and_legend);
	RUN(loss_plot_has_train_raw_smoothed_and_test_series);
	RUN(progress_plot_draws_the_estimate_and_its_finish_line);
	RUN(empty_input_says_no_data_yet_and_keeps_its_axis_titles);
	RUN(one_row_is_a_dot_on_a_range_around_it);
	RUN(nan_and_infinite_values_never_reach_the_svg);
	RUN(a_long_run_is_thinned_to_the_bound_and_keeps_its_extremes);
	RUN(text_is_escaped_for_xml);
	RUN(tick_steps_are_one_two_or_five_times_a_power_of_ten);
	RUN(scan_reads_complete_rows_in_order_and_only_the_newest_of_a_large_file);
	RUN(extra_columns_are_drawn_each_and_read_back);
	tmp_root_remove();
	return CHECK_EXIT();
}
