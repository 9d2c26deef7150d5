/*
 * matmul_tf32_mma.cu: the third TF32 rung, what mt_matmul_tf32 runs: the
 * tensor cores' own instruction (mma.sync.m16n8k8, src/mma_tf32.h) in place
 * of WMMA.
 *
 * The WMMA rung (matmul_tf32_pipelined.cu) reached 0.18x cuBLAS's TF32 on
 * the H100. Its profile (ncu, tf32 4096^3) shows why: a fragment's layout is
 * hidden, so its loads are scalar loads from padded rows, and the output
 * goes through shared memory. With mma.sync the layouts are the PTX ISA's,
 * and this rung changes four things:
 *
 *   1. A's fragments come from shared memory by ldmatrix.x4, one
 *      instruction for a 16 x 8 fragment (4 registers a lane) instead of 4
 *      loads; B's by two 32-bit loads a lane;
 *   2. shared memory is swizzled instead of padded: the 16-byte chunk c of a
 *      tile row r is stored at chunk c ^ f(r), so that the 8 rows an
 *      ldmatrix phase reads (A) and the 4 k-rows x 8 columns a B load reads
 *      hit 32 different banks, while every cp.async still writes 16 whole
 *      bytes (the swizzle moves chunks, never splits them);
 *   3. K steps of 32 with 3-4 cp.async stages in dynamic shared memory
 *      (96-144 KiB, past the 48 KiB of static arrays), and 8 warps a block,
 *      each with a 64 x 32 or 64 x 64 tile of out: 32-64 float accumulators
 *      a lane, 16-32 mmas between fragment loads;
 *   4. each lane stores its accumulators straight to out (it knows which
 *      elements they are), with the edges checked, through an epilogue Epi
 *      (src/matmul_epilogue.h): PlainStore for the product alone,
 *      BiasActResidual for mt_matmul_tf32_epilogue's bias, activation and
 *      residual, applied to the sums while they are still in registers.
 *
 * Operands are rounded to TF32 (cvt.rna) as the fragments are loaded, as
 * cuBLAS does. Blocks walk out's tiles in groups of kGroupRows tile rows
 * (column by column inside a group), so that the blocks running at once
 * share A's rows and B's columns in L2.
 *
 * Operands: row-major or column-major (a transposed view of a row-major
 * matrix, such as F.linear's weight.T or the backward's grad.T), with
 * aligned rows or columns (gemm_operand_ok); mt_matmul_tf32 copies only
 * other strides. A column-major operand is staged in the layout it has in
 * memory, so that each cp.async still copies 16 contiguous bytes:
 *
 *   A row-major:    BM rows of BK (m-major), a_col's swizzle, ldmatrix;
 *   A column-major: BK rows of BM (k-major), b_col's swizzle, a lane reads
 *                   its 4 elements with 32-bit loads (as B row-major's);
 *   B row-major:    BK rows of BN (k-major), b_col's swizzle, 32-bit loads;
 *   B column-major: BN rows of BK (n-major), a_col's swizzle: B's fragment
 *                   is then laid out as A's, and one ldmatrix.x4 gives a
 *                   lane its elements of two fragments.
 *
 * Sizes off the tile: the copies zero-fill rows, columns and K past the
 * edges (zeros add nothing to a product), and the stores skip what lies
 * outside out.
 */
#include <type_traits>

#include "async_copy.h"
#include "matmul_epilogue.h"
#include "matmul_internal.h"
#include "mma_tf32.h"

template <int BM_, int BN_, int WM_, int WN_, int kStages_, int kMinBlocks_, int kKUnroll_, bool kPairB_ = false>
struct Tf32MmaTiles {
    static constexpr int BM = BM_;
    static constexpr int BN = BN_;
    static constexpr int BK = 32;          /* 8 chunks of 16 bytes a row of A's tile */
    static constexpr int kStages = kStages_;
    static constexpr int WM = WM_;         /* a warp's tile of out */
    static constexpr int WN = WN_;
    static constexpr int kWarps = (BM / WM) * (BN / WN);
    static constexpr int kThreads = kWarps * 32;
    /* Blocks an SM should hold at once: 2 caps a lane at 128 registers. */
    static constexpr int kMinBlocks = kMinBlocks_;
    /* How many of a stage's 4 K steps of 8 nvcc unrolls: 4 lets it load the
     * next step's fragments during this step's mmas, but it then holds all
     * four steps' fragments at once (more registers); 1 keeps one step's. */
    static constexpr int kKUnroll = kKUnroll_;
    /* Paired B fragments (see pair_b below). */
    static constexpr bool kPairB = kPairB_;
    static constexpr int kMFrags = WM / 16; /* mma fragments a warp: 16 x 8 each */
    static constexpr int kNFrags = WN / 8;
    static constexpr int kStageFloats = BM * BK + BK * BN;
    static constexpr size_t kSharedBytes = (size_t)kStages * kStageFloats * sizeof(float);
    static_assert(BN % 32 == 0, "B's swizzle flips chunk bits 1-2: rows of at least 8 chunks");
    static_assert(!kPairB || kNFrags % 2 == 0, "paired B fragments come in twos");
};

