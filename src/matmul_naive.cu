/*
 * matmul_naive.cu: rung 1 of the matmul ladder (src/matmul.cu has the whole
 * ladder). One thread per output; the threads of a warp take 32 consecutive
 * ROWS of out. Each warp load of A then touches 32 rows (32 separate memory
 * transactions), and every store too: uncoalesced. Rung 2 (coalesced) fixes
 * that by swapping the roles of threadIdx.x and threadIdx.y.
 */
#include "matmul_internal.h"

/* threadIdx.x walks ROWS: the 32 threads of a warp (same threadIdx.y, x =
 * 0..31) read A(row .. row + 31, k), 32 elements a whole row apart, and
 * write a column of out: every access of the warp is its own transaction.
 * The grid is transposed too: x walks row tiles, y column tiles. */
/* The second bound asks for two resident blocks per SM, i.e. at most 32
 * registers a thread (65536 / 2048). Nothing is reused from registers
 * here, so occupancy is what hides the memory latency: with the 46
 * registers the compiler picks unasked, one block fits and the kernel
 * runs 2-3x slower on an H100 (coalesced, 1024^3 and 4096^3). */
template <typename T, typename C>
__global__ void __launch_bounds__(C::kThreads, 2) matmul_naive(mt_tensor out, mt_tensor a, mt_tensor b, int64_t col_tile_start, int64_t batch_start)
{
    const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
    const MatrixView<const T> A = matrix_view<const T>(a, start.a);
    const MatrixView<const T> B = matrix_view<const T>(b, start.b);
    const int64_t row = (int64_t)blockIdx.x * C::BM + threadIdx.x;
    const int64_t col = (col_tile_start + blockIdx.y) * C::BN + threadIdx.y;

    /* The grid is rounded up to whole tiles, so the last blocks have threads
     * past the edge of the matrix; they must not write. */
    if (row < A.rows && col < B.cols) {
        T acc = T(0);
        for (int64_t k = 0; k < A.cols; ++k)
            acc += A.at(row, k) * B.at(k, col);
        const MatrixView<T> Out = matrix_view<T>(out, start.out);
        Out.at(row, col) = acc;
    }
}

template <typename T>
mt_status launch_naive(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    using C = SimpleTiles;
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t batches = shape_numel(out.shape, out.ndim - 2);
    const dim3 block(C::BM, C::BN);
    return for_each_grid_chunk((M + C::BM - 1) / C::BM, (N + C::BN - 1) / C::BN, batches,
                               [&](dim3 grid, int64_t y0, int64_t b0) {
                                   matmul_naive<T, C><<<grid, block, 0, mt_stream()>>>(out, a, b, y0, b0);
                                   CUDA_CHECK(mt_launch_status());
                                   return MT_OK;
                               });
}

template mt_status launch_naive<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_naive<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
