/*
 * attention_mma_backward.cu: the attention backward on the tensor cores at
 * float32's accuracy (the mma rung's backward: mt_attention_mma_backward),
 * the 3xTF32 products of the forward (src/attention_mma.cu; the fragment
 * helpers are in src/attention_mma_frag.h).
 *
 * The math is the other rungs' (src/attention.cu): with s_ij = q_i . k_j,
 * p_ij = exp(s_ij scale - lse_i) recomputed from the forward's lse and
 * D_i = dO_i . O_i,
 *
 *   dv_j = sum_i p_ij dO_i          ds_ij = p_ij (dO_i . v_j - D_i)
 *   dq_i = scale sum_j ds_ij k_j    dk_j  = scale sum_i ds_ij q_i
 *
 * dq sums over keys, dk and dv over queries, so the work is FlashAttention-2's
 * two kernels and no float atomics (the result does not depend on the order
 * blocks run in):
 *
 *   1. attention_mma_dq: a block owns 64 queries (4 warps of 16 rows, as the
 *      forward), computes D of its rows from dO (staged) and O (read once)
 *      and leaves it in memory for kernel 2, then walks tiles of keys:
 *      S = Q K^T, dP = dO V^T, dS = P (dP - D), dQ += dS K. The forward's
 *      step exactly, with dS where P was.
 *   2. attention_mma_dkdv: a block owns 64 keys (a warp 16 of them) and walks
 *      tiles of queries (causal: only those at or after its first key). It
 *      works in the key-major frame, every product with the keys as rows:
 *      S^T = K Q^T, dP^T = V dO^T, P^T = exp(S^T scale - lse_col),
 *      dS^T = P^T (dP^T - D_col), then dV += P^T dO and dK += dS^T Q with
 *      P^T and dS^T straight from the accumulator registers (the forward's
 *      key-order trick, here over queries). Every operand is then read
 *      row-major from its shared tile (ldmatrix for K and V, two loads a
 *      lane for Q and dO), and nothing is transposed through shared memory.
 *      A query's lse and D are per column here: staged beside Q and dO.
 *
 * At head dim 128 both run on 8 warps a block instead (attention_mma_dq_split,
 * attention_mma_dkdv_split): a pair of warps shares 16 rows, each keeps one
 * accumulator (dV or dK; half of dQ's columns), and the pair hands P (or
 * P^T) through shared memory. Why: below, before the kernels.
 *
 * Both kernels recompute S and dP (each is needed by both: dQ sums dS over
 * keys, dK over queries); storing them would be L x S floats a head.
 * Tiles walked are 32 or 64 rows (two stages by cp.async, the next in flight
 * while the block computes on this one). Head dims 64 or 128 as template
 * constants; float32 only. Compute capability 8.0 or newer; the emulator
 * runs the same code (src/emu/emu_mma.h).
 */
#include "attention.h"
#include "attention_mma.h"
#include "attention_mma_frag.h"
#include "scratch.h"

/* A block owns kRows rows (queries for the dQ kernel, keys for the dK/dV
 * kernel: 4 warps of 16) and walks tiles of kCols rows of the other side. */
template <int kDim, int kCols>
struct MmaBackwardTiles {
    static_assert(kDim == 64 || kDim == 128, "the mma rung's head dims");
    static_assert(kCols == 32 || kCols == 64, "the mma backward's walked tiles");
    static constexpr int kRows = 64;
    static constexpr int kThreads = kRows / 16 * 32;
    static constexpr int kRow = kDim + 4; /* shared row stride: 16 bytes of padding, as the forward */
    /* Two owned tiles, two stages of two walked tiles, two stages of two
     * vectors (lse and D, the dK/dV kernel only). */
    static constexpr size_t bytes()
    {
        return sizeof(float) * ((size_t)(2 * kRows + 4 * kCols) * kRow + 4 * kCols);
    }
    static_assert(bytes() <= 227 * 1024, "shared memory per block");
};

/* D = dO . O and lse of this lane's two rows (rows[h], dO's staged row
 * do_row + 8 h stride), stored to `delta` when `store`: the quad splits a
 * row's head dim in runs of 4 columns (lane t: columns 16i + 4t .. + 3). */
