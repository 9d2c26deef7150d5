/*
 * map.cu: unary elementwise ops, out = f(in), and mt_fill (out = value).
 *
 * One thread per output element. The kernels use a grid-stride loop: thread
 * t of a grid of G threads handles elements t, t + G, t + 2G, ..., so a grid
 * of any size (we cap it, see ops_common.h) covers a tensor of any size.
 *
 * Two kernels per op:
 *   map_strided     any strides (a transposed, sliced or broadcast input).
 *                   Each thread turns its ordinal into a position in each
 *                   tensor with ordinal_to_position (indexing.h).
 *   map_contiguous  both tensors dense and row-major, the common case:
 *                   element i lives at i, so there is no index arithmetic,
 *                   and neighbouring threads read neighbouring addresses,
 *                   which the GPU combines into few memory transactions.
 *
 * The op is a functor passed as a template argument: the compiler inlines
 * op(x) into the loop, so one kernel source serves every op and both dtypes
 * with no switch inside the loop. MT_MAP_COPY may convert between float32
 * and float64 (TOut and TIn differ only for it): that is how casts and
 * .contiguous() are done.
 */
#include "ops_common.h"

/* ---- the ops ------------------------------------------------------------- */

template <typename T>
struct MapCopy {
    __device__ T operator()(T x) const { return x; }
};

template <typename T>
struct MapNeg {
    __device__ T operator()(T x) const { return -x; }
};

template <typename T>
struct MapExp {
    __device__ T operator()(T x) const { return mt_exp(x); }
};

template <typename T>
struct MapLog {
    __device__ T operator()(T x) const { return mt_log(x); }
};

template <typename T>
struct MapRelu {
    /* Written so that NaN passes through (NaN < 0 is false), as in PyTorch:
     * a NaN in the activations should not be hidden by the ReLU. */
    __device__ T operator()(T x) const { return x < T(0) ? T(0) : x; }
};

template <typename T>
struct MapSigmoid {
    __device__ T operator()(T x) const
    {
        /* 1 / (1 + exp(-x)) overflows exp for large negative x; each branch
         * only ever takes exp of a non-positive number, which cannot. */
        if (x >= T(0))
            return T(1) / (T(1) + mt_exp(-x));
        T e = mt_exp(x);
        return e / (T(1) + e);
    }
};

template <typename T>
struct MapTanh {
    __device__ T operator()(T x) const { return mt_tanh(x); }
};

template <typename T>
struct MapAbs {
    __device__ T operator()(T x) const { return mt_fabs(x); }
};

template <typename T>
struct MapSqrt {
    __device__ T operator()(T x) const { return mt_sqrt(x); }
};

template <typename T>
struct MapReciprocal {
    __device__ T operator()(T x) const { return T(1) / x; }
};

template <typename T>
struct MapSign {
    /* 0 (and -0) and NaN fall through to themselves. */
    __device__ T operator()(T x) const
    {
        if (x > T(0))
            return T(1);
        if (x < T(0))
            return T(-1);
        return x;
    }
};

template <typename T>
struct MapAddScalar {
    T s;
    __device__ T operator()(T x) const { return x + s; }
};

template <typename T>
struct MapMulScalar {
    T s;
    __device__ T operator()(T x) const { return x * s; }
};

template <typename T>
struct MapPowScalar {
    T s;
    __device__ T operator()(T x) const { return mt_pow(x, s); }
};

template <typename T>
struct MapRpowScalar {
    T s;
    __device__ T operator()(T x) const { return mt_pow(s, x); }
};

/* ---- kernels ------------------------------------------------------------- */

template <typename TOut, typename TIn, typename Op>
__global__ void map_strided(mt_tensor out, mt_tensor in, int64_t n, Op op)
{
    TOut *out_data = static_cast<TOut *>(out.data);
    const TIn *in_data = static_cast<const TIn *>(in.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        TIn x = in_data[ordinal_to_position(i, &in)];
        out_data[ordinal_to_position(i, &out)] = (TOut)op(x);
    }
}

/* out and in already point at their first element (offset applied). */
template <typename TOut, typename TIn, typename Op>
__global__ void map_contiguous(TOut *out, const TIn *in, int64_t n, Op op)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        out[i] = (TOut)op(in[i]);
}

template <typename T>
__global__ void fill_strided(mt_tensor out, int64_t n, T value)
{
    T *out_data = static_cast<T *>(out.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        out_data[ordinal_to_position(i, &out)] = value;
}

template <typename T>
__global__ void fill_contiguous(T *out, int64_t n, T value)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        out[i] = value;
}

/* ---- host side ------------------------------------------------------------ */

