/*
 * conv_igemm_tf32.cu: the implicit-GEMM convolution (forward and both
 * gradients) on tensor cores, inputs rounded to TF32: the opt-in rung that
 * mt.backends.cuda.conv.allow_tf32 selects (minitensor/ops/conv_tf32.py).
 *
 * Two rungs meet here. The gather is the cp.async pipelined rung's
 * (src/conv_igemm_pipelined.cu): each element of a K-tile is its own 4-byte
 * cp.async from wherever the Problem (src/conv_implicit_gemm.h) says it lies,
 * zero-filled in the padding and past the edges, kStages - 1 tiles ahead.
 * The tile product is the TF32 matmul rung's (src/matmul_tf32_mma.cu): each
 * warp owns a WM x WN piece of the block tile as (WM / 16) x (WN / 8)
 * fragments of mma.sync.m16n8k8 (src/mma_tf32.h gives which lane holds which
 * element), and the float FMAs of the pipelined rung's 4 x 4 outer products
 * become one tensor-core instruction per 16 x 8 x 8 piece.
 *
 * What differs from the matmul rung, and why:
 *
 *  - the tiles are stored k-major, tile[k][m] and tile[k][n], as the gather
 *    writes them (one element per copy, so nothing is gained by the
 *    matmul's row-major 16-byte chunks). Lane (g, t) = (lane / 4, lane % 4)
 *    needs k = t and t + 4 of rows g, g + 8, g + 16, g + 24 of each 32 rows
 *    (two A fragments) and of columns g, g + 8, g + 16, g + 24 of each 32
 *    columns (four B fragments). Within each 32, row 8 q + r is stored at
 *    4 r + q (frag_pos), so that those four are adjacent: one 16-byte load
 *    instead of four scalar ones (the fragment loads were 24 of a warp's
 *    shared-memory instructions per 16 mmas, now 6). With rows of BM + 8
 *    floats (BM a multiple of 32) each quarter-warp's 8 loads cover the 32
 *    banks once: the padding does what the matmul's swizzle does, and
 *    ldmatrix (which reads rows along k) is not needed;
 *  - the operands are rounded to TF32 (cvt.rna) as the fragments are read,
 *    as in the matmul rung and as cuDNN does;
 *  - each lane stores its accumulators where the Problem's index map says
 *    (out_row + out_col), plus the row's bias: the forward writes NCHW, the
 *    weight gradient a slice of split-K partial products.
 *
 * The weight gradient splits its long K (the output pixels) over blocks as
 * the float32 rung does (weight_grad_splits), the partial products summed by
 * a second kernel in split order. With dilation 1 the input gradient runs
 * one dense product per stride phase, as the float32 rung's does
 * (src/conv_igemm_phases.h: at stride 2 the single product gathered zeros
 * for three taps in four, 0.13-0.14x cuDNN on the H100). The stepped configs
 * walk their gathers (src/conv_igemm_walk.h). float32 only: TF32 is a
 * float32 format.
 */
#include "async_copy.h"
#include "conv_igemm_tf32.h"
#include "conv_igemm_tf32_nhwc.h"
#include "conv_igemm_phases.h"
#include "conv_igemm_walk.h"
#include "conv_implicit_gemm.h"
#include "mma_tf32.h"
#include "scratch.h"

/* kStepped: the gathers of the forward, the input gradient's phase products
 * and the weight gradient walk their k (src/conv_igemm_walk.h, as the
 * float32 rung's stepped configs do). */
template <int BM_, int BN_, int BK_, int WM_, int WN_, int kStages_, int kMinBlocks_, bool kStepped_ = false>
struct Tf32ConvTiles {
    static constexpr bool kStepped = kStepped_;
    static constexpr int BM = BM_, BN = BN_, BK = BK_;
    static constexpr int WM = WM_, WN = WN_; /* a warp's piece of the block tile */
    static constexpr int kStages = kStages_;
    static constexpr int kMinBlocks = kMinBlocks_; /* blocks an SM should hold: caps the registers */
    static constexpr int kWarps = (BM / WM) * (BN / WN);
    static constexpr int kThreads = kWarps * 32;
    static constexpr int kMFrags = WM / 16; /* 16 x 8 mma fragments a warp */
    static constexpr int kNFrags = WN / 8;
    static constexpr int kPad = 8; /* rows of BM + 8 floats: conflict-free fragment loads (file comment) */
    static constexpr int kALd = BM + kPad, kBLd = BN + kPad;
    static constexpr int kStageFloats = BK * (kALd + kBLd);
    static constexpr size_t kSharedBytes = (size_t)kStages * kStageFloats * sizeof(float);
    static_assert(BM % 32 == 0 && BN % 32 == 0, "the padding spreads lanes over banks for multiples of 32");
    static_assert(WM % 32 == 0 && WN % 32 == 0 && BK % 8 == 0, "whole 32-row groups of fragments (frag_pos)");
    static_assert(kStages >= 2, "at least one K-tile in flight");
};