template <int kDim>
MT_DEVICE void rows_delta_lse(float (&row_delta)[2], float (&row_lse)[2], float *delta, bool store,
                              const float *do_row, int stride, const float *out, const float *lse, int64_t batch,
                              int64_t length, const int64_t (&rows)[2], int t)
{
    MT_UNROLL for (int h = 0; h < 2; ++h) {
        const int64_t row = rows[h];
        float sum = 0.0f;
        if (row < length) {
            const float *ob = out + (batch * length + row) * kDim;
            const float *dob = do_row + 8 * h * stride;
            MT_UNROLL for (int c = 4 * t; c < kDim; c += 16)
                MT_UNROLL for (int w = 0; w < 4; ++w)
                    sum += dob[c + w] * ob[c + w];
        }
        row_delta[h] = quad_sum(sum); /* every lane of the warp takes part in the shuffles */
        row_lse[h] = row < length ? lse[batch * length + row] : 0.0f;
        if (row < length && t == 0 && store)
            delta[batch * length + row] = row_delta[h];
    }
}

/* dQ of 64 queries, and D of those rows into `delta`. */
template <int kDim, int kCols>
__global__ void __launch_bounds__(MmaBackwardTiles<kDim, kCols>::kThreads)
attention_mma_dq(float *dq, float *delta, const float *dout, const float *out, const float *lse, const float *q,
                 const float *k, const float *v, int64_t length, int64_t keys, float scale, int causal,
                 int64_t batches, int64_t row_tiles, int vec)
{
#if defined(MT_EMULATOR) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
    using Tiles = MmaBackwardTiles<kDim, kCols>;
    constexpr int BR = Tiles::kRows, BC = kCols, RS = Tiles::kRow, kThreads = Tiles::kThreads;
    constexpr int NJ = BC / 8, NO = kDim / 8;
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    float *q_tile = reinterpret_cast<float *>(&shared_bytes[0]); /* [BR][RS] */
    float *do_tile = q_tile + BR * RS;                            /* [BR][RS] */
    float *k_tiles = do_tile + BR * RS;                           /* [2][BC][RS]: two stages */
    float *v_tiles = k_tiles + 2 * BC * RS;                       /* [2][BC][RS] */

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    /* Heaviest query tiles first, as the forward. */
    const int64_t batch = blockIdx.x % batches, q0 = (row_tiles - 1 - blockIdx.x / batches) * BR;
    const int64_t warp_row0 = q0 + warp * 16;
    const int64_t rows[2] = {warp_row0 + g, warp_row0 + g + 8}; /* this lane's two rows */
    const float *kb = k + batch * keys * kDim, *vb = v + batch * keys * kDim;

    const int64_t key_end = causal && q0 + BR < keys ? q0 + BR : keys;
    const int64_t tiles = (key_end + BC - 1) / BC;
    stage_rows<float, kDim, kThreads>(q_tile, RS, q + batch * length * kDim, q0, BR, length, vec);
    stage_rows<float, kDim, kThreads>(do_tile, RS, dout + batch * length * kDim, q0, BR, length, vec);
    if (tiles > 0) {
        stage_rows<float, kDim, kThreads>(k_tiles, RS, kb, 0, BC, keys, vec);
        stage_rows<float, kDim, kThreads>(v_tiles, RS, vb, 0, BC, keys, vec);
    }
    async_commit();
    async_wait<0>(); /* dO has landed (and the first K/V tile with it) */
    __syncthreads();

    float row_delta[2], row_lse[2];
    rows_delta_lse<kDim>(row_delta, row_lse, delta, true, do_tile + (warp * 16 + g) * RS, RS, out, lse, batch, length,
                         rows, t);

    const float *q_frag = frag_row(q_tile, RS, warp * 16, lane), *do_frag = frag_row(do_tile, RS, warp * 16, lane);
    float dq_acc[NO][4] = {};
    for (int64_t kt = 0; kt < tiles; ++kt) {
        const int s = (int)(kt & 1);
        if (kt + 1 < tiles) { /* the next tile, in flight while we compute on this one */
            stage_rows<float, kDim, kThreads>(k_tiles + (s ^ 1) * BC * RS, RS, kb, (kt + 1) * BC, BC, keys, vec);
            stage_rows<float, kDim, kThreads>(v_tiles + (s ^ 1) * BC * RS, RS, vb, (kt + 1) * BC, BC, keys, vec);
        }
        async_commit();
        async_wait<1>(); /* this tile's copies have landed: only the newest group may be in flight */
        __syncthreads(); /* ... everyone's copies, not only mine */
        const float *k_tile = k_tiles + s * BC * RS, *v_tile = v_tiles + s * BC * RS;
        const int64_t key0 = kt * BC;

        float sc[NJ][4] = {}, dp[NJ][4] = {};
        mma_rows_abt<kDim, NJ>(sc, q_frag, k_tile, RS, g, t);  /* S = Q K^T */
        mma_rows_abt<kDim, NJ>(dp, do_frag, v_tile, RS, g, t); /* dP = dO V^T */
        /* dS = P (dP - D) in S's registers; P = 0 past the last key and, under
         * the causal mask, after the row (only tiles that reach there). Rows
         * past the end have Q = 0 (finite P) and are never written. */
        const bool edge = key0 + BC > keys || (causal && key0 + BC - 1 > warp_row0);
        MT_UNROLL for (int j = 0; j < NJ; ++j)
            MT_UNROLL for (int e = 0; e < 4; ++e) {
                const int64_t key = key0 + 8 * j + 2 * t + (e & 1);
                const bool hidden = edge && (key >= keys || (causal && key > rows[e / 2]));
                const float p = hidden ? 0.0f : mt_exp(sc[j][e] * scale - row_lse[e / 2]);
                sc[j][e] = p * (dp[j][e] - row_delta[e / 2]);
            }
        mma_acc_ab<kDim, NJ>(dq_acc, sc, k_tile, RS, g, t); /* dQ += dS K */
        __syncthreads(); /* everyone is done with stage s before it is overwritten */
    }
    async_wait<0>(); /* no copy may outlive the block (the last commit may be empty) */

    MT_UNROLL for (int h = 0; h < 2; ++h)
        if (rows[h] < length) {
            float *row = dq + (batch * length + rows[h]) * kDim + 2 * t;
            MT_UNROLL for (int n = 0; n < NO; ++n) {
                row[8 * n] = dq_acc[n][2 * h] * scale;
                row[8 * n + 1] = dq_acc[n][2 * h + 1] * scale;
            }
        }
#endif
}

