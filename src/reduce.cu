/*
 * reduce.cu: reductions (sum, prod, max, min, argmax, argmin) along one
 * dimension (mt_reduce) or over every element (mt_reduce_all).
 *
 * mt_reduce works on "rows": all the elements that reduce into one output,
 * spaced in memory by the stride of the reduced dim. Which kernel runs
 * depends on the layout:
 *
 *   reduce_rows_warp     (rows contiguous or strided) one block per row;
 *                        the warp_shuffle rung of the ladder below.
 *   reduce_columns       (a contiguous input reduced over a dim that is not
 *                        the last, e.g. sum over dim 0 of a matrix) a row
 *                        kernel would have each block walk down one column,
 *                        every load a whole row away from the last. Instead
 *                        the 32 threads of a warp take 32 neighbouring
 *                        columns and walk down them together, so every warp
 *                        load is 128 contiguous bytes; 8 warps per block
 *                        split the rows, and a long reduced dim is split
 *                        over several blocks too (partials, then a finish).
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
 *                  same bits. The default for rows (mt_reduce).
 *   vectorized     16-byte loads (a Pack of 4 floats per load: a quarter of
 *                  the load instructions) and a finish by shuffles only
 *                  (each warp, then warp 0: two barriers). Each thread now
 *                  adds 4 neighbouring elements at a time, so the order of
 *                  the additions, and the last bits of a sum, differ.
 *
 * mt_reduce_all: two passes. Pass 1 runs up to kMaxPartials blocks; each
 * walks a grid-strided share of all the elements and writes one partial
 * result.
 * Pass 2 runs a single block that reduces those partials. (One block alone
 * would leave all but one SM of the GPU idle.)
 *
 * A reduction is a small struct (a "reducer"): its accumulator type Acc, the
 * identity, lift (an element and its index -> Acc), operator() (combine two
 * Accs), result (Acc -> the value written). The identity is what an empty
 * row reduces to: sum 0, prod 1, max -inf, min +inf. argmax/argmin have no
 * identity, so an empty row is an error, reported before any launch.
 */
#include "ops_common.h"

/* Pass 1 of mt_reduce_all writes at most this many partials: about enough
 * blocks of 256 threads to fill a large GPU, and few enough that pass 2's one
 * block reduces them with a handful of loads per thread. */
constexpr int64_t kMaxPartials = 1024;

/* ---- reducers -------------------------------------------------------------- */

template <typename T>
struct ReduceSum {
    using Acc = T;
    __device__ Acc identity() const { return T(0); }
    __device__ Acc lift(T x, int64_t) const { return x; }
    __device__ Acc operator()(Acc a, Acc b) const { return a + b; }
    __device__ T result(Acc acc) const { return acc; }
};

template <typename T>
struct ReduceProd {
    using Acc = T;
    __device__ Acc identity() const { return T(1); }
    __device__ Acc lift(T x, int64_t) const { return x; }
    __device__ Acc operator()(Acc a, Acc b) const { return a * b; }
    __device__ T result(Acc acc) const { return acc; }
};

/* max and min let NaN win (mt_max, mt_min), as NumPy and PyTorch do. */
template <typename T>
struct ReduceMax {
    using Acc = T;
    __device__ Acc identity() const { return -mt_infinity<T>(); }
    __device__ Acc lift(T x, int64_t) const { return x; }
    __device__ Acc operator()(Acc a, Acc b) const { return mt_max(a, b); }
    __device__ T result(Acc acc) const { return acc; }
};

template <typename T>
struct ReduceMin {
    using Acc = T;
    __device__ Acc identity() const { return mt_infinity<T>(); }
    __device__ Acc lift(T x, int64_t) const { return x; }
    __device__ Acc operator()(Acc a, Acc b) const { return mt_min(a, b); }
    __device__ T result(Acc acc) const { return acc; }
};

/* An argmax candidate: a value and where it was found. */
template <typename T>
struct ValueIndex {
    T value;
    int64_t index;
};

