/*
 * attention_tiled.cu: flash attention block-tiled as a matmul is (the tiled
 * rung: mt_attention_tiled), forward and a deterministic backward.
 *
 * The warp rung (src/attention_warp.cu) already splits a query row over 8
 * lanes and computes S = Q K^T and O += P V as register-tiled products. Its
 * profile on the H100 (B16 H12 T1024 D64 causal) showed what was left: two
 * warps a scheduler (105 KiB of shared memory a block: two blocks an SM),
 * every score masked whether its tile needs it or not, and a backward bound
 * by the L1 path (dQ added with atomics, 2-way bank conflicts in the
 * transposed weight stores). This rung changes those:
 *
 *   - a block takes BR queries (64 or 128: kQueries, a template constant)
 *     with 2 BR threads, each thread a 4 x BC/8 micro-tile of scores and a
 *     4 x D/8 tile of the output; 128 queries share each K/V tile between
 *     twice the threads (half the staging per multiply-add);
 *   - K and V each have ONE shared buffer, staged in turn (FlashAttention's
 *     pipeline): V of tile t lands while the block computes S = Q K_t^T, K of
 *     tile t + 1 while it computes O += P V_t. Half the shared memory of
 *     double-buffering both, so 3 blocks of 64 queries (or 2 of 128) share an
 *     SM, and the other blocks hide the latency a block still waits;
 *   - only the tiles that need it are masked: a tile past the last key, or
 *     (causal) one that reaches past the block's first query. Every other
 *     tile skips the compare and select on each score;
 *   - the softmax works in base 2: scores are multiplied by scale * log2(e)
 *     once and every weight is one exp2 (the hardware's ex2) of the
 *     difference;
 *   - the backward is FlashAttention-2's, without atomics: a kernel per
 *     query tile computes dQ (recomputing P from the saved log-sum-exp, and
 *     D = rowsum(dO * O) for its rows, which it leaves in memory), then a
 *     kernel per key tile computes dK and dV in registers. Each output
 *     element is written once by one thread: the result does not depend on
 *     the order blocks run in.
 *
 * Head dims 32, 64 and 128, the same for q and v, as template constants.
 */
#include "attention.h"
#include "attention_tiled.h"
#include "attention_tiles.h"

constexpr int kTiledMaxDim = 128;
constexpr double kLog2e = 1.4426950408889634; /* log2(e): exp(x) = 2^(x log2(e)) */

/* exp2, the one transcendental of the online softmax (ex2 on the GPU). */
MT_DEVICE float tile_exp2(float x) { return exp2f(x); }
MT_DEVICE double tile_exp2(double x) { return exp2(x); }

/* Tile sizes of a head dim, dtype, query block and rows a thread (4, or 2
 * for the forward's variant with twice the warps: each thread half the
 * accumulators, so more blocks' warps fit an SM to hide the shared-memory
 * latency that an issue-bound block of 4 warps waits on). Measured on the
 * H100 (docs/performance.md), 2 rows were 10-43 % slower everywhere: the
 * score product's shared loads a multiply-add rise from 3/32 to 5/32 (head
 * dim 64) or 1/8 to 3/16 (128) in an issue-bound loop, more than the extra
 * warps hide. Opt-in, never the default. */
template <typename T, int kDim, int kQueriesArg, int kThreadRowsArg = 4>
struct TiledTiles {
    static_assert(kDim == 32 || kDim == 64 || kDim == 128, "the tiled rung's head dims");
    static_assert(kThreadRowsArg == 4 || kThreadRowsArg == 2, "4 or 2 rows a thread");
    static constexpr int kQueries = kQueriesArg;       /* BR: queries a block (forward, dQ) */
    static constexpr int kThreadRows = kThreadRowsArg; /* RI: a thread's rows of a tile */
    static constexpr int kThreads = 8 * kQueries / kThreadRows; /* 8 lanes a row */
    static constexpr int kGroups = kThreads / 8;       /* row groups: a thread owns rows ty + kGroups i */
    static constexpr bool kWide = kDim == 128 || sizeof(T) == 8;
    static constexpr int kKeys = kWide ? 32 : 64;      /* BC: keys a tile; 32 keeps D 128's registers */
    static constexpr int kRow = kDim + 16 / (int)sizeof(T); /* a head-dim row in shared memory, padded */
    static constexpr int kWeightRow = kKeys + 8;       /* a row of P or dS: 8 lanes' stores in 8 banks */
    /* The forward's blocks an SM must hold: 128 queries of head dim <= 64
     * take 106 KiB of shared memory, room for 2 blocks of 256 threads if a
     * thread keeps to 128 registers (the compiler's own choice is ~176: one
     * block, 8 warps an SM, no better than the warp rung). */
    static constexpr int kMinBlocks = kThreadRows == 2 ? (kThreads <= 256 ? 2 : 1)
                                      : kQueries == 128 && kDim <= 64 ? 2 : 1;

