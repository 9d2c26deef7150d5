/*
 * attention_warp.cu: the flash rung again, with a query row's work split
 * over threads and register tiles (the warp rung: mt_attention_warp).
 *
 * The flash rung (src/attention.cu) gives each thread one query row: per key
 * it reads D values of K from shared memory for D multiply-adds, one load
 * per multiply-add, and a row of q and of the output must fit in one
 * thread's registers (D at most 64). Here a block of 128 threads takes 64
 * queries and treats each step as a small matrix product, as the matmul
 * ladder's register-tiled rungs do (src/matmul_warptile.cu):
 *
 *   - scores S = Q K^T of the 64 queries and a tile of BC keys: thread
 *     (ty, tx), ty < 16, tx < 8, computes S[ty + 16 i][tx + 8 j], a 4 x BC/8
 *     tile, reading 4 values of a Q row and of a K row per 16-byte load: per
 *     4 columns of the head dim (4 + BC/8) loads for 4 * 4 * BC/8
 *     multiply-adds;
 *   - the 8 threads of a query row are 8 consecutive lanes of one warp, so
 *     the online softmax's row maximum is 3 shuffles, and the warp that
 *     owns a row owns all of it: no barrier between warps for the softmax
 *     (FlashAttention-2's split: queries across warps, never keys);
 *   - O += P V: the weights P go through shared memory (the warp's own rows
 *     only) and thread (ty, tx) accumulates O[ty + 16 i][tx*4 + 32 g + 0..3],
 *     so the 8 lanes of a row read 8 consecutive 16-byte pieces of a V row;
 *   - K and V tiles are staged with cp.async (src/async_copy.h) into two
 *     stages: the next tile is in flight while the block computes on this
 *     one;
 *   - causal: tiles wholly after a block's last query are never loaded.
 *
 * The backward, FlashAttention-2's way: a block owns a tile of keys (K, V in
 * shared memory, dK and dV in registers) and walks the query tiles (Q, dO,
 * lse and D = rowsum(dO * O), double-buffered), recomputing
 * P = exp(S * scale - lse) and dS = P * (dO V^T - D); dV += P^T dO and
 * dK += dS^T Q stay in the block, dQ += dS K is added to global memory with
 * atomics (each query tile receives one contribution per key tile).
 *
 * The head dim is a template constant, 32, 64 or 128, the same for q and v:
 * every register array is then indexed by constants. The shared memory is
 * more than 48 KiB, so it is dynamic, opted into per kernel. Rows are padded
 * by 4 elements (16 bytes) so that the 8 rows a warp reads at once start in
 * 8 different bank groups.
 */
#include "attention.h"
#include "attention_tiles.h"

constexpr int kWarpThreads = 128; /* 4 warps: 16 x 8 threads */
constexpr int kWarpMaxDim = 128;

/* Tile sizes of a head dim and dtype, chosen so that a block's shared memory
 * stays under the 227 KiB an H100 block may have. */
template <typename T, int kDim>
struct WarpTiles {
    static_assert(kDim == 32 || kDim == 64 || kDim == 128, "the warp rung's head dims");
    static constexpr bool kWide = kDim == 128 || sizeof(T) == 8;
    /* Forward: 64 queries a block, BC keys a tile. */
    static constexpr int kQueries = 64;
    static constexpr int kKeys = kWide ? 32 : 64;
    /* Backward: kBackKeys keys a block, kBackQueries queries a tile. A float
     * block of head dim 64 uses nearly all of a thread's 255 registers, so
     * two blocks fill an SM's registers: 32 queries a tile (100 KiB of shared
     * memory, not 160) lets two blocks fit in shared memory too. */
    static constexpr int kBackKeys = kDim == 128 ? (sizeof(T) == 8 ? 16 : 32) : (sizeof(T) == 8 ? 32 : 64);
    static constexpr int kBackQueries = sizeof(T) == 8 || kDim == 64 ? 32 : 64;
    /* Shared-memory row strides (elements): a head-dim row, and the padding
     * of a row of weights (cols + kWeightPad). */
    static constexpr int kRow = kDim + 16 / (int)sizeof(T);
    static constexpr int kWeightPad = 8;

