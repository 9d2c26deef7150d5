/*
 * matmul_tf32_tma.cu: the fifth TF32 rung, the wgmma rung fed by TMA with a
 * producer warpgroup (warp specialisation), on a persistent grid.
 *
 * The wgmma rung (matmul_tf32_wgmma.cu) reaches about half of cuBLAS's TF32
 * on the H100. Nsight Compute says why: its 256 threads issue the stage
 * copies themselves (24 cp.async a thread a stage, each with its address and
 * edge test) and meet at a block barrier every K step, so 40 % of the issue
 * slots go to copying and the tensor cores idle at each barrier. cuBLAS's
 * kernel keeps 90 % of the SM busy with 13 % of the issue slots. This rung
 * does what cuBLAS's does:
 *
 *   1. TMA copies (src/tma.h): one instruction a box, issued by one thread,
 *      written by the copy engine in the 128-byte swizzle wgmma reads, zeros
 *      past the matrix's edges. The stages' copies cost no issue slots of
 *      the warps that multiply.
 *   2. Warp specialisation: a block is three warpgroups. Warpgroup 0, the
 *      producer, has one thread that issues the copies; warpgroups 1 and 2,
 *      the consumers, multiply (rows 0-63 and 64-127 of the 128 x BN tile).
 *      The producer gives up registers (setmaxnreg) so that the consumers
 *      can hold 128 accumulators a thread.
 *   3. No block barrier in the main loop: two mbarriers a stage. `full[s]`
 *      completes when stage s's bytes landed (the producer arrives and
 *      names the bytes; the copies count them off); `empty[s]` completes
 *      when every consumer thread is done with stage s (its wgmmas waited
 *      for). The producer waits on empty, the consumers on full.
 *   4. A persistent grid: one block an SM walks the output tiles, so the
 *      producer loads the next tile's first stages while the consumers
 *      store the last one's accumulators.
 *
 * The stage and phase of K step `step` (counted over all the tiles a block
 * walks): stage step % S, and the barrier's phase parity (step / S) % 2.
 * The producer waits for parity ((step / S) % 2) ^ 1 on empty[s]: on its
 * first pass that is the phase "before" a fresh barrier's, which counts as
 * complete, so the empty stages are filled at once.
 *
 * Like the wgmma rung it takes a row-major and b column-major (K-major, as
 * TF32 wgmma reads both; with_k_major_operands copies other layouts), and
 * truncates the operands to TF32. TMA needs 16-byte aligned operands with
 * rows a multiple of 16 bytes apart (tma_map_ok); the caller copies others.
 * A batched product is one launch: the maps are 3-D (matrices of an
 * operand one stride apart, or one matrix that every batch reads), and a
 * block's tiles run over every batch's.
 */
#include <algorithm>
#include <type_traits>

#include "indexing.h"
#include "matmul_epilogue.h"
#include "matmul_internal.h"
#include "tma.h"
#include "wgmma_tf32.h"

template <int BN_, int kStages_>
struct Tf32TmaTiles {
    static constexpr int BM = 128;
    static constexpr int BN = BN_;
    static constexpr int BK = 32;           /* 128 bytes: the swizzle's row, a TMA box's width */
    static constexpr int kStages = kStages_;
    static constexpr int kConsumers = 2;    /* warpgroups that multiply, 64 rows each */
    static constexpr int kThreads = 128 * (1 + kConsumers);
    static constexpr int kAcc = BN / 2;     /* accumulators a consumer thread */
    static constexpr int kStageFloats = (BM + BN) * BK;
    static constexpr unsigned kStageBytes = kStageFloats * sizeof(float);
    /* the stages, two barriers a stage, and 1024 bytes to align the stages
     * to the swizzle's atom */
    static constexpr size_t kSharedBytes =
        (size_t)kStages * kStageBytes + 2 * kStages * sizeof(uint64_t) + kWgmmaAtomBytes;
    /* registers a thread (setmaxnreg): the producer's warpgroup gives up
     * what the consumers take; 128 x 40 + 256 x 232 fits the SM's 65,536 */
    static constexpr int kProducerRegisters = 40;
    static constexpr int kConsumerRegisters = 232;
    static_assert(BN == 128 || BN == 256, "the wgmma wrappers: n128 and n256");
};

