/*
 * map.cu: unary elementwise ops, out = f(in), and mt_fill (out = value).
 *
 * One thread per output element. The kernels use a grid-stride loop: thread
 * t of a grid of G threads handles elements t, t + G, t + 2G, ..., so a grid
 * of any size (we cap it, see launch.h) covers a tensor of any size.
 *
 * The kernels, from general to fast:
 *   map_strided        any strides (a transposed, sliced or broadcast input).
 *                      Each thread turns its ordinal into a position in each
 *                      tensor with ordinal_to_position (indexing.h).
 *   map_contiguous     both tensors dense and row-major, the common case:
 *                      element i lives at i, so there is no index arithmetic,
 *                      and neighbouring threads read neighbouring addresses,
 *                      which the GPU combines into few memory transactions.
 *   map_contiguous_vec the same with 16-byte loads and stores (a Pack of 4
 *                      floats), one a thread, when out and in lie equally far
 *                      from a 16-byte boundary: a quarter of the memory
 *                      instructions, more bytes in flight per thread.
 *   copy_transposed    MT_MAP_COPY of a transposed view (A.T.contiguous()):
 *                      the transpose ladder, below.
 *   copy_strided_rank  MT_MAP_COPY of any other view: dims collapsed, 32-bit
 *                      indices, 4 elements a thread (src/copy_strided.cu).
 *
 * The transpose ladder (mt_copy_variant selects a rung). Copying A.T into a
 * row-major out, the naive kernel (map_strided) writes out row by row, so
 * neighbouring threads read A.T(r, c), A.T(r, c+1), ...: addresses a whole
 * row of A apart, one memory transaction per thread. The tiled kernel has a
 * block read a 32 x 32 tile along A's rows (coalesced), park it in shared
 * memory, and write it along out's rows (coalesced): both sides move whole
 * 128-byte lines. Its tile is 32 x 33: with 32 x 32, the 32 threads of a
 * warp reading one tile column hit the same shared-memory bank 32 times (the
 * accesses are serialized); one padding element per row shifts each row by a
 * bank, so a column spans all 32 banks.
 *
 * The op is a functor passed as a template argument (map_<name> for each op
 * of MT_MAP_OPS in minitensor.h, in map_ops.h; the activations' in
 * activations.h): the compiler inlines op(x) into the loop, so one kernel
 * source serves every op and every dtype with no switch inside the loop. A
 * functor with parameters holds them as members (s, t: make_op in
 * activations.h). MT_MAP_COPY may convert between any two dtypes (TOut and
 * TIn differ only for it; its functor is map_cast): that is how casts and
 * .contiguous() are done.
 */
#include <type_traits>
#include <utility>

#include "activations.h" /* the activations' functors; make_op, which hands a functor its scalars */
#include "map_ops.h"     /* every other op's functor */
#include "ops_common.h"

/* Which ops each dtype takes: the dtype rule of each op in MT_MAP_OPS
 * (minitensor.h). The dispatch below instantiates only these, so that no
 * float-only functor (mt_exp of an integer) is ever compiled for int64 or
 * bool. */
#define MT_MAP_DTYPES_(id, name, dtypes) dtypes,
static constexpr const char *kMapDtypes[] = {MT_MAP_OPS(MT_MAP_DTYPES_)};
#undef MT_MAP_DTYPES_

template <typename T>
constexpr bool map_takes(int op)
{
    return mt_rule_takes<T>(kMapDtypes[op]);
}

/* ---- kernels ------------------------------------------------------------- */

/* TASK(map_zip) BEGIN */
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