/* Where row (or column) m of a tile is stored in its k-row: within each 32,
 * 8 q + r goes to 4 r + q (the file comment says why). */
MT_DEVICE int frag_pos(int m)
{
    return (m & ~31) | ((m & 7) << 2) | ((m >> 3) & 3);
}

/* Block (x, y, z): columns from x * BN and rows from y * BM of group
 * z % groups's product, over the K-tiles of split z / groups. */
template <typename C, typename P>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks) conv_igemm_tf32(P prob, int k_per_split)
{
#if defined(MT_EMULATOR) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
    constexpr int BM = C::BM, BN = C::BN, BK = C::BK, S = C::kStages;
    constexpr int kThreads = C::kThreads;
    constexpr int kALoads = BM * BK / kThreads; /* elements each thread copies per K-tile */
    constexpr int kBLoads = BK * BN / kThreads;
    constexpr int kAStep = kThreads / BK; /* the row distance between one thread's A copies */
    constexpr int kBStep = P::kBAlongK ? kThreads / BK : kThreads / BN;
    static_assert(kALoads * kThreads == BM * BK && kBLoads * kThreads == BK * BN, "whole copies per thread");
    static_assert(kThreads % BK == 0 && kThreads % BN == 0, "threads cover whole rows and columns");
    extern __shared__ __align__(16) float shared_floats[]; /* S x (A: BK x kALd, then B: BK x kBLd) */
    float *stages = shared_floats;

    const int grp = (int)(blockIdx.z % prob.d.groups);
    const int split = (int)(blockIdx.z / prob.d.groups);
    const int m0 = (int)blockIdx.y * BM, n0 = (int)blockIdx.x * BN;
    const int M = prob.M(), N = prob.N();
    const int k_begin = split * k_per_split;
    const int k_end = prob.K() < k_begin + k_per_split ? prob.K() : k_begin + k_per_split;
    const int tid = threadIdx.x;

    /* Who copies what (the pipelined rung's scheme): one k of A in kALoads
     * rows; B along N: one column at kBLoads k; B along K (the weight
     * gradient): one k in kBLoads columns of a table. */
    const int a_k = tid % BK, a_m = tid / BK;
    const int b_k = P::kBAlongK ? tid % BK : tid / BN;
    const int b_n = P::kBAlongK ? tid / BK : tid % BN;
    /* Stepped: the forward walks its column's k, the weight gradient keeps
     * its columns in registers and walks its k (one pixel of A and B). */
    constexpr bool kWalk = C::kStepped && (std::is_same<P, ForwardProblem<float>>::value ||
                                           std::is_same<P, InputGradPhaseProblem<float>>::value);
    constexpr bool kWalkK = C::kStepped && std::is_same<P, WeightGradProblem<float>>::value;
    using BCol = typename std::conditional<kWalk, WalkCol<float>, typename P::Col>::type;
    BCol b_col{};
    if constexpr (kWalk)
        b_col = walk_col(prob, grp, n0 + b_n < N ? n0 + b_n : N - 1);
    else if constexpr (!P::kBAlongK)
        b_col = prob.col(grp, n0 + b_n < N ? n0 + b_n : N - 1);
    const bool b_col_ok = n0 + b_n < N;
    __shared__ typename P::Col col_table[P::kBAlongK && !kWalkK ? BN : 1];
    if constexpr (P::kBAlongK && !kWalkK) {
        for (int n = tid; n < BN; n += kThreads)
            col_table[n] = prob.col(grp, n0 + n < N ? n0 + n : N - 1);
        __syncthreads(); /* the table is complete before the first copies */
    }
    WgradWalk<kWalkK ? kBLoads : 1> walk{};
    if constexpr (kWalkK) /* b_k is a_k: the walk's k is the thread's k of A and of B */
        walk = wgrad_walk<kBLoads>(prob, grp, n0 + b_n, kBStep, k_begin + b_k);
    typename P::Row a_row[kALoads];
    MT_UNROLL for (int i = 0; i < kALoads; ++i) {
        const int m = m0 + a_m + i * kAStep;
        a_row[i] = prob.row(grp, m < M ? m : M - 1);
    }
    const float *const zero_src = prob.base(); /* a valid address for the copies of zero bytes */

    /* What element k of A's rows depends on: split from k, or the walk's. */
    auto a_key = [&](int k) {
        if constexpr (kWalkK)
            return wgrad_a_k(prob, walk.pos);
        else
            return prob.a_k(k < k_end ? k : k_begin);
    };

    /* The copies of K-tile t into stage s (no wait); t = 0, 1, ... in order
     * (the weight gradient's walk moves on by a K-tile after each). */
    auto issue_tile = [&](int t, int s) {
        float *a_stage = stages + s * C::kStageFloats;
        float *b_stage = a_stage + BK * C::kALd;
        const int k0 = k_begin + t * BK;
        {
            const int k = k0 + a_k;
            const typename P::AK ak = a_key(k);
            MT_UNROLL for (int i = 0; i < kALoads; ++i) {
                const bool ok = m0 + a_m + i * kAStep < M && k < k_end;
                async_copy<4>(a_stage + a_k * C::kALd + frag_pos(a_m + i * kAStep),
                              ok ? prob.a_at(a_row[i], ak) : zero_src, ok ? 4 : 0);
            }
        }
        if constexpr (kWalkK) {
            const bool k_ok = k0 + b_k < k_end;
            MT_UNROLL for (int i = 0; i < kBLoads; ++i) {
                const float *src = k_ok && walk.ok[i] ? wgrad_at(prob, walk.col[i], walk.pos) : nullptr;
                async_copy<4>(b_stage + b_k * C::kBLd + frag_pos(b_n + i * kBStep), src ? src : zero_src,
                              src ? 4 : 0);
            }
            wgrad_step(prob, walk.pos, BK);
        } else if constexpr (P::kBAlongK) {
            const int k = k0 + b_k;
            const typename P::BK bk = prob.b_k(k < k_end ? k : k_begin);
            MT_UNROLL for (int i = 0; i < kBLoads; ++i) {
                const int n = b_n + i * kBStep;
                const float *src = n0 + n < N && k < k_end ? prob.b_at(col_table[n], bk) : nullptr;
                async_copy<4>(b_stage + b_k * C::kBLd + frag_pos(n), src ? src : zero_src, src ? 4 : 0);
            }
        } else if constexpr (kWalk) { /* k split once, then walked by adds; the mask says what is padding */
            WalkPos pos = walk_pos(prob, k0 + b_k);
            MT_UNROLL for (int i = 0; i < kBLoads; ++i) {
                const int k = k0 + b_k + i * kBStep;
                const float *src = b_col_ok && k < k_end ? walk_at(b_col, pos) : nullptr;
                async_copy<4>(b_stage + (b_k + i * kBStep) * C::kBLd + frag_pos(b_n), src ? src : zero_src,
                              src ? 4 : 0);
                if (i + 1 < kBLoads) {
                    MT_UNROLL for (int step = 0; step < kBStep; ++step)
                        walk_step(prob, pos);
                }
            }
        } else { /* k split once, then walked by kBStep */
            KTap tap = k_tap(prob.d, k0 + b_k);
            MT_UNROLL for (int i = 0; i < kBLoads; ++i) {
                const int k = k0 + b_k + i * kBStep;
                const float *src = b_col_ok && k < k_end ? prob.b_at(b_col, tap) : nullptr;
                async_copy<4>(b_stage + (b_k + i * kBStep) * C::kBLd + frag_pos(b_n), src ? src : zero_src,
                              src ? 4 : 0);
                if (i + 1 < kBLoads)
                    k_tap_step(prob.d, tap, kBStep);
            }
        }
    };

    const int warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int warp_row = (warp / (BN / C::WN)) * C::WM;
    const int warp_col = (warp % (BN / C::WN)) * C::WN;

    float acc[C::kMFrags][C::kNFrags][4];
    MT_UNROLL for (int i = 0; i < C::kMFrags; ++i)
        MT_UNROLL for (int j = 0; j < C::kNFrags; ++j)
            MT_UNROLL for (int e = 0; e < 4; ++e)
                acc[i][j][e] = 0.0f;

    /* The pipeline of the pipelined rung: tiles 0 .. S - 2 in flight before
     * the loop, one commit group per tile slot (empty past the last tile) so
     * that every wait counts the same groups. */
    const int k_tiles = k_end > k_begin ? (k_end - k_begin + BK - 1) / BK : 0;
    MT_UNROLL for (int s = 0; s < S - 1; ++s) {
        if (s < k_tiles)
            issue_tile(s, s);
        async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
        /* Tile kt has landed (all but the newest S - 2 groups); the barrier
         * makes every thread's copies visible and says every warp is done
         * with tile kt - 1's stage, which now receives tile kt + S - 1. */
        async_wait<S - 2>();
        __syncthreads();
        const int next = kt + S - 1;
        if (next < k_tiles)
            issue_tile(next, next % S);
        async_commit();

        const float *a_stage = stages + (kt % S) * C::kStageFloats;
        const float *b_stage = a_stage + BK * C::kALd;
        MT_UNROLL for (int kk = 0; kk < BK; kk += 8) {
            /* a = A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4] of the
             * fragment; b = B[t][g], B[t + 4][g] (src/mma_tf32.h). One
             * 16-byte load gives rows g, g + 8, g + 16, g + 24 of 32 at one k:
             * fragments 2p and 2p + 1 of A, 4p .. 4p + 3 of B. */
            uint32_t a_frag[C::kMFrags][4];
            MT_UNROLL for (int p = 0; p < C::kMFrags / 2; ++p)
                MT_UNROLL for (int h = 0; h < 2; ++h) { /* k = t, then t + 4 */
                    const Pack<float> v = *reinterpret_cast<const Pack<float> *>(
                        a_stage + (kk + t + 4 * h) * C::kALd + warp_row + 32 * p + 4 * g);
                    MT_UNROLL for (int e = 0; e < 4; ++e)
                        a_frag[2 * p + e / 2][2 * h + e % 2] = tf32_bits(v.v[e]);
                }
            uint32_t b_frag[C::kNFrags][2];
            MT_UNROLL for (int p = 0; p < C::kNFrags / 4; ++p)
                MT_UNROLL for (int h = 0; h < 2; ++h) {
                    const Pack<float> v = *reinterpret_cast<const Pack<float> *>(
                        b_stage + (kk + t + 4 * h) * C::kBLd + warp_col + 32 * p + 4 * g);
                    MT_UNROLL for (int e = 0; e < 4; ++e)
                        b_frag[4 * p + e][h] = tf32_bits(v.v[e]);
                }
            MT_UNROLL for (int i = 0; i < C::kMFrags; ++i)
                MT_UNROLL for (int j = 0; j < C::kNFrags; ++j)
                    mma_tf32_16x8x8(acc[i][j], a_frag[i], b_frag[j]);
        }
    }
    async_wait<0>(); /* only empty groups remain; nothing left in flight at exit */

    /* Lane (g, t) holds D[g][2t], D[g][2t + 1], D[g + 8][2t], D[g + 8][2t + 1]
     * of each fragment: row m, column n of the product, stored where the
     * Problem's index map says. */
    MT_UNROLL for (int i = 0; i < C::kMFrags; ++i)
        MT_UNROLL for (int h = 0; h < 2; ++h) {
            const int m = m0 + warp_row + i * 16 + g + 8 * h;
            if (m >= M)
                continue;
            const int64_t row_at = prob.out_row(grp, m, split);
            const float bias = prob.row_bias(grp, m);
            MT_UNROLL for (int j = 0; j < C::kNFrags; ++j)
                MT_UNROLL for (int e = 0; e < 2; ++e) {
                    const int n = n0 + warp_col + j * 8 + 2 * t + e;
                    if (n < N)
                        prob.out[row_at + prob.out_col(grp, n)] = acc[i][j][2 * h + e] + bias;
                }
        }
#endif
}