    static constexpr size_t forward_bytes()
    {
        return sizeof(T) * ((size_t)(kQueries + 2 * kKeys) * kRow + (size_t)kQueries * kWeightRow);
    }
    /* dQ kernel: Q, dO, K, V and dS. */
    static constexpr size_t dq_bytes()
    {
        return sizeof(T) * ((size_t)(2 * kQueries + 2 * kKeys) * kRow + (size_t)kQueries * kWeightRow);
    }
    static_assert(forward_bytes() <= 227 * 1024 && dq_bytes() <= 227 * 1024, "shared memory per block");
};

/* The dK/dV kernel's tiles: BC keys a block of 128 threads, BR queries a
 * step (double-buffered). */
template <typename T, int kDim>
struct TiledKeyTiles {
    static constexpr int kThreads = 128;
    static constexpr int kGroups = 16;
    static constexpr int kKeys = kDim == 128 ? (sizeof(T) == 8 ? 16 : 32) : (sizeof(T) == 8 ? 32 : 64);
    static constexpr int kQueries = 32;
    static constexpr int kRow = kDim + 16 / (int)sizeof(T);
    /* P^T and dS^T rows (keys x queries): stores from lanes (tx, ty) land at
     * tx * (BR + 4) + ty, 32 different banks (the warp rung's BR + 8 put
     * lanes tx and tx + 4 in one bank). */
    static constexpr int kWeightRow = kQueries + 4;

    static constexpr size_t bytes()
    {
        return sizeof(T) * ((size_t)(2 * kKeys + 4 * kQueries) * kRow + 2 * (size_t)kKeys * kWeightRow +
                            4 * (size_t)kQueries);
    }
    static_assert(bytes() <= 227 * 1024, "shared memory per block");
};

/* Does key tile [key0, key0 + BC) need the mask for queries [q0, q0 + BR)?
 * Only if it runs past the last key or (causal) past the first query. */
MT_DEVICE bool tile_needs_mask(int64_t key0, int bc, int64_t keys, int64_t q0, bool causal)
{
    return key0 + bc > keys || (causal && key0 + bc - 1 > q0);
}

template <typename T, int kDim, int kQueries, int kThreadRows>
__global__ void __launch_bounds__(TiledTiles<T, kDim, kQueries, kThreadRows>::kThreads,
                                  TiledTiles<T, kDim, kQueries, kThreadRows>::kMinBlocks)
