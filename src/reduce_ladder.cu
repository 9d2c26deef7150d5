/*
 * reduce_ladder.cu: the reduction ladder, mt_reduce_variant's rungs. Each is
 * a kernel of its own, one block per row, and every one gives the same
 * results (the reducers are in src/reduce.h; mt_reduce's default path for a
 * layout is in src/reduce.cu, and uses the warp_shuffle rung for rows).
 *
 * The reduction ladder (mt_reduce_variant selects a rung; each is a kernel
 * of its own, one block per row, and every one gives the same results):
 *
 *   interleaved    the textbook tree. Each thread loads ONE element into
 *                  shared memory; at level s thread t adds element t + s
 *                  into t when t % 2s == 0. Active threads are scattered
 *                  over every warp, so all warps stay busy (divergent) while
 *                  most of their threads idle, and the % is slow. A row
 *                  longer than the block takes one whole tree per chunk.
 *   sequential     at level s threads 0..s-1 add element t + s into t: the
 *                  active threads are packed into the first warps, whole
 *                  warps retire, and neighbouring threads touch neighbouring
 *                  banks. Still one tree (log2(B) barriers) per chunk.
 *   first_add      each thread first accumulates its block-strided share of
 *                  the row in a register (t, t + B, t + 2B, ...: coalesced),
 *                  so the row is read in one sweep and there is ONE tree per
 *                  row, not one per B elements (Harris's "first add during
 *                  load", taken to many adds per thread).
 *   warp_shuffle   as first_add, but the last five levels of the tree (the
 *                  32 values left, all in warp 0) are done with warp shuffles,
 *                  register to register, without shared memory or barriers.
 *                  The same additions in the same order as first_add: the
 *                  same bits. The default for rows (mt_reduce), but many
 *                  short ones.
 *   vectorized     16-byte loads (a Pack of 4 floats per load: a quarter of
 *                  the load instructions) and a finish by shuffles only
 *                  (each warp, then warp 0: two barriers). Each thread now
 *                  adds 4 neighbouring elements at a time, so the order of
 *                  the additions, and the last bits of a sum, differ.
 *                  mt_reduce's default for max, min and the arg reductions
 *                  (whose result does not depend on the order) over
 *                  contiguous rows of whole Packs that warp_rows leaves.
 *   warp_rows      no block-wide step at all: each warp reduces rows of its
 *                  own (the loads of vectorized, then five shuffles), and a
 *                  grid sized to the GPU keeps every warp streaming rows
 *                  until none is left. A block of one row per block waits,
 *                  at its barriers, for its slowest warp, and a new block
 *                  starts only when the whole block is done; here no warp
 *                  ever waits for another.
 *
 */
#include "reduce.h"

/* ---- the reduction ladder: one block per row ------------------------------
 *
 * All four kernels share the row layout: in_rows is `in` with shape[dim]
 * set to 1, so ordinal r of it is the first element of row r, and element k
 * of the row is k * stride further on; out has that same shape (keepdim).
 * Rows go to blocks in a grid-stride loop. `row` is the same for every
 * thread of a block, so all of them run each loop equally often and meet
 * the same barriers. blockDim.x is a power of two (row_block_size). */

/* Rung 1: interleaved addressing. */
template <typename T, typename R>
__global__ void reduce_rows_interleaved(mt_tensor out, mt_tensor in_rows, int64_t len, int64_t stride, int64_t rows, R reducer)
{
    __shared__ typename R::Acc scratch[kBlockSize]; /* its own tree, not block_reduce */
    typename R::Out *out_data = static_cast<typename R::Out *>(out.data);
    const T *in_data = static_cast<const T *>(in_rows.data);
    const unsigned int tid = threadIdx.x;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t first = ordinal_to_position(row, &in_rows);
        typename R::Acc total = reducer.identity(); /* meaningful in thread 0 */
        for (int64_t base = 0; base < len; base += blockDim.x) {
            const int64_t k = base + tid;
            scratch[tid] = k < len ? reducer.lift(in_data[first + k * stride], k) : reducer.identity();
            __syncthreads(); /* the whole chunk is in shared memory */
            for (unsigned int s = 1; s < blockDim.x; s *= 2) {
                if (tid % (2 * s) == 0)
                    scratch[tid] = reducer(scratch[tid], scratch[tid + s]);
                __syncthreads(); /* level done before the next reads it */
            }
            if (tid == 0)
                total = reducer(total, scratch[0]);
            __syncthreads(); /* scratch[0] read before the next chunk overwrites it */
        }
        if (tid == 0)
            store_result(reducer, out_data, ordinal_to_position(row, &out), total);
    }
}

