/*
 * conv_implicit_gemm.cu: the implicit-GEMM rung of the convolution ladder,
 * forward and both gradients.
 *
 * A convolution is a matrix product. For one group g (C / groups input
 * channels, C_out / groups output channels):
 *
 *     out[co, p] = sum_k  W[co, k] * X[k, p]
 *         co: an output channel            (GEMM M = C_out / groups)
 *         p = (n, oy, ox): an output pixel (GEMM N = N * OH * OW)
 *         k = (c, i, j): a channel and tap (GEMM K = C / groups * KH * KW)
 *     W[co, k] = weight[co, c, i, j]       (the weight, as it is stored)
 *     X[k, p]  = in[n, c, oy*sh - ph + i*dh, ox*sw - pw + j*dw], 0 outside
 *
 * The im2col rung writes X to memory (KH * KW times the input) and calls
 * the matmul. Here X is never written: the kernel is the matmul ladder's
 * warptile rung (src/matmul_warptile.cu: a block computes a BM x BN tile,
 * each warp a WM x WN piece of it, each lane 4 x 4 pieces from registers,
 * two shared-memory stages with the next K-tile's global loads in flight),
 * and where warptile loads B[k][p] from a matrix, this kernel gathers it
 * from the NCHW input: k and p are split into (c, i, j) and (n, oy, ox), and
 * the element is read where that tap of that window lies. A tap that falls
 * in the padding, and any k or p past the end of the matrix (the edge
 * tiles), is stored in shared memory as 0, the value zero padding means:
 * the inner product loop then runs over whole tiles with no bounds test
 * (a zero adds nothing), and no thread reads a value left in shared memory
 * by the previous K-tile.
 *
 * Consecutive threads load consecutive addresses: along k for the weights
 * (stored contiguous along k), along the output pixels for the input (a
 * warp reads consecutive columns of the image, at stride sw). A thread loads
 * the same column of B in every K-tile, so what depends only on that column
 * (which image, which window) is worked out once before the loop (a
 * Problem's Col, in src/conv_implicit_gemm.h with the index maps of all
 * three products); what depends on k is split per element with FastDiv, a
 * division by a run-time constant done as a multiply and a shift (the sizes
 * are only known at launch, and an integer division is dozens of
 * instructions).
 *
 * The gradients are two more implicit GEMMs on the same kernel, each a
 * Problem of its own (no col2im, no window written):
 *
 *   input gradient  dx[c, p'] = sum_k W'[c, k] G[k, p'] with p' = (n, y, x)
 *                   an input pixel, k = (co, i, j), W'[c, k] = weight[co, c,
 *                   i, j] and G[k, p'] = grad_out[n, co, oy, ox] where
 *                   oy * sh = y + ph - i * dh (0 when that is not a whole
 *                   output row: with stride > 1 most taps of a pixel land
 *                   between output rows and are gathered as zeros);
 *   weight gradient dW[co, q] = sum_p G[co, p] X'[p, q] with q = (c, i, j)
 *                   and the long K = N * OH * OW; so that it fills the GPU,
 *                   K is split over blocks (split-K) whose partial products
 *                   are summed by a second kernel, in a fixed order.
 *
 * Groups run as gridDim.z (one group's product per z). The next rungs:
 * 16-byte loads of W, cp.async stages (src/async_copy.h) for the gathered
 * operand, the stride phases of the input gradient as separate dense
 * products (no zero taps), tensor cores.
 */
#include "conv_implicit_gemm.h"
#include "scratch.h"

/* ---- the kernel ------------------------------------------------------------
 * Tile parameters as in src/matmul_warptile.cu (WarptileConfig): block tile
 * BM x BN, BK of K per stage (float32; float64 halves it, the same 64 bytes
 * of a row), warp tile WM x WN, each lane (WM / 32) x (WN / 16) pieces of
 * 4 x 4 outputs. */
