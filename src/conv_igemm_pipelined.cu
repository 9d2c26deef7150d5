/*
 * conv_igemm_pipelined.cu: the implicit-GEMM convolution (forward and both
 * gradients, src/conv_implicit_gemm.cu) with its operands staged by
 * cp.async through several shared-memory stages, on larger tiles.
 *
 * What the profile said (Nsight Compute, H100, 3 x 3, 64 channels, 32 x 32,
 * batch 256): the warptile kernel (two stages, the next K-tile's gather
 * held in registers) ran its 64 x 64 tile at 25% occupancy and 73% of the
 * SMs' issue rate; cuDNN's kernel for the same layer runs a 256 x 64 tile
 * with K-tiles of 8 and three stages. Two ideas, both here:
 *
 *  - cp.async (src/async_copy.h): a copy from global to shared memory that
 *    does not pass through registers. The gather of a K-tile is issued
 *    kStages - 1 tiles ahead and lands while the warps compute, so a slow
 *    load (a window's rows lie far apart in the NCHW input) has kStages - 1
 *    K-tiles of work to hide behind rather than one, and the staging
 *    registers are freed for a larger tile. Each element is its own 4-byte
 *    copy (8 for float64): the gathered elements of a K-tile are not
 *    contiguous in memory, and the stores into the tiles are transposing
 *    (tile[k][m]). A tap in the padding, a k past K or a row or column past
 *    the edge is a copy of zero bytes with zero-fill: the tile gets the 0 the
 *    product needs, with no branch around the copy.
 *  - larger tiles, 8 warps: more FMAs per element brought into shared
 *    memory (a 64 x 256 tile does 51 per element, a 64 x 64 one 32).
 *
 * The Problems (src/conv_implicit_gemm.h) are the warptile kernel's, asked
 * for addresses (a_at, b_at) instead of values.
 *
 * The main loop is this file's own, not src/warptile_loop.h's: that one
 * keeps two stages filled from registers (load_tile then store_tile), which
 * cannot carry kStages copies in flight. The per-step product (fragments
 * from shared memory, then the 4 x 4 outer products) is warptile's.
 */
#include "async_copy.h"
#include "conv_implicit_gemm.h"
#include "conv_igemm_phases.h"
#include "conv_igemm_walk.h"
#include "warptile_loop.h"

/* A warptile configuration with kStages shared-memory stages; kStepped: the
 * forward's gather walks its k with a running offset and a per-window mask
 * of the taps inside the image (src/conv_igemm_walk.h). */
template <int BM_, int BN_, int BK_, int WM_, int WN_, int kMinBlocks_, int kStages_, bool kStepped_ = false>
struct PipelinedConfig : WarptileConfig<BM_, BN_, BK_, WM_, WN_, kMinBlocks_> {
    static constexpr int kStages = kStages_;
    static constexpr bool kStepped = kStepped_;
};

/* Block (x, y, z): columns from x * BN, rows from y * BM of group
 * z % groups's product, over the K-tiles of split z / groups. */
