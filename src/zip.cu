/*
 * zip.cu: binary elementwise ops with NumPy broadcasting, out = f(a, b).
 *
 * The output's shape is fixed by the caller; a and b must each broadcast to
 * it (shapes aligned on the right, a dimension of size 1 repeats, missing
 * leading dimensions repeat). One thread per output element, grid-stride
 * loop, as in map.cu.
 *
 *   zip_strided     turns its output ordinal into a multi-index (to_index),
 *                   maps that index back into a and into b (broadcast_index:
 *                   a repeated dimension reads index 0), and finds each
 *                   element through that tensor's own strides.
 *   zip_contiguous  a, b and out all dense, row-major and of out's shape:
 *                   element i of each lives at i, no index arithmetic.
 *
 * Comparisons produce 1.0 or 0.0 in the output dtype, so that a mask can be
 * multiplied straight into a tensor. RELU_BACKWARD is the gradient of relu:
 * the incoming gradient a where the input b was positive, else 0.
 */
#include "ops_common.h"

/* ---- the ops ------------------------------------------------------------- */

template <typename T>
struct ZipAdd {
    __device__ T operator()(T a, T b) const { return a + b; }
};

template <typename T>
struct ZipSub {
    __device__ T operator()(T a, T b) const { return a - b; }
};

template <typename T>
struct ZipMul {
    __device__ T operator()(T a, T b) const { return a * b; }
};

template <typename T>
struct ZipDiv {
    __device__ T operator()(T a, T b) const { return a / b; }
};

template <typename T>
struct ZipPow {
    __device__ T operator()(T a, T b) const { return mt_pow(a, b); }
};

/* NaN-propagating, like NumPy's maximum/minimum (see mt_max in ops_common.h). */
template <typename T>
struct ZipMaximum {
    __device__ T operator()(T a, T b) const { return mt_max(a, b); }
};

template <typename T>
struct ZipMinimum {
    __device__ T operator()(T a, T b) const { return mt_min(a, b); }
};

template <typename T>
struct ZipEq {
    __device__ T operator()(T a, T b) const { return a == b ? T(1) : T(0); }
};

template <typename T>
struct ZipNe {
    __device__ T operator()(T a, T b) const { return a != b ? T(1) : T(0); }
};

template <typename T>
struct ZipLt {
    __device__ T operator()(T a, T b) const { return a < b ? T(1) : T(0); }
};

template <typename T>
struct ZipLe {
    __device__ T operator()(T a, T b) const { return a <= b ? T(1) : T(0); }
};

template <typename T>
struct ZipGt {
    __device__ T operator()(T a, T b) const { return a > b ? T(1) : T(0); }
};

template <typename T>
struct ZipGe {
    __device__ T operator()(T a, T b) const { return a >= b ? T(1) : T(0); }
};

template <typename T>
struct ZipReluBackward {
    __device__ T operator()(T grad, T input) const { return input > T(0) ? grad : T(0); }
};

/* ---- kernels ------------------------------------------------------------- */

template <typename T, typename Op>
__global__ void zip_strided(mt_tensor out, mt_tensor a, mt_tensor b, int64_t n, Op op)
{
    T *out_data = static_cast<T *>(out.data);
    const T *a_data = static_cast<const T *>(a.data);
    const T *b_data = static_cast<const T *>(b.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        int64_t out_index[MT_MAX_DIMS];
        int64_t a_index[MT_MAX_DIMS];
        int64_t b_index[MT_MAX_DIMS];
        to_index(i, out.shape, out.ndim, out_index);
        broadcast_index(out_index, out.ndim, a.shape, a.ndim, a_index);
        broadcast_index(out_index, out.ndim, b.shape, b.ndim, b_index);
        int64_t a_pos = a.offset + index_to_position(a_index, a.strides, a.ndim);
        int64_t b_pos = b.offset + index_to_position(b_index, b.strides, b.ndim);
        int64_t out_pos = out.offset + index_to_position(out_index, out.strides, out.ndim);
        out_data[out_pos] = op(a_data[a_pos], b_data[b_pos]);
    }
}

