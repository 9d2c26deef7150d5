/*
 * check.h: the library's one error idiom.
 *
 * A failing function records a message with mt_fail / mt_fail_cuda and
 * returns the status; nothing exits, aborts or prints. CUDA_CHECK wraps every
 * CUDA runtime call, and after every launch
 *
 *     kernel<<<grid, block>>>(...);
 *     CUDA_CHECK(mt_launch_status());
 *
 * reports a bad launch configuration at once, and (in sync-debug mode) an
 * asynchronous fault inside the kernel at the launch that caused it.
 */
#ifndef MT_CHECK_H
#define MT_CHECK_H

#include "cuda_compat.h"
#include "minitensor.h"

/* Record `status` and a printf-style message prefixed with the function name;
 * returns `status` so callers can write `return mt_fail(...)`. */
mt_status mt_fail(mt_status status, const char *func, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Record a failed CUDA call: the expression, the CUDA error string, file and
 * line. Returns MT_ERR_OUT_OF_MEMORY for allocation failures, else MT_ERR_CUDA. */
mt_status mt_fail_cuda(cudaError_t err, const char *expr, const char *file, int line);

/* cudaGetLastError(), plus a device synchronize in sync-debug mode. */
cudaError_t mt_launch_status(void);

#define CUDA_CHECK(call)                                                  \
    do {                                                                  \
        cudaError_t mt_err_ = (call);                                     \
        if (mt_err_ != cudaSuccess)                                       \
            return mt_fail_cuda(mt_err_, #call, __FILE__, __LINE__);      \
    } while (0)

/* Argument checks shared by the ops (src/validate.cu). Each returns MT_OK or
 * records a message naming `func` and the argument, and returns its status. */
mt_status mt_check_tensor(const char *func, const char *name, const mt_tensor *t);
mt_status mt_check_output(const char *func, const char *name, const mt_tensor *t);
mt_status mt_check_same_dtype(const char *func, const mt_tensor *a, const char *aname,
                              const mt_tensor *b, const char *bname);
mt_status mt_check_same_shape(const char *func, const mt_tensor *a, const char *aname,
                              const mt_tensor *b, const char *bname);
/* Does `small` broadcast to exactly `big`'s shape? */
mt_status mt_check_broadcast(const char *func, const mt_tensor *small, const char *sname,
                             const mt_tensor *big, const char *bname);
/* Writes the shape as "(2, 3, 4)" into buf, for messages. */
const char *mt_shape_str(const mt_tensor *t, char *buf, size_t bufsize);
/* Makes sure the device is initialised (the lazy first use). */
mt_status mt_ensure_init(const char *func);

#endif /* MT_CHECK_H */
