/*
 * matmul_warptile.cu: rung 7 of the matmul ladder, the library's default
 * matmul kernel, and its tile configurations (what the autotuner,
 * minitensor/ops/autotune.py, times per shape).
 *
 * Rung 6 (vectorized) gives each thread an 8 x 8 block of outputs. Here the
 * block's 128 x 128 tile is split into one tile per warp, and each thread's
 * outputs into 4 x 4 pieces spread over its warp's tile, so the 32 lanes of
 * a warp read few, contiguous shared-memory addresses (no bank conflicts,
 * many broadcasts); the next K-tile is loaded from global memory into
 * registers while the current one is computed (double buffering, one
 * barrier per K-tile); and the tile shape is a template with several
 * configurations.
 *
 * Operands: row-major, or (float32) column-major, with aligned rows
 * (gemm_operand_ok); mt_matmul copies any other operand to a contiguous
 * buffer first. float64 runs the same templates: a 16-byte Pack holds 2
 * doubles instead of 4 floats, and the K-tile is halved so that its shared
 * memory stays within 48 KiB.
 *
 * The store goes through an epilogue (the template parameter Epi, see
 * src/matmul_epilogue.h): PlainStore for the product itself, BiasActResidual
 * for mt_matmul_epilogue's out = act(a @ b + bias) + residual. Both run the
 * same main loop: only the last lines of the kernel differ.
 */
#include "matmul_epilogue.h"
#include "matmul_internal.h"
#include "warptile_loop.h"

/*
 * The main loop (src/warptile_loop.h, shared with the implicit-GEMM
 * convolution): warp tiles, each lane 4 x 4 pieces spread over its warp's
 * tile, two shared-memory stages with the next K-tile's global loads in
 * flight. What is this rung's own is how a K-tile reaches the registers:
 *
 * kATrans / kBTrans: the operand is a column-major (transposed) view. Then
 * A's 16-byte loads run along M (and store straight into the transposed
 * a_tile) and B's along K (stored transposed into b_tile). lda / ldb: the
 * stride between the rows of the Packs (leading_dim: A's row stride, or its
 * column stride when kATrans; likewise for B), kernel parameters rather
 * than view fields so that they take no registers.
 */
