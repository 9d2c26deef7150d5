/*
 * matmul_pipelined.cu: rung 8 of the matmul ladder. Rung 7 (warptile) is
 * what the profile in docs/performance.md measured against cuBLAS: the same
 * FFMA count and occupancy, but fewer instructions issued per cycle, its
 * warps waiting on the loads that feed each step. This rung keeps rung 7's
 * warp tiles and changes how data reaches them, in two places:
 *
 *   1. global -> shared with cp.async (src/async_copy.h), kStages deep. The
 *      copies of K-tile t + kStages - 1 are in flight while the block
 *      computes on tile t; no staging registers, no store instructions, and
 *      the edges are zero-filled by the copy itself.
 *   2. shared -> registers one step ahead: while the FMAs of step k run, the
 *      fragments of step k + 1 are loaded into a second set of registers
 *      (for the last step of a tile, step 0 of the next one), so an FMA never
 *      waits for the load just before it.
 *
 * One barrier per K-tile, placed before the last step: by then every warp
 * has its last fragments of the tile in registers, so the stage may be
 * overwritten, and the next tile has landed, so its first fragments may be
 * read.
 *
 * The tile in shared memory is k-major (tile[k][m], tile[k][n]) so that a
 * lane reads 4 consecutive rows or columns with one 16-byte load. An operand
 * stored along K (A row-major, or B column-major) therefore has to be
 * transposed on the way: 4-byte copies, one element each, to its transposed
 * place. An operand stored along M or N is copied in 16-byte Packs.
 *
 * Operands: as rung 7 (gemm_operand_ok; float32 may be column-major).
 * float64 runs the same templates with half the K-tile (a Pack holds 2
 * doubles, and a transposing copy moves 8 bytes).
 */
#include "async_copy.h"
#include "matmul_epilogue.h"
#include "matmul_internal.h"

template <int BM_, int BN_, int BK_, int WM_, int WN_, int kStages_, int kMinBlocks_>
struct PipelinedConfig {
    static constexpr int BM = BM_;
    static constexpr int BN = BN_;
    static constexpr int BK = BK_; /* for float; float64 halves it */
    static constexpr int WM = WM_;
    static constexpr int WN = WN_;
    static constexpr int kStages = kStages_;
    static constexpr int kMinBlocks = kMinBlocks_;
    static constexpr int kWarps = (BM / WM) * (BN / WN);
    static constexpr int kThreads = kWarps * 32;
    static constexpr int kMIter = WM / 32; /* 4 x 4 pieces per lane, as in warptile */
    static constexpr int kNIter = WN / 16;
    static_assert(kStages >= 2, "at least one stage in flight while another is computed on");
    static_assert(BM % WM == 0 && BN % WN == 0, "whole warp tiles");
    static_assert(WM % 32 == 0 && WN % 16 == 0, "a warp's 8 x 4 lanes cover 32 x 16 per piece");
};

/* Row padding of a k-major tile, in elements: keeps rows 16-byte aligned and
 * spreads a transposing copy's 4-byte stores over the banks. */
constexpr int kPipelinedPad = 4;

template <typename T, typename C>
constexpr int pipelined_min_blocks()
{
    return sizeof(T) == sizeof(double) ? 1 : C::kMinBlocks;
}