attention_tiled_forward(T *out, T *lse, const T *q, const T *k, const T *v, int64_t length, int64_t keys, T scale,
                        int causal, int64_t row_tiles, int vec)
{
    using Tiles = TiledTiles<T, kDim, kQueries, kThreadRows>;
    constexpr int BR = Tiles::kQueries, BC = Tiles::kKeys, RS = Tiles::kRow, PS = Tiles::kWeightRow;
    constexpr int NT = Tiles::kThreads, G = Tiles::kGroups;
    constexpr int RI = kThreadRows, NJ = BC / 8, NO = kDim / 8;
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    T *q_tile = reinterpret_cast<T *>(&shared_bytes[0]); /* [BR][RS] */
    T *k_tile = q_tile + BR * RS;                         /* [BC][RS]: one buffer, refilled after S */
    T *v_tile = k_tile + BC * RS;                         /* [BC][RS]: one buffer, refilled after P V */
    T *p_tile = v_tile + BC * RS;                         /* [BR][PS] */

    const int lane = threadIdx.x % 32;
    const int ty = threadIdx.x / 32 * 4 + lane / 8, tx = lane % 8;
    const int64_t batch = blockIdx.x / row_tiles, q0 = blockIdx.x % row_tiles * BR;
    const T *kb = k + batch * keys * kDim, *vb = v + batch * keys * kDim;
    const T scale2 = scale * (T)kLog2e; /* scores in base-2 units */

    const int64_t key_end = causal && q0 + BR < keys ? q0 + BR : keys;
    const int64_t tiles = (key_end + BC - 1) / BC;
    /* Two groups in flight from here on: K of a tile, then its V. */
    stage_rows<T, kDim, NT>(q_tile, RS, q + batch * length * kDim, q0, BR, length, vec);
    if (tiles > 0)
        stage_rows<T, kDim, NT>(k_tile, RS, kb, 0, BC, keys, vec);
    async_commit();
    if (tiles > 0)
        stage_rows<T, kDim, NT>(v_tile, RS, vb, 0, BC, keys, vec);
    async_commit();

    T o[RI][NO] = {};
    T m[RI], l[RI]; /* per row: the largest base-2 score so far, this thread's share of sum 2^(s - m) */
    MT_UNROLL for (int i = 0; i < RI; ++i) {
        m[i] = -mt_infinity<T>();
        l[i] = T(0);
    }
    for (int64_t t = 0; t < tiles; ++t) {
        async_wait<1>(); /* K_t (and Q) landed; V_t may still be in flight */
        __syncthreads();
        T sc[RI][NJ] = {};
        product_abt<T, kDim, G>(sc, q_tile, k_tile, RS, ty, tx);
        __syncthreads(); /* every warp is done with K_t: refill it with K_{t+1} */
        if (t + 1 < tiles)
            stage_rows<T, kDim, NT>(k_tile, RS, kb, (t + 1) * BC, BC, keys, vec);
        async_commit();

        const bool masked = tile_needs_mask(t * BC, BC, keys, q0, causal);
        MT_UNROLL for (int i = 0; i < RI; ++i) {
            const int64_t row = q0 + ty + G * i;
            T tile_max = -mt_infinity<T>();
            MT_UNROLL for (int j = 0; j < NJ; ++j) {
                sc[i][j] *= scale2;
                if (masked) {
                    const int64_t key = t * BC + tx + 8 * j;
                    sc[i][j] = key >= keys || (causal && key > row) ? -mt_infinity<T>() : sc[i][j];
                }
                tile_max = sc[i][j] > tile_max ? sc[i][j] : tile_max;
            }
            tile_max = row_max8(tile_max);
            const T m_new = tile_max > m[i] ? tile_max : m[i];
            /* Online softmax: what was summed under the old maximum is scaled
             * by 2^(m - m_new); while every key so far is masked (m_new
             * -inf) subtract 0, so every weight is 2^-inf = 0. */
            const T shift = m_new == -mt_infinity<T>() ? T(0) : m_new;
            const T rescale = tile_exp2(m[i] - shift);
            T sum = T(0);
            MT_UNROLL for (int j = 0; j < NJ; ++j) {
                const T p = tile_exp2(sc[i][j] - shift);
                p_tile[(ty + G * i) * PS + tx + 8 * j] = p;
                sum += p;
            }
            l[i] = l[i] * rescale + sum;
            MT_UNROLL for (int c = 0; c < NO; ++c)
                o[i][c] *= rescale;
            m[i] = m_new;
        }
        async_wait<1>(); /* V_t landed (K_{t+1} may be in flight) */
        __syncthreads();  /* ... everyone's copies; a row's weights are its own warp's */
        product_ab<T, kDim, BC, G>(o, p_tile, PS, v_tile, RS, ty, tx);
        __syncthreads(); /* every warp is done with V_t and P: refill V with V_{t+1} */
        if (t + 1 < tiles)
            stage_rows<T, kDim, NT>(v_tile, RS, vb, (t + 1) * BC, BC, keys, vec);
        async_commit();
    }
    async_wait<0>(); /* no copy may outlive the block */

    MT_UNROLL for (int i = 0; i < RI; ++i) {
        const T total = row_sum8(l[i]);
        const int64_t row = q0 + ty + G * i;
        if (row < length) {
            T *ob = out + (batch * length + row) * kDim;
            MT_UNROLL for (int g = 0; g < kDim / 32; ++g)
                MT_UNROLL for (int w = 0; w < 4; ++w)
                    ob[tx * 4 + 32 * g + w] = o[i][4 * g + w] / total; /* total 0 (no key): NaN, as flash */
            if (tx == 0) /* natural-log units, as the other rungs' backward reads it */
                lse[batch * length + row] = m[i] / (T)kLog2e + mt_log(total);
        }
    }
}

