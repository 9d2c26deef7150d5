/*
 * matmul_tf32_pipelined.cu: the second TF32 rung, what mt_matmul_tf32 runs.
 *
 * The first rung (matmul_tf32.cu) keeps the tensor cores waiting: every
 * 8-deep K step stages its tiles through scalar loads, a TF32 rounding and
 * shared stores between two barriers, with nothing in flight during the
 * mmas (bench/limits.md measured it at 0.06x cuBLAS's TF32). This rung
 * changes how the tiles arrive, not the mma:
 *
 *   1. cp.async (src/async_copy.h) copies the tiles of the next kStages - 1
 *      K-steps into shared memory while the warps multiply the current one:
 *      16-byte copies, no staging registers, zeros past the edges;
 *   2. a K step of 16 and 4 warps a block, each with 64 x 64 outputs (4 x 4
 *      fragments, 32 mma_syncs between barriers) in 128 x 128 blocks and 2
 *      stages, or for a product too small to fill the GPU with those, 64 x
 *      32 (4 x 2 fragments) in 128 x 64 blocks and 3 stages;
 *   3. the rounding to TF32 happens on the fragments after they are loaded
 *      (as CUDA's guide does it), not on the way into shared memory.
 *
 * The rows of the tiles are padded so that the 32 lanes of a fragment load
 * hit 32 different banks (A: 20 floats a row, B: BN + 8).
 *
 * Operands: row-major with aligned rows (gemm_operand_ok); mt_matmul_tf32
 * copies any other operand first. The epilogue goes through a 16 x 16 tile
 * per warp in shared memory, so that the edges of out are checked.
 */
#include "async_copy.h"
#include "matmul_internal.h"

#ifdef MT_EMULATOR
#include "emu/emu_wmma.h"
#else
#include <mma.h>
#endif

template <int BM_, int BN_, int WM_, int WN_, int kStages_>
struct Tf32PipelinedTiles {
    static constexpr int BM = BM_;
    static constexpr int BN = BN_;
    static constexpr int BK = 16;       /* two TF32 mma steps of 8 */
    static constexpr int kStages = kStages_; /* tiles in shared memory: kStages - 1 in flight, 1 computed on */
    static constexpr int WM = WM_;      /* a warp's tile of fragments */
    static constexpr int WN = WN_;
    static constexpr int kWarps = (BM / WM) * (BN / WN);
    static constexpr int kThreads = kWarps * 32;
    static constexpr int kFrag = 16;    /* the M and N of one fragment */
    static constexpr int kLdA = BK + 4; /* padded rows: conflict-free fragment loads */
    static constexpr int kLdB = BN + 8;
};
using Tf32Narrow = Tf32PipelinedTiles<128, 64, 64, 32, 3>; /* 4 warps of 4 x 2 fragments, 3 stages */
using Tf32Wide = Tf32PipelinedTiles<128, 128, 64, 64, 2>;  /* 4 warps of 4 x 4 fragments, 2 stages */

