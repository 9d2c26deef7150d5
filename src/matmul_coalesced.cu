/*
 * matmul_coalesced.cu: rung 2 of the matmul ladder. The naive kernel with
 * the roles of threadIdx.x and threadIdx.y swapped: the threads of a warp
 * take 32 consecutive COLUMNS, so their B loads and out stores are
 * neighbouring addresses (one transaction per warp) and their A load is one
 * address for all 32 (a broadcast). Nothing else changed; on an H100 this
 * alone is ~7x.
 */
#include "matmul_internal.h"

/* The second bound asks for two resident blocks per SM, i.e. at most 32
 * registers a thread (65536 / 2048). Nothing is reused from registers
 * here, so occupancy is what hides the memory latency: with the 46
 * registers the compiler picks unasked, one block fits and the kernel
 * runs 2-3x slower on an H100 (coalesced, 1024^3 and 4096^3). */
template <typename T, typename C>
__global__ void __launch_bounds__(C::kThreads, 2) matmul_coalesced(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
{
    const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
    const MatrixView<const T> A = matrix_view<const T>(a, start.a);
    const MatrixView<const T> B = matrix_view<const T>(b, start.b);
    const int64_t row = (row_tile_start + blockIdx.y) * C::BM + threadIdx.y;
    const int64_t col = (int64_t)blockIdx.x * C::BN + threadIdx.x;

    if (row < A.rows && col < B.cols) {
        T acc = T(0);
        for (int64_t k = 0; k < A.cols; ++k)
            acc += A.at(row, k) * B.at(k, col);
        const MatrixView<T> Out = matrix_view<T>(out, start.out);
        Out.at(row, col) = acc;
    }
}

template <typename T>
mt_status launch_coalesced(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    using C = SimpleTiles;
    const dim3 block(C::BN, C::BM);
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        matmul_coalesced<T, C><<<grid, block, 0, mt_stream()>>>(out, a, b, y0, b0);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

template mt_status launch_coalesced<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_coalesced<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