    static constexpr size_t forward_bytes()
    {
        return sizeof(T) * ((size_t)(kQueries + 4 * kKeys) * kRow + (size_t)kQueries * (kKeys + kWeightPad));
    }
    static constexpr size_t backward_bytes()
    {
        return sizeof(T) * ((size_t)(2 * kBackKeys + 4 * kBackQueries) * kRow +
                            2 * (size_t)kBackKeys * (kBackQueries + kWeightPad) +
                            (size_t)kBackQueries * (kBackKeys + kWeightPad) + 4 * (size_t)kBackQueries);
    }
    static_assert(forward_bytes() <= 227 * 1024 && backward_bytes() <= 227 * 1024, "shared memory per block");
};

template <typename T, int kDim>
__global__ void __launch_bounds__(kWarpThreads)
attention_warp_forward(T *out, T *lse, const T *q, const T *k, const T *v, int64_t length, int64_t keys, T scale,
                       int causal, int64_t row_tiles, int vec)
{
    using Tiles = WarpTiles<T, kDim>;
    constexpr int BR = Tiles::kQueries, BC = Tiles::kKeys, RS = Tiles::kRow, PS = BC + Tiles::kWeightPad;
    constexpr int RI = BR / 16, NJ = BC / 8, NO = kDim / 8;
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    T *q_tile = reinterpret_cast<T *>(&shared_bytes[0]); /* [BR][RS] */
    T *k_tiles = q_tile + BR * RS;                        /* [2][BC][RS]: two stages */
    T *v_tiles = k_tiles + 2 * BC * RS;                   /* [2][BC][RS] */
    T *p_tile = v_tiles + 2 * BC * RS;                    /* [BR][PS] */

    const int lane = threadIdx.x % 32;
    const int ty = threadIdx.x / 32 * 4 + lane / 8, tx = lane % 8; /* a row's 8 threads: 8 consecutive lanes */
    const int64_t batch = blockIdx.x / row_tiles, q0 = blockIdx.x % row_tiles * BR;
    const T *kb = k + batch * keys * kDim, *vb = v + batch * keys * kDim;

    /* Causal: query q0 + BR - 1 is the last to see a key, so no tile past it. */
    const int64_t key_end = causal && q0 + BR < keys ? q0 + BR : keys;
    const int64_t tiles = (key_end + BC - 1) / BC;
    stage_rows<T, kDim, kWarpThreads>(q_tile, RS, q + batch * length * kDim, q0, BR, length, vec);
    if (tiles > 0) {
        stage_rows<T, kDim, kWarpThreads>(k_tiles, RS, kb, 0, BC, keys, vec);
        stage_rows<T, kDim, kWarpThreads>(v_tiles, RS, vb, 0, BC, keys, vec);
    }
    async_commit();

    T o[RI][NO] = {};
    T m[RI], l[RI]; /* per row: the largest score so far, and this thread's share of sum exp(score - m) */
    MT_UNROLL for (int i = 0; i < RI; ++i) {
        m[i] = -mt_infinity<T>();
        l[i] = T(0);
    }
    for (int64_t t = 0; t < tiles; ++t) {
        const int s = (int)(t & 1);
        if (t + 1 < tiles) { /* the next tile, in flight while we compute on this one */
            stage_rows<T, kDim, kWarpThreads>(k_tiles + (s ^ 1) * BC * RS, RS, kb, (t + 1) * BC, BC, keys, vec);
            stage_rows<T, kDim, kWarpThreads>(v_tiles + (s ^ 1) * BC * RS, RS, vb, (t + 1) * BC, BC, keys, vec);
        }
        async_commit();
        async_wait<1>(); /* this tile's copies (and Q's) have landed: only the newest group may be in flight */
        __syncthreads(); /* ... everyone's copies, not only mine */

        T sc[RI][NJ] = {};
        product_abt<T, kDim, 16>(sc, q_tile, k_tiles + s * BC * RS, RS, ty, tx);
        MT_UNROLL for (int i = 0; i < RI; ++i) {
            const int64_t row = q0 + ty + 16 * i;
            T tile_max = -mt_infinity<T>();
            MT_UNROLL for (int j = 0; j < NJ; ++j) {
                const int64_t key = t * BC + tx + 8 * j;
                sc[i][j] = key >= keys || (causal && key > row) ? -mt_infinity<T>() : sc[i][j] * scale;
                tile_max = sc[i][j] > tile_max ? sc[i][j] : tile_max;
            }
            tile_max = row_max8(tile_max);
            const T m_new = tile_max > m[i] ? tile_max : m[i];
            /* Online softmax: what was summed with the old maximum is scaled
             * by exp(m - m_new). While every key so far is masked (m_new
             * -inf), subtract 0 instead: every weight is then exp(-inf) = 0. */
            const T shift = m_new == -mt_infinity<T>() ? T(0) : m_new;
            const T rescale = mt_exp(m[i] - shift);
            T sum = T(0);
            MT_UNROLL for (int j = 0; j < NJ; ++j) {
                const T p = mt_exp(sc[i][j] - shift);
                p_tile[(ty + 16 * i) * PS + tx + 8 * j] = p;
                sum += p;
            }
            l[i] = l[i] * rescale + sum;
            MT_UNROLL for (int c = 0; c < NO; ++c)
                o[i][c] *= rescale;
            m[i] = m_new;
        }
        __syncwarp(); /* a row's weights come from its own warp: no block barrier needed */
        product_ab<T, kDim, BC, 16>(o, p_tile, PS, v_tiles + s * BC * RS, RS, ty, tx);
        __syncthreads(); /* everyone is done with stage s (and p_tile) before it is overwritten */
    }
    async_wait<0>(); /* no copy may outlive the block (the last commit may be empty) */

    MT_UNROLL for (int i = 0; i < RI; ++i) {
        const T total = row_sum8(l[i]);
        const int64_t row = q0 + ty + 16 * i;
        if (row < length) {
            T *ob = out + (batch * length + row) * kDim;
            MT_UNROLL for (int g = 0; g < kDim / 32; ++g)
                MT_UNROLL for (int w = 0; w < 4; ++w)
                    ob[tx * 4 + 32 * g + w] = o[i][4 * g + w] / total; /* total 0 (no key): NaN, as flash */
            if (tx == 0)
                lse[batch * length + row] = m[i] + mt_log(total);
        }
    }
}

