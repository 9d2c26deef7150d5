/*
 * matmul_tf32.cu: the tensor-core rung. The other rungs multiply with FFMA,
 * one multiply-add per thread and instruction; a tensor core multiplies a
 * 16 x 8 tile of A by an 8 x 16 tile of B in one warp-wide instruction
 * (wmma::mma_sync). Its inputs are TF32: float's 8-bit exponent with 10 bits
 * of mantissa instead of 23, so each input carries a relative rounding error
 * up to 2^-11; products and sums stay float. That is why the rung is opt-in
 * (mt.backends.cuda.matmul.allow_tf32, as torch's flag): results differ from
 * float32's in the fourth significant digit.
 *
 * A block of 4 warps computes a 64 x 64 tile of out; each warp a 32 x 32
 * quarter, as 2 x 2 fragments of 16 x 16. K is walked 8 at a time: the block
 * stages a 64 x 8 tile of A and an 8 x 64 tile of B in shared memory
 * (rounded to TF32 as they are stored, zero-filled past the edges), then
 * each warp loads its fragments from there and issues 4 mma_syncs. At the
 * end each warp stores its accumulators into a shared 64 x 64 tile, from
 * which the block writes out with the edges checked (a fragment has no
 * notion of "past the end of the matrix").
 *
 * Compute capability 8.0 (Ampere) or newer; the emulator runs the same code
 * through its own fragments (src/emu/emu_wmma.h).
 */
#include "matmul_internal.h"

#ifdef MT_EMULATOR
#include "emu/emu_wmma.h"
#else
#include <mma.h>
#endif

struct Tf32Tiles {
    static constexpr int BM = 64;
    static constexpr int BN = 64;
    static constexpr int BK = 8;      /* the K of one TF32 mma: 16 x 16 x 8 */
    static constexpr int kWarps = 4;  /* 2 x 2, each 32 x 32 of out */
    static constexpr int kThreads = kWarps * 32;
    static constexpr int kFrag = 16;  /* the M and N of one fragment */
};

__global__ void __launch_bounds__(Tf32Tiles::kThreads)
    matmul_tf32(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
{
#if defined(MT_EMULATOR) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
    using namespace nvcuda;
    using C = Tf32Tiles;
    /* 32-byte aligned: wmma loads and stores need it, and every fragment's
     * first element below lies a multiple of 32 bytes from the start. */
    __shared__ __align__(32) float a_tile[C::BM][C::BK];
    __shared__ __align__(32) float b_tile[C::BK][C::BN];
    __shared__ __align__(32) float c_tile[C::BM][C::BN];
    const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
    const MatrixView<const float> A = matrix_view<const float>(a, start.a);
    const MatrixView<const float> B = matrix_view<const float>(b, start.b);
    const int64_t M = A.rows, N = B.cols, K = A.cols;
    const int64_t row0 = (row_tile_start + blockIdx.y) * C::BM;
    const int64_t col0 = (int64_t)blockIdx.x * C::BN;
    const int warp = threadIdx.x / 32;
    const int warp_row = (warp / 2) * 32; /* this warp's quarter of the tile */
    const int warp_col = (warp % 2) * 32;

    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2][2];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
            wmma::fill_fragment(acc[i][j], 0.0f);

    for (int64_t k0 = 0; k0 < K; k0 += C::BK) {
        /* 512 elements of each tile, 4 per thread. Past an edge the thread
         * stores 0, which adds nothing: the mma can always take whole tiles. */
        for (int e = threadIdx.x; e < C::BM * C::BK; e += C::kThreads) {
            const int r = e / C::BK, c = e % C::BK;
            const float v = (row0 + r < M && k0 + c < K) ? A.at(row0 + r, k0 + c) : 0.0f;
            a_tile[r][c] = wmma::__float_to_tf32(v);
        }
        for (int e = threadIdx.x; e < C::BK * C::BN; e += C::kThreads) {
            const int r = e / C::BN, c = e % C::BN;
            const float v = (k0 + r < K && col0 + c < N) ? B.at(k0 + r, col0 + c) : 0.0f;
            b_tile[r][c] = wmma::__float_to_tf32(v);
        }
        /* Every warp reads tiles the whole block stored. */
        __syncthreads();
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a_frag[2];
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b_frag[2];
        for (int i = 0; i < 2; ++i)
            wmma::load_matrix_sync(a_frag[i], (const float *)a_tile[warp_row + i * C::kFrag], C::BK);
        for (int j = 0; j < 2; ++j)
            wmma::load_matrix_sync(b_frag[j], (const float *)b_tile[0] + warp_col + j * C::kFrag, C::BN);
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j)
                wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
        /* The next step overwrites the tiles: every warp must have loaded. */
        __syncthreads();
    }

    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync((float *)c_tile[warp_row + i * C::kFrag] + warp_col + j * C::kFrag, acc[i][j],
                                    C::BN, wmma::mem_row_major);
    /* Threads write out what other warps stored. */
    __syncthreads();
    const MatrixView<float> Out = matrix_view<float>(out, start.out);
    for (int e = threadIdx.x; e < C::BM * C::BN; e += C::kThreads) {
        const int r = e / C::BN, c = e % C::BN;
        if (row0 + r < M && col0 + c < N)
            Out.at(row0 + r, col0 + c) = c_tile[r][c];
    }
#endif
}

mt_status launch_tf32(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    using C = Tf32Tiles;
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        matmul_tf32<<<grid, C::kThreads, 0, mt_stream()>>>(out, a, b, y0, b0);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}