/* Launches one map over non-empty, validated tensors. */
template <typename TOut, typename TIn, typename Op>
static mt_status launch_map(const mt_tensor &out, const mt_tensor &in, Op op)
{
    const int64_t n = tensor_numel(out);
    const unsigned int grid = grid_size(n, kBlockSize);
    if (is_contiguous(out) && is_contiguous(in)) {
        TOut *out_first = static_cast<TOut *>(out.data) + out.offset;
        const TIn *in_first = static_cast<const TIn *>(in.data) + in.offset;
        map_contiguous<TOut, TIn, Op><<<grid, kBlockSize>>>(out_first, in_first, n, op);
    } else {
        map_strided<TOut, TIn, Op><<<grid, kBlockSize>>>(out, in, n, op);
    }
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* op id -> functor, for ops whose input and output dtypes agree. */
template <typename T>
static mt_status map_same_dtype(int op, const mt_tensor &out, const mt_tensor &in, T s)
{
    switch (op) {
    case MT_MAP_COPY:
        return launch_map<T, T>(out, in, MapCopy<T>{});
    case MT_MAP_NEG:
        return launch_map<T, T>(out, in, MapNeg<T>{});
    case MT_MAP_EXP:
        return launch_map<T, T>(out, in, MapExp<T>{});
    case MT_MAP_LOG:
        return launch_map<T, T>(out, in, MapLog<T>{});
    case MT_MAP_RELU:
        return launch_map<T, T>(out, in, MapRelu<T>{});
    case MT_MAP_SIGMOID:
        return launch_map<T, T>(out, in, MapSigmoid<T>{});
    case MT_MAP_TANH:
        return launch_map<T, T>(out, in, MapTanh<T>{});
    case MT_MAP_ABS:
        return launch_map<T, T>(out, in, MapAbs<T>{});
    case MT_MAP_SQRT:
        return launch_map<T, T>(out, in, MapSqrt<T>{});
    case MT_MAP_RECIPROCAL:
        return launch_map<T, T>(out, in, MapReciprocal<T>{});
    case MT_MAP_SIGN:
        return launch_map<T, T>(out, in, MapSign<T>{});
    case MT_MAP_ADD_SCALAR:
        return launch_map<T, T>(out, in, MapAddScalar<T>{s});
    case MT_MAP_MUL_SCALAR:
        return launch_map<T, T>(out, in, MapMulScalar<T>{s});
    case MT_MAP_POW_SCALAR:
        return launch_map<T, T>(out, in, MapPowScalar<T>{s});
    case MT_MAP_RPOW_SCALAR:
        return launch_map<T, T>(out, in, MapRpowScalar<T>{s});
    default:
        /* mt_map checked the id; FILL never gets here. */
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_map", "map op %d has no kernel", op);
    }
}

template <typename T>
static mt_status launch_fill(const mt_tensor &out, T value)
{
    const int64_t n = tensor_numel(out);
    const unsigned int grid = grid_size(n, kBlockSize);
    if (is_contiguous(out)) {
        T *out_first = static_cast<T *>(out.data) + out.offset;
        fill_contiguous<T><<<grid, kBlockSize>>>(out_first, n, value);
    } else {
        fill_strided<T><<<grid, kBlockSize>>>(out, n, value);
    }
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* mt_fill, and mt_map with MT_MAP_FILL, which ignores its input. */
static mt_status fill(const char *func, const mt_tensor &out, double value)
{
    mt_status status = mt_ensure_init(func);
    if (status == MT_OK)
        status = mt_check_output(func, "out", &out);
    if (status != MT_OK)
        return status;
    if (tensor_numel(out) == 0)
        return MT_OK;
    if (out.dtype == MT_FLOAT32)
        return launch_fill<float>(out, (float)value);
    return launch_fill<double>(out, value);
}

mt_status mt_fill(mt_tensor out, double value)
{
    return fill("mt_fill", out, value);
}

mt_status mt_map(int op, mt_tensor out, mt_tensor in, double scalar)
{
    const char *func = "mt_map";
    if (op < 0 || op >= MT_MAP_OP_COUNT)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "unknown map op id %d (valid ids are 0..%d)",
                       op, MT_MAP_OP_COUNT - 1);
    if (op == MT_MAP_FILL)
        return fill(func, out, scalar);

    mt_status status = mt_ensure_init(func);
    if (status == MT_OK)
        status = mt_check_output(func, "out", &out);
    if (status == MT_OK)
        status = mt_check_tensor(func, "in", &in);
    if (status == MT_OK)
        status = mt_check_same_shape(func, &in, "in", &out, "out");
    /* Only a copy may change the dtype. */
    if (status == MT_OK && op != MT_MAP_COPY)
        status = mt_check_same_dtype(func, &in, "in", &out, "out");
    if (status != MT_OK)
        return status;
    if (tensor_numel(out) == 0)
        return MT_OK;

    if (out.dtype == MT_FLOAT32 && in.dtype == MT_FLOAT64)
        return launch_map<float, double>(out, in, MapCopy<double>{});
    if (out.dtype == MT_FLOAT64 && in.dtype == MT_FLOAT32)
        return launch_map<double, float>(out, in, MapCopy<float>{});
    if (out.dtype == MT_FLOAT32)
        return map_same_dtype<float>(op, out, in, (float)scalar);
    return map_same_dtype<double>(op, out, in, scalar);
}
