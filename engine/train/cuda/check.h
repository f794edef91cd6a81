/* check.h - the CUDA backend's error handling, shared by gpu.cu and
 * calib.cu: a failed call becomes -errno with a message in the caller's
 * err/errlen. Included after the CUDA headers (or tests/unit/gpu_emu.h). */
#ifndef DLT_CUDA_CHECK_H
#define DLT_CUDA_CHECK_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

/* Writes the printf message into err and returns rc. */
static int fail(int rc, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* -ENOMEM for an allocation failure, else -EIO. */
static int cuda_rc(cudaError_t e)
{
	return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

/* Returns from the calling function with call's result when it is < 0. */
#define TRY(call) do { int rc_ = (call); if (rc_ < 0) return rc_; } while (0)

/* Returns from the calling function with -errno and err set when call fails
 * (err and errlen in scope). */
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) \
	return fail(cuda_rc(e_), err, errlen, "cuda: %s: %s (%s)", #call, \
		    cudaGetErrorString(e_), cudaGetErrorName(e_)); } while (0)

#endif
