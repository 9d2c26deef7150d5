/*
 * matmul_tf32_wgmma.cu: the fourth TF32 rung, Hopper's own tensor-core
 * instruction: wgmma.mma_async (src/wgmma_tf32.h), one 64 x N x 8 product a
 * warpgroup (4 warps), read by the tensor cores straight from shared memory.
 *
 * The mma.sync rung (matmul_tf32_mma.cu) reaches 0.28x cuBLAS's TF32 on the
 * H100: each warp loads every fragment into registers (ldmatrix, 32-bit
 * loads) and issues 16 x 8 x 8 products, so its issue slots, not the tensor
 * cores, set the pace (ncu: 246 registers, 49% issue rate). wgmma takes that
 * work off the warps: one instruction multiplies a 64 x 8 tile of A by an
 * 8 x BN tile of B, both named by shared-memory descriptors, and the
 * accumulators stay in registers.
 *
 *   1. A block is two warpgroups (256 threads) and computes a 128 x BN tile
 *      of out: warpgroup h the rows 64h .. 64h + 63, BN / 2 accumulators a
 *      thread (64 for BN = 128, 128 for BN = 256).
 *   2. K steps of 32 floats: each stage holds A's 128 rows and B's BN
 *      columns as rows of 32 floats (128 bytes) in the 128-byte swizzle the
 *      descriptor names (chunk c of row r at chunk c ^ (r % 8)), filled by
 *      cp.async, kStages stages deep; four wgmmas (K steps of 8) a stage.
 *   3. wgmma requires K-major operands for 32-bit types (no transpose), so
 *      this kernel takes A row-major and B column-major: the Linear layer's
 *      forward x W^T (W^T is a column-major view of W). Other layouts
 *      (x @ W, the backward's dY @ W and dY^T @ X) are first copied into
 *      those, a transposed operand by the tiled transpose
 *      (with_k_major_operands, src/matmul_internal.h): one read and one
 *      write of the operand, small against a product big enough for this
 *      rung (tf32_wgmma_chosen says when).
 *   4. After a stage's wgmmas are committed, the warpgroup waits for the
 *      previous stage's group only (wgmma_wait<1>): the tensor cores work
 *      on stage kt while the threads go on to the next step's copies. The
 *      copies into a stage start only after the barrier that follows every
 *      warpgroup's wait for the group that read it (two tiles back).
 *
 * TF32: the tensor cores read the operands' float bits and ignore the low
 * 13 mantissa bits (truncation, no cvt.rna as the mma.sync rung does).
 *
 * Sizes off the tile: the copies zero-fill rows and K past the edges, the
 * stores skip what lies outside out; K needs no multiple of 32.
 */
#include "async_copy.h"
#include "matmul_epilogue.h"
#include "matmul_internal.h"
#include "wgmma_tf32.h"

template <int BN_, int kStages_>
struct Tf32WgmmaTiles {
    static constexpr int BM = 128;
    static constexpr int BN = BN_;
    static constexpr int BK = 32; /* 128 bytes: the 128-byte swizzle's row */
    static constexpr int kStages = kStages_;
    static constexpr int kThreads = 256; /* two warpgroups */
    static constexpr int kAcc = BN / 2;  /* accumulators a thread */
    static constexpr int kStageFloats = (BM + BN) * BK;
    /* + 1024 bytes to align the stages to the swizzle's atom */
    static constexpr size_t kSharedBytes = (size_t)kStages * kStageFloats * sizeof(float) + kWgmmaAtomBytes;
    static_assert(BN == 128 || BN == 256, "the wgmma wrappers: n128 and n256");
};