/* Two floats read as one 8-byte load (LDS.64). */
struct alignas(8) FloatPair {
    float v[2];
};

/* Where column c of row r of A's stage lies in that row (BK = 32 floats):
 * the 16-byte chunk c / 4 moved to chunk (c / 4) ^ (r % 8). ldmatrix reads
 * one chunk of 8 consecutive rows in one phase: 8 different chunks, 32
 * banks. */
MT_DEVICE int a_col(int r, int c)
{
    return (((c >> 2) ^ (r & 7)) << 2) | (c & 3);
}

/* Where column n of row k of B's stage lies in that row (BN floats): chunk
 * n / 4 moved to chunk (n / 4) ^ 2 (k % 4). A B fragment load reads rows
 * k0 + t (t = 0..3) at columns n0 + g (g = 0..7, n0 a multiple of 8):
 * unswizzled, all four rows start at bank 0 (a 4-way conflict); swizzled,
 * each row's two chunks land on 8 banks of their own. */
MT_DEVICE int b_col(int k, int n)
{
    return (((n >> 2) ^ ((k & 3) << 1)) << 2) | (n & 3);
}

/* The 16 bytes of matrix row `row` from column `col` (of `cols`) into dst:
 * async_copy_row16, whose edge path copies element by element. A single
 * 16-byte cp.async with a short src-size (what this rung did before) reads
 * only the bytes inside, but compute-sanitizer checks all 16 source bytes, so
 * on a matrix of fewer than 4 floats (a 1 x 1 product) it reported a read
 * past the allocation (H100 checkpoint of 2026-11-28). Inside the matrix, the
 * main loop's case, the source stays 16-byte aligned: col is a multiple of 4
 * and the operands have aligned rows (gemm_operand_ok). */
MT_DEVICE void copy_chunk16(float *dst, const float *data, int64_t row, bool row_ok, int64_t col, int64_t cols,
                            int64_t ld)
{
    async_copy_row16(dst, 0, data, row, row_ok, col, cols, ld);
}

/* Tile rows per group of the block order (see the file comment). */
constexpr int kGroupRows = 8;

/* kATrans / kBTrans: a / b is column-major (lda / ldb is then the stride
 * between its columns). */
