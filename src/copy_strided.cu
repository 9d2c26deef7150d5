/*
 * copy_strided.cu: out = in for a row-major out and an input of any strides
 * (a slice, a permutation, an expanded gradient): the rung of the copy that
 * .contiguous() takes when in is neither dense nor a transposed view (map.cu
 * takes those).
 *
 * map.cu's map_strided turns every ordinal into a position with 64-bit
 * divisions, one per dim, for each element: Nsight Compute showed it bound
 * by that arithmetic (SM throughput 84 %, 188-390 GB/s on an H100 whose
 * memory moves 3 TB/s). Three ideas bring the copy to the memory's speed:
 *
 *   1. Collapse the dims first. Dims a and b (b after a) of in walk memory as
 *      one dim when stride(a) == stride(b) * size(b), and a dim of size 1
 *      walks nowhere: a (256, 64, 32, 32) gradient expanded from (256, 64,
 *      1, 1) is a (16384, 1024) tensor of strides (1, 0), two dims, not four.
 *      (out is row-major, so its position is the ordinal itself.)
 *   2. The rank a template argument (1 to 4 after collapsing), so the loop
 *      over dims is unrolled; past 4 dims map_strided serves.
 *   3. 32-bit index arithmetic when every position fits (fewer than 2^31
 *      elements, and in's reach too): a 32-bit division costs a fraction of a
 *      64-bit one.
 * And each thread copies W = 4 neighbours of the last dim when its size is a
 * multiple of 4 (one index computation, one 4-wide store, for 4 elements).
 */
#include "ops_common.h"

/* The collapsed shape and input strides (in elements) of a copy, at most
 * kMaxCopyRank dims. */
constexpr int kMaxCopyRank = 4;

template <int R>
struct CopyDims {
    uint32_t shape[R];
    int32_t strides[R];
};

/* W elements of T stored by one instruction where W * sizeof(T) <= 16. */
template <typename T, int W>
struct alignas(W * sizeof(T)) Lanes {
    T v[W];
};

/* out[i .. i + W) = in at the positions of ordinals i .. i + W: the W
 * elements share a row of the last dim (its size is a multiple of W), so one
 * position and the last dim's stride find them all. n counts elements, a
 * multiple of W. */
template <typename T, int R, int W>
__global__ void copy_strided_rank(T *out, const T *in, CopyDims<R> dims, uint32_t n)
{
    const uint32_t step = gridDim.x * blockDim.x * W;
    for (uint32_t i = (blockIdx.x * blockDim.x + threadIdx.x) * W; i < n; i += step) {
        uint32_t rest = i;
        int32_t pos = 0;
        MT_UNROLL for (int d = R - 1; d > 0; --d) {
            pos += (int32_t)(rest % dims.shape[d]) * dims.strides[d];
            rest /= dims.shape[d];
        }
        pos += (int32_t)rest * dims.strides[0];
        Lanes<T, W> lanes;
        MT_UNROLL for (int w = 0; w < W; ++w)
            lanes.v[w] = in[pos + w * dims.strides[R - 1]];
        *reinterpret_cast<Lanes<T, W> *>(out + i) = lanes;
    }
}

/* Collapses in's dims for a copy into a row-major out (idea 1); returns the
 * rank, or 0 when it is past kMaxCopyRank or a stride is negative. */
static int collapse_dims(const mt_tensor &in, int64_t shape[kMaxCopyRank], int64_t strides[kMaxCopyRank])
{
    int rank = 0;
    for (int d = 0; d < in.ndim; ++d) {
        if (in.shape[d] == 1)
            continue;
        if (in.strides[d] < 0)
            return 0;
        if (rank > 0 && strides[rank - 1] == in.strides[d] * in.shape[d]) {
            shape[rank - 1] *= in.shape[d];
            strides[rank - 1] = in.strides[d];
            continue;
        }
        if (rank == kMaxCopyRank)
            return 0;
        shape[rank] = in.shape[d];
        strides[rank] = in.strides[d];
        ++rank;
    }
    if (rank == 0) { /* every dim of size 1: one element */
        shape[0] = 1;
        strides[0] = 0;
        rank = 1;
    }
    return rank;
}

template <typename T, int R, int W>
static mt_status launch_copy_rank(const mt_tensor &out, const mt_tensor &in, const int64_t *shape,
                                  const int64_t *strides)
{
    CopyDims<R> dims;
    for (int d = 0; d < R; ++d) {
        dims.shape[d] = (uint32_t)shape[d];
        dims.strides[d] = (int32_t)strides[d];
    }
    const int64_t n = tensor_numel(out);
    T *out_first = static_cast<T *>(out.data) + out.offset;
    const T *in_first = static_cast<const T *>(in.data) + in.offset;
    copy_strided_rank<T, R, W><<<grid_size(n / W, kBlockSize), kBlockSize, 0, mt_stream()>>>(out_first, in_first,
                                                                                              dims, (uint32_t)n);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

template <typename T, int W>
static mt_status copy_with_width(int rank, const mt_tensor &out, const mt_tensor &in, const int64_t *shape,
                                 const int64_t *strides)
{
    switch (rank) {
    case 1:
        return launch_copy_rank<T, 1, W>(out, in, shape, strides);
    case 2:
        return launch_copy_rank<T, 2, W>(out, in, shape, strides);
    case 3:
        return launch_copy_rank<T, 3, W>(out, in, shape, strides);
    default:
        return launch_copy_rank<T, 4, W>(out, in, shape, strides);
    }
}

mt_status copy_strided_collapsed(const mt_tensor &out, const mt_tensor &in, bool *done)
{
    *done = false;
    if (out.dtype != in.dtype || !is_contiguous(out))
        return MT_OK;
    int64_t shape[kMaxCopyRank], strides[kMaxCopyRank];
    const int rank = collapse_dims(in, shape, strides);
    if (rank == 0)
        return MT_OK;
    /* Idea 3's condition: every ordinal and every position of in below 2^31. */
    const int64_t n = tensor_numel(out);
    int64_t reach = 0;
    for (int d = 0; d < rank; ++d)
        reach += (shape[d] - 1) * strides[d];
    const int64_t limit = (int64_t)1 << 31;
    if (n >= limit || reach >= limit)
        return MT_OK;
    *done = true;
    return with_dtype("copy", out.dtype, [&](auto tag) {
        using T = decltype(tag);
        constexpr int W = 4;
        const void *out_first = static_cast<T *>(out.data) + out.offset;
        if (shape[rank - 1] % W == 0 && (uintptr_t)out_first % (W * sizeof(T)) == 0)
            return copy_with_width<T, W>(rank, out, in, shape, strides);
        return copy_with_width<T, 1>(rank, out, in, shape, strides);
    });
}
