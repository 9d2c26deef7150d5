/*
 * matmul.cu: batched matrix product over the last two dims,
 *     out (..., M, N) = a (..., M, K) @ b (..., K, N),
 * the leading "batch" dims broadcasting NumPy-style (a (5, M, K) times
 * b (K, N) is five products with the same b).
 *
 * The kernel ladder, one readable kernel per idea, each selectable by name
 * (mt_matmul_algo) so that bench/run.py can show what each step buys:
 *
 *   1 naive         one thread per output; the threads of a warp take 32
 *                   consecutive ROWS of out. Each warp load of A then touches
 *                   32 rows (32 separate memory transactions), and every
 *                   store too: uncoalesced.
 *   2 coalesced     the same work, but the threads of a warp take 32
 *                   consecutive COLUMNS: their B loads and out stores are
 *                   neighbouring addresses (one transaction per warp) and
 *                   their A load is one address for all 32 (a broadcast).
 *                   Nothing else changed; on an H100 this alone is ~7x.
 *   3 tiled         the threads of a 32 x 32 block stage 32 x 32 tiles of A
 *                   and B in shared memory and compute from there: each
 *                   element loaded from global memory is used 32 times.
 *   4-7             register blocking: blocktile_1d, blocktile_2d,
 *                   vectorized, warptile; see src/matmul_blocktile.cu.
 *
 * MT_MATMUL_DEFAULT is warptile, the fastest rung, with the tile
 * configuration the caller (the autotuner) passes to mt_matmul_with_config,
 * or the library's own choice. For a small product whose operands warptile
 * would first have to copy (see below), the default takes the tiled kernel:
 * the copies would cost more than they save.
 *
 * Rungs 1-5 handle arbitrary strides (a transposed view works: element
 * (i, k) of A is at a_batch + i * stride[-2] + k * stride[-1]). Rungs 6 and 7
 * read with 16-byte loads, so they need row-major operands (warptile also
 * takes float32 column-major ones, i.e. transposed views) with aligned rows;
 * any other operand is first copied into a contiguous scratch buffer whose
 * rows are padded to a multiple of 16 bytes (prepare_operand; a broadcast
 * batch dim stays broadcast and is not copied once per batch). Every rung
 * handles sizes that are not multiples of its tiles and K == 0 (the sum is
 * empty: zeros).
 *
 * Grid: x walks column tiles (row tiles for naive), y the other dimension,
 * z the output's batch ordinals. The y and z dimensions of a grid are
 * limited to 65535, so the host launches the grid in chunks, passing where
 * each chunk starts (for_each_grid_chunk).
 *
 * out must be a buffer of its own: a thread writes its output element while
 * other threads may still be reading A and B, so if out overlapped a or b
 * the result would depend on timing. mt_matmul rejects overlapping tensors.
 */
#include <limits.h>

#include <atomic>

#include "matmul_internal.h"

/* Tile width of rungs 1-3, and their block shape (kTile x kTile threads).
 * 32 makes one warp exactly one row of the block: in rungs 2 and 3 its 32
 * threads read 32 consecutive elements of a B row (one coalesced load) and
 * all read the same A element (a broadcast). Two tiles of 32 x 32 doubles
 * are 16 KiB of shared memory per block. __launch_bounds__ on the kernels
 * tells the compiler that blocks have kTile * kTile = 1024 threads, so it
 * keeps each thread within the 64 registers that leaves (65536 per SM /
 * 1024); without it, a compiler that chose more would make every launch fail
 * with "too many resources". */
constexpr int kTile = 32;

/* ---- rung 1: naive --------------------------------------------------------- */

/* threadIdx.x walks ROWS: the 32 threads of a warp (same threadIdx.y, x =
 * 0..31) read A(row .. row + 31, k), 32 elements a whole row apart, and
 * write a column of out: every access of the warp is its own transaction. */