template <typename C, bool kATrans, bool kBTrans, typename Epi>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    matmul_tf32_mma(mt_tensor out, mt_tensor a, mt_tensor b, int64_t lda, int64_t ldb, bool vec_out,
                    int64_t row_tile_start, int64_t batch_start, Epi epi)
{
#if defined(MT_EMULATOR) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
    static_assert(!(C::kPairB && (kATrans || kBTrans)), "the paired-B tiles take row-major operands");
    static_assert(!kBTrans || C::kNFrags % 2 == 0, "B column-major: one ldmatrix.x4 for two fragments");
    static_assert(!kATrans || C::BM % 32 == 0, "A's k-major rows: at least 8 chunks for b_col's swizzle");
    constexpr int S = C::kStages;
    constexpr int kAChunks = C::BM * C::BK / 4 / C::kThreads; /* 16-byte copies a thread per stage */
    constexpr int kBChunks = C::BK * C::BN / 4 / C::kThreads;
    static_assert(kAChunks * 4 * C::kThreads == C::BM * C::BK && kBChunks * 4 * C::kThreads == C::BK * C::BN,
                  "whole copies per thread");
    extern __shared__ __align__(128) unsigned char shared_bytes[];
    float *stages = reinterpret_cast<float *>(&shared_bytes[0]); /* S x (A: BM x BK, then B: BK x BN) */

    const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
    const MatrixView<const float> A = matrix_view<const float>(a, start.a);
    const MatrixView<const float> B = matrix_view<const float>(b, start.b);
    const int64_t M = A.rows, N = B.cols, K = A.cols;
    const float *a_data = A.data;
    const float *b_data = B.data;

    /* This block's tile: the blocks of this launch, numbered along x first,
     * walk groups of kGroupRows tile rows, down each column of a group. */
    const int64_t chunk_rows = gridDim.y;
    const int64_t id = (int64_t)blockIdx.y * gridDim.x + blockIdx.x;
    const int64_t per_group = (int64_t)kGroupRows * gridDim.x;
    const int64_t group_row = id / per_group * kGroupRows;
    const int64_t rows_here = chunk_rows - group_row < kGroupRows ? chunk_rows - group_row : kGroupRows;
    const int64_t tile_row = row_tile_start + group_row + id % per_group % rows_here;
    const int64_t tile_col = id % per_group / rows_here;
    const int64_t row0 = tile_row * C::BM;
    const int64_t col0 = tile_col * C::BN;

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int warp_row = (warp / (C::BN / C::WN)) * C::WM;
    const int warp_col = (warp % (C::BN / C::WN)) * C::WN;

    /* The copies of the K-tile at k0 into stage s; consecutive threads take
     * consecutive chunks of a row as memory holds it (coalesced reads of
     * global memory): a row of A's or B's tile, or for a column-major
     * operand a column (see the file comment for the stage layouts). */
    auto issue_tile = [&](int64_t k0, int s) {
        float *a_stage = stages + s * C::kStageFloats;
        float *b_stage = a_stage + C::BM * C::BK;
        MT_UNROLL for (int i = 0; i < kAChunks; ++i) {
            const int p = tid + i * C::kThreads;
            if constexpr (kATrans) { /* row r: A[row0 .., k0 + r], 4 m a chunk */
                const int r = p / (C::BM / 4), c = (p % (C::BM / 4)) * 4;
                copy_chunk16(a_stage + r * C::BM + b_col(r, c), a_data, k0 + r, k0 + r < K, row0 + c, M, lda);
            } else {
                const int r = p / (C::BK / 4), c = (p % (C::BK / 4)) * 4;
                copy_chunk16(a_stage + r * C::BK + a_col(r, c), a_data, row0 + r, row0 + r < M, k0 + c, K, lda);
            }
        }
        MT_UNROLL for (int i = 0; i < kBChunks; ++i) {
            const int p = tid + i * C::kThreads;
            if constexpr (kBTrans) { /* row r: B[k0 .., col0 + r], 4 k a chunk */
                const int r = p / (C::BK / 4), c = (p % (C::BK / 4)) * 4;
                copy_chunk16(b_stage + r * C::BK + a_col(r, c), b_data, col0 + r, col0 + r < N, k0 + c, K, ldb);
            } else {
                const int r = p / (C::BN / 4), c = (p % (C::BN / 4)) * 4;
                copy_chunk16(b_stage + r * C::BN + b_col(r, c), b_data, k0 + r, k0 + r < K, col0 + c, N, ldb);
            }
        }
    };

    float acc[C::kMFrags][C::kNFrags][4];
    MT_UNROLL for (int i = 0; i < C::kMFrags; ++i)
        MT_UNROLL for (int j = 0; j < C::kNFrags; ++j)
            MT_UNROLL for (int e = 0; e < 4; ++e)
                acc[i][j][e] = 0.0f;

    const int64_t k_tiles = (K + C::BK - 1) / C::BK;
    /* Prologue: tiles 0 .. S - 2 in flight, one group each (an empty group
     * past the end of K, so that the waits count the same groups). */
    for (int s = 0; s < S - 1; ++s) {
        if (s < k_tiles)
            issue_tile((int64_t)s * C::BK, s);
        async_commit();
    }
    /* The loop count is the same for every thread: all reach each barrier. */
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
        /* Tile kt has landed for this thread's copies (all but the newest
         * S - 2 groups); the barrier makes every thread's copies visible, and
         * tells that every warp is done with tile kt - 1's stage. */
        async_wait<S - 2>();
        __syncthreads();
        const int64_t next = kt + S - 1;
        if (next < k_tiles)
            issue_tile(next * C::BK, (int)(next % S)); /* into tile kt - 1's stage */
        async_commit();

        const float *a_stage = stages + (int)(kt % S) * C::kStageFloats;
        const float *b_stage = a_stage + C::BM * C::BK;
#ifdef __CUDACC__
#pragma unroll(C::kKUnroll)
#endif
        for (int kk = 0; kk < C::BK; kk += 8) {
            /* A: lane l names row l % 8 (+ 8 for matrices 1 and 3) and k
             * half l / 16 of its fragment; it receives a[0..3] in mma order. */
            uint32_t a_frag[C::kMFrags][4];
            MT_UNROLL for (int i = 0; i < C::kMFrags; ++i) {
                if constexpr (kATrans) {
                    /* k-major: a[e] = A[m + 8 (e % 2)][kk + t + 4 (e / 2)] from
                     * row k, column m. The 4 k-rows x 8 columns of one load
                     * hit 32 banks (b_col, as B's loads below). */
                    const int m = warp_row + i * 16 + g;
                    MT_UNROLL for (int e = 0; e < 4; ++e) {
                        const int k = kk + t + (e / 2) * 4, mm = m + (e % 2) * 8;
                        a_frag[i][e] = tf32_bits(a_stage[k * C::BM + b_col(k, mm)]);
                    }
                } else {
                    const int r = warp_row + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
                    ldmatrix_x4(a_frag[i], a_stage + r * C::BK + a_col(r, kk + (lane >> 4) * 4));
                    MT_UNROLL for (int e = 0; e < 4; ++e)
                        a_frag[i][e] = tf32_round_bits(a_frag[i][e]);
                }
            }
            /* B: b[0] = B[kk + t][n], b[1] = B[kk + t + 4][n], n = column g
             * of the fragment. Paired (kPairB): fragments j and j + 1 take the
             * even and the odd columns of 16 (column g of fragment j is
             * n0 + 2g + j % 2), so that a lane reads both fragments' elements
             * of a row with one 8-byte load; the stores below put the
             * columns back. */
            uint32_t b_frag[C::kNFrags][2];
            if constexpr (kBTrans) {
                /* n-major: B's 8 x 8 fragment is an 8 (n) x 8 (k) block laid
                 * out as A's, so ldmatrix.x4 loads fragments j and j + 1:
                 * matrices (n 0-7, k 0-3), (n 0-7, k 4-7), (n 8-15, k 0-3),
                 * (n 8-15, k 4-7) give b[j][0], b[j][1], b[j+1][0], b[j+1][1]
                 * (element (g, t) of the first is B[kk + t][n0 + g]). */
                MT_UNROLL for (int j = 0; j < C::kNFrags; j += 2) {
                    const int n = warp_col + j * 8 + (lane >> 4) * 8 + (lane & 7);
                    uint32_t r[4];
                    ldmatrix_x4(r, b_stage + n * C::BK + a_col(n, kk + ((lane >> 3) & 1) * 4));
                    b_frag[j][0] = tf32_round_bits(r[0]);
                    b_frag[j][1] = tf32_round_bits(r[1]);
                    b_frag[j + 1][0] = tf32_round_bits(r[2]);
                    b_frag[j + 1][1] = tf32_round_bits(r[3]);
                }
            } else if constexpr (C::kPairB) {
                MT_UNROLL for (int j = 0; j < C::kNFrags; j += 2) {
                    const int n = warp_col + j * 8 + 2 * g;
                    MT_UNROLL for (int h = 0; h < 2; ++h) {
                        const int k = kk + t + 4 * h;
                        const FloatPair p = *reinterpret_cast<const FloatPair *>(b_stage + k * C::BN + b_col(k, n));
                        b_frag[j][h] = tf32_bits(p.v[0]);
                        b_frag[j + 1][h] = tf32_bits(p.v[1]);
                    }
                }
            } else {
                MT_UNROLL for (int j = 0; j < C::kNFrags; ++j) {
                    const int n = warp_col + j * 8 + g;
                    b_frag[j][0] = tf32_bits(b_stage[(kk + t) * C::BN + b_col(kk + t, n)]);
                    b_frag[j][1] = tf32_bits(b_stage[(kk + t + 4) * C::BN + b_col(kk + t + 4, n)]);
                }
            }
            MT_UNROLL for (int i = 0; i < C::kMFrags; ++i)
                MT_UNROLL for (int j = 0; j < C::kNFrags; ++j)
                    mma_tf32_16x8x8(acc[i][j], a_frag[i], b_frag[j]);
        }
    }
    /* Only empty groups can be left; nothing lands after this. */
    async_wait<0>();

    /* Lane (g, t) holds out[g][2t], [g][2t + 1], [g + 8][2t], [g + 8][2t + 1]
     * of each fragment. Paired, fragments j and j + 1 hold the even and odd
     * columns: the lane's 4 consecutive columns n0 + 4t .. + 3 of rows g
     * and g + 8, one 16-byte store each where out allows (vec_out).
     * Each run of a row goes through the epilogue first (nothing for
     * PlainStore; bias, activation, residual for BiasActResidual). */
    const MatrixView<float> Out = matrix_view<float>(out, start.out);
    const typename Epi::Batch finish = epi.at_batch(batch_start + blockIdx.z);
    if constexpr (C::kPairB) {
        MT_UNROLL for (int i = 0; i < C::kMFrags; ++i)
            MT_UNROLL for (int j = 0; j < C::kNFrags; j += 2)
                MT_UNROLL for (int h = 0; h < 2; ++h) {
                    float v[4] = {acc[i][j][2 * h], acc[i][j + 1][2 * h], acc[i][j][2 * h + 1],
                                  acc[i][j + 1][2 * h + 1]};
                    const int64_t row = row0 + warp_row + i * 16 + g + 8 * h;
                    const int64_t col = col0 + warp_col + j * 8 + 4 * t;
                    finish.apply(v, row, col);
                    store_row<float, 4>(Out, v, row, col, vec_out);
                }
    } else {
        MT_UNROLL for (int i = 0; i < C::kMFrags; ++i)
            MT_UNROLL for (int j = 0; j < C::kNFrags; ++j)
                MT_UNROLL for (int h = 0; h < 2; ++h) {
                    float v[2] = {acc[i][j][2 * h], acc[i][j][2 * h + 1]};
                    const int64_t row = row0 + warp_row + i * 16 + g + 8 * h;
                    const int64_t col = col0 + warp_col + j * 8 + 2 * t;
                    finish.apply(v, row, col);
                    if (row < M && col < N)
                        Out.at(row, col) = v[0];
                    if (row < M && col + 1 < N)
                        Out.at(row, col + 1) = v[1];
                }
    }