template <typename T, typename C, bool kATrans, bool kBTrans, typename Epi>
__global__ void __launch_bounds__(C::kThreads, (pipelined_min_blocks<T, C>())) matmul_pipelined(mt_tensor out, mt_tensor a, mt_tensor b, int64_t lda, int64_t ldb, bool vec_out, int64_t row_tile_start, int64_t batch_start, Epi epi)
{
    constexpr int W = Pack<T>::kWidth;
    constexpr int BM = C::BM;
    constexpr int BN = C::BN;
    constexpr int BK = C::BK * 4 / (int)sizeof(T);
    constexpr int S = C::kStages;
    constexpr int kThreads = C::kThreads;
    constexpr int MI = C::kMIter;
    constexpr int NI = C::kNIter;
    constexpr int kE = (int)sizeof(T);
    static_assert(S * BK * (BM + BN + 2 * kPipelinedPad) * sizeof(T) <= 48 * 1024, "static shared memory limit");
    static_assert(BK % 2 == 0, "the fragments' two sets alternate, so step 0 of every tile uses set 0");
    /* Copies per thread per K-tile: elements for an operand stored along K,
     * Packs for one stored along M or N. */
    constexpr int kACopies = kATrans ? BM * BK / W / kThreads : BM * BK / kThreads;
    constexpr int kBCopies = kBTrans ? BK * BN / kThreads : BK * BN / W / kThreads;
    static_assert(kACopies * kThreads * (kATrans ? W : 1) == BM * BK, "whole copies per thread (A)");
    static_assert(kBCopies * kThreads * (kBTrans ? 1 : W) == BK * BN, "whole copies per thread (B)");

    __shared__ __align__(16) T a_tile[S][BK][BM + kPipelinedPad];
    __shared__ __align__(16) T b_tile[S][BK][BN + kPipelinedPad];

    const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
    const MatrixView<const T> A = matrix_view<const T>(a, start.a);
    const MatrixView<const T> B = matrix_view<const T>(b, start.b);
    const int64_t M = A.rows, N = B.cols, K = A.cols;
    const T *a_data = A.data;
    const T *b_data = B.data;

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int64_t row0 = (row_tile_start + blockIdx.y) * BM;
    const int64_t col0 = (int64_t)blockIdx.x * BN;
    const int warp_row = (warp / (BN / C::WN)) * C::WM;
    const int warp_col = (warp % (BN / C::WN)) * C::WN;
    const int lane_row = (lane / 4) * 4;
    const int lane_col = (lane % 4) * 4;

    /* Issues the copies of the K-tile at k0 into stage s. Consecutive
     * threads take consecutive addresses in global memory (coalesced). */
    auto issue_tile = [&](int64_t k0, int s) {
        MT_UNROLL for (int i = 0; i < kACopies; ++i) {
            const int p = tid + i * kThreads;
            if (kATrans) { /* A(m, k) at k * lda + m: Packs along m, straight into a_tile[k][m] */
                const int r = p / (BM / W), c = (p % (BM / W)) * W;
                async_copy_row16(a_tile[s][r], c, a_data, k0 + r, k0 + r < K, row0 + c, M, lda);
            } else { /* A(m, k) at m * lda + k: element (m, k) goes to a_tile[k][m] */
                const int r = p / BK, c = p % BK;
                const bool inside = row0 + r < M && k0 + c < K;
                async_copy<kE>(&a_tile[s][c][r], inside ? a_data + (row0 + r) * lda + k0 + c : a_data, inside ? kE : 0);
            }
        }
        MT_UNROLL for (int i = 0; i < kBCopies; ++i) {
            const int p = tid + i * kThreads;
            if (kBTrans) { /* B(k, n) at n * ldb + k: element (k, n) goes to b_tile[k][n] */
                const int r = p / BK, c = p % BK;
                const bool inside = col0 + r < N && k0 + c < K;
                async_copy<kE>(&b_tile[s][c][r], inside ? b_data + (col0 + r) * ldb + k0 + c : b_data, inside ? kE : 0);
            } else { /* B(k, n) at k * ldb + n: Packs along n */
                const int r = p / (BN / W), c = (p % (BN / W)) * W;
                async_copy_row16(b_tile[s][r], c, b_data, k0 + r, k0 + r < K, col0 + c, N, ldb);
            }
        }
    };

    /* Two sets of fragments: step k computes from set k % 2 while set
     * (k + 1) % 2 is being loaded. */
    T a_frag[2][MI][4];
    T b_frag[2][NI][4];
    auto load_fragments = [&](int set, int s, int k) {
        MT_UNROLL for (int im = 0; im < MI; ++im)
            MT_UNROLL for (int v = 0; v < 4; v += W) {
                const Pack<T> p = *reinterpret_cast<const Pack<T> *>(&a_tile[s][k][warp_row + im * 32 + lane_row + v]);
                MT_UNROLL for (int w = 0; w < W; ++w)
                    a_frag[set][im][v + w] = p.v[w];
            }
        MT_UNROLL for (int in = 0; in < NI; ++in)
            MT_UNROLL for (int v = 0; v < 4; v += W) {
                const Pack<T> p = *reinterpret_cast<const Pack<T> *>(&b_tile[s][k][warp_col + in * 16 + lane_col + v]);
                MT_UNROLL for (int w = 0; w < W; ++w)
                    b_frag[set][in][v + w] = p.v[w];
            }
    };

    T acc[MI][NI][4][4];
    MT_UNROLL for (int im = 0; im < MI; ++im)
        MT_UNROLL for (int in = 0; in < NI; ++in)
            MT_UNROLL for (int i = 0; i < 4; ++i)
                MT_UNROLL for (int j = 0; j < 4; ++j)
                    acc[im][in][i][j] = T(0);

    const int64_t k_tiles = (K + BK - 1) / BK;
    /* Prologue: the first S - 1 tiles in flight, one group each (empty past
     * the end of K, so that the group count stays what the waits expect). */
    MT_UNROLL for (int s = 0; s < S - 1; ++s) {
        if (s < k_tiles)
            issue_tile((int64_t)s * BK, s);
        async_commit();
    }
    /* Tile 0 has landed for this thread's copies; the barrier makes every
     * thread's copies visible. */
    async_wait<S - 2>();
    __syncthreads();
    if (k_tiles > 0) /* K == 0: nothing to load; the sums stay 0 */
        load_fragments(0, 0, 0);

    /* The loop count is the same for every thread: all reach each barrier. */
    for (int64_t t = 0; t < k_tiles; ++t) {
        const int s = (int)(t % S);
        /* Stage (t + S - 1) % S was last read in iteration t - 1, before its
         * barrier: free to overwrite. */
        const int64_t next = t + S - 1;
        if (next < k_tiles)
            issue_tile(next * BK, (int)(next % S));
        async_commit();
        MT_UNROLL for (int k = 0; k < BK; ++k) {
            if (k == BK - 1) {
                /* Tile t + 1 has landed (all but the newest S - 2 groups), and
                 * every warp holds its last fragments of tile t. */
                async_wait<S - 2>();
                __syncthreads();
            }
            if (k + 1 < BK)
                load_fragments((k + 1) % 2, s, k + 1);
            else if (t + 1 < k_tiles)
                load_fragments((k + 1) % 2, (int)((t + 1) % S), 0);
            MT_UNROLL for (int im = 0; im < MI; ++im)
                MT_UNROLL for (int in = 0; in < NI; ++in)
                    MT_UNROLL for (int i = 0; i < 4; ++i)
                        MT_UNROLL for (int j = 0; j < 4; ++j)
                            acc[im][in][i][j] += a_frag[k % 2][im][i] * b_frag[k % 2][in][j];
        }
    }
    /* Copies of tiles past K were never issued; nothing is left in flight
     * but empty groups. */
    async_wait<0>();

    /* The epilogue, as warptile's (src/matmul_epilogue.h): nothing for
     * PlainStore, bias, activation and residual for BiasActResidual. */
    const MatrixView<T> Out = matrix_view<T>(out, start.out);
    const typename Epi::Batch finish = epi.at_batch(batch_start + blockIdx.z);
    MT_UNROLL for (int im = 0; im < MI; ++im)
        MT_UNROLL for (int i = 0; i < 4; ++i) {
            const int64_t row = row0 + warp_row + im * 32 + lane_row + i;
            MT_UNROLL for (int in = 0; in < NI; ++in) {
                const int64_t col = col0 + warp_col + in * 16 + lane_col;
                finish.apply(acc[im][in][i], row, col);
                store_row<T, 4>(Out, acc[im][in][i], row, col, vec_out);
            }
        }
}

