/* test_cost.c - the per-sample model costs the estimator starts from */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/plan/cost.h"
#include "schema/spec.h"
#include "tests/unit/check.h"

/* The spec of the bench's MLP, 784-256-128-100-10. */
static void mlp_spec(struct dlh_spec *s)
{
	dlh_spec_defaults(s);
	strcpy(s->model_type, "mlp");
	s->nlayers = 3;
	s->layers[0] = 256;
	s->layers[1] = 128;
	s->layers[2] = 100;
}

/* The TensorFlow-docs CNN (examples/fashion-mnist-cnn.ini). */
static void cnn_spec(struct dlh_spec *s)
{
	dlh_spec_defaults(s);
	strcpy(s->model_type, "cnn");
	s->nconv = 2;
	s->conv_filters[0] = 32;
	s->conv_kernel[0] = 5;
	s->conv_filters[1] = 64;
	s->conv_kernel[1] = 5;
	s->pool = 2;
	s->ndense = 1;
	s->dense[0] = 1024;
	s->dropout = 0.4;
}

TEST(mlp_counts_match_hand_computation)
{
	struct dlh_spec s;
	struct dlh_model_cost mc;
	char err[256];

	mlp_spec(&s);
	CHECK_MSG(dlh_model_cost(&s, 1, 28, 28, 10, &mc, err, sizeof err) == 0, "%s", err);
	/* weights 784*256 + 256*128 + 128*100 + 100*10, biases 256+128+100+10 */
	CHECK_MSG(mc.params == 247766, "params %zu", mc.params);
	CHECK_MSG(mc.macs == 247272.0, "macs %g", mc.macs);
	/* dense relu x 3, then the output dense (no dropout: it is 0) */
	CHECK_MSG(mc.nlayers == 7, "%d layers", mc.nlayers);
	CHECK(strcmp(mc.layer[6].kind, "dense") == 0 && mc.layer[6].out == 10);
	CHECK(mc.act == 256 * 2 + 128 * 2 + 100 * 2 + 10);
	/* forward, weight gradients, input gradients but the first layer's */
	CHECK(mc.train_flops == 2.0 * (3.0 * 247272.0 - 784.0 * 256.0));
}

TEST(cnn_counts_match_hand_computation)
{
	struct dlh_spec s;
	struct dlh_model_cost mc;
	char err[256];

	cnn_spec(&s);
	CHECK_MSG(dlh_model_cost(&s, 1, 28, 28, 10, &mc, err, sizeof err) == 0, "%s", err);
	/* conv 32 5x5 on 1 channel, conv 64 5x5 on 32, dense 3136 -> 1024 -> 10 */
	CHECK_MSG(mc.params == 32 * 25 + 32 + 64 * 800 + 64 + 3136 * 1024 + 1024 + 1024 * 10 + 10,
		  "params %zu", mc.params);
	CHECK_MSG(mc.params == 3274634, "params %zu", mc.params);
	CHECK_MSG(mc.macs == 28.0 * 28 * 32 * 25 + 14.0 * 14 * 64 * 800 + 3136.0 * 1024 + 1024.0 * 10,
		  "macs %g", mc.macs);
	/* conv relu pool conv relu pool dense relu dropout dense */
	CHECK_MSG(mc.nlayers == 10, "%d layers", mc.nlayers);
	CHECK(strcmp(mc.layer[2].kind, "pool") == 0 && mc.layer[2].out == 32 * 14 * 14);
	CHECK(strcmp(mc.layer[8].kind, "dropout") == 0 && mc.layer[8].out == 1024);
}

TEST(pool_floor_and_no_pool)
{
	struct dlh_spec s;
	struct dlh_model_cost mc;
	char err[256];

	cnn_spec(&s);
	s.pool = 3;   /* 28 -> 9 -> 3 */
	CHECK_MSG(dlh_model_cost(&s, 1, 28, 28, 10, &mc, err, sizeof err) == 0, "%s", err);
	CHECK(mc.layer[5].out == 64 * 3 * 3);
	CHECK(mc.layer[6].params == 64 * 9 * 1024 + 1024);
	s.pool = 1;   /* no pool layers */
	CHECK_MSG(dlh_model_cost(&s, 3, 8, 8, 4, &mc, err, sizeof err) == 0, "%s", err);
	CHECK(mc.nlayers == 8 && mc.layer[0].params == 32 * 3 * 25 + 32);
	CHECK(mc.layer[2].macs == 64.0 * 64 * 32 * 25);
}

TEST(pool_larger_than_input_is_refused)
{
	struct dlh_spec s;
	struct dlh_model_cost mc;
	char err[256];

	cnn_spec(&s);
	s.pool = 8;   /* 28 -> 3, then 8 > 3 */
	CHECK(dlh_model_cost(&s, 1, 28, 28, 10, &mc, err, sizeof err) == -EINVAL);
	CHECK_MSG(strstr(err, "pool 8") && strstr(err, "3x3") && strstr(err, "conv 2"), "%s", err);
	CHECK(dlh_model_cost(&s, 1, 28, 28, 1, &mc, err, sizeof err) == -EINVAL);
}

int main(void)
{
	RUN(mlp_counts_match_hand_computation);
	RUN(cnn_counts_match_hand_computation);
	RUN(pool_floor_and_no_pool);
	RUN(pool_larger_than_input_is_refused);
	return CHECK_EXIT();
}
