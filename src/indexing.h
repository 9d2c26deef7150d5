/*
 * indexing.h: the three index helpers every strided kernel is built from.
 *
 * A tensor's elements are numbered 0 .. numel-1 in row-major order (the
 * "ordinal"). to_index turns an ordinal into a multi-index, index_to_position
 * turns a multi-index into a memory position through the strides, and
 * broadcast_index maps an index of a broadcast output back to the input that
 * was broadcast into it (NumPy rules: shapes aligned on the right, a
 * dimension of size 1 repeats).
 *
 * The same functions run in kernels (GPU or emulator) and in the C reference
 * loops of the tests, so a reference can never disagree with a kernel about
 * what an index means.
 */
#ifndef MT_INDEXING_H
#define MT_INDEXING_H

#include <stdint.h>

#include "minitensor.h"
#include "task.h"

#if defined(__CUDACC__)
#define MT_HD __host__ __device__ __forceinline__
#elif defined(MT_EMULATOR)
#define MT_HD inline
#else
#define MT_HD static inline
#endif

/* TASK(indexing) BEGIN */
/* ordinal -> multi-index of a tensor of `shape` (row-major, last dim fastest). */
MT_HD void to_index(int64_t ordinal, const int64_t *shape, int ndim, int64_t *index)
{
    for (int d = ndim - 1; d >= 0; --d) {
        /* A size-0 dim has no valid ordinals, so it never divides here. */
        int64_t size = shape[d];
        index[d] = ordinal % size;
        ordinal /= size;
    }
}

/* multi-index -> position in storage, in elements (offset not included). */
MT_HD int64_t index_to_position(const int64_t *index, const int64_t *strides, int ndim)
{
    int64_t pos = 0;
    for (int d = 0; d < ndim; ++d)
        pos += index[d] * strides[d];
    return pos;
}

/* Index into the big (broadcast) shape -> index into a smaller shape that
 * broadcasts to it. The small shape is aligned on the right; where it has
 * size 1 the index is 0, because that one element was repeated. */
MT_HD void broadcast_index(const int64_t *big_index, int big_ndim,
                           const int64_t *shape, int ndim, int64_t *out_index)
{
    int lead = big_ndim - ndim;
    for (int d = 0; d < ndim; ++d)
        out_index[d] = shape[d] == 1 ? 0 : big_index[d + lead];
}

/* TASK(indexing) STUB */
//| MT_TASK_MISSING(indexing, "to_index, index_to_position, broadcast_index", "src/indexing.h")
//|
//| /* ordinal -> multi-index of a tensor of `shape` (row-major, last dim fastest). */
//| MT_HD void to_index(int64_t ordinal, const int64_t *shape, int ndim, int64_t *index)
//| {
//|     /* TODO (task indexing): write index[0..ndim-1] so that ordinal is
//|      * sum_d index[d] * (product of shape[d+1..ndim-1]). Which dim changes
//|      * fastest as the ordinal grows by one? */
//|     (void)ordinal;
//|     (void)shape;
//|     for (int d = 0; d < ndim; ++d)
//|         index[d] = 0;
//| }
//|
//| /* multi-index -> position in storage, in elements (offset not included). */
//| MT_HD int64_t index_to_position(const int64_t *index, const int64_t *strides, int ndim)
//| {
//|     /* TODO (task indexing): each dim moves strides[d] elements per step. */
//|     (void)index;
//|     (void)strides;
//|     (void)ndim;
//|     return 0;
//| }
//|
//| /* Index into the big (broadcast) shape -> index into a smaller shape that
//|  * broadcasts to it (NumPy rules: shapes aligned on the right). */
//| MT_HD void broadcast_index(const int64_t *big_index, int big_ndim,
//|                            const int64_t *shape, int ndim, int64_t *out_index)
//| {
//|     /* TODO (task indexing): which dim of big_index does dim d of the small
//|      * shape line up with, and what is the index where the small shape has
//|      * size 1 (its one element was repeated)? */
//|     (void)big_index;
//|     (void)big_ndim;
//|     (void)shape;
//|     for (int d = 0; d < ndim; ++d)
//|         out_index[d] = 0;
//| }
/* TASK(indexing) END */

/* Number of elements of a shape (1 for rank 0). */
MT_HD int64_t shape_numel(const int64_t *shape, int ndim)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d)
        n *= shape[d];
    return n;
}

/* The storage position of ordinal `i` of tensor t, offset included: the
 * composition of to_index and index_to_position that most kernels need. */
MT_HD int64_t ordinal_to_position(int64_t i, const mt_tensor *t)
{
    int64_t index[MT_MAX_DIMS];
    to_index(i, t->shape, t->ndim, index);
    return t->offset + index_to_position(index, t->strides, t->ndim);
}

#endif /* MT_INDEXING_H */
