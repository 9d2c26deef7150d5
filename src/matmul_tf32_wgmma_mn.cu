/*
 * matmul_tf32_wgmma_mn.cu: the wgmma rung (matmul_tf32_wgmma.cu) for
 * operands that are not K-major, read in place: a transposing stage, and
 * K split across blocks.
 *
 * The product it is for is a weight gradient, dW = dz.T @ x: a = dz.T is
 * column-major (M contiguous), b = x row-major (N contiguous), and K, the
 * tokens (16384 in the GPT's step), is the slow dimension of both. TF32
 * wgmma reads only K-major tiles from shared memory, and cp.async copies
 * bytes as they lie, so the wgmma rung copies such operands into K-major
 * buffers first (with_k_major_operands): for the GPT's dW, 16384 x (384 +
 * 1536) floats, about as long as the whole product on mma.sync. This kernel
 * instead transposes on the way into shared memory:
 *
 *   1. Each thread loads its part of the next K-tile from global memory into
 *      registers with 16-byte loads along M (N): 4 Packs of A and 4 of B a
 *      thread for a 128 x 32 + 32 x 128 tile, each 4 consecutive rows m of
 *      one k. Two lanes take the two Packs of 32 contiguous bytes of a k,
 *      a warp 16 k: every 32-byte sector it reads is read whole.
 *   2. It stores them K-major into the swizzled stage wgmma reads (the same
 *      layout and descriptors as the cp.async stages): the 4 floats of a
 *      Pack go to rows m .. m + 3 of column k, rounded to TF32 on the way
 *      (cvt.rna, as the mma.sync rung and cuBLAS round; the cp.async stages
 *      are truncated by the tensor cores instead). Bank of float (r, k):
 *      (((k / 4) ^ (r % 8)) * 4 + k % 4) % 32. For one of the 4 stores a
 *      warp's lanes hold k = k0 + (lane % 16) and r = r0 + 4 (lane / 16) + e
 *      (k0 a multiple of 16, r0 of 8): k % 4 takes 4 values, (k / 4) % 4
 *      another 4 (bits 0-1 of the chunk), r % 8 = 4 (lane / 16) + e flips
 *      bit 2: 32 different banks, no conflict. (With the whole warp on one
 *      k, 32 Packs along M, r % 8 would take 2 values: 16-way conflicts.)
 *   3. Register double-buffering: the loads of tile kt + 1 are issued before
 *      the wgmmas of tile kt and waited for only at the next step's stores,
 *      so the memory latency runs under the tensor cores' work (cp.async
 *      cannot transpose, so the registers play its part). Three stages: the
 *      stores of step kt go to tile kt - 3's stage, whose wgmmas each
 *      warpgroup waited for (wgmma_wait<1> of step kt - 2) before the
 *      barrier of step kt - 1 that precedes the stores; with two, one
 *      warpgroup could still be reading the stage the other overwrites.
 *   4. Split K: a weight gradient has 9-36 tiles of 128 x 128 for 132 SMs.
 *      Block z of a split launch takes K's slice z (k_slice long, a multiple
 *      of 32) and writes its partial product to batch z of a (splits, M, N)
 *      buffer; launch_split_sum adds them in slice order (deterministic)
 *      and applies the epilogue, as the mma rung's split-K does
 *      (matmul_tf32_mma.cu). The slices are cut in the kernel, not as views
 *      (k_slices), so any number of them fits any K: the count that fills
 *      the GPU best (wgmma_mn_split_count) need not divide K.
 *
 * Sizes off the tile: the loads zero-fill rows and K past the edges (and
 * past the slice's end), the stores skip what lies outside out.
 */
#include "matmul_epilogue.h"
#include "matmul_internal.h"
#include "mma_tf32.h"
#include "wgmma_tf32.h"

struct Tf32WgmmaMnTiles {
    static constexpr int BM = 128;
    static constexpr int BN = 128;
    static constexpr int BK = 32;
    static constexpr int kStages = 3;
    static constexpr int kThreads = 256; /* two warpgroups, rows 64h .. 64h + 63 */
    static constexpr int kAcc = BN / 2;
    /* Two blocks an SM (2 x 97 KiB of shared memory, 128 registers a
     * thread): a split weight gradient has a few blocks per SM, and the
     * other block's wgmmas cover one block's waits for its loads. */
    static constexpr int kMinBlocks = 2;
    static constexpr int kPacks = BM * BK / 4 / kThreads; /* Packs of A (and of B) a thread a tile: 4 */
    static constexpr int kStageFloats = (BM + BN) * BK;
    static constexpr size_t kSharedBytes = (size_t)kStages * kStageFloats * sizeof(float) + kWgmmaAtomBytes;
    static_assert(BM == BN, "A's and B's tiles share the thread map");
};

