/*
 * matmul_blocktile.cu: rungs 4-7 of the matmul ladder, where each thread
 * computes many outputs from values it keeps in registers.
 *
 * Rung 3 (matmul_tiled in matmul.cu) reads two shared-memory values for every
 * multiply-add, and shared memory cannot deliver that fast enough: the FMA
 * units wait on the loads. Every rung here raises the number of FMAs per
 * shared-memory load by reusing values held in registers:
 *
 *   4 blocktile_1d  each thread computes TM = 8 outputs of one column: it
 *                   loads one B value and reuses it for 8 FMAs (with 8 A
 *                   values that the warp reads as a broadcast).
 *   5 blocktile_2d  each thread computes an 8 x 8 block: per k it loads 8 A
 *                   and 8 B values into registers and does 64 FMAs with them,
 *                   4 FMAs per load instead of 1. Blocks are 128 x 128, so
 *                   each global element is loaded once per 128 outputs.
 *   6 vectorized    as 5, but every global load and store moves 16 bytes
 *                   (LDG.128 / STG.128: 4 floats, 2 doubles) and the A tile
 *                   is stored transposed in shared memory, so a thread reads
 *                   its 8 A values as two 16-byte LDS.128 instead of eight
 *                   4-byte loads.
 *   7 warptile      the block's 128 x 128 tile is split into one tile per
 *                   warp, and each thread's outputs into 4 x 4 pieces spread
 *                   over its warp's tile, so the 32 lanes of a warp read few,
 *                   contiguous shared-memory addresses (no bank conflicts,
 *                   many broadcasts); the next K-tile is loaded from global
 *                   memory into registers while the current one is computed
 *                   (double buffering, one barrier per K-tile); and the tile
 *                   shape is a template with several configurations that
 *                   the autotuner (minitensor/autotune.py) times per shape.
 *
 * Edges: every rung loads zeros for elements outside the matrices (a zero
 * adds nothing to a dot product) and writes only outputs inside out, so any
 * M, N and K works. Rungs 4 and 5 take any strides. Rungs 6 and 7 read their
 * operands with 16-byte loads, so they need each matrix row-major (warptile
 * also column-major, a transposed view) with aligned rows (gemm_operand_ok);
 * mt_matmul copies any other operand to a contiguous buffer first.
 *
 * float64 runs the same templates: a 16-byte Pack holds 2 doubles instead of
 * 4 floats, and the K-tile of warptile is halved so that its shared memory
 * stays within 48 KiB.
 */
#include "matmul_internal.h"

/* ---- rung 4: blocktile_1d --------------------------------------------------
 * A block computes a 64 x 64 tile of out with 512 threads; thread t owns
 * column t % 64 of the tile and 8 consecutive rows (t / 64) * 8 ... + 7. */
namespace bt1 {
constexpr int BM = 64;
constexpr int BN = 64;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int kThreads = BM * BN / TM; /* 512 */
static_assert(kThreads == BM * BK && kThreads == BK * BN, "one A and one B element per thread");
} // namespace bt1

