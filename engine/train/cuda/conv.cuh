/* conv.cuh - a conv's product computed directly (gpu.h's dlt_gpu_conv_direct)
 *
 * Included by gpu.cu, which runs it for a conv of few taps, and by
 * calib.cu, which times it for the estimator (dlt_gpu_cal's direct_s): the
 * kernel measured is the kernel run. Both files are also compiled as plain
 * C++ over tests/unit/gpu_emu.h, which runs it on the CPU. */
#ifndef DLT_CONV_CUH
#define DLT_CONV_CUH

#include <stdint.h>

/* The conv's product at pixel (yy, xx) of image i's plane f: the sum
 * over c, ky, kx in that order (the im2col matrix's rows') of
 * w[f][c][ky][kx] times x[i][c][yy + ky - k/2][xx + kx - k/2] (0 outside
 * the image: the same padding), in index type I. */
template <typename I>
__device__ static inline float direct_at(const float *__restrict__ x, const float *__restrict__ w,
					 int C, int H, int W, int k, I i, I f, int yy, int xx)
{
	const int pad = k / 2, R = C * k * k;
	const I hw = (I)H * (I)W;
	const float *wf = w + f * (I)R, *xc = x + i * (I)C * hw;
	float s = 0.0f;

	for (int c = 0; c < C; c++, xc += hw)
		for (int ky = 0; ky < k; ky++) {
			const int sy = yy + ky - pad;

			if (sy < 0 || sy >= H)
				continue;
			const float *row = xc + (I)sy * (I)W, *wr = wf + (c * k + ky) * k;

			for (int kx = 0; kx < k; kx++) {
				const int sx = xx + kx - pad;

				if (sx >= 0 && sx < W)
					s += wr[kx] * row[sx];
			}
		}
	return s;
}

/* A conv of F filters on n images of C x H x W, and what the backend runs
 * after it in the same kernels (dlt_gpu_fused): y (NCHW, n x F x oh x ow)
 * = the product (direct_at) plus bias b[f], with relu its ReLU (as
 * gpu.cu's k_conv_scatter), and with a pool of pk x pk (pk > 1, oh x ow
 * its output) the window's first maximum of those, its index in the plane
 * in arg (as k_conv_pool_fwd): so neither the product nor the ReLU's
 * output is ever written. One thread an output of y, grid-stride in index
 * type I (gpu.cu's LAUNCH_IDX: every index of x and y below I's range).
 * The threads of a warp mostly share f (its weights: one broadcast read
 * each) and read neighbouring pixels; the input, a few hundred KB for a
 * first layer, stays in the caches (read-only: the pointers do not
 * alias). */
template <typename I>
__global__ void k_conv_direct(float *__restrict__ y, int32_t *__restrict__ arg,
			      const float *__restrict__ x, const float *__restrict__ w,
			      const float *__restrict__ b, int C, int H, int W, int k, int F, int n,
			      int relu, int pk, int oh, int ow)
{
	const I op = (I)oh * (I)ow;
	const size_t total = (size_t)n * (size_t)F * (size_t)op;

	for (I e = (I)(blockIdx.x * blockDim.x + threadIdx.x); e < (I)total;
	     e += (I)(gridDim.x * blockDim.x)) {
		const I q = e / op, i = q / (I)F, f = q - i * (I)F;
		const int o = (int)(e - q * op), oy = o / ow, ox = o - oy * ow;
		const float bf = b[f];
		float mx = 0.0f;
		int best = 0;

		for (int d = 0; d < pk * pk; d++) {
			const int yy = oy * pk + d / pk, xx = ox * pk + d % pk;
			float v = direct_at<I>(x, w, C, H, W, k, i, f, yy, xx) + bf;

			v = relu && !(v > 0.0f) ? 0.0f : v;
			if (d == 0 || v > mx) {
				mx = v;
				best = yy * W + xx;
			}
		}
		y[e] = mx;
		if (pk > 1)
			arg[e] = best;
	}
}

#endif