/* out[e] = the sum over the splits s of partial[s * count + e], in split
 * order (deterministic). */
__global__ void conv_tf32_sum_splits(float *out, const float *partial, int64_t count, int splits)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += (int64_t)gridDim.x * blockDim.x) {
        float sum = 0.0f;
        for (int s = 0; s < splits; ++s)
            sum += partial[s * count + e];
        out[e] = sum;
    }
}

/* ---- the configurations ------------------------------------------------------
 * M is the output channels (forward, weight gradient) or input channels
 * (input gradient), N the pixels (or, for the weight gradient, C KH KW). */
using Tf32Conv0 = Tf32ConvTiles<128, 128, 32, 64, 32, 3, 2>; /* 104 KiB, 8 warps, 2 blocks an SM */
using Tf32Conv1 = Tf32ConvTiles<64, 128, 32, 32, 32, 3, 2>;  /* 80 KiB, 8 warps: 64 channels */
using Tf32Conv2 = Tf32ConvTiles<128, 256, 32, 64, 64, 3, 1>; /* 150 KiB, 8 warps, 128 accumulators a lane */
using Tf32Conv3 = Tf32ConvTiles<64, 64, 32, 32, 32, 4, 2>;   /* 72 KiB, 4 warps: small products */
using Tf32Conv4 = Tf32ConvTiles<64, 256, 16, 64, 32, 4, 2>;  /* 84 KiB, 8 warps: cuDNN's 256 pixels x 64 */
using Tf32Conv5 = Tf32ConvTiles<128, 128, 16, 64, 64, 4, 1>; /* 68 KiB, 4 warps, 64 x 64 a warp */
/* The H100 sweep (bench/conv_tf32.py, 27 Nov 2026) liked K-tiles of 16
 * with two 256-thread blocks an SM (8: fastest on every 128- and 256-channel
 * layer; 4 on the 64-channel one): the same tile uncapped by registers (one
 * block an SM) was 1.3-1.5x slower than under the cap, spills and all, so
 * the warps an SM holds count more than the registers. 6 and 7 add stages to
 * 8 (more gathers in flight) instead; the autotuner decides. */