template <typename T, typename C, typename P>
__global__ void __launch_bounds__(C::kThreads, (warptile_min_blocks<T, C>()))
    conv_igemm_pipelined(P prob, int k_per_split)
{
    constexpr int BM = C::BM;
    constexpr int BN = C::BN;
    constexpr int BK = kWarptileBk<T, C>;
    constexpr int S = C::kStages;
    constexpr int kThreads = C::kThreads;
    constexpr int MI = C::kMIter;
    constexpr int NI = C::kNIter;
    constexpr int W = Pack<T>::kWidth;
    constexpr int kBytes = (int)sizeof(T);
    constexpr int kALoads = BM * BK / kThreads; /* elements each thread copies per K-tile */
    constexpr int kBLoads = BK * BN / kThreads;
    constexpr int kAStep = kThreads / BK; /* the row distance between one thread's A copies */
    /* B along N: a tile wider than the block (BN > kThreads, the 64 x 64
     * warp tiles on 64 rows) gives each thread kBCols columns, kThreads
     * apart, each at every k of the K-tile. */
    constexpr int kBRow = BN < kThreads ? BN : kThreads; /* threads along one k of the tile */
    constexpr int kBCols = P::kBAlongK ? 1 : BN / kBRow;
    constexpr int kBPerCol = kBLoads / kBCols;
    constexpr int kBStep = P::kBAlongK ? kThreads / BK : kThreads / kBRow;
    static_assert(S >= 2, "at least one K-tile in flight");
    static_assert(kALoads * kThreads == BM * BK && kBLoads * kThreads == BK * BN, "whole copies per thread");
    static_assert(kThreads % BK == 0 && (kThreads % BN == 0 || BN % kThreads == 0),
                  "threads cover whole rows, and whole columns or several each");
    static_assert(S * BK * (BM + BN + 2 * kWarptilePad) * sizeof(T) <= 48 * 1024, "static shared memory limit");

    __shared__ __align__(16) T a_tile[S][BK][BM + kWarptilePad];
    __shared__ __align__(16) T b_tile[S][BK][BN + kWarptilePad];

    const int g = (int)(blockIdx.z % prob.d.groups);
    const int split = (int)(blockIdx.z / prob.d.groups);
    const int m0 = (int)blockIdx.y * BM, n0 = (int)blockIdx.x * BN;
    const int M = prob.M(), N = prob.N();
    const int k_begin = split * k_per_split;
    const int k_end = prob.K() < k_begin + k_per_split ? prob.K() : k_begin + k_per_split;
    const int tid = threadIdx.x;
    const WarpPlace at = warp_place<C>();

    /* Who copies what, as in the warptile kernel: one k of A in kALoads
     * rows; B along N: one column (worked out once, here) at kBLoads k;
     * B along K (the weight gradient): one k in kBLoads columns of a table. */
    const int a_k = tid % BK, a_m = tid / BK;
    const int b_k = P::kBAlongK ? tid % BK : tid / kBRow;
    const int b_n = P::kBAlongK ? tid / BK : tid % kBRow;
    constexpr bool kWalk = C::kStepped && (std::is_same<P, ForwardProblem<T>>::value ||
                                           std::is_same<P, InputGradPhaseProblem<T>>::value);
    using BCol = typename std::conditional<kWalk, WalkCol<T>, typename P::Col>::type;
    /* The weight gradient, stepped: its columns in registers, its k walked. */
    constexpr bool kWalkK = C::kStepped && std::is_same<P, WeightGradProblem<T>>::value;
    BCol b_col[kBCols];
    bool b_col_ok[kBCols];
    MT_UNROLL for (int c = 0; c < kBCols; ++c) {
        const int n = n0 + b_n + c * kThreads;
        if constexpr (kWalk)
            b_col[c] = walk_col(prob, g, n < N ? n : N - 1);
        else
            b_col[c] = P::kBAlongK ? typename P::Col{} : prob.col(g, n < N ? n : N - 1);
        b_col_ok[c] = n < N;
    }
    __shared__ typename P::Col col_table[BN];
    if constexpr (P::kBAlongK && !kWalkK) {
        for (int n = tid; n < BN; n += kThreads)
            col_table[n] = prob.col(g, n0 + n < N ? n0 + n : N - 1);
        __syncthreads(); /* the table is complete before the first copies */
    }
    WgradWalk<kWalkK ? kBLoads : 1> walk{};
    if constexpr (kWalkK) /* b_k is a_k: the walk's k is the thread's k of A and of B */
        walk = wgrad_walk<kBLoads>(prob, g, n0 + b_n, kBStep, k_begin + b_k);
    /* The rows of A this thread copies, worked out once. */
    typename P::Row a_row[kALoads];
    MT_UNROLL for (int i = 0; i < kALoads; ++i) {
        const int m = m0 + a_m + i * kAStep;
        a_row[i] = prob.row(g, m < M ? m : M - 1);
    }
    const T *const zero_src = prob.base(); /* a valid address for the copies of zero bytes */

    /* What element k of A's rows depends on: split from k, or the walk's. */
    auto a_key = [&](int k) {
        if constexpr (kWalkK)
            return wgrad_a_k(prob, walk.pos);
        else
            return prob.a_k(k < k_end ? k : k_begin);
    };

    /* Issue the copies of K-tile t into stage s (no wait). The tiles are
     * issued in order, t = 0, 1, ...: the weight gradient's walk moves on by
     * a K-tile after each. */
    auto issue_tile = [&](int t, int s) {
        const int k0 = k_begin + t * BK;
        {
            const int k = k0 + a_k;
            const typename P::AK ak = a_key(k);
            MT_UNROLL for (int i = 0; i < kALoads; ++i) {
                const bool ok = m0 + a_m + i * kAStep < M && k < k_end;
                async_copy<kBytes>(&a_tile[s][a_k][a_m + i * kAStep], ok ? prob.a_at(a_row[i], ak) : zero_src,
                                   ok ? kBytes : 0);
            }
        }
        if constexpr (kWalkK) { /* one k (the walk's) in the thread's kBLoads columns */
            const bool k_ok = k0 + b_k < k_end;
            MT_UNROLL for (int i = 0; i < kBLoads; ++i) {
                const T *src = k_ok && walk.ok[i] ? wgrad_at(prob, walk.col[i], walk.pos) : nullptr;
                async_copy<kBytes>(&b_tile[s][b_k][b_n + i * kBStep], src ? src : zero_src, src ? kBytes : 0);
            }
            wgrad_step(prob, walk.pos, BK);
        } else if constexpr (P::kBAlongK) {
            const int k = k0 + b_k;
            const typename P::BK bk = prob.b_k(k < k_end ? k : k_begin);
            MT_UNROLL for (int i = 0; i < kBLoads; ++i) {
                const int n = b_n + i * kBStep;
                const T *src = n0 + n < N && k < k_end ? prob.b_at(col_table[n], bk) : nullptr;
                async_copy<kBytes>(&b_tile[s][b_k][n], src ? src : zero_src, src ? kBytes : 0);
            }
        } else if constexpr (kWalk) { /* k split once, then walked by adds; the mask says what is padding */
            const WalkPos pos0 = walk_pos(prob, k0 + b_k);
            MT_UNROLL for (int c = 0; c < kBCols; ++c) {
                WalkPos pos = pos0;
                MT_UNROLL for (int i = 0; i < kBPerCol; ++i) {
                    const int k = k0 + b_k + i * kBStep;
                    const T *src = b_col_ok[c] && k < k_end ? walk_at(b_col[c], pos) : nullptr;
                    async_copy<kBytes>(&b_tile[s][b_k + i * kBStep][b_n + c * kThreads], src ? src : zero_src,
                                       src ? kBytes : 0);
                    if (i + 1 < kBPerCol) {
                        MT_UNROLL for (int step = 0; step < kBStep; ++step)
                            walk_step(prob, pos);
                    }
                }
            }
        } else { /* k split once, then walked by kBStep (k_tap_step: no division) */
            const KTap tap0 = k_tap(prob.d, k0 + b_k);
            MT_UNROLL for (int c = 0; c < kBCols; ++c) {
                KTap tap = tap0;
                MT_UNROLL for (int i = 0; i < kBPerCol; ++i) {
                    const int k = k0 + b_k + i * kBStep;
                    const T *src = b_col_ok[c] && k < k_end ? prob.b_at(b_col[c], tap) : nullptr;
                    async_copy<kBytes>(&b_tile[s][b_k + i * kBStep][b_n + c * kThreads], src ? src : zero_src,
                                       src ? kBytes : 0);
                    if (i + 1 < kBPerCol)
                        k_tap_step(prob.d, tap, kBStep);
                }
            }
        }
    };

    T acc[MI][NI][4][4];
    MT_UNROLL for (int im = 0; im < MI; ++im)
        MT_UNROLL for (int in = 0; in < NI; ++in)
            MT_UNROLL for (int i = 0; i < 4; ++i)
                MT_UNROLL for (int j = 0; j < 4; ++j)
                    acc[im][in][i][j] = T(0);

    /* The pipeline: K-tiles 0 .. S - 2 in flight before the loop; iteration t
     * waits for tile t (all but the newest S - 2 groups landed), a barrier
     * makes it visible to every warp and says every warp is done with the
     * stage tile t - 1 used, which then receives tile t + S - 1; then the
     * warps compute on tile t. Every thread commits one group per tile slot,
     * empty past the last tile, so the group count the wait relies on is the
     * same in every iteration. */
    const int k_tiles = k_end > k_begin ? (k_end - k_begin + BK - 1) / BK : 0;
    MT_UNROLL for (int t = 0; t < S - 1; ++t) {
        if (t < k_tiles)
            issue_tile(t, t);
        async_commit();
    }
    for (int t = 0; t < k_tiles; ++t) {
        async_wait<S - 2>();
        __syncthreads();
        const int next = t + S - 1;
        if (next < k_tiles)
            issue_tile(next, next % S);
        async_commit();
        const int s = t % S;
        MT_UNROLL for (int k = 0; k < BK; ++k) {
            /* warptile's step: 16-byte shared loads of a lane's 4 + 4
             * values, then their outer product. */
            T a_reg[MI][4];
            T b_reg[NI][4];
            MT_UNROLL for (int im = 0; im < MI; ++im)
                MT_UNROLL for (int v = 0; v < 4; v += W) {
                    const Pack<T> p = *shared_pack<Pack<T>>(&a_tile[s][k][at.warp_row + im * 32 + at.lane_row + v]);
                    MT_UNROLL for (int w = 0; w < W; ++w)
                        a_reg[im][v + w] = p.v[w];
                }
            MT_UNROLL for (int in = 0; in < NI; ++in)
                MT_UNROLL for (int v = 0; v < 4; v += W) {
                    const Pack<T> p = *shared_pack<Pack<T>>(&b_tile[s][k][at.warp_col + in * 16 + at.lane_col + v]);
                    MT_UNROLL for (int w = 0; w < W; ++w)
                        b_reg[in][v + w] = p.v[w];
                }
            MT_UNROLL for (int im = 0; im < MI; ++im)
                MT_UNROLL for (int in = 0; in < NI; ++in)
                    MT_UNROLL for (int i = 0; i < 4; ++i)
                        MT_UNROLL for (int j = 0; j < 4; ++j)
                            acc[im][in][i][j] += a_reg[im][i] * b_reg[in][j];
        }
    }
    async_wait<0>(); /* only empty groups remain; nothing left in flight at exit */

    igemm_store<T, C>(prob, acc, at, g, split, m0, n0);
}

