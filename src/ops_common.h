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
 * and mt_rule_takes, which reads the dtype rules of the op lists.
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

#include <type_traits>

/* The dtype rules of the op lists of minitensor.h ("fi", "fib>b"): does the
 * rule take the element type T (f: float, double; i: int64_t; b: bool)?
 * The kernel files compile each op's functor for the types its rule takes,
 * and refuse the others with MT_ERR_DTYPE. */
template <typename T>
constexpr char mt_dtype_letter()
{
    return std::is_floating_point<T>::value ? 'f' : std::is_same<T, bool>::value ? 'b' : 'i';
}

template <typename T>
constexpr bool mt_rule_takes(const char *rule)
{
    for (; *rule != '\0' && *rule != '>'; ++rule) {
        if (*rule == mt_dtype_letter<T>())
            return true;
    }
    return false;
}

/* The letter of the result's dtype the rule names after '>' ('b' for the
 * comparisons), or '\0' when out has the input's dtype. */
constexpr char mt_rule_result(const char *rule)
{
    for (; *rule != '\0'; ++rule) {
        if (*rule == '>')
            return rule[1];
    }
    return '\0';
}

/* out = in for validated tensors of the same shape and dtype (either may
 * have any strides): the library's own copies, such as matmul's operand
 * preparation, go through it (src/map.cu), so they get the tiled transpose
 * when in is a transposed view. */
mt_status copy_tensor(const mt_tensor &out, const mt_tensor &in);

/* out = in for a row-major out and an in of the same dtype (src/copy_strided.cu):
 * sets *done and copies when in's dims collapse to at most 4 and every index
 * fits 32 bits; else leaves *done false and copies nothing. */
mt_status copy_strided_collapsed(const mt_tensor &out, const mt_tensor &in, bool *done);

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