/* Rung 2: sequential addressing (block_reduce.h's block_reduce is this tree). */
template <typename T, typename R>
__global__ void reduce_rows_sequential(mt_tensor out, mt_tensor in_rows, int64_t len, int64_t stride, int64_t rows, R reducer)
{
    __shared__ BlockScratch<typename R::Acc> scratch;
    typename R::Out *out_data = static_cast<typename R::Out *>(out.data);
    const T *in_data = static_cast<const T *>(in_rows.data);
    const unsigned int tid = threadIdx.x;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t first = ordinal_to_position(row, &in_rows);
        typename R::Acc total = reducer.identity();
        for (int64_t base = 0; base < len; base += blockDim.x) {
            const int64_t k = base + tid;
            const typename R::Acc value = k < len ? reducer.lift(in_data[first + k * stride], k) : reducer.identity();
            total = reducer(total, block_reduce(scratch, value, reducer));
        }
        if (tid == 0)
            store_result(reducer, out_data, ordinal_to_position(row, &out), total);
    }
}

/* Rung 3: first add during load, then one sequential tree per row. */
template <typename T, typename R>
__global__ void reduce_rows_first_add(mt_tensor out, mt_tensor in_rows, int64_t len, int64_t stride, int64_t rows, R reducer)
{
    __shared__ BlockScratch<typename R::Acc> scratch;
    typename R::Out *out_data = static_cast<typename R::Out *>(out.data);
    const T *in_data = static_cast<const T *>(in_rows.data);
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t first = ordinal_to_position(row, &in_rows);
        typename R::Acc acc = reducer.identity();
        /* Neighbouring threads take neighbouring elements, so a row that is
         * contiguous in memory is read with coalesced loads. A thread with
         * nothing to do (len < blockDim.x) keeps the identity and still joins
         * the tree below. */
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x)
            acc = reducer(acc, reducer.lift(in_data[first + k * stride], k));
        acc = block_reduce(scratch, acc, reducer);
        if (threadIdx.x == 0)
            store_result(reducer, out_data, ordinal_to_position(row, &out), acc);
    }
}

template <typename T, typename R>
__global__ void reduce_rows_warp(mt_tensor out, mt_tensor in_rows, int64_t len, int64_t stride, int64_t rows, R reducer)
{
    __shared__ BlockScratch<typename R::Acc> scratch;
    typename R::Out *out_data = static_cast<typename R::Out *>(out.data);
    const T *in_data = static_cast<const T *>(in_rows.data);
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t first = ordinal_to_position(row, &in_rows);
        typename R::Acc acc = reducer.identity();
        acc = accumulate_strided<T>(in_data + first, threadIdx.x, blockDim.x, len, stride, acc, reducer);
        acc = block_reduce_last_warp(scratch, acc, reducer);
        if (threadIdx.x == 0)
            store_result(reducer, out_data, ordinal_to_position(row, &out), acc);
    }
}

/* Blocks of 256 threads of rungs 5 and 6 resident per SM, and so warp_rows'
 * grid (a grid-stride loop over rows: every block gets the same share).
 * The bound (__launch_bounds__(kBlockSize, kRowBlocksPerSM)) makes ptxas fit a
 * thread in 65536 / (6 * 256) = 40 registers; without it ptxas used 42-54
 * (sm_90), only 5 blocks of the 8 the grid had per SM were resident, and
 * the other 3 ran their whole share after them: up to twice the time. */
constexpr int kRowBlocksPerSM = 6;

/* Rung 5: every load moves a 16-byte Pack (when `vec`: stride 1, every row
 * start aligned, len a multiple of the Pack width; else single elements),
 * and the finish is shuffles only (block_reduce_warps: each warp reduces its
 * 32 values, then warp 0 the per-warp results: two barriers). Thread t now
 * takes elements 4t..4t+3, 4(t+B).. rather than t, t+B, ..., so the sum is
 * added in another order than rungs 1-4 (a few ulps apart). */
/* Packs c, c + B, c + 2B, ... of a row of `count` Packs into acc, four
 * Packs (16 floats) in flight per thread before they are combined. */
