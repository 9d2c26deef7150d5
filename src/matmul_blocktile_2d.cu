/*
 * matmul_blocktile_2d.cu: rung 5 of the matmul ladder. Each thread computes
 * an 8 x 8 block of out: per k it loads 8 A and 8 B values into registers and
 * does 64 FMAs with them, 4 FMAs per shared-memory load instead of rung 4's
 * 1. Blocks are 128 x 128, so each global element is loaded once per 128
 * outputs. Any strides; zeros outside the matrices, as in rung 4.
 */
#include "matmul_internal.h"

template <typename T, typename C>
__global__ void __launch_bounds__(C::kThreads) matmul_blocktile_2d(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
{
    constexpr int BM = C::BM, BN = C::BN, BK = C::BK, TM = C::TM, TN = C::TN;
    constexpr int kThreads = C::kThreads;
    __shared__ T a_tile[C::BM][C::BK];
    __shared__ T b_tile[C::BK][C::BN];
    const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
    const MatrixView<const T> A = matrix_view<const T>(a, start.a);
    const MatrixView<const T> B = matrix_view<const T>(b, start.b);
    const int64_t M = A.rows, N = B.cols, K = A.cols; /* out is M x N */

    const int tid = threadIdx.x;
    const int64_t row0 = (row_tile_start + blockIdx.y) * BM;
    const int64_t col0 = (int64_t)blockIdx.x * BN;
    const int thread_row = tid / (BN / TN);
    const int thread_col = tid % (BN / TN);

    T acc[TM][TN];
    MT_UNROLL for (int i = 0; i < TM; ++i)
        MT_UNROLL for (int j = 0; j < TN; ++j)
            acc[i][j] = T(0);
    T a_reg[TM];
    T b_reg[TN];

    for (int64_t k0 = 0; k0 < K; k0 += BK) {
        /* 256 threads load the 128 x 8 A tile and the 8 x 128 B tile, four
         * elements each; consecutive threads take consecutive elements. */
        for (int e = tid; e < BM * BK; e += kThreads) {
            const int r = e / BK, c = e % BK;
            const int64_t ar = row0 + r, ak = k0 + c;
            a_tile[r][c] = (ar < M && ak < K) ? A.at(ar, ak) : T(0);
        }
        for (int e = tid; e < BK * BN; e += kThreads) {
            const int r = e / BN, c = e % BN;
            const int64_t bk = k0 + r, bc = col0 + c;
            b_tile[r][c] = (bk < K && bc < N) ? B.at(bk, bc) : T(0);
        }
        __syncthreads();
        MT_UNROLL for (int k = 0; k < BK; ++k) {
            /* 16 loads into registers, then 64 FMAs from registers. */
            MT_UNROLL for (int i = 0; i < TM; ++i)
                a_reg[i] = a_tile[thread_row * TM + i][k];
            MT_UNROLL for (int j = 0; j < TN; ++j)
                b_reg[j] = b_tile[k][thread_col * TN + j];
            MT_UNROLL for (int i = 0; i < TM; ++i)
                MT_UNROLL for (int j = 0; j < TN; ++j)
                    acc[i][j] += a_reg[i] * b_reg[j];
        }
        __syncthreads();
    }

    const MatrixView<T> Out = matrix_view<T>(out, start.out);
    MT_UNROLL for (int i = 0; i < TM; ++i) {
        const int64_t row = row0 + thread_row * TM + i;
        MT_UNROLL for (int j = 0; j < TN; ++j) {
            const int64_t col = col0 + thread_col * TN + j;
            if (row < M && col < N)
                Out.at(row, col) = acc[i][j];
        }
    }
}

template <typename T>
mt_status launch_blocktile_2d(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    using C = Blocktile2dTiles;
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        matmul_blocktile_2d<T, C><<<grid, C::kThreads, 0, mt_stream()>>>(out, a, b, y0, b0);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

template mt_status launch_blocktile_2d<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_blocktile_2d<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
