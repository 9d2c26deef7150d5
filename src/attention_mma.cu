/*
 * attention_mma.cu: the attention forward on the tensor cores at float32's
 * accuracy (the mma rung: mt_attention_mma).
 *
 * The warp and tiled rungs (src/attention_warp.cu, src/attention_tiled.cu)
 * are FFMA loops. torch's float32 attention (CUTLASS's memory-efficient
 * kernel) is not: CUTLASS multiplies float on sm80+ in "3xTF32" mode, which
 * this rung copies. A float x is split into two TF32 values,
 *     big = tf32(x),  small = tf32(x - big),
 * (big holds x's 11 leading bits, small the next 11) and a product is three
 * TF32 tensor-core products,
 *     a b ~ big_a big_b + big_a small_b + small_a big_b,
 * dropping only small_a small_b (about 2^-22 of a b) and the remainders'
 * rounding: float32's accuracy (a few 1e-7 a product), not TF32's 1e-3, at 3 mma.sync each where FFMA needs 8 x 8 x 16 / 32 = 32
 * instructions a lane for the same 16 x 8 x 8 fragment.
 *
 * A block of 4 warps takes 64 queries (or 8 warps 128, which then share
 * each K/V tile), a warp 16 rows of them; K and V
 * tiles of BC keys are staged in shared memory by cp.async (two stages: the
 * next tile in flight while the block computes on this one), and each warp
 * then does FlashAttention-2's step on its own rows, in registers:
 *
 *   1. S = Q K^T (16 x BC) by m16n8k8 mmas over the head dim: Q's fragments
 *      by ldmatrix from the block's Q tile, K's by two loads a lane (B[k][n]
 *      = K[n][k]: a K row is a column of K^T, read in place);
 *   2. the online softmax on S's accumulators: lane (g, t) = (lane / 4,
 *      lane % 4) holds rows g and g + 8, columns 2t and 2t + 1 of each
 *      8-key fragment, so a row's maximum and sum are the lane's own values
 *      and two shuffles across its quad (lanes 4g .. 4g + 3);
 *   3. O += P V with P straight from S's registers: the accumulator holds
 *      keys 2t, 2t + 1 where an A fragment wants keys t, t + 4, so the mma
 *      sums over the keys in the order 0, 2, 4, 6, 1, 3, 5, 7, and V's rows
 *      are read in that same order (b[0] = V[2t][n], b[1] = V[2t + 1][n]):
 *      a sum does not care about its order, and P never goes through shared
 *      memory.
 *
 * Causal: tiles wholly after a block's last query are never loaded, and the
 * mask is computed only in the tiles that cross a warp's diagonal (or the
 * last key). Blocks are numbered heaviest first (the query tiles near the
 * end see the most keys), so that the light ones fill the tail.
 *
 * Shared rows are padded by 4 floats: the 8 rows an ldmatrix phase reads,
 * and the 8 keys x 4 head-dim columns (K) or 4 key pairs x 8 columns (V) a
 * fragment load reads, then fall in 32 different banks.
 *
 * The head dim is a template constant (64 or 128, the same for q and v), as
 * are BC (16, 32 or 64) and the query block; float32 only (float64 has the FFMA rungs). The lse is
 * saved as the other rungs save it, so their backward kernels take it.
 * Compute capability 8.0 or newer; the emulator runs the same code
 * (src/emu/emu_mma.h).
 */
#include "attention.h"
#include "attention_mma.h"
#include "attention_mma_frag.h"

/* kQueries queries a block (64: 4 warps, 128: 8 warps sharing each K/V
 * tile), 16 rows a warp; kKeys keys a tile. */
template <int kDim, int kKeys, int kQueries>
struct MmaAttentionTiles {
    static_assert(kDim == 64 || kDim == 128, "the mma rung's head dims");
    static_assert(kKeys == 16 || kKeys == 32 || kKeys == 64, "the mma rung's key tiles");
    static_assert(kQueries == 64 || kQueries == 128, "the mma rung's query blocks");
    static constexpr int kThreads = kQueries / 16 * 32;
    static constexpr int kRow = kDim + 4; /* shared row stride: 16 bytes of padding */
    /* Q, then two stages of K and of V. */
    static constexpr size_t bytes() { return sizeof(float) * (size_t)(kQueries + 4 * kKeys) * kRow; }
    static_assert(bytes() <= 227 * 1024, "shared memory per block");
};