template <typename T, typename C, bool kATrans, bool kBTrans, typename Epi>
__global__ void __launch_bounds__(C::kThreads, (warptile_min_blocks<T, C>())) matmul_warptile(mt_tensor out, mt_tensor a, mt_tensor b, int64_t lda, int64_t ldb, bool vec_out, int64_t row_tile_start, int64_t batch_start, Epi epi)
{
    constexpr int W = Pack<T>::kWidth;
    constexpr int BM = C::BM;
    constexpr int BN = C::BN;
    constexpr int BK = kWarptileBk<T, C>;
    constexpr int kThreads = C::kThreads;
    constexpr int MI = C::kMIter;
    constexpr int NI = C::kNIter;
    /* Packs each thread loads per K-tile. */
    constexpr int kAPacks = BM * BK / W / kThreads;
    constexpr int kBPacks = BK * BN / W / kThreads;
    static_assert(kAPacks * W * kThreads == BM * BK && kBPacks * W * kThreads == BK * BN, "whole Packs per thread");
    static_assert(2 * BK * (BM + BN + 2 * kWarptilePad) * sizeof(T) <= 48 * 1024, "static shared memory limit");

    __shared__ __align__(16) T a_tile[2][BK][BM + kWarptilePad];
    __shared__ __align__(16) T b_tile[2][BK][BN + kWarptilePad];

    const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
    const MatrixView<const T> A = matrix_view<const T>(a, start.a);
    const MatrixView<const T> B = matrix_view<const T>(b, start.b);
    const int64_t M = A.rows, N = B.cols, K = A.cols; /* out is M x N */
    const T *a_data = A.data;
    const T *b_data = B.data;

    const int tid = threadIdx.x;
    const int64_t row0 = (row_tile_start + blockIdx.y) * BM;
    const int64_t col0 = (int64_t)blockIdx.x * BN;
    const WarpPlace at = warp_place<C>();

    /* Staging registers for the next K-tile's global loads. */
    Pack<T> a_stage[kAPacks];
    Pack<T> b_stage[kBPacks];

    /* Global -> registers, for K-tile t. */
    auto load_tile = [&](int64_t t) {
        const int64_t k0 = t * BK;
        MT_UNROLL for (int i = 0; i < kAPacks; ++i) {
            const int p = tid + i * kThreads;
            if (kATrans) { /* A(m, k) at k * lda + m: Packs run along m */
                const int r = p / (BM / W), c = (p % (BM / W)) * W;
                a_stage[i] = load_pack(a_data, k0 + r, K, row0 + c, M, lda);
            } else { /* A(m, k) at m * lda + k: Packs run along k */
                const int r = p / (BK / W), c = (p % (BK / W)) * W;
                a_stage[i] = load_pack(a_data, row0 + r, M, k0 + c, K, lda);
            }
        }
        MT_UNROLL for (int i = 0; i < kBPacks; ++i) {
            const int p = tid + i * kThreads;
            if (kBTrans) { /* B(k, n) at n * ldb + k: Packs run along k */
                const int r = p / (BK / W), c = (p % (BK / W)) * W;
                b_stage[i] = load_pack(b_data, col0 + r, N, k0 + c, K, ldb);
            } else { /* B(k, n) at k * ldb + n: Packs run along n */
                const int r = p / (BN / W), c = (p % (BN / W)) * W;
                b_stage[i] = load_pack(b_data, k0 + r, K, col0 + c, N, ldb);
            }
        }
    };
    /* Registers -> shared stage s, a_tile[s][k][m] and b_tile[s][k][n]. */
    auto store_tile = [&](int s) {
        MT_UNROLL for (int i = 0; i < kAPacks; ++i) {
            const int p = tid + i * kThreads;
            if (kATrans) {
                const int r = p / (BM / W), c = (p % (BM / W)) * W;
                *reinterpret_cast<Pack<T> *>(&a_tile[s][r][c]) = a_stage[i];
            } else {
                const int r = p / (BK / W), c = (p % (BK / W)) * W;
                MT_UNROLL for (int w = 0; w < W; ++w)
                    a_tile[s][c + w][r] = a_stage[i].v[w];
            }
        }
        MT_UNROLL for (int i = 0; i < kBPacks; ++i) {
            const int p = tid + i * kThreads;
            if (kBTrans) {
                const int r = p / (BK / W), c = (p % (BK / W)) * W;
                MT_UNROLL for (int w = 0; w < W; ++w)
                    b_tile[s][c + w][r] = b_stage[i].v[w];
            } else {
                const int r = p / (BN / W), c = (p % (BN / W)) * W;
                *reinterpret_cast<Pack<T> *>(&b_tile[s][r][c]) = b_stage[i];
            }
        }
    };

    T acc[MI][NI][4][4];
    warptile_main_loop<T, C>(a_tile, b_tile, (K + BK - 1) / BK, at, load_tile, store_tile, acc);

    /* The epilogue: each run of 4 sums, still in registers, is finished
     * (bias, activation, residual: nothing for PlainStore) and stored. */
    const MatrixView<T> Out = matrix_view<T>(out, start.out);
    const typename Epi::Batch finish = epi.at_batch(batch_start + blockIdx.z);
    MT_UNROLL for (int im = 0; im < MI; ++im)
        MT_UNROLL for (int i = 0; i < 4; ++i) {
            const int64_t row = row0 + at.warp_row + im * 32 + at.lane_row + i;
            MT_UNROLL for (int in = 0; in < NI; ++in) {
                const int64_t col = col0 + at.warp_col + in * 16 + at.lane_col;
                finish.apply(acc[im][in][i], row, col);
                store_row<T, 4>(Out, acc[im][in][i], row, col, vec_out);
            }
        }
}

/* ---- the warptile configurations (what the autotuner chooses from) --------
 * Block tile BM x BN x BK (BK for float32; float64 uses half), warp tile
 * WM x WN, and the blocks per SM the compiler must leave room for
 * (__launch_bounds__: 2 blocks of 256 threads cap a thread at 128
 * registers; 1 lets it take up to 255, fewer warps but no spills). */
