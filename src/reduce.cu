/*
 * reduce.cu: reductions (sum, prod, max, min, argmax, argmin) along one
 * dimension (mt_reduce) or over every element (mt_reduce_all).
 *
 * mt_reduce works on "rows": all the elements that reduce into one output,
 * spaced in memory by the stride of the reduced dim. Which kernel runs
 * depends on the layout:
 *
 *   reduce_rows_warp     (rows contiguous or strided) one block per row;
 *                        the warp_shuffle rung of the reduction ladder
 *                        (src/reduce_ladder.cu).
 *   reduce_rows_warp_rows  (many contiguous rows of at most 2048 elements)
 *                        one warp, or a group of lanes, per row: the
 *                        warp_rows rung.
 *   reduce_rows_vectorized  (max, min, argmax, argmin and max/min with
 *                        indices over other contiguous rows of whole 16-byte
 *                        Packs from an aligned start) one block per row, four
 *                        16-byte loads in flight per thread: the vectorized
 *                        rung. Sums keep warp_shuffle's order of additions.
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
 * Under the teaching kernel policy (src/policy.h) every mt_reduce takes
 * reduce_rows_first_add, the first_add rung.
 *
 * mt_reduce_all: two passes. Pass 1 runs up to kMaxPartials blocks; each
 * walks a grid-strided share of all the elements and writes one partial
 * result.
 * Pass 2 runs a single block that reduces those partials. (One block alone
 * would leave all but one SM of the GPU idle.)
 *
 * The reducers (sum, prod, ...) are in src/reduce.h.
 */
#include "reduce.h"

/* Pass 1 of mt_reduce_all writes at most this many partials: about enough
 * blocks of 256 threads to fill a large GPU, and few enough that pass 2's one
 * block reduces them with a handful of loads per thread. */
constexpr int64_t kMaxPartials = 1024;

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
__global__ void __launch_bounds__(32 * kColumnRows) reduce_columns(typename R::Out *out, const T *in, int64_t len, int64_t inner, int64_t outer_start, int64_t chunk, typename R::Acc *partials, int64_t outer, R reducer)
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
            store_result(reducer, out, o * inner + i, acc);
    }
}

/* out[j] = the combination of partials[z * count + j] over z < splits. */
template <typename T, typename R>
__global__ void reduce_column_partials(typename R::Out *out, const typename R::Acc *partials, int64_t count, int64_t splits, R reducer)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < count; j += step) {
        typename R::Acc acc = partials[j];
        for (int64_t z = 1; z < splits; ++z)
            acc = reducer(acc, partials[z * count + j]);
        store_result(reducer, out, j, acc);
    }
}

/* ---- mt_reduce_all ---------------------------------------------------------- */

/* How a block of mt_reduce_all combines its threads' values (block_reduce.h):
 * the teaching policy's shared-memory tree, or the fast policy's same tree
 * with its last warp done by shuffles. The same additions in the same order,
 * so the same bits; the fast one has four barriers fewer. */
struct TreeFinish {
    template <typename Acc, typename Combine>
    __device__ Acc operator()(BlockScratch<Acc> &scratch, Acc value, Combine combine) const
    {
        return block_reduce(scratch, value, combine);
    }
};

struct LastWarpFinish {
    template <typename Acc, typename Combine>
    __device__ Acc operator()(BlockScratch<Acc> &scratch, Acc value, Combine combine) const
    {
        return block_reduce_last_warp(scratch, value, combine);
    }
};

/* Pass 1: block b writes partials[b]. Thread t of the grid takes elements
 * t, t + G, t + 2G, ... (G threads in the grid), then the block combines its
 * threads' values with block_reduce's tree (Finish): the order of the
 * additions is fixed, and a NumPy mirror of it gives the same bits. */
template <typename T, typename R, typename Finish>
__global__ void reduce_all_partials(mt_tensor in, int64_t n, bool contiguous, typename R::Acc *partials, R reducer)
{
    __shared__ BlockScratch<typename R::Acc> scratch;
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
    acc = Finish{}(scratch, acc, reducer);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = acc;
}

/* Pass 2 of mt_reduce_all: one block reduces `count` partials into *out.
 * count == 0 (an empty input) leaves the identity. */