/* dQ of BR queries: dQ = scale * sum over key tiles of dS K, with
 * P = 2^(S scale log2(e) - lse log2(e)) recomputed and dS = P (dO V^T - D).
 * The block computes D = rowsum(dO * O) of its rows first and writes it to
 * `delta` for the dK/dV kernel that runs next. */
template <typename T, int kDim, int kQueries>
__global__ void __launch_bounds__(TiledTiles<T, kDim, kQueries>::kThreads)
attention_tiled_dq(T *dq, T *delta, const T *dout, const T *out, const T *lse, const T *q, const T *k, const T *v,
                   int64_t length, int64_t keys, T scale, int causal, int64_t row_tiles, int vec)
{
    using Tiles = TiledTiles<T, kDim, kQueries>;
    constexpr int BR = Tiles::kQueries, BC = Tiles::kKeys, RS = Tiles::kRow, PS = Tiles::kWeightRow;
    constexpr int NT = Tiles::kThreads, G = Tiles::kGroups;
    constexpr int RI = 4, NJ = BC / 8, NO = kDim / 8;
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    T *q_tile = reinterpret_cast<T *>(&shared_bytes[0]); /* [BR][RS] */
    T *do_tile = q_tile + BR * RS;                        /* [BR][RS] */
    T *k_tile = do_tile + BR * RS;                        /* [BC][RS] */
    T *v_tile = k_tile + BC * RS;                         /* [BC][RS] */
    T *ds_tile = v_tile + BC * RS;                        /* [BR][PS] */

    const int lane = threadIdx.x % 32;
    const int ty = threadIdx.x / 32 * 4 + lane / 8, tx = lane % 8;
    const int64_t batch = blockIdx.x / row_tiles, q0 = blockIdx.x % row_tiles * BR;
    const T *kb = k + batch * keys * kDim, *vb = v + batch * keys * kDim;
    const T scale2 = scale * (T)kLog2e;

    const int64_t key_end = causal && q0 + BR < keys ? q0 + BR : keys;
    const int64_t tiles = (key_end + BC - 1) / BC;
    stage_rows<T, kDim, NT>(q_tile, RS, q + batch * length * kDim, q0, BR, length, vec);
    stage_rows<T, kDim, NT>(do_tile, RS, dout + batch * length * kDim, q0, BR, length, vec);
    if (tiles > 0) {
        stage_rows<T, kDim, NT>(k_tile, RS, kb, 0, BC, keys, vec);
        stage_rows<T, kDim, NT>(v_tile, RS, vb, 0, BC, keys, vec);
    }
    async_commit();

    /* D of the block's rows, from O in global memory and dO once it lands;
     * each row's lse in base 2. */
    T row_delta[RI], row_lse[RI];
    async_wait<0>();
    __syncthreads();
    MT_UNROLL for (int i = 0; i < RI; ++i) {
        const int r = ty + G * i;
        const int64_t row = q0 + r;
        T sum = T(0);
        if (row < length)
            MT_UNROLL for (int c = 0; c < kDim / 8; ++c) {
                const int col = tx * 4 + 32 * (c / 4) + c % 4;
                sum += do_tile[r * RS + col] * out[(batch * length + row) * kDim + col];
            }
        row_delta[i] = row_sum8(sum);
        row_lse[i] = row < length ? lse[batch * length + row] * (T)kLog2e : T(0);
        if (row < length && tx == 0)
            delta[batch * length + row] = row_delta[i];
    }

    T dq_acc[RI][NO] = {};
    for (int64_t t = 0; t < tiles; ++t) {
        if (t > 0) {
            async_wait<0>(); /* K_t and V_t landed */
            __syncthreads();
        }
        T sc[RI][NJ] = {}, dp[RI][NJ] = {};
        product_abt<T, kDim, G>(sc, q_tile, k_tile, RS, ty, tx);
        product_abt<T, kDim, G>(dp, do_tile, v_tile, RS, ty, tx);
        __syncthreads(); /* V_t is no longer needed: V_{t+1} lands during dS K_t */
        if (t + 1 < tiles)
            stage_rows<T, kDim, NT>(v_tile, RS, vb, (t + 1) * BC, BC, keys, vec);
        async_commit();
        const bool masked = tile_needs_mask(t * BC, BC, keys, q0, causal);
        MT_UNROLL for (int i = 0; i < RI; ++i) {
            const int64_t row = q0 + ty + G * i;
            MT_UNROLL for (int j = 0; j < NJ; ++j) {
                const int64_t key = t * BC + tx + 8 * j;
                T p = tile_exp2(sc[i][j] * scale2 - row_lse[i]);
                if (masked && (key >= keys || (causal && key > row)))
                    p = T(0);
                ds_tile[(ty + G * i) * PS + tx + 8 * j] = p * (dp[i][j] - row_delta[i]);
            }
        }
        __syncwarp(); /* a row of dS is read by the warp that wrote it */
        product_ab<T, kDim, BC, G>(dq_acc, ds_tile, PS, k_tile, RS, ty, tx);
        __syncthreads(); /* every warp is done with K_t and dS */
        if (t + 1 < tiles)
            stage_rows<T, kDim, NT>(k_tile, RS, kb, (t + 1) * BC, BC, keys, vec);
        async_commit();
    }
    async_wait<0>();

    MT_UNROLL for (int i = 0; i < RI; ++i) {
        const int64_t row = q0 + ty + G * i;
        if (row < length)
            MT_UNROLL for (int g = 0; g < kDim / 32; ++g)
                MT_UNROLL for (int w = 0; w < 4; ++w)
                    dq[(batch * length + row) * kDim + tx * 4 + 32 * g + w] = dq_acc[i][4 * g + w] * scale;
    }
}