#endif
}

/* The tile variants, for the sweep in bench/run.py (mt_matmul_tf32_tile).
 * Left free, ptxas (sm_90, unrolled K) gives the 128 x 128 tile 216-224
 * registers a lane, and the 64 x 64 warp tiles spill at 255. */
using Tf32Mma128x128S3 = Tf32MmaTiles<128, 128, 64, 32, 3, 2, 1>; /* 96 KiB: 2 blocks an SM */
using Tf32Mma128x128S4 = Tf32MmaTiles<128, 128, 64, 32, 4, 1, 4>; /* 128 KiB */
using Tf32Mma128x256S3 = Tf32MmaTiles<128, 256, 64, 64, 3, 1, 1>; /* 144 KiB, 128 accumulators a lane */
using Tf32Mma256x128S3 = Tf32MmaTiles<256, 128, 64, 64, 3, 1, 1>;
using Tf32Mma64x128S4 = Tf32MmaTiles<64, 128, 32, 32, 4, 2, 4>;   /* 96 KiB: small products, more blocks */
using Tf32Mma128x128S3U = Tf32MmaTiles<128, 128, 64, 32, 3, 1, 4>;
using Tf32Mma128x256S3U = Tf32MmaTiles<128, 256, 64, 64, 3, 1, 2>;
using Tf32Mma128x256S3P = Tf32MmaTiles<128, 256, 64, 64, 3, 1, 1, true>;
using Tf32Mma128x128S4P = Tf32MmaTiles<128, 128, 64, 32, 4, 1, 4, true>;
using Tf32Mma128x256S4P = Tf32MmaTiles<128, 256, 64, 64, 4, 1, 1, true>; /* 192 KiB */

