/*
 * matmul_blocktile_1d.cu: rung 4 of the matmul ladder, the first rung of
 * register blocking.
 *
 * Rung 3 (tiled) reads two shared-memory values for every multiply-add, and
 * shared memory cannot deliver that fast enough: the FMA units wait on the
 * loads. Here each thread computes TM = 8 outputs of one column: it loads
 * one B value and reuses it for 8 FMAs (with 8 A values that the warp reads
 * as a broadcast). Rungs 5-7 raise the FMAs per load further.
 *
 * Edges: zeros are loaded for elements outside the matrices (a zero adds
 * nothing to a dot product) and only outputs inside out are written, so any
 * M, N and K works, with any strides.
 */
#include "matmul_internal.h"

/* A block computes a 64 x 64 tile of out with 512 threads; thread t owns
 * column t % 64 of the tile and 8 consecutive rows (t / 64) * 8 ... + 7. */
struct Blocktile1dTiles {
    static constexpr int BM = 64;
    static constexpr int BN = 64;
    static constexpr int BK = 8;
    static constexpr int TM = 8;
    static constexpr int kThreads = BM * BN / TM; /* 512 */
    static_assert(kThreads == BM * BK && kThreads == BK * BN, "one A and one B element per thread");
};

/* TASK(ladder_rung) BEGIN */
template <typename T, typename C>
__global__ void __launch_bounds__(C::kThreads) matmul_blocktile_1d(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
{
    constexpr int BM = C::BM, BN = C::BN, BK = C::BK, TM = C::TM;
    __shared__ T a_tile[C::BM][C::BK];
    __shared__ T b_tile[C::BK][C::BN];
    const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
    const MatrixView<const T> A = matrix_view<const T>(a, start.a);
    const MatrixView<const T> B = matrix_view<const T>(b, start.b);
    const int64_t M = A.rows, N = B.cols, K = A.cols; /* out is M x N */

    const int tid = threadIdx.x;
    const int64_t row0 = (row_tile_start + blockIdx.y) * BM;
    const int64_t col0 = (int64_t)blockIdx.x * BN;
    /* Neighbouring threads own neighbouring columns: coalesced B loads and
     * out stores. All threads of a warp share thread_row, so their A reads
     * hit one shared-memory address: a broadcast. */
    const int thread_col = tid % BN;
    const int thread_row = tid / BN;
    /* Which tile elements this thread loads. */
    const int a_r = tid / BK, a_c = tid % BK;
    const int b_r = tid / BN, b_c = tid % BN;

    T acc[TM];
    MT_UNROLL for (int i = 0; i < TM; ++i)
        acc[i] = T(0);
    for (int64_t k0 = 0; k0 < K; k0 += BK) {
        const int64_t ar = row0 + a_r, ak = k0 + a_c;
        const int64_t bk = k0 + b_r, bc = col0 + b_c;
        a_tile[a_r][a_c] = (ar < M && ak < K) ? A.at(ar, ak) : T(0);
        b_tile[b_r][b_c] = (bk < K && bc < N) ? B.at(bk, bc) : T(0);
        __syncthreads(); /* the tiles are complete */
        MT_UNROLL for (int k = 0; k < BK; ++k) {
            const T b_value = b_tile[k][thread_col]; /* one load, TM uses */
            MT_UNROLL for (int i = 0; i < TM; ++i)
                acc[i] += a_tile[thread_row * TM + i][k] * b_value;
        }
        __syncthreads(); /* everyone is done reading before the next load */
    }

    const MatrixView<T> Out = matrix_view<T>(out, start.out);
    const int64_t col = col0 + thread_col;
    MT_UNROLL for (int i = 0; i < TM; ++i) {
        const int64_t row = row0 + thread_row * TM + i;
        if (row < M && col < N)
            Out.at(row, col) = acc[i];
    }
}

/* TASK(ladder_rung) STUB */
//| MT_TASK_MISSING(ladder_rung, "matmul_blocktile_1d", "src/matmul_blocktile_1d.cu")
//|
//| template <typename T, typename C>
//| __global__ void __launch_bounds__(C::kThreads) matmul_blocktile_1d(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
//| {
//|     /* TODO (task ladder_rung): out = a @ b, one C::BM x C::BN tile of out per
//|      * block of C::kThreads threads. Start from matmul_tiled
//|      * (src/matmul_tiled.cu): stage a C::BM x C::BK tile of A and a
//|      * C::BK x C::BN tile of B in shared memory (each thread loads one element
//|      * of each, zero outside the matrices), then let each thread accumulate
//|      * C::TM outputs of one column in registers: for each k of the tile, load
//|      * the B value once and use it for C::TM multiply-adds. Thread t owns
//|      * column t % C::BN of the tile and rows (t / C::BN) * C::TM ... + C::TM - 1.
//|      * Write only outputs inside out. */
//| }
/* TASK(ladder_rung) END */

template <typename T>
mt_status launch_blocktile_1d(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    MT_TRY(MT_TASK_CHECK(ladder_rung));
    using C = Blocktile1dTiles;
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        matmul_blocktile_1d<T, C><<<grid, C::kThreads, 0, mt_stream()>>>(out, a, b, y0, b0);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

template mt_status launch_blocktile_1d<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_blocktile_1d<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