/* dK and dV of BC keys: the block walks the query tiles that see its keys
 * (Q, dO, lse, D double-buffered), recomputes P and dS, and keeps
 * dV += P^T dO and dK += dS^T Q in registers. */
template <typename T, int kDim>
__global__ void __launch_bounds__(TiledKeyTiles<T, kDim>::kThreads)
attention_tiled_dkdv(T *dk, T *dv, const T *dout, const T *delta, const T *lse, const T *q, const T *k, const T *v,
                     int64_t length, int64_t keys, T scale, int causal, int64_t key_tiles, int vec)
{
    using Tiles = TiledKeyTiles<T, kDim>;
    constexpr int BC = Tiles::kKeys, BR = Tiles::kQueries, RS = Tiles::kRow, TS = Tiles::kWeightRow;
    constexpr int NT = Tiles::kThreads, G = Tiles::kGroups;
    constexpr int RI = BR / G, NJ = BC / 8, KI = BC / G, NO = kDim / 8;
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    T *k_tile = reinterpret_cast<T *>(&shared_bytes[0]); /* [BC][RS], the block's keys */
    T *v_tile = k_tile + BC * RS;                         /* [BC][RS] */
    T *q_tiles = v_tile + BC * RS;                        /* [2][BR][RS] */
    T *do_tiles = q_tiles + 2 * BR * RS;                  /* [2][BR][RS] */
    T *pt_tile = do_tiles + 2 * BR * RS;                  /* [BC][TS]: P transposed */
    T *dst_tile = pt_tile + BC * TS;                      /* [BC][TS]: dS transposed */
    T *lse_tiles = dst_tile + BC * TS;                    /* [2][BR] */
    T *delta_tiles = lse_tiles + 2 * BR;                  /* [2][BR] */

    const int lane = threadIdx.x % 32;
    const int ty = threadIdx.x / 32 * 4 + lane / 8, tx = lane % 8;
    const int64_t batch = blockIdx.x / key_tiles, k0 = blockIdx.x % key_tiles * BC;
    const T *qb = q + batch * length * kDim, *dob = dout + batch * length * kDim;
    const T *lseb = lse + batch * length, *deltab = delta + batch * length;
    const T scale2 = scale * (T)kLog2e;

    const int64_t first_tile = causal ? k0 / BR : 0; /* key k0 is seen by queries k0 and later */
    const int64_t tiles = length > first_tile * BR ? (length + BR - 1) / BR - first_tile : 0;
    auto stage_queries = [&](int stage, int64_t start) {
        stage_rows<T, kDim, NT>(q_tiles + stage * BR * RS, RS, qb, start, BR, length, vec);
        stage_rows<T, kDim, NT>(do_tiles + stage * BR * RS, RS, dob, start, BR, length, vec);
        stage_values<T, NT>(lse_tiles + stage * BR, lseb, start, BR, length);
        stage_values<T, NT>(delta_tiles + stage * BR, deltab, start, BR, length);
    };
    stage_rows<T, kDim, NT>(k_tile, RS, k + batch * keys * kDim, k0, BC, keys, vec);
    stage_rows<T, kDim, NT>(v_tile, RS, v + batch * keys * kDim, k0, BC, keys, vec);
    if (tiles > 0)
        stage_queries(0, first_tile * BR);
    async_commit();

    T dk_acc[KI][NO] = {}, dv_acc[KI][NO] = {};
    for (int64_t t = 0; t < tiles; ++t) {
        const int s = (int)(t & 1);
        const int64_t i0 = (first_tile + t) * BR;
        if (t + 1 < tiles)
            stage_queries(s ^ 1, i0 + BR);
        async_commit();
        async_wait<1>();
        __syncthreads();
        const T *qt = q_tiles + s * BR * RS, *dot = do_tiles + s * BR * RS;

        T sc[RI][NJ] = {}, dp[RI][NJ] = {};
        product_abt<T, kDim, G>(sc, qt, k_tile, RS, ty, tx);
        product_abt<T, kDim, G>(dp, dot, v_tile, RS, ty, tx);
        /* Masked only where the query tile runs past the last query or
         * (causal) a query comes before the block's last key. */
        const bool masked = i0 + BR > length || k0 + BC > keys || (causal && k0 + BC - 1 > i0);
        MT_UNROLL for (int i = 0; i < RI; ++i) {
            const int r = ty + G * i;
            const int64_t row = i0 + r;
            const T row_lse = lse_tiles[s * BR + r] * (T)kLog2e, row_delta = delta_tiles[s * BR + r];
            MT_UNROLL for (int j = 0; j < NJ; ++j) {
                const int c = tx + 8 * j;
                const int64_t key = k0 + c;
                T p = tile_exp2(sc[i][j] * scale2 - row_lse);
                if (masked && (row >= length || key >= keys || (causal && key > row)))
                    p = T(0);
                pt_tile[c * TS + r] = p;
                dst_tile[c * TS + r] = p * (dp[i][j] - row_delta);
            }
        }
        __syncthreads(); /* dV and dK read every warp's weights */
        product_ab<T, kDim, BR, G>(dv_acc, pt_tile, TS, dot, RS, ty, tx);
        product_ab<T, kDim, BR, G>(dk_acc, dst_tile, TS, qt, RS, ty, tx);
        __syncthreads(); /* everyone is done with stage s and the weights before they are overwritten */
    }
    async_wait<0>();

    MT_UNROLL for (int i = 0; i < KI; ++i) {
        const int64_t key = k0 + ty + G * i;
        if (key < keys)
            MT_UNROLL for (int g = 0; g < kDim / 32; ++g)
                MT_UNROLL for (int w = 0; w < 4; ++w) {
                    const int64_t at = (batch * keys + key) * kDim + tx * 4 + 32 * g + w;
                    dk[at] = dk_acc[i][4 * g + w] * scale;
                    dv[at] = dv_acc[i][4 * g + w];
                }
    }
}