template <int BM_, int BN_, int BK_, int WM_, int WN_, int kMinBlocks_>
struct IgemmConfig {
    static constexpr int BM = BM_;
    static constexpr int BN = BN_;
    static constexpr int BK = BK_;
    static constexpr int WM = WM_;
    static constexpr int WN = WN_;
    static constexpr int kMinBlocks = kMinBlocks_;
    static constexpr int kThreads = (BM / WM) * (BN / WN) * 32;
    static constexpr int kMIter = WM / 32;
    static constexpr int kNIter = WN / 16;
    static_assert(BM % WM == 0 && BN % WN == 0, "whole warp tiles");
    static_assert(WM % 32 == 0 && WN % 16 == 0, "a warp's 8 x 4 lanes cover 32 x 16 per piece");
};

/* warptile's best measured tile (config 1, 128 x 128 x 16, warp 64 x 32,
 * 8 x 8 outputs a thread) and, for groups of at most 64 output channels
 * (most layers of a small network), its 64 x 128 tile (config 4, warp
 * 32 x 64, 4 x 16 a thread) so that half the block does not multiply zero
 * rows. */
using IgemmWide = IgemmConfig<128, 128, 16, 64, 32, 1>;
using IgemmNarrow = IgemmConfig<64, 128, 16, 32, 64, 3>;

constexpr int kIgemmPad = 4; /* shared-memory row padding, as warptile's */

template <typename T, typename C>
constexpr int igemm_min_blocks()
{
    return sizeof(T) == sizeof(double) ? 1 : C::kMinBlocks;
}

/* Block (x, y, z) computes the BN columns from x * BN and BM rows from y * BM
 * of group z % groups's product, over the K-tiles of split z / groups
 * (k_per_split elements of K each, a multiple of the K-tile). */