/* ---- the pipelined configurations ------------------------------------------
 * Block tile BM x BN x BK (float32; float64 halves BK), warp tile WM x WN,
 * stages in flight, and the blocks per SM __launch_bounds__ leaves room for.
 * Static shared memory stays within 48 KiB: S x BK x (BM + BN + 8) x 4 bytes. */
using Pipe0 = PipelinedConfig<128, 128, 8, 64, 32, 4, 2>;  /* 256 threads, 4 stages of 8 */
using Pipe1 = PipelinedConfig<128, 128, 8, 64, 32, 4, 1>;  /* the same, up to 255 registers */
using Pipe2 = PipelinedConfig<256, 128, 8, 64, 64, 3, 1>;  /* cuBLAS's float32 tile, 3 stages */
using Pipe3 = PipelinedConfig<64, 64, 16, 32, 32, 3, 4>;   /* 128 threads: many blocks for small products */
using Pipe4 = PipelinedConfig<128, 128, 16, 64, 32, 2, 1>; /* warptile's config 1 with cp.async: the two compared */

static const char *const kPipelinedConfigNames[] = {
    "pipelined 128x128x8 warp 64x32, 4 stages (256 threads, 2 blocks/SM)",
    "pipelined 128x128x8 warp 64x32, 4 stages (256 threads, 1 block/SM)",
    "pipelined 256x128x8 warp 64x64, 3 stages (256 threads, 1 block/SM)",
    "pipelined 64x64x16 warp 32x32, 3 stages (128 threads)",
    "pipelined 128x128x16 warp 64x32, 2 stages (256 threads, 1 block/SM)",
};
constexpr int kPipelinedConfigs = (int)(sizeof(kPipelinedConfigNames) / sizeof(kPipelinedConfigNames[0]));