/* The ordinal of x's matrix that out's batch z reads (x's batch dims
 * broadcast against out's). */
MT_DEVICE int64_t operand_batch(int64_t z, const mt_tensor &out, const mt_tensor &x)
{
    int64_t out_index[MT_MAX_DIMS], x_index[MT_MAX_DIMS];
    to_index(z, out.shape, out.ndim - 2, out_index);
    broadcast_index(out_index, out.ndim - 2, x.shape, x.ndim - 2, x_index);
    int64_t ordinal = 0;
    for (int d = 0; d < x.ndim - 2; ++d)
        ordinal = ordinal * x.shape[d] + x_index[d];
    return ordinal;
}

template <typename C, typename Epi>
__global__ void __launch_bounds__(C::kThreads, 1)
    matmul_tf32_tma(const __grid_constant__ TmaMap a_map, const __grid_constant__ TmaMap b_map, mt_tensor out,
                    mt_tensor a, mt_tensor b, Epi epi)
{
#if defined(MT_EMULATOR) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int S = C::kStages;
    extern __shared__ __align__(128) unsigned char shared_bytes[];
    float *stages = wgmma_stages(&shared_bytes[0]);
    uint64_t *full = reinterpret_cast<uint64_t *>(stages + S * C::kStageFloats);
    uint64_t *empty = full + S;

    const int64_t M = out.shape[out.ndim - 2], N = out.shape[out.ndim - 1], K = a.shape[a.ndim - 1];
    const int64_t col_tiles = (N + C::BN - 1) / C::BN;
    const int64_t batch_tiles = ((M + C::BM - 1) / C::BM) * col_tiles;
    const int64_t tiles = batch_tiles * shape_numel(out.shape, out.ndim - 2);
    const int64_t k_tiles = (K + C::BK - 1) / C::BK;
    const int tid = threadIdx.x;
    const int group = tid / 128;

    if (tid == 0) {
        for (int s = 0; s < S; ++s) {
            mbar_init(&full[s], 1);                    /* the producer's arrive (and the bytes) */
            mbar_init(&empty[s], C::kConsumers * 128); /* every consumer thread's */
        }
        mbar_fence_init();
    }
    /* the only block barrier: the barriers exist before anyone uses them */
    __syncthreads();

    if (group == 0) {
        warpgroup_registers_down<C::kProducerRegisters>();
        if (tid != 0)
            return;
        int64_t step = 0;
        for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const int64_t z = tile / batch_tiles, t = tile % batch_tiles;
            const int row0 = (int)(t / col_tiles * C::BM);
            const int col0 = (int)(t % col_tiles * C::BN);
            const int a_z = (int)operand_batch(z, out, a), b_z = (int)operand_batch(z, out, b);
            for (int64_t kt = 0; kt < k_tiles; ++kt, ++step) {
                const int s = (int)(step % S);
                mbar_wait(&empty[s], (unsigned)((step / S) & 1) ^ 1u);
                float *a_stage = stages + s * C::kStageFloats;
                /* arrive first, naming the bytes: the phase cannot complete
                 * before both boxes have landed */
                mbar_arrive_expect(&full[s], C::kStageBytes);
                tma_load(a_stage, a_map, (int)(kt * C::BK), row0, a_z, &full[s]);
                tma_load(a_stage + C::BM * C::BK, b_map, (int)(kt * C::BK), col0, b_z, &full[s]);
            }
        }
        return;
    }

    warpgroup_registers_up<C::kConsumerRegisters>();
    const int consumer = group - 1; /* rows 64 consumer .. 64 consumer + 63 of a tile */
    const int warp = (tid % 128) / 32, lane = tid % 32;
    int64_t step = 0;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int64_t z = tile / batch_tiles, t = tile % batch_tiles;
        const int64_t row0 = t / col_tiles * C::BM;
        const int64_t col0 = t % col_tiles * C::BN;
        /* where batch z's out starts, worked out before the accumulators
         * take the registers */
        int64_t out_index[MT_MAX_DIMS];
        to_index(z, out.shape, out.ndim - 2, out_index);
        const int64_t out_start = out.offset + index_to_position(out_index, out.strides, out.ndim - 2);
        float acc[C::kAcc];
        MT_UNROLL for (int i = 0; i < C::kAcc; ++i)
            acc[i] = 0.0f;
        for (int64_t kt = 0; kt < k_tiles; ++kt, ++step) {
            const int s = (int)(step % S);
            mbar_wait(&full[s], (unsigned)((step / S) & 1));
            const float *a_rows = stages + s * C::kStageFloats + consumer * 64 * C::BK;
            const float *b_rows = stages + s * C::kStageFloats + C::BM * C::BK;
            wgmma_stage<C::BN, C::BK>(acc, a_rows, b_rows);
            /* the previous step's products are done: its stage may be refilled */
            if (kt > 0)
                mbar_arrive(&empty[(step - 1) % S]);
        }
        wgmma_wait<0>();
        wgmma_fence_operand(acc);
        if (k_tiles > 0)
            mbar_arrive(&empty[(step - 1) % S]);
        const MatrixView<float> Out = matrix_view<float>(out, out_start);
        const int64_t rows0 = row0 + consumer * 64;
        wgmma_store_tile<C::BN>(acc, Out, PlainStore::Batch{}, rows0, col0, M, N, warp, lane);
        if constexpr (!std::is_same<Epi, PlainStore>::value) {
            /* the plain sums first, then the epilogue over the warp's own 16
             * rows, read back from L2 in 16-byte accesses: applied on the
             * registers, each of the 64 or 128 values a thread holds would
             * have its own copy of the activation's code and scattered
             * 4-byte stores of pre (apply_block) */
            __syncwarp();
            epi.at_batch(z).apply_block(Out, rows0 + warp * 16, 16, col0, C::BN, lane);
        }
    }
