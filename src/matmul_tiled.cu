/*
 * matmul_tiled.cu: rung 3 of the matmul ladder, shared-memory tiles. The
 * threads of a 32 x 32 block stage 32 x 32 tiles of A and B in shared memory
 * and compute from there: each element loaded from global memory is used 32
 * times. (Rung 4, blocktile_1d, goes on to keep values in registers.)
 */
#include "matmul_internal.h"

/* TASK(matmul_tiled) BEGIN */
template <typename T, typename C>
__global__ void __launch_bounds__(C::kThreads) matmul_tiled(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
{
    static_assert(C::BM == C::BK && C::BN == C::BK, "each thread loads one element of each tile");
    __shared__ T a_tile[C::BM][C::BK];
    __shared__ T b_tile[C::BK][C::BN];
    const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
    const MatrixView<const T> A = matrix_view<const T>(a, start.a);
    const MatrixView<const T> B = matrix_view<const T>(b, start.b);
    const int64_t M = A.rows, N = B.cols, K = A.cols; /* out is M x N */

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int64_t row = (row_tile_start + blockIdx.y) * C::BM + ty;
    const int64_t col = (int64_t)blockIdx.x * C::BN + tx;

    T acc = T(0);
    /* K is the same for the whole block, so every thread runs this loop
     * equally often and reaches each barrier; threads outside the matrix
     * stay in the loop (no early return) because their loads are needed. */
    for (int64_t k0 = 0; k0 < K; k0 += C::BK) {
        /* This thread loads A(row, k0 + tx) and B(k0 + ty, col). Near the
         * edges (M, N or K not a multiple of the tile) those may lie outside
         * the matrix: the thread stores 0 instead. A zero adds nothing to a
         * dot product, so the loop below can always run over the full tile,
         * and no thread reads a stale value left in shared memory by the
         * previous tile. */
        const int64_t a_col = k0 + tx;
        const int64_t b_row = k0 + ty;
        a_tile[ty][tx] = (row < M && a_col < K) ? A.at(row, a_col) : T(0);
        b_tile[ty][tx] = (b_row < K && col < N) ? B.at(b_row, col) : T(0);
        /* Each thread is about to read a whole row of a_tile and column of
         * b_tile, loaded by 2 * 32 other threads: all loads must be done. */
        __syncthreads();
        for (int k = 0; k < C::BK; ++k)
            acc += a_tile[ty][k] * b_tile[k][tx];
        /* The next iteration overwrites both tiles: every thread must have
         * finished reading this pair first. */
        __syncthreads();
    }

    const MatrixView<T> Out = matrix_view<T>(out, start.out);
    if (row < M && col < N)
        Out.at(row, col) = acc;
}

/* TASK(matmul_tiled) STUB */
//| MT_TASK_MISSING(matmul_tiled, "matmul_tiled", "src/matmul_tiled.cu")
//|
//| /* out = a @ b (batched: blockIdx.z picks the batch), one 32 x 32 tile of out
//|  * per block of 32 x 32 threads; thread (tx, ty) computes out(row, col). */
//| template <typename T, typename C>
//| __global__ void __launch_bounds__(C::kThreads) matmul_tiled(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
//| {
//|     static_assert(C::BM == C::BK && C::BN == C::BK, "each thread loads one element of each tile");
//|     const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
//|     const MatrixView<const T> A = matrix_view<const T>(a, start.a);
//|     const MatrixView<const T> B = matrix_view<const T>(b, start.b);
//|     const MatrixView<T> Out = matrix_view<T>(out, start.out);
//|     const int64_t M = A.rows, N = B.cols, K = A.cols; /* out is M x N */
//|     const int64_t row = (row_tile_start + blockIdx.y) * C::BM + threadIdx.y;
//|     const int64_t col = (int64_t)blockIdx.x * C::BN + threadIdx.x;
//|     /* TODO (task matmul_tiled): declare two __shared__ tiles, C::BM x C::BK
//|      * of A and C::BK x C::BN of B. Walk K one tile at a time: each thread
//|      * loads one element of each tile (what does it store when that element
//|      * lies outside the matrix?), the block computes from the tiles, and
//|      * moves on. Which reads need another thread's load to be finished, and
//|      * which loads must wait until every thread is done reading? Write
//|      * Out.at(row, col) only inside out. No thread may return early: why? */
//|     (void)M, (void)N, (void)K, (void)row, (void)col, (void)Out;
//| }
/* TASK(matmul_tiled) END */

template <typename T>
mt_status launch_tiled(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    MT_TRY(MT_TASK_CHECK(matmul_tiled));
    using C = SimpleTiles;
    const dim3 block(C::BN, C::BM);
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        matmul_tiled<T, C><<<grid, block, 0, mt_stream()>>>(out, a, b, y0, b0);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

template mt_status launch_tiled<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_tiled<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