/* D_i = dO_i . O_i, the softmax backward's row sum, once per query row
 * before the key tiles need it: 8 lanes a row, 16 rows a block. */
template <typename T, int kDim>
__global__ void attention_warp_delta(T *delta, const T *dout, const T *out, int64_t rows)
{
    const int64_t row = (int64_t)blockIdx.x * (kWarpThreads / 8) + threadIdx.x / 8;
    T sum = T(0);
    if (row < rows)
        for (int c = threadIdx.x % 8; c < kDim; c += 8)
            sum += dout[row * kDim + c] * out[row * kDim + c];
    sum = row_sum8(sum); /* every lane takes part in the shuffles */
    if (row < rows && threadIdx.x % 8 == 0)
        delta[row] = sum;
}

/* at[0..3] += v[0..3] * scale, atomically: one 16-byte atomic for float on
 * sm_90 and newer when `at` is 16-byte aligned (vec), else four. */
template <typename T>
MT_DEVICE void atomic_add4(T *at, const T *v, T scale, bool vec)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (sizeof(T) == 4) {
        if (vec) {
            atomicAdd(reinterpret_cast<float4 *>(at), make_float4(v[0] * scale, v[1] * scale, v[2] * scale,
                                                                  v[3] * scale));
            return;
        }
    }
#endif
    MT_UNROLL for (int w = 0; w < 4; ++w)
        atomicAdd(at + w, v[w] * scale);
}