/* dK and dV of 64 keys, in the key-major frame; D from the dQ kernel. */
template <int kDim, int kCols>
__global__ void __launch_bounds__(MmaBackwardTiles<kDim, kCols>::kThreads)
attention_mma_dkdv(float *dk, float *dv, const float *dout, const float *delta, const float *lse, const float *q,
                   const float *k, const float *v, int64_t length, int64_t keys, float scale, int causal,
                   int64_t batches, int64_t key_tiles, int vec)
{
#if defined(MT_EMULATOR) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
    using Tiles = MmaBackwardTiles<kDim, kCols>;
    constexpr int BK = Tiles::kRows, BQ = kCols, RS = Tiles::kRow, kThreads = Tiles::kThreads;
    constexpr int NJ = BQ / 8, NO = kDim / 8;
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    float *k_tile = reinterpret_cast<float *>(&shared_bytes[0]); /* [BK][RS], the block's keys */
    float *v_tile = k_tile + BK * RS;                             /* [BK][RS] */
    float *q_tiles = v_tile + BK * RS;                            /* [2][BQ][RS]: two stages */
    float *do_tiles = q_tiles + 2 * BQ * RS;                      /* [2][BQ][RS] */
    float *lse_tiles = do_tiles + 2 * BQ * RS;                    /* [2][BQ] */
    float *delta_tiles = lse_tiles + 2 * BQ;                      /* [2][BQ] */

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    /* Key tiles in order: under the causal mask the first see the most
     * queries, so the heaviest run first. */
    const int64_t batch = blockIdx.x % batches, k0 = blockIdx.x / batches * BK;
    const int64_t warp_key0 = k0 + warp * 16;
    const int64_t own[2] = {warp_key0 + g, warp_key0 + g + 8}; /* this lane's two keys */
    const float *qb = q + batch * length * kDim, *dob = dout + batch * length * kDim;
    const float *lseb = lse + batch * length, *deltab = delta + batch * length;

    /* Causal: a query before k0 sees none of the block's keys. */
    const int64_t q_begin = causal ? k0 / BQ * BQ : 0;
    const int64_t tiles = q_begin < length ? (length - q_begin + BQ - 1) / BQ : 0;
    auto stage_queries = [&](int stage, int64_t start) {
        stage_rows<float, kDim, kThreads>(q_tiles + stage * BQ * RS, RS, qb, start, BQ, length, vec);
        stage_rows<float, kDim, kThreads>(do_tiles + stage * BQ * RS, RS, dob, start, BQ, length, vec);
        stage_values<float, kThreads>(lse_tiles + stage * BQ, lseb, start, BQ, length);
        stage_values<float, kThreads>(delta_tiles + stage * BQ, deltab, start, BQ, length);
    };
    stage_rows<float, kDim, kThreads>(k_tile, RS, k + batch * keys * kDim, k0, BK, keys, vec);
    stage_rows<float, kDim, kThreads>(v_tile, RS, v + batch * keys * kDim, k0, BK, keys, vec);
    if (tiles > 0)
        stage_queries(0, q_begin);
    async_commit();

    const float *k_frag = frag_row(k_tile, RS, warp * 16, lane), *v_frag = frag_row(v_tile, RS, warp * 16, lane);
    float dk_acc[NO][4] = {}, dv_acc[NO][4] = {};
    for (int64_t qt = 0; qt < tiles; ++qt) {
        const int s = (int)(qt & 1);
        const int64_t q0 = q_begin + qt * BQ;
        if (qt + 1 < tiles)
            stage_queries(s ^ 1, q0 + BQ);
        async_commit();
        async_wait<1>(); /* this tile's copies (and K's, V's) have landed */
        __syncthreads(); /* ... everyone's */
        const float *q_tile = q_tiles + s * BQ * RS, *do_tile = do_tiles + s * BQ * RS;
        const float *lse_tile = lse_tiles + s * BQ, *delta_tile = delta_tiles + s * BQ;

        float st[NJ][4] = {}, dpt[NJ][4] = {};
        mma_rows_abt<kDim, NJ>(st, k_frag, q_tile, RS, g, t);   /* S^T = K Q^T */
        mma_rows_abt<kDim, NJ>(dpt, v_frag, do_tile, RS, g, t); /* dP^T = V dO^T */
        /* P^T and dS^T = P^T (dP^T - D) in place; a column is a query, with
         * its lse and D. P^T = 0 for queries past the end and, under the
         * causal mask, before the key (only tiles that reach there). Keys
         * past the end have K = 0 and are never written. */
        const bool edge = q0 + BQ > length || (causal && q0 < warp_key0 + 15);
        MT_UNROLL for (int j = 0; j < NJ; ++j)
            MT_UNROLL for (int c = 0; c < 2; ++c) {
                const int col = 8 * j + 2 * t + c;
                const int64_t query = q0 + col;
                const float col_lse = lse_tile[col], col_delta = delta_tile[col];
                MT_UNROLL for (int h = 0; h < 2; ++h) {
                    const int e = 2 * h + c;
                    const bool hidden = edge && (query >= length || (causal && own[h] > query));
                    const float p = hidden ? 0.0f : mt_exp(st[j][e] * scale - col_lse);
                    st[j][e] = p;
                    dpt[j][e] = p * (dpt[j][e] - col_delta);
                }
            }
        mma_acc_ab<kDim, NJ>(dv_acc, st, do_tile, RS, g, t); /* dV += P^T dO */
        mma_acc_ab<kDim, NJ>(dk_acc, dpt, q_tile, RS, g, t); /* dK += dS^T Q */
        __syncthreads(); /* everyone is done with stage s before it is overwritten */
    }
    async_wait<0>(); /* no copy may outlive the block (K and V's, when no query tile) */

    MT_UNROLL for (int h = 0; h < 2; ++h)
        if (own[h] < keys) {
            float *dk_row = dk + (batch * keys + own[h]) * kDim + 2 * t;
            float *dv_row = dv + (batch * keys + own[h]) * kDim + 2 * t;
            MT_UNROLL for (int n = 0; n < NO; ++n) {
                dk_row[8 * n] = dk_acc[n][2 * h] * scale;
                dk_row[8 * n + 1] = dk_acc[n][2 * h + 1] * scale;
                dv_row[8 * n] = dv_acc[n][2 * h];
                dv_row[8 * n + 1] = dv_acc[n][2 * h + 1];
            }
        }
#endif
}