template <typename T, typename R>
MT_DEVICE typename R::Acc accumulate_packs(const Pack<T> *packs, int64_t c, int64_t B, int64_t count,
                                           typename R::Acc acc, const R &reducer)
{
    constexpr int W = Pack<T>::kWidth;
    for (; c + 3 * B < count; c += 4 * B) {
        Pack<T> p[4];
        MT_UNROLL for (int u = 0; u < 4; ++u)
            p[u] = packs[c + u * B];
        MT_UNROLL for (int u = 0; u < 4; ++u)
            MT_UNROLL for (int w = 0; w < W; ++w)
                acc = fold_next(reducer, acc, p[u].v[w], (c + u * B) * W + w);
    }
    for (; c < count; c += B) {
        const Pack<T> p = packs[c];
        MT_UNROLL for (int w = 0; w < W; ++w)
            acc = fold_next(reducer, acc, p.v[w], c * W + w);
    }
    return acc;
}

/* (Without the bound ptxas gave max(dim) with indices 44 registers here:
 * 5 blocks per SM; 40 let a sixth in.) */
template <typename T, typename R>
__global__ void __launch_bounds__(kBlockSize, kRowBlocksPerSM) reduce_rows_vectorized(mt_tensor out, mt_tensor in_rows, int64_t len, int64_t stride, int64_t rows, bool vec, R reducer)
{
    __shared__ BlockScratch<typename R::Acc> scratch;
    constexpr int W = Pack<T>::kWidth;
    typename R::Out *out_data = static_cast<typename R::Out *>(out.data);
    const T *in_data = static_cast<const T *>(in_rows.data);
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t first = ordinal_to_position(row, &in_rows);
        typename R::Acc acc = reducer.identity();
        if (vec)
            acc = accumulate_packs<T>(reinterpret_cast<const Pack<T> *>(in_data + first), threadIdx.x, blockDim.x,
                                      len / W, acc, reducer);
        else
            acc = accumulate_strided<T>(in_data + first, threadIdx.x, blockDim.x, len, stride, acc, reducer);
        acc = block_reduce_warps(scratch, acc, reducer.identity(), reducer);
        if (threadIdx.x == 0)
            store_result(reducer, out_data, ordinal_to_position(row, &out), acc);
    }
}

/* Rung 6: one warp per row, or for short rows one group of `group` lanes
 * (a power of two up to 32) per row, 32 / group rows a warp. Warp w of block
 * b takes rows from (b * warps + w) * per_warp, then a grid's worth of warps
 * further on; a group's lanes read its row as in rung 5 (16-byte Packs when
 * `vec`) and shuffles combine them, the tree of warp_reduce cut to the
 * group's width (lane 0 of a group only ever reads lanes of its own group).
 * No shared memory and no barrier: the warps of a block never wait for each
 * other, so a slow warp delays only its own rows. */
template <typename T, typename R>
__global__ void __launch_bounds__(kBlockSize, kRowBlocksPerSM) reduce_rows_warp_rows(mt_tensor out, mt_tensor in_rows, int64_t len, int64_t stride, int64_t rows, bool vec,
                                      int group, R reducer)
{
    constexpr int W = Pack<T>::kWidth;
    typename R::Out *out_data = static_cast<typename R::Out *>(out.data);
    const T *in_data = static_cast<const T *>(in_rows.data);
    const int64_t lane = threadIdx.x % 32, member = lane % group;
    const int64_t warps = blockDim.x / 32, per_warp = 32 / group;
    /* `base` is the same for the whole warp, so all 32 lanes take part in
     * every shuffle, those of a group past the last row included. */
    for (int64_t base = (blockIdx.x * warps + threadIdx.x / 32) * per_warp; base < rows;
         base += gridDim.x * warps * per_warp) {
        const int64_t row = base + lane / group;
        typename R::Acc acc = reducer.identity();
        if (row < rows) {
            const int64_t first = ordinal_to_position(row, &in_rows);
            if (vec)
                acc = accumulate_packs<T>(reinterpret_cast<const Pack<T> *>(in_data + first), member, group,
                                          len / W, acc, reducer);
            else
                acc = accumulate_strided<T>(in_data + first, member, group, len, stride, acc, reducer);
        }
        for (int delta = group / 2; delta > 0; delta /= 2)
            acc = reducer(acc, shfl_down(acc, delta));
        if (member == 0 && row < rows)
            store_result(reducer, out_data, ordinal_to_position(row, &out), acc);
    }
}

/* ---- host side ------------------------------------------------------------ */