template <typename T, typename R, typename Finish>
__global__ void reduce_all_finish(const typename R::Acc *partials, int64_t count, typename R::Out *out, R reducer)
{
    __shared__ BlockScratch<typename R::Acc> scratch;
    typename R::Acc acc = reducer.identity();
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x)
        acc = reducer(acc, partials[k]);
    acc = Finish{}(scratch, acc, reducer);
    if (threadIdx.x == 0)
        *out = reducer.result(acc);
}

/* ---- host side ------------------------------------------------------------ */

template <typename T, typename R>
static mt_status launch_reduce_columns(const mt_tensor &out, const mt_tensor &in, int dim, const R &reducer)
{
    using Acc = typename R::Acc;
    const int64_t len = in.shape[dim];
    const int64_t outer = shape_numel(in.shape, dim);
    const int64_t inner = shape_numel(in.shape + dim + 1, in.ndim - dim - 1);
    const int64_t col_blocks = (inner + 31) / 32;
    /* Enough blocks to give every SM a few: split the reduced dim when the
     * columns alone are too few, keeping at least 64 rows per split. */
    const int64_t want = 4 * (int64_t)mt_sm_count();
    int64_t splits = 1;
    while (col_blocks * outer * splits < want && len / (splits * 2) >= 64 && splits * 2 <= kMaxGridYZ)
        splits *= 2;
    const int64_t chunk = (len + splits - 1) / splits;
    typename R::Out *out_first = static_cast<typename R::Out *>(out.data) + out.offset;
    const T *in_first = static_cast<const T *>(in.data) + in.offset;
    DeviceScratch partials;
    if (splits > 1)
        CUDA_CHECK(partials.allocate((size_t)(splits * outer * inner) * sizeof(Acc)));
    const dim3 block(32, kColumnRows);
    for (int64_t o0 = 0; o0 < outer; o0 += kMaxGridYZ) {
        const int64_t count = outer - o0 < kMaxGridYZ ? outer - o0 : kMaxGridYZ;
        const dim3 grid((unsigned int)col_blocks, (unsigned int)count, (unsigned int)splits);
        reduce_columns<T, R><<<grid, block, 0, mt_stream()>>>(out_first, in_first, len, inner, o0, chunk, partials.as<Acc>(), outer, reducer);
        CUDA_CHECK(mt_launch_status());
    }
    if (splits > 1) {
        const int64_t count = outer * inner;
        reduce_column_partials<T, R><<<grid_size(count, kBlockSize), kBlockSize, 0, mt_stream()>>>(out_first, partials.as<Acc>(), count, splits, reducer);
        CUDA_CHECK(mt_launch_status());
        CUDA_CHECK(partials.release());
    }
    return MT_OK;
}

/* mt_reduce_all's two passes, their blocks finishing with Finish. */
template <typename T, typename R, typename Finish>
static mt_status launch_reduce_all_with(const mt_tensor &out, const mt_tensor &in)
{
    using Acc = typename R::Acc;
    const int64_t n = tensor_numel(in);
    typename R::Out *out_element = static_cast<typename R::Out *>(out.data) + out.offset;
    if (n == 0) {
        reduce_all_finish<T, R, Finish><<<1, kBlockSize, 0, mt_stream()>>>(nullptr, 0, out_element, R{});
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    }

    int64_t blocks = (n + kBlockSize - 1) / kBlockSize;
    if (blocks > kMaxPartials)
        blocks = kMaxPartials;
    DeviceScratch partials;
    CUDA_CHECK(partials.allocate((size_t)blocks * sizeof(Acc)));
    const bool contiguous = is_contiguous(in);
    reduce_all_partials<T, R, Finish><<<(unsigned int)blocks, kBlockSize, 0, mt_stream()>>>(in, n, contiguous, partials.as<Acc>(), R{});
    CUDA_CHECK(mt_launch_status());
    reduce_all_finish<T, R, Finish><<<1, kBlockSize, 0, mt_stream()>>>(partials.as<Acc>(), blocks, out_element, R{});
    CUDA_CHECK(mt_launch_status());
    CUDA_CHECK(partials.release());
    return MT_OK;
}