/* argmax (kMax true) or argmin. The tree combines candidates in no fixed
 * order, so the combine must itself pick "the first best" to be order-free:
 * a NaN beats every number (NumPy and PyTorch report the first NaN), then the
 * better value wins, and between equal values the smaller index wins. The
 * identity (an infinity with the largest possible index) loses to, or ties
 * and then loses to, every real element. */
template <typename T, bool kMax>
struct ReduceArg {
    using Acc = ValueIndex<T>;
    __device__ Acc identity() const
    {
        return Acc{kMax ? -mt_infinity<T>() : mt_infinity<T>(), INT64_MAX};
    }
    __device__ Acc lift(T x, int64_t index) const { return Acc{x, index}; }
    __device__ Acc operator()(Acc a, Acc b) const
    {
        bool a_nan = mt_isnan(a.value);
        bool b_nan = mt_isnan(b.value);
        if (a_nan != b_nan)
            return a_nan ? a : b;
        if (!a_nan && a.value != b.value) {
            bool a_better = kMax ? a.value > b.value : a.value < b.value;
            return a_better ? a : b;
        }
        return a.index < b.index ? a : b;
    }
    /* The index as a float: exact up to 2^24 in float32, 2^53 in float64. */
    __device__ T result(Acc acc) const { return (T)acc.index; }
};

/* The argmax candidate through a warp shuffle: its two fields one by one
 * (found by argument-dependent lookup from warp_reduce in ops_common.h). */
template <typename T>
MT_DEVICE ValueIndex<T> shfl_down(ValueIndex<T> v, int delta)
{
    v.value = __shfl_down_sync(0xffffffffu, v.value, delta);
    v.index = (int64_t)__shfl_down_sync(0xffffffffu, (long long)v.index, delta);
    return v;
}

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
    __shared__ typename R::Acc scratch[kBlockSize];
    T *out_data = static_cast<T *>(out.data);
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
            out_data[ordinal_to_position(row, &out)] = reducer.result(total);
    }
}

/* Rung 2: sequential addressing (ops_common.h's block_reduce is this tree). */
template <typename T, typename R>
__global__ void reduce_rows_sequential(mt_tensor out, mt_tensor in_rows, int64_t len, int64_t stride, int64_t rows, R reducer)
{
    __shared__ typename R::Acc scratch[kBlockSize];
    T *out_data = static_cast<T *>(out.data);
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
            out_data[ordinal_to_position(row, &out)] = reducer.result(total);
    }
}

/* Rung 3: first add during load, then one sequential tree per row. */
template <typename T, typename R>
__global__ void reduce_rows_first_add(mt_tensor out, mt_tensor in_rows, int64_t len, int64_t stride, int64_t rows, R reducer)
{
    __shared__ typename R::Acc scratch[kBlockSize];
    T *out_data = static_cast<T *>(out.data);
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
            out_data[ordinal_to_position(row, &out)] = reducer.result(acc);
    }
}

/* acc combined, in order, with the elements k = first_k, first_k + step, ...
 * (< len) of a row whose element k is at row[k * stride]. Loads are issued
 * eight at a time before they are combined, so eight are in flight per
 * thread (a loop that loads and adds one element at a time waits for each
 * load); the combines still run in the order of k, so the result has the
 * same bits as the one-at-a-time loop. */
template <typename T, typename R>
MT_DEVICE typename R::Acc accumulate_strided(const T *row, int64_t first_k, int64_t step, int64_t len, int64_t stride, typename R::Acc acc, const R &reducer)
{
    constexpr int kBatch = 8;
    int64_t k = first_k;
    for (; k + (kBatch - 1) * step < len; k += kBatch * step) {
        T x[kBatch];
        MT_UNROLL for (int u = 0; u < kBatch; ++u)
            x[u] = row[(k + u * step) * stride];
        MT_UNROLL for (int u = 0; u < kBatch; ++u)
            acc = reducer(acc, reducer.lift(x[u], k + u * step));
    }
    for (; k < len; k += step)
        acc = reducer(acc, reducer.lift(row[k * stride], k));
    return acc;
}