/* The head-dim-128 form of both kernels: 8 warps a block, each pair of
 * warps (w, w + 4) on the same 16 rows, each warp one 16 x 128 (dK/dV) or
 * 16 x 64 (dQ) accumulator, the score fragments handed between the pair
 * through shared memory in the accumulator layout (lane l writes what lane l
 * of the other warp reads: no bank conflicts, no transpose). Why: with dK
 * and dV in one warp the dK/dV kernel held 2 x 64 floats a lane, 249
 * registers (ptxas, sm_90a), and with 133 KiB of shared memory both
 * kernels ran one 4-warp block an SM (6 % occupancy, 4 warps to hide the
 * latency of every shared load and mma). Split, the same block has 8 warps
 * doing the same products once (nothing recomputed): ptxas numbers at
 * mt_attention_mma_backward. A pair's slot: [NJ][4][32] floats. */
template <int kDim, int kCols>
struct MmaSplitTiles : MmaBackwardTiles<kDim, kCols> {
    static constexpr int kThreads = 2 * MmaBackwardTiles<kDim, kCols>::kThreads;
    static constexpr int kSlot = kCols / 8 * 4 * 32;
    static constexpr size_t bytes() { return MmaBackwardTiles<kDim, kCols>::bytes() + sizeof(float) * 4 * kSlot; }
    static_assert(bytes() <= 227 * 1024, "shared memory per block");
};

