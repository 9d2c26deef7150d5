/*
 * reduce.cu: reductions (sum, prod, max, min, argmax, argmin) along one
 * dimension (mt_reduce) or over every element (mt_reduce_all).
 *
 * mt_reduce: one block per output element. Think of the input as "rows":
 * all the elements that reduce into one output, spaced in memory by the
 * stride of the reduced dim. A block
 *   1. has each thread accumulate a block-strided slice of its row
 *      (thread t takes elements t, t + B, t + 2B, ... for B threads), which
 *      handles a row of any length with a fixed number of threads, then
 *   2. combines the B per-thread results with block_reduce, the shared-memory
 *      tree of ops_common.h (log2(B) levels, a barrier after each).
 * Rows are handed to blocks with a grid-stride loop, so any number of rows
 * works with a capped grid. The block size is a power of two chosen from the
 * row length (32 threads for a row of 5, 256 for long rows).
 *
 * mt_reduce_all: two passes. Pass 1 runs up to kMaxPartials blocks; each
 * walks a grid-strided share of all the elements and writes one partial
 * result. Pass 2 runs a single block that reduces those partials. (One block
 * alone would leave all but one SM of the GPU idle.)
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

/* ---- kernels ------------------------------------------------------------- */

/* in_rows is `in` with shape[dim] set to 1: ordinal r of it is the first
 * element of row r; the row's k-th element is `stride` elements further on.
 * out has that same shape (the keepdim form). */
template <typename T, typename R>
__global__ void reduce_rows(mt_tensor out, mt_tensor in_rows, int64_t len, int64_t stride, int64_t rows, R reducer)
{
    __shared__ typename R::Acc scratch[kBlockSize];
    T *out_data = static_cast<T *>(out.data);
    const T *in_data = static_cast<const T *>(in_rows.data);
    /* `row` is the same for every thread of the block, so all of them run
     * this loop equally often and meet the same barriers in block_reduce. */
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

/* Pass 1 of mt_reduce_all: block b writes partials[b]. */
template <typename T, typename R>
__global__ void reduce_all_partials(mt_tensor in, int64_t n, bool contiguous, typename R::Acc *partials, R reducer)
{
    __shared__ typename R::Acc scratch[kBlockSize];
    const T *in_data = static_cast<const T *>(in.data);
    typename R::Acc acc = reducer.identity();
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        int64_t pos = contiguous ? in.offset + i : ordinal_to_position(i, &in);
        acc = reducer(acc, reducer.lift(in_data[pos], i));
    }
    acc = block_reduce(scratch, acc, reducer);
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
    acc = block_reduce(scratch, acc, reducer);
    if (threadIdx.x == 0)
        *out = reducer.result(acc);
}

/* ---- host side ------------------------------------------------------------ */

template <typename T, typename R>
static mt_status launch_reduce_rows(const mt_tensor &out, const mt_tensor &in, int dim)
{
    mt_tensor in_rows = in;
    in_rows.shape[dim] = 1;
    const int64_t len = in.shape[dim];
    const int64_t rows = tensor_numel(out);
    const int block = row_block_size(len);
    const unsigned int grid = grid_size(rows, 1);
    reduce_rows<T, R><<<grid, block>>>(out, in_rows, len, in.strides[dim], rows, R{});
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
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
static mt_status reduce_rows_typed(int op, const mt_tensor &out, const mt_tensor &in, int dim)
{
    switch (op) {
    case MT_REDUCE_SUM:
        return launch_reduce_rows<T, ReduceSum<T>>(out, in, dim);
    case MT_REDUCE_PROD:
        return launch_reduce_rows<T, ReduceProd<T>>(out, in, dim);
    case MT_REDUCE_MAX:
        return launch_reduce_rows<T, ReduceMax<T>>(out, in, dim);
    case MT_REDUCE_MIN:
        return launch_reduce_rows<T, ReduceMin<T>>(out, in, dim);
    case MT_REDUCE_ARGMAX:
        return launch_reduce_rows<T, ReduceArg<T, true>>(out, in, dim);
    case MT_REDUCE_ARGMIN:
        return launch_reduce_rows<T, ReduceArg<T, false>>(out, in, dim);
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

mt_status mt_reduce(int op, mt_tensor out, mt_tensor in, int dim)
{
    const char *func = "mt_reduce";
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
        return reduce_rows_typed<float>(op, out, in, dim);
    return reduce_rows_typed<double>(op, out, in, dim);
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