/* The policy (policy.h) picks the block finish of mt_reduce_all. */
template <typename T, typename R>
static mt_status launch_reduce_all(const mt_tensor &out, const mt_tensor &in)
{
    if (mt_fast_kernels())
        return launch_reduce_all_with<T, R, LastWarpFinish>(out, in);
    MT_TRY(MT_TASK_CHECK(reductions)); /* the tree finish is block_reduce */
    return launch_reduce_all_with<T, R, TreeFinish>(out, in);
}

/* op id -> reducer, for mt_reduce. */
static bool is_arg_op(int op)
{
    return op == MT_REDUCE_ARGMAX || op == MT_REDUCE_ARGMIN;
}

/* Does the dtype take the op (reduce_takes, reduce.h)? */
static bool reduce_dtype_takes(int32_t dtype, int op)
{
    switch (dtype) {
    case MT_FLOAT32:
        return reduce_takes<float>(op);
    case MT_FLOAT64:
        return reduce_takes<double>(op);
    case MT_INT64:
        return reduce_takes<int64_t>(op);
    default:
        return reduce_takes<bool>(op);
    }
}

/* The checks mt_reduce and mt_reduce_all share: out has in's dtype, or
 * int64 for argmax/argmin, and in's dtype takes the op. */
static mt_status check_reduce_args(const char *func, int op, const mt_tensor &out, const mt_tensor &in)
{
    MT_TRY(mt_check_id(func, "reduce op", op, MT_REDUCE_OP_COUNT));
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    MT_TRY(mt_check_tensor(func, "in", &in));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "in", &in));
    if (is_arg_op(op)) {
        if (out.dtype != MT_INT64)
            return mt_fail(MT_ERR_DTYPE, func, "out is %s; %s writes int64 indices", dtype_name(out.dtype),
                           mt_op_name("reduce", op));
    } else {
        MT_TRY(mt_check_same_dtype(func, &in, "in", &out, "out"));
    }
    if (!reduce_dtype_takes(in.dtype, op))
        return mt_fail(MT_ERR_DTYPE, func, "%s is not defined for %s", mt_op_name("reduce", op),
                       dtype_name(in.dtype));
    return mt_check_alias(func, &out, &in, "in");
}

/* out has in's shape with shape[dim] == 1 (keepdim). */
static mt_status check_reduced_shape(const char *func, const mt_tensor &out, const mt_tensor &in, int dim)
{
    mt_tensor expected = in;
    expected.shape[dim] = 1;
    if (shapes_equal(out, expected))
        return MT_OK;
    char in_shape[256];
    char out_shape[256];
    char expected_shape[256];
    return mt_fail(MT_ERR_SHAPE, func, "out has shape %s but reducing in of shape %s along dim %d gives %s",
                   mt_shape_str(&out, out_shape, sizeof out_shape),
                   mt_shape_str(&in, in_shape, sizeof in_shape), dim,
                   mt_shape_str(&expected, expected_shape, sizeof expected_shape));
}

/* argmax and argmin have no identity: an empty dim has no answer. */
static mt_status check_arg_not_empty(const char *func, int op, const mt_tensor &in, int dim)
{
    if (!is_arg_op(op) || in.shape[dim] != 0)
        return MT_OK;
    char in_shape[256];
    return mt_fail(MT_ERR_SHAPE, func, "%s of an empty dim: dim %d of in (shape %s) has length 0",
                   op == MT_REDUCE_ARGMAX ? "argmax" : "argmin", dim,
                   mt_shape_str(&in, in_shape, sizeof in_shape));
}

/* mt_reduce's choice for the layout: walking columns (kWalkColumns) for a
 * contiguous input reduced over a dim that is not the last; one warp per row
 * (the warp_rows rung) for many short contiguous rows; the vectorized rung
 * for other contiguous rows of whole Packs when the op is order_free; else
 * the warp_shuffle rung. Under the teaching policy (policy.h), the first_add
 * rung for every layout. */
constexpr int kWalkColumns = -1;

/* Ops whose result does not depend on the order the tree combines in:
 * max and min (NaN wins wherever it is), and the arg reductions, whose
 * combine picks the first best index (ReduceArg, reduce.h). A float sum
 * does depend on it: notebook 02 mirrors warp_shuffle's order bit for bit. */
static bool is_order_free(int op)
{
    return op == MT_REDUCE_MAX || op == MT_REDUCE_MIN || is_arg_op(op);
}

/* Contiguous rows along the last dim, a whole number of 16-byte Packs each,
 * the first from a 16-byte aligned address: every row start is aligned, so
 * the vectorized rung reads them with 16-byte loads (its own test). */