/* TASK(map_zip) STUB */
//| MT_TASK_MISSING(map_zip, "map_strided, map_contiguous", "src/map.cu")
//|
//| /* out(i) = op(in(i)) for every ordinal i < n, for tensors of any strides:
//|  * one thread per element in a grid-stride loop. */
//| template <typename TOut, typename TIn, typename Op>
//| __global__ void map_strided(mt_tensor out, mt_tensor in, int64_t n, Op op)
//| {
//|     /* TODO (task map_zip): thread t of a grid of G threads handles ordinals
//|      * t, t + G, t + 2G, ... < n. Where in memory does ordinal i of `in` live,
//|      * and where of `out` (indexing.h)? Convert op's result to TOut. */
//| }
//|
//| /* The same for dense row-major tensors; out and in already point at their
//|  * first element (offset applied). */
//| template <typename TOut, typename TIn, typename Op>
//| __global__ void map_contiguous(TOut *out, const TIn *in, int64_t n, Op op)
//| {
//|     /* TODO (task map_zip): the grid-stride loop again. Here element i of
//|      * either tensor is at position i: no index arithmetic at all. */
//| }
/* TASK(map_zip) END */

/* map_contiguous with 16-byte Packs, one a thread in blocks of 128, and no
 * loop. H200, 2^24 floats, GELU alone: 0.0335 ms (torch 0.0331), 0.0352 as
 * a grid-stride loop of 256-thread blocks; 2 or 4 Packs a thread, or a grid
 * of a few blocks an SM, were slower still. out and in lie `head` (< W)
 * elements before a 16-byte boundary: Pack p starts at head + p * W. The
 * head and the tail after the last whole Pack go one by one (block 0). */
constexpr int kMapVecBlock = 128;

template <typename T, typename Op>
__global__ void __launch_bounds__(kMapVecBlock) map_contiguous_vec(T *out, const T *in, int64_t n, int head, Op op)
{
    constexpr int W = Pack<T>::kWidth;
    const int64_t packs = (n - head) / W;
    const int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p < packs) {
        Pack<T> v = reinterpret_cast<const Pack<T> *>(in + head)[p];
        MT_UNROLL for (int w = 0; w < W; ++w)
            v.v[w] = op(v.v[w]);
        reinterpret_cast<Pack<T> *>(out + head)[p] = v;
    }
    if (p < W) {
        if (p < head)
            out[p] = op(in[p]);
        const int64_t tail = head + packs * W + p;
        if (tail < n)
            out[tail] = op(in[tail]);
    }
}

/* ---- the tiled transpose ---------------------------------------------------
 * out = in where in is a transposed view (dim -2 has stride 1) and out has
 * contiguous rows; any batch dims. A block of 32 x 8 threads moves one
 * 32 x 32 tile, 4 elements per thread: it reads the tile with threadIdx.x
 * walking dim -2 (contiguous in `in`), and writes it with threadIdx.x
 * walking dim -1 (contiguous in `out`). kPad is 1 (no bank conflicts) or 0
 * (the ladder's rung that shows them). */
constexpr int kTransposeTile = 32;
constexpr int kTransposeRows = 8;