/* dQ of 64 queries at head dim 128, 8 warps. Warp w < 4 computes S = Q K^T
 * and P of rows 16w.., its partner w + 4 dP = dO V^T; P goes to the pair's
 * slot, the partner turns it into dS = P (dP - D) in place, and both then
 * add dS K to their half of dQ's columns (w < 4 the first 64). */
template <int kDim, int kCols>
__global__ void __launch_bounds__(MmaSplitTiles<kDim, kCols>::kThreads)
attention_mma_dq_split(float *dq, float *delta, const float *dout, const float *out, const float *lse,
                       const float *q, const float *k, const float *v, int64_t length, int64_t keys, float scale,
                       int causal, int64_t batches, int64_t row_tiles, int vec)
{
#if defined(MT_EMULATOR) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
    using Tiles = MmaSplitTiles<kDim, kCols>;
    constexpr int BR = Tiles::kRows, BC = kCols, RS = Tiles::kRow, kThreads = Tiles::kThreads;
    constexpr int NJ = BC / 8, kHalf = kDim / 2;
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    float *q_tile = reinterpret_cast<float *>(&shared_bytes[0]); /* [BR][RS] */
    float *do_tile = q_tile + BR * RS;                            /* [BR][RS] */
    float *k_tiles = do_tile + BR * RS;                           /* [2][BC][RS]: two stages */
    float *v_tiles = k_tiles + 2 * BC * RS;                       /* [2][BC][RS] */
    float *slots = v_tiles + 2 * BC * RS + 4 * BC;                /* [4][NJ][4][32], after the unused vectors */

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4, rows16 = warp % 4, half = warp / 4;
    const int64_t batch = blockIdx.x % batches, q0 = (row_tiles - 1 - blockIdx.x / batches) * BR;
    const int64_t warp_row0 = q0 + rows16 * 16;
    const int64_t rows[2] = {warp_row0 + g, warp_row0 + g + 8};
    const float *kb = k + batch * keys * kDim, *vb = v + batch * keys * kDim;
    float *slot = slots + rows16 * Tiles::kSlot + lane; /* element (j, e) at slot[(4 j + e) * 32] */

    const int64_t key_end = causal && q0 + BR < keys ? q0 + BR : keys;
    const int64_t tiles = (key_end + BC - 1) / BC;
    stage_rows<float, kDim, kThreads>(q_tile, RS, q + batch * length * kDim, q0, BR, length, vec);
    stage_rows<float, kDim, kThreads>(do_tile, RS, dout + batch * length * kDim, q0, BR, length, vec);
    if (tiles > 0) {
        stage_rows<float, kDim, kThreads>(k_tiles, RS, kb, 0, BC, keys, vec);
        stage_rows<float, kDim, kThreads>(v_tiles, RS, vb, 0, BC, keys, vec);
    }
    async_commit();
    async_wait<0>();
    __syncthreads();

    /* D and lse of the pair's rows (both warps: the partner needs D, this
     * warp lse); the first of the pair stores D for the dK/dV kernel. */
    float row_delta[2], row_lse[2];
    rows_delta_lse<kDim>(row_delta, row_lse, delta, half == 0, do_tile + (rows16 * 16 + g) * RS, RS, out, lse, batch,
                         length, rows, t);

    /* One product a warp: S = Q K^T for the first of the pair, dP = dO V^T
     * for the second (the same loop on other tiles). */
    const float *a_frag = frag_row(half == 0 ? q_tile : do_tile, RS, rows16 * 16, lane);
    float dq_acc[kHalf / 8][4] = {};
    for (int64_t kt = 0; kt < tiles; ++kt) {
        const int s = (int)(kt & 1);
        if (kt + 1 < tiles) {
            stage_rows<float, kDim, kThreads>(k_tiles + (s ^ 1) * BC * RS, RS, kb, (kt + 1) * BC, BC, keys, vec);
            stage_rows<float, kDim, kThreads>(v_tiles + (s ^ 1) * BC * RS, RS, vb, (kt + 1) * BC, BC, keys, vec);
        }
        async_commit();
        async_wait<1>();
        __syncthreads();
        const float *k_tile = k_tiles + s * BC * RS, *v_tile = v_tiles + s * BC * RS;
        const int64_t key0 = kt * BC;

        float sc[NJ][4] = {};
        mma_rows_abt<kDim, NJ>(sc, a_frag, half == 0 ? k_tile : v_tile, RS, g, t);
        if (half == 0) { /* P, masked as in attention_mma_dq, to the slot */
            const bool edge = key0 + BC > keys || (causal && key0 + BC - 1 > warp_row0);
            MT_UNROLL for (int j = 0; j < NJ; ++j)
                MT_UNROLL for (int e = 0; e < 4; ++e) {
                    const int64_t key = key0 + 8 * j + 2 * t + (e & 1);
                    const bool hidden = edge && (key >= keys || (causal && key > rows[e / 2]));
                    slot[(4 * j + e) * 32] = hidden ? 0.0f : mt_exp(sc[j][e] * scale - row_lse[e / 2]);
                }
        }
        __syncthreads(); /* P is in the slots */
        if (half == 1) /* dS = P (dP - D), over P */
            MT_UNROLL for (int j = 0; j < NJ; ++j)
                MT_UNROLL for (int e = 0; e < 4; ++e) {
                    float &p = slot[(4 * j + e) * 32];
                    p = p * (sc[j][e] - row_delta[e / 2]);
                }
        __syncthreads(); /* dS is in the slots */
        MT_UNROLL for (int j = 0; j < NJ; ++j)
            MT_UNROLL for (int e = 0; e < 4; ++e)
                sc[j][e] = slot[(4 * j + e) * 32];
        mma_acc_ab<kHalf, NJ>(dq_acc, sc, k_tile + half * kHalf, RS, g, t); /* dQ (this half) += dS K */
        __syncthreads(); /* stage s and the slots are free */
    }
    async_wait<0>();

    MT_UNROLL for (int h = 0; h < 2; ++h)
        if (rows[h] < length) {
            float *row = dq + (batch * length + rows[h]) * kDim + half * kHalf + 2 * t;
            MT_UNROLL for (int n = 0; n < kHalf / 8; ++n) {
                row[8 * n] = dq_acc[n][2 * h] * scale;
                row[8 * n + 1] = dq_acc[n][2 * h + 1] * scale;
            }
        }
#endif
}