template <typename T, int kDim>
__global__ void __launch_bounds__(kWarpThreads)
attention_warp_backward(T *dq, T *dk, T *dv, const T *dout, const T *delta, const T *lse, const T *q, const T *k,
                        const T *v, int64_t length, int64_t keys, T scale, int causal, int64_t key_tiles, int vec)
{
    using Tiles = WarpTiles<T, kDim>;
    constexpr int BC = Tiles::kBackKeys, BR = Tiles::kBackQueries, RS = Tiles::kRow;
    constexpr int TS = BR + Tiles::kWeightPad, SS = BC + Tiles::kWeightPad;
    constexpr int RI = BR / 16, NJ = BC / 8, KI = BC / 16, NO = kDim / 8;
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    T *k_tile = reinterpret_cast<T *>(&shared_bytes[0]); /* [BC][RS], the block's keys */
    T *v_tile = k_tile + BC * RS;                         /* [BC][RS] */
    T *q_tiles = v_tile + BC * RS;                        /* [2][BR][RS]: two stages of queries */
    T *do_tiles = q_tiles + 2 * BR * RS;                  /* [2][BR][RS] */
    T *pt_tile = do_tiles + 2 * BR * RS;                  /* [BC][TS]: P transposed (keys x queries) */
    T *dst_tile = pt_tile + BC * TS;                      /* [BC][TS]: dS transposed */
    T *ds_tile = dst_tile + BC * TS;                      /* [BR][SS]: dS (queries x keys) */
    T *lse_tiles = ds_tile + BR * SS;                     /* [2][BR] */
    T *delta_tiles = lse_tiles + 2 * BR;                  /* [2][BR] */

    const int lane = threadIdx.x % 32;
    const int ty = threadIdx.x / 32 * 4 + lane / 8, tx = lane % 8;
    const int64_t batch = blockIdx.x / key_tiles, k0 = blockIdx.x % key_tiles * BC;
    const T *qb = q + batch * length * kDim, *dob = dout + batch * length * kDim;
    const T *lseb = lse + batch * length, *deltab = delta + batch * length;

    /* Causal: key k0 is seen by queries k0 and later only. */
    const int64_t first_tile = causal ? k0 / BR : 0;
    const int64_t tiles = length > first_tile * BR ? (length + BR - 1) / BR - first_tile : 0;
    auto stage_queries = [&](int stage, int64_t start) {
        stage_rows<T, kDim, kWarpThreads>(q_tiles + stage * BR * RS, RS, qb, start, BR, length, vec);
        stage_rows<T, kDim, kWarpThreads>(do_tiles + stage * BR * RS, RS, dob, start, BR, length, vec);
        stage_values<T, kWarpThreads>(lse_tiles + stage * BR, lseb, start, BR, length);
        stage_values<T, kWarpThreads>(delta_tiles + stage * BR, deltab, start, BR, length);
    };
    stage_rows<T, kDim, kWarpThreads>(k_tile, RS, k + batch * keys * kDim, k0, BC, keys, vec);
    stage_rows<T, kDim, kWarpThreads>(v_tile, RS, v + batch * keys * kDim, k0, BC, keys, vec);
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

        /* S = Q K^T and dP = dO V^T of this query tile and the block's keys,
         * then the weights P and dS = P * (dP - D), each written twice:
         * transposed for dV and dK (keys x queries), plain for dQ. */
        T sc[RI][NJ] = {}, dp[RI][NJ] = {};
        product_abt<T, kDim, 16>(sc, qt, k_tile, RS, ty, tx);
        product_abt<T, kDim, 16>(dp, dot, v_tile, RS, ty, tx);
        MT_UNROLL for (int i = 0; i < RI; ++i) {
            const int r = ty + 16 * i;
            const int64_t row = i0 + r;
            const T row_lse = lse_tiles[s * BR + r], row_delta = delta_tiles[s * BR + r];
            MT_UNROLL for (int j = 0; j < NJ; ++j) {
                const int c = tx + 8 * j;
                const int64_t key = k0 + c;
                const bool seen = row < length && key < keys && !(causal && key > row);
                const T p = seen ? mt_exp(sc[i][j] * scale - row_lse) : T(0);
                const T ds = p * (dp[i][j] - row_delta);
                pt_tile[c * TS + r] = p;
                dst_tile[c * TS + r] = ds;
                ds_tile[r * SS + c] = ds;
            }
        }
        __syncthreads(); /* dV and dK read every warp's weights */

        product_ab<T, kDim, BR, 16>(dv_acc, pt_tile, TS, dot, RS, ty, tx);
        product_ab<T, kDim, BR, 16>(dk_acc, dst_tile, TS, qt, RS, ty, tx);
        T dq_acc[RI][NO] = {};
        product_ab<T, kDim, BC, 16>(dq_acc, ds_tile, SS, k_tile, RS, ty, tx);
        /* Other key blocks add to the same dQ rows: atomics (dq starts at 0),
         * a thread's 4 consecutive columns in one 16-byte atomic where the
         * GPU has it (a quarter of the atomic operations). */
        MT_UNROLL for (int i = 0; i < RI; ++i) {
            const int64_t row = i0 + ty + 16 * i;
            if (row < length)
                MT_UNROLL for (int g = 0; g < kDim / 32; ++g)
                    atomic_add4(dq + (batch * length + row) * kDim + tx * 4 + 32 * g, &dq_acc[i][4 * g], scale, vec);
        }
        __syncthreads(); /* everyone is done with stage s and the weights before they are overwritten */
    }
    async_wait<0>();

    MT_UNROLL for (int i = 0; i < KI; ++i) {
        const int64_t key = k0 + ty + 16 * i;
        if (key < keys)
            MT_UNROLL for (int g = 0; g < kDim / 32; ++g)
                MT_UNROLL for (int w = 0; w < 4; ++w) {
                    const int64_t at = (batch * keys + key) * kDim + tx * 4 + 32 * g + w;
                    dk[at] = dk_acc[i][4 * g + w] * scale;
                    dv[at] = dv_acc[i][4 * g + w];
                }
    }
}