static const char *const kTileNames[] = {
    "128x128x32 warp 64x32, 3 stages, 2 blocks/SM, K steps rolled",
    "128x128x32 warp 64x32, 4 stages, K steps unrolled",
    "128x256x32 warp 64x64, 3 stages, K steps rolled",
    "256x128x32 warp 64x64, 3 stages, K steps rolled",
    "64x128x32 warp 32x32, 4 stages, 2 blocks/SM, K steps unrolled",
    "128x128x32 warp 64x32, 3 stages, K steps unrolled",
    "128x256x32 warp 64x64, 3 stages, K steps unrolled by 2",
    "128x256x32 warp 64x64, 3 stages, K steps rolled, paired B",
    "128x128x32 warp 64x32, 4 stages, K steps unrolled, paired B",
    "128x256x32 warp 64x64, 4 stages, K steps rolled, paired B",
};
constexpr int kTileCount = (int)(sizeof kTileNames / sizeof kTileNames[0]);

int tf32_mma_tile_count(void) { return kTileCount; }
const char *tf32_mma_tile_name(int tile) { return tile >= 0 && tile < kTileCount ? kTileNames[tile] : nullptr; }

template <typename C, bool kATrans, bool kBTrans, typename Epi>
static mt_status launch_tf32_mma_typed(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, const Epi &epi)
{
    const int64_t lda = leading_dim(a, kATrans);
    const int64_t ldb = leading_dim(b, kBTrans);
    const bool vec_out = out_vector_ok(out);
    auto kernel = matmul_tf32_mma<C, kATrans, kBTrans, Epi>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::kSharedBytes));
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        kernel<<<grid, C::kThreads, C::kSharedBytes, mt_stream()>>>(out, a, b, lda, ldb, vec_out, y0, b0, epi);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

