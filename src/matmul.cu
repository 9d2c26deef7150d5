/*
 * matmul.cu: batched matrix product over the last two dims,
 *     out (..., M, N) = a (..., M, K) @ b (..., K, N),
 * the leading "batch" dims broadcasting NumPy-style (a (5, M, K) times
 * b (K, N) is five products with the same b).
 *
 * Two kernels, side by side, the first two rungs of a kernel ladder:
 *
 *   matmul_naive  one thread per output element: it walks row `row` of A
 *                 and column `col` of B in global memory and sums K
 *                 products. Every element of A is read N times and every
 *                 element of B M times, all from global memory.
 *   matmul_tiled  the threads of a kTile x kTile block cooperate: for each
 *                 kTile-wide strip of K they load one tile of A and one of B
 *                 into shared memory (one element each), synchronize, and
 *                 each thread then reads a row of the A tile and a column of
 *                 the B tile from fast shared memory. Each element fetched
 *                 from global memory is now used kTile times: kTile times
 *                 less global traffic.
 *
 * Both handle arbitrary strides (a transposed view works: element (i, k) of
 * A is at a_batch + i * stride[-2] + k * stride[-1]), sizes that are not
 * multiples of the tile, and K == 0 (the sum is empty: zeros).
 *
 * Grid: x walks column tiles, y row tiles, z the output's batch ordinals.
 * The y and z dimensions of a grid are limited to 65535, so the host loops
 * over chunks of rows and of batches, passing where each chunk starts.
 *
 * out must be a buffer of its own: a thread writes its output element while
 * other threads may still be reading A and B, so if out overlapped a or b
 * the result would depend on timing. mt_matmul rejects overlapping tensors.
 */
#include <limits.h>

#include "ops_common.h"

/* Tile width of matmul_tiled, and the block shape (kTile x kTile threads) of
 * both kernels. 32 makes one warp exactly one row of the tile: its 32 threads
 * read 32 consecutive elements of a B row (one coalesced load) and all read
 * the same A tile element (a shared-memory broadcast, no bank conflict).
 * Two tiles of 32 x 32 doubles are 16 KiB of shared memory per block.
 * __launch_bounds__ on the kernels tells the compiler that blocks have
 * kTile * kTile = 1024 threads, so it keeps each thread within the 64
 * registers that leaves (65536 per SM / 1024); without it, a compiler that
 * chose more would make every launch fail with "too many resources". */
constexpr int kTile = 32;

/* The limit of gridDim.y and gridDim.z. */
constexpr int64_t kMaxGridYZ = 65535;

/* Where one batch's matrix starts in each operand, offset included. */
struct BatchStart {
    int64_t out;
    int64_t a;
    int64_t b;
};

/* Batch ordinal -> start of that batch's matrix in out, a and b. The batch
 * dims are the leading ndim - 2 dims; a and b may have fewer of them, or size
 * 1 where out's are larger (broadcast), which broadcast_index resolves. */
__device__ BatchStart batch_start_of(int64_t batch, const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    int64_t out_index[MT_MAX_DIMS];
    int64_t a_index[MT_MAX_DIMS];
    int64_t b_index[MT_MAX_DIMS];
    const int out_batch_dims = out.ndim - 2;
    const int a_batch_dims = a.ndim - 2;
    const int b_batch_dims = b.ndim - 2;
    to_index(batch, out.shape, out_batch_dims, out_index);
    broadcast_index(out_index, out_batch_dims, a.shape, a_batch_dims, a_index);
    broadcast_index(out_index, out_batch_dims, b.shape, b_batch_dims, b_index);
    BatchStart start;
    start.out = out.offset + index_to_position(out_index, out.strides, out_batch_dims);
    start.a = a.offset + index_to_position(a_index, a.strides, a_batch_dims);
    start.b = b.offset + index_to_position(b_index, b.strides, b_batch_dims);
    return start;
}

/* ---- rung 1: naive --------------------------------------------------------- */

template <typename T>
__global__ void __launch_bounds__(kTile * kTile) matmul_naive(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
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

    /* The grid is rounded up to whole tiles, so the last blocks have threads
     * past the edge of the matrix; they must not write. */
    if (row < M && col < N) {
        T acc = T(0);
        for (int64_t k = 0; k < K; ++k)
            acc += a_data[start.a + row * a_row_stride + k * a_col_stride] * b_data[start.b + k * b_row_stride + col * b_col_stride];
        out_data[start.out + row * out.strides[out.ndim - 2] + col * out.strides[out.ndim - 1]] = acc;
    }
}

/* ---- rung 2: shared-memory tiles ------------------------------------------ */

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

template <typename T>
static mt_status launch_matmul(int algo, const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t batches = shape_numel(out.shape, out.ndim - 2);
    const int64_t row_tiles = (M + kTile - 1) / kTile;
    const int64_t col_tiles = (N + kTile - 1) / kTile;
    const dim3 block(kTile, kTile);

    for (int64_t batch0 = 0; batch0 < batches; batch0 += kMaxGridYZ) {
        const int64_t batch_count = batches - batch0 < kMaxGridYZ ? batches - batch0 : kMaxGridYZ;
        for (int64_t tile0 = 0; tile0 < row_tiles; tile0 += kMaxGridYZ) {
            const int64_t tile_count = row_tiles - tile0 < kMaxGridYZ ? row_tiles - tile0 : kMaxGridYZ;
            const dim3 grid((unsigned int)col_tiles, (unsigned int)tile_count, (unsigned int)batch_count);
            if (algo == MT_MATMUL_NAIVE)
                matmul_naive<T><<<grid, block>>>(out, a, b, tile0, batch0);
            else
                matmul_tiled<T><<<grid, block>>>(out, a, b, tile0, batch0);
            CUDA_CHECK(mt_launch_status());
        }
    }
    return MT_OK;
}

mt_status mt_matmul(mt_tensor out, mt_tensor a, mt_tensor b, int algo)
{
    const char *func = "mt_matmul";
    if (algo < 0 || algo >= MT_MATMUL_ALGO_COUNT)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "unknown matmul algo id %d (valid ids are 0..%d)", algo,
                       MT_MATMUL_ALGO_COUNT - 1);

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
    if (status != MT_OK)
        return status;

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
    if ((N + kTile - 1) / kTile > INT_MAX)
        return mt_fail(MT_ERR_SHAPE, func, "out has shape %s: too many columns for one grid",
                       out_shape);
    if (tensor_numel(out) == 0)
        return MT_OK;

    if (out.dtype == MT_FLOAT32)
        return launch_matmul<float>(algo, out, a, b);
    return launch_matmul<double>(algo, out, a, b);
}