/* a row-major (lda between rows), b column-major (ldb between columns). */
template <typename C, typename Epi>
__global__ void __launch_bounds__(C::kThreads, 1)
    matmul_tf32_wgmma(mt_tensor out, mt_tensor a, mt_tensor b, int64_t lda, int64_t ldb, int64_t row_tile_start,
                      int64_t batch_start, Epi epi)
{
#if defined(MT_EMULATOR) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int S = C::kStages;
    constexpr int kAChunks = C::BM * C::BK / 4 / C::kThreads;
    constexpr int kBChunks = C::BN * C::BK / 4 / C::kThreads;
    extern __shared__ __align__(128) unsigned char shared_bytes[];
    float *stages = wgmma_stages(&shared_bytes[0]);

    const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
    const MatrixView<const float> A = matrix_view<const float>(a, start.a);
    const MatrixView<const float> B = matrix_view<const float>(b, start.b);
    const int64_t M = A.rows, N = B.cols, K = A.cols;
    const int64_t row0 = (row_tile_start + blockIdx.y) * C::BM;
    const int64_t col0 = (int64_t)blockIdx.x * C::BN;

    const int tid = threadIdx.x;
    const int group = tid / 128;           /* warpgroup */
    const int warp = (tid % 128) / 32;     /* warp in the warpgroup */
    const int lane = tid % 32;

    /* Row r of a stage's A tile: A[row0 + r, k0 ..]; row r of its B tile:
     * B[k0 .., col0 + r] (a column of B, contiguous in memory). */
    auto issue_tile = [&](int64_t k0, int s) {
        float *a_stage = stages + s * C::kStageFloats;
        float *b_stage = a_stage + C::BM * C::BK;
        MT_UNROLL for (int i = 0; i < kAChunks; ++i) {
            const int p = tid + i * C::kThreads;
            const int r = p / 8, c = (p % 8) * 4;
            async_copy_row16(a_stage + swizzle128(r, c) - c, c, A.data, row0 + r, row0 + r < M, k0 + c, K, lda);
        }
        MT_UNROLL for (int i = 0; i < kBChunks; ++i) {
            const int p = tid + i * C::kThreads;
            const int r = p / 8, c = (p % 8) * 4;
            async_copy_row16(b_stage + swizzle128(r, c) - c, c, B.data, col0 + r, col0 + r < N, k0 + c, K, ldb);
        }
    };

    float acc[C::kAcc];
    MT_UNROLL for (int i = 0; i < C::kAcc; ++i)
        acc[i] = 0.0f;

    /* Copies run S - 2 tiles ahead, into the stage of tile kt - 2: its
     * wgmmas are done in every warpgroup once all have passed the barrier of
     * step kt, which each reaches only after its wgmma_wait<1> of step
     * kt - 1. (Issued before that barrier, the copies could overwrite a
     * stage the other warpgroup's wgmmas still read.) */
    static_assert(S >= 3, "a stage being read, one in flight, one being filled");
    const int64_t k_tiles = (K + C::BK - 1) / C::BK;
    for (int s = 0; s < S - 2; ++s) {
        if (s < k_tiles)
            issue_tile((int64_t)s * C::BK, s);
        async_commit();
    }
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
        /* tile kt landed for this thread (all but the newest S - 3 groups),
         * made visible to wgmma (another proxy); the barrier: for every
         * thread, and tile kt - 2's stage is free */
        async_wait<S - 3>();
        wgmma_fence_shared_writes();
        __syncthreads();
        const int64_t next = kt + S - 2;
        if (next < k_tiles)
            issue_tile(next * C::BK, (int)(next % S));
        async_commit();

        const float *a_stage = stages + (int)(kt % S) * C::kStageFloats;
        const float *a_rows = a_stage + group * 64 * C::BK;
        const float *b_rows = a_stage + C::BM * C::BK;
        wgmma_stage<C::BN, C::BK>(acc, a_rows, b_rows);
    }
    wgmma_wait<0>();
    wgmma_fence_operand(acc);
    async_wait<0>();

    const MatrixView<float> Out = matrix_view<float>(out, start.out);
    wgmma_store_tile<C::BN>(acc, Out, epi.at_batch(batch_start + blockIdx.z), row0 + group * 64, col0, M, N, warp,
                            lane);
#elif defined(__CUDA_ARCH__)
    /* compiled for another GPU: tf32_wgmma_available keeps the library off */
    __trap();
#endif
}

using Tf32Wgmma128x128S4 = Tf32WgmmaTiles<128, 4>; /* 128 KiB */
using Tf32Wgmma128x256S4 = Tf32WgmmaTiles<256, 4>; /* 192 KiB, 128 accumulators a thread */
using Tf32Wgmma128x128S6 = Tf32WgmmaTiles<128, 6>; /* 192 KiB */

static const char *const kWgmmaTileNames[] = {
    "wgmma 128x128x32, 4 stages",
    "wgmma 128x256x32, 4 stages",
    "wgmma 128x128x32, 6 stages",
};
constexpr int kWgmmaTileCount = (int)(sizeof kWgmmaTileNames / sizeof kWgmmaTileNames[0]);

int tf32_wgmma_tile_count(void) { return kWgmmaTileCount; }
const char *tf32_wgmma_tile_name(int tile)
{
    return tile >= 0 && tile < kWgmmaTileCount ? kWgmmaTileNames[tile] : nullptr;
}

/* How many elements with_k_major_operands copies to make x K-major (x is
 * a, or b's transpose): none where x is row-major with aligned rows, else
 * x's matrices, a broadcast batch dim once. */
static int64_t k_major_copy_elements(const mt_tensor &x)
{
    if (gemm_operand_ok(x, false))
        return 0;
    int64_t n = x.shape[x.ndim - 2] * x.shape[x.ndim - 1];
    for (int d = 0; d < x.ndim - 2; ++d)
        n *= x.strides[d] == 0 ? 1 : x.shape[d];
    return n;
}

/* Does this device run the kernel? Its machine code exists for sm_90a only
 * (the Makefile compiles this file for compute_90a, defining
 * MT_WGMMA_SM90A, where 90 is among CUDA_ARCHS), and sm_90a code runs on a
 * compute capability 9.0 GPU only. Elsewhere the kernel would be another
 * arch's, whose body traps. */
bool tf32_wgmma_available(void)
{
#if defined(MT_EMULATOR)
    return true;
#elif defined(MT_WGMMA_SM90A)
    mt_device_caps caps;
    /* A failed query means "not available": the caller takes another rung. */
    return mt_get_device_caps(&caps) == MT_OK && caps.major == 9 && caps.minor == 0;
#else
    return false;
#endif
}