/* Does the kernel read x (which gemm_operand_ok accepted, transposed_ok) as
 * column-major? Unless its rows are contiguous and 16-byte aligned: every
 * cp.async reads 16 aligned bytes. A (K, 1) column with unit row stride is
 * then column-major (its one column contiguous), where
 * gemm_operand_transposed, for warptile's loads, calls it row-major. */
static bool tf32_column_major(const mt_tensor &x)
{
    const int64_t rows = x.shape[x.ndim - 2];
    const int64_t cols = x.shape[x.ndim - 1];
    const int64_t rs = x.strides[x.ndim - 2];
    const int64_t cs = x.strides[x.ndim - 1];
    return !((cs == 1 || cols == 1) && (rows == 1 || rs % 4 == 0));
}

/* The library's tiles (4, 5, 6 below) take each operand row-major or
 * column-major, a kernel per layout. */
template <typename C, typename Epi>
static mt_status launch_tf32_mma_layouts(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, const Epi &epi)
{
    const bool at = tf32_column_major(a), bt = tf32_column_major(b);
    if (at && bt)
        return launch_tf32_mma_typed<C, true, true>(out, a, b, epi);
    if (at)
        return launch_tf32_mma_typed<C, true, false>(out, a, b, epi);
    if (bt)
        return launch_tf32_mma_typed<C, false, true>(out, a, b, epi);
    return launch_tf32_mma_typed<C, false, false>(out, a, b, epi);
}

/* The tile the library takes for a product: the wide tile where the product
 * has enough of them to fill the GPU, else smaller ones. The H100 sweep at
 * 4096^3 (2026-11-27): variant 6 1.227 ms (112 TFLOP/s), 9 1.234, 3 1.259,
 * 7 1.279, 2 1.310, 5 1.378, 1 1.414, 8 1.541, 0 1.637, 4 1.676; at 1024^3
 * variant 4 (the small tile) took 0.041 ms. */
static int tf32_mma_default_tile(const mt_tensor &out)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t batches = shape_numel(out.shape, out.ndim - 2);
    const int64_t sms = mt_sm_count();
    return out_tiles(M, N, batches, 128, 256) >= sms ? 6 : out_tiles(M, N, batches, 128, 128) >= sms ? 5 : 4;
}

/* With an epilogue the wide tile gives way to 128 x 128: its 128 accumulators
 * a lane plus the bias, residual and activation spill (44-108 bytes at -O3),
 * and in the GPT step of the H100 run of 2026-11-28 its fused Linear forwards
 * took 0.42 ms each against 0.24-0.27 ms for the same products without one. */
template <typename Epi>
static mt_status launch_tf32_mma_chosen(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, const Epi &epi)
{
    constexpr bool kPlain = std::is_same<Epi, PlainStore>::value;
    switch (tf32_mma_default_tile(out)) {
    case 6:
        if constexpr (kPlain)
            return launch_tf32_mma_layouts<Tf32Mma128x256S3U>(out, a, b, epi);
        else
            return launch_tf32_mma_layouts<Tf32Mma128x128S3U>(out, a, b, epi);
    case 5: return launch_tf32_mma_layouts<Tf32Mma128x128S3U>(out, a, b, epi);
    default: return launch_tf32_mma_layouts<Tf32Mma64x128S4>(out, a, b, epi);
    }
}