template <typename C>
__global__ void __launch_bounds__(C::kThreads)
    matmul_tf32_pipelined(mt_tensor out, mt_tensor a, mt_tensor b, int64_t lda, int64_t ldb, int64_t row_tile_start,
                          int64_t batch_start)
{
#if defined(MT_EMULATOR) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
    using namespace nvcuda;
    constexpr int S = C::kStages;
    constexpr int kMFrags = C::WM / C::kFrag;
    constexpr int kNFrags = C::WN / C::kFrag;
    constexpr int kAPacks = C::BM * C::BK / 4 / C::kThreads; /* 16-byte copies per thread per tile */
    constexpr int kBPacks = C::BK * C::BN / 4 / C::kThreads;
    static_assert(kAPacks * 4 * C::kThreads == C::BM * C::BK && kBPacks * 4 * C::kThreads == C::BK * C::BN,
                  "whole copies per thread");
    static_assert((S * (C::BM * C::kLdA + C::BK * C::kLdB) + C::kWarps * C::kFrag * C::kFrag) * 4 <= 48 * 1024,
                  "static shared memory limit");

    /* 128-byte aligned: wmma loads need 32-byte aligned fragments, and every
     * fragment below starts a multiple of 32 bytes into its array. */
    __shared__ __align__(128) float a_tile[S][C::BM][C::kLdA];
    __shared__ __align__(128) float b_tile[S][C::BK][C::kLdB];
    __shared__ __align__(128) float c_tile[C::kWarps][C::kFrag][C::kFrag];

    const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
    const MatrixView<const float> A = matrix_view<const float>(a, start.a);
    const MatrixView<const float> B = matrix_view<const float>(b, start.b);
    const int64_t M = A.rows, N = B.cols, K = A.cols;
    const float *a_data = A.data;
    const float *b_data = B.data;
    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int64_t row0 = (row_tile_start + blockIdx.y) * C::BM;
    const int64_t col0 = (int64_t)blockIdx.x * C::BN;
    const int warp_row = (warp / (C::BN / C::WN)) * C::WM;
    const int warp_col = (warp % (C::BN / C::WN)) * C::WN;

    /* The copies of the K-tile at k0 into stage s; consecutive threads take
     * consecutive 16 bytes of a row (coalesced). */
    auto issue_tile = [&](int64_t k0, int s) {
        MT_UNROLL for (int i = 0; i < kAPacks; ++i) {
            const int p = tid + i * C::kThreads;
            const int r = p / (C::BK / 4), c = (p % (C::BK / 4)) * 4;
            async_copy_row16(a_tile[s][r], c, a_data, row0 + r, row0 + r < M, k0 + c, K, lda);
        }
        MT_UNROLL for (int i = 0; i < kBPacks; ++i) {
            const int p = tid + i * C::kThreads;
            const int r = p / (C::BN / 4), c = (p % (C::BN / 4)) * 4;
            async_copy_row16(b_tile[s][r], c, b_data, k0 + r, k0 + r < K, col0 + c, N, ldb);
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[kMFrags][kNFrags];
    MT_UNROLL for (int i = 0; i < kMFrags; ++i)
        MT_UNROLL for (int j = 0; j < kNFrags; ++j)
            wmma::fill_fragment(acc[i][j], 0.0f);

    const int64_t k_tiles = (K + C::BK - 1) / C::BK;
    /* Prologue: tiles 0 .. S - 2 in flight, one group each (an empty group
     * past the end of K, so that the waits count the same groups). */
    for (int s = 0; s < S - 1; ++s) {
        if (s < k_tiles)
            issue_tile((int64_t)s * C::BK, s);
        async_commit();
    }
    /* The loop count is the same for every thread: all reach each barrier. */
    for (int64_t t = 0; t < k_tiles; ++t) {
        /* Tile t has landed for this thread's copies (all but the newest
         * S - 2 groups); the barrier makes every thread's copies visible, and
         * tells that every warp is done with tile t - 1's stage. */
        async_wait<S - 2>();
        __syncthreads();
        const int64_t next = t + S - 1;
        if (next < k_tiles)
            issue_tile(next * C::BK, (int)(next % S)); /* into tile t - 1's stage */
        async_commit();

        const int s = (int)(t % S);
        MT_UNROLL for (int kk = 0; kk < C::BK; kk += 8) {
            wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a_frag[kMFrags];
            wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b_frag[kNFrags];
            MT_UNROLL for (int i = 0; i < kMFrags; ++i) {
                wmma::load_matrix_sync(a_frag[i], (const float *)a_tile[s][warp_row + i * C::kFrag] + kk, C::kLdA);
                MT_UNROLL for (int e = 0; e < a_frag[i].num_elements; ++e)
                    a_frag[i].x[e] = wmma::__float_to_tf32(a_frag[i].x[e]);
            }
            MT_UNROLL for (int j = 0; j < kNFrags; ++j) {
                wmma::load_matrix_sync(b_frag[j], (const float *)b_tile[s][kk] + warp_col + j * C::kFrag, C::kLdB);
                MT_UNROLL for (int e = 0; e < b_frag[j].num_elements; ++e)
                    b_frag[j].x[e] = wmma::__float_to_tf32(b_frag[j].x[e]);
            }
            MT_UNROLL for (int i = 0; i < kMFrags; ++i)
                MT_UNROLL for (int j = 0; j < kNFrags; ++j)
                    wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
        }
    }
    /* Only empty groups can be left; nothing lands after this. */
    async_wait<0>();

    /* Each fragment goes through the warp's own 16 x 16 tile, from which its
     * lanes write the elements that lie inside out. */
    const MatrixView<float> Out = matrix_view<float>(out, start.out);
    MT_UNROLL for (int i = 0; i < kMFrags; ++i)
        MT_UNROLL for (int j = 0; j < kNFrags; ++j) {
            wmma::store_matrix_sync((float *)c_tile[warp][0], acc[i][j], C::kFrag, wmma::mem_row_major);
            __syncwarp(); /* the fragment's elements, stored by all lanes, are read by others */
            MT_UNROLL for (int e = lane; e < C::kFrag * C::kFrag; e += 32) {
                const int r = e / C::kFrag, c = e % C::kFrag;
                const int64_t row = row0 + warp_row + i * C::kFrag + r;
                const int64_t col = col0 + warp_col + j * C::kFrag + c;
                if (row < M && col < N)
                    Out.at(row, col) = c_tile[warp][r][c];
            }
            __syncwarp(); /* every lane has read the tile before the next fragment overwrites it */
        }
#endif
}

template <typename C>
static mt_status launch_tf32_tiles(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const int64_t lda = leading_dim(a, false);
    const int64_t ldb = leading_dim(b, false);
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        matmul_tf32_pipelined<C><<<grid, C::kThreads, 0, mt_stream()>>>(out, a, b, lda, ldb, y0, b0);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

/* The wide tile loads each element of A and B half as often per mma (4 x 4
 * fragments a warp instead of 4 x 2): 1.89 against 2.33 ms at 4096^3 on the
 * H100. But a small product has fewer of its tiles than the GPU has SMs
 * (1024^3: 64 tiles of 128 x 128 for 132 SMs, 0.098 against 0.066 ms), so
 * the narrow one takes those. */
mt_status launch_tf32_pipelined(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t batches = shape_numel(out.shape, out.ndim - 2);
    if (out_tiles(M, N, batches, Tf32Wide::BM, Tf32Wide::BN) >= mt_sm_count())
        return launch_tf32_tiles<Tf32Wide>(out, a, b);
    return launch_tf32_tiles<Tf32Narrow>(out, a, b);
}