/* The tiled rung's head dims: 32, 64 or 128, the same for q and v. */
static mt_status check_tiled_dims(const char *func, const mt_tensor &q, const mt_tensor &v)
{
    const int64_t d = q.shape[2];
    if (d != v.shape[2] || (d != 32 && d != 64 && d != 128))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "head dims %lld (q) and %lld (v): the tiled rung takes "
                       "32, 64 or 128, the same for both", (long long)d, (long long)v.shape[2]);
    return MT_OK;
}

/* The query block: 0 takes the default, else 64 or 128 (float32 only: a
 * float64 block of 128 would not fit in shared memory). The default, from
 * the H100 (docs/performance.md): float32 without the causal mask 128 (the
 * forward 5-8% faster: each K/V tile serves twice the queries), causal 64
 * (a block of 128 queries masks twice the diagonal), float64 64. */
static mt_status check_block_queries(const char *func, int dtype, int block_queries, int causal, int *chosen)
{
    if (block_queries != 0 && block_queries != 64 && block_queries != 128)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "block_queries %d: 0 (the default), 64 or 128",
                       block_queries);
    if (block_queries == 128 && dtype != MT_FLOAT32)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "block_queries 128 is for float32 only (float64's tiles "
                       "would not fit in shared memory)");
    *chosen = block_queries != 0 ? block_queries : dtype == MT_FLOAT32 && !causal ? 128 : 64;
    return MT_OK;
}