/* ---- the configurations ----------------------------------------------------
 * M is the output channels (forward, weight gradient) or input channels
 * (input gradient), N the pixels (or, for the weight gradient, C KH KW).
 * 8-warp tiles take a block's whole register file (kMinBlocks 1: up to 255
 * registers a thread, no spills); 4-warp ones leave room for two blocks. */
using Pipe0 = PipelinedConfig<64, 256, 8, 64, 32, 1, 4>;   /* cuDNN's shape: 256 pixels x 64 channels, K 8 */
using Pipe1 = PipelinedConfig<128, 128, 8, 64, 32, 1, 4>;  /* square, 8 warps, for >= 128 channels */
using Pipe2 = PipelinedConfig<64, 128, 16, 64, 32, 2, 3>;  /* 4 warps, K 16, 3 stages */
using Pipe3 = PipelinedConfig<128, 64, 16, 64, 32, 2, 3>;  /* taller: 128 rows, 64 columns */
using Pipe4 = PipelinedConfig<64, 128, 8, 64, 32, 2, 4>;   /* 4 warps, K 8, 4 stages */
/* Warp tiles of 64 x 64: 8 + 16 fragment values for 128 FMAs a step (64 x 32:
 * 8 + 8 for 64), and each gathered element feeds 128 or 256 rows, the
 * gather's address arithmetic spread over twice the multiply-adds. */
