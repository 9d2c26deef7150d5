/*
 * descriptor.h: host predicates on tensor descriptors (mt_tensor).
 *
 * How many elements, how big an element is, and questions the kernel files
 * ask to pick a kernel for a layout: is the tensor dense, a transposed view,
 * made of contiguous rows? Do two tensors overlap? The argument checks that
 * report a failure live in src/validate.cu (declared in check.h); these only
 * answer yes or no.
 */
#ifndef MT_DESCRIPTOR_H
#define MT_DESCRIPTOR_H

#include <stddef.h>
#include <stdint.h>

#include "check.h"
#include "indexing.h"

/* Is p aligned for Pack loads and stores? */
inline bool aligned16(const void *p)
{
    return (uintptr_t)p % 16 == 0;
}

inline int64_t tensor_numel(const mt_tensor &t)
{
    return shape_numel(t.shape, t.ndim);
}

inline size_t dtype_size(int32_t dtype)
{
    switch (dtype) {
    case MT_FLOAT64:
        return sizeof(double);
    case MT_INT64:
        return sizeof(int64_t);
    case MT_BOOL:
        return 1; /* sizeof(bool), the kernels' element type, on every compiler we use */
    default:
        return sizeof(float);
    }
}

inline const char *dtype_name(int32_t dtype)
{
    switch (dtype) {
    case MT_FLOAT32:
        return "float32";
    case MT_FLOAT64:
        return "float64";
    case MT_INT64:
        return "int64";
    case MT_BOOL:
        return "bool";
    default:
        return "unknown dtype";
    }
}

inline bool shapes_equal(const mt_tensor &a, const mt_tensor &b)
{
    if (a.ndim != b.ndim)
        return false;
    for (int d = 0; d < a.ndim; ++d) {
        if (a.shape[d] != b.shape[d])
            return false;
    }
    return true;
}

/* Row-major and dense: element i lives at offset + i. A dimension of size 1
 * may have any stride, since its index is always 0. */
inline bool is_contiguous(const mt_tensor &t)
{
    int64_t expected = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
        if (t.shape[d] != 1 && t.strides[d] != expected)
            return false;
        expected *= t.shape[d];
    }
    return true;
}

/* A "transposed view": dim -2 has stride 1 and dim -1 does not (A.T of a
 * row-major A, or a batch of such matrices). Walking such a tensor in
 * row-major order jumps through memory; the tiled transposes (map.cu,
 * zip.cu) read it 32 x 32 elements at a time, coalesced along dim -2. */
inline bool is_transposed_view(const mt_tensor &x)
{
    if (x.ndim < 2)
        return false;
    const int64_t rows = x.shape[x.ndim - 2];
    const int64_t cols = x.shape[x.ndim - 1];
    return rows > 1 && cols > 1 && x.strides[x.ndim - 2] == 1 && x.strides[x.ndim - 1] != 1;
}

/* Each row of x (dim -1) is contiguous in memory; the batch dims and the row
 * stride may be anything. */
inline bool rows_contiguous(const mt_tensor &x)
{
    return x.ndim >= 2 && (x.strides[x.ndim - 1] == 1 || x.shape[x.ndim - 1] == 1);
}

/* The bytes a descriptor can address, counted from its data pointer:
 * [*lo, *hi), from the first byte of its first element (offset * itemsize)
 * to one past the last byte of its element at the highest position
 * (offset + sum_d (shape_d - 1) * strides_d). An empty tensor addresses
 * nothing: *lo == *hi == 0. Returns false when that arithmetic overflows 64
 * bits: no memory can hold such a tensor. The one place extents are computed
 * (the checks of validate.cu and tensors_overlap use it); it assumes a
 * descriptor that passed mt_check_tensor (rank in range, known dtype, no
 * negative offset, shape or stride). */
inline bool tensor_byte_extent(const mt_tensor &t, uint64_t *lo, uint64_t *hi)
{
    *lo = *hi = 0;
    int64_t last = t.offset;
    for (int d = 0; d < t.ndim; ++d) {
        if (t.shape[d] == 0)
            return true;
        int64_t step;
        if (__builtin_mul_overflow(t.shape[d] - 1, t.strides[d], &step) ||
            __builtin_add_overflow(last, step, &last))
            return false;
    }
    const uint64_t item = dtype_size(t.dtype);
    uint64_t first_byte, end_byte;
    if (__builtin_mul_overflow((uint64_t)t.offset, item, &first_byte) ||
        __builtin_mul_overflow((uint64_t)last + 1, item, &end_byte) || end_byte > (uint64_t)INT64_MAX)
        return false;
    *lo = first_byte;
    *hi = end_byte;
    return true;
}

/* Could a and b share a byte of storage? Compares the address ranges between
 * each tensor's lowest and highest element, so two interleaved views that
 * never touch the same element still count as overlapping: a conservative
 * answer, which is what a "must not alias" check wants. Call it only on
 * descriptors that passed mt_check_extent (their ranges then lie inside
 * known buffers, so the sums below cannot wrap). */
inline bool tensors_overlap(const mt_tensor &a, const mt_tensor &b)
{
    uint64_t lo[2], hi[2];
    if (!tensor_byte_extent(a, &lo[0], &hi[0]) || !tensor_byte_extent(b, &lo[1], &hi[1]))
        return true; /* cannot happen after mt_check_extent; "may overlap" is the safe answer */
    if (hi[0] == 0 || hi[1] == 0)
        return false;
    const uintptr_t a_lo = (uintptr_t)a.data + lo[0], a_hi = (uintptr_t)a.data + hi[0];
    const uintptr_t b_lo = (uintptr_t)b.data + lo[1], b_hi = (uintptr_t)b.data + hi[1];
    return a_lo < b_hi && b_lo < a_hi;
}

/* Are a and b the same view: the same elements in the same order? The same
 * address of the first element, dtype and shape, and the same strides over
 * every dim longer than 1 (a dim of length 1 is never stepped). */
inline bool same_view(const mt_tensor &a, const mt_tensor &b)
{
    if (a.dtype != b.dtype || !shapes_equal(a, b))
        return false;
    const size_t item = dtype_size(a.dtype);
    if ((uintptr_t)a.data + (uintptr_t)a.offset * item != (uintptr_t)b.data + (uintptr_t)b.offset * item)
        return false;
    for (int d = 0; d < a.ndim; ++d) {
        if (a.shape[d] > 1 && a.strides[d] != b.strides[d])
            return false;
    }
    return true;
}

#endif /* MT_DESCRIPTOR_H */