/* dK and dV of 64 keys at head dim 128, 8 warps. Warp w < 4 computes S^T =
 * K Q^T and P^T of keys 16w.. and keeps dV += P^T dO; its partner w + 4
 * computes dP^T = V dO^T, takes P^T from the slot for dS^T = P^T (dP^T - D)
 * and keeps dK += dS^T Q. Two products a warp where one warp did four. */
template <int kDim, int kCols>
__global__ void __launch_bounds__(MmaSplitTiles<kDim, kCols>::kThreads)
attention_mma_dkdv_split(float *dk, float *dv, const float *dout, const float *delta, const float *lse,
                         const float *q, const float *k, const float *v, int64_t length, int64_t keys, float scale,
                         int causal, int64_t batches, int64_t key_tiles, int vec)
{
#if defined(MT_EMULATOR) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
    using Tiles = MmaSplitTiles<kDim, kCols>;
    constexpr int BK = Tiles::kRows, BQ = kCols, RS = Tiles::kRow, kThreads = Tiles::kThreads;
    constexpr int NJ = BQ / 8, NO = kDim / 8;
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    float *k_tile = reinterpret_cast<float *>(&shared_bytes[0]); /* [BK][RS], the block's keys */
    float *v_tile = k_tile + BK * RS;                             /* [BK][RS] */
    float *q_tiles = v_tile + BK * RS;                            /* [2][BQ][RS]: two stages */
    float *do_tiles = q_tiles + 2 * BQ * RS;                      /* [2][BQ][RS] */
    float *lse_tiles = do_tiles + 2 * BQ * RS;                    /* [2][BQ] */
    float *delta_tiles = lse_tiles + 2 * BQ;                      /* [2][BQ] */
    float *slots = delta_tiles + 2 * BQ;                          /* [4][NJ][4][32] */

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4, keys16 = warp % 4, half = warp / 4;
    const int64_t batch = blockIdx.x % batches, k0 = blockIdx.x / batches * BK;
    const int64_t warp_key0 = k0 + keys16 * 16;
    const int64_t own[2] = {warp_key0 + g, warp_key0 + g + 8};
    const float *qb = q + batch * length * kDim, *dob = dout + batch * length * kDim;
    const float *lseb = lse + batch * length, *deltab = delta + batch * length;
    float *slot = slots + keys16 * Tiles::kSlot + lane; /* element (j, e) at slot[(4 j + e) * 32] */

    const int64_t q_begin = causal ? k0 / BQ * BQ : 0;
    const int64_t tiles = q_begin < length ? (length - q_begin + BQ - 1) / BQ : 0;
    auto stage_queries = [&](int stage, int64_t start) {
        stage_rows<float, kDim, kThreads>(q_tiles + stage * BQ * RS, RS, qb, start, BQ, length, vec);
        stage_rows<float, kDim, kThreads>(do_tiles + stage * BQ * RS, RS, dob, start, BQ, length, vec);
        stage_values<float, kThreads>(lse_tiles + stage * BQ, lseb, start, BQ, length);
        stage_values<float, kThreads>(delta_tiles + stage * BQ, deltab, start, BQ, length);
    };
    stage_rows<float, kDim, kThreads>(k_tile, RS, k + batch * keys * kDim, k0, BK, keys, vec);
    stage_rows<float, kDim, kThreads>(v_tile, RS, v + batch * keys * kDim, k0, BK, keys, vec);
    if (tiles > 0)
        stage_queries(0, q_begin);
    async_commit();

    /* The first of the pair: K against Q, then P^T against dO; the second:
     * V against dO, then dS^T against Q. */
    const float *a_frag = frag_row(half == 0 ? k_tile : v_tile, RS, keys16 * 16, lane);
    float acc[NO][4] = {};
    for (int64_t qt = 0; qt < tiles; ++qt) {
        const int s = (int)(qt & 1);
        const int64_t q0 = q_begin + qt * BQ;
        if (qt + 1 < tiles)
            stage_queries(s ^ 1, q0 + BQ);
        async_commit();
        async_wait<1>();
        __syncthreads();
        const float *q_tile = q_tiles + s * BQ * RS, *do_tile = do_tiles + s * BQ * RS;
        const float *lse_tile = lse_tiles + s * BQ, *delta_tile = delta_tiles + s * BQ;

        float st[NJ][4] = {};
        mma_rows_abt<kDim, NJ>(st, a_frag, half == 0 ? q_tile : do_tile, RS, g, t); /* S^T or dP^T */
        if (half == 0) { /* P^T, masked as in attention_mma_dkdv, kept and to the slot */
            const bool edge = q0 + BQ > length || (causal && q0 < warp_key0 + 15);
            MT_UNROLL for (int j = 0; j < NJ; ++j)
                MT_UNROLL for (int e = 0; e < 4; ++e) {
                    const int64_t query = q0 + 8 * j + 2 * t + (e & 1);
                    const bool hidden = edge && (query >= length || (causal && own[e / 2] > query));
                    st[j][e] = hidden ? 0.0f : mt_exp(st[j][e] * scale - lse_tile[8 * j + 2 * t + (e & 1)]);
                    slot[(4 * j + e) * 32] = st[j][e];
                }
        }
        __syncthreads(); /* P^T is in the slots */
        if (half == 1) /* dS^T = P^T (dP^T - D) */
            MT_UNROLL for (int j = 0; j < NJ; ++j)
                MT_UNROLL for (int e = 0; e < 4; ++e)
                    st[j][e] = slot[(4 * j + e) * 32] * (st[j][e] - delta_tile[8 * j + 2 * t + (e & 1)]);
        mma_acc_ab<kDim, NJ>(acc, st, half == 0 ? do_tile : q_tile, RS, g, t); /* dV += P^T dO, dK += dS^T Q */
        __syncthreads(); /* stage s and the slots are free */
    }
    async_wait<0>();

    MT_UNROLL for (int h = 0; h < 2; ++h)
        if (own[h] < keys) {
            const float mul = half == 0 ? 1.0f : scale; /* dK = scale sum dS^T Q */
            float *row = (half == 0 ? dv : dk) + (batch * keys + own[h]) * kDim + 2 * t;
            MT_UNROLL for (int n = 0; n < NO; ++n) {
                row[8 * n] = acc[n][2 * h] * mul;
                row[8 * n + 1] = acc[n][2 * h + 1] * mul;
            }
        }
#endif
}