/* Rung 4: first add during load, then the tree of rung 3 with its last five
 * levels done by warp shuffles (block_reduce_last_warp): the same additions
 * in the same order as rungs 2 and 3, so the same bits, with five barriers
 * fewer. mt_reduce's default for rows: a teacher (or a notebook) can mirror
 * it exactly in NumPy. */
template <typename T, typename R>
__global__ void reduce_rows_warp(mt_tensor out, mt_tensor in_rows, int64_t len, int64_t stride, int64_t rows, R reducer)
{
    __shared__ typename R::Acc scratch[kBlockSize];
    T *out_data = static_cast<T *>(out.data);
    const T *in_data = static_cast<const T *>(in_rows.data);
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t first = ordinal_to_position(row, &in_rows);
        typename R::Acc acc = reducer.identity();
        acc = accumulate_strided<T>(in_data + first, threadIdx.x, blockDim.x, len, stride, acc, reducer);
        acc = block_reduce_last_warp(scratch, acc, reducer);
        if (threadIdx.x == 0)
            out_data[ordinal_to_position(row, &out)] = reducer.result(acc);
    }
}

/* Rung 5: every load moves a 16-byte Pack (when `vec`: stride 1, every row
 * start aligned, len a multiple of the Pack width; else single elements),
 * and the finish is shuffles only (block_reduce_warps: each warp reduces its
 * 32 values, then warp 0 the per-warp results: two barriers). Thread t now
 * takes elements 4t..4t+3, 4(t+B).. rather than t, t+B, ..., so the sum is
 * added in another order than rungs 1-4 (a few ulps apart). */
template <typename T, typename R>
__global__ void reduce_rows_vectorized(mt_tensor out, mt_tensor in_rows, int64_t len, int64_t stride, int64_t rows, bool vec, R reducer)
{
    __shared__ typename R::Acc scratch[32];
    constexpr int W = Pack<T>::kWidth;
    T *out_data = static_cast<T *>(out.data);
    const T *in_data = static_cast<const T *>(in_rows.data);
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t first = ordinal_to_position(row, &in_rows);
        typename R::Acc acc = reducer.identity();
        if (vec) {
            /* Four Packs (16 floats) in flight per thread, then combined. */
            const Pack<T> *packs = reinterpret_cast<const Pack<T> *>(in_data + first);
            const int64_t count = len / W;
            const int64_t B = blockDim.x;
            int64_t c = threadIdx.x;
            for (; c + 3 * B < count; c += 4 * B) {
                Pack<T> p[4];
                MT_UNROLL for (int u = 0; u < 4; ++u)
                    p[u] = packs[c + u * B];
                MT_UNROLL for (int u = 0; u < 4; ++u)
                    MT_UNROLL for (int w = 0; w < W; ++w)
                        acc = reducer(acc, reducer.lift(p[u].v[w], (c + u * B) * W + w));
            }
            for (; c < count; c += B) {
                const Pack<T> p = packs[c];
                MT_UNROLL for (int w = 0; w < W; ++w)
                    acc = reducer(acc, reducer.lift(p.v[w], c * W + w));
            }
        } else {
            acc = accumulate_strided<T>(in_data + first, threadIdx.x, blockDim.x, len, stride, acc, reducer);
        }
        acc = block_reduce_warps(scratch, acc, reducer.identity(), reducer);
        if (threadIdx.x == 0)
            out_data[ordinal_to_position(row, &out)] = reducer.result(acc);
    }
}

/* ---- reducing a dim that is not the last: walking columns -----------------
 *
 * A contiguous input seen as (outer, len, inner): element (o, k, i) at
 * o * len * inner + k * inner + i, reduced over k into out (o, i) at
 * o * inner + i (out contiguous too). A block of 32 x kColumnRows threads
 * takes 32 neighbouring i (threadIdx.x) of one o (blockIdx.y); its
 * kColumnRows warps take every kColumnRows-th k of the block's share of the
 * rows, so each warp load is 32 neighbouring elements. The warps' results
 * meet in shared memory. With several splits (gridDim.z > 1) split z takes
 * rows [z * chunk, (z + 1) * chunk) and writes its result to
 * partials[z][o][i], which reduce_column_partials then combines. */