#elif defined(__CUDA_ARCH__)
    /* compiled for another GPU: tf32_wgmma_available keeps the library off */
    __trap();
#endif
}

using Tf32Tma128x256S4 = Tf32TmaTiles<256, 4>; /* 192 KiB of stages, 128 accumulators a consumer thread */
using Tf32Tma128x128S6 = Tf32TmaTiles<128, 6>; /* 192 KiB */

/* Floats between consecutive matrices of x's batch dims taken as one (its
 * ordinals, as operand_batch counts them), or -1 where they are not one
 * stride; a single matrix: rows x ld. A broadcast dim of stride 0 is not
 * one stride either (TMA's strides are positive). */
static int64_t batch_ld(const mt_tensor &x, int64_t ld)
{
    int64_t stride = -1, span = 1;
    for (int d = x.ndim - 3; d >= 0; --d) {
        if (x.shape[d] == 1)
            continue;
        if (stride < 0)
            stride = x.strides[d];
        else if (x.strides[d] != stride * span)
            return -1;
        span *= x.shape[d];
    }
    if (stride < 0)
        return x.shape[x.ndim - 2] * ld;
    return stride > 0 ? stride : -1;
}

/* x's matrices as tma_map_3d takes them: rows (the first dim of the
 * K-major matrix: a's M, b's N), ld, how many, how far apart. */
struct TmaOperand {
    const float *data;
    int64_t rows, ld, batches, batch_ld;
};