template <typename T, typename C, typename P>
__global__ void __launch_bounds__(C::kThreads, (igemm_min_blocks<T, C>())) conv_igemm(P prob, int k_per_split)
{
    constexpr int BM = C::BM;
    constexpr int BN = C::BN;
    constexpr int BK = C::BK * 4 / (int)sizeof(T);
    constexpr int kThreads = C::kThreads;
    constexpr int MI = C::kMIter;
    constexpr int NI = C::kNIter;
    constexpr int W = Pack<T>::kWidth;
    constexpr int kALoads = BM * BK / kThreads; /* elements each thread loads per K-tile */
    constexpr int kBLoads = BK * BN / kThreads;
    constexpr int kAStep = kThreads / BK; /* the row distance between one thread's A loads */
    constexpr int kBStep = P::kBAlongK ? kThreads / BK : kThreads / BN;
    static_assert(kALoads * kThreads == BM * BK && kBLoads * kThreads == BK * BN, "whole loads per thread");
    static_assert(kThreads % BK == 0 && kThreads % BN == 0, "threads cover whole rows and columns");
    static_assert(2 * BK * (BM + BN + 2 * kIgemmPad) * sizeof(T) <= 48 * 1024, "static shared memory limit");
    static_assert((BM + kIgemmPad) * sizeof(T) % 16 == 0 && (BN + kIgemmPad) * sizeof(T) % 16 == 0,
                  "16-byte aligned tile rows");

    __shared__ __align__(16) T a_tile[2][BK][BM + kIgemmPad];
    __shared__ __align__(16) T b_tile[2][BK][BN + kIgemmPad];

    const int g = (int)(blockIdx.z % prob.d.groups);
    const int split = (int)(blockIdx.z / prob.d.groups);
    const int m0 = (int)blockIdx.y * BM, n0 = (int)blockIdx.x * BN;
    const int M = prob.M(), N = prob.N();
    const int k_begin = split * k_per_split;
    const int k_end = prob.K() < k_begin + k_per_split ? prob.K() : k_begin + k_per_split;

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int warp_row = (warp / (BN / C::WN)) * C::WM;
    const int warp_col = (warp % (BN / C::WN)) * C::WN;
    const int lane_row = (lane / 4) * 4, lane_col = (lane % 4) * 4;

    /* A: consecutive threads take consecutive k (the weight's rows, and
     * grad_out's, are contiguous along k), so each thread loads one k of
     * the K-tile in kALoads rows; the row's start is a multiply-add.
     * B, along N (kBAlongK false): each thread loads one column, the same in
     * every K-tile (consecutive threads, consecutive output or input pixels:
     * coalesced), worked out once here; along K (the weight gradient, whose
     * K is the pixels): like A. */
    const int a_k = tid % BK, a_m = tid / BK;
    const int b_k = P::kBAlongK ? tid % BK : tid / BN;
    const int b_n = P::kBAlongK ? tid / BK : tid % BN;
    const typename P::Col b_col = prob.col(g, n0 + b_n);

    T a_stage[kALoads];
    T b_stage[kBLoads];
    /* Global -> registers for the K-tile at k0: a gather, 0 past K, past the
     * matrix's edge, and (in the Problem) in the padding. */
    auto load_tile = [&](int k0) {
        MT_UNROLL for (int i = 0; i < kALoads; ++i) {
            const int m = m0 + a_m + i * kAStep, k = k0 + a_k;
            a_stage[i] = m < M && k < k_end ? prob.a(prob.row(g, m), k) : T(0);
        }
        MT_UNROLL for (int i = 0; i < kBLoads; ++i) {
            if constexpr (P::kBAlongK) {
                const int n = n0 + b_n + i * kBStep, k = k0 + b_k;
                b_stage[i] = n < N && k < k_end ? prob.b(prob.col(g, n), k) : T(0);
            } else {
                const int k = k0 + b_k + i * kBStep;
                b_stage[i] = n0 + b_n < N && k < k_end ? prob.b(b_col, k) : T(0);
            }
        }
    };
    /* Registers -> shared stage s: a_tile[s][k][m], b_tile[s][k][n]. */
    auto store_tile = [&](int s) {
        MT_UNROLL for (int i = 0; i < kALoads; ++i)
            a_tile[s][a_k][a_m + i * kAStep] = a_stage[i];
        MT_UNROLL for (int i = 0; i < kBLoads; ++i) {
            if constexpr (P::kBAlongK)
                b_tile[s][b_k][b_n + i * kBStep] = b_stage[i];
            else
                b_tile[s][b_k + i * kBStep][b_n] = b_stage[i];
        }
    };

    T acc[MI][NI][4][4];
    MT_UNROLL for (int im = 0; im < MI; ++im)
        MT_UNROLL for (int in = 0; in < NI; ++in)
            MT_UNROLL for (int i = 0; i < 4; ++i)
                MT_UNROLL for (int j = 0; j < 4; ++j)
                    acc[im][in][i][j] = T(0);

    const int k_tiles = k_end > k_begin ? (k_end - k_begin + BK - 1) / BK : 0;
    load_tile(k_begin);
    store_tile(0);
    __syncthreads(); /* stage 0 is complete before anyone reads it */
    /* The loop count is the same for every thread: all reach each barrier. */
    for (int t = 0; t < k_tiles; ++t) {
        const int s = t & 1;
        const bool more = t + 1 < k_tiles;
        if (more)
            load_tile(k_begin + (t + 1) * BK); /* in flight while we compute */
        MT_UNROLL for (int k = 0; k < BK; ++k) {
            T a_reg[MI][4];
            T b_reg[NI][4];
            /* 16-byte shared-memory loads (LDS.128): a lane's 4 values are
             * consecutive and every row starts 16-byte aligned. */
            MT_UNROLL for (int im = 0; im < MI; ++im)
                MT_UNROLL for (int v = 0; v < 4; v += W) {
                    const Pack<T> p = *reinterpret_cast<const Pack<T> *>(&a_tile[s][k][warp_row + im * 32 + lane_row + v]);
                    MT_UNROLL for (int w = 0; w < W; ++w)
                        a_reg[im][v + w] = p.v[w];
                }
            MT_UNROLL for (int in = 0; in < NI; ++in)
                MT_UNROLL for (int v = 0; v < 4; v += W) {
                    const Pack<T> p = *reinterpret_cast<const Pack<T> *>(&b_tile[s][k][warp_col + in * 16 + lane_col + v]);
                    MT_UNROLL for (int w = 0; w < W; ++w)
                        b_reg[in][v + w] = p.v[w];
                }
            MT_UNROLL for (int im = 0; im < MI; ++im)
                MT_UNROLL for (int in = 0; in < NI; ++in)
                    MT_UNROLL for (int i = 0; i < 4; ++i)
                        MT_UNROLL for (int j = 0; j < 4; ++j)
                            acc[im][in][i][j] += a_reg[im][i] * b_reg[in][j];
        }
        /* Stage s ^ 1 was last read in iteration t - 1, which ended with the
         * barrier below: it is free to overwrite. */
        if (more)
            store_tile(s ^ 1);
        /* Stage s ^ 1 is complete before anyone reads it, and everyone has
         * finished reading stage s before iteration t + 1 overwrites it. */
        __syncthreads();
    }

    /* Each output is written by exactly one thread; where it goes is the
     * Problem's index map (out_row + out_col). */
    MT_UNROLL for (int im = 0; im < MI; ++im)
        MT_UNROLL for (int i = 0; i < 4; ++i) {
            const int m = m0 + warp_row + im * 32 + lane_row + i;
            if (m >= M)
                continue;
            const int64_t row_at = prob.out_row(g, m, split);
            const T bias = prob.row_bias(g, m);
            MT_UNROLL for (int in = 0; in < NI; ++in)
                MT_UNROLL for (int j = 0; j < 4; ++j) {
                    const int n = n0 + warp_col + in * 16 + lane_col + j;
                    if (n < N)
                        prob.out[row_at + prob.out_col(g, n)] = acc[im][in][i][j] + bias;
                }
        }
}