/* The warp rung's head dims: 32, 64 or 128, the same for q and v. */
static mt_status check_warp_dims(const char *func, const mt_tensor &q, const mt_tensor &v)
{
    const int64_t d = q.shape[2];
    if (d != v.shape[2] || (d != 32 && d != 64 && d != 128))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "head dims %lld (q) and %lld (v): the warp rung takes "
                       "32, 64 or 128, the same for both", (long long)d, (long long)v.shape[2]);
    return MT_OK;
}

/* Runs launch(std::integral_constant<int, kDim>) with the head dim as a
 * compile-time constant (check_warp_dims has passed). */
template <typename Launch>
static mt_status with_warp_dim(int64_t d, Launch launch)
{
    switch (d) {
    case 32: return launch(std::integral_constant<int, 32>{});
    case 64: return launch(std::integral_constant<int, 64>{});
    default: return launch(std::integral_constant<int, 128>{});
    }
}

template <typename T, int kDim>
static mt_status launch_warp_forward(const mt_tensor &out, const mt_tensor &lse, const mt_tensor &q,
                                     const mt_tensor &k, const mt_tensor &v, double scale, int causal)
{
    using Tiles = WarpTiles<T, kDim>;
    const int64_t b = q.shape[0], length = q.shape[1];
    const int64_t row_tiles = (length + Tiles::kQueries - 1) / Tiles::kQueries;
    if (b * row_tiles > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_attention_warp", "more blocks than a grid holds");
    const size_t bytes = Tiles::forward_bytes();
    CUDA_CHECK(cudaFuncSetAttribute(attention_warp_forward<T, kDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)bytes));
    const bool vec = aligned16(first_of<T>(q)) && aligned16(first_of<T>(k)) && aligned16(first_of<T>(v));
    attention_warp_forward<T, kDim><<<(unsigned int)(b * row_tiles), kWarpThreads, bytes, mt_stream()>>>(
        first_of<T>(out), first_of<T>(lse), first_of<T>(q), first_of<T>(k), first_of<T>(v), length, k.shape[1],
        (T)scale, causal != 0, row_tiles, vec);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_attention_warp(mt_tensor out, mt_tensor lse, mt_tensor q, mt_tensor k, mt_tensor v, double scale,
                            int causal)
{
    const char *func = "mt_attention_warp";
    MT_TRY(check_attention_forward(func, out, lse, q, k, v, kWarpMaxDim));
    MT_TRY(check_warp_dims(func, q, v));
    if (tensor_numel(lse) == 0)
        return MT_OK; /* no query (a head dim of 0 is not taken) */
    return with_warp_dim(q.shape[2], [&](auto dim) {
        constexpr int kDim = decltype(dim)::value;
        return q.dtype == MT_FLOAT32 ? launch_warp_forward<float, kDim>(out, lse, q, k, v, scale, causal)
                                     : launch_warp_forward<double, kDim>(out, lse, q, k, v, scale, causal);
    });
}

template <typename T, int kDim>
static mt_status launch_warp_backward(const mt_tensor &dq, const mt_tensor &dk, const mt_tensor &dv,
                                      const mt_tensor &dout, const mt_tensor &q, const mt_tensor &k,
                                      const mt_tensor &v, const mt_tensor &out, const mt_tensor &lse, double scale,
                                      int causal)
{
    using Tiles = WarpTiles<T, kDim>;
    const int64_t b = q.shape[0], length = q.shape[1], keys = k.shape[1];
    const int64_t key_tiles = (keys + Tiles::kBackKeys - 1) / Tiles::kBackKeys;
    if (b * key_tiles > INT32_MAX || b * length / (kWarpThreads / 8) + 1 > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_attention_warp_backward", "more blocks than a grid holds");
    if (b * length > 0) /* dQ is a sum of atomic additions, one per key tile */
        CUDA_CHECK(cudaMemsetAsync(first_of<T>(dq), 0, sizeof(T) * (size_t)(b * length * kDim), mt_stream()));
    if (b * key_tiles == 0)
        return MT_OK;
    DeviceScratch delta; /* D_i = dO_i . O_i */
    CUDA_CHECK(delta.allocate(sizeof(T) * (size_t)(b * length > 0 ? b * length : 1)));
    if (b * length > 0) {
        const int64_t rows_per_block = kWarpThreads / 8;
        attention_warp_delta<T, kDim><<<(unsigned int)((b * length + rows_per_block - 1) / rows_per_block),
                                        kWarpThreads, 0, mt_stream()>>>(delta.as<T>(), first_of<T>(dout),
                                                                        first_of<T>(out), b * length);
        CUDA_CHECK(mt_launch_status());
    }
    const size_t bytes = Tiles::backward_bytes();
    CUDA_CHECK(cudaFuncSetAttribute(attention_warp_backward<T, kDim>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    (int)bytes));
    const bool vec = aligned16(first_of<T>(q)) && aligned16(first_of<T>(k)) && aligned16(first_of<T>(v)) &&
                     aligned16(first_of<T>(dout)) && aligned16(first_of<T>(dq));
    attention_warp_backward<T, kDim><<<(unsigned int)(b * key_tiles), kWarpThreads, bytes, mt_stream()>>>(
        first_of<T>(dq), first_of<T>(dk), first_of<T>(dv), first_of<T>(dout), delta.as<T>(), first_of<T>(lse),
        first_of<T>(q), first_of<T>(k), first_of<T>(v), length, keys, (T)scale, causal != 0, key_tiles, vec);
    CUDA_CHECK(mt_launch_status());
    CUDA_CHECK(delta.release());
    return MT_OK;
}

mt_status mt_attention_warp_backward(mt_tensor dq, mt_tensor dk, mt_tensor dv, mt_tensor dout, mt_tensor q,
                                     mt_tensor k, mt_tensor v, mt_tensor out, mt_tensor lse, double scale, int causal)
{
    const char *func = "mt_attention_warp_backward";
    MT_TRY(check_attention_backward(func, dq, dk, dv, dout, q, k, v, out, lse, kWarpMaxDim));
    MT_TRY(check_warp_dims(func, q, v));
    return with_warp_dim(q.shape[2], [&](auto dim) {
        constexpr int kDim = decltype(dim)::value;
        return q.dtype == MT_FLOAT32
                   ? launch_warp_backward<float, kDim>(dq, dk, dv, dout, q, k, v, out, lse, scale, causal)
                   : launch_warp_backward<double, kDim>(dq, dk, dv, dout, q, k, v, out, lse, scale, causal);
    });
}