using Cfg0 = WarptileConfig<128, 128, 16, 64, 32, 2>; /* 256 threads, 8 x 8 per thread */
using Cfg1 = WarptileConfig<128, 128, 16, 64, 32, 1>; /* the same, up to 255 registers */
using Cfg2 = WarptileConfig<128, 64, 16, 64, 32, 3>;  /* 128 threads, 8 x 8 */
using Cfg3 = WarptileConfig<64, 64, 16, 32, 32, 4>;   /* 128 threads, 4 x 8: many blocks for small products */
using Cfg4 = WarptileConfig<64, 128, 16, 32, 64, 3>;  /* 128 threads, 4 x 16 */
using Cfg5 = WarptileConfig<128, 128, 8, 64, 32, 2>;  /* 256 threads, shorter K-tile */
using Cfg6 = WarptileConfig<64, 64, 32, 32, 32, 4>;   /* 128 threads, long K-tile: fewer barriers */
using Cfg7 = WarptileConfig<256, 128, 8, 64, 64, 1>;  /* 256 threads, 8 x 16 per thread (cuBLAS's float32 shape) */
/* Fragments prefetched (the main loop's second form, src/warptile_loop.h):
 * step k + 1's shared loads in flight during step k's FMAs. */
using Cfg8 = WarptileConfig<256, 128, 8, 64, 64, 1, true>;   /* config 7's tile */
using Cfg9 = WarptileConfig<128, 128, 16, 64, 32, 1, true>;  /* config 1's tile */
using Cfg10 = WarptileConfig<128, 64, 16, 64, 32, 3, true>;  /* config 2's tile: 128 blocks at 1024^3 */
using Cfg11 = WarptileConfig<128, 64, 16, 32, 32, 2, true>;  /* the same tile in 8 warps: 2 a scheduler */

static const char *const kWarptileConfigNames[] = {
    "128x128x16 warp 64x32 (256 threads, 2 blocks/SM)",
    "128x128x16 warp 64x32 (256 threads, 1 block/SM)",
    "128x64x16 warp 64x32 (128 threads)",
    "64x64x16 warp 32x32 (128 threads)",
    "64x128x16 warp 32x64 (128 threads)",
    "128x128x8 warp 64x32 (256 threads)",
    "64x64x32 warp 32x32 (128 threads)",
    "256x128x8 warp 64x64 (256 threads, 1 block/SM)",
    "256x128x8 warp 64x64, fragments prefetched (256 threads, 1 block/SM)",
    "128x128x16 warp 64x32, fragments prefetched (256 threads, 1 block/SM)",
    "128x64x16 warp 64x32, fragments prefetched (128 threads, 3 blocks/SM)",
    "128x64x16 warp 32x32, fragments prefetched (256 threads, 2 blocks/SM)",
    "128x128x16 warp 64x32, fragments prefetched, split K to fill the GPU (256 threads, 1 block/SM)",
    "128x64x16 warp 32x32, fragments prefetched, split K to fill the GPU (256 threads, 2 blocks/SM)",
};
constexpr int kWarptileConfigs = (int)(sizeof(kWarptileConfigNames) / sizeof(kWarptileConfigNames[0]));

int warptile_config_count(void)
{
    return kWarptileConfigs;
}

const char *warptile_config_name(int config)
{
    return config >= 0 && config < kWarptileConfigs ? kWarptileConfigNames[config] : nullptr;
}

/* Without a tuned choice (measured on an H100, bench/run.py): the biggest
 * tile that still gives every SM a block, since bigger tiles load less per
 * multiply-add; the 8 x 16-per-thread tile only for float32 (in float64 its
 * 128 accumulators alone would fill the register file). */
int warptile_default_config(int64_t M, int64_t N, int64_t batches, int64_t sm_count, size_t itemsize)
{
    if (itemsize == sizeof(float) && out_tiles(M, N, batches, 256, 128) >= sm_count)
        return 7;
    if (out_tiles(M, N, batches, 128, 128) >= sm_count)
        return 1;
    if (out_tiles(M, N, batches, 128, 64) >= sm_count)
        return 2;
    return 3;
}