constexpr int kColumnRows = 8;

template <typename T, typename R>
__global__ void __launch_bounds__(32 * kColumnRows) reduce_columns(T *out, const T *in, int64_t len, int64_t inner, int64_t outer_start, int64_t chunk, typename R::Acc *partials, int64_t outer, R reducer)
{
    using Acc = typename R::Acc;
    __shared__ Acc scratch[kColumnRows][33];
    const int64_t o = outer_start + blockIdx.y;
    const int64_t i = (int64_t)blockIdx.x * 32 + threadIdx.x;
    const int64_t k_begin = (int64_t)blockIdx.z * chunk;
    const int64_t k_end = k_begin + chunk < len ? k_begin + chunk : len;
    Acc acc = reducer.identity();
    if (i < inner) {
        const T *column = in + o * len * inner + i;
        int64_t k = k_begin + threadIdx.y;
        /* Four independent loads in flight per thread before the adds. */
        for (; k + 3 * kColumnRows < k_end; k += 4 * kColumnRows) {
            const T x0 = column[k * inner];
            const T x1 = column[(k + kColumnRows) * inner];
            const T x2 = column[(k + 2 * kColumnRows) * inner];
            const T x3 = column[(k + 3 * kColumnRows) * inner];
            acc = reducer(acc, reducer.lift(x0, k));
            acc = reducer(acc, reducer.lift(x1, k + kColumnRows));
            acc = reducer(acc, reducer.lift(x2, k + 2 * kColumnRows));
            acc = reducer(acc, reducer.lift(x3, k + 3 * kColumnRows));
        }
        for (; k < k_end; k += kColumnRows)
            acc = reducer(acc, reducer.lift(column[k * inner], k));
    }
    scratch[threadIdx.y][threadIdx.x] = acc;
    /* Every warp's partial is in shared memory before warp 0 combines them. */
    __syncthreads();
    if (threadIdx.y == 0 && i < inner) {
        for (int r = 1; r < kColumnRows; ++r)
            acc = reducer(acc, scratch[r][threadIdx.x]);
        if (partials)
            partials[((int64_t)blockIdx.z * outer + o) * inner + i] = acc;
        else
            out[o * inner + i] = reducer.result(acc);
    }
}

/* out[j] = the combination of partials[z * count + j] over z < splits. */
template <typename T, typename R>
__global__ void reduce_column_partials(T *out, const typename R::Acc *partials, int64_t count, int64_t splits, R reducer)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < count; j += step) {
        typename R::Acc acc = partials[j];
        for (int64_t z = 1; z < splits; ++z)
            acc = reducer(acc, partials[z * count + j]);
        out[j] = reducer.result(acc);
    }
}

/* ---- mt_reduce_all ---------------------------------------------------------- */

/* Pass 1: block b writes partials[b]. Thread t of the grid takes elements
 * t, t + G, t + 2G, ... (G threads in the grid), then the block combines its
 * threads' values with block_reduce's tree (its last warp by shuffles):
 * the order of the additions is fixed, and a NumPy mirror of it gives the
 * same bits. */
template <typename T, typename R>
__global__ void reduce_all_partials(mt_tensor in, int64_t n, bool contiguous, typename R::Acc *partials, R reducer)
{
    __shared__ typename R::Acc scratch[kBlockSize];
    const T *in_data = static_cast<const T *>(in.data);
    typename R::Acc acc = reducer.identity();
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (contiguous) {
        acc = accumulate_strided<T>(in_data + in.offset, first, step, n, 1, acc, reducer);
    } else {
        for (int64_t i = first; i < n; i += step)
            acc = reducer(acc, reducer.lift(in_data[ordinal_to_position(i, &in)], i));
    }
    acc = block_reduce_last_warp(scratch, acc, reducer);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = acc;
}

/* Pass 2 of mt_reduce_all: one block reduces `count` partials into *out.
 * count == 0 (an empty input) leaves the identity. */
