/*
 * conv_igemm_tf32_nhwc.cu: the TF32 convolution's forward with 16-byte
 * gathers, the next rung after src/conv_igemm_tf32.cu's 4-byte ones.
 *
 * The 4-byte rung copies every element of the im2col tile on its own: about
 * 20 instructions of address arithmetic and cp.async per 1,024 multiply-adds,
 * so the SMs issue the gather instead of feeding the tensor cores. Four
 * consecutive elements of K could travel as one 16-byte copy if they were
 * adjacent in memory; in NCHW the elements of K = (c, kh, kw) are not. So:
 *
 *  - the input is copied once per call to channels-last (NHWC, a tiled
 *    transpose) and the weight to [c_out][kh][kw][c]; K runs (kh, kw, c),
 *    channels innermost. With C / groups a multiple of 4, four consecutive k
 *    (from a multiple of 4) are four channels of one input pixel at one tap:
 *    16 contiguous, 16-byte aligned bytes, one cp.async, zero-filled as a
 *    whole in the padding (all four lie in the same pixel);
 *  - both tiles are stored k-contiguous, A as [m][k] and B as [n][k], rows of
 *    BK + 4 floats: the 16-byte copies land whole, and the fragment loads
 *    (lane (g, t) reads rows g (+ 8) at k = t (+ 4)) hit rows 20 floats apart,
 *    32 distinct banks;
 *  - the address arithmetic is hoisted: each thread's pixels are split once
 *    (their NHWC offset and top-left corner), each K-tile splits the
 *    thread's k once into a tap and a channel, and each copy is then an add
 *    and two bounds checks.
 *
 * Everything else is the 4-byte rung's: mma.sync.m16n8k8 on TF32-rounded
 * operands, a kStages-deep cp.async pipeline, bias in the epilogue, NCHW out.
 * mt_conv2d_tf32 selects this rung as config kTf32NhwcConfig where
 * C / groups % 4 == 0 and falls back to the 4-byte rung elsewhere; the
 * gradients stay on the 4-byte rung.
 */
#include "async_copy.h"
#include "conv_igemm_tf32_nhwc.h"
#include "mma_tf32.h"
#include "scratch.h"

namespace {

constexpr int BM = 128, BN = 128, BK = 16; /* output channels x pixels x K */
constexpr int WM = 64, WN = 32;            /* a warp's piece: 4 x 4 fragments */
constexpr int kStages = 4, kThreads = 256;
constexpr int kLd = BK + 4; /* floats a smem row: 16-byte rows, conflict-free fragment loads */
constexpr int kStageFloats = (BM + BN) * kLd;
constexpr size_t kSharedBytes = (size_t)kStages * kStageFloats * sizeof(float); /* 80 KiB */
constexpr int kChunksPerRow = BK / 4;                                          /* 16-byte copies a tile row */
constexpr int kRowStep = kThreads / kChunksPerRow;                             /* rows between a thread's copies */
constexpr int kCopies = BM / kRowStep;                                         /* a thread's copies per tile */
static_assert(BM == BN && BM % kRowStep == 0, "A and B share the copy scheme");

/* out[n][p][c] = in[n][c][p] (p = y * W + x): 32 x 32 tiles through shared
 * memory, so that reads and writes are both coalesced. */
__global__ void nchw_to_nhwc(float *out, const float *in, int c, int hw)
{
    __shared__ float tile[32][33]; /* 33: the column reads hit distinct banks */
    const int64_t img = blockIdx.z;
    const int p0 = (int)blockIdx.x * 32, c0 = (int)blockIdx.y * 32;
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
        const int ch = c0 + i, p = p0 + (int)threadIdx.x;
        if (ch < c && p < hw)
            tile[i][threadIdx.x] = in[(img * c + ch) * hw + p];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
        const int p = p0 + i, ch = c0 + (int)threadIdx.x;
        if (ch < c && p < hw)
            out[(img * hw + p) * c + ch] = tile[threadIdx.x][i];
    }
}

/* out[co][tap][c] = w[co][c][tap]: K ordered (kh, kw, c). */
__global__ void weight_to_tap_major(float *out, const float *w, int64_t count, int c_group, int taps)
{
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t co = e / ((int64_t)c_group * taps);
        const int rest = (int)(e - co * c_group * taps), tap = rest / c_group, ch = rest - tap * c_group;
        out[e] = w[(co * c_group + ch) * taps + tap];
    }
}

struct NhwcProblem {
    const float *x;   /* NHWC input */
    const float *w;   /* [c_out][taps][c_group] */
    const float *bias; /* or nullptr */
    float *out;       /* NCHW */
    int n, c, h, w_, c_out, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, groups, c_group, c_out_group;
};