static bool rows_take_packs(const mt_tensor &in, int dim)
{
    const int64_t width = 16 / dtype_size(in.dtype);
    const char *first = static_cast<const char *>(in.data) + in.offset * dtype_size(in.dtype);
    return dim == in.ndim - 1 && is_contiguous(in) && in.shape[dim] % width == 0 && aligned16(first);
}

static int default_rung(const mt_tensor &out, const mt_tensor &in, int dim, bool order_free)
{
    if (!mt_fast_kernels())
        return MT_REDUCE_ALGO_FIRST_ADD;
    const int64_t inner = shape_numel(in.shape + dim + 1, in.ndim - dim - 1);
    if (inner > 1 && is_contiguous(in) && is_contiguous(out))
        return kWalkColumns;
    /* Contiguous rows of at most 2048 elements, at least as many as the GPU
     * holds warps: a block per row spends much of its time in the block-wide
     * finish (and a short row leaves most of its threads idle), and
     * bench/reduce_rows.py measures a warp per row, or a group of lanes per
     * short row, 2.5-2.8x faster at 1024 and 128 elements, 4.5x at 256 and
     * 3.5-6.4x at 32, 16 and 7 on the H100 (slower at 4096). Fewer or longer
     * rows keep warp_shuffle, whose additions notebook 02 mirrors bit for bit. */
    const int64_t len = in.shape[dim], rows = tensor_numel(out);
    const bool many_rows = dim == in.ndim - 1 && is_contiguous(in) && rows >= (int64_t)mt_sm_count() * 64;
    if (many_rows && len <= 2048)
        return MT_REDUCE_ALGO_WARP_ROWS;
    /* max, min and the arg reductions on many longer rows: a warp per row
     * too, now that its grid fits the SMs at once (__launch_bounds__(256, 6)).
     * On 16384 x 4096 floats (H200, bench/run.py --only norm) argmax took
     * 0.078 ms there against 0.103 on vectorized and 0.108 on warp_shuffle
     * (torch 0.079), amax 0.072 against 0.077 and 0.085 (torch 0.068). */
    if (many_rows && order_free)
        return MT_REDUCE_ALGO_WARP_ROWS;
    /* Fewer rows: one block per row, each thread with four 16-byte loads in
     * flight (16 floats) before it combines any, where warp_shuffle has
     * eight 4-byte ones and a 64-bit address computation per element. */
    if (order_free && rows_take_packs(in, dim))
        return MT_REDUCE_ALGO_VECTORIZED;
    return MT_REDUCE_ALGO_WARP_SHUFFLE;
}

/* Does the fast policy take reduce_index_rows (src/reduce_index_rows.cu) for
 * an order-free op along dim: rows that fit it, at least 128 Packs long (512
 * floats: four Packs a lane of a warp); shorter ones keep warp_rows' groups
 * of lanes. */
static bool takes_index_rows(int op, const mt_tensor &in, int dim)
{
    return mt_fast_kernels() && is_order_free(op) && index_rows_fit(in, dim) &&
           in.shape[dim] / (int64_t)(16 / dtype_size(in.dtype)) >= 128;
}

template <typename T>
static mt_status reduce_default(const char *func, int op, const mt_tensor &out, const mt_tensor &in, int dim)
{
    if (takes_index_rows(op, in, dim)) {
        const bool max = op == MT_REDUCE_MAX || op == MT_REDUCE_ARGMAX;
        const int warps = index_rows_default_warps(in, dim);
        if (is_arg_op(op))
            return reduce_index_rows_launch(max, nullptr, &out, in, dim, warps);
        return reduce_index_rows_launch(max, &out, nullptr, in, dim, warps);
    }
    const int rung = default_rung(out, in, dim, is_order_free(op));
    if (rung != kWalkColumns)
        return reduce_rows_variant(func, rung, op, out, in, dim);
    return with_reducer<T>(func, op, [&](auto reducer) { return launch_reduce_columns<T>(out, in, dim, reducer); });
}