template <typename T, typename R>
__global__ void reduce_all_finish(const typename R::Acc *partials, int64_t count, T *out, R reducer)
{
    __shared__ typename R::Acc scratch[kBlockSize];
    typename R::Acc acc = reducer.identity();
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x)
        acc = reducer(acc, partials[k]);
    acc = block_reduce_last_warp(scratch, acc, reducer);
    if (threadIdx.x == 0)
        *out = reducer.result(acc);
}

/* ---- host side ------------------------------------------------------------ */

static int64_t multiprocessors(void)
{
    static int cached = 0;
    if (cached == 0) {
        int device = 0;
        cudaDeviceProp prop;
        cached = (cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&prop, device) == cudaSuccess)
                     ? prop.multiProcessorCount
                     : 1;
    }
    return cached;
}

/* One rung of the ladder over the rows of `in` along dim. */
template <typename T, typename R>
static mt_status launch_reduce_rows(int algo, const mt_tensor &out, const mt_tensor &in, int dim)
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
        reduce_rows_interleaved<T, R><<<grid, block>>>(out, in_rows, len, stride, rows, R{});
        break;
    case MT_REDUCE_ALGO_SEQUENTIAL:
        reduce_rows_sequential<T, R><<<grid, block>>>(out, in_rows, len, stride, rows, R{});
        break;
    case MT_REDUCE_ALGO_FIRST_ADD:
        reduce_rows_first_add<T, R><<<grid, block>>>(out, in_rows, len, stride, rows, R{});
        break;
    case MT_REDUCE_ALGO_WARP_SHUFFLE:
        reduce_rows_warp<T, R><<<grid, block>>>(out, in_rows, len, stride, rows, R{});
        break;
    default: {
        /* Packs need stride 1 and every row start aligned: a contiguous
         * input whose rows are a whole number of Packs, from an aligned start. */
        const int64_t width = Pack<T>::kWidth;
        const T *first = static_cast<const T *>(in.data) + in.offset;
        const bool vec = (stride == 1 || len == 1) && is_contiguous(in) && dim == in.ndim - 1 &&
                         len % width == 0 && aligned16(first);
        reduce_rows_vectorized<T, R><<<grid, block>>>(out, in_rows, len, stride, rows, vec, R{});
        break;
    }
    }
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* reduce_columns over a contiguous in and out, dim not the last. */
template <typename T, typename R>
static mt_status launch_reduce_columns(const mt_tensor &out, const mt_tensor &in, int dim)
{
    using Acc = typename R::Acc;
    const int64_t len = in.shape[dim];
    const int64_t outer = shape_numel(in.shape, dim);
    const int64_t inner = shape_numel(in.shape + dim + 1, in.ndim - dim - 1);
    const int64_t col_blocks = (inner + 31) / 32;
    /* Enough blocks to give every SM a few: split the reduced dim when the
     * columns alone are too few, keeping at least 64 rows per split. */
    const int64_t want = 4 * multiprocessors();
    int64_t splits = 1;
    while (col_blocks * outer * splits < want && len / (splits * 2) >= 64 && splits * 2 <= kMaxGridYZ)
        splits *= 2;
    const int64_t chunk = (len + splits - 1) / splits;
    T *out_first = static_cast<T *>(out.data) + out.offset;
    const T *in_first = static_cast<const T *>(in.data) + in.offset;
    DeviceScratch partials;
    if (splits > 1)
        CUDA_CHECK(partials.allocate((size_t)(splits * outer * inner) * sizeof(Acc)));
    const dim3 block(32, kColumnRows);
    for (int64_t o0 = 0; o0 < outer; o0 += kMaxGridYZ) {
        const int64_t count = outer - o0 < kMaxGridYZ ? outer - o0 : kMaxGridYZ;
        const dim3 grid((unsigned int)col_blocks, (unsigned int)count, (unsigned int)splits);
        reduce_columns<T, R><<<grid, block>>>(out_first, in_first, len, inner, o0, chunk, partials.as<Acc>(), outer, R{});
        CUDA_CHECK(mt_launch_status());
    }
    if (splits > 1) {
        const int64_t count = outer * inner;
        reduce_column_partials<T, R><<<grid_size(count, kBlockSize), kBlockSize>>>(out_first, partials.as<Acc>(), count, splits, R{});
        CUDA_CHECK(mt_launch_status());
        CUDA_CHECK(partials.release());
    }
    return MT_OK;
}