static TmaOperand tma_operand(const mt_tensor &x, bool transposed, int64_t K)
{
    TmaOperand o;
    o.data = static_cast<const float *>(x.data) + x.offset;
    o.rows = x.shape[x.ndim - (transposed ? 1 : 2)];
    o.ld = leading_dim(x, transposed);
    if (o.rows == 1) /* one row: its stride is never used, any valid one does */
        o.ld = (K + 3) / 4 * 4;
    o.batches = shape_numel(x.shape, x.ndim - 2);
    o.batch_ld = batch_ld(x, o.ld);
    return o;
}

/* Can TMA read a and b as the rung needs them: a row-major, b
 * column-major, each operand's matrices one stride apart, all of it
 * 16-byte aligned (tma_map_ok)? */
bool tf32_tma_operands_ok(const mt_tensor &a, const mt_tensor &b)
{
    if (a.strides[a.ndim - 1] != 1 || b.strides[b.ndim - 2] != 1)
        return false;
    const int64_t K = a.shape[a.ndim - 1];
    if (K == 0)
        return true; /* nothing is read: no maps */
    const TmaOperand ao = tma_operand(a, false, K), bo = tma_operand(b, true, K);
    return tma_map_ok(ao.data, ao.rows, K, ao.ld, ao.batches, ao.batch_ld) &&
           tma_map_ok(bo.data, bo.rows, K, bo.ld, bo.batches, bo.batch_ld);
}

template <typename C, typename Epi>
static mt_status launch_tf32_tma_typed(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, const Epi &epi)
{
    const char *func = "matmul_tf32_tma";
    const int64_t M = out.shape[out.ndim - 2], N = out.shape[out.ndim - 1], K = a.shape[a.ndim - 1];
    if (!tf32_tma_operands_ok(a, b))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "the TMA rung reads a row-major and b column-major, each operand's matrices one stride "
                       "apart, 16-byte aligned with rows a multiple of 16 bytes apart (with_k_major_operands "
                       "prepares them)");
    /* K = 0: no step loads, the maps stay unread (zeros out) */
    TmaMap a_map{}, b_map{};
    if (K > 0) {
        const TmaOperand ao = tma_operand(a, false, K), bo = tma_operand(b, true, K);
        MT_TRY(tma_map_3d(func, &a_map, ao.data, ao.rows, K, ao.ld, ao.batches, ao.batch_ld, C::BM));
        MT_TRY(tma_map_3d(func, &b_map, bo.data, bo.rows, K, bo.ld, bo.batches, bo.batch_ld, C::BN));
    }
    auto kernel = matmul_tf32_tma<C, Epi>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::kSharedBytes));
    /* persistent: a block an SM (192 KiB of stages each), or fewer where
     * the product has fewer tiles */
    const int64_t tiles = out_tiles(M, N, shape_numel(out.shape, out.ndim - 2), C::BM, C::BN);
    const int grid = (int)std::min<int64_t>(tiles, mt_sm_count());
    kernel<<<grid, C::kThreads, C::kSharedBytes, mt_stream()>>>(a_map, b_map, out, a, b, epi);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* tile 0: 128 x 128, 1: 128 x 256; -1: the wide tile where the product
 * has a wave of them (on a persistent grid too, fewer tiles leave SMs
 * idle). */
mt_status launch_tf32_tma(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int tile)
{
    const PlainStore plain;
    if (tile == 1 || (tile == -1 && wide_tiles_fill_gpu(out)))
        return launch_tf32_tma_typed<Tf32Tma128x256S4>(out, a, b, plain);
    return launch_tf32_tma_typed<Tf32Tma128x128S6>(out, a, b, plain);
}

mt_status launch_tf32_tma_epilogue(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b,
                                   const BiasActResidual<float> &epi)
{
    if (wide_tiles_fill_gpu(out))
        return launch_tf32_tma_typed<Tf32Tma128x256S4>(out, a, b, epi);
    return launch_tf32_tma_typed<Tf32Tma128x128S6>(out, a, b, epi);
}