/* All three pointers already point at their first element (offset applied). */
template <typename T, typename Op>
__global__ void zip_contiguous(T *out, const T *a, const T *b, int64_t n, Op op)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        out[i] = op(a[i], b[i]);
}

/* ---- host side ------------------------------------------------------------ */

template <typename T, typename Op>
static mt_status launch_zip(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const int64_t n = tensor_numel(out);
    const unsigned int grid = grid_size(n, kBlockSize);
    /* The fast path needs a and b to be out's exact shape: a broadcast input
     * (shape (3,) into (4, 3)) is not dense in out's index space. */
    bool dense = is_contiguous(out) && is_contiguous(a) && is_contiguous(b);
    if (dense && shapes_equal(a, out) && shapes_equal(b, out)) {
        T *out_first = static_cast<T *>(out.data) + out.offset;
        const T *a_first = static_cast<const T *>(a.data) + a.offset;
        const T *b_first = static_cast<const T *>(b.data) + b.offset;
        zip_contiguous<T, Op><<<grid, kBlockSize>>>(out_first, a_first, b_first, n, Op{});
    } else {
        zip_strided<T, Op><<<grid, kBlockSize>>>(out, a, b, n, Op{});
    }
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* op id -> functor. */
template <typename T>
static mt_status zip_typed(int op, const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    switch (op) {
    case MT_ZIP_ADD:
        return launch_zip<T, ZipAdd<T>>(out, a, b);
    case MT_ZIP_SUB:
        return launch_zip<T, ZipSub<T>>(out, a, b);
    case MT_ZIP_MUL:
        return launch_zip<T, ZipMul<T>>(out, a, b);
    case MT_ZIP_DIV:
        return launch_zip<T, ZipDiv<T>>(out, a, b);
    case MT_ZIP_POW:
        return launch_zip<T, ZipPow<T>>(out, a, b);
    case MT_ZIP_MAXIMUM:
        return launch_zip<T, ZipMaximum<T>>(out, a, b);
    case MT_ZIP_MINIMUM:
        return launch_zip<T, ZipMinimum<T>>(out, a, b);
    case MT_ZIP_EQ:
        return launch_zip<T, ZipEq<T>>(out, a, b);
    case MT_ZIP_NE:
        return launch_zip<T, ZipNe<T>>(out, a, b);
    case MT_ZIP_LT:
        return launch_zip<T, ZipLt<T>>(out, a, b);
    case MT_ZIP_LE:
        return launch_zip<T, ZipLe<T>>(out, a, b);
    case MT_ZIP_GT:
        return launch_zip<T, ZipGt<T>>(out, a, b);
    case MT_ZIP_GE:
        return launch_zip<T, ZipGe<T>>(out, a, b);
    case MT_ZIP_RELU_BACKWARD:
        return launch_zip<T, ZipReluBackward<T>>(out, a, b);
    default:
        /* mt_zip checked the id. */
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_zip", "zip op %d has no kernel", op);
    }
}

mt_status mt_zip(int op, mt_tensor out, mt_tensor a, mt_tensor b)
{
    const char *func = "mt_zip";
    if (op < 0 || op >= MT_ZIP_OP_COUNT)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "unknown zip op id %d (valid ids are 0..%d)",
                       op, MT_ZIP_OP_COUNT - 1);

    mt_status status = mt_ensure_init(func);
    if (status == MT_OK)
        status = mt_check_output(func, "out", &out);
    if (status == MT_OK)
        status = mt_check_tensor(func, "a", &a);
    if (status == MT_OK)
        status = mt_check_tensor(func, "b", &b);
    if (status == MT_OK)
        status = mt_check_same_dtype(func, &a, "a", &out, "out");
    if (status == MT_OK)
        status = mt_check_same_dtype(func, &b, "b", &out, "out");
    if (status == MT_OK)
        status = mt_check_broadcast(func, &a, "a", &out, "out");
    if (status == MT_OK)
        status = mt_check_broadcast(func, &b, "b", &out, "out");
    if (status != MT_OK)
        return status;
    if (tensor_numel(out) == 0)
        return MT_OK;

    if (out.dtype == MT_FLOAT32)
        return zip_typed<float>(op, out, a, b);
    return zip_typed<double>(op, out, a, b);
}