/* A thread's share of a 128-row x 32-k tile: one k, rows r, r + 32, r + 64,
 * r + 96, 4 each (a Pack). Piece w = tid / 32 + 8 i of the tile's 32 warp-sized
 * pieces (16 k x 8 rows each, see the file comment, point 2) holds k = 16 (w % 2)
 * + lane % 16 and rows 8 (w / 2) + 4 (lane / 16): w % 2 is the same for
 * every i, and rows step by 32. */
struct MnSlot {
    int k;
    int r;
    MT_DEVICE explicit MnSlot(int tid)
        : k(16 * ((tid / 32) & 1) + (tid & 15)), r(8 * (tid / 64) + 4 * ((tid / 16) & 1))
    {
    }
};

/* The thread's Packs of rows r0 .. r0 + 127 (of `rows`) and k0 .. k0 + 31
 * (below k_end) of an operand whose element (k, r) lies at data[k * ld + r]. */
MT_DEVICE void load_mn_tile(Pack<float> (&p)[Tf32WgmmaMnTiles::kPacks], const float *data, int64_t ld, int64_t r0,
                            int64_t rows, int64_t k0, int64_t k_end, MnSlot s)
{
    MT_UNROLL for (int i = 0; i < Tf32WgmmaMnTiles::kPacks; ++i)
        p[i] = load_pack(data, k0 + s.k, k_end, r0 + s.r + 32 * i, rows, ld);
}

/* The same Packs into a stage's rows (r, k-major), rounded to TF32. */
MT_DEVICE void store_mn_tile(float *stage, const Pack<float> (&p)[Tf32WgmmaMnTiles::kPacks], MnSlot s)
{
    MT_UNROLL for (int i = 0; i < Tf32WgmmaMnTiles::kPacks; ++i)
        MT_UNROLL for (int e = 0; e < 4; ++e)
            stage[swizzle128(s.r + 32 * i + e, s.k)] = __int_as_float((int)tf32_bits(p[i].v[e]));
}

/* a column-major (element (m, k) at a[k * lda + m]), b row-major (element
 * (k, n) at b[k * ldb + n]). k_slice > 0: a split launch (see point 4), out
 * the partial products (slices, M, N), a and b single matrices; 0: batch z
 * of out from K whole. */
template <typename Epi>
__global__ void __launch_bounds__(Tf32WgmmaMnTiles::kThreads, Tf32WgmmaMnTiles::kMinBlocks)
    matmul_tf32_wgmma_mn(mt_tensor out, mt_tensor a, mt_tensor b, int64_t lda, int64_t ldb, int64_t k_slice,
                         int64_t row_tile_start, int64_t batch_start, Epi epi)
{
#if defined(MT_EMULATOR) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using C = Tf32WgmmaMnTiles;
    constexpr int S = C::kStages;
    extern __shared__ __align__(128) unsigned char shared_bytes[];
    float *stages = wgmma_stages(&shared_bytes[0]);

    const int64_t z = batch_start + blockIdx.z;
    const BatchStarts start = batch_starts(z, out, a, b);
    const MatrixView<const float> A = matrix_view<const float>(a, start.a);
    const MatrixView<const float> B = matrix_view<const float>(b, start.b);
    const int64_t M = A.rows, N = B.cols, K = A.cols;
    const int64_t k_begin = k_slice > 0 ? z * k_slice : 0;
    const int64_t k_end = k_slice > 0 && k_begin + k_slice < K ? k_begin + k_slice : K;
    const int64_t row0 = (row_tile_start + blockIdx.y) * C::BM;
    const int64_t col0 = (int64_t)blockIdx.x * C::BN;

    const int tid = threadIdx.x;
    const MnSlot slot(tid);
    const int group = tid / 128;
    const int warp = (tid % 128) / 32;
    const int lane = tid % 32;

    float acc[C::kAcc];
    MT_UNROLL for (int i = 0; i < C::kAcc; ++i)
        acc[i] = 0.0f;

    /* tile kt + 1 in registers while tile kt's wgmmas run (point 3) */
    Pack<float> a_next[C::kPacks], b_next[C::kPacks];
    const int64_t k_tiles = k_end > k_begin ? (k_end - k_begin + C::BK - 1) / C::BK : 0;
    if (k_tiles > 0) {
        load_mn_tile(a_next, A.data, lda, row0, M, k_begin, k_end, slot);
        load_mn_tile(b_next, B.data, ldb, col0, N, k_begin, k_end, slot);
    }
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
        float *a_stage = stages + (int)(kt % S) * C::kStageFloats;
        float *b_stage = a_stage + C::BM * C::BK;
        store_mn_tile(a_stage, a_next, slot);
        store_mn_tile(b_stage, b_next, slot);
        /* the stores made visible to wgmma (another proxy), then to every
         * thread's wgmmas: the barrier */
        wgmma_fence_shared_writes();
        __syncthreads();
        if (kt + 1 < k_tiles) {
            const int64_t k0 = k_begin + (kt + 1) * C::BK;
            load_mn_tile(a_next, A.data, lda, row0, M, k0, k_end, slot);
            load_mn_tile(b_next, B.data, ldb, col0, N, k0, k_end, slot);
        }

        const float *a_rows = a_stage + group * 64 * C::BK;
        wgmma_fence_operand(acc);
        wgmma_fence();
        MT_UNROLL for (int kk = 0; kk < C::BK; kk += 8)
            wgmma_step<C::BN>(acc, a_rows, b_stage, kk);
        wgmma_commit();
        wgmma_wait<1>();
        wgmma_fence_operand(acc);
    }
    wgmma_wait<0>();
    wgmma_fence_operand(acc);

    const MatrixView<float> Out = matrix_view<float>(out, start.out);
    wgmma_store_tile<C::BN>(acc, Out, epi.at_batch(z), row0 + group * 64, col0, M, N, warp, lane);
