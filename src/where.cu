/*
 * where.cu: out = a where cond is non-zero, else b, in one kernel; cond, a
 * and b broadcast to out's shape (NumPy's rules), any strides.
 *
 * The composite stacks a and b along a new dim and gathers one of the two
 * (six kernels and a tensor twice out's size); here each output element is
 * one thread reading cond and then just the one of a or b it selects. The
 * selection is exact for any values: NaN and infinities pass through, and a
 * NaN condition counts as non-zero (as in NumPy and torch, where NaN is true).
 * a, b and out share any one dtype (T); cond has its own (TC): bool, as the
 * Python layer passes it, or any other, where non-zero is true.
 *
 * A contiguous out whose inputs are all of its shape and contiguous takes the
 * element's ordinal as every input's offset; anything else maps the ordinal
 * to a multi-index and each input's broadcast position (indexing.h).
 */
#include "ops_common.h"

template <typename T, typename TC>
__global__ void where_contiguous(T *out, const TC *cond, const T *a, const T *b, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = cond[i] != TC(0) ? a[i] : b[i];
}

template <typename T, typename TC>
__global__ void where_strided(mt_tensor out, mt_tensor cond, mt_tensor a, mt_tensor b, int64_t n)
{
    T *out_data = static_cast<T *>(out.data);
    const TC *cond_data = static_cast<const TC *>(cond.data);
    const T *a_data = static_cast<const T *>(a.data);
    const T *b_data = static_cast<const T *>(b.data);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t idx[MT_MAX_DIMS], in_idx[MT_MAX_DIMS];
        to_index(i, out.shape, out.ndim, idx);
        broadcast_index(idx, out.ndim, cond.shape, cond.ndim, in_idx);
        const bool pick_a = cond_data[cond.offset + index_to_position(in_idx, cond.strides, cond.ndim)] != TC(0);
        /* Only the selected input is read. */
        const mt_tensor &src = pick_a ? a : b;
        broadcast_index(idx, out.ndim, src.shape, src.ndim, in_idx);
        const T *src_data = pick_a ? a_data : b_data;
        out_data[out.offset + index_to_position(idx, out.strides, out.ndim)] =
            src_data[src.offset + index_to_position(in_idx, src.strides, src.ndim)];
    }
}

template <typename T, typename TC>
static mt_status launch_where(const mt_tensor &out, const mt_tensor &cond, const mt_tensor &a, const mt_tensor &b)
{
    const int64_t n = tensor_numel(out);
    const unsigned int grid = grid_size(n, kBlockSize);
    const bool dense = is_contiguous(out) && shapes_equal(cond, out) && is_contiguous(cond) && shapes_equal(a, out) &&
                       is_contiguous(a) && shapes_equal(b, out) && is_contiguous(b);
    if (dense)
        where_contiguous<T, TC><<<grid, kBlockSize, 0, mt_stream()>>>(static_cast<T *>(out.data) + out.offset,
                                                      static_cast<const TC *>(cond.data) + cond.offset,
                                                      static_cast<const T *>(a.data) + a.offset,
                                                      static_cast<const T *>(b.data) + b.offset, n);
    else
        where_strided<T, TC><<<grid, kBlockSize, 0, mt_stream()>>>(out, cond, a, b, n);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_where(mt_tensor out, mt_tensor cond, mt_tensor a, mt_tensor b)
{
    const char *func = "mt_where";
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_binary(func, &out, &a, "a", &b, "b"));
    MT_TRY(mt_check_tensor(func, "cond", &cond));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "cond", &cond));
    MT_TRY(mt_check_extent(func, "a", &a));
    MT_TRY(mt_check_extent(func, "b", &b));
    MT_TRY(mt_check_broadcast(func, &cond, "cond", &out, "out"));
    MT_TRY(mt_check_broadcast(func, &a, "a", &out, "out"));
    MT_TRY(mt_check_broadcast(func, &b, "b", &out, "out"));
    MT_TRY(mt_check_alias(func, &out, &cond, "cond"));
    MT_TRY(mt_check_alias(func, &out, &a, "a"));
    MT_TRY(mt_check_alias(func, &out, &b, "b"));
    if (tensor_numel(out) == 0)
        return MT_OK;
    return with_dtype(func, out.dtype, [&](auto tag) {
        return with_dtype(func, cond.dtype, [&](auto cond_tag) {
            return launch_where<decltype(tag), decltype(cond_tag)>(out, cond, a, b);
        });
    });
}
