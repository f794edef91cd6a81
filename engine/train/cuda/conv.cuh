/* conv.cuh - a conv's product computed directly (gpu.h's dlt_gpu_conv_direct)
 *
 * Included by gpu.cu, which runs it for a conv of few taps, and by
 * calib.cu, which times it for the estimator (dlt_gpu_cal's direct_s): the
 * kernel measured is the kernel run. Both files are also compiled as plain
 * C++ over tests/unit/gpu_emu.h, which runs it on the CPU. */
#ifndef DLT_CONV_CUH
#define DLT_CONV_CUH

#include <stdint.h>

#include "engine/train/gpu.h"   /* DLT_GPU_DIRECT_TAPS */

/* A loop over the taps unrolled, so that the sums indexed by them stay in
 * registers (g++ over the emulation: its own spelling). */
#ifdef __CUDACC__
#define DLT_UNROLL _Pragma("unroll")
#else
#define DLT_UNROLL _Pragma("GCC unroll 40")
#endif

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

/* Threads a block of k_conv_pool_dw at most (a power of two: its tree). */
#define DLT_CONV_DW_THREADS 256

/* The weight and bias gradients of a conv of few taps that is a net's
 * first layer with a ReLU and a pool after it (gpu.h's
 * dlt_gpu_conv_dw_direct), from the pool's output gradient dy and the
 * argmax arg and output yp that k_conv_direct wrote (n x F x oh x ow
 * each), and the conv's input x: part[s][f][r] (a part F x (R + 1), R = C
 * k k, column R the bias's) = the sum, over the images of chunk s (images
 * [s n / S, (s + 1) n / S)) and their pooled outputs o of filter f whose
 * maximum yp[o] is above 0 (the ReLU's mask), of dy[o] times x[i][c][py +
 * ky - k/2][px + kx - k/2] for tap r = (c, ky, kx) and (py, px) the pixel
 * arg[o] (0 outside the image), and of dy[o] for r = R: what the im2col
 * product of the gradient k_pool_conv_gather writes would sum, its zeros
 * (3 in 4 for a 2 x 2 pool) and the matrix skipped. gpu.cu adds the S
 * parts in order (k_sum_parts). One block a (f, s): blockIdx.x = s F + f;
 * blockDim.x a power of two up to DLT_CONV_DW_THREADS (one over the
 * emulation). Each thread sums a stride of the chunk's outputs into
 * registers (the taps unrolled up to DLT_GPU_DIRECT_TAPS), then the block
 * adds the threads' sums in a tree in shared memory: the same order
 * whatever the timing. Index type I as k_conv_direct's; R at most
 * DLT_GPU_DIRECT_TAPS (the caller's dlt_gpu_conv_dw_direct). */
template <typename I>
__global__ void k_conv_pool_dw(float *__restrict__ part, const float *__restrict__ dy,
			       const int32_t *__restrict__ arg, const float *__restrict__ yp,
			       const float *__restrict__ x, int C, int H, int W, int k, int F, int n,
			       int S, int oh, int ow)
{
	__shared__ int tap_at[DLT_GPU_DIRECT_TAPS], tap_y[DLT_GPU_DIRECT_TAPS];
	__shared__ int tap_x[DLT_GPU_DIRECT_TAPS];
	__shared__ float red[(DLT_GPU_DIRECT_TAPS + 1) * DLT_CONV_DW_THREADS];
	const int R = C * k * k, pad = k / 2, f = (int)(blockIdx.x % (unsigned)F);
	const int s = (int)(blockIdx.x / (unsigned)F);
	const unsigned t = threadIdx.x, nt = blockDim.x;
	const I hw = (I)H * (I)W, op = (I)oh * (I)ow;
	const I i0 = (I)((size_t)s * (size_t)n / (size_t)S);
	const I outs = (I)((size_t)(s + 1) * (size_t)n / (size_t)S) - i0;
	float acc[DLT_GPU_DIRECT_TAPS + 1];   /* the taps', then the bias's */

	for (int r = (int)t; r < R; r += (int)nt) {   /* tap r: its plane, its offsets */
		const int kk = r % (k * k);

		tap_at[r] = r / (k * k) * H * W;
		tap_y[r] = kk / k - pad;
		tap_x[r] = kk % k - pad;
	}
	__syncthreads();
	DLT_UNROLL
	for (int r = 0; r <= DLT_GPU_DIRECT_TAPS; r++)
		acc[r] = 0.0f;
	for (I e = (I)t; e < outs * op; e += (I)nt) {
		const I i = i0 + e / op, o = (i * (I)F + (I)f) * op + e % op;

		if (!(yp[o] > 0.0f))
			continue;
		const float g = dy[o];
		const int p = arg[o], py = p / W, px = p - py * W;
		const float *xi = x + i * (I)C * hw;

		DLT_UNROLL
		for (int r = 0; r < DLT_GPU_DIRECT_TAPS; r++)
			if (r < R) {
				const int sy = py + tap_y[r], sx = px + tap_x[r];

				if (sy >= 0 && sy < H && sx >= 0 && sx < W)
					acc[r] += g * xi[tap_at[r] + sy * W + sx];
			}
		acc[DLT_GPU_DIRECT_TAPS] += g;
	}
	DLT_UNROLL
	for (int r = 0; r < DLT_GPU_DIRECT_TAPS; r++)
		if (r < R)
			red[r * nt + t] = acc[r];
	red[R * nt + t] = acc[DLT_GPU_DIRECT_TAPS];
	__syncthreads();
	for (unsigned w = nt / 2; w > 0; w >>= 1) {
		if (t < w)
			for (int r = 0; r <= R; r++)
				red[r * nt + t] += red[r * nt + t + w];
		__syncthreads();
	}
	for (int r = (int)t; r <= R; r += (int)nt)
		part[((size_t)s * (size_t)F + (size_t)f) * (size_t)(R + 1) + (size_t)r] = red[r * nt];
}

#endif