#elif defined(__CUDA_ARCH__)
    /* compiled for another GPU: tf32_wgmma_available keeps the library off */
    __trap();
#endif
}

/* Can this kernel read x in place: its `r_dim` (M of a, N of b) contiguous,
 * its K stride (k_dim) a multiple of 16 bytes, the Packs aligned
 * (gemm_operand_ok's checks of the pointer, offset and batch strides)? */
static bool mn_major(const mt_tensor &x, int r_dim, int k_dim)
{
    const bool r_contiguous = x.strides[r_dim] == 1 || x.shape[r_dim] == 1;
    const bool k_aligned = x.strides[k_dim] % 4 == 0 || x.shape[k_dim] == 1;
    return gemm_operand_ok(x, true) && r_contiguous && k_aligned;
}

bool tf32_wgmma_mn_layout(const mt_tensor &a, const mt_tensor &b)
{
    return mn_major(a, a.ndim - 2, a.ndim - 1) && mn_major(b, b.ndim - 1, b.ndim - 2);
}

/* How many slices of K a single M x N x K product is cut into. Estimated
 * time for s slices, in nanoseconds:
 *     ceil(tiles s / SMs) 2 BM BN ceil(K / s) / kSmFlopsPerNs
 *   + 8 s M N / kBytesPerNs
 * the busiest SM's blocks (their K-slices' flops) one after the other, and
 * the partial products written and read back once each. It ignores what two
 * blocks on one SM gain over one, so it prefers one block an SM where that
 * costs little. kSmFlopsPerNs: an H100's 494 TFLOP/s of dense TF32 over 132
 * SMs is 3.7e3 flops a ns an SM; a wgmma block alone reaches about half.
 * kBytesPerNs: HBM3, ~3 TB/s. For the GPT's dW (K = 16384, 132 SMs) it gives
 * 14 slices for 384 x 384 (9 tiles: 126 blocks), 9 for 384 x 1152 (27
 * tiles: 243 blocks), 7 for 384 x 1536 and 1536 x 384 (36 tiles: 252
 * blocks), up to two blocks an SM at once. At least kMnMinSlice of K a
 * slice (4 K-steps: the pipeline has something to overlap), at most
 * kMnMaxSplits. */
constexpr double kSmFlopsPerNs = 2000.0;
constexpr double kBytesPerNs = 3000.0;
constexpr int64_t kMnMinSlice = 128;
constexpr int kMnMaxSplits = 32;