/* ---- split-K ---------------------------------------------------------------
 * A transformer's weight gradient (384 x 1536 summed over 16384 tokens) has
 * 72 tiles of the small 64 x 128 tile for 132 SMs x 2 block slots, each
 * walking 512 K steps: most of the GPU idles. As the warptile rung does
 * (src/matmul_warptile.cu), K is then cut into slices, each slice's product
 * a batch of one launch (k_slices: views, no copy) into a scratch buffer of
 * partial products, which a second kernel sums in slice order (the same
 * result on every run) and passes through the epilogue. */

/* The shortest slice worth a split (8 K-tiles of 32), and the most slices. */
constexpr int64_t kSplitMinK = 256;
constexpr int kSplitMax = 16;

/* How many slices a single M x N x K product is cut into: doubling from 1
 * while the small tile's blocks fill less than 90% of the GPU's block slots
 * (2 an SM) and the slices stay 16-byte aligned and kSplitMinK long. */
static int tf32_split_count(int64_t M, int64_t N, int64_t K)
{
    const int64_t tiles = out_tiles(M, N, 1, Tf32Mma64x128S4::BM, Tf32Mma64x128S4::BN);
    const int64_t slots = (int64_t)mt_sm_count() * Tf32Mma64x128S4::kMinBlocks;
    int splits = 1;
    while (splits < kSplitMax && 10 * tiles * splits < 9 * slots && K % (2 * splits * 4) == 0 &&
           K / (2 * splits) >= kSplitMinK)
        splits *= 2;
    return splits;
}

template <typename Epi>
static mt_status launch_tf32_mma_default(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b,
                                         const Epi &epi)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t K = a.shape[a.ndim - 1];
    const int splits = shape_numel(out.shape, out.ndim - 2) == 1 ? tf32_split_count(M, N, K) : 1;
    if (splits == 1)
        return launch_tf32_mma_chosen(out, a, b, epi);
    DeviceScratch scratch;
    CUDA_CHECK(scratch.allocate((size_t)(splits * M * N) * sizeof(float)));
    const mt_tensor partial = split_partials(out, splits, scratch.as<float>());
    MT_TRY(launch_tf32_mma_chosen(partial, k_slices(a, splits, true), k_slices(b, splits, false), PlainStore{}));
    MT_TRY(launch_split_sum<float>(out, scratch.as<float>(), splits, epi));
    CUDA_CHECK(scratch.release());
    return MT_OK;
}

/* tile: one of the variants above (row-major operands: the sweep of
 * bench/run.py), or -1: the library's choice, which also takes column-major
 * operands. */
mt_status launch_tf32_mma(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int tile)
{
    const PlainStore plain;
    switch (tile) {
    case -1: return launch_tf32_mma_default(out, a, b, plain);
    case 0: return launch_tf32_mma_typed<Tf32Mma128x128S3, false, false>(out, a, b, plain);
    case 1: return launch_tf32_mma_typed<Tf32Mma128x128S4, false, false>(out, a, b, plain);
    case 2: return launch_tf32_mma_typed<Tf32Mma128x256S3, false, false>(out, a, b, plain);
    case 3: return launch_tf32_mma_typed<Tf32Mma256x128S3, false, false>(out, a, b, plain);
    case 4: return launch_tf32_mma_typed<Tf32Mma64x128S4, false, false>(out, a, b, plain);
    case 5: return launch_tf32_mma_typed<Tf32Mma128x128S3U, false, false>(out, a, b, plain);
    case 6: return launch_tf32_mma_typed<Tf32Mma128x256S3U, false, false>(out, a, b, plain);
    case 7: return launch_tf32_mma_typed<Tf32Mma128x256S3P, false, false>(out, a, b, plain);
    case 8: return launch_tf32_mma_typed<Tf32Mma128x128S4P, false, false>(out, a, b, plain);
    default: return launch_tf32_mma_typed<Tf32Mma128x256S4P, false, false>(out, a, b, plain);
    }
}

/* The library's tile with bias, activation and residual in its stores
 * (mt_matmul_tf32_epilogue, src/matmul_epilogue.cu). */
mt_status launch_tf32_mma_epilogue(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b,
                                   const BiasActResidual<float> &epi)
{
    return launch_tf32_mma_default(out, a, b, epi);
}
