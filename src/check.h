/*
 * check.h: the library's one error idiom.
 *
 * A failing function records a message with mt_fail / mt_fail_cuda and
 * returns the status; nothing exits, aborts or prints. MT_TRY passes a failed
 * mt_status up to the caller, so an entry point reads as its checks, one per
 * line, then its work:
 *
 *     MT_TRY(mt_ensure_init(func));
 *     MT_TRY(mt_check_output(func, "out", &out));
 *     MT_TRY(mt_check_tensor(func, "in", &in));
 *
 * CUDA_CHECK wraps every CUDA runtime call, and after every launch
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
#include "task.h"

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

/* Returns the mt_status of expr from the enclosing function unless it is
 * MT_OK (expr has already recorded the message). */
#define MT_TRY(expr)                                                      \
    do {                                                                  \
        mt_status mt_try_ = (expr);                                       \
        if (mt_try_ != MT_OK)                                             \
            return mt_try_;                                               \
    } while (0)

#define CUDA_CHECK(call)                                                  \
    do {                                                                  \
        cudaError_t mt_err_ = (call);                                     \
        if (mt_err_ != cudaSuccess)                                       \
            return mt_fail_cuda(mt_err_, #call, __FILE__, __LINE__);      \
    } while (0)

/* Names the entry point in the messages of mt_fail_cuda (src/errors.cu);
 * mt_ensure_init sets it, as the first thing every entry point does. */
void mt_set_current_call(const char *func);

/* "CUDA driver 13.0, runtime 13.0" (or "none" for a missing one): most
 * failures to load or launch come from the two disagreeing, so messages say
 * which met (src/errors.cu). */
void mt_cuda_versions(char *buf, size_t size);

/* Argument checks shared by the ops (src/validate.cu). Each returns MT_OK or
 * records a message naming `func` and the argument, and returns its status. */
/* 0 <= id < count, else "unknown <what> id 7 (valid ids are 0..5)";
 * what is "map op", "matmul algo", ... */
mt_status mt_check_id(const char *func, const char *what, int id, int count);
mt_status mt_check_tensor(const char *func, const char *name, const mt_tensor *t);
mt_status mt_check_output(const char *func, const char *name, const mt_tensor *t);
mt_status mt_check_same_dtype(const char *func, const mt_tensor *a, const char *aname,
                              const mt_tensor *b, const char *bname);
mt_status mt_check_same_shape(const char *func, const mt_tensor *a, const char *aname,
                              const mt_tensor *b, const char *bname);
/* t is float32 or float64, else MT_ERR_DTYPE ("mt_matmul: a has dtype
 * int64; this op takes float32 or float64"): the check of every entry point
 * that only makes sense for floats (matmul, softmax, the optimizers, ...).
 * Call it after mt_check_tensor, before any allocation or launch. */
mt_status mt_check_float(const char *func, const char *name, const mt_tensor *t);
/* 0 <= dim < t->ndim, else MT_ERR_DIM with a message naming t. */
mt_status mt_check_dim(const char *func, const mt_tensor *t, const char *name, int dim);
/* The operands of a binary op: out a valid output, a and b valid tensors,
 * both of out's dtype (checked in that order). */
mt_status mt_check_binary(const char *func, const mt_tensor *out, const mt_tensor *a, const char *aname,
                          const mt_tensor *b, const char *bname);
/* Does `small` broadcast to exactly `big`'s shape? */
mt_status mt_check_broadcast(const char *func, const mt_tensor *small, const char *sname,
                             const mt_tensor *big, const char *bname);
/* Writes the shape as "(2, 3, 4)" into buf, for messages. */
const char *mt_shape_str(const mt_tensor *t, char *buf, size_t bufsize);
/* Makes sure the device is initialised (the lazy first use). */
mt_status mt_ensure_init(const char *func);

/* Every element of `index` (class indices, int64 or in a float dtype, as
 * gather takes them) is a whole number in [0, classes), else
 * MT_ERR_INVALID_ARGUMENT naming the first that is not (MT_ERR_DTYPE for a
 * bool index; src/gather.cu; it waits for the check's kernel). */
mt_status mt_check_class_indices(const char *func, const mt_tensor *index, int64_t classes);

/* ---- memory the library may touch (src/memory.cu, src/validate.cu) ------
 * Every descriptor an entry point gets, and the device side of every copy,
 * must lie inside ONE known buffer: a live mt_malloc allocation or a foreign
 * buffer registered with mt_register_buffer. */
struct mt_buffer {
    uintptr_t base;
    size_t bytes;
    bool foreign; /* registered, not from mt_malloc */
};
/* The known buffer holding address p (false if none): one upper_bound in an
 * ordered map under a shared (reader) lock. */
bool mt_find_buffer(const void *p, mt_buffer *found);
/* [p, p + bytes) lies inside one known buffer, else MT_ERR_INVALID_ARGUMENT
 * with a message naming func, name, the address, the size and the buffer. */
mt_status mt_check_range(const char *func, const char *name, const void *p, size_t bytes);
/* Every byte t can address (tensor_byte_extent, descriptor.h) lies inside the
 * known buffer holding t->data; an empty tensor addresses nothing and passes.
 * Call after mt_check_tensor. Exported for the distributed library
 * (src/dist/comm.cu), which checks its buffers the same way. */
mt_status mt_check_extent(const char *func, const char *name, const mt_tensor *t);
/* out may be exactly `in` (the same first byte, dtype, shape and strides over
 * every dim longer than 1: each element is read, then written, by the same
 * thread), or share no byte with it; anything between (the byte ranges of
 * the two extents meet) is MT_ERR_INVALID_ARGUMENT. Call after the extent
 * checks. */
mt_status mt_check_alias(const char *func, const mt_tensor *out, const mt_tensor *in, const char *name);

#endif /* MT_CHECK_H */