template <typename TOut, typename TIn, int kPad>
__global__ void __launch_bounds__(kTransposeTile * kTransposeRows) copy_transposed(mt_tensor out, mt_tensor in, int64_t row_tile_start, int64_t batch_start)
{
    __shared__ TIn tile[kTransposeTile][kTransposeTile + kPad];
    const int nd = in.ndim;
    const int64_t rows = in.shape[nd - 2];
    const int64_t cols = in.shape[nd - 1];
    int64_t batch_index[MT_MAX_DIMS];
    to_index(batch_start + blockIdx.z, in.shape, nd - 2, batch_index);
    const TIn *in_data = static_cast<const TIn *>(in.data) + in.offset + index_to_position(batch_index, in.strides, nd - 2);
    TOut *out_data = static_cast<TOut *>(out.data) + out.offset + index_to_position(batch_index, out.strides, nd - 2);
    const int64_t in_col_stride = in.strides[nd - 1];   /* in(r, c) at r + c * in_col_stride  */
    const int64_t out_row_stride = out.strides[nd - 2]; /* out(r, c) at r * out_row_stride + c */
    const int64_t r0 = (row_tile_start + blockIdx.y) * kTransposeTile;
    const int64_t c0 = (int64_t)blockIdx.x * kTransposeTile;
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;

    /* Read: neighbouring threads take neighbouring rows r, which are
     * neighbours in `in`'s memory. tile[c][r] keeps element (r, c). */
    MT_UNROLL for (int j = 0; j < kTransposeTile; j += kTransposeRows) {
        const int64_t r = r0 + tx;
        const int64_t c = c0 + ty + j;
        if (r < rows && c < cols)
            tile[ty + j][tx] = in_data[r + c * in_col_stride];
    }
    /* The write below reads elements that other threads loaded. */
    __syncthreads();
    /* Write: neighbouring threads take neighbouring columns c, neighbours in
     * out's memory. They read tile[c][r] down a column of the tile: with
     * kPad = 1 the 32 reads of a warp fall in 32 different banks. */
    MT_UNROLL for (int j = 0; j < kTransposeTile; j += kTransposeRows) {
        const int64_t r = r0 + ty + j;
        const int64_t c = c0 + tx;
        if (r < rows && c < cols)
            out_data[r * out_row_stride + c] = mt_cast<TOut, TIn>(tile[tx][ty + j]);
    }
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

/* Can out = in be done by copy_transposed? */
static bool transposed_copy_layout(const mt_tensor &out, const mt_tensor &in)
{
    return is_transposed_view(in) && rows_contiguous(out);
}

template <typename TOut, typename TIn, int kPad>
static mt_status launch_copy_transposed(const mt_tensor &out, const mt_tensor &in)
{
    const int nd = in.ndim;
    const int64_t row_tiles = (in.shape[nd - 2] + kTransposeTile - 1) / kTransposeTile;
    const int64_t col_tiles = (in.shape[nd - 1] + kTransposeTile - 1) / kTransposeTile;
    const int64_t batches = shape_numel(in.shape, nd - 2);
    const dim3 block(kTransposeTile, kTransposeRows);
    return for_each_grid_chunk(col_tiles, row_tiles, batches, [&](dim3 grid, int64_t y0, int64_t b0) {
        copy_transposed<TOut, TIn, kPad><<<grid, block, 0, mt_stream()>>>(out, in, y0, b0);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

template <typename TOut, typename TIn, typename Op>
static mt_status launch_map_strided(const mt_tensor &out, const mt_tensor &in, Op op)
{
    MT_TRY(MT_TASK_CHECK(map_zip));
    const int64_t n = tensor_numel(out);
    map_strided<TOut, TIn, Op><<<grid_size(n, kBlockSize), kBlockSize, 0, mt_stream()>>>(out, in, n, op);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* map_contiguous_vec, when out and in lie equally far from a 16-byte
 * boundary (x[1:] into a fresh out does not); *done says whether it ran. */
template <typename T, typename Op>
static mt_status launch_map_vec(T *out, const T *in, int64_t n, Op op, bool *done)
{
    constexpr int64_t W = Pack<T>::kWidth;
    const uintptr_t past = reinterpret_cast<uintptr_t>(out) % 16; /* bytes past a 16-byte boundary */
    *done = false;
    if (reinterpret_cast<uintptr_t>(in) % 16 != past)
        return MT_OK;
    const int64_t to_boundary = (int64_t)((16 - past) % 16 / sizeof(T));
    const int64_t head = to_boundary < n ? to_boundary : n;
    const int64_t blocks = ((n - head) / W + kMapVecBlock - 1) / kMapVecBlock;
    if (blocks > INT32_MAX) /* past gridDim.x (4 TiB of data): the grid-stride kernel */
        return MT_OK;
    map_contiguous_vec<T, Op><<<(unsigned int)(blocks > 0 ? blocks : 1), kMapVecBlock, 0, mt_stream()>>>(
        out, in, n, (int)head, op);
    CUDA_CHECK(mt_launch_status());
    *done = true;
    return MT_OK;
}

/* Launches one map over non-empty, validated tensors: the fastest kernel
 * for their layouts, or under the teaching policy (policy.h) the choice
 * between map_contiguous and map_strided alone. */
template <typename TOut, typename TIn, typename Op>
static mt_status launch_map(const mt_tensor &out, const mt_tensor &in, Op op)
{
    const int64_t n = tensor_numel(out);
    const bool fast = mt_fast_kernels();
    if (is_contiguous(out) && is_contiguous(in)) {
        TOut *out_first = static_cast<TOut *>(out.data) + out.offset;
        const TIn *in_first = static_cast<const TIn *>(in.data) + in.offset;
        if constexpr (std::is_same<TOut, TIn>::value) {
            bool done = false;
            if (fast)
                MT_TRY(launch_map_vec(out_first, in_first, n, op, &done));
            if (done)
                return MT_OK;
        }
        MT_TRY(MT_TASK_CHECK(map_zip));
        map_contiguous<TOut, TIn, Op><<<grid_size(n, kBlockSize), kBlockSize, 0, mt_stream()>>>(out_first, in_first, n, op);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    }
    if constexpr (std::is_same<Op, map_cast<TOut, TIn>>::value) {
        if (fast && transposed_copy_layout(out, in))
            return launch_copy_transposed<TOut, TIn, 1>(out, in);
        bool done = false; /* dims collapsed, 32-bit indices: copy_strided.cu */
        const mt_status status = fast ? copy_strided_collapsed(out, in, &done) : MT_OK;
        if (status != MT_OK || done)
            return status;
    }
    return launch_map_strided<TOut, TIn, Op>(out, in, op);
}

/* op id -> functor, for ops whose input and output dtypes agree: a case
 * per op of MT_MAP_OPS (minitensor.h), running the functor map_<name> when
 * T takes the op. */
template <typename T>
static mt_status map_same_dtype(int op, const mt_tensor &out, const mt_tensor &in, T s, T t)
{
    switch (op) {
#define MT_MAP_CASE_(id, name, dtypes)                                         \
    case MT_MAP_##id:                                                          \
        if constexpr (map_takes<T>(MT_MAP_##id))                               \
            return launch_map<T, T>(out, in, make_op<map_##name<T>>(s, t));      \
        break;
        MT_MAP_OPS(MT_MAP_CASE_)
#undef MT_MAP_CASE_
    default:
        break;
    }
    /* mt_map checked the id and the dtype. */
    return mt_fail(MT_ERR_DTYPE, "mt_map", "map op %d has no kernel for %s", op, dtype_name(out.dtype));
}

/* Does the dtype take the op (map_takes)? */
static bool map_dtype_takes(int32_t dtype, int op)
{
    switch (dtype) {
    case MT_FLOAT32:
        return map_takes<float>(op);
    case MT_FLOAT64:
        return map_takes<double>(op);
    case MT_INT64:
        return map_takes<int64_t>(op);
    default:
        return map_takes<bool>(op);
    }
}

template <typename T>
static mt_status launch_fill(const mt_tensor &out, T value)
{
    const int64_t n = tensor_numel(out);
    const unsigned int grid = grid_size(n, kBlockSize);
    if (is_contiguous(out)) {
        T *out_first = static_cast<T *>(out.data) + out.offset;
        fill_contiguous<T><<<grid, kBlockSize, 0, mt_stream()>>>(out_first, n, value);
    } else {
        fill_strided<T><<<grid, kBlockSize, 0, mt_stream()>>>(out, n, value);
    }
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* mt_fill, and mt_map with MT_MAP_FILL, which ignores its input. */
static mt_status fill(const char *func, const mt_tensor &out, double value)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    MT_TRY(mt_check_extent(func, "out", &out));
    if (tensor_numel(out) == 0)
        return MT_OK;
    return with_dtype(func, out.dtype, [&](auto tag) {
        using T = decltype(tag);
        return launch_fill<T>(out, mt_cast<T>(value));
    });
}

mt_status mt_fill(mt_tensor out, double value)
{
    return fill("mt_fill", out, value);
}

/* mt_map and mt_map_scalars: out = op(in) with the op's scalars. */
static mt_status map_with_scalars(const char *func, int op, const mt_tensor &out, const mt_tensor &in, double scalar,
                                  double t)
{
    MT_TRY(mt_check_id(func, "map op", op, MT_MAP_OP_COUNT));
    if (op == MT_MAP_FILL)
        return fill(func, out, scalar);

    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    MT_TRY(mt_check_tensor(func, "in", &in));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "in", &in));
    MT_TRY(mt_check_same_shape(func, &in, "in", &out, "out"));
    if (op != MT_MAP_COPY) /* only a copy may change the dtype */
        MT_TRY(mt_check_same_dtype(func, &in, "in", &out, "out"));
    if (!map_dtype_takes(in.dtype, op))
        return mt_fail(MT_ERR_DTYPE, func, "%s is not defined for %s", mt_op_name("map", op),
                       dtype_name(in.dtype));
    /* An integer power needs a whole exponent >= 0 (1 / x is no integer). */
    if (op == MT_MAP_POW_SCALAR && in.dtype == MT_INT64 && !(scalar >= 0.0 && scalar == floor(scalar) && scalar != INFINITY))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "pow_scalar of an int64 tensor takes a whole exponent >= 0, got %g", scalar);
    MT_TRY(mt_check_alias(func, &out, &in, "in"));
    if (tensor_numel(out) == 0)
        return MT_OK;

    if (op == MT_MAP_COPY)
        return copy_tensor(out, in);
    return with_dtype(func, out.dtype, [&](auto tag) {
        using T = decltype(tag);
        return map_same_dtype<T>(op, out, in, mt_cast<T>(scalar), mt_cast<T>(t));
    });
}

mt_status mt_map(int op, mt_tensor out, mt_tensor in, double scalar)
{
    return map_with_scalars("mt_map", op, out, in, scalar, 0.0);
}

mt_status mt_map_scalars(int op, mt_tensor out, mt_tensor in, double s, double t)
{
    return map_with_scalars("mt_map_scalars", op, out, in, s, t);
}

mt_status copy_tensor(const mt_tensor &out, const mt_tensor &in)
{
    if (tensor_numel(out) == 0)
        return MT_OK;
    return with_dtype("copy", out.dtype, [&](auto out_tag) {
        return with_dtype("copy", in.dtype, [&](auto in_tag) {
            using TOut = decltype(out_tag);
            using TIn = decltype(in_tag);
            return launch_map<TOut, TIn>(out, in, map_cast<TOut, TIn>{});
        });
    });
}

/* One rung of the transpose ladder for out = in. */
template <typename TOut, typename TIn>
static mt_status copy_variant_typed(int algo, const mt_tensor &out, const mt_tensor &in)
{
    const bool tiled_layout = transposed_copy_layout(out, in);
    switch (algo) {
    case MT_COPY_ALGO_TILED:
        if (tiled_layout)
            return launch_copy_transposed<TOut, TIn, 0>(out, in);
        break;
    case MT_COPY_ALGO_TILED_PADDED:
        if (tiled_layout)
            return launch_copy_transposed<TOut, TIn, 1>(out, in);
        break;
    default:
        break;
    }
    return launch_map_strided<TOut, TIn>(out, in, map_cast<TOut, TIn>{});
}

mt_status mt_copy_variant(mt_tensor out, mt_tensor in, int algo)
{
    const char *func = "mt_copy_variant";
    MT_TRY(mt_check_id(func, "copy algo", algo, MT_COPY_ALGO_COUNT));
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    MT_TRY(mt_check_tensor(func, "in", &in));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "in", &in));
    MT_TRY(mt_check_same_shape(func, &in, "in", &out, "out"));
    MT_TRY(mt_check_alias(func, &out, &in, "in"));
    if (tensor_numel(out) == 0)
        return MT_OK;
    if (algo == MT_COPY_ALGO_DEFAULT)
        return copy_tensor(out, in);
    return with_dtype(func, out.dtype, [&](auto out_tag) {
        return with_dtype(func, in.dtype, [&](auto in_tag) {
            return copy_variant_typed<decltype(out_tag), decltype(in_tag)>(algo, out, in);
        });
    });
}