/* Block (x, y, z): pixels from x * BN, output channels from y * BM of group z. */
__global__ void __launch_bounds__(kThreads, 2) conv_tf32_nhwc(NhwcProblem p)
{
#if defined(MT_EMULATOR) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
    extern __shared__ __align__(16) float shared_floats[]; /* kStages x (A: BM x kLd, then B: BN x kLd) */
    const int grp = (int)blockIdx.z;
    const int m0 = (int)blockIdx.y * BM, n0 = (int)blockIdx.x * BN;
    const int M = p.c_out_group, N = p.n * p.oh * p.ow, K = p.kh * p.kw * p.c_group;
    const int tid = threadIdx.x;
    const int chunk = tid % kChunksPerRow, row = tid / kChunksPerRow;

    /* Each thread's pixels, split once: the NHWC offset of the top-left
     * corner of its window (may lie in the padding) and the corner itself. */
    int64_t pix_at[kCopies];
    int iy0[kCopies], ix0[kCopies];
    MT_UNROLL for (int i = 0; i < kCopies; ++i) {
        const int n = n0 + row + i * kRowStep;
        const int img = n / (p.oh * p.ow), pix = n - img * p.oh * p.ow;
        const int oy = pix / p.ow, ox = pix - oy * p.ow;
        iy0[i] = n < N ? oy * p.sh - p.ph : -(1 << 29); /* a pixel past N is never in bounds */
        ix0[i] = ox * p.sw - p.pw;
        pix_at[i] = (((int64_t)img * p.h + iy0[i]) * p.w_ + ix0[i]) * p.c + (int64_t)grp * p.c_group;
    }
    const float *w_rows = p.w + (int64_t)grp * M * K;

    auto issue_tile = [&](int kt, int s) {
        float *a_stage = shared_floats + s * kStageFloats;
        float *b_stage = a_stage + BM * kLd;
        const int k = kt * BK + 4 * chunk;
        const bool k_ok = k < K;
        /* k split once a tile: tap (ky, kx) and channel; then one add a copy. */
        const int tap = k / p.c_group, ch = k - tap * p.c_group;
        const int ky = tap / p.kw, kx = tap - ky * p.kw;
        const int dy = ky * p.dh, dx = kx * p.dw;
        const int64_t tap_at = ((int64_t)dy * p.w_ + dx) * p.c + ch;
        MT_UNROLL for (int i = 0; i < kCopies; ++i) {
            const int r = row + i * kRowStep;
            const bool a_ok = k_ok && m0 + r < M;
            async_copy<16>(a_stage + r * kLd + 4 * chunk, a_ok ? w_rows + (int64_t)(m0 + r) * K + k : p.w,
                           a_ok ? 16 : 0);
            const int y = iy0[i] + dy, x = ix0[i] + dx;
            const bool b_ok = k_ok && y >= 0 && y < p.h && x >= 0 && x < p.w_;
            async_copy<16>(b_stage + r * kLd + 4 * chunk, b_ok ? p.x + pix_at[i] + tap_at : p.x, b_ok ? 16 : 0);
        }
    };

    const int warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int warp_row = (warp / (BN / WN)) * WM, warp_col = (warp % (BN / WN)) * WN;
    constexpr int kMFrags = WM / 16, kNFrags = WN / 8;
    float acc[kMFrags][kNFrags][4];
    MT_UNROLL for (int i = 0; i < kMFrags; ++i)
        MT_UNROLL for (int j = 0; j < kNFrags; ++j)
            MT_UNROLL for (int e = 0; e < 4; ++e)
                acc[i][j][e] = 0.0f;

    /* The 4-byte rung's pipeline: one commit group per tile slot. */
    const int k_tiles = (K + BK - 1) / BK;
    MT_UNROLL for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles)
            issue_tile(s, s);
        async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
        async_wait<kStages - 2>();
        __syncthreads(); /* tile kt visible; every warp done with tile kt - 1's stage */
        const int next = kt + kStages - 1;
        if (next < k_tiles)
            issue_tile(next, next % kStages);
        async_commit();

        const float *a_stage = shared_floats + (kt % kStages) * kStageFloats;
        const float *b_stage = a_stage + BM * kLd;
        MT_UNROLL for (int kk = 0; kk < BK; kk += 8) {
            /* a = A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4];
             * b = B[t][g], B[t + 4][g] = the [n][k] tile's [g][t], [g][t + 4]. */
            uint32_t a_frag[kMFrags][4], b_frag[kNFrags][2];
            MT_UNROLL for (int i = 0; i < kMFrags; ++i) {
                const float *r = a_stage + (warp_row + i * 16 + g) * kLd + kk + t;
                a_frag[i][0] = tf32_bits(r[0]);
                a_frag[i][1] = tf32_bits(r[8 * kLd]);
                a_frag[i][2] = tf32_bits(r[4]);
                a_frag[i][3] = tf32_bits(r[8 * kLd + 4]);
            }
            MT_UNROLL for (int j = 0; j < kNFrags; ++j) {
                const float *r = b_stage + (warp_col + j * 8 + g) * kLd + kk + t;
                b_frag[j][0] = tf32_bits(r[0]);
                b_frag[j][1] = tf32_bits(r[4]);
            }
            MT_UNROLL for (int i = 0; i < kMFrags; ++i)
                MT_UNROLL for (int j = 0; j < kNFrags; ++j)
                    mma_tf32_16x8x8(acc[i][j], a_frag[i], b_frag[j]);
        }
    }
    async_wait<0>(); /* only empty groups remain */

    /* Lane (g, t) holds D[g][2t], D[g][2t + 1], D[g + 8][2t], D[g + 8][2t + 1]:
     * output channel m, pixel n, written NCHW plus the channel's bias. */
    const int ohw = p.oh * p.ow;
    MT_UNROLL for (int i = 0; i < kMFrags; ++i)
        MT_UNROLL for (int h = 0; h < 2; ++h) {
            const int m = m0 + warp_row + i * 16 + g + 8 * h;
            if (m >= M)
                continue;
            const int co = grp * M + m;
            const float bias = p.bias ? p.bias[co] : 0.0f;
            MT_UNROLL for (int j = 0; j < kNFrags; ++j)
                MT_UNROLL for (int e = 0; e < 2; ++e) {
                    const int n = n0 + warp_col + j * 8 + 2 * t + e;
                    if (n < N) {
                        const int img = n / ohw, pix = n - img * ohw;
                        p.out[((int64_t)img * p.c_out + co) * ohw + pix] = acc[i][j][2 * h + e] + bias;
                    }
                }
        }