template <int kDim, int kKeys, int kQueries>
__global__ void __launch_bounds__(MmaAttentionTiles<kDim, kKeys, kQueries>::kThreads)
attention_mma_forward(float *out, float *lse, const float *q, const float *k, const float *v, int64_t length,
                      int64_t keys, float scale, int causal, int64_t batches, int64_t row_tiles, int vec)
{
#if defined(MT_EMULATOR) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
    using Tiles = MmaAttentionTiles<kDim, kKeys, kQueries>;
    constexpr int BR = kQueries, BC = kKeys, RS = Tiles::kRow, kThreads = Tiles::kThreads;
    constexpr int NJ = BC / 8, NO = kDim / 8; /* 8-column fragments of S and of O */
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    float *q_tile = reinterpret_cast<float *>(&shared_bytes[0]); /* [BR][RS] */
    float *k_tiles = q_tile + BR * RS;                            /* [2][BC][RS]: two stages */
    float *v_tiles = k_tiles + 2 * BC * RS;                       /* [2][BC][RS] */

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    /* Heaviest query tiles first: tile row_tiles - 1 of every batch, then
     * row_tiles - 2, ... */
    const int64_t batch = blockIdx.x % batches, q0 = (row_tiles - 1 - blockIdx.x / batches) * BR;
    const int64_t warp_row0 = q0 + warp * 16;
    const int64_t rows[2] = {warp_row0 + g, warp_row0 + g + 8}; /* this lane's two rows */
    const float *kb = k + batch * keys * kDim, *vb = v + batch * keys * kDim;

    /* Causal: query q0 + BR - 1 is the last to see a key, so no tile past it. */
    const int64_t key_end = causal && q0 + BR < keys ? q0 + BR : keys;
    const int64_t tiles = (key_end + BC - 1) / BC;
    stage_rows<float, kDim, kThreads>(q_tile, RS, q + batch * length * kDim, q0, BR, length, vec);
    if (tiles > 0) {
        stage_rows<float, kDim, kThreads>(k_tiles, RS, kb, 0, BC, keys, vec);
        stage_rows<float, kDim, kThreads>(v_tiles, RS, vb, 0, BC, keys, vec);
    }
    async_commit();

    float o[NO][4] = {};
    /* Per row (g, g + 8): the largest score so far, and this lane's share of
     * sum exp(score - m). */
    float m[2] = {-mt_infinity<float>(), -mt_infinity<float>()}, l[2] = {0.0f, 0.0f};
    /* The warp's 16 rows of Q: lane l names row l % 8 (+ 8 for matrices 1
     * and 3) and head-dim half l / 16 of each 16 x 8 fragment. */
    const float *q_frag_row = q_tile + (warp * 16 + (lane / 8 % 2) * 8 + lane % 8) * RS + lane / 16 * 4;
    /* The next tile, in flight while we compute on this one; then wait for
     * this one (one function, so that both loops below meet one barrier). */
    auto tile_landed = [&](int64_t kt) {
        const int s = (int)(kt & 1);
        if (kt + 1 < tiles) {
            stage_rows<float, kDim, kThreads>(k_tiles + (s ^ 1) * BC * RS, RS, kb, (kt + 1) * BC, BC, keys, vec);
            stage_rows<float, kDim, kThreads>(v_tiles + (s ^ 1) * BC * RS, RS, vb, (kt + 1) * BC, BC, keys, vec);
        }
        async_commit();
        async_wait<1>(); /* this tile's copies (and Q's) have landed: only the newest group may be in flight */
        __syncthreads(); /* ... everyone's copies, not only mine */
    };
    auto tile_done = [&]() { __syncthreads(); /* everyone is done with this stage before it is overwritten */ };
    /* Causal: a tile whose first key comes after the warp's last row is all
     * masked for this warp; the block loads it for its later warps, and this
     * warp only meets the barriers (at T256 with 128 x 64 tiles: 40
     * warp-tiles of products where there were 48). */
    const int64_t warp_tiles = causal && warp_row0 + 16 < key_end ? (warp_row0 + 16 + BC - 1) / BC : tiles;
    int64_t kt = 0;
    for (; kt < warp_tiles; ++kt) {
        const int s = (int)(kt & 1);
        tile_landed(kt);
        const float *k_tile = k_tiles + s * BC * RS, *v_tile = v_tiles + s * BC * RS;
        const int64_t key0 = kt * BC;

        /* 1. S = Q K^T over the head dim, 8 columns a step. */
        float sc[NJ][4] = {};
        MT_UNROLL for (int kk = 0; kk < kDim; kk += 8) {
            uint32_t qa[4], qa_big[4], qa_small[4];
            ldmatrix_x4(qa, q_frag_row + kk);
            MT_UNROLL for (int e = 0; e < 4; ++e)
                split_tf32(qa_big[e], qa_small[e], float_of_bits(qa[e]));
            MT_UNROLL for (int j = 0; j < NJ; ++j) {
                const float *kr = k_tile + (8 * j + g) * RS + kk + t; /* K^T[kk + t][8j + g] */
                uint32_t kb_big[2], kb_small[2];
                split_tf32(kb_big[0], kb_small[0], kr[0]);
                split_tf32(kb_big[1], kb_small[1], kr[4]);
                mma_3xtf32(sc[j], qa_big, qa_small, kb_big, kb_small);
            }
        }

        /* 2. The online softmax of rows g (sc[j][0..1]) and g + 8
         * (sc[j][2..3]). Masked: keys past the end, and keys after the row
         * under the causal mask; only a tile that reaches past the last key
         * or past the warp's first row can hold such keys. */
        const bool edge = key0 + BC > keys || (causal && key0 + BC - 1 > warp_row0);
        MT_UNROLL for (int j = 0; j < NJ; ++j)
            MT_UNROLL for (int e = 0; e < 4; ++e) {
                const int64_t key = key0 + 8 * j + 2 * t + (e & 1);
                const bool hidden = edge && (key >= keys || (causal && key > rows[e / 2]));
                sc[j][e] = hidden ? -mt_infinity<float>() : sc[j][e] * scale;
            }
        MT_UNROLL for (int h = 0; h < 2; ++h) {
            float tile_max = -mt_infinity<float>();
            MT_UNROLL for (int j = 0; j < NJ; ++j)
                tile_max = fmaxf(tile_max, fmaxf(sc[j][2 * h], sc[j][2 * h + 1]));
            tile_max = quad_max(tile_max);
            const float m_new = fmaxf(m[h], tile_max);
            /* What was summed with the old maximum is scaled by
             * exp(m - m_new). While every key so far is masked (m_new
             * -inf), subtract 0 instead: every weight is then exp(-inf) = 0. */
            const float shift = m_new == -mt_infinity<float>() ? 0.0f : m_new;
            const float rescale = mt_exp(m[h] - shift);
            float sum = 0.0f;
            MT_UNROLL for (int j = 0; j < NJ; ++j)
                MT_UNROLL for (int e = 2 * h; e < 2 * h + 2; ++e) {
                    sc[j][e] = mt_exp(sc[j][e] - shift);
                    sum += sc[j][e];
                }
            l[h] = l[h] * rescale + sum;
            MT_UNROLL for (int n = 0; n < NO; ++n) {
                o[n][2 * h] *= rescale;
                o[n][2 * h + 1] *= rescale;
            }
            m[h] = m_new;
        }

        /* 3. O += P V, 8 keys a step, in the order 0, 2, 4, 6, 1, 3, 5, 7:
         * A's a[0..3] = P[g][2t], P[g + 8][2t], P[g][2t + 1], P[g + 8][2t + 1]. */
        MT_UNROLL for (int j = 0; j < NJ; ++j) {
            uint32_t pa_big[4], pa_small[4];
            split_tf32(pa_big[0], pa_small[0], sc[j][0]);
            split_tf32(pa_big[1], pa_small[1], sc[j][2]);
            split_tf32(pa_big[2], pa_small[2], sc[j][1]);
            split_tf32(pa_big[3], pa_small[3], sc[j][3]);
            const float *vr = v_tile + (8 * j + 2 * t) * RS + g; /* V[8j + 2t][g], V[8j + 2t + 1][g] */
            MT_UNROLL for (int n = 0; n < NO; ++n) {
                uint32_t vb_big[2], vb_small[2];
                split_tf32(vb_big[0], vb_small[0], vr[8 * n]);
                split_tf32(vb_big[1], vb_small[1], vr[RS + 8 * n]);
                mma_3xtf32(o[n], pa_big, pa_small, vb_big, vb_small);
            }
        }
        tile_done();
    }
    for (; kt < tiles; ++kt) {
        tile_landed(kt);
        tile_done();
    }
    async_wait<0>(); /* no copy may outlive the block (the last commit may be empty) */

    MT_UNROLL for (int h = 0; h < 2; ++h) {
        const float total = quad_sum(l[h]);
        const int64_t row = rows[h];
        if (row < length) {
            float *ob = out + (batch * length + row) * kDim + 2 * t;
            MT_UNROLL for (int n = 0; n < NO; ++n) { /* total 0 (no key): NaN, as the other rungs */
                ob[8 * n] = o[n][2 * h] / total;
                ob[8 * n + 1] = o[n][2 * h + 1] / total;
            }
            if (t == 0)
                lse[batch * length + row] = m[h] + mt_log(total);
        }
    }
#endif
}