using Tf32Conv6 = Tf32ConvTiles<128, 128, 16, 64, 32, 6, 2>; /* 104 KiB: two blocks fill the SM */
using Tf32Conv7 = Tf32ConvTiles<128, 128, 8, 64, 32, 8, 2>;  /* 70 KiB, K-tiles of 8 */
using Tf32Conv8 = Tf32ConvTiles<128, 128, 16, 64, 32, 4, 2>; /* 70 KiB */
/* 8 and 4 with the stepped gathers (the forward, the weight gradient). */
using Tf32Conv9 = Tf32ConvTiles<128, 128, 16, 64, 32, 4, 2, true>;
using Tf32Conv10 = Tf32ConvTiles<64, 256, 16, 64, 32, 4, 2, true>;

static const char *const kTf32ConvNames[] = {
    "tf32 128x128x32 warp 64x32, 3 stages (256 threads)", "tf32 64x128x32 warp 32x32, 3 stages (256 threads)",
    "tf32 128x256x32 warp 64x64, 3 stages (256 threads)", "tf32 64x64x32 warp 32x32, 4 stages (128 threads)",
    "tf32 64x256x16 warp 64x32, 4 stages (256 threads)",  "tf32 128x128x16 warp 64x64, 4 stages (128 threads)",
    "tf32 128x128x16 warp 64x32, 6 stages (256 threads)",
    "tf32 128x128x8 warp 64x32, 8 stages (256 threads)",
    "tf32 128x128x16 warp 64x32, 4 stages (256 threads)",
    "tf32 128x128x16 warp 64x32, 4 stages (256 threads), stepped gathers",
    "tf32 64x256x16 warp 64x32, 4 stages (256 threads), stepped gathers",
    "tf32 128x128x16 warp 64x32, 4 stages (256 threads), 16-byte NHWC gathers (forward; else as 8)",
};
static const IgemmTileSize kTf32ConvTiles[] = {
    {Tf32Conv0::BM, Tf32Conv0::BN, Tf32Conv0::BK}, {Tf32Conv1::BM, Tf32Conv1::BN, Tf32Conv1::BK},
    {Tf32Conv2::BM, Tf32Conv2::BN, Tf32Conv2::BK}, {Tf32Conv3::BM, Tf32Conv3::BN, Tf32Conv3::BK},
    {Tf32Conv4::BM, Tf32Conv4::BN, Tf32Conv4::BK}, {Tf32Conv5::BM, Tf32Conv5::BN, Tf32Conv5::BK},
    {Tf32Conv6::BM, Tf32Conv6::BN, Tf32Conv6::BK}, {Tf32Conv7::BM, Tf32Conv7::BN, Tf32Conv7::BK},
    {Tf32Conv8::BM, Tf32Conv8::BN, Tf32Conv8::BK}, {Tf32Conv9::BM, Tf32Conv9::BN, Tf32Conv9::BK},
    {Tf32Conv10::BM, Tf32Conv10::BN, Tf32Conv10::BK},
    {Tf32Conv8::BM, Tf32Conv8::BN, Tf32Conv8::BK}, /* 11: the gradients run 8's tiles */
};
/* Config 11: the forward's 16-byte gathers (src/conv_igemm_tf32_nhwc.cu)
 * where C / groups % 4 == 0; config 8 elsewhere and for the gradients. */