/* mt_reduce's choice for the layout (algo DEFAULT), or the given rung. */
template <typename T, typename R>
static mt_status launch_reduce(int algo, const mt_tensor &out, const mt_tensor &in, int dim)
{
    if (algo == MT_REDUCE_ALGO_DEFAULT) {
        const int64_t inner = shape_numel(in.shape + dim + 1, in.ndim - dim - 1);
        if (inner > 1 && is_contiguous(in) && is_contiguous(out))
            return launch_reduce_columns<T, R>(out, in, dim);
        algo = MT_REDUCE_ALGO_WARP_SHUFFLE;
    }
    return launch_reduce_rows<T, R>(algo, out, in, dim);
}

template <typename T, typename R>
static mt_status launch_reduce_all(const mt_tensor &out, const mt_tensor &in)
{
    using Acc = typename R::Acc;
    const int64_t n = tensor_numel(in);
    T *out_element = static_cast<T *>(out.data) + out.offset;
    if (n == 0) {
        reduce_all_finish<T, R><<<1, kBlockSize>>>(nullptr, 0, out_element, R{});
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    }

    int64_t blocks = (n + kBlockSize - 1) / kBlockSize;
    if (blocks > kMaxPartials)
        blocks = kMaxPartials;
    DeviceScratch partials;
    CUDA_CHECK(partials.allocate((size_t)blocks * sizeof(Acc)));
    const bool contiguous = is_contiguous(in);
    reduce_all_partials<T, R><<<(unsigned int)blocks, kBlockSize>>>(in, n, contiguous, partials.as<Acc>(), R{});
    CUDA_CHECK(mt_launch_status());
    reduce_all_finish<T, R><<<1, kBlockSize>>>(partials.as<Acc>(), blocks, out_element, R{});
    CUDA_CHECK(mt_launch_status());
    CUDA_CHECK(partials.release());
    return MT_OK;
}

/* op id -> reducer, for mt_reduce. */
template <typename T>
static mt_status reduce_typed(int op, int algo, const mt_tensor &out, const mt_tensor &in, int dim)
{
    switch (op) {
    case MT_REDUCE_SUM:
        return launch_reduce<T, ReduceSum<T>>(algo, out, in, dim);
    case MT_REDUCE_PROD:
        return launch_reduce<T, ReduceProd<T>>(algo, out, in, dim);
    case MT_REDUCE_MAX:
        return launch_reduce<T, ReduceMax<T>>(algo, out, in, dim);
    case MT_REDUCE_MIN:
        return launch_reduce<T, ReduceMin<T>>(algo, out, in, dim);
    case MT_REDUCE_ARGMAX:
        return launch_reduce<T, ReduceArg<T, true>>(algo, out, in, dim);
    case MT_REDUCE_ARGMIN:
        return launch_reduce<T, ReduceArg<T, false>>(algo, out, in, dim);
    default:
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_reduce", "reduce op %d has no kernel", op);
    }
}

/* op id -> reducer, for mt_reduce_all. */
template <typename T>
static mt_status reduce_all_typed(int op, const mt_tensor &out, const mt_tensor &in)
{
    switch (op) {
    case MT_REDUCE_SUM:
        return launch_reduce_all<T, ReduceSum<T>>(out, in);
    case MT_REDUCE_PROD:
        return launch_reduce_all<T, ReduceProd<T>>(out, in);
    case MT_REDUCE_MAX:
        return launch_reduce_all<T, ReduceMax<T>>(out, in);
    case MT_REDUCE_MIN:
        return launch_reduce_all<T, ReduceMin<T>>(out, in);
    case MT_REDUCE_ARGMAX:
        return launch_reduce_all<T, ReduceArg<T, true>>(out, in);
    case MT_REDUCE_ARGMIN:
        return launch_reduce_all<T, ReduceArg<T, false>>(out, in);
    default:
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_reduce_all", "reduce op %d has no kernel", op);
    }
}