template <int kDim, int kKeys, int kQueries>
static mt_status launch_mma_forward(const mt_tensor &out, const mt_tensor &lse, const mt_tensor &q,
                                    const mt_tensor &k, const mt_tensor &v, double scale, int causal)
{
    using Tiles = MmaAttentionTiles<kDim, kKeys, kQueries>;
    const int64_t b = q.shape[0], length = q.shape[1];
    const int64_t row_tiles = (length + kQueries - 1) / kQueries;
    if (b * row_tiles > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_attention_mma", "more blocks than a grid holds");
    const size_t bytes = Tiles::bytes();
    MT_TRY(check_mma_device("mt_attention_mma", bytes));
    CUDA_CHECK(cudaFuncSetAttribute(attention_mma_forward<kDim, kKeys, kQueries>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    const bool vec =
        aligned16(first_of<float>(q)) && aligned16(first_of<float>(k)) && aligned16(first_of<float>(v));
    attention_mma_forward<kDim, kKeys, kQueries><<<(unsigned int)(b * row_tiles), Tiles::kThreads, bytes,
                                                   mt_stream()>>>(
        first_of<float>(out), first_of<float>(lse), first_of<float>(q), first_of<float>(k), first_of<float>(v),
        length, k.shape[1], (float)scale, causal != 0, b, row_tiles, vec);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_attention_mma(mt_tensor out, mt_tensor lse, mt_tensor q, mt_tensor k, mt_tensor v, double scale,
                           int causal, int block_queries, int block_keys)
{
    const char *func = "mt_attention_mma";
    MT_TRY(check_attention_forward(func, out, lse, q, k, v, 128));
    MT_TRY(check_mma_operands(func, q, v, block_queries, block_keys));
    if (tensor_numel(lse) == 0)
        return MT_OK; /* no query (a head dim of 0 is not taken) */
    /* The defaults, from the H100 sweep of 2026-11-28 (bench/attention.py,
     * forward, B64 H6 T256 to B4 H16 T2048): at head dim 64, 128 queries a
     * block and 64 keys a tile, the fastest of the four at 5 of the 6 shapes
     * (8 warps share each K/V tile; 1.148 against 1.323 ms for 64 x 64 at
     * T1024); at 128, 64 queries and 32 keys (99 KiB of shared memory, two
     * blocks an SM), within 5 % of the best. Up to 256 queries (the H200
     * checkpoint of 2026-11-28 17:50, B64 H6 T256, beside other work on the
     * card): causal, 64 x 32 at both head dims (the diagonal's masked
     * products are smaller: 0.148 against 0.161 ms at head dim 64, 0.294
     * against 0.342 for 128 x 64 at 128); unmasked at head dim 128, 128 x 64
     * where a block may have its 203 KiB (0.407 against 0.457 ms). */
    const int64_t d = q.shape[2];
    int queries = d == 64 ? 128 : 64, keys_tile = d == 64 ? 64 : 32;
    if (q.shape[1] <= 256 && causal) {
        queries = 64;
        keys_tile = 32;
    } else if (q.shape[1] <= 256 && d == 128) {
        mt_device_caps caps;
        MT_TRY(mt_get_device_caps(&caps));
        if (MmaAttentionTiles<128, 64, 128>::bytes() <= (size_t)caps.smem_optin) {
            queries = 128;
            keys_tile = 64;
        }
    }
    queries = block_queries != 0 ? block_queries : queries;
    keys_tile = block_keys != 0 ? block_keys : keys_tile;
    return with_64_or_128(d, [&](auto dim) {
        return with_64_or_128(queries, [&](auto rows) {
            constexpr int kDim = decltype(dim)::value, kQueries = decltype(rows)::value;
            /* Tiles of 16 keys: at head dim 128 with 64 queries, 66 KiB of
             * shared memory, three blocks an SM where 32 keys fit two. */
            return keys_tile == 64   ? launch_mma_forward<kDim, 64, kQueries>(out, lse, q, k, v, scale, causal)
                   : keys_tile == 32 ? launch_mma_forward<kDim, 32, kQueries>(out, lse, q, k, v, scale, causal)
                                     : launch_mma_forward<kDim, 16, kQueries>(out, lse, q, k, v, scale, causal);
        });
    });
}

mt_status mt_attention_mma_supported(int head_dim, int *forward, int *backward)
{
    if (forward == NULL || backward == NULL)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_attention_mma_supported", "forward and backward must not "
                       "be NULL");
    *forward = *backward = 0;
    if (head_dim != 64 && head_dim != 128)
        return MT_OK;
    /* mt_attention_mma's default tiles (above): 128 queries and 64 keys at
     * head dim 64, 64 and 32 at 128. */
    const size_t forward_bytes = head_dim == 64 ? MmaAttentionTiles<64, 64, 128>::bytes()
                                                : MmaAttentionTiles<128, 32, 64>::bytes();
    bool runs = false;
    MT_TRY(mma_device_runs(forward_bytes, &runs));
    *forward = runs;
    MT_TRY(mma_device_runs(mma_backward_default_bytes(head_dim), &runs));
    *backward = runs;
    return MT_OK;
}