using Pipe5 = PipelinedConfig<128, 256, 8, 64, 64, 1, 3>;  /* 8 warps, 256 pixels x 128 channels */
using Pipe6 = PipelinedConfig<256, 128, 8, 64, 64, 1, 3>;  /* 8 warps, 256 channels (the gradients' M) */
using Pipe7 = PipelinedConfig<64, 256, 8, 64, 64, 1, 4>;   /* 4 warps on 64 channels, 2 columns a thread */
using Pipe8 = PipelinedConfig<64, 128, 8, 64, 64, 4, 4>;   /* 2 warps on 64 channels, 2 columns a thread */
/* The stepped gathers (src/conv_igemm_walk.h: the forward, the input
 * gradient's phase products, the weight gradient) on tiles of the ones above. */
using Pipe9 = PipelinedConfig<64, 256, 8, 64, 32, 1, 4, true>;   /* Pipe0, stepped */
using Pipe10 = PipelinedConfig<64, 256, 8, 64, 64, 1, 4, true>;  /* Pipe7, stepped */
using Pipe11 = PipelinedConfig<128, 256, 8, 64, 64, 1, 3, true>; /* Pipe5, stepped */
using Pipe12 = PipelinedConfig<128, 128, 8, 64, 32, 1, 4, true>; /* Pipe1, stepped */