/* out[e] = sum over the splits s of partial[s * count + e], in split order
 * (the same sum on every run). */
template <typename T>
__global__ void conv_igemm_sum_splits(T *out, const T *partial, int64_t count, int splits)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count; e += (int64_t)gridDim.x * blockDim.x) {
        T sum = T(0);
        for (int s = 0; s < splits; ++s)
            sum += partial[(int64_t)s * count + e];
        out[e] = sum;
    }
}

/* One group's M x N product with K split into `splits` pieces of
 * k_per_split, on the tile C. */
template <typename T, typename C, typename P>
static mt_status launch_igemm_tile(const P &prob, int64_t M, int64_t N, int splits, int k_per_split)
{
    const dim3 grid((unsigned int)((N + C::BN - 1) / C::BN), (unsigned int)((M + C::BM - 1) / C::BM),
                    (unsigned int)(prob.d.groups * splits));
    conv_igemm<T, C, P><<<grid, C::kThreads, 0, mt_stream()>>>(prob, k_per_split);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* The narrow tile when a group's product has at most 64 rows. */
template <typename T, typename P>
static mt_status launch_igemm(const P &prob, int64_t M, int64_t N, int splits, int k_per_split)
{
    if (M <= IgemmNarrow::BM)
        return launch_igemm_tile<T, IgemmNarrow>(prob, M, N, splits, k_per_split);
    return launch_igemm_tile<T, IgemmWide>(prob, M, N, splits, k_per_split);
}

/* ---- the entry points: checks, then the launches --------------------------- */

struct ConvParams {
    int sh, sw, ph, pw, dh, dw, groups;
};

static int64_t igemm_out_size(int64_t size, int64_t kernel, int stride, int pad, int dilation)
{
    const int64_t span = (int64_t)dilation * (kernel - 1) + 1;
    const int64_t padded = size + 2 * (int64_t)pad;
    return padded < span ? 0 : (padded - span) / stride + 1;
}

/* The checks every entry point makes of its operands: valid descriptors
 * inside known memory, one float dtype, the given ranks, dense, and the
 * output sharing no byte with an input. */
static mt_status check_operands(const char *func, const mt_tensor *out, const char *out_name,
                                const mt_tensor *const inputs[], const char *const names[], const int ranks[],
                                int count)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, out_name, out));
    MT_TRY(mt_check_extent(func, out_name, out));
    for (int k = 0; k < count; ++k) {
        MT_TRY(mt_check_tensor(func, names[k], inputs[k]));
        MT_TRY(mt_check_extent(func, names[k], inputs[k]));
        MT_TRY(mt_check_same_dtype(func, inputs[k], names[k], out, out_name));
        if (inputs[k]->ndim != ranks[k] || !(tensor_numel(*inputs[k]) == 0 || is_contiguous(*inputs[k])))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s must be a contiguous %d-D tensor", names[k], ranks[k]);
    }
    MT_TRY(mt_check_float(func, names[0], inputs[0]));
    if (out->ndim != 4 || !(tensor_numel(*out) == 0 || is_contiguous(*out)))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s must be a contiguous 4-D tensor", out_name);
    for (int k = 0; k < count; ++k)
        if (tensors_overlap(*out, *inputs[k]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s overlaps %s", out_name, names[k]);
    return MT_OK;
}

/* The sizes of a convolution of an (N, C, H, W) input by a (C_out, C_group,
 * KH, KW) weight, checked: parameters in range, groups that divide, a window
 * that fits, and every pixel and k count below 2^31 (the kernel's int
 * indices). */
static mt_status conv_dims(const char *func, const int64_t in_shape[4], const int64_t w_shape[4],
                           const ConvParams &p, ConvDims *d)
{
    if (p.sh < 1 || p.sw < 1 || p.dh < 1 || p.dw < 1 || p.ph < 0 || p.pw < 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "stride (%d, %d) and dilation (%d, %d) must be >= 1, "
                       "padding (%d, %d) >= 0", p.sh, p.sw, p.dh, p.dw, p.ph, p.pw);
    const int64_t n = in_shape[0], c = in_shape[1], h = in_shape[2], w = in_shape[3];
    const int64_t c_out = w_shape[0], kh = w_shape[2], kw = w_shape[3];
    if (p.groups < 1 || c % p.groups != 0 || c_out % p.groups != 0 || w_shape[1] * p.groups != c)
        return mt_fail(MT_ERR_SHAPE, func, "input (%lld, %lld, %lld, %lld), weight (%lld, %lld, %lld, %lld) and "
                       "groups = %d do not agree: C and C_out must divide by groups, and weight's dim 1 must be "
                       "C / groups", (long long)n, (long long)c, (long long)h, (long long)w, (long long)c_out,
                       (long long)w_shape[1], (long long)kh, (long long)kw, p.groups);
    if (kh < 1 || kw < 1)
        return mt_fail(MT_ERR_SHAPE, func, "the weight's kernel (%lld, %lld) is empty", (long long)kh, (long long)kw);
    const int64_t oh = igemm_out_size(h, kh, p.sh, p.ph, p.dh), ow = igemm_out_size(w, kw, p.sw, p.pw, p.dw);
    if (oh < 1 || ow < 1)
        return mt_fail(MT_ERR_SHAPE, func, "the input (%lld, %lld) padded by (%d, %d) is smaller than the kernel "
                       "(%lld, %lld) with dilation (%d, %d): no window fits", (long long)h, (long long)w, p.ph, p.pw,
                       (long long)kh, (long long)kw, p.dh, p.dw);
    /* Every index of the padded input fits an int (a window's rows and
     * columns lie inside it), gridDim.y (row tiles of C_out / groups or
     * C / groups rows) stays within 65535, gridDim.z (groups times splits of
     * K) within int. */
    const int64_t limit = INT32_MAX;
    const int64_t groups = p.groups;
    if (h + 2 * (int64_t)p.ph > limit || w + 2 * (int64_t)p.pw > limit || h * w > limit || kh * kw > limit || n * h * w > limit || n * oh * ow > limit ||
        c / groups * kh * kw > limit || c_out / groups * kh * kw > limit || c > limit || c_out > limit ||
        (c_out / groups + 63) / 64 > 65535 || (c / groups + 63) / 64 > 65535 || groups * 65535 > limit)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "input (%lld, %lld, %lld, %lld) with weight (%lld, %lld, "
                       "%lld, %lld): a pixel or k count reaches 2^31, more than this kernel's 32-bit indices hold",
                       (long long)n, (long long)c, (long long)h, (long long)w, (long long)c_out,
                       (long long)w_shape[1], (long long)kh, (long long)kw);
    ConvDims r;
    r.n = (int)n, r.c = (int)c, r.h = (int)h, r.w = (int)w;
    r.c_out = (int)c_out, r.oh = (int)oh, r.ow = (int)ow;
    r.kh = (int)kh, r.kw = (int)kw, r.sh = p.sh, r.sw = p.sw, r.ph = p.ph, r.pw = p.pw, r.dh = p.dh, r.dw = p.dw;
    r.groups = p.groups, r.c_group = (int)(c / groups), r.c_out_group = (int)(c_out / groups);
    r.taps = (int)(kh * kw), r.hw = (int)(h * w), r.ohw = (int)(oh * ow);
    r.taps_div = make_fast_div(r.taps), r.kw_div = make_fast_div(kw), r.w_div = make_fast_div(w);
    r.hw_div = make_fast_div(r.hw), r.ow_div = make_fast_div(ow), r.ohw_div = make_fast_div(r.ohw);
    r.sh_div = make_fast_div(p.sh), r.sw_div = make_fast_div(p.sw);
    *d = r;
    return MT_OK;
}