constexpr int kTf32NhwcConfig = 11;
constexpr int kTf32ConvConfigs = (int)(sizeof(kTf32ConvNames) / sizeof(kTf32ConvNames[0]));
static_assert(sizeof(kTf32ConvTiles) / sizeof(kTf32ConvTiles[0]) == kTf32ConvConfigs, "a size for every name");

int mt_conv2d_tf32_config_count(void)
{
    return kTf32ConvConfigs;
}

const char *mt_conv2d_tf32_config_name(int config)
{
    return config >= 0 && config < kTf32ConvConfigs ? kTf32ConvNames[config] : nullptr;
}

/* The library's choice, from the H100 sweep (every product alike): the
 * 64 x 256 tile for up to 64 rows (channels), else 128 x 128 with K-tiles
 * of 16; the small tile where those would not fill the SMs. */
static int tf32_default_config(int64_t M, int64_t N, int64_t groups)
{
    const int64_t sms = mt_sm_count();
    auto tiles = [&](int64_t bm, int64_t bn) { return (M + bm - 1) / bm * ((N + bn - 1) / bn) * groups; };
    if (M <= 64)
        return tiles(64, 256) >= sms ? 4 : 3;
    return tiles(128, 128) >= sms ? 8 : 3;
}

template <typename C, typename P>
static mt_status launch_tf32_tiles(const P &prob, int64_t M, int64_t N, int splits, int k_per_split)
{
    if ((M + C::BM - 1) / C::BM > 65535)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_conv2d_tf32",
                       "%lld rows a group need more than 65535 row tiles of %d", (long long)M, C::BM);
    const dim3 grid((unsigned int)((N + C::BN - 1) / C::BN), (unsigned int)((M + C::BM - 1) / C::BM),
                    (unsigned int)(prob.d.groups * splits));
    CUDA_CHECK(cudaFuncSetAttribute(conv_igemm_tf32<C, P>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)C::kSharedBytes));
    conv_igemm_tf32<C, P><<<grid, C::kThreads, C::kSharedBytes, mt_stream()>>>(prob, k_per_split);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* A stepped config, or the same tiles plainly where the forward's or a
 * phase product's mask cannot hold the taps (over 64). */