static const char *const kPipeNames[] = {
    "64x256x8 warp 64x32, cp.async 4 stages (256 threads)",
    "128x128x8 warp 64x32, cp.async 4 stages (256 threads)",
    "64x128x16 warp 64x32, cp.async 3 stages (128 threads)",
    "128x64x16 warp 64x32, cp.async 3 stages (128 threads)",
    "64x128x8 warp 64x32, cp.async 4 stages (128 threads)",
    "128x256x8 warp 64x64, cp.async 3 stages (256 threads)",
    "256x128x8 warp 64x64, cp.async 3 stages (256 threads)",
    "64x256x8 warp 64x64, cp.async 4 stages (128 threads)",
    "64x128x8 warp 64x64, cp.async 4 stages (64 threads)",
    "64x256x8 warp 64x32, cp.async 4 stages (256 threads), stepped gathers",
    "64x256x8 warp 64x64, cp.async 4 stages (128 threads), stepped gathers",
    "128x256x8 warp 64x64, cp.async 3 stages (256 threads), stepped gathers",
    "128x128x8 warp 64x32, cp.async 4 stages (256 threads), stepped gathers",
};
static const IgemmTileSize kPipeTiles[] = {
    {Pipe0::BM, Pipe0::BN, Pipe0::BK}, {Pipe1::BM, Pipe1::BN, Pipe1::BK}, {Pipe2::BM, Pipe2::BN, Pipe2::BK},
    {Pipe3::BM, Pipe3::BN, Pipe3::BK}, {Pipe4::BM, Pipe4::BN, Pipe4::BK}, {Pipe5::BM, Pipe5::BN, Pipe5::BK},
    {Pipe6::BM, Pipe6::BN, Pipe6::BK}, {Pipe7::BM, Pipe7::BN, Pipe7::BK}, {Pipe8::BM, Pipe8::BN, Pipe8::BK},
    {Pipe9::BM, Pipe9::BN, Pipe9::BK}, {Pipe10::BM, Pipe10::BN, Pipe10::BK}, {Pipe11::BM, Pipe11::BN, Pipe11::BK},
    {Pipe12::BM, Pipe12::BN, Pipe12::BK},
};
constexpr int kPipeConfigs = (int)(sizeof(kPipeNames) / sizeof(kPipeNames[0]));
static_assert(sizeof(kPipeTiles) / sizeof(kPipeTiles[0]) == kPipeConfigs, "a size for every name");

/* ---- split-K configs -------------------------------------------------------
 * At 128-256 channels on 8-28 pixels a side a product has few output tiles:
 * 256 channels of 14 x 14 at batch 32 are 2 x 25 tiles of 128 x 256, 2 x 49
 * of 128 x 128, for 132 SMs that each hold one such block. Cutting K (the
 * channels and taps) into pieces multiplies the blocks; each piece writes
 * its partial product to its own slice of a scratch buffer, which a second
 * kernel adds in split order (src/conv_implicit_gemm.cu). Which count fills
 * the SMs in whole waves depends on the shape (2 x 49 x 4 = 392 blocks: 2.97
 * waves of 132; 2 x 25 x 8 = 400: 3.03, a fourth wave of 4 blocks), so these
 * are configs the autotuner times beside the others:
 * config kPipeConfigs + i runs kSplits[i].which's tile in kSplits[i].splits
 * pieces. */