template <typename T, typename C, bool kATrans, bool kBTrans, typename Epi>
static mt_status launch_warptile_typed(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, const Epi &epi)
{
    const int64_t lda = leading_dim(a, kATrans);
    const int64_t ldb = leading_dim(b, kBTrans);
    const bool vec_out = out_vector_ok(out);
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        matmul_warptile<T, C, kATrans, kBTrans, Epi><<<grid, C::kThreads, 0, mt_stream()>>>(out, a, b, lda, ldb, vec_out, y0, b0, epi);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

template <typename T, typename C, typename Epi>
static mt_status launch_warptile_layouts(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, const Epi &epi)
{
    return with_operand_layouts<T>(a, b, "warptile", [&](auto at, auto bt) {
        return launch_warptile_typed<T, C, decltype(at)::value, decltype(bt)::value>(out, a, b, epi);
    });
}

/* ---- split-K ---------------------------------------------------------------
 * A product with few output tiles leaves SMs idle or gives each scheduler a
 * single warp to issue from (1024^3: 64 tiles of 128 x 128 for 132 SMs; a
 * transformer's weight gradient, 384 x 1536 summed over 16384 tokens: 36).
 * Splitting K into S slices makes S times more blocks: slice s computes
 * A[:, s K/S .. (s+1) K/S) @ B[s K/S .. (s+1) K/S, :] into partial[s]. That
 * is a batched product of three views, the slice being the batch dim (its
 * stride is K / S columns of A and K / S rows of B), so it runs the warptile
 * kernel as it is. A second kernel then adds the partials in a fixed order
 * (slice 0, 1, ...: the same result on every run, unlike atomic adds) and
 * applies the epilogue. The price: the partials' round trip through memory
 * (L2 at these sizes) and one more launch. */

/* out(row, col .. col + 3) = epilogue(sum over s of partial[s][row][col ..]):
 * one thread a run of 4 outputs, as the main kernel's epilogue stores them. */
template <typename T, typename Epi>
__global__ void matmul_split_sum(mt_tensor out, const T *partial, int splits, bool vec_out, Epi epi)
{
    const MatrixView<T> Out = matrix_view<T>(out, out.offset);
    const int64_t M = Out.rows, N = Out.cols;
    const int64_t runs = (N + 3) / 4;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M * runs)
        return;
    const int64_t row = i / runs, col = (i % runs) * 4;
    T v[4];
    MT_UNROLL for (int w = 0; w < 4; ++w) {
        v[w] = T(0);
        if (col + w < N)
            for (int s = 0; s < splits; ++s)
                v[w] += partial[(s * M + row) * N + col + w];
    }
    epi.at_batch(0).apply(v, row, col);
    store_row<T, 4>(Out, v, row, col, vec_out);
}

template <typename T, typename Epi>
mt_status launch_split_sum(const mt_tensor &out, const T *partial, int splits, const Epi &epi)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t threads = M * ((N + 3) / 4);
    constexpr int kBlock = 256;
    matmul_split_sum<T, Epi><<<(unsigned)((threads + kBlock - 1) / kBlock), kBlock, 0, mt_stream()>>>(
        out, partial, splits, out_vector_ok(out), epi);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* x's matrix (its last two dims) cut along K into `splits` slices: a 3-d
 * view (slice, rows, cols / splits or rows / splits), the slice dim stepping
 * k_stride * K / splits elements. along_cols: K is x's last dim (A), else
 * its second last (B). */
mt_tensor k_slices(const mt_tensor &x, int splits, bool along_cols)
{
    mt_tensor v = x;
    const int rd = x.ndim - 2, cd = x.ndim - 1;
    const int kd = along_cols ? cd : rd;
    v.ndim = 3;
    v.shape[0] = splits;
    v.strides[0] = x.strides[kd] * (x.shape[kd] / splits);
    v.shape[1] = x.shape[rd];
    v.strides[1] = x.strides[rd];
    v.shape[2] = x.shape[cd];
    v.strides[2] = x.strides[cd];
    v.shape[along_cols ? 2 : 1] = x.shape[kd] / splits;
    return v;
}

/* The shortest slice of K worth a split: below it the second launch and the
 * partials cost more than the blocks gain. The most slices: beyond it the
 * partials (splits x M x N) outgrow what a fuller GPU gains. */
constexpr int64_t kSplitMinK = 64;
constexpr int kSplitMax = 16;