/* mt_matmul_tf32's choice (and mt_matmul_tf32_epilogue's), on the caller's
 * operands: this rung where it runs and the product has a 128 x 128 tile
 * for every SM, else the mma.sync rung, whose small tile and split-K fill
 * the GPU with fewer tiles (a weight gradient's few output tiles over a long
 * K). Any layout: an operand that is not K-major is copied into a K-major
 * buffer first (with_k_major_operands), where the mma.sync rung would read
 * it in place. The copy moves 8 bytes (a read and a write) an element of the
 * operand, at most about 3 TB/s; a product of M x N x K, 2 MNK flops, saves
 * about 4e-15 s a flop on wgmma (H100, 4096^3: 0.66 ms against 1.2 ms on
 * mma.sync). Copying a (M x K) is thus worth it where N is above ~300, b
 * (K x N) where M is: the rule asks N (M) >= kWgmmaCopyRatio, a margin for
 * the copy's launch and the smaller products' slower wgmma. Measured
 * (H200, 2026-11-28 checkpoint, bench/tf32_gpt_shapes.py): the transposing
 * copy of a 4096 x 4096 operand takes 0.052 ms (2.6 TB/s); at 4096^3, a @ b
 * takes 0.696 ms this way against 1.241 on mma.sync (x @ W.T, no copy:
 * 0.660), a.T @ b 0.753 against 1.395. The GPT's backward dX = dY @ W
 * copies W (at most 1536 x 384, 4.7 MB moved, ~2 us) against products of
 * 0.07-0.19 ms (M = 16384 tokens), which now run at 0.45-0.68x cuBLAS
 * (the backward's products were 0.25-0.51x on mma.sync, dz @ W and
 * dz.T @ x together; the latter stay there: too few tiles). */
constexpr int64_t kWgmmaCopyRatio = 512;

bool tf32_wgmma_chosen(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t K = a.shape[a.ndim - 1];
    const int64_t batches = shape_numel(out.shape, out.ndim - 2);
    if (out_tiles(M, N, batches, 128, 128) < mt_sm_count() || !tf32_wgmma_available())
        return false;
    /* copied * ratio <= the product's M N K (all batches), in double: the
     * products of large sizes pass int64 */
    const double copied = (double)k_major_copy_elements(a) + (double)k_major_copy_elements(swap_last_dims(b));
    return copied * (double)kWgmmaCopyRatio <= (double)M * (double)N * (double)K * (double)batches;
}

template <typename C, typename Epi>
static mt_status launch_tf32_wgmma_typed(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, const Epi &epi)
{
    const int64_t lda = leading_dim(a, false);
    const int64_t ldb = leading_dim(b, true);
    auto kernel = matmul_tf32_wgmma<C, Epi>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::kSharedBytes));
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        kernel<<<grid, C::kThreads, C::kSharedBytes, mt_stream()>>>(out, a, b, lda, ldb, y0, b0, epi);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

/* The library's tile: the wide one where the product has enough of them to
 * fill the GPU (H100, 4096^3, 2026-11-28: 128 x 256 0.659 ms, 208 TFLOP/s;
 * 128 x 128 with 6 stages 0.744 ms, with 4 stages 0.810; cuBLAS 0.339 ms). */
template <typename Epi>
static mt_status launch_tf32_wgmma_chosen(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b,
                                          const Epi &epi)
{
    if (wide_tiles_fill_gpu(out))
        return launch_tf32_wgmma_typed<Tf32Wgmma128x256S4>(out, a, b, epi);
    return launch_tf32_wgmma_typed<Tf32Wgmma128x128S6>(out, a, b, epi);
}

/* tile: one of the variants above, or -1: the library's choice. a and b
 * K-major, as with_k_major_operands leaves them. */
mt_status launch_tf32_wgmma(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int tile)
{
    const PlainStore plain;
    switch (tile) {
    case -1: return launch_tf32_wgmma_chosen(out, a, b, plain);
    case 0: return launch_tf32_wgmma_typed<Tf32Wgmma128x128S4>(out, a, b, plain);
    case 1: return launch_tf32_wgmma_typed<Tf32Wgmma128x256S4>(out, a, b, plain);
    default: return launch_tf32_wgmma_typed<Tf32Wgmma128x128S6>(out, a, b, plain);
    }
}

/* With bias, activation and residual in its stores (mt_matmul_tf32_epilogue,
 * src/matmul_epilogue.cu) the rung takes the 128 x 128 tile, 6 stages: on
 * the GPT step's 24 fused forwards (M 16384, N 384-1536, K 384-1536; lone
 * H100, 2026-11-28, bench/gpt_step.py) it took 5.77 ms against 9.08 for the
 * 128 x 256 tile, whose wide N tile is a quarter empty at N 384 and whose
 * 12-step K loops are mostly pipeline fill, and 6.80 for the mma.sync rung. */
mt_status launch_tf32_wgmma_epilogue(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b,
                                     const BiasActResidual<float> &epi)
{
    return launch_tf32_wgmma_typed<Tf32Wgmma128x128S6>(out, a, b, epi);
}