struct PipeSplit {
    int which, splits;
};
static const PipeSplit kSplits[] = {{12, 2}, {12, 4}, {12, 8}, {11, 4}, {11, 5}, {6, 8}, {3, 2}};
static const char *const kSplitNames[] = {
    "128x128x8 warp 64x32, cp.async 4 stages (256 threads), stepped gathers, K in 2 splits",
    "128x128x8 warp 64x32, cp.async 4 stages (256 threads), stepped gathers, K in 4 splits",
    "128x128x8 warp 64x32, cp.async 4 stages (256 threads), stepped gathers, K in 8 splits",
    "128x256x8 warp 64x64, cp.async 3 stages (256 threads), stepped gathers, K in 4 splits",
    "128x256x8 warp 64x64, cp.async 3 stages (256 threads), stepped gathers, K in 5 splits",
    "256x128x8 warp 64x64, cp.async 3 stages (256 threads), K in 8 splits",
    "128x64x16 warp 64x32, cp.async 3 stages (128 threads), K in 2 splits",
};
constexpr int kSplitConfigs = (int)(sizeof(kSplits) / sizeof(kSplits[0]));
static_assert(sizeof(kSplitNames) / sizeof(kSplitNames[0]) == kSplitConfigs, "a name for every split config");

int igemm_pipelined_count()
{
    return kPipeConfigs + kSplitConfigs;
}

const char *igemm_pipelined_name(int which)
{
    if (which >= kPipeConfigs && which < kPipeConfigs + kSplitConfigs)
        return kSplitNames[which - kPipeConfigs];
    return which >= 0 && which < kPipeConfigs ? kPipeNames[which] : nullptr;
}

IgemmTileSize igemm_pipelined_tile(int which)
{
    if (which >= kPipeConfigs && which < kPipeConfigs + kSplitConfigs)
        which = kSplits[which - kPipeConfigs].which;
    return which >= 0 && which < kPipeConfigs ? kPipeTiles[which] : IgemmTileSize{64, 64, 16};
}

int igemm_pipelined_splits(int which)
{
    return which >= kPipeConfigs && which < kPipeConfigs + kSplitConfigs ? kSplits[which - kPipeConfigs].splits : 1;
}

/* How many pieces to split the weight gradient's K (the output pixels) into,
 * for bm x bn tiles and K-tiles of bk: enough blocks for four per SM (with
 * two, the H100 profile of a 64-channel 3 x 3 layer showed 13% achieved
 * occupancy and the SMs 42% busy, each block's long K loop waiting on
 * memory with few warps to switch to), each
 * piece at least 8 K-tiles (fewer would spend more time writing partial
 * products than summing), and a multiple of the K-tile each. */
void weight_grad_splits(const ConvDims &d, int64_t M, int64_t N, int64_t K, int64_t bm, int64_t bn, int64_t bk,
                        int *splits, int *k_per_split)
{
    const int64_t tiles = ((M + bm - 1) / bm) * ((N + bn - 1) / bn) * d.groups;
    const int64_t k_tiles = (K + bk - 1) / bk;
    int64_t s = (4 * (int64_t)mt_sm_count() + tiles - 1) / tiles;
    const int64_t most = (k_tiles + 7) / 8;
    s = s < most ? s : most;
    s = s < 65535 / d.groups ? s : 65535 / d.groups;
    s = s < 1 ? 1 : s;
    const int64_t per = (k_tiles + s - 1) / s * bk;
    *k_per_split = (int)(per > 0 ? per : bk);
    *splits = (int)(K > 0 ? (K + *k_per_split - 1) / *k_per_split : 1);
}

template <typename T, typename C, typename P>
static mt_status launch_pipe(const P &prob, int64_t M, int64_t N, int splits, int k_per_split)
{
    if ((M + C::BM - 1) / C::BM > 65535)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_conv2d_igemm",
                       "%lld rows a group need more than 65535 row tiles of %d: take a config with taller tiles",
                       (long long)M, C::BM);
    const dim3 grid((unsigned int)((N + C::BN - 1) / C::BN), (unsigned int)((M + C::BM - 1) / C::BM),
                    (unsigned int)(prob.d.groups * splits));
    conv_igemm_pipelined<T, C, P><<<grid, C::kThreads, 0, mt_stream()>>>(prob, k_per_split);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* A stepped config: its own kernel for a forward or a phase product of the
 * input gradient whose taps fit the mask, and for the weight gradient (any
 * taps), else (the input gradient with dilation; over 64 taps) the same
 * tile plainly. */