static bool same_shape4(const mt_tensor &t, int64_t a, int64_t b, int64_t c, int64_t d)
{
    return t.shape[0] == a && t.shape[1] == b && t.shape[2] == c && t.shape[3] == d;
}

mt_status mt_conv2d_igemm(mt_tensor out, mt_tensor in, mt_tensor weight, mt_tensor bias, int has_bias, int stride_h,
                          int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups)
{
    const char *func = "mt_conv2d_igemm";
    const mt_tensor *inputs[] = {&in, &weight, &bias};
    const char *const names[] = {"in", "weight", "bias"};
    const int ranks[] = {4, 4, 1};
    MT_TRY(check_operands(func, &out, "out", inputs, names, ranks, has_bias ? 3 : 2));
    ConvDims d;
    MT_TRY(conv_dims(func, in.shape, weight.shape,
                     ConvParams{stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups}, &d));
    if (has_bias && bias.shape[0] != d.c_out)
        return mt_fail(MT_ERR_SHAPE, func, "bias has %lld elements, weight %d out channels", (long long)bias.shape[0],
                       d.c_out);
    if (!same_shape4(out, d.n, d.c_out, d.oh, d.ow))
        return mt_fail(MT_ERR_SHAPE, func, "out must be a contiguous (%d, %d, %d, %d) tensor", d.n, d.c_out, d.oh,
                       d.ow);
    if (tensor_numel(out) == 0)
        return MT_OK; /* an empty batch or no output channel */
    const int64_t M = d.c_out_group, N = (int64_t)d.n * d.ohw, K = (int64_t)d.c_group * d.taps;
    if (in.dtype == MT_FLOAT32) {
        const ForwardProblem<float> prob{first<float>(in), first<float>(weight),
                                         has_bias ? first<float>(bias) : nullptr, first_out<float>(out), d};
        return launch_igemm<float>(prob, M, N, 1, (int)K);
    }
    const ForwardProblem<double> prob{first<double>(in), first<double>(weight),
                                      has_bias ? first<double>(bias) : nullptr, first_out<double>(out), d};
    return launch_igemm<double>(prob, M, N, 1, (int)K);
}