template <typename Stepped, typename Plain, typename P>
static mt_status launch_tf32_stepped(const P &prob, int64_t M, int64_t N, int splits, int k_per_split)
{
    if ((std::is_same<P, ForwardProblem<float>>::value || std::is_same<P, InputGradPhaseProblem<float>>::value) &&
        prob.d.taps > 64)
        return launch_tf32_tiles<Plain>(prob, M, N, splits, k_per_split);
    return launch_tf32_tiles<Stepped>(prob, M, N, splits, k_per_split);
}

template <typename P>
static mt_status launch_tf32(const P &prob, int config, int64_t M, int64_t N, int splits, int k_per_split)
{
    switch (config) {
    case 0: return launch_tf32_tiles<Tf32Conv0>(prob, M, N, splits, k_per_split);
    case 1: return launch_tf32_tiles<Tf32Conv1>(prob, M, N, splits, k_per_split);
    case 2: return launch_tf32_tiles<Tf32Conv2>(prob, M, N, splits, k_per_split);
    case 3: return launch_tf32_tiles<Tf32Conv3>(prob, M, N, splits, k_per_split);
    case 4: return launch_tf32_tiles<Tf32Conv4>(prob, M, N, splits, k_per_split);
    case 5: return launch_tf32_tiles<Tf32Conv5>(prob, M, N, splits, k_per_split);
    case 6: return launch_tf32_tiles<Tf32Conv6>(prob, M, N, splits, k_per_split);
    case 7: return launch_tf32_tiles<Tf32Conv7>(prob, M, N, splits, k_per_split);
    case 9: return launch_tf32_stepped<Tf32Conv9, Tf32Conv8>(prob, M, N, splits, k_per_split);
    case 10: return launch_tf32_stepped<Tf32Conv10, Tf32Conv4>(prob, M, N, splits, k_per_split);
    default: return launch_tf32_tiles<Tf32Conv8>(prob, M, N, splits, k_per_split);
    }
}