/* Launches one kernel of the backward with its shared memory opted in. */
template <typename Kernel, typename... Args>
static mt_status launch_with_bytes(Kernel kernel, int64_t blocks, int threads, size_t bytes, Args... args)
{
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    kernel<<<(unsigned int)blocks, threads, bytes, mt_stream()>>>(args...);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* Head dim 64: the 4-warp kernels; 128: the 8-warp split (kSplit). */
template <int kDim, int kCols, bool kSplit = kDim == 128>
static mt_status launch_mma_backward(const mt_tensor &dq, const mt_tensor &dk, const mt_tensor &dv,
                                     const mt_tensor &dout, const mt_tensor &q, const mt_tensor &k,
                                     const mt_tensor &v, const mt_tensor &out, const mt_tensor &lse, double scale,
                                     int causal)
{
    using Tiles = MmaBackwardTiles<kDim, kCols>;
    using Split = MmaSplitTiles<kDim, kCols>;
    const char *func = "mt_attention_mma_backward";
    const int64_t b = q.shape[0], length = q.shape[1], keys = k.shape[1];
    const int64_t row_tiles = (length + Tiles::kRows - 1) / Tiles::kRows;
    const int64_t key_tiles = (keys + Tiles::kRows - 1) / Tiles::kRows;
    if (b * row_tiles > INT32_MAX || b * key_tiles > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "more blocks than a grid holds");
    if (b * length == 0)
        return zero_key_grads<float>(dk, dv, b * keys * kDim);
    const bool vec = aligned16(first_of<float>(q)) && aligned16(first_of<float>(k)) &&
                     aligned16(first_of<float>(v)) && aligned16(first_of<float>(dout));
    const size_t bytes = kSplit ? Split::bytes() : Tiles::bytes();
    const int threads = kSplit ? Split::kThreads : Tiles::kThreads;
    MT_TRY(check_mma_device("mt_attention_mma_backward", bytes));
    DeviceScratch delta; /* D_i = dO_i . O_i, written by the dQ kernel, read by the dK/dV kernel */
    CUDA_CHECK(delta.allocate(sizeof(float) * (size_t)(b * length)));
    const float fscale = (float)scale;
    const int is_causal = causal != 0;
    auto dq_kernel = [] {
        if constexpr (kSplit)
            return attention_mma_dq_split<kDim, kCols>;
        else
            return attention_mma_dq<kDim, kCols>;
    }();
    auto dkdv_kernel = [] {
        if constexpr (kSplit)
            return attention_mma_dkdv_split<kDim, kCols>;
        else
            return attention_mma_dkdv<kDim, kCols>;
    }();
    MT_TRY(launch_with_bytes(dq_kernel, b * row_tiles, threads, bytes, first_of<float>(dq), delta.as<float>(),
                             first_of<float>(dout), first_of<float>(out), first_of<float>(lse), first_of<float>(q),
                             first_of<float>(k), first_of<float>(v), length, keys, fscale, is_causal, b, row_tiles,
                             (int)vec));
    if (b * key_tiles > 0)
        MT_TRY(launch_with_bytes(dkdv_kernel, b * key_tiles, threads, bytes, first_of<float>(dk), first_of<float>(dv),
                                 first_of<float>(dout), (const float *)delta.as<float>(), first_of<float>(lse),
                                 first_of<float>(q), first_of<float>(k), first_of<float>(v), length, keys, fscale,
                                 is_causal, b, key_tiles, (int)vec));
    CUDA_CHECK(delta.release());
    return MT_OK;
}

/* The smallest walked tile (32 rows): what a GPU must allow for the rung
 * to run at all (mt_attention_mma_supported). */
size_t mma_backward_default_bytes(int64_t d)
{
    return d == 64 ? MmaBackwardTiles<64, 32>::bytes() : MmaSplitTiles<128, 32>::bytes();
}

/* The walked tile when block_cols is 0 (why: in mt_attention_mma_backward):
 * 32 rows at head dim 64; at 128, 64 rows where a block may take their
 * 215 KiB (an H100 or H200), else 32 (141 KiB: an A100). */
static int default_cols(int64_t d)
{
    if (d == 64)
        return 32;
    mt_device_caps caps;
    const bool wide = mt_get_device_caps(&caps) == MT_OK && (size_t)caps.smem_optin >= MmaSplitTiles<128, 64>::bytes();
    return wide ? 64 : 32;
}

mt_status mt_attention_mma_backward(mt_tensor dq, mt_tensor dk, mt_tensor dv, mt_tensor dout, mt_tensor q,
                                    mt_tensor k, mt_tensor v, mt_tensor out, mt_tensor lse, double scale,
                                    int causal, int block_cols)
{
    const char *func = "mt_attention_mma_backward";
    MT_TRY(check_attention_backward(func, dq, dk, dv, dout, q, k, v, out, lse, 128));
    MT_TRY(check_mma_operands(func, q, v, 0, 0));
    if (block_cols != 0 && block_cols != 32 && block_cols != 64)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "block_cols %d: the mma backward takes 0 (the default), "
                       "32 or 64", block_cols);
    /* The default tiles (default_cols). Head dim 64: 32 rows, faster than
     * 64 at 8 of 10 shapes on the H200 (2.08 against 2.70 ms at B*H 192
     * T1024 causal). Head dim 128: 64 rows, faster than 32 at all six
     * shapes with the 8-warp kernels (9.01 against 9.93 ms at B*H 192 T1024;
     * registers and bytes: docs/performance.md, 2026-11-28 afternoon). */
    const int cols = block_cols != 0 ? block_cols : default_cols(q.shape[2]);
    const int64_t d = q.shape[2];
    return with_64_or_128(d, [&](auto dim) {
        constexpr int kDim = decltype(dim)::value;
        return cols == 64 ? launch_mma_backward<kDim, 64>(dq, dk, dv, dout, q, k, v, out, lse, scale, causal)
                          : launch_mma_backward<kDim, 32>(dq, dk, dv, dout, q, k, v, out, lse, scale, causal);
    });
}
