/* conv.cuh - a conv's product computed directly (gpu.h's dlt_gpu_conv_direct)
 *
 * Included by gpu.cu, which runs it for a conv of few taps, and by
 * calib.cu, which times it for the estimator (dlt_gpu_cal's direct_s): the
 * kernel measured is the kernel run. Both files are also compiled as plain
 * C++ over tests/unit/gpu_emu.h, which runs it on the CPU. */
#ifndef DLT_CONV_CUH
#define DLT_CONV_CUH

/* t[f][i][p] (F x N, N = n H W: the layout of the im2col product's GEMM,
 * which the conv's bias, ReLU and pool kernels read) = the sum over c, ky,
 * kx in that order (the im2col matrix's rows') of w[f][c][ky][kx] times
 * x[i][c][y + ky - k/2][x + kx - k/2] (0 outside the image: the same
 * padding) for pixel p = (y, x) of image i: one thread an output,
 * grid-stride in index type I (gpu.cu's LAUNCH_IDX: every index of x and
 * t below I's range). The threads of a warp share f (its weights: one
 * broadcast read each) and read neighbouring pixels; the input, a few
 * hundred KB for a first layer, stays in the caches (read-only: the
 * pointers do not alias). */
template <typename I>
__global__ void k_conv_direct(float *__restrict__ t, const float *__restrict__ x,
			      const float *__restrict__ w, int C, int H, int W, int k, int F, int n)
{
	const int pad = k / 2, R = C * k * k;
	const I hw = (I)H * (I)W, N = (I)n * hw;
	const size_t total = (size_t)F * (size_t)N;

	for (I e = (I)(blockIdx.x * blockDim.x + threadIdx.x); e < (I)total;
	     e += (I)(gridDim.x * blockDim.x)) {
		const I f = e / N, q = e - f * N, i = q / hw, p = q - i * hw;
		const int yy = (int)p / W, xx = (int)p - yy * W;
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
		t[e] = s;
	}
}

#endif
