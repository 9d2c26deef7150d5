/*
 * ops_common.h: what every kernel file includes.
 *
 *   check.h         the error idiom (MT_TRY, CUDA_CHECK) and argument checks
 *   launch.h        launch geometry, Pack<T>, mt_sm_count
 *   descriptor.h    host predicates on descriptors (contiguous? overlap?)
 *   scratch.h       DeviceScratch, a temporary device buffer
 *   device_math.h   mt_exp & co., one overload per precision; NaN-aware max
 *   indexing.h      ordinal -> position in a strided tensor
 *   policy.h        the kernel policy: may a default path take a fast rung?
 *
 * Not block_reduce.h (block reductions and BlockScratch): only the files
 * that reduce include it (reduce.h, softmax.cu), so that an edit of it (the
 * reductions task of the course) recompiles those three files, not all.
 */
#ifndef MT_OPS_COMMON_H
#define MT_OPS_COMMON_H

#include "check.h"
#include "descriptor.h"
#include "device_math.h"
#include "indexing.h"
#include "launch.h"
#include "policy.h"
#include "scratch.h"

/* out = in for validated tensors of the same shape and dtype (either may
 * have any strides): the library's own copies, such as matmul's operand
 * preparation, go through it (src/map.cu), so they get the tiled transpose
 * when in is a transposed view. */
mt_status copy_tensor(const mt_tensor &out, const mt_tensor &in);

/* dtype id -> element type: returns f(T{}), T the C++ type that holds the
 * dtype's elements (float, double, int64_t, bool). The kernel files pick
 * their instantiation through it, written as
 *
 *     return with_dtype(func, out.dtype, [&](auto tag) {
 *         using T = decltype(tag);
 *         return launch_fill<T>(out, mt_cast<T>(value));
 *     });
 *
 * so that no dtype is ever taken for another (a `dtype == MT_FLOAT32 ?
 * float : double` quietly runs every other dtype as double). Call it on a
 * dtype that passed mt_check_tensor; `func` names the caller in the message
 * of a dtype that did not. */
template <typename F>
mt_status with_dtype(const char *func, int32_t dtype, F f)
{
    switch (dtype) {
    case MT_FLOAT32:
        return f(float{});
    case MT_FLOAT64:
        return f(double{});
    case MT_INT64:
        return f(int64_t{});
    case MT_BOOL:
        return f(bool{});
    default:
        return mt_fail(MT_ERR_DTYPE, func, "unknown dtype id %d", (int)dtype);
    }
}

/* MT_BOOL elements are read and written as C++ bool: one byte, 0 or 1. */
static_assert(sizeof(bool) == 1, "MT_BOOL is one byte");

#endif /* MT_OPS_COMMON_H */