/* ---- the entry points: the float32 rung's checks, then float32 only -------- */

static mt_status check_tf32(const char *func, int config, const mt_tensor &first_operand)
{
    if (config < -1 || config >= kTf32ConvConfigs)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "unknown TF32 convolution config %d (valid: -1 for the library's choice, or 0..%d)", config,
                       kTf32ConvConfigs - 1);
    if (first_operand.dtype != MT_FLOAT32)
        return mt_fail(MT_ERR_DTYPE, func, "TF32 products take float32 tensors, got %s",
                       dtype_name(first_operand.dtype));
    return MT_OK;
}

mt_status mt_conv2d_tf32(mt_tensor out, mt_tensor in, mt_tensor weight, mt_tensor bias, int has_bias, int stride_h,
                         int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups, int config)
{
    const char *func = "mt_conv2d_tf32";
    const mt_tensor *inputs[] = {&in, &weight, &bias};
    const char *const names[] = {"in", "weight", "bias"};
    const int ranks[] = {4, 4, 1};
    MT_TRY(check_operands(func, &out, "out", inputs, names, ranks, has_bias ? 3 : 2));
    MT_TRY(check_tf32(func, config, in));
    ConvDims d;
    MT_TRY(conv_dims(func, in.shape, weight.shape,
                           ConvParams{stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups}, &d));
    if (has_bias && bias.shape[0] != d.c_out)
        return mt_fail(MT_ERR_SHAPE, func, "bias has %lld elements, weight %d out channels", (long long)bias.shape[0],
                       d.c_out);
    if (out.shape[0] != d.n || out.shape[1] != d.c_out || out.shape[2] != d.oh || out.shape[3] != d.ow)
        return mt_fail(MT_ERR_SHAPE, func, "out must be a contiguous (%d, %d, %d, %d) tensor", d.n, d.c_out, d.oh,
                       d.ow);
    if (tensor_numel(out) == 0)
        return MT_OK;
    const int64_t M = d.c_out_group, N = (int64_t)d.n * d.ohw, K = (int64_t)d.c_group * d.taps;
    if (config == kTf32NhwcConfig && conv_tf32_nhwc_applies(d))
        return conv_tf32_nhwc_forward(first_out<float>(out), first<float>(in), first<float>(weight),
                                      has_bias ? first<float>(bias) : nullptr, d);
    const ForwardProblem<float> prob{first<float>(in), first<float>(weight), has_bias ? first<float>(bias) : nullptr,
                                     first_out<float>(out), d};
    return launch_tf32(prob, config >= 0 ? config : tf32_default_config(M, N, d.groups), M, N, 1,
                       (int)(K > 0 ? K : 1));
}