#endif
}

} /* namespace */

bool conv_tf32_nhwc_applies(const ConvDims &d)
{
    return d.c_group % 4 == 0 && (int64_t)d.n * d.ohw <= INT32_MAX; /* whole 16-byte chunks; pixels in an int */
}

mt_status conv_tf32_nhwc_forward(float *out, const float *in, const float *weight, const float *bias,
                                 const ConvDims &d)
{
    const int64_t in_count = (int64_t)d.n * d.c * d.hw, w_count = (int64_t)d.c_out * d.c_group * d.taps;
    const int64_t M = d.c_out_group, N = (int64_t)d.n * d.ohw;
    if ((M + BM - 1) / BM > 65535)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_conv2d_tf32",
                       "%lld output channels a group need more than 65535 row tiles of %d", (long long)M, BM);
    DeviceScratch x_nhwc, w_taps;
    CUDA_CHECK(x_nhwc.allocate((size_t)in_count * sizeof(float)));
    CUDA_CHECK(w_taps.allocate((size_t)w_count * sizeof(float)));
    const dim3 t_grid((unsigned int)((d.hw + 31) / 32), (unsigned int)((d.c + 31) / 32), (unsigned int)d.n);
    nchw_to_nhwc<<<t_grid, dim3(32, 8), 0, mt_stream()>>>(x_nhwc.as<float>(), in, d.c, d.hw);
    CUDA_CHECK(mt_launch_status());
    weight_to_tap_major<<<grid_size(w_count, kBlockSize), kBlockSize, 0, mt_stream()>>>(
        w_taps.as<float>(), weight, w_count, d.c_group, d.taps);
    CUDA_CHECK(mt_launch_status());
    const NhwcProblem p{x_nhwc.as<float>(), w_taps.as<float>(), bias, out, d.n, d.c, d.h, d.w, d.c_out, d.oh, d.ow,
                        d.kh, d.kw, d.sh, d.sw, d.ph, d.pw, d.dh, d.dw, d.groups, d.c_group, d.c_out_group};
    const dim3 grid((unsigned int)((N + BN - 1) / BN), (unsigned int)((M + BM - 1) / BM), (unsigned int)d.groups);
    CUDA_CHECK(cudaFuncSetAttribute(conv_tf32_nhwc, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSharedBytes));
    conv_tf32_nhwc<<<grid, kThreads, kSharedBytes, mt_stream()>>>(p);
    CUDA_CHECK(mt_launch_status());
    CUDA_CHECK(x_nhwc.release());
    CUDA_CHECK(w_taps.release());
    return MT_OK;
}