/* mt_reduce and mt_reduce_variant. */
static mt_status reduce_along(const char *func, int op, const mt_tensor &out, const mt_tensor &in, int dim, int algo)
{
    MT_TRY(check_reduce_args(func, op, out, in));
    MT_TRY(mt_check_dim(func, &in, "in", dim));
    MT_TRY(check_reduced_shape(func, out, in, dim));
    MT_TRY(check_arg_not_empty(func, op, in, dim));
    if (tensor_numel(out) == 0)
        return MT_OK;

    if (algo != MT_REDUCE_ALGO_DEFAULT)
        return reduce_rows_variant(func, algo, op, out, in, dim);
    return with_dtype(func, in.dtype, [&](auto tag) { return reduce_default<decltype(tag)>(func, op, out, in, dim); });
}

mt_status mt_reduce(int op, mt_tensor out, mt_tensor in, int dim)
{
    return reduce_along("mt_reduce", op, out, in, dim, MT_REDUCE_ALGO_DEFAULT);
}

mt_status mt_reduce_variant(int op, mt_tensor out, mt_tensor in, int dim, int algo)
{
    const char *func = "mt_reduce_variant";
    MT_TRY(mt_check_id(func, "reduce algo", algo, MT_REDUCE_ALGO_COUNT));
    return reduce_along(func, op, out, in, dim, algo);
}

mt_status mt_reduce_all(int op, mt_tensor out, mt_tensor in)
{
    const char *func = "mt_reduce_all";
    MT_TRY(check_reduce_args(func, op, out, in));
    char shape[256];
    if (tensor_numel(out) != 1)
        return mt_fail(MT_ERR_SHAPE, func, "out has shape %s; it must hold exactly one element",
                       mt_shape_str(&out, shape, sizeof shape));
    if (is_arg_op(op) && tensor_numel(in) == 0)
        return mt_fail(MT_ERR_SHAPE, func, "%s of an empty tensor (in has shape %s)",
                       op == MT_REDUCE_ARGMAX ? "argmax" : "argmin",
                       mt_shape_str(&in, shape, sizeof shape));

    return with_dtype(func, in.dtype, [&](auto tag) {
        using T = decltype(tag);
        return with_reducer<T>(func, op, [&](auto reducer) {
            return launch_reduce_all<T, decltype(reducer)>(out, in);
        });
    });
}

/* The checks of max(dim) / min(dim) with indices (op MAX, MIN, ARGMAX or
 * ARGMIN; max: MAX or ARGMAX): indices int64, values of in's dtype, both of
 * the keepdim shape, of the same strides and apart. */
static mt_status check_with_indices(const char *func, int op, const mt_tensor &values, const mt_tensor &indices,
                                    const mt_tensor &in, int dim)
{
    MT_TRY(mt_check_id(func, "reduce op", op, MT_REDUCE_OP_COUNT));
    if (op == MT_REDUCE_SUM || op == MT_REDUCE_PROD)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "op is %s; only max, min, argmax and argmin have indices",
                       mt_op_name("reduce", op));
    const bool max = op == MT_REDUCE_MAX || op == MT_REDUCE_ARGMAX;
    MT_TRY(check_reduce_args(func, max ? MT_REDUCE_ARGMAX : MT_REDUCE_ARGMIN, indices, in));
    MT_TRY(mt_check_output(func, "values", &values));
    MT_TRY(mt_check_extent(func, "values", &values));
    MT_TRY(mt_check_same_dtype(func, &in, "in", &values, "values"));
    MT_TRY(mt_check_dim(func, &in, "in", dim));
    MT_TRY(check_reduced_shape(func, indices, in, dim));
    MT_TRY(check_reduced_shape(func, values, in, dim));
    MT_TRY(check_arg_not_empty(func, max ? MT_REDUCE_ARGMAX : MT_REDUCE_ARGMIN, in, dim));
    /* One position serves both outputs (store_result, reduce.h). */
    for (int d = 0; d < in.ndim; ++d)
        if (values.shape[d] > 1 && values.strides[d] != indices.strides[d])
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "values and indices must have the same strides; they "
                           "differ along dim %d (%lld and %lld)", d, (long long)values.strides[d],
                           (long long)indices.strides[d]);
    MT_TRY(mt_check_alias(func, &values, &in, "in"));
    if (tensors_overlap(values, indices))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "values and indices overlap; each needs its own memory");
    return MT_OK;
}

/* max(dim) / min(dim) with indices: the argmax (argmin) pass, on the kernel
 * mt_reduce would take for the layout, writing both halves of each row's
 * (value, index) candidate. */