template <typename T>
__global__ void __launch_bounds__(bt1::kThreads) matmul_blocktile_1d(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
{
    using namespace bt1;
    __shared__ T a_tile[BM][BK];
    __shared__ T b_tile[BK][BN];
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t K = a.shape[a.ndim - 1];
    const int64_t a_rs = a.strides[a.ndim - 2], a_cs = a.strides[a.ndim - 1];
    const int64_t b_rs = b.strides[b.ndim - 2], b_cs = b.strides[b.ndim - 1];
    const BatchStart start = batch_start_of(batch_start + blockIdx.z, out, a, b);
    const T *a_data = static_cast<const T *>(a.data) + start.a;
    const T *b_data = static_cast<const T *>(b.data) + start.b;

    const int tid = threadIdx.x;
    const int64_t row0 = (row_tile_start + blockIdx.y) * BM;
    const int64_t col0 = (int64_t)blockIdx.x * BN;
    /* Neighbouring threads own neighbouring columns: coalesced B loads and
     * out stores. All threads of a warp share thread_row, so their A reads
     * hit one shared-memory address: a broadcast. */
    const int thread_col = tid % BN;
    const int thread_row = tid / BN;
    /* Which tile elements this thread loads. */
    const int a_r = tid / BK, a_c = tid % BK;
    const int b_r = tid / BN, b_c = tid % BN;

    T acc[TM];
    MT_UNROLL for (int i = 0; i < TM; ++i)
        acc[i] = T(0);
    for (int64_t k0 = 0; k0 < K; k0 += BK) {
        const int64_t ar = row0 + a_r, ak = k0 + a_c;
        const int64_t bk = k0 + b_r, bc = col0 + b_c;
        a_tile[a_r][a_c] = (ar < M && ak < K) ? a_data[ar * a_rs + ak * a_cs] : T(0);
        b_tile[b_r][b_c] = (bk < K && bc < N) ? b_data[bk * b_rs + bc * b_cs] : T(0);
        __syncthreads(); /* the tiles are complete */
        MT_UNROLL for (int k = 0; k < BK; ++k) {
            const T b_value = b_tile[k][thread_col]; /* one load, TM uses */
            MT_UNROLL for (int i = 0; i < TM; ++i)
                acc[i] += a_tile[thread_row * TM + i][k] * b_value;
        }
        __syncthreads(); /* everyone is done reading before the next load */
    }

    T *out_data = static_cast<T *>(out.data) + start.out;
    const int64_t o_rs = out.strides[out.ndim - 2], o_cs = out.strides[out.ndim - 1];
    const int64_t col = col0 + thread_col;
    MT_UNROLL for (int i = 0; i < TM; ++i) {
        const int64_t row = row0 + thread_row * TM + i;
        if (row < M && col < N)
            out_data[row * o_rs + col * o_cs] = acc[i];
    }
}

/* ---- rung 5: blocktile_2d --------------------------------------------------
 * A block computes a 128 x 128 tile with 256 threads, each an 8 x 8 block:
 * thread t owns rows (t / 16) * 8 ... + 7 and columns (t % 16) * 8 ... + 7. */
namespace bt2 {
constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int TN = 8;
constexpr int kThreads = (BM / TM) * (BN / TN); /* 256 */
static_assert((BM * BK) % kThreads == 0 && (BK * BN) % kThreads == 0, "whole loads per thread");
} // namespace bt2

template <typename T>
__global__ void __launch_bounds__(bt2::kThreads) matmul_blocktile_2d(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
{
    using namespace bt2;
    __shared__ T a_tile[BM][BK];
    __shared__ T b_tile[BK][BN];
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t K = a.shape[a.ndim - 1];
    const int64_t a_rs = a.strides[a.ndim - 2], a_cs = a.strides[a.ndim - 1];
    const int64_t b_rs = b.strides[b.ndim - 2], b_cs = b.strides[b.ndim - 1];
    const BatchStart start = batch_start_of(batch_start + blockIdx.z, out, a, b);
    const T *a_data = static_cast<const T *>(a.data) + start.a;
    const T *b_data = static_cast<const T *>(b.data) + start.b;

    const int tid = threadIdx.x;
    const int64_t row0 = (row_tile_start + blockIdx.y) * BM;
    const int64_t col0 = (int64_t)blockIdx.x * BN;
    const int thread_row = tid / (BN / TN);
    const int thread_col = tid % (BN / TN);

    T acc[TM][TN];
    MT_UNROLL for (int i = 0; i < TM; ++i)
        MT_UNROLL for (int j = 0; j < TN; ++j)
            acc[i][j] = T(0);
    T a_reg[TM];
    T b_reg[TN];

    for (int64_t k0 = 0; k0 < K; k0 += BK) {
        /* 256 threads load the 128 x 8 A tile and the 8 x 128 B tile, four
         * elements each; consecutive threads take consecutive elements. */
        for (int e = tid; e < BM * BK; e += kThreads) {
            const int r = e / BK, c = e % BK;
            const int64_t ar = row0 + r, ak = k0 + c;
            a_tile[r][c] = (ar < M && ak < K) ? a_data[ar * a_rs + ak * a_cs] : T(0);
        }
        for (int e = tid; e < BK * BN; e += kThreads) {
            const int r = e / BN, c = e % BN;
            const int64_t bk = k0 + r, bc = col0 + c;
            b_tile[r][c] = (bk < K && bc < N) ? b_data[bk * b_rs + bc * b_cs] : T(0);
        }
        __syncthreads();
        MT_UNROLL for (int k = 0; k < BK; ++k) {
            /* 16 loads into registers, then 64 FMAs from registers. */
            MT_UNROLL for (int i = 0; i < TM; ++i)
                a_reg[i] = a_tile[thread_row * TM + i][k];
            MT_UNROLL for (int j = 0; j < TN; ++j)
                b_reg[j] = b_tile[k][thread_col * TN + j];
            MT_UNROLL for (int i = 0; i < TM; ++i)
                MT_UNROLL for (int j = 0; j < TN; ++j)
                    acc[i][j] += a_reg[i] * b_reg[j];
        }
        __syncthreads();
    }

    T *out_data = static_cast<T *>(out.data) + start.out;
    const int64_t o_rs = out.strides[out.ndim - 2], o_cs = out.strides[out.ndim - 1];
    MT_UNROLL for (int i = 0; i < TM; ++i) {
        const int64_t row = row0 + thread_row * TM + i;
        MT_UNROLL for (int j = 0; j < TN; ++j) {
            const int64_t col = col0 + thread_col * TN + j;
            if (row < M && col < N)
                out_data[row * o_rs + col * o_cs] = acc[i][j];
        }
    }
}

/* ---- helpers of the vectorised rungs -------------------------------------- */

/* Loads the Pack of x's row `row` (of `rows`) starting at column `col` (of
 * `cols`); ld is the row stride. A Pack that lies wholly inside the matrix is
 * one 16-byte load; one that crosses an edge is loaded element by element,
 * with zeros outside. `row_data` is the start of the matrix. */
template <typename T>
MT_DEVICE Pack<T> load_pack(const T *data, int64_t row, int64_t rows, int64_t col, int64_t cols, int64_t ld)
{
    constexpr int W = Pack<T>::kWidth;
    Pack<T> p;
    if (row < rows && col + W <= cols) {
        p = *reinterpret_cast<const Pack<T> *>(data + row * ld + col);
    } else {
        MT_UNROLL for (int v = 0; v < W; ++v)
            p.v[v] = (row < rows && col + v < cols) ? data[row * ld + col + v] : T(0);
    }
    return p;
}

/* Writes `count` (a multiple of the Pack width) consecutive values of one
 * output row starting at (row, col): as Packs when out's rows are contiguous
 * and aligned (`vec_out`) and the whole run lies inside out, else element by
 * element with out's strides, skipping what lies outside. */
template <typename T, int kCount>
MT_DEVICE void store_row(T *out_data, const T *values, int64_t row, int64_t col, int64_t M, int64_t N, int64_t o_rs, int64_t o_cs, bool vec_out)
{
    constexpr int W = Pack<T>::kWidth;
    static_assert(kCount % W == 0, "whole Packs");
    if (row >= M)
        return;
    if (vec_out && col + kCount <= N) {
        MT_UNROLL for (int v = 0; v < kCount; v += W) {
            Pack<T> p;
            MT_UNROLL for (int w = 0; w < W; ++w)
                p.v[w] = values[v + w];
            *reinterpret_cast<Pack<T> *>(out_data + row * o_rs + col + v) = p;
        }
    } else {
        MT_UNROLL for (int v = 0; v < kCount; ++v) {
            if (col + v < N)
                out_data[row * o_rs + (col + v) * o_cs] = values[v];
        }
    }
}

/* Can out take Pack stores? Row-major rows, a row stride and a start that
 * keep every Pack aligned (checked per batch in the kernel's host side). */
static bool out_vector_ok(const mt_tensor &out)
{
    const int64_t width = (int64_t)(16 / dtype_size(out.dtype));
    if (out.strides[out.ndim - 1] != 1 || (uintptr_t)out.data % 16 != 0 || out.offset % width != 0)
        return false;
    if (out.shape[out.ndim - 2] > 1 && out.strides[out.ndim - 2] % width != 0)
        return false;
    for (int d = 0; d < out.ndim - 2; ++d) {
        if (out.shape[d] != 1 && out.strides[d] % width != 0)
            return false;
    }
    return true;
}

/* The leading dimension of an operand that gemm_operand_ok accepted: the
 * stride between rows (row-major) or between columns (column-major). */
static int64_t leading_dim(const mt_tensor &x, bool transposed)
{
    return transposed ? x.strides[x.ndim - 1] : x.strides[x.ndim - 2];
}

/* ---- rung 6: vectorized ----------------------------------------------------
 * The 128 x 128 x 8 tiling of rung 5, with 16-byte memory instructions. */
namespace vec {
constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 8;
constexpr int TM = 8;
constexpr int TN = 8;
constexpr int kThreads = (BM / TM) * (BN / TN); /* 256 */
} // namespace vec

template <typename T>
__global__ void __launch_bounds__(vec::kThreads) matmul_vectorized(mt_tensor out, mt_tensor a, mt_tensor b, int64_t lda, int64_t ldb, bool vec_out, int64_t row_tile_start, int64_t batch_start)
{
    using namespace vec;
    constexpr int W = Pack<T>::kWidth;
    /* A is stored transposed, a_tile[k][m]: a thread's 8 values of one k are
     * then 8 consecutive elements, read as whole Packs. */
    __shared__ __align__(16) T a_tile[BK][BM];
    __shared__ __align__(16) T b_tile[BK][BN];
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t K = a.shape[a.ndim - 1];
    const BatchStart start = batch_start_of(batch_start + blockIdx.z, out, a, b);
    const T *a_data = static_cast<const T *>(a.data) + start.a;
    const T *b_data = static_cast<const T *>(b.data) + start.b;

    const int tid = threadIdx.x;
    const int64_t row0 = (row_tile_start + blockIdx.y) * BM;
    const int64_t col0 = (int64_t)blockIdx.x * BN;
    const int thread_row = tid / (BN / TN);
    const int thread_col = tid % (BN / TN);

    T acc[TM][TN];
    MT_UNROLL for (int i = 0; i < TM; ++i)
        MT_UNROLL for (int j = 0; j < TN; ++j)
            acc[i][j] = T(0);
    T a_reg[TM];
    T b_reg[TN];

    for (int64_t k0 = 0; k0 < K; k0 += BK) {
        /* A: BM rows of BK / W Packs each, stored transposed. */
        for (int p = tid; p < BM * BK / W; p += kThreads) {
            const int r = p / (BK / W), c = (p % (BK / W)) * W;
            const Pack<T> v = load_pack(a_data, row0 + r, M, k0 + c, K, lda);
            MT_UNROLL for (int w = 0; w < W; ++w)
                a_tile[c + w][r] = v.v[w];
        }
        /* B: BK rows of BN / W Packs each, stored as they are. */
        for (int p = tid; p < BK * BN / W; p += kThreads) {
            const int r = p / (BN / W), c = (p % (BN / W)) * W;
            *reinterpret_cast<Pack<T> *>(&b_tile[r][c]) = load_pack(b_data, k0 + r, K, col0 + c, N, ldb);
        }
        __syncthreads();
        MT_UNROLL for (int k = 0; k < BK; ++k) {
            MT_UNROLL for (int i = 0; i < TM; i += W) {
                const Pack<T> v = *reinterpret_cast<const Pack<T> *>(&a_tile[k][thread_row * TM + i]);
                MT_UNROLL for (int w = 0; w < W; ++w)
                    a_reg[i + w] = v.v[w];
            }
            MT_UNROLL for (int j = 0; j < TN; j += W) {
                const Pack<T> v = *reinterpret_cast<const Pack<T> *>(&b_tile[k][thread_col * TN + j]);
                MT_UNROLL for (int w = 0; w < W; ++w)
                    b_reg[j + w] = v.v[w];
            }
            MT_UNROLL for (int i = 0; i < TM; ++i)
                MT_UNROLL for (int j = 0; j < TN; ++j)
                    acc[i][j] += a_reg[i] * b_reg[j];
        }
        __syncthreads();
    }

    T *out_data = static_cast<T *>(out.data) + start.out;
    const int64_t o_rs = out.strides[out.ndim - 2], o_cs = out.strides[out.ndim - 1];
    MT_UNROLL for (int i = 0; i < TM; ++i)
        store_row<T, TN>(out_data, acc[i], row0 + thread_row * TM + i, col0 + thread_col * TN, M, N, o_rs, o_cs, vec_out);
}

/* ---- rung 7: warptile --------------------------------------------------------
 *
 * The block tile BM x BN is split into warp tiles WM x WN. Inside a warp the
 * 32 lanes form an 8 x 4 grid (lane / 4, lane % 4); lane (r, c) computes the
 * 4 x 4 pieces at rows  wm + im * 32 + r * 4 .. + 3  (im < WM / 32) and
 * columns  wn + in * 16 + c * 4 .. + 3  (in < WN / 16). Per k a lane loads
 * WM / 32 + WN / 16 Packs of 4 values from shared memory and does
 * (WM / 32) * (WN / 16) * 16 FMAs with them; the 8 distinct A addresses and 4
 * distinct B addresses a warp reads are contiguous, so each load is served in
 * the minimum number of shared-memory wavefronts, the rest broadcast.
 *
 * Double buffering: two shared-memory stages. While the warps compute on
 * stage s, each thread has already issued the global loads of the next
 * K-tile into registers; after the computation it stores them into stage
 * s ^ 1, and one barrier per K-tile separates the two uses of each stage.
 *
 * kATrans / kBTrans: the operand is a column-major (transposed) view. Then
 * A's 16-byte loads run along M (and store straight into the transposed
 * a_tile) and B's along K (stored transposed into b_tile).
 */
template <int BM_, int BN_, int BK_, int WM_, int WN_, int kMinBlocks_>
struct WarptileConfig {
    static constexpr int BM = BM_;
    static constexpr int BN = BN_;
    static constexpr int BK = BK_; /* for float; float64 halves it */
    static constexpr int WM = WM_;
    static constexpr int WN = WN_;
    static constexpr int kMinBlocks = kMinBlocks_;
    static constexpr int kWarps = (BM / WM) * (BN / WN);
    static constexpr int kThreads = kWarps * 32;
    static constexpr int kMIter = WM / 32; /* 4 x 4 pieces per lane along M */
    static constexpr int kNIter = WN / 16; /* ... and along N */
    static_assert(BM % WM == 0 && BN % WN == 0, "whole warp tiles");
    static_assert(WM % 32 == 0 && WN % 16 == 0, "a warp's 8 x 4 lanes cover 32 x 16 per piece");
};

/* Shared-memory padding of a row, in elements: 4 keeps rows 16-byte aligned
 * and halves the bank conflicts of the transposing stores. */
constexpr int kWarptilePad = 4;

/* float64 halves BK but keeps the thread tile, whose accumulators alone take
 * 2 registers each: it gets the whole register file (one block per SM
 * guaranteed) rather than spilling. */
template <typename T, typename C>
constexpr int warptile_min_blocks()
{
    return sizeof(T) == sizeof(double) ? 1 : C::kMinBlocks;
}

template <typename T, typename C, bool kATrans, bool kBTrans>
__global__ void __launch_bounds__(C::kThreads, (warptile_min_blocks<T, C>())) matmul_warptile(mt_tensor out, mt_tensor a, mt_tensor b, int64_t lda, int64_t ldb, bool vec_out, int64_t row_tile_start, int64_t batch_start)
{
    constexpr int W = Pack<T>::kWidth;
    constexpr int BM = C::BM;
    constexpr int BN = C::BN;
    constexpr int BK = C::BK * 4 / (int)sizeof(T); /* the same 64 bytes of K per row */
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

    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t K = a.shape[a.ndim - 1];
    const BatchStart start = batch_start_of(batch_start + blockIdx.z, out, a, b);
    const T *a_data = static_cast<const T *>(a.data) + start.a;
    const T *b_data = static_cast<const T *>(b.data) + start.b;

    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int lane = tid % 32;
    const int64_t row0 = (row_tile_start + blockIdx.y) * BM;
    const int64_t col0 = (int64_t)blockIdx.x * BN;
    const int warp_row = (warp / (BN / C::WN)) * C::WM; /* the warp tile's corner in the block tile */
    const int warp_col = (warp % (BN / C::WN)) * C::WN;
    const int lane_row = (lane / 4) * 4;
    const int lane_col = (lane % 4) * 4;

    /* Staging registers for the next K-tile's global loads. */
    Pack<T> a_stage[kAPacks];
    Pack<T> b_stage[kBPacks];

    /* Global -> registers, for the K-tile starting at k0. */
    auto load_tile = [&](int64_t k0) {
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
    MT_UNROLL for (int im = 0; im < MI; ++im)
        MT_UNROLL for (int in = 0; in < NI; ++in)
            MT_UNROLL for (int i = 0; i < 4; ++i)
                MT_UNROLL for (int j = 0; j < 4; ++j)
                    acc[im][in][i][j] = T(0);

    const int64_t k_tiles = (K + BK - 1) / BK;
    load_tile(0);
    store_tile(0);
    __syncthreads();
    /* The loop count is the same for every thread: all reach each barrier. */
    for (int64_t t = 0; t < k_tiles; ++t) {
        const int s = (int)(t & 1);
        const bool more = t + 1 < k_tiles;
        if (more)
            load_tile((t + 1) * BK); /* in flight while we compute */
        MT_UNROLL for (int k = 0; k < BK; ++k) {
            T a_reg[MI][4];
            T b_reg[NI][4];
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
        /* Stage s ^ 1 is complete before anyone reads it (next iteration),
         * and everyone has finished reading stage s before iteration t + 1
         * overwrites it. */
        __syncthreads();
    }

    T *out_data = static_cast<T *>(out.data) + start.out;
    const int64_t o_rs = out.strides[out.ndim - 2], o_cs = out.strides[out.ndim - 1];
    MT_UNROLL for (int im = 0; im < MI; ++im)
        MT_UNROLL for (int i = 0; i < 4; ++i) {
            const int64_t row = row0 + warp_row + im * 32 + lane_row + i;
            MT_UNROLL for (int in = 0; in < NI; ++in)
                store_row<T, 4>(out_data, acc[im][in][i], row, col0 + warp_col + in * 16 + lane_col, M, N, o_rs, o_cs, vec_out);
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

static const char *const kWarptileConfigNames[] = {
    "128x128x16 warp 64x32 (256 threads, 2 blocks/SM)",
    "128x128x16 warp 64x32 (256 threads, 1 block/SM)",
    "128x64x16 warp 64x32 (128 threads)",
    "64x64x16 warp 32x32 (128 threads)",
    "64x128x16 warp 32x64 (128 threads)",
    "128x128x8 warp 64x32 (256 threads)",
    "64x64x32 warp 32x32 (128 threads)",
    "256x128x8 warp 64x64 (256 threads, 1 block/SM)",
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
    auto tiles = [&](int64_t bm, int64_t bn) { return ((M + bm - 1) / bm) * ((N + bn - 1) / bn) * batches; };
    if (itemsize == sizeof(float) && tiles(256, 128) >= sm_count)
        return 7;
    if (tiles(128, 128) >= sm_count)
        return 1;
    if (tiles(128, 64) >= sm_count)
        return 2;
    return 3;
}

template <typename T, typename C, bool kATrans, bool kBTrans>
static mt_status launch_warptile_typed(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t batches = shape_numel(out.shape, out.ndim - 2);
    const int64_t lda = leading_dim(a, kATrans);
    const int64_t ldb = leading_dim(b, kBTrans);
    const bool vec_out = out_vector_ok(out);
    return for_each_grid_chunk((N + C::BN - 1) / C::BN, (M + C::BM - 1) / C::BM, batches,
                               [&](dim3 grid, int64_t y0, int64_t b0) {
                                   matmul_warptile<T, C, kATrans, kBTrans><<<grid, C::kThreads>>>(out, a, b, lda, ldb, vec_out, y0, b0);
                                   CUDA_CHECK(mt_launch_status());
                                   return MT_OK;
                               });
}

/* float32 has kernels for transposed operands; float64 operands are made
 * row-major by mt_matmul (fewer kernels to compile). */
template <typename T, typename C>
static mt_status launch_warptile_layouts(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const bool at = gemm_operand_transposed(a);
    const bool bt = gemm_operand_transposed(b);
    if constexpr (sizeof(T) == sizeof(float)) {
        if (at && bt)
            return launch_warptile_typed<T, C, true, true>(out, a, b);
        if (at)
            return launch_warptile_typed<T, C, true, false>(out, a, b);
        if (bt)
            return launch_warptile_typed<T, C, false, true>(out, a, b);
    } else {
        if (at || bt)
            return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_matmul", "warptile: float64 operands must be row-major here");
    }
    return launch_warptile_typed<T, C, false, false>(out, a, b);
}

template <typename T>
mt_status launch_warptile(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int config)
{
    switch (config) {
    case 0:
        return launch_warptile_layouts<T, Cfg0>(out, a, b);
    case 1:
        return launch_warptile_layouts<T, Cfg1>(out, a, b);
    case 2:
        return launch_warptile_layouts<T, Cfg2>(out, a, b);
    case 3:
        return launch_warptile_layouts<T, Cfg3>(out, a, b);
    case 4:
        return launch_warptile_layouts<T, Cfg4>(out, a, b);
    case 5:
        return launch_warptile_layouts<T, Cfg5>(out, a, b);
    case 6:
        return launch_warptile_layouts<T, Cfg6>(out, a, b);
    case 7:
        return launch_warptile_layouts<T, Cfg7>(out, a, b);
    default:
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_matmul", "warptile config %d has no kernel", config);
    }
}

/* ---- launchers of rungs 4-6 ------------------------------------------------- */

template <typename T>
mt_status launch_blocktile_1d(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t batches = shape_numel(out.shape, out.ndim - 2);
    return for_each_grid_chunk((N + bt1::BN - 1) / bt1::BN, (M + bt1::BM - 1) / bt1::BM, batches,
                               [&](dim3 grid, int64_t y0, int64_t b0) {
                                   matmul_blocktile_1d<T><<<grid, bt1::kThreads>>>(out, a, b, y0, b0);
                                   CUDA_CHECK(mt_launch_status());
                                   return MT_OK;
                               });
}

template <typename T>
mt_status launch_blocktile_2d(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t batches = shape_numel(out.shape, out.ndim - 2);
    return for_each_grid_chunk((N + bt2::BN - 1) / bt2::BN, (M + bt2::BM - 1) / bt2::BM, batches,
                               [&](dim3 grid, int64_t y0, int64_t b0) {
                                   matmul_blocktile_2d<T><<<grid, bt2::kThreads>>>(out, a, b, y0, b0);
                                   CUDA_CHECK(mt_launch_status());
                                   return MT_OK;
                               });
}

template <typename T>
mt_status launch_vectorized(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t batches = shape_numel(out.shape, out.ndim - 2);
    const int64_t lda = leading_dim(a, false);
    const int64_t ldb = leading_dim(b, false);
    const bool vec_out = out_vector_ok(out);
    return for_each_grid_chunk((N + vec::BN - 1) / vec::BN, (M + vec::BM - 1) / vec::BM, batches,
                               [&](dim3 grid, int64_t y0, int64_t b0) {
                                   matmul_vectorized<T><<<grid, vec::kThreads>>>(out, a, b, lda, ldb, vec_out, y0, b0);
                                   CUDA_CHECK(mt_launch_status());
                                   return MT_OK;
                               });
}

template mt_status launch_blocktile_1d<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_blocktile_1d<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_blocktile_2d<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_blocktile_2d<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_vectorized<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_vectorized<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_warptile<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &, int);
template mt_status launch_warptile<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &, int);