template <typename T>
__global__ void __launch_bounds__(kTile * kTile) matmul_naive(mt_tensor out, mt_tensor a, mt_tensor b, int64_t col_tile_start, int64_t batch_start)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t K = a.shape[a.ndim - 1];
    const int64_t a_row_stride = a.strides[a.ndim - 2];
    const int64_t a_col_stride = a.strides[a.ndim - 1];
    const int64_t b_row_stride = b.strides[b.ndim - 2];
    const int64_t b_col_stride = b.strides[b.ndim - 1];

    const int64_t row = (int64_t)blockIdx.x * kTile + threadIdx.x;
    const int64_t col = (col_tile_start + blockIdx.y) * kTile + threadIdx.y;
    const BatchStart start = batch_start_of(batch_start + blockIdx.z, out, a, b);
    const T *a_data = static_cast<const T *>(a.data);
    const T *b_data = static_cast<const T *>(b.data);
    T *out_data = static_cast<T *>(out.data);

    /* The grid is rounded up to whole tiles, so the last blocks have threads
     * past the edge of the matrix; they must not write. */
    if (row < M && col < N) {
        T acc = T(0);
        for (int64_t k = 0; k < K; ++k)
            acc += a_data[start.a + row * a_row_stride + k * a_col_stride] * b_data[start.b + k * b_row_stride + col * b_col_stride];
        out_data[start.out + row * out.strides[out.ndim - 2] + col * out.strides[out.ndim - 1]] = acc;
    }
}

/* ---- rung 2: coalesced ------------------------------------------------------ */

/* The naive kernel with the roles of threadIdx.x and threadIdx.y swapped:
 * threadIdx.x walks COLUMNS, so a warp reads 32 neighbouring elements of a B
 * row and writes 32 neighbouring outputs. */
template <typename T>
__global__ void __launch_bounds__(kTile * kTile) matmul_coalesced(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t K = a.shape[a.ndim - 1];
    const int64_t a_row_stride = a.strides[a.ndim - 2];
    const int64_t a_col_stride = a.strides[a.ndim - 1];
    const int64_t b_row_stride = b.strides[b.ndim - 2];
    const int64_t b_col_stride = b.strides[b.ndim - 1];

    const int64_t row = (row_tile_start + blockIdx.y) * kTile + threadIdx.y;
    const int64_t col = (int64_t)blockIdx.x * kTile + threadIdx.x;
    const BatchStart start = batch_start_of(batch_start + blockIdx.z, out, a, b);
    const T *a_data = static_cast<const T *>(a.data);
    const T *b_data = static_cast<const T *>(b.data);
    T *out_data = static_cast<T *>(out.data);

    if (row < M && col < N) {
        T acc = T(0);
        for (int64_t k = 0; k < K; ++k)
            acc += a_data[start.a + row * a_row_stride + k * a_col_stride] * b_data[start.b + k * b_row_stride + col * b_col_stride];
        out_data[start.out + row * out.strides[out.ndim - 2] + col * out.strides[out.ndim - 1]] = acc;
    }
}

/* ---- rung 3: shared-memory tiles ------------------------------------------ */