mt_status mt_conv2d_igemm_input_grad(mt_tensor grad_in, mt_tensor grad_out, mt_tensor weight, int stride_h,
                                     int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups)
{
    const char *func = "mt_conv2d_igemm_input_grad";
    const mt_tensor *inputs[] = {&grad_out, &weight};
    const char *const names[] = {"grad_out", "weight"};
    const int ranks[] = {4, 4};
    MT_TRY(check_operands(func, &grad_in, "grad_in", inputs, names, ranks, 2));
    ConvDims d;
    MT_TRY(conv_dims(func, grad_in.shape, weight.shape,
                     ConvParams{stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups}, &d));
    if (!same_shape4(grad_out, d.n, d.c_out, d.oh, d.ow))
        return mt_fail(MT_ERR_SHAPE, func, "grad_out must be a contiguous (%d, %d, %d, %d) tensor (the output of "
                       "grad_in's shape convolved by weight)", d.n, d.c_out, d.oh, d.ow);
    if (tensor_numel(grad_in) == 0)
        return MT_OK;
    const int64_t M = d.c_group, N = (int64_t)d.n * d.hw, K = (int64_t)d.c_out_group * d.taps;
    if (grad_in.dtype == MT_FLOAT32) {
        const InputGradProblem<float> prob{first<float>(grad_out), first<float>(weight), first_out<float>(grad_in), d};
        return launch_igemm<float>(prob, M, N, 1, (int)K);
    }
    const InputGradProblem<double> prob{first<double>(grad_out), first<double>(weight), first_out<double>(grad_in),
                                        d};
    return launch_igemm<double>(prob, M, N, 1, (int)K);
}