/* How many slices config C cuts K into for an M x N x K product: doubling
 * from 1 while the grid still fills less than 90% of the GPU's block slots
 * (SMs x the config's blocks an SM), the slices stay 16-byte aligned (K a
 * multiple of splits Packs) and at least kSplitMinK long. 1: no split. */
template <typename T, typename C>
static int split_count(int64_t M, int64_t N, int64_t K)
{
    constexpr int W = Pack<T>::kWidth;
    const int64_t tiles = out_tiles(M, N, 1, C::BM, C::BN);
    const int64_t slots = (int64_t)mt_sm_count() * C::kMinBlocks;
    int splits = 1;
    while (splits < kSplitMax && 10 * tiles * splits < 9 * slots && K % (2 * splits * W) == 0 &&
           K / (2 * splits) >= kSplitMinK)
        splits *= 2;
    return splits;
}

/* Config C's tile with K split split_count ways, for a single product (no
 * batch dims); anything else, or a product that needs no split, runs C
 * unsplit. */
template <typename T, typename C, typename Epi>
static mt_status launch_warptile_split(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, const Epi &epi)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t K = a.shape[a.ndim - 1];
    const int splits = shape_numel(out.shape, out.ndim - 2) == 1 ? split_count<T, C>(M, N, K) : 1;
    if (splits == 1)
        return launch_warptile_layouts<T, C>(out, a, b, epi);
    DeviceScratch scratch;
    CUDA_CHECK(scratch.allocate((size_t)(splits * M * N) * sizeof(T)));
    const mt_tensor partial = split_partials(out, splits, scratch.as<T>());
    const mt_tensor a_slices = k_slices(a, splits, true);
    const mt_tensor b_slices = k_slices(b, splits, false);
    MT_TRY((launch_warptile_layouts<T, C>(partial, a_slices, b_slices, PlainStore{})));
    MT_TRY(launch_split_sum<T>(out, scratch.as<T>(), splits, epi));
    CUDA_CHECK(scratch.release());
    return MT_OK;
}

template <typename T, typename Epi>
mt_status launch_warptile_epilogue(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int config,
                                   const Epi &epi)
{
    switch (config) {
    case 0:
        return launch_warptile_layouts<T, Cfg0>(out, a, b, epi);
    case 1:
        return launch_warptile_layouts<T, Cfg1>(out, a, b, epi);
    case 2:
        return launch_warptile_layouts<T, Cfg2>(out, a, b, epi);
    case 3:
        return launch_warptile_layouts<T, Cfg3>(out, a, b, epi);
    case 4:
        return launch_warptile_layouts<T, Cfg4>(out, a, b, epi);
    case 5:
        return launch_warptile_layouts<T, Cfg5>(out, a, b, epi);
    case 6:
        return launch_warptile_layouts<T, Cfg6>(out, a, b, epi);
    case 7:
        return launch_warptile_layouts<T, Cfg7>(out, a, b, epi);
    case 8:
        return launch_warptile_layouts<T, Cfg8>(out, a, b, epi);
    case 9:
        return launch_warptile_layouts<T, Cfg9>(out, a, b, epi);
    case 10:
        return launch_warptile_layouts<T, Cfg10>(out, a, b, epi);
    case 11:
        return launch_warptile_layouts<T, Cfg11>(out, a, b, epi);
    case 12:
        return launch_warptile_split<T, Cfg9>(out, a, b, epi);
    case 13:
        return launch_warptile_split<T, Cfg11>(out, a, b, epi);
    default:
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_matmul", "warptile config %d has no kernel", config);
    }
}

template <typename T>
mt_status launch_warptile(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int config)
{
    return launch_warptile_epilogue<T>(out, a, b, config, PlainStore{});
}

template mt_status launch_warptile<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &, int);
template mt_status launch_warptile<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &, int);
template mt_status launch_warptile_epilogue<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &, int,
                                                   const BiasActResidual<float> &);
template mt_status launch_warptile_epilogue<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &, int,
                                                    const BiasActResidual<double> &);
/* The split sum for the TF32 rung's split-K (src/matmul_tf32_mma.cu). */
template mt_status launch_split_sum<float, PlainStore>(const mt_tensor &, const float *, int, const PlainStore &);
template mt_status launch_split_sum<float, BiasActResidual<float>>(const mt_tensor &, const float *, int,
                                                                   const BiasActResidual<float> &);