template <typename T, typename Stepped, typename Plain, typename P>
static mt_status launch_pipe_stepped(const P &prob, int64_t M, int64_t N, int splits, int k_per_split)
{
    if constexpr (std::is_same<P, ForwardProblem<T>>::value || std::is_same<P, InputGradPhaseProblem<T>>::value) {
        if (prob.d.taps <= 64)
            return launch_pipe<T, Stepped>(prob, M, N, splits, k_per_split);
    }
    if constexpr (std::is_same<P, WeightGradProblem<T>>::value)
        return launch_pipe<T, Stepped>(prob, M, N, splits, k_per_split);
    return launch_pipe<T, Plain>(prob, M, N, splits, k_per_split);
}

template <typename T, typename P>
mt_status launch_igemm_pipelined(const P &prob, int which, int64_t M, int64_t N, int splits, int k_per_split)
{
    if (which >= kPipeConfigs && which < kPipeConfigs + kSplitConfigs)
        which = kSplits[which - kPipeConfigs].which; /* the caller split K */
    switch (which) {
    case 0:
        return launch_pipe<T, Pipe0>(prob, M, N, splits, k_per_split);
    case 1:
        return launch_pipe<T, Pipe1>(prob, M, N, splits, k_per_split);
    case 2:
        return launch_pipe<T, Pipe2>(prob, M, N, splits, k_per_split);
    case 3:
        return launch_pipe<T, Pipe3>(prob, M, N, splits, k_per_split);
    case 4:
        return launch_pipe<T, Pipe4>(prob, M, N, splits, k_per_split);
    case 5:
        return launch_pipe<T, Pipe5>(prob, M, N, splits, k_per_split);
    case 6:
        return launch_pipe<T, Pipe6>(prob, M, N, splits, k_per_split);
    case 7:
        return launch_pipe<T, Pipe7>(prob, M, N, splits, k_per_split);
    case 8:
        return launch_pipe<T, Pipe8>(prob, M, N, splits, k_per_split);
    case 9:
        return launch_pipe_stepped<T, Pipe9, Pipe0>(prob, M, N, splits, k_per_split);
    case 10:
        return launch_pipe_stepped<T, Pipe10, Pipe7>(prob, M, N, splits, k_per_split);
    case 11:
        return launch_pipe_stepped<T, Pipe11, Pipe5>(prob, M, N, splits, k_per_split);
    case 12:
        return launch_pipe_stepped<T, Pipe12, Pipe1>(prob, M, N, splits, k_per_split);
    default:
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_conv2d_igemm", "pipelined config %d has no kernel", which);
    }
}

/* The products conv_implicit_gemm.cu launches (the input gradient two ways). */
template mt_status launch_igemm_pipelined<float>(const ForwardProblem<float> &, int, int64_t, int64_t, int, int);
template mt_status launch_igemm_pipelined<double>(const ForwardProblem<double> &, int, int64_t, int64_t, int, int);
template mt_status launch_igemm_pipelined<float>(const InputGradProblem<float> &, int, int64_t, int64_t, int, int);
template mt_status launch_igemm_pipelined<double>(const InputGradProblem<double> &, int, int64_t, int64_t, int,
                                                  int);
template mt_status launch_igemm_pipelined<float>(const WeightGradProblem<float> &, int, int64_t, int64_t, int, int);
template mt_status launch_igemm_pipelined<double>(const WeightGradProblem<double> &, int, int64_t, int64_t, int,
                                                  int);
template mt_status launch_igemm_pipelined<float>(const InputGradPhaseProblem<float> &, int, int64_t, int64_t, int, int);
template mt_status launch_igemm_pipelined<double>(const InputGradPhaseProblem<double> &, int, int64_t, int64_t, int,
                                                  int);