/* How many pieces to split the weight gradient's K (the output pixels) into:
 * enough blocks for two per SM, each piece at least 8 K-tiles (fewer would
 * spend more time writing partial products than summing), and a
 * multiple of the K-tile each. */
static void weight_grad_splits(const ConvDims &d, int64_t M, int64_t N, int64_t K, int *splits, int *k_per_split)
{
    const int64_t bm = M <= IgemmNarrow::BM ? IgemmNarrow::BM : IgemmWide::BM, bn = IgemmWide::BN, bk = 16;
    const int64_t tiles = ((M + bm - 1) / bm) * ((N + bn - 1) / bn) * d.groups;
    const int64_t k_tiles = (K + bk - 1) / bk;
    int64_t s = (2 * (int64_t)mt_sm_count() + tiles - 1) / tiles;
    const int64_t most = (k_tiles + 7) / 8;
    s = s < most ? s : most;
    s = s < 65535 / d.groups ? s : 65535 / d.groups;
    s = s < 1 ? 1 : s;
    const int64_t per = (k_tiles + s - 1) / s * bk;
    *k_per_split = (int)(per > 0 ? per : bk);
    *splits = (int)(K > 0 ? (K + *k_per_split - 1) / *k_per_split : 1);
}

template <typename T>
static mt_status weight_grad_typed(const mt_tensor &grad_weight, const mt_tensor &grad_out, const mt_tensor &in,
                                   const ConvDims &d)
{
    const int64_t M = d.c_out_group, N = (int64_t)d.c_group * d.taps, K = (int64_t)d.n * d.ohw;
    int splits = 1, k_per_split = 1;
    weight_grad_splits(d, M, N, K, &splits, &k_per_split);
    WeightGradProblem<T> prob{first<T>(grad_out), first<T>(in), first_out<T>(grad_weight), d};
    if (splits == 1)
        return launch_igemm<T>(prob, M, N, 1, (int)(K > 0 ? K : 1));
    const int64_t count = tensor_numel(grad_weight);
    DeviceScratch partials;
    CUDA_CHECK(partials.allocate((size_t)(count * splits) * sizeof(T)));
    prob.out = partials.as<T>();
    MT_TRY(launch_igemm<T>(prob, M, N, splits, k_per_split));
    conv_igemm_sum_splits<T><<<grid_size(count, kBlockSize), kBlockSize, 0, mt_stream()>>>(
        first_out<T>(grad_weight), partials.as<T>(), count, splits);
    CUDA_CHECK(mt_launch_status());
    CUDA_CHECK(partials.release());
    return MT_OK;
}

mt_status mt_conv2d_igemm_weight_grad(mt_tensor grad_weight, mt_tensor grad_out, mt_tensor in, int stride_h,
                                      int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups)
{
    const char *func = "mt_conv2d_igemm_weight_grad";
    const mt_tensor *inputs[] = {&grad_out, &in};
    const char *const names[] = {"grad_out", "in"};
    const int ranks[] = {4, 4};
    MT_TRY(check_operands(func, &grad_weight, "grad_weight", inputs, names, ranks, 2));
    ConvDims d;
    MT_TRY(conv_dims(func, in.shape, grad_weight.shape,
                     ConvParams{stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups}, &d));
    if (!same_shape4(grad_out, d.n, d.c_out, d.oh, d.ow))
        return mt_fail(MT_ERR_SHAPE, func, "grad_out must be a contiguous (%d, %d, %d, %d) tensor (the output of "
                       "in convolved by a weight of grad_weight's shape)", d.n, d.c_out, d.oh, d.ow);
    if (tensor_numel(grad_weight) == 0)
        return MT_OK;
    if (in.dtype == MT_FLOAT32)
        return weight_grad_typed<float>(grad_weight, grad_out, in, d);
    return weight_grad_typed<double>(grad_weight, grad_out, in, d);
}