mt_status mt_reduce_with_indices(int op, mt_tensor values, mt_tensor indices, mt_tensor in, int dim)
{
    const char *func = "mt_reduce_with_indices";
    MT_TRY(check_with_indices(func, op, values, indices, in, dim));
    if (tensor_numel(indices) == 0)
        return MT_OK;

    const bool max = op == MT_REDUCE_MAX || op == MT_REDUCE_ARGMAX;
    if (takes_index_rows(op, in, dim))
        return reduce_index_rows_launch(max, &values, &indices, in, dim, index_rows_default_warps(in, dim));
    const int rung = default_rung(indices, in, dim, true);
    if (rung != kWalkColumns)
        return reduce_rows_with_index_variant(func, rung, max, values, indices, in, dim);
    return with_dtype(func, in.dtype, [&](auto tag) {
        using T = decltype(tag);
        int64_t *indices_first = static_cast<int64_t *>(indices.data) + indices.offset;
        T *values_first = static_cast<T *>(values.data) + values.offset;
        if (max)
            return launch_reduce_columns<T>(indices, in, dim, ReduceWithIndex<T, true>{{}, indices_first, values_first});
        return launch_reduce_columns<T>(indices, in, dim, ReduceWithIndex<T, false>{{}, indices_first, values_first});
    });
}

/* reduce_index_rows with a chosen group of warps a row, for the benchmarks
 * and the tests: values and indices as mt_reduce_with_indices, but either may
 * be none (a zeroed mt_tensor: argmax / argmin write no values, amax / amin
 * no indices; not both). */
mt_status mt_reduce_index_rows(int op, mt_tensor values, mt_tensor indices, mt_tensor in, int dim, int warps)
{
    const char *func = "mt_reduce_index_rows";
    const bool with_values = !(values.data == nullptr && values.ndim == 0);
    const bool with_indices = !(indices.data == nullptr && indices.ndim == 0);
    if (!with_values && !with_indices)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "values and indices are both none; one is needed");
    if (with_values && with_indices) {
        MT_TRY(check_with_indices(func, op, values, indices, in, dim));
    } else {
        /* One output: indices (int64) for argmax / argmin, values (in's
         * dtype) for amax / amin, checked as mt_reduce checks its out. */
        MT_TRY(mt_check_id(func, "reduce op", op, MT_REDUCE_OP_COUNT));
        if (op == MT_REDUCE_SUM || op == MT_REDUCE_PROD)
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "op is %s; only max, min, argmax and argmin run here",
                           mt_op_name("reduce", op));
        const bool max = op == MT_REDUCE_MAX || op == MT_REDUCE_ARGMAX;
        const int checked_op = with_values ? (max ? MT_REDUCE_MAX : MT_REDUCE_MIN)
                                           : (max ? MT_REDUCE_ARGMAX : MT_REDUCE_ARGMIN);
        const mt_tensor &out = with_values ? values : indices;
        MT_TRY(check_reduce_args(func, checked_op, out, in));
        MT_TRY(mt_check_dim(func, &in, "in", dim));
        MT_TRY(check_reduced_shape(func, out, in, dim));
        MT_TRY(check_arg_not_empty(func, checked_op, in, dim));
    }
    if (warps != 0 && warps != 1 && warps != 2 && warps != 4 && warps != 8)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "warps is %d; it must be 1, 2, 4 or 8 (0: the library's)",
                       warps);
    if (!index_rows_fit(in, dim)) {
        char shape[256];
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "in (%s, shape %s) along dim %d does not suit this kernel: "
                       "it reads float32 or float64 rows of the last dim, stride 1, a whole number of 16-byte "
                       "Packs each, every row start 16-byte aligned", dtype_name(in.dtype),
                       mt_shape_str(&in, shape, sizeof shape), dim);
    }
    const mt_tensor &out = with_indices ? indices : values;
    if (tensor_numel(out) == 0)
        return MT_OK;
    const bool max = op == MT_REDUCE_MAX || op == MT_REDUCE_ARGMAX;
    return reduce_index_rows_launch(max, with_values ? &values : nullptr, with_indices ? &indices : nullptr, in,
                                    dim, warps == 0 ? index_rows_default_warps(in, dim) : warps);
}