static bool is_arg_op(int op)
{
    return op == MT_REDUCE_ARGMAX || op == MT_REDUCE_ARGMIN;
}

/* The checks mt_reduce and mt_reduce_all share. */
static mt_status check_reduce_args(const char *func, int op, const mt_tensor &out, const mt_tensor &in)
{
    if (op < 0 || op >= MT_REDUCE_OP_COUNT)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "unknown reduce op id %d (valid ids are 0..%d)",
                       op, MT_REDUCE_OP_COUNT - 1);
    mt_status status = mt_ensure_init(func);
    if (status == MT_OK)
        status = mt_check_output(func, "out", &out);
    if (status == MT_OK)
        status = mt_check_tensor(func, "in", &in);
    if (status == MT_OK)
        status = mt_check_same_dtype(func, &in, "in", &out, "out");
    return status;
}

/* mt_reduce and mt_reduce_variant. */
static mt_status reduce_along(const char *func, int op, const mt_tensor &out, const mt_tensor &in, int dim, int algo)
{
    mt_status status = check_reduce_args(func, op, out, in);
    if (status != MT_OK)
        return status;

    status = check_dim(func, in, "in", dim);
    if (status != MT_OK)
        return status;
    char in_shape[256];
    char out_shape[256];
    char expected_shape[256];
    mt_tensor expected = in;
    expected.shape[dim] = 1;
    if (!shapes_equal(out, expected))
        return mt_fail(MT_ERR_SHAPE, func, "out has shape %s but reducing in of shape %s along dim %d gives %s",
                       mt_shape_str(&out, out_shape, sizeof out_shape),
                       mt_shape_str(&in, in_shape, sizeof in_shape), dim,
                       mt_shape_str(&expected, expected_shape, sizeof expected_shape));
    if (is_arg_op(op) && in.shape[dim] == 0)
        return mt_fail(MT_ERR_SHAPE, func, "%s of an empty dim: dim %d of in (shape %s) has length 0",
                       op == MT_REDUCE_ARGMAX ? "argmax" : "argmin", dim,
                       mt_shape_str(&in, in_shape, sizeof in_shape));
    if (tensor_numel(out) == 0)
        return MT_OK;

    if (in.dtype == MT_FLOAT32)
        return reduce_typed<float>(op, algo, out, in, dim);
    return reduce_typed<double>(op, algo, out, in, dim);
}

mt_status mt_reduce(int op, mt_tensor out, mt_tensor in, int dim)
{
    return reduce_along("mt_reduce", op, out, in, dim, MT_REDUCE_ALGO_DEFAULT);
}

mt_status mt_reduce_variant(int op, mt_tensor out, mt_tensor in, int dim, int algo)
{
    const char *func = "mt_reduce_variant";
    if (algo < 0 || algo >= MT_REDUCE_ALGO_COUNT)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "unknown reduce algo id %d (valid ids are 0..%d)",
                       algo, MT_REDUCE_ALGO_COUNT - 1);
    return reduce_along(func, op, out, in, dim, algo);
}

mt_status mt_reduce_all(int op, mt_tensor out, mt_tensor in)
{
    const char *func = "mt_reduce_all";
    mt_status status = check_reduce_args(func, op, out, in);
    if (status != MT_OK)
        return status;

    char shape[256];
    if (tensor_numel(out) != 1)
        return mt_fail(MT_ERR_SHAPE, func, "out has shape %s; it must hold exactly one element",
                       mt_shape_str(&out, shape, sizeof shape));
    if (is_arg_op(op) && tensor_numel(in) == 0)
        return mt_fail(MT_ERR_SHAPE, func, "%s of an empty tensor (in has shape %s)",
                       op == MT_REDUCE_ARGMAX ? "argmax" : "argmin",
                       mt_shape_str(&in, shape, sizeof shape));

    if (in.dtype == MT_FLOAT32)
        return reduce_all_typed<float>(op, out, in);
    return reduce_all_typed<double>(op, out, in);
}
