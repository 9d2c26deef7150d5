/*
 * matmul_vectorized.cu: rung 6 of the matmul ladder. The 128 x 128 x 8
 * tiling of rung 5 (blocktile_2d), but every global load and store moves 16
 * bytes (LDG.128 / STG.128: a Pack of 4 floats or 2 doubles) and the A tile
 * is stored transposed in shared memory, so a thread reads its 8 A values as
 * two 16-byte LDS.128 instead of eight 4-byte loads.
 *
 * The 16-byte loads need each matrix row-major with aligned rows
 * (gemm_operand_ok); mt_matmul copies any other operand to a contiguous
 * buffer first. Packs that cross an edge of a matrix are loaded element by
 * element with zeros outside (load_pack), so any M, N and K works.
 */
#include "matmul_internal.h"

struct VectorizedTiles {
    static constexpr int BM = 128;
    static constexpr int BN = 128;
    static constexpr int BK = 8;
    static constexpr int TM = 8;
    static constexpr int TN = 8;
    static constexpr int kThreads = (BM / TM) * (BN / TN); /* 256 */
};

/* lda, ldb: the row strides of a and b (leading_dim), kernel parameters
 * rather than view fields so that they take no registers. */
template <typename T, typename C>
__global__ void __launch_bounds__(C::kThreads) matmul_vectorized(mt_tensor out, mt_tensor a, mt_tensor b, int64_t lda, int64_t ldb, bool vec_out, int64_t row_tile_start, int64_t batch_start)
{
    constexpr int BM = C::BM, BN = C::BN, BK = C::BK, TM = C::TM, TN = C::TN;
    constexpr int kThreads = C::kThreads;
    constexpr int W = Pack<T>::kWidth;
    /* A is stored transposed, a_tile[k][m]: a thread's 8 values of one k are
     * then 8 consecutive elements, read as whole Packs. */
    __shared__ __align__(16) T a_tile[C::BK][C::BM];
    __shared__ __align__(16) T b_tile[C::BK][C::BN];
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
        /* A: BM rows of BK / W Packs each, stored transposed. */
        for (int p = tid; p < BM * BK / W; p += kThreads) {
            const int r = p / (BK / W), c = (p % (BK / W)) * W;
            const Pack<T> x = load_pack(A.data, row0 + r, M, k0 + c, K, lda);
            MT_UNROLL for (int w = 0; w < W; ++w)
                a_tile[c + w][r] = x.v[w];
        }
        /* B: BK rows of BN / W Packs each, stored as they are. */
        for (int p = tid; p < BK * BN / W; p += kThreads) {
            const int r = p / (BN / W), c = (p % (BN / W)) * W;
            *reinterpret_cast<Pack<T> *>(&b_tile[r][c]) = load_pack(B.data, k0 + r, K, col0 + c, N, ldb);
        }
        __syncthreads();
        MT_UNROLL for (int k = 0; k < BK; ++k) {
            MT_UNROLL for (int i = 0; i < TM; i += W) {
                const Pack<T> x = *reinterpret_cast<const Pack<T> *>(&a_tile[k][thread_row * TM + i]);
                MT_UNROLL for (int w = 0; w < W; ++w)
                    a_reg[i + w] = x.v[w];
            }
            MT_UNROLL for (int j = 0; j < TN; j += W) {
                const Pack<T> x = *reinterpret_cast<const Pack<T> *>(&b_tile[k][thread_col * TN + j]);
                MT_UNROLL for (int w = 0; w < W; ++w)
                    b_reg[j + w] = x.v[w];
            }
            MT_UNROLL for (int i = 0; i < TM; ++i)
                MT_UNROLL for (int j = 0; j < TN; ++j)
                    acc[i][j] += a_reg[i] * b_reg[j];
        }
        __syncthreads();
    }

    const MatrixView<T> Out = matrix_view<T>(out, start.out);
    MT_UNROLL for (int i = 0; i < TM; ++i)
        store_row<T, TN>(Out, acc[i], row0 + thread_row * TM + i, col0 + thread_col * TN, vec_out);
}

template <typename T>
mt_status launch_vectorized(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    using C = VectorizedTiles;
    const int64_t lda = leading_dim(a, false);
    const int64_t ldb = leading_dim(b, false);
    const bool vec_out = out_vector_ok(out);
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        matmul_vectorized<T, C><<<grid, C::kThreads, 0, mt_stream()>>>(out, a, b, lda, ldb, vec_out, y0, b0);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

template mt_status launch_vectorized<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_vectorized<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
