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
 * three products); what depends on k is split with FastDiv, a division by
 * a run-time constant done as a multiply and a shift (the sizes are only
 * known at launch, and an integer division is dozens of instructions). A
 * thread loads one k of several rows of A in each K-tile, so that k is split
 * once per K-tile, not per element (a Problem's AK); so is the one k of the
 * weight gradient's B, whose columns each block works out once into shared
 * memory (BK, and a table of Cols).
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
 * Groups run as gridDim.z (one group's product per z). Each product runs on
 * one of several tile configurations (the autotuner's choice per shape, see
 * below); the configs past the warptile ones run the same Problems on
 * cp.async stages and larger tiles (src/conv_igemm_pipelined.cu), whose
 * split-K configs cut the forward's and input gradient's K too, for layers
 * with too few output tiles to fill the SMs (into_splits below). With
 * dilation 1 the input gradient runs one dense product per stride phase
 * instead (src/conv_igemm_phases.h: no zero taps, a cheaper gather; the
 * product below then serves dilation > 1). Next: tensor cores.
 */
#include "conv_implicit_gemm.h"
#include "conv_igemm_phases.h"
#include "matmul_view.h"
#include "scratch.h"
#include "warptile_loop.h"

/* ---- the kernel ------------------------------------------------------------
 * The main loop is the warptile rung's (src/warptile_loop.h: block tile
 * BM x BN, BK of K per stage, warp tiles WM x WN, each lane (WM / 32) x
 * (WN / 16) pieces of 4 x 4 outputs, two stages with the next K-tile's loads
 * in flight). This kernel supplies what differs from a matmul: load_tile,
 * the implicit im2col gather of a K-tile, and the store through the
 * Problem's index map.
 *
 * Block (x, y, z) computes the BN columns from x * BN and BM rows from y * BM
 * of group z % groups's product, over the K-tiles of split z / groups
 * (k_per_split elements of K each, a multiple of the K-tile). a_vec: A's
 * rows are contiguous and 16-byte aligned (the forward's weight, when
 * C / groups * KH * KW is a multiple of the Pack width), so A is loaded in
 * 16-byte Packs as warptile loads a row-major matrix; else one element at a
 * time. The flag is the same for the whole launch: no divergence. */
template <typename T, typename C, typename P>
__global__ void __launch_bounds__(C::kThreads, (warptile_min_blocks<T, C>())) conv_igemm(P prob, int k_per_split, bool a_vec)
{
    constexpr int BM = C::BM;
    constexpr int BN = C::BN;
    constexpr int BK = kWarptileBk<T, C>;
    constexpr int kThreads = C::kThreads;
    constexpr int MI = C::kMIter;
    constexpr int NI = C::kNIter;
    constexpr int W = Pack<T>::kWidth;
    constexpr int kALoads = BM * BK / kThreads; /* elements each thread loads per K-tile */
    constexpr int kBLoads = BK * BN / kThreads;
    constexpr int kAPacks = kALoads / W;        /* ... as Packs, when a_vec */
    constexpr int kAStep = kThreads / BK; /* the row distance between one thread's A loads */
    constexpr int kBStep = P::kBAlongK ? kThreads / BK : kThreads / BN;
    static_assert(kALoads * kThreads == BM * BK && kBLoads * kThreads == BK * BN, "whole loads per thread");
    static_assert(kAPacks * W == kALoads, "whole Packs per thread");
    static_assert(kThreads % BK == 0 && kThreads % BN == 0, "threads cover whole rows and columns");
    static_assert(2 * BK * (BM + BN + 2 * kWarptilePad) * sizeof(T) <= 48 * 1024, "static shared memory limit");
    static_assert((BM + kWarptilePad) * sizeof(T) % 16 == 0 && (BN + kWarptilePad) * sizeof(T) % 16 == 0,
                  "16-byte aligned tile rows");

    __shared__ __align__(16) T a_tile[2][BK][BM + kWarptilePad];
    __shared__ __align__(16) T b_tile[2][BK][BN + kWarptilePad];

    const int g = (int)(blockIdx.z % prob.d.groups);
    const int split = (int)(blockIdx.z / prob.d.groups);
    const int m0 = (int)blockIdx.y * BM, n0 = (int)blockIdx.x * BN;
    const int M = prob.M(), N = prob.N();
    const int k_begin = split * k_per_split;
    const int k_end = prob.K() < k_begin + k_per_split ? prob.K() : k_begin + k_per_split;

    const int tid = threadIdx.x;
    const WarpPlace at = warp_place<C>();

    /* A: consecutive threads take consecutive k (the weight's rows, and
     * grad_out's, are contiguous along k), so each thread loads one k of
     * the K-tile in kALoads rows; the row's start is a multiply-add. With
     * a_vec, thread p loads the Pack of k0 + (p % (BK / W)) * W in row
     * p / (BK / W), as warptile's row-major A.
     * B, along N (kBAlongK false): each thread loads one column, the same in
     * every K-tile (consecutive threads, consecutive output or input pixels:
     * coalesced), worked out once here; along K (the weight gradient, whose
     * K is the pixels): like A. */
    const int a_k = tid % BK, a_m = tid / BK;
    const int b_k = P::kBAlongK ? tid % BK : tid / BN;
    const int b_n = P::kBAlongK ? tid / BK : tid % BN;
    const typename P::Col b_col = P::kBAlongK ? typename P::Col{} : prob.col(g, n0 + b_n);
    /* Along K, each thread loads kBLoads columns in every K-tile: the
     * block's BN columns are worked out once, here, into shared memory. */
    __shared__ typename P::Col col_table[BN];
    if constexpr (P::kBAlongK) {
        for (int n = tid; n < BN; n += kThreads)
            col_table[n] = prob.col(g, n0 + n < N ? n0 + n : N - 1);
        __syncthreads(); /* the table is complete before the first K-tile's loads */
    }

    T a_stage[kALoads];
    T b_stage[kBLoads];
    /* Global -> registers for K-tile t: a gather, 0 past K, past the
     * matrix's edge, and (in the Problem) in the padding. Each zero is a
     * select on the load (a predicated load), not a branch; the product loop
     * itself then runs over whole tiles with no test at all. */
    auto load_a = [&](int k0) {
        if constexpr (P::kARowMajor) {
            if (a_vec) {
                MT_UNROLL for (int i = 0; i < kAPacks; ++i) {
                    const int p = tid + i * kThreads;
                    const int m = m0 + p / (BK / W), k = k0 + (p % (BK / W)) * W;
                    const Pack<T> v = load_pack(prob.a_rows(g), m, M, k, k_end, prob.K());
                    MT_UNROLL for (int w = 0; w < W; ++w)
                        a_stage[i * W + w] = v.v[w];
                }
                return;
            }
        }
        /* One k (the thread's) in kALoads rows: what k says is worked out once. */
        const int k = k0 + a_k;
        const typename P::AK at = prob.a_k(k < k_end ? k : k_begin);
        MT_UNROLL for (int i = 0; i < kALoads; ++i) {
            const int m = m0 + a_m + i * kAStep;
            a_stage[i] = m < M && k < k_end ? prob.a(prob.row(g, m), at) : T(0);
        }
    };
    auto load_tile = [&](int64_t t) {
        const int k0 = k_begin + (int)t * BK;
        load_a(k0);
        if constexpr (P::kBAlongK) { /* one k (the thread's) in kBLoads columns of the table */
            const int k = k0 + b_k;
            const typename P::BK at = prob.b_k(k < k_end ? k : k_begin);
            MT_UNROLL for (int i = 0; i < kBLoads; ++i) {
                const int n = b_n + i * kBStep;
                b_stage[i] = n0 + n < N && k < k_end ? prob.b(col_table[n], at) : T(0);
            }
        } else { /* one column (the thread's) at kBLoads k */
            MT_UNROLL for (int i = 0; i < kBLoads; ++i) {
                const int k = k0 + b_k + i * kBStep;
                b_stage[i] = n0 + b_n < N && k < k_end ? prob.b(b_col, k) : T(0);
            }
        }
    };
    /* Registers -> shared stage s: a_tile[s][k][m], b_tile[s][k][n]. */
    auto store_tile = [&](int s) {
        if (P::kARowMajor && a_vec) { /* Pack i holds W consecutive k of row r */
            MT_UNROLL for (int i = 0; i < kAPacks; ++i) {
                const int p = tid + i * kThreads;
                const int r = p / (BK / W), c = (p % (BK / W)) * W;
                MT_UNROLL for (int w = 0; w < W; ++w)
                    a_tile[s][c + w][r] = a_stage[i * W + w];
            }
        } else {
            MT_UNROLL for (int i = 0; i < kALoads; ++i)
                a_tile[s][a_k][a_m + i * kAStep] = a_stage[i];
        }
        MT_UNROLL for (int i = 0; i < kBLoads; ++i) {
            if constexpr (P::kBAlongK)
                b_tile[s][b_k][b_n + i * kBStep] = b_stage[i];
            else
                b_tile[s][b_k + i * kBStep][b_n] = b_stage[i];
        }
    };

    T acc[MI][NI][4][4];
    const int k_tiles = k_end > k_begin ? (k_end - k_begin + BK - 1) / BK : 0;
    warptile_main_loop<T, C>(a_tile, b_tile, k_tiles, at, load_tile, store_tile, acc);

    igemm_store<T, C>(prob, acc, at, g, split, m0, n0);
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

/* ---- the tile configurations (what the autotuner chooses among) -----------
 * warptile's (src/matmul_warptile.cu) that suit a convolution's products:
 * M is C_out / groups (or C / groups), often 64 or less, and N the pixels,
 * many; minitensor/ops/autotune.py times each on the first convolution of a
 * shape and keeps the fastest per product (forward, input gradient, weight
 * gradient). The library's own choice (config -1, igemm_default_config)
 * follows what the autotuner picked on an H100 for the dense layers of
 * bench/conv.py. */
using Igemm0 = WarptileConfig<128, 128, 16, 64, 32, 1>; /* warptile's config 1: 8 x 8 a thread */
using Igemm1 = WarptileConfig<64, 128, 16, 32, 64, 3>;  /* its config 4: 4 x 16, for <= 64 rows */
using Igemm2 = WarptileConfig<128, 64, 16, 64, 32, 3>;  /* its config 2: 128 threads, 8 x 8 */
using Igemm3 = WarptileConfig<64, 64, 16, 32, 32, 4>;   /* its config 3: many blocks for small products */
using Igemm4 = WarptileConfig<128, 128, 8, 64, 32, 2>;  /* its config 5: shorter K-tile, 2 blocks an SM */
using Igemm5 = WarptileConfig<32, 128, 16, 32, 32, 4>;  /* 32 rows: groups of <= 32 output channels */

static const char *const kIgemmConfigNames[] = {
    "128x128x16 warp 64x32 (256 threads, 1 block/SM)",
    "64x128x16 warp 32x64 (128 threads)",
    "128x64x16 warp 64x32 (128 threads)",
    "64x64x16 warp 32x32 (128 threads)",
    "128x128x8 warp 64x32 (256 threads, 2 blocks/SM)",
    "32x128x16 warp 32x32 (128 threads)",
};
/* Configs 0 .. kWarptileConfigs - 1 run the kernel above; the next ones
 * the cp.async pipelined kernel (src/conv_igemm_pipelined.cu). */
constexpr int kWarptileConfigs = (int)(sizeof(kIgemmConfigNames) / sizeof(kIgemmConfigNames[0]));
static const int kIgemmConfigs = kWarptileConfigs + igemm_pipelined_count();

int mt_conv2d_igemm_config_count(void)
{
    return kIgemmConfigs;
}

const char *mt_conv2d_igemm_config_name(int config)
{
    if (config >= kWarptileConfigs)
        return igemm_pipelined_name(config - kWarptileConfigs);
    return config >= 0 ? kIgemmConfigNames[config] : nullptr;
}

/* Without a tuned choice: 64 x 64 for at most 64 rows a group (the
 * autotuner's pick on an H100 for every such product of bench/conv.py);
 * above, 128 x 64 where that still gives every SM two blocks, or where K is
 * split over blocks (the weight gradient, whose splits fill the GPU), else
 * 64 x 64 again (a 256-channel 14 x 14 layer has too few pixels for taller
 * tiles). */
static int igemm_default_config(int64_t M, int64_t N, int64_t groups, bool split_k)
{
    if (M <= Igemm3::BM)
        return 3;
    const int64_t tiles = (M + Igemm2::BM - 1) / Igemm2::BM * ((N + Igemm2::BN - 1) / Igemm2::BN) * groups;
    return split_k || tiles >= 2 * (int64_t)mt_sm_count() ? 2 : 3;
}

/* Calls launch(C{}) with config's tile (-1: the library's choice for the
 * M x N product of each of `groups`, K split over blocks or not). */
template <typename Launch>
static mt_status with_igemm_config(int config, int64_t M, int64_t N, int64_t groups, bool split_k, Launch launch)
{
    switch (config < 0 ? igemm_default_config(M, N, groups, split_k) : config) {
    case 0:
        return launch(Igemm0{});
    case 1:
        return launch(Igemm1{});
    case 2:
        return launch(Igemm2{});
    case 3:
        return launch(Igemm3{});
    case 4:
        return launch(Igemm4{});
    case 5:
        return launch(Igemm5{});
    default:
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_conv2d_igemm", "implicit-GEMM config %d has no kernel", config);
    }
}

/* One group's M x N product with K split into `splits` pieces of
 * k_per_split, on the tile C. */
template <typename T, typename C, typename P>
static mt_status launch_igemm_tile(const P &prob, int64_t M, int64_t N, int splits, int k_per_split, bool a_vec)
{
    if ((M + C::BM - 1) / C::BM > 65535) /* conv_dims checked this for 64-row tiles, not for narrower ones */
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_conv2d_igemm",
                       "%lld rows a group need more than 65535 row tiles of %d: take a config with taller tiles",
                       (long long)M, C::BM);
    const dim3 grid((unsigned int)((N + C::BN - 1) / C::BN), (unsigned int)((M + C::BM - 1) / C::BM),
                    (unsigned int)(prob.d.groups * splits));
    conv_igemm<T, C, P><<<grid, C::kThreads, 0, mt_stream()>>>(prob, k_per_split, a_vec);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* The whole product on config's tile: K in one piece, or in `splits` pieces
 * of whole K-tiles for a split-K config (prob.out: into_splits's buffer). */
template <typename T, typename P>
static mt_status launch_igemm(const P &prob, int64_t M, int64_t N, int64_t K, int config, int splits, bool a_vec)
{
    if (config >= kWarptileConfigs) {
        const int64_t bk = igemm_pipelined_tile(config - kWarptileConfigs).bk * 4 / (int64_t)sizeof(T);
        const int64_t per = ((K + bk - 1) / bk + splits - 1) / splits * bk;
        return launch_igemm_pipelined<T>(prob, config - kWarptileConfigs, M, N, splits, (int)(per > 0 ? per : bk));
    }
    return with_igemm_config(config, M, N, prob.d.groups, false, [&](auto tile) {
        return launch_igemm_tile<T, decltype(tile)>(prob, M, N, 1, (int)(K > 0 ? K : 1), a_vec);
    });
}

/* How many pieces config cuts K into: 1, or a split-K config's count, at
 * most 65535 / groups (gridDim.z holds groups times splits). */
static int igemm_splits(int config, int groups)
{
    const int s = config >= kWarptileConfigs ? igemm_pipelined_splits(config - kWarptileConfigs) : 1;
    return s < 65535 / groups ? s : 65535 / groups;
}

/* run(dest) with dest out's data; for splits > 1, a scratch buffer of
 * `splits` slices the size of out (each split's partial product), which
 * conv_igemm_sum_splits then adds into out in split order: deterministic,
 * no atomics. */
template <typename T, typename Run>
static mt_status into_splits(const mt_tensor &out, int splits, Run run)
{
    if (splits == 1)
        return run(first_out<T>(out));
    const int64_t count = tensor_numel(out);
    DeviceScratch partials;
    CUDA_CHECK(partials.allocate((size_t)(count * splits) * sizeof(T)));
    MT_TRY(run(partials.as<T>()));
    conv_igemm_sum_splits<T><<<grid_size(count, kBlockSize), kBlockSize, 0, mt_stream()>>>(
        first_out<T>(out), partials.as<T>(), count, splits);
    CUDA_CHECK(mt_launch_status());
    CUDA_CHECK(partials.release());
    return MT_OK;
}

/* An unknown config is refused before anything runs. */
static mt_status check_igemm_config(const char *func, int config)
{
    if (config < -1 || config >= kIgemmConfigs)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "unknown implicit-GEMM config %d (valid: -1 for the library's choice, or 0..%d)", config,
                       kIgemmConfigs - 1);
    return MT_OK;
}

/* ---- the entry points: checks, then the launches --------------------------- */

static int64_t igemm_out_size(int64_t size, int64_t kernel, int stride, int pad, int dilation)
{
    const int64_t span = (int64_t)dilation * (kernel - 1) + 1;
    const int64_t padded = size + 2 * (int64_t)pad;
    return padded < span ? 0 : (padded - span) / stride + 1;
}

/* The checks every entry point makes of its operands: valid descriptors
 * inside known memory, one float dtype, the given ranks, dense, and the
 * output sharing no byte with an input. */
mt_status check_operands(const char *func, const mt_tensor *out, const char *out_name,
                         const mt_tensor *const inputs[], const char *const names[], const int ranks[], int count)
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
mt_status conv_dims(const char *func, const int64_t in_shape[4], const int64_t w_shape[4], const ConvParams &p,
                    ConvDims *d)
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
                          int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups, int config)
{
    const char *func = "mt_conv2d_igemm";
    MT_TRY(check_igemm_config(func, config));
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
    /* The weight's rows (K elements each) take 16-byte loads when every row
     * starts 16-byte aligned. */
    const size_t item = dtype_size(weight.dtype);
    const bool a_vec = (uintptr_t)weight.data % 16 == 0 && weight.offset * (int64_t)item % 16 == 0 &&
                       K % (int64_t)(16 / item) == 0;
    const int splits = igemm_splits(config, d.groups);
    auto run = [&](auto *dest) {
        using T = std::remove_pointer_t<decltype(dest)>;
        const ForwardProblem<T> prob{first<T>(in), first<T>(weight), has_bias ? first<T>(bias) : nullptr, dest, d};
        return launch_igemm<T>(prob, M, N, K, config, splits, a_vec);
    };
    if (in.dtype == MT_FLOAT32)
        return into_splits<float>(out, splits, run);
    return into_splits<double>(out, splits, run);
}

mt_status mt_conv2d_igemm_input_grad(mt_tensor grad_in, mt_tensor grad_out, mt_tensor weight, int stride_h,
                                     int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups,
                                     int config)
{
    const char *func = "mt_conv2d_igemm_input_grad";
    MT_TRY(check_igemm_config(func, config));
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
    const int splits = igemm_splits(config, d.groups);
    auto run = [&](auto *dest) -> mt_status {
        using T = std::remove_pointer_t<decltype(dest)>;
        if (igemm_input_grad_by_phases(d)) { /* a product per stride phase (src/conv_igemm_phases.h) */
            auto launch = [&](const auto &prob, int64_t m, int64_t n, int64_t k) {
                return launch_igemm<T>(prob, m, n, k, config, splits, false);
            };
            return for_each_input_grad_phase(first<T>(grad_out), first<T>(weight), dest, d, launch);
        }
        const InputGradProblem<T> prob{first<T>(grad_out), first<T>(weight), dest, d};
        return launch_igemm<T>(prob, M, N, K, config, splits, false);
    };
    if (grad_in.dtype == MT_FLOAT32)
        return into_splits<float>(grad_in, splits, run);
    return into_splits<double>(grad_in, splits, run);
}

/* Split-K: each split's partial product (C_out x C / groups KH KW, every
 * group) goes to its own slice of into_splits's buffer; a split-K config
 * takes its own count instead of weight_grad_splits's. */
template <typename T>
static mt_status weight_grad_typed(const mt_tensor &grad_weight, const mt_tensor &grad_out, const mt_tensor &in,
                                   const ConvDims &d, int config)
{
    const int64_t M = d.c_out_group, N = (int64_t)d.c_group * d.taps, K = (int64_t)d.n * d.ohw;
    WeightGradProblem<T> prob{first<T>(grad_out), first<T>(in), first_out<T>(grad_weight), d};
    /* K split for a bm x bn tile with K-tiles of bk; run(splits, k_per_split) launches the product. */
    auto split_and_run = [&](int64_t bm, int64_t bn, int64_t bk, auto run) -> mt_status {
        int splits = igemm_splits(config, d.groups), k_per_split = 1;
        const int64_t per = ((K + bk - 1) / bk + splits - 1) / splits * bk; /* whole K-tiles a split */
        if (splits > 1)
            k_per_split = (int)(per > 0 ? per : bk);
        else
            weight_grad_splits(d, M, N, K, bm, bn, bk, &splits, &k_per_split);
        return into_splits<T>(grad_weight, splits, [&](T *dest) {
            prob.out = dest; /* run reads prob by reference */
            return run(splits, k_per_split);
        });
    };
    if (config >= kWarptileConfigs) { /* the pipelined kernel */
        const int which = config - kWarptileConfigs;
        const IgemmTileSize tile = igemm_pipelined_tile(which);
        return split_and_run(tile.bm, tile.bn, tile.bk * 4 / (int)sizeof(T), [&](int splits, int k_per_split) {
            return launch_igemm_pipelined<T>(prob, which, M, N, splits, k_per_split);
        });
    }
    return with_igemm_config(config, M, N, d.groups, true, [&](auto tile) -> mt_status {
        using C = decltype(tile);
        return split_and_run(C::BM, C::BN, kWarptileBk<T, C>, [&](int splits, int k_per_split) {
            return launch_igemm_tile<T, C>(prob, M, N, splits, k_per_split, false);
        });
    });
}

mt_status mt_conv2d_igemm_weight_grad(mt_tensor grad_weight, mt_tensor grad_out, mt_tensor in, int stride_h,
                                      int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups,
                                      int config)
{
    const char *func = "mt_conv2d_igemm_weight_grad";
    MT_TRY(check_igemm_config(func, config));
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
        return weight_grad_typed<float>(grad_weight, grad_out, in, d, config);
    return weight_grad_typed<double>(grad_weight, grad_out, in, d, config);
}