template <typename T, typename R>
static mt_status launch_reduce_rows(int algo, const mt_tensor &out, const mt_tensor &in, int dim, const R &reducer)
{
    mt_tensor in_rows = in;
    in_rows.shape[dim] = 1;
    const int64_t len = in.shape[dim];
    const int64_t stride = in.strides[dim];
    const int64_t rows = tensor_numel(out);
    const int block = row_block_size(len);
    const unsigned int grid = grid_size(rows, 1);
    switch (algo) {
    case MT_REDUCE_ALGO_INTERLEAVED:
        reduce_rows_interleaved<T, R><<<grid, block, 0, mt_stream()>>>(out, in_rows, len, stride, rows, reducer);
        break;
    case MT_REDUCE_ALGO_SEQUENTIAL:
        MT_TRY(MT_TASK_CHECK(reductions)); /* its tree is block_reduce */
        reduce_rows_sequential<T, R><<<grid, block, 0, mt_stream()>>>(out, in_rows, len, stride, rows, reducer);
        break;
    case MT_REDUCE_ALGO_FIRST_ADD:
        MT_TRY(MT_TASK_CHECK(reductions)); /* its tree is block_reduce */
        reduce_rows_first_add<T, R><<<grid, block, 0, mt_stream()>>>(out, in_rows, len, stride, rows, reducer);
        break;
    case MT_REDUCE_ALGO_WARP_SHUFFLE:
        reduce_rows_warp<T, R><<<grid, block, 0, mt_stream()>>>(out, in_rows, len, stride, rows, reducer);
        break;
    case MT_REDUCE_ALGO_WARP_ROWS: {
        const int64_t width = Pack<T>::kWidth;
        const T *first = static_cast<const T *>(in.data) + in.offset;
        const bool vec = (stride == 1 || len == 1) && is_contiguous(in) && dim == in.ndim - 1 &&
                         len % width == 0 && aligned16(first);
        /* Lanes per row: enough that each has a Pack (or an element) to
         * read, at most a warp. */
        const int64_t loads = vec ? len / width : len;
        int group = 1;
        while (group < 32 && group < loads)
            group *= 2;
        /* 8 warps a block; as many blocks as are resident at once
         * (kRowBlocksPerSM per SM: 48 warps of the H100's 64), fewer
         * when there are fewer rows. */
        const int64_t rows_per_block = kBlockSize / 32 * (32 / group);
        const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
        const int64_t resident = (int64_t)mt_sm_count() * kRowBlocksPerSM;
        const unsigned int grid = (unsigned int)(blocks < resident ? blocks : resident);
        reduce_rows_warp_rows<T, R><<<grid, kBlockSize, 0, mt_stream()>>>(out, in_rows, len, stride, rows, vec, group,
                                                                         reducer);
        break;
    }
    case MT_REDUCE_ALGO_VECTORIZED:
    default: {
        /* Packs need stride 1 and every row start aligned: a contiguous
         * input whose rows are a whole number of Packs, from an aligned start. */
        const int64_t width = Pack<T>::kWidth;
        const T *first = static_cast<const T *>(in.data) + in.offset;
        const bool vec = (stride == 1 || len == 1) && is_contiguous(in) && dim == in.ndim - 1 &&
                         len % width == 0 && aligned16(first);
        reduce_rows_vectorized<T, R><<<grid, block, 0, mt_stream()>>>(out, in_rows, len, stride, rows, vec, reducer);
        break;
    }
    }
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status reduce_rows_variant(const char *func, int algo, int op, const mt_tensor &out, const mt_tensor &in, int dim)
{
    return with_dtype(func, in.dtype, [&](auto tag) {
        using T = decltype(tag);
        return with_reducer<T>(func, op, [&](auto reducer) {
            return launch_reduce_rows<T>(algo, out, in, dim, reducer);
        });
    });
}

mt_status reduce_rows_with_index_variant(const char *func, int algo, bool max, const mt_tensor &values,
                                         const mt_tensor &indices, const mt_tensor &in, int dim)
{
    return with_dtype(func, in.dtype, [&](auto tag) {
        using T = decltype(tag);
        int64_t *indices_first = static_cast<int64_t *>(indices.data) + indices.offset;
        T *values_first = static_cast<T *>(values.data) + values.offset;
        if (max)
            return launch_reduce_rows<T>(algo, indices, in, dim,
                                         ReduceWithIndex<T, true>{{}, indices_first, values_first});
        return launch_reduce_rows<T>(algo, indices, in, dim,
                                     ReduceWithIndex<T, false>{{}, indices_first, values_first});
    });
}