int pipelined_config_count(void)
{
    return kPipelinedConfigs;
}

const char *pipelined_config_name(int config)
{
    return config >= 0 && config < kPipelinedConfigs ? kPipelinedConfigNames[config] : nullptr;
}

/* Without a tuned choice: the biggest tile that still gives every SM a
 * block (the 256 x 128 tile only for float32, as in warptile). */
int pipelined_default_config(int64_t M, int64_t N, int64_t batches, int64_t sm_count, size_t itemsize)
{
    if (itemsize == sizeof(float) && out_tiles(M, N, batches, 256, 128) >= sm_count)
        return 2;
    if (out_tiles(M, N, batches, 128, 128) >= sm_count)
        return 1;
    return 3;
}

template <typename T, typename C, bool kATrans, bool kBTrans, typename Epi>
static mt_status launch_pipelined_typed(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, const Epi &epi)
{
    const int64_t lda = leading_dim(a, kATrans);
    const int64_t ldb = leading_dim(b, kBTrans);
    const bool vec_out = out_vector_ok(out);
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        matmul_pipelined<T, C, kATrans, kBTrans, Epi><<<grid, C::kThreads, 0, mt_stream()>>>(out, a, b, lda, ldb, vec_out, y0, b0, epi);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

template <typename T, typename C, typename Epi>
static mt_status launch_pipelined_layouts(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, const Epi &epi)
{
    return with_operand_layouts<T>(a, b, "pipelined", [&](auto at, auto bt) {
        return launch_pipelined_typed<T, C, decltype(at)::value, decltype(bt)::value>(out, a, b, epi);
    });
}

template <typename T, typename Epi>
mt_status launch_pipelined_epilogue(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int config,
                                    const Epi &epi)
{
    switch (config) {
    case 0:
        return launch_pipelined_layouts<T, Pipe0>(out, a, b, epi);
    case 1:
        return launch_pipelined_layouts<T, Pipe1>(out, a, b, epi);
    case 2:
        return launch_pipelined_layouts<T, Pipe2>(out, a, b, epi);
    case 3:
        return launch_pipelined_layouts<T, Pipe3>(out, a, b, epi);
    case 4:
        return launch_pipelined_layouts<T, Pipe4>(out, a, b, epi);
    default:
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_matmul", "pipelined config %d has no kernel", config);
    }
}

template <typename T>
mt_status launch_pipelined(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int config)
{
    return launch_pipelined_epilogue<T>(out, a, b, config, PlainStore{});
}

template mt_status launch_pipelined<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &, int);
template mt_status launch_pipelined<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &, int);
template mt_status launch_pipelined_epilogue<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &, int,
                                                    const BiasActResidual<float> &);
template mt_status launch_pipelined_epilogue<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &, int,
                                                     const BiasActResidual<double> &);
