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
    return dtype == MT_FLOAT64 ? sizeof(double) : sizeof(float);
}

inline const char *dtype_name(int32_t dtype)
{
    switch (dtype) {
    case MT_FLOAT32:
        return "float32";
    case MT_FLOAT64:
        return "float64";
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

/* Could a and b share a byte of storage? Compares the address ranges between
 * each tensor's lowest and highest element, so two interleaved views that
 * never touch the same element still count as overlapping: a conservative
 * answer, which is what a "must not alias" check wants. */
inline bool tensors_overlap(const mt_tensor &a, const mt_tensor &b)
{
    if (tensor_numel(a) == 0 || tensor_numel(b) == 0)
        return false;
    uintptr_t lo[2];
    uintptr_t hi[2];
    const mt_tensor *ts[2] = {&a, &b};
    for (int k = 0; k < 2; ++k) {
        const mt_tensor &t = *ts[k];
        int64_t last = t.offset;
        for (int d = 0; d < t.ndim; ++d)
            last += (t.shape[d] - 1) * t.strides[d];
        size_t item = dtype_size(t.dtype);
        lo[k] = (uintptr_t)t.data + (uintptr_t)t.offset * item;
        hi[k] = (uintptr_t)t.data + (uintptr_t)(last + 1) * item;
    }
    return lo[0] < hi[1] && lo[1] < hi[0];
}

#endif /* MT_DESCRIPTOR_H */