template <typename T>
__global__ void __launch_bounds__(kTile * kTile) matmul_tiled(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
{
    __shared__ T a_tile[kTile][kTile];
    __shared__ T b_tile[kTile][kTile];
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t K = a.shape[a.ndim - 1];
    const int64_t a_row_stride = a.strides[a.ndim - 2];
    const int64_t a_col_stride = a.strides[a.ndim - 1];
    const int64_t b_row_stride = b.strides[b.ndim - 2];
    const int64_t b_col_stride = b.strides[b.ndim - 1];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int64_t row = (row_tile_start + blockIdx.y) * kTile + ty;
    const int64_t col = (int64_t)blockIdx.x * kTile + tx;
    const BatchStart start = batch_start_of(batch_start + blockIdx.z, out, a, b);
    const T *a_data = static_cast<const T *>(a.data);
    const T *b_data = static_cast<const T *>(b.data);
    T *out_data = static_cast<T *>(out.data);

    T acc = T(0);
    /* K is the same for the whole block, so every thread runs this loop
     * equally often and reaches each barrier; threads outside the matrix
     * stay in the loop (no early return) because their loads are needed. */
    for (int64_t k0 = 0; k0 < K; k0 += kTile) {
        /* This thread loads A(row, k0 + tx) and B(k0 + ty, col). Near the
         * edges (M, N or K not a multiple of kTile) those may lie outside the
         * matrix: the thread stores 0 instead. A zero adds nothing to a dot
         * product, so the loop below can always run over the full tile, and
         * no thread reads a stale value left in shared memory by the
         * previous tile. */
        const int64_t a_col = k0 + tx;
        const int64_t b_row = k0 + ty;
        a_tile[ty][tx] = (row < M && a_col < K) ? a_data[start.a + row * a_row_stride + a_col * a_col_stride] : T(0);
        b_tile[ty][tx] = (b_row < K && col < N) ? b_data[start.b + b_row * b_row_stride + col * b_col_stride] : T(0);
        /* Each thread is about to read a whole row of a_tile and column of
         * b_tile, loaded by 2 * kTile other threads: all loads must be done. */
        __syncthreads();
        for (int k = 0; k < kTile; ++k)
            acc += a_tile[ty][k] * b_tile[k][tx];
        /* The next iteration overwrites both tiles: every thread must have
         * finished reading this pair first. */
        __syncthreads();
    }

    if (row < M && col < N)
        out_data[start.out + row * out.strides[out.ndim - 2] + col * out.strides[out.ndim - 1]] = acc;
}

/* ---- host side ------------------------------------------------------------ */

/* Do small's batch dims broadcast to out's (NumPy rules on the leading
 * ndim - 2 dims)? */
static bool batch_broadcasts(const mt_tensor &small, const mt_tensor &out)
{
    const int small_batch = small.ndim - 2;
    const int out_batch = out.ndim - 2;
    if (small_batch > out_batch)
        return false;
    const int lead = out_batch - small_batch;
    for (int d = 0; d < small_batch; ++d) {
        if (small.shape[d] != 1 && small.shape[d] != out.shape[d + lead])
            return false;
    }
    return true;
}

/* Rungs 1-3: 32 x 32 threads per block. */
template <typename T>
static mt_status launch_simple(int algo, const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t batches = shape_numel(out.shape, out.ndim - 2);
    const int64_t row_tiles = (M + kTile - 1) / kTile;
    const int64_t col_tiles = (N + kTile - 1) / kTile;
    const dim3 block(kTile, kTile);
    if (algo == MT_MATMUL_NAIVE)
        return for_each_grid_chunk(row_tiles, col_tiles, batches, [&](dim3 grid, int64_t y0, int64_t b0) {
            matmul_naive<T><<<grid, block>>>(out, a, b, y0, b0);
            CUDA_CHECK(mt_launch_status());
            return MT_OK;
        });
    return for_each_grid_chunk(col_tiles, row_tiles, batches, [&](dim3 grid, int64_t y0, int64_t b0) {
        if (algo == MT_MATMUL_COALESCED)
            matmul_coalesced<T><<<grid, block>>>(out, a, b, y0, b0);
        else
            matmul_tiled<T><<<grid, block>>>(out, a, b, y0, b0);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

/* Makes x readable by the vectorised kernels (gemm_operand_ok): x itself when
 * it already is, else a copy into `scratch`, row-major with each row padded
 * to a multiple of 16 bytes. A batch dim that x broadcasts (stride 0) has
 * size 1 in the copy, which still broadcasts: it is copied once, not once
 * per batch. The copy runs on the same stream before the product, and
 * scratch is freed (stream-ordered) after it. */
static mt_status prepare_operand(const mt_tensor &x, bool transposed_ok, mt_tensor *view, DeviceScratch *scratch)
{
    if (gemm_operand_ok(x, transposed_ok)) {
        *view = x;
        return MT_OK;
    }
    mt_tensor src = x;
    for (int d = 0; d < src.ndim - 2; ++d) {
        if (src.strides[d] == 0)
            src.shape[d] = 1;
    }
    const size_t item = dtype_size(x.dtype);
    const int64_t width = (int64_t)(16 / item);
    const int64_t rows = src.shape[src.ndim - 2];
    const int64_t cols = src.shape[src.ndim - 1];
    mt_tensor dst = src;
    dst.offset = 0;
    dst.strides[dst.ndim - 1] = 1;
    dst.strides[dst.ndim - 2] = (cols + width - 1) / width * width;
    int64_t size = rows * dst.strides[dst.ndim - 2];
    for (int d = dst.ndim - 3; d >= 0; --d) {
        dst.strides[d] = size;
        size *= dst.shape[d];
    }
    CUDA_CHECK(scratch->allocate((size_t)(size > 0 ? size : 1) * item));
    dst.data = scratch->as<void>();
    MT_TRY(copy_tensor(dst, src));
    *view = dst;
    return MT_OK;
}

/* Products smaller than this (M * N * K) take the tiled kernel by default
 * when warptile would first have to copy an operand. */
constexpr int64_t kCopyWorthIt = (int64_t)1 << 22;

template <typename T>
static mt_status launch_matmul(int algo, int config, const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const bool float32 = sizeof(T) == sizeof(float);
    if (algo == MT_MATMUL_DEFAULT) {
        const int64_t M = out.shape[out.ndim - 2];
        const int64_t N = out.shape[out.ndim - 1];
        const int64_t K = a.shape[a.ndim - 1];
        const bool direct = gemm_operand_ok(a, float32) && gemm_operand_ok(b, float32);
        algo = (direct || M * N * K >= kCopyWorthIt) ? MT_MATMUL_WARPTILE : MT_MATMUL_TILED;
    }
    switch (algo) {
    case MT_MATMUL_NAIVE:
    case MT_MATMUL_COALESCED:
    case MT_MATMUL_TILED:
        return launch_simple<T>(algo, out, a, b);
    case MT_MATMUL_BLOCKTILE_1D:
        return launch_blocktile_1d<T>(out, a, b);
    case MT_MATMUL_BLOCKTILE_2D:
        return launch_blocktile_2d<T>(out, a, b);
    default:
        break;
    }

    /* The vectorised rungs: make the operands readable with 16-byte loads. */
    const bool transposed_ok = algo == MT_MATMUL_WARPTILE && float32;
    mt_tensor a_view, b_view;
    DeviceScratch a_copy, b_copy;
    mt_status status = prepare_operand(a, transposed_ok, &a_view, &a_copy);
    MT_TRY(prepare_operand(b, transposed_ok, &b_view, &b_copy));
    if (algo == MT_MATMUL_VECTORIZED) {
        status = launch_vectorized<T>(out, a_view, b_view);
    } else {
        if (config < 0) {
            const int64_t batches = shape_numel(out.shape, out.ndim - 2);
            config = warptile_default_config(out.shape[out.ndim - 2], out.shape[out.ndim - 1], batches,
                                             mt_sm_count(), sizeof(T));
        }
        status = launch_warptile<T>(out, a_view, b_view, config);
    }
    if (status != MT_OK)
        return status;
    CUDA_CHECK(a_copy.release());
    CUDA_CHECK(b_copy.release());
    return MT_OK;
}

int mt_matmul_config_count(void)
{
    return warptile_config_count();
}

const char *mt_matmul_config_name(int config)
{
    return warptile_config_name(config);
}

mt_status mt_matmul(mt_tensor out, mt_tensor a, mt_tensor b, int algo)
{
    return mt_matmul_with_config(out, a, b, algo, -1);
}

mt_status mt_matmul_with_config(mt_tensor out, mt_tensor a, mt_tensor b, int algo, int config)
{
    const char *func = "mt_matmul";
    if (algo < 0 || algo >= MT_MATMUL_ALGO_COUNT)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "unknown matmul algo id %d (valid ids are 0..%d)", algo,
                       MT_MATMUL_ALGO_COUNT - 1);
    if (config < -1 || config >= warptile_config_count())
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "unknown matmul config %d (valid: -1 for the library's choice, or 0..%d)",
                       config, warptile_config_count() - 1);
    if (config >= 0 && algo != MT_MATMUL_DEFAULT && algo != MT_MATMUL_WARPTILE)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "matmul config %d given for algo %d, which has no configurations (only "
                       "default and warptile do; pass -1)",
                       config, algo);

    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    MT_TRY(mt_check_tensor(func, "a", &a));
    MT_TRY(mt_check_tensor(func, "b", &b));
    MT_TRY(mt_check_same_dtype(func, &a, "a", &out, "out"));
    MT_TRY(mt_check_same_dtype(func, &b, "b", &out, "out"));

    char a_shape[256];
    char b_shape[256];
    char out_shape[256];
    mt_shape_str(&a, a_shape, sizeof a_shape);
    mt_shape_str(&b, b_shape, sizeof b_shape);
    mt_shape_str(&out, out_shape, sizeof out_shape);
    const mt_tensor *operands[3] = {&a, &b, &out};
    const char *names[3] = {"a", "b", "out"};
    const char *shapes[3] = {a_shape, b_shape, out_shape};
    for (int i = 0; i < 3; ++i) {
        if (operands[i]->ndim < 2)
            return mt_fail(MT_ERR_SHAPE, func,
                           "%s has shape %s; matmul needs at least 2 dims (..., rows, cols)",
                           names[i], shapes[i]);
    }
    const int64_t M = a.shape[a.ndim - 2];
    const int64_t K = a.shape[a.ndim - 1];
    const int64_t N = b.shape[b.ndim - 1];
    if (b.shape[b.ndim - 2] != K)
        return mt_fail(MT_ERR_SHAPE, func,
                       "a has shape %s and b has shape %s: a's last dim (%lld) must equal b's "
                       "second-to-last (%lld)",
                       a_shape, b_shape, (long long)K, (long long)b.shape[b.ndim - 2]);
    if (out.shape[out.ndim - 2] != M || out.shape[out.ndim - 1] != N)
        return mt_fail(MT_ERR_SHAPE, func,
                       "out has shape %s but a of shape %s @ b of shape %s gives (..., %lld, %lld)",
                       out_shape, a_shape, b_shape, (long long)M, (long long)N);
    for (int i = 0; i < 2; ++i) {
        if (!batch_broadcasts(*operands[i], out))
            return mt_fail(MT_ERR_SHAPE, func,
                           "the batch dims of %s (shape %s) do not broadcast to those of out "
                           "(shape %s)",
                           names[i], shapes[i], out_shape);
        if (tensors_overlap(out, *operands[i]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                           "out overlaps %s in memory; matmul reads %s while it writes out, so "
                           "out must be a separate buffer",
                           names[i], names[i]);
    }
    /* gridDim.x takes column tiles (row tiles for naive), at most 2^31 - 1. */
    if ((N + kTile - 1) / kTile > INT_MAX || (M + kTile - 1) / kTile > INT_MAX)
        return mt_fail(MT_ERR_SHAPE, func, "out has shape %s: too many rows or columns for one grid",
                       out_shape);
    if (tensor_numel(out) == 0)
        return MT_OK;

    if (out.dtype == MT_FLOAT32)
        return launch_matmul<float>(algo, config, out, a, b);
    return launch_matmul<double>(algo, config, out, a, b);
}