static int wgmma_mn_split_count(int64_t M, int64_t N, int64_t K)
{
    using C = Tf32WgmmaMnTiles;
    const int64_t tiles = out_tiles(M, N, 1, C::BM, C::BN);
    const int64_t sms = mt_sm_count();
    int best = 1;
    double best_ns = 0.0;
    for (int s = 1; s <= kMnMaxSplits && (s == 1 || K / s >= kMnMinSlice); ++s) {
        const int64_t slice = (K + s - 1) / s;
        const double busiest = (double)((tiles * s + sms - 1) / sms);
        const double ns = busiest * 2.0 * C::BM * C::BN * (double)slice / kSmFlopsPerNs +
                          (s > 1 ? 8.0 * (double)s * (double)M * (double)N / kBytesPerNs : 0.0);
        if (s == 1 || ns < best_ns)
            best = s, best_ns = ns;
    }
    return best;
}

template <typename Epi>
static mt_status launch_wgmma_mn_kernel(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b,
                                        int64_t k_slice, const Epi &epi)
{
    using C = Tf32WgmmaMnTiles;
    const int64_t lda = a.strides[a.ndim - 1];
    const int64_t ldb = b.strides[b.ndim - 2];
    auto kernel = matmul_tf32_wgmma_mn<Epi>;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::kSharedBytes));
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        kernel<<<grid, C::kThreads, C::kSharedBytes, mt_stream()>>>(out, a, b, lda, ldb, k_slice, y0, b0, epi);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

template <typename Epi>
static mt_status launch_wgmma_mn(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, const Epi &epi)
{
    using C = Tf32WgmmaMnTiles;
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t K = a.shape[a.ndim - 1];
    const int requested = shape_numel(out.shape, out.ndim - 2) == 1 ? wgmma_mn_split_count(M, N, K) : 1;
    /* slices of whole K-tiles; the count that covers K with them */
    const int64_t k_slice = ((K + requested - 1) / requested + C::BK - 1) / C::BK * C::BK;
    const int splits = requested == 1 ? 1 : (int)((K + k_slice - 1) / k_slice);
    if (splits == 1)
        return launch_wgmma_mn_kernel(out, a, b, 0, epi);
    DeviceScratch scratch;
    CUDA_CHECK(scratch.allocate((size_t)(splits * M * N) * sizeof(float)));
    const mt_tensor partial = split_partials(out, splits, scratch.as<float>());
    /* a and b as single matrices: block z's batch is its slice */
    mt_tensor a2 = a, b2 = b;
    a2.ndim = b2.ndim = 2;
    for (int d = 0; d < 2; ++d) {
        a2.shape[d] = a.shape[a.ndim - 2 + d], a2.strides[d] = a.strides[a.ndim - 2 + d];
        b2.shape[d] = b.shape[b.ndim - 2 + d], b2.strides[d] = b.strides[b.ndim - 2 + d];
    }
    MT_TRY(launch_wgmma_mn_kernel(partial, a2, b2, k_slice, PlainStore{}));
    MT_TRY(launch_split_sum<float>(out, scratch.as<float>(), splits, epi));
    CUDA_CHECK(scratch.release());
    return MT_OK;
}

mt_status launch_tf32_wgmma_mn(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    return launch_wgmma_mn(out, a, b, PlainStore{});
}

/* mt_matmul_tf32's choice of this kernel, after tf32_wgmma_chosen refused
 * the copying wgmma rung (fewer 128 x 128 tiles than SMs, or copies too
 * large): both operands read in place here (tf32_wgmma_mn_layout) and a
 * product of at least 2^30 multiply-adds. Below that the mma.sync rung's
 * smaller tiles and split-K win or tie: at 2^30 (the GPT's smallest weight
 * gradient is 384 x 384 x 16384 = 2.4 x 2^30) the whole product is ~10 us
 * at cuBLAS's rate, where the second launch (the split sum) and a
 * half-empty 128 x 128 tile start to count. Larger products with enough
 * tiles stay on the copying rung: its cp.async pipeline (6 stages, the
 * 128 x 256 tile) is faster per tile than this one's register staging, and
 * there the copies are small against the product. */
constexpr double kMnMinMacs = 1073741824.0; /* 2^30 */

bool tf32_wgmma_mn_chosen(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const double macs = (double)out.shape[out.ndim - 2] * (double)out.shape[out.ndim - 1] *
                        (double)a.shape[a.ndim - 1] * (double)shape_numel(out.shape, out.ndim - 2);
    return macs >= kMnMinMacs && tf32_wgmma_available() && tf32_wgmma_mn_layout(a, b);
}
