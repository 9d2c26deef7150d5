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
 *                   element i of each lives at i, no index arithmetic;
 *                   zip_contiguous_vec does it with 16-byte Packs when all
 *                   three are 16-byte aligned.
 *   zip_row_broadcast  out and one operand dense, the other a dense block
 *                   of out's trailing dims repeated along the leading ones
 *                   (A + row_vector, A * bias): it is read at i % its size,
 *                   stays in cache, and everything else is a contiguous
 *                   stream (Packs when aligned).
 *   zip_one_value   out and one operand dense, the other one value
 *                   repeated (the gradient of a sum, expanded, in a backward).
 *   zip_transposed  one operand a transposed view (A + B.T): a block
 *                   stages a 32 x 33 tile of it in shared memory, read
 *                   coalesced along its own rows, and combines it with the
 *                   other operand and out along theirs, as map.cu's tiled
 *                   transpose does; the naive kernel would read B.T with
 *                   one memory transaction per element.
 *
 * a, b and out share one dtype, except for the comparisons, whose out is
 * bool (0 or 1) whatever the inputs' dtype: the kernels take the type of
 * out (TOut) and of the inputs (TIn) apart, as map.cu's do for a cast. The
 * 16-byte Pack kernels (zip_contiguous_vec, zip_row_broadcast) move Packs of
 * one type, so a comparison takes zip_contiguous or zip_strided instead.
 * RELU_BACKWARD is the gradient of relu: the incoming gradient a where the
 * input b was positive, else 0; the other activations' gradients are in
 * activations.h, with the parameters (elu's alpha, ...) they hold as
 * scalars (mt_zip_scalars).
 *
 * Which dtype takes which op is zip_takes, below (the table of MT_ZIP_OPS
 * in minitensor.h). The float functors serve int64 and bool where the same
 * code is right for them (maximum, the comparisons); specializations say
 * what differs: int64 +, -, * and pow wrap modulo 2^64, and bool + and *
 * are logical or and and.
 */
#include <type_traits>

#include "activations.h" /* the activations' gradients; make_op, which hands a functor its scalars */
#include "ops_common.h"

/* ---- the ops ------------------------------------------------------------- */

template <typename T>
struct zip_add {
    __device__ T operator()(T a, T b) const { return a + b; }
};

template <typename T>
struct zip_sub {
    __device__ T operator()(T a, T b) const { return a - b; }
};

template <typename T>
struct zip_mul {
    __device__ T operator()(T a, T b) const { return a * b; }
};

template <typename T>
struct zip_div {
    __device__ T operator()(T a, T b) const { return a / b; }
};

template <typename T>
struct zip_pow {
    __device__ T operator()(T a, T b) const { return mt_pow(a, b); }
};

/* NaN-propagating, like NumPy's maximum/minimum (see mt_max in device_math.h). */
template <typename T>
struct zip_maximum {
    __device__ T operator()(T a, T b) const { return mt_max(a, b); }
};

template <typename T>
struct zip_minimum {
    __device__ T operator()(T a, T b) const { return mt_min(a, b); }
};

template <typename T>
struct zip_eq {
    __device__ bool operator()(T a, T b) const { return a == b; }
};

template <typename T>
struct zip_ne {
    __device__ bool operator()(T a, T b) const { return a != b; }
};

template <typename T>
struct zip_lt {
    __device__ bool operator()(T a, T b) const { return a < b; }
};

template <typename T>
struct zip_le {
    __device__ bool operator()(T a, T b) const { return a <= b; }
};

template <typename T>
struct zip_gt {
    __device__ bool operator()(T a, T b) const { return a > b; }
};

template <typename T>
struct zip_ge {
    __device__ bool operator()(T a, T b) const { return a >= b; }
};

template <typename T>
struct zip_relu_backward {
    __device__ T operator()(T grad, T input) const { return input > T(0) ? grad : T(0); }
};

/* int64 and bool only: on bool & is logical and, | or, ^ not-equal, and
 * the int result (0 or 1) converts back to a bool. */
template <typename T>
struct zip_bitwise_and {
    __device__ T operator()(T a, T b) const { return a & b; }
};

template <typename T>
struct zip_bitwise_or {
    __device__ T operator()(T a, T b) const { return a | b; }
};

template <typename T>
struct zip_bitwise_xor {
    __device__ T operator()(T a, T b) const { return a ^ b; }
};

/* floor_div and floor_mod (device_math.h) have an int64 overload that never
 * traps and a float template, as torch computes them. */
template <typename T>
struct zip_floor_divide {
    __device__ T operator()(T a, T b) const { return floor_div(a, b); }
};

template <typename T>
struct zip_remainder {
    __device__ T operator()(T a, T b) const { return floor_mod(a, b); }
};

/* ---- int64: the ops that can overflow wrap (device_math.h) ------------ */

template <>
struct zip_add<int64_t> {
    __device__ int64_t operator()(int64_t a, int64_t b) const { return wrap_add(a, b); }
};

template <>
struct zip_sub<int64_t> {
    __device__ int64_t operator()(int64_t a, int64_t b) const { return wrap_sub(a, b); }
};

template <>
struct zip_mul<int64_t> {
    __device__ int64_t operator()(int64_t a, int64_t b) const { return wrap_mul(a, b); }
};

template <>
struct zip_pow<int64_t> {
    __device__ int64_t operator()(int64_t a, int64_t b) const { return int_pow(a, b); }
};

/* ---- bool: + is or, * is and (as torch: True + True is True) ------------ */

template <>
struct zip_add<bool> {
    __device__ bool operator()(bool a, bool b) const { return a || b; }
};

template <>
struct zip_mul<bool> {
    __device__ bool operator()(bool a, bool b) const { return a && b; }
};

/* Which ops each dtype takes: the dtype rule of each op in MT_ZIP_OPS
 * (minitensor.h). The dispatch instantiates only these, so that no functor
 * meets a type it has no meaning for (a & b of floats, a / b of bools). A
 * comparison (">b") writes a bool out. */
#define MT_ZIP_DTYPES_(id, name, dtypes) dtypes,
static constexpr const char *kZipDtypes[] = {MT_ZIP_OPS(MT_ZIP_DTYPES_)};
#undef MT_ZIP_DTYPES_

constexpr bool zip_is_comparison(int op)
{
    return mt_rule_result(kZipDtypes[op]) == 'b';
}

template <typename T>
constexpr bool zip_takes(int op)
{
    return mt_rule_takes<T>(kZipDtypes[op]);
}

/* The element type of out for op kOp on inputs of type T. */
template <typename T, int kOp>
using zip_out_t = typename std::conditional<zip_is_comparison(kOp), bool, T>::type;

/* ---- kernels ------------------------------------------------------------- */

/* TASK(map_zip) BEGIN */
template <typename TOut, typename TIn, typename Op>
__global__ void zip_strided(mt_tensor out, mt_tensor a, mt_tensor b, int64_t n, Op op)
{
    TOut *out_data = static_cast<TOut *>(out.data);
    const TIn *a_data = static_cast<const TIn *>(a.data);
    const TIn *b_data = static_cast<const TIn *>(b.data);
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
template <typename TOut, typename TIn, typename Op>
__global__ void zip_contiguous(TOut *out, const TIn *a, const TIn *b, int64_t n, Op op)
{
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        out[i] = op(a[i], b[i]);
}

/* TASK(map_zip) STUB */
//| MT_TASK_MISSING(map_zip, "zip_strided, zip_contiguous", "src/zip.cu")
//|
//| /* out(i) = op(a(i'), b(i'')) for every ordinal i < n of out, where a and b
//|  * may be strided views and may broadcast to out's shape (NumPy rules).
//|  * out's elements are TOut, a's and b's TIn (a comparison writes bool). */
//| template <typename TOut, typename TIn, typename Op>
//| __global__ void zip_strided(mt_tensor out, mt_tensor a, mt_tensor b, int64_t n, Op op)
//| {
//|     /* TODO (task map_zip): a grid-stride loop over out's ordinals. For each:
//|      * out's multi-index, then the index of a and of b that it reads (a
//|      * broadcast input repeats its size-1 dims), then the three positions
//|      * (mind each tensor's offset). indexing.h has every helper you need. */
//| }
//|
//| /* All three tensors dense, row-major and of out's shape; the pointers
//|  * already point at their first element (offset applied). */
//| template <typename TOut, typename TIn, typename Op>
//| __global__ void zip_contiguous(TOut *out, const TIn *a, const TIn *b, int64_t n, Op op)
//| {
//|     /* TODO (task map_zip): the grid-stride loop, element i at position i. */
//| }
/* TASK(map_zip) END */

/* zip_contiguous with Packs; all three pointers 16-byte aligned. The
 * n % W elements after the last whole Pack are done one by one. */
template <typename T, typename Op>
__global__ void zip_contiguous_vec(T *out, const T *a, const T *b, int64_t n, Op op)
{
    constexpr int W = Pack<T>::kWidth;
    const int64_t packs = n / W;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t p = first; p < packs; p += step) {
        const Pack<T> x = reinterpret_cast<const Pack<T> *>(a)[p];
        const Pack<T> y = reinterpret_cast<const Pack<T> *>(b)[p];
        Pack<T> r;
        MT_UNROLL for (int w = 0; w < W; ++w)
            r.v[w] = op(x.v[w], y.v[w]);
        reinterpret_cast<Pack<T> *>(out)[p] = r;
    }
    for (int64_t i = packs * W + first; i < n; i += step)
        out[i] = op(a[i], b[i]);
}

/* out[i] = op(full[i], rep[i % rep_n]) (kRepFirst: op(rep[...], full[i])):
 * out and full dense with n elements, rep a dense block of rep_n elements
 * repeated n / rep_n times. With `vec` (all aligned, rep_n a multiple of
 * the Pack width) a Pack never straddles two repeats. */
template <typename T, typename Op, bool kRepFirst>
__global__ void zip_row_broadcast(T *out, const T *full, const T *rep, int64_t n, int64_t rep_n, bool vec, Op op)
{
    constexpr int W = Pack<T>::kWidth;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t scalar_from = 0;
    if (vec) {
        for (int64_t p = first; p < n / W; p += step) {
            const Pack<T> x = reinterpret_cast<const Pack<T> *>(full)[p];
            const Pack<T> y = *reinterpret_cast<const Pack<T> *>(rep + (p * W) % rep_n);
            Pack<T> r;
            MT_UNROLL for (int w = 0; w < W; ++w)
                r.v[w] = kRepFirst ? op(y.v[w], x.v[w]) : op(x.v[w], y.v[w]);
            reinterpret_cast<Pack<T> *>(out)[p] = r;
        }
        scalar_from = n / W * W;
    }
    for (int64_t i = scalar_from + first; i < n; i += step) {
        const T y = rep[i % rep_n];
        out[i] = kRepFirst ? op(y, full[i]) : op(full[i], y);
    }
}

/* out[i] = op(full[i], *value) (kValueFirst: op(*value, full[i])), out and
 * full dense: zip_strided would divide per dim to find that one value again;
 * here each thread reads it once. `vec`: out and full 16-byte aligned. */
template <typename T, typename Op, bool kValueFirst>
__global__ void zip_one_value(T *out, const T *full, const T *value, int64_t n, bool vec, Op op)
{
    constexpr int W = Pack<T>::kWidth;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const T y = *value;
    const int64_t packs = vec ? n / W : 0; /* then the elements from packs * W one by one */
    for (int64_t p = first; p < packs; p += step) {
        const Pack<T> x = reinterpret_cast<const Pack<T> *>(full)[p];
        Pack<T> r;
        MT_UNROLL for (int w = 0; w < W; ++w)
            r.v[w] = kValueFirst ? op(y, x.v[w]) : op(x.v[w], y);
        reinterpret_cast<Pack<T> *>(out)[p] = r;
    }
    for (int64_t i = packs * W + first; i < n; i += step)
        out[i] = kValueFirst ? op(y, full[i]) : op(full[i], y);
}

/* out = op(a, b) where `trans` (b, or a when kTransFirst) is a transposed
 * view of out's shape and `other` (the other operand) and out have
 * contiguous rows; any batch dims. A 32 x 8 block handles a 32 x 32 tile:
 * it reads trans's tile along trans's contiguous dim (-2) into shared
 * memory, then walks out's rows, reading other and the tile (a column of
 * it: the padding keeps the 32 reads in 32 banks) and writing out. */
constexpr int kZipTile = 32;
constexpr int kZipTileRows = 8;

template <typename TOut, typename T, typename Op, bool kTransFirst>
__global__ void __launch_bounds__(kZipTile * kZipTileRows) zip_transposed(mt_tensor out, mt_tensor trans, mt_tensor other, int64_t row_tile_start, int64_t batch_start, Op op)
{
    __shared__ T tile[kZipTile][kZipTile + 1];
    const int nd = out.ndim;
    const int64_t rows = out.shape[nd - 2];
    const int64_t cols = out.shape[nd - 1];
    int64_t batch_index[MT_MAX_DIMS];
    to_index(batch_start + blockIdx.z, out.shape, nd - 2, batch_index);
    const T *t_data = static_cast<const T *>(trans.data) + trans.offset + index_to_position(batch_index, trans.strides, nd - 2);
    const T *o_data = static_cast<const T *>(other.data) + other.offset + index_to_position(batch_index, other.strides, nd - 2);
    TOut *out_data = static_cast<TOut *>(out.data) + out.offset + index_to_position(batch_index, out.strides, nd - 2);
    const int64_t t_col_stride = trans.strides[nd - 1];  /* trans(r, c) at r + c * t_col_stride */
    const int64_t o_row_stride = other.strides[nd - 2];  /* other(r, c) at r * o_row_stride + c */
    const int64_t out_row_stride = out.strides[nd - 2];
    const int64_t r0 = (row_tile_start + blockIdx.y) * kZipTile;
    const int64_t c0 = (int64_t)blockIdx.x * kZipTile;
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;

    MT_UNROLL for (int j = 0; j < kZipTile; j += kZipTileRows) {
        const int64_t r = r0 + tx;
        const int64_t c = c0 + ty + j;
        if (r < rows && c < cols)
            tile[ty + j][tx] = t_data[r + c * t_col_stride];
    }
    /* The tile is complete before any thread reads another's element. */
    __syncthreads();
    MT_UNROLL for (int j = 0; j < kZipTile; j += kZipTileRows) {
        const int64_t r = r0 + ty + j;
        const int64_t c = c0 + tx;
        if (r < rows && c < cols) {
            const T x = tile[tx][ty + j];
            const T y = o_data[r * o_row_stride + c];
            out_data[r * out_row_stride + c] = kTransFirst ? op(x, y) : op(y, x);
        }
    }
}

/* ---- host side ------------------------------------------------------------ */

/* Is v a dense block of out's trailing dims, repeated over the leading ones?
 * Its shape, aligned on the right and without leading 1s, must equal out's
 * last dims exactly; then v's element for out ordinal i is i % numel(v). */
static bool repeats_trailing_block(const mt_tensor &v, const mt_tensor &out)
{
    if (!is_contiguous(v))
        return false;
    int first = 0;
    while (first < v.ndim && v.shape[first] == 1)
        ++first;
    const int m = v.ndim - first;
    if (m > out.ndim)
        return false;
    for (int j = 0; j < m; ++j) {
        if (v.shape[first + j] != out.shape[out.ndim - m + j])
            return false;
    }
    return true;
}

/* Is v one value repeated: every dim of size > 1 of stride 0 (or none)? */
static bool is_one_value(const mt_tensor &v)
{
    for (int d = 0; d < v.ndim; ++d)
        if (v.shape[d] != 1 && v.strides[d] != 0)
            return false;
    return true;
}

template <typename T, typename Op, bool kValueFirst>
static mt_status launch_one_value(const mt_tensor &out, const mt_tensor &full, const mt_tensor &value, Op op)
{
    const int64_t n = tensor_numel(out);
    T *out_first = static_cast<T *>(out.data) + out.offset;
    const T *full_first = static_cast<const T *>(full.data) + full.offset;
    const bool vec = aligned16(out_first) && aligned16(full_first);
    const int64_t items = vec ? n / Pack<T>::kWidth : n;
    zip_one_value<T, Op, kValueFirst><<<grid_size(items > 0 ? items : 1, kBlockSize), kBlockSize, 0, mt_stream()>>>(
        out_first, full_first, static_cast<const T *>(value.data) + value.offset, n, vec, op);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

template <typename T, typename Op, bool kRepFirst>
static mt_status launch_row_broadcast(const mt_tensor &out, const mt_tensor &full, const mt_tensor &rep, Op op)
{
    const int64_t n = tensor_numel(out);
    const int64_t rep_n = tensor_numel(rep);
    T *out_first = static_cast<T *>(out.data) + out.offset;
    const T *full_first = static_cast<const T *>(full.data) + full.offset;
    const T *rep_first = static_cast<const T *>(rep.data) + rep.offset;
    const bool vec = rep_n % Pack<T>::kWidth == 0 && aligned16(out_first) && aligned16(full_first) && aligned16(rep_first);
    const int64_t items = vec ? n / Pack<T>::kWidth : n;
    zip_row_broadcast<T, Op, kRepFirst><<<grid_size(items > 0 ? items : 1, kBlockSize), kBlockSize, 0, mt_stream()>>>(out_first, full_first, rep_first, n, rep_n, vec, op);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

template <typename TOut, typename T, typename Op, bool kTransFirst>
static mt_status launch_zip_transposed(const mt_tensor &out, const mt_tensor &trans, const mt_tensor &other, Op op)
{
    const int nd = out.ndim;
    const int64_t row_tiles = (out.shape[nd - 2] + kZipTile - 1) / kZipTile;
    const int64_t col_tiles = (out.shape[nd - 1] + kZipTile - 1) / kZipTile;
    const int64_t batches = shape_numel(out.shape, nd - 2);
    const dim3 block(kZipTile, kZipTileRows);
    return for_each_grid_chunk(col_tiles, row_tiles, batches, [&](dim3 grid, int64_t y0, int64_t b0) {
        zip_transposed<TOut, T, Op, kTransFirst><<<grid, block, 0, mt_stream()>>>(out, trans, other, y0, b0, op);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

/* Launches one zip over non-empty, validated tensors: the fastest kernel
 * for their layouts, or under the teaching policy (policy.h) the choice
 * between zip_contiguous and zip_strided alone. The Pack kernels need out
 * and the inputs of one type (kSameType), so a comparison skips them. */
template <typename TOut, typename T, typename Op>
static mt_status launch_zip(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, Op op)
{
    constexpr bool kSameType = std::is_same<TOut, T>::value;
    const int64_t n = tensor_numel(out);
    const bool fast = mt_fast_kernels();
    const bool a_full = shapes_equal(a, out);
    const bool b_full = shapes_equal(b, out);
    /* The fast path needs a and b to be out's exact shape: a broadcast input
     * (shape (3,) into (4, 3)) is not dense in out's index space. */
    if (is_contiguous(out)) {
        const bool a_dense = a_full && is_contiguous(a);
        const bool b_dense = b_full && is_contiguous(b);
        if (a_dense && b_dense) {
            TOut *out_first = static_cast<TOut *>(out.data) + out.offset;
            const T *a_first = static_cast<const T *>(a.data) + a.offset;
            const T *b_first = static_cast<const T *>(b.data) + b.offset;
            bool launched = false;
            if constexpr (kSameType) {
                if (fast && aligned16(out_first) && aligned16(a_first) && aligned16(b_first)) {
                    const int64_t packs = n / Pack<T>::kWidth;
                    zip_contiguous_vec<T, Op><<<grid_size(packs > 0 ? packs : 1, kBlockSize), kBlockSize, 0, mt_stream()>>>(out_first, a_first, b_first, n, op);
                    launched = true;
                }
            }
            if (!launched) {
                MT_TRY(MT_TASK_CHECK(map_zip));
                zip_contiguous<TOut, T, Op><<<grid_size(n, kBlockSize), kBlockSize, 0, mt_stream()>>>(out_first, a_first, b_first, n, op);
            }
            CUDA_CHECK(mt_launch_status());
            return MT_OK;
        }
        if constexpr (kSameType) {
            if (fast && a_dense && is_one_value(b)) /* (row broadcast would read it at i % 1) */
                return launch_one_value<T, Op, false>(out, a, b, op);
            if (fast && b_dense && is_one_value(a))
                return launch_one_value<T, Op, true>(out, b, a, op);
            if (fast && a_dense && repeats_trailing_block(b, out))
                return launch_row_broadcast<T, Op, false>(out, a, b, op);
            if (fast && b_dense && repeats_trailing_block(a, out))
                return launch_row_broadcast<T, Op, true>(out, b, a, op);
        }
    }
    if (fast && rows_contiguous(out) && a_full && b_full) {
        if (is_transposed_view(b) && rows_contiguous(a))
            return launch_zip_transposed<TOut, T, Op, false>(out, b, a, op);
        if (is_transposed_view(a) && rows_contiguous(b))
            return launch_zip_transposed<TOut, T, Op, true>(out, a, b, op);
    }
    MT_TRY(MT_TASK_CHECK(map_zip));
    zip_strided<TOut, T, Op><<<grid_size(n, kBlockSize), kBlockSize, 0, mt_stream()>>>(out, a, b, n, op);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* op id -> functor: a case per op of MT_ZIP_OPS (minitensor.h), running
 * the functor zip_<name> when T takes the op. */
template <typename T>
static mt_status zip_typed(int op, const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, T s, T t)
{
    switch (op) {
#define MT_ZIP_CASE_(id, name, dtypes)                                                                \
    case MT_ZIP_##id:                                                                                 \
        if constexpr (zip_takes<T>(MT_ZIP_##id))                                                      \
            return launch_zip<zip_out_t<T, MT_ZIP_##id>, T>(out, a, b, make_op<zip_##name<T>>(s, t)); \
        break;
        MT_ZIP_OPS(MT_ZIP_CASE_)
#undef MT_ZIP_CASE_
    default:
        break;
    }
    /* mt_zip checked the id and the dtype. */
    return mt_fail(MT_ERR_DTYPE, "mt_zip", "zip op %d has no kernel for %s", op, dtype_name(a.dtype));
}

/* Does the dtype take the op (zip_takes)? */
static bool zip_dtype_takes(int32_t dtype, int op)
{
    switch (dtype) {
    case MT_FLOAT32:
        return zip_takes<float>(op);
    case MT_FLOAT64:
        return zip_takes<double>(op);
    case MT_INT64:
        return zip_takes<int64_t>(op);
    default:
        return zip_takes<bool>(op);
    }
}

/* mt_zip and mt_zip_scalars: out = op(a, b) with the op's scalars. */
static mt_status zip_with_scalars(const char *func, int op, const mt_tensor &out, const mt_tensor &a,
                                  const mt_tensor &b, double s, double t)
{
    MT_TRY(mt_check_id(func, "zip op", op, MT_ZIP_OP_COUNT));
    MT_TRY(mt_ensure_init(func));
    if (zip_is_comparison(op)) {
        /* a and b of one dtype, out bool. */
        MT_TRY(mt_check_output(func, "out", &out));
        MT_TRY(mt_check_tensor(func, "a", &a));
        MT_TRY(mt_check_tensor(func, "b", &b));
        MT_TRY(mt_check_same_dtype(func, &b, "b", &a, "a"));
        if (out.dtype != MT_BOOL)
            return mt_fail(MT_ERR_DTYPE, func, "out is %s; a comparison (%s) writes a bool out", dtype_name(out.dtype),
                           mt_op_name("zip", op));
    } else {
        MT_TRY(mt_check_binary(func, &out, &a, "a", &b, "b"));
    }
    if (!zip_dtype_takes(a.dtype, op))
        return mt_fail(MT_ERR_DTYPE, func, "%s is not defined for %s", mt_op_name("zip", op), dtype_name(a.dtype));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "a", &a));
    MT_TRY(mt_check_extent(func, "b", &b));
    MT_TRY(mt_check_broadcast(func, &a, "a", &out, "out"));
    MT_TRY(mt_check_broadcast(func, &b, "b", &out, "out"));
    MT_TRY(mt_check_alias(func, &out, &a, "a"));
    MT_TRY(mt_check_alias(func, &out, &b, "b"));
    if (tensor_numel(out) == 0)
        return MT_OK;

    return with_dtype(func, a.dtype, [&](auto tag) {
        using T = decltype(tag);
        return zip_typed<T>(op, out, a, b, mt_cast<T>(s), mt_cast<T>(t));
    });
}

mt_status mt_zip(int op, mt_tensor out, mt_tensor a, mt_tensor b)
{
    return zip_with_scalars("mt_zip", op, out, a, b, 0.0, 0.0);
}

mt_status mt_zip_scalars(int op, mt_tensor out, mt_tensor a, mt_tensor b, double s, double t)
{
    return zip_with_scalars("mt_zip_scalars", op, out, a, b, s, t);
}