/* Runs launch(dim, queries) with the head dim and the query block as
 * compile-time constants (float64 only with 64 queries). */
template <typename T, typename Launch>
static mt_status with_tiled_shape(int64_t d, int queries, Launch launch)
{
    using I32 = std::integral_constant<int, 32>;
    using I64 = std::integral_constant<int, 64>;
    using I128 = std::integral_constant<int, 128>;
    if (sizeof(T) == 4 && queries == 128) {
        switch (d) {
        case 32: return launch(I32{}, I128{});
        case 64: return launch(I64{}, I128{});
        default: return launch(I128{}, I128{});
        }
    }
    switch (d) {
    case 32: return launch(I32{}, I64{});
    case 64: return launch(I64{}, I64{});
    default: return launch(I128{}, I64{});
    }
}

template <typename T, int kDim, int kQueries, int kThreadRows>
static mt_status launch_tiled_forward(const mt_tensor &out, const mt_tensor &lse, const mt_tensor &q,
                                      const mt_tensor &k, const mt_tensor &v, double scale, int causal)
{
    using Tiles = TiledTiles<T, kDim, kQueries, kThreadRows>;
    const int64_t b = q.shape[0], length = q.shape[1];
    const int64_t row_tiles = (length + kQueries - 1) / kQueries;
    if (b * row_tiles > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_attention_tiled", "more blocks than a grid holds");
    const size_t bytes = Tiles::forward_bytes();
    CUDA_CHECK(cudaFuncSetAttribute(attention_tiled_forward<T, kDim, kQueries, kThreadRows>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    const bool vec = aligned16(first_of<T>(q)) && aligned16(first_of<T>(k)) && aligned16(first_of<T>(v));
    attention_tiled_forward<T, kDim, kQueries, kThreadRows>
        <<<(unsigned int)(b * row_tiles), Tiles::kThreads, bytes, mt_stream()>>>(
            first_of<T>(out), first_of<T>(lse), first_of<T>(q), first_of<T>(k), first_of<T>(v), length,
            k.shape[1], (T)scale, causal != 0, row_tiles, vec);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* A thread's rows in the forward: 0 takes 4, else 4 or 2 (float32 only:
 * the variant with twice the threads a block). */
static mt_status check_thread_rows(const char *func, int dtype, int thread_rows, int *chosen)
{
    if (thread_rows != 0 && thread_rows != 4 && thread_rows != 2)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "thread_rows %d: 0 (the default, 4), 4 or 2", thread_rows);
    if (thread_rows == 2 && dtype != MT_FLOAT32)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "thread_rows 2 is for float32 only");
    *chosen = thread_rows != 0 ? thread_rows : 4;
    return MT_OK;
}

mt_status mt_attention_tiled(mt_tensor out, mt_tensor lse, mt_tensor q, mt_tensor k, mt_tensor v, double scale,
                             int causal, int block_queries, int thread_rows)
{
    const char *func = "mt_attention_tiled";
    MT_TRY(check_attention_forward(func, out, lse, q, k, v, kTiledMaxDim));
    MT_TRY(check_tiled_dims(func, q, v));
    int queries = 0, rows_each = 0;
    MT_TRY(check_block_queries(func, q.dtype, block_queries, causal, &queries));
    MT_TRY(check_thread_rows(func, q.dtype, thread_rows, &rows_each));
    if (tensor_numel(lse) == 0)
        return MT_OK; /* no query */
    auto launch = [&](auto dim, auto rows) {
        constexpr int kDim = decltype(dim)::value, kQueries = decltype(rows)::value;
        if (rows_each == 2) /* float32 only (checked above) */
            return launch_tiled_forward<float, kDim, kQueries, 2>(out, lse, q, k, v, scale, causal);
        if constexpr (kQueries == 128)
            return launch_tiled_forward<float, kDim, 128, 4>(out, lse, q, k, v, scale, causal);
        else
            return q.dtype == MT_FLOAT32
                       ? launch_tiled_forward<float, kDim, 64, 4>(out, lse, q, k, v, scale, causal)
                       : launch_tiled_forward<double, kDim, 64, 4>(out, lse, q, k, v, scale, causal);
    };
    return q.dtype == MT_FLOAT32 ? with_tiled_shape<float>(q.shape[2], queries, launch)
                                 : with_tiled_shape<double>(q.shape[2], queries, launch);
}

template <typename T, int kDim, int kQueries>
static mt_status launch_tiled_backward(const mt_tensor &dq, const mt_tensor &dk, const mt_tensor &dv,
                                       const mt_tensor &dout, const mt_tensor &q, const mt_tensor &k,
                                       const mt_tensor &v, const mt_tensor &out, const mt_tensor &lse, double scale,
                                       int causal)
{
    using Tiles = TiledTiles<T, kDim, kQueries>;
    using KeyTiles = TiledKeyTiles<T, kDim>;
    const char *func = "mt_attention_tiled_backward";
    const int64_t b = q.shape[0], length = q.shape[1], keys = k.shape[1];
    const int64_t row_tiles = (length + kQueries - 1) / kQueries;
    const int64_t key_tiles = (keys + KeyTiles::kKeys - 1) / KeyTiles::kKeys;
    if (b * row_tiles > INT32_MAX || b * key_tiles > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "more blocks than a grid holds");
    if (b * length == 0)
        return zero_key_grads<T>(dk, dv, b * keys * kDim);
    const bool vec = aligned16(first_of<T>(q)) && aligned16(first_of<T>(k)) && aligned16(first_of<T>(v)) &&
                     aligned16(first_of<T>(dout));
    DeviceScratch delta; /* D_i = dO_i . O_i, written by the dQ kernel, read by the dK/dV kernel */
    CUDA_CHECK(delta.allocate(sizeof(T) * (size_t)(b * length)));
    const size_t dq_bytes = Tiles::dq_bytes();
    CUDA_CHECK(cudaFuncSetAttribute(attention_tiled_dq<T, kDim, kQueries>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dq_bytes));
    attention_tiled_dq<T, kDim, kQueries><<<(unsigned int)(b * row_tiles), Tiles::kThreads, dq_bytes, mt_stream()>>>(
        first_of<T>(dq), delta.as<T>(), first_of<T>(dout), first_of<T>(out), first_of<T>(lse), first_of<T>(q),
        first_of<T>(k), first_of<T>(v), length, keys, (T)scale, causal != 0, row_tiles, vec);
    CUDA_CHECK(mt_launch_status());
    if (b * key_tiles > 0) {
        const size_t bytes = KeyTiles::bytes();
        CUDA_CHECK(cudaFuncSetAttribute(attention_tiled_dkdv<T, kDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes));
        attention_tiled_dkdv<T, kDim><<<(unsigned int)(b * key_tiles), KeyTiles::kThreads, bytes, mt_stream()>>>(
            first_of<T>(dk), first_of<T>(dv), first_of<T>(dout), delta.as<T>(), first_of<T>(lse), first_of<T>(q),
            first_of<T>(k), first_of<T>(v), length, keys, (T)scale, causal != 0, key_tiles, vec);
        CUDA_CHECK(mt_launch_status());
    }
    CUDA_CHECK(delta.release());
    return MT_OK;
}

mt_status mt_attention_tiled_backward(mt_tensor dq, mt_tensor dk, mt_tensor dv, mt_tensor dout, mt_tensor q,
                                      mt_tensor k, mt_tensor v, mt_tensor out, mt_tensor lse, double scale,
                                      int causal, int block_queries)
{
    const char *func = "mt_attention_tiled_backward";
    MT_TRY(check_attention_backward(func, dq, dk, dv, dout, q, k, v, out, lse, kTiledMaxDim));
    MT_TRY(check_tiled_dims(func, q, v));
    int queries = 0;
    MT_TRY(check_block_queries(func, q.dtype, block_queries, causal, &queries));
    auto launch = [&](auto dim, auto rows) {
        constexpr int kDim = decltype(dim)::value, kQueries = decltype(rows)::value;
        if constexpr (kQueries == 128)
            return launch_tiled_backward<float, kDim, 128>(dq, dk, dv, dout, q, k, v, out, lse, scale, causal);
        else
            return q.dtype == MT_FLOAT32
                       ? launch_tiled_backward<float, kDim, 64>(dq, dk, dv, dout, q, k, v, out, lse, scale, causal)
                       : launch_tiled_backward<double, kDim, 64>(dq, dk, dv, dout, q, k, v, out, lse, scale,
                                                                 causal);
    };
    return q.dtype == MT_FLOAT32 ? with_tiled_shape<float>(q.shape[2], queries, launch)
                                 : with_tiled_shape<double>(q.shape[2], queries, launch);
}