mt_status mt_conv2d_tf32_input_grad(mt_tensor grad_in, mt_tensor grad_out, mt_tensor weight, int stride_h,
                                    int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups,
                                    int config)
{
    const char *func = "mt_conv2d_tf32_input_grad";
    const mt_tensor *inputs[] = {&grad_out, &weight};
    const char *const names[] = {"grad_out", "weight"};
    const int ranks[] = {4, 4};
    MT_TRY(check_operands(func, &grad_in, "grad_in", inputs, names, ranks, 2));
    MT_TRY(check_tf32(func, config, grad_out));
    ConvDims d;
    MT_TRY(conv_dims(func, grad_in.shape, weight.shape,
                           ConvParams{stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups}, &d));
    if (grad_out.shape[0] != d.n || grad_out.shape[1] != d.c_out || grad_out.shape[2] != d.oh ||
        grad_out.shape[3] != d.ow)
        return mt_fail(MT_ERR_SHAPE, func, "grad_out must be a contiguous (%d, %d, %d, %d) tensor (the output of "
                       "grad_in's shape convolved by weight)", d.n, d.c_out, d.oh, d.ow);
    if (tensor_numel(grad_in) == 0)
        return MT_OK;
    const int64_t M = d.c_group, N = (int64_t)d.n * d.hw, K = (int64_t)d.c_out_group * d.taps;
    if (igemm_input_grad_by_phases(d)) { /* a dense product per stride phase, no zero taps */
        auto launch = [&](const auto &prob, int64_t m, int64_t n, int64_t k) {
            return launch_tf32(prob, config >= 0 ? config : tf32_default_config(m, n, d.groups), m, n, 1,
                               (int)(k > 0 ? k : 1));
        };
        return for_each_input_grad_phase(first<float>(grad_out), first<float>(weight), first_out<float>(grad_in), d,
                                         launch);
    }
    const InputGradProblem<float> prob{first<float>(grad_out), first<float>(weight), first_out<float>(grad_in), d};
    return launch_tf32(prob, config >= 0 ? config : tf32_default_config(M, N, d.groups), M, N, 1,
                       (int)(K > 0 ? K : 1));
}

mt_status mt_conv2d_tf32_weight_grad(mt_tensor grad_weight, mt_tensor grad_out, mt_tensor in, int stride_h,
                                     int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups,
                                     int config)
{
    const char *func = "mt_conv2d_tf32_weight_grad";
    const mt_tensor *inputs[] = {&grad_out, &in};
    const char *const names[] = {"grad_out", "in"};
    const int ranks[] = {4, 4};
    MT_TRY(check_operands(func, &grad_weight, "grad_weight", inputs, names, ranks, 2));
    MT_TRY(check_tf32(func, config, grad_out));
    ConvDims d;
    MT_TRY(conv_dims(func, in.shape, grad_weight.shape,
                           ConvParams{stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups}, &d));
    if (grad_out.shape[0] != d.n || grad_out.shape[1] != d.c_out || grad_out.shape[2] != d.oh ||
        grad_out.shape[3] != d.ow)
        return mt_fail(MT_ERR_SHAPE, func, "grad_out must be a contiguous (%d, %d, %d, %d) tensor (the output of "
                       "in convolved by a weight of grad_weight's shape)", d.n, d.c_out, d.oh, d.ow);
    if (tensor_numel(grad_weight) == 0)
        return MT_OK;
    const int64_t M = d.c_out_group, N = (int64_t)d.c_group * d.taps, K = (int64_t)d.n * d.ohw;
    /* The tiles alone are few (M and N are channel counts): K split so that
     * the blocks fill the GPU, as the float32 rung does. */
    /* The weight gradient's blocks are many once K is split: the choice by M alone. */
    const int which = config >= 0 ? config : M <= 64 ? 4 : 8;
    const IgemmTileSize tile = kTf32ConvTiles[which];
    int splits = 1, k_per_split = 1;
    weight_grad_splits(d, M, N, K, tile.bm, tile.bn, tile.bk, &splits, &k_per_split);
    WeightGradProblem<float> prob{first<float>(grad_out), first<float>(in), first_out<float>(grad_weight), d};
    if (splits == 1)
        return launch_tf32(prob, which, M, N, 1, (int)(K > 0 ? K : 1));
    const int64_t count = tensor_numel(grad_weight);
    DeviceScratch partials;
    CUDA_CHECK(partials.allocate((size_t)(count * splits) * sizeof(float)));
    prob.out = partials.as<float>();
    MT_TRY(launch_tf32(prob, which, M, N, splits, k_per_split));
    conv_tf32_sum_splits<<<grid_size(count, kBlockSize), kBlockSize, 0, mt_stream()>>>(
        first_out<float>(grad_weight), partials.as<float>(), count, splits);
    CUDA_CHECK(mt_launch_status());
    CUDA_CHECK(partials.release());
    return MT_OK;
}
