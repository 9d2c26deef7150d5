/*
 * attention.cu: scaled dot-product attention in one kernel, the flash rung.
 *
 * out[b, i] = sum_j p_ij v[b, j] with p_ij = softmax_j(q[b, i] . k[b, j] *
 * scale), keys after the query masked out when `causal`. The naive rung
 * (F.scaled_dot_product_attention's three ops) writes the L x S scores to
 * memory, reads them for the softmax, writes the weights, and reads them for
 * the second matmul: memory traffic that grows with L * S. This kernel
 * never stores a score:
 *
 *   - a block takes kRows queries of one batch element, one thread per query
 *     row, its q row and its running output in registers;
 *   - it walks the keys kCols at a time: the block loads a tile of K and V
 *     into shared memory together (coalesced: consecutive threads read
 *     consecutive elements), and each thread scores its query against the
 *     tile's keys;
 *   - online softmax: a thread keeps the largest score m seen so far and the
 *     sum l of exp(score - m). When a tile raises the maximum from m to m',
 *     what was summed so far, and the output accumulated with those weights,
 *     are scaled by exp(m - m'), so the result is exactly the softmax over
 *     all keys without a second pass over them.
 *
 * The teaching version of the idea: one thread per row does D multiply-adds
 * per key from shared memory; the production kernels split a row's work
 * over a warp and use tensor cores for the two products. Each kernel is a
 * template on the head dim too (kDim: 16, 32, 64, or 0 for any): a row held
 * in an array stays in registers only when every index into it is a
 * compile-time constant, which the unrolled loops over kDim give.
 */
#include <type_traits>

#include "attention.h"
#include "ops_common.h"

/* Queries per block (one thread each), keys per shared-memory tile, and the
 * largest head dim (a row lives in registers: 64 values of q, 64 of output). */
constexpr int kRows = 64;
constexpr int kCols = 32;
constexpr int kMaxAttentionDim = 64;

/* How many keys a block of queries first_row .. first_row + kRows - 1
 * reads: all of them, or with the causal mask none past its last query. */
MT_DEVICE int64_t keys_needed(int64_t keys, int64_t first_row, int causal)
{
    return causal && first_row + kRows < keys ? first_row + kRows : keys;
}

/* The rows of the tile that starts at row `start` of `end`: kCols, fewer in
 * the last tile. */
MT_DEVICE int tile_rows(int64_t start, int64_t end)
{
    return end - start < kCols ? (int)(end - start) : kCols;
}

/* The block copies rows start .. start + n - 1 of a (rows, width) matrix
 * into a shared tile: thread t copies elements t, t + kRows, ... of the n *
 * width values, so consecutive threads read consecutive addresses
 * (coalesced). Every thread of the block must call it; the caller's barrier
 * then makes the tile complete. (Tile is a __shared__ T[kCols][kMaxAttentionDim];
 * a template parameter so that the emulator's view of shared memory passes too.) */
template <typename Tile, typename T>
MT_DEVICE void load_tile(Tile &&tile, const T *matrix, int64_t start, int n, int width)
{
    for (int e = threadIdx.x; e < n * width; e += kRows)
        tile[e / width][e % width] = matrix[(start + e / width) * width + e % width];
}

template <typename T, int kDim>
__global__ void attention_flash(T *out, T *lse, const T *q, const T *k, const T *v, int64_t length,
                                int64_t keys, int d_arg, int dv_arg, T scale, int causal, int64_t row_tiles)
{
    /* kDim > 0: both head dims are kDim, known to the compiler, which then
     * unrolls every loop over a row and keeps the rows in registers. kDim 0:
     * any dims, read at run time; a row indexed by a run-time counter cannot
     * live in registers, so the compiler puts it in (slower) local memory. */
    const int d = kDim ? kDim : d_arg, dv = kDim ? kDim : dv_arg;
    __shared__ T k_tile[kCols][kMaxAttentionDim];
    __shared__ T v_tile[kCols][kMaxAttentionDim];
    const int64_t batch = blockIdx.x / row_tiles;
    const int64_t first_row = (blockIdx.x % row_tiles) * kRows;
    const int64_t row = first_row + threadIdx.x;
    const bool active = row < length; /* the last tile's spare threads still load tiles and meet the barriers */
    const T *qb = q + batch * length * d;
    const T *kb = k + batch * keys * d;
    const T *vb = v + batch * keys * dv;

    T q_row[kMaxAttentionDim];
    T acc[kMaxAttentionDim];
    MT_UNROLL for (int c = 0; c < d; ++c)
        q_row[c] = active ? qb[row * d + c] * scale : T(0); /* scale once, not once per key */
    MT_UNROLL for (int c = 0; c < dv; ++c)
        acc[c] = T(0);
    T m = -mt_infinity<T>(); /* the largest score so far */
    T l = T(0);         /* sum of exp(score - m) so far */

    const int64_t key_end = keys_needed(keys, first_row, causal);
    for (int64_t start = 0; start < key_end; start += kCols) {
        const int n = tile_rows(start, key_end);
        load_tile(k_tile, kb, start, n, d);
        load_tile(v_tile, vb, start, n, dv);
        __syncthreads(); /* the tile is complete before anyone reads it */

        if (active) {
            T scores[kCols];
            T tile_max = -mt_infinity<T>();
            for (int j = 0; j < n; ++j) {
                T s = T(0);
                MT_UNROLL for (int c = 0; c < d; ++c)
                    s += q_row[c] * k_tile[j][c];
                if (causal && start + j > row)
                    s = -mt_infinity<T>(); /* a future key: weight exp(-inf) = 0 */
                scores[j] = s;
                tile_max = s > tile_max ? s : tile_max;
            }
            const T m_new = tile_max > m ? tile_max : m;
            if (m_new > -mt_infinity<T>()) { /* else every key so far is masked: nothing to add */
                const T rescale = mt_exp(m - m_new); /* exp(-inf) = 0 on the first tile */
                l *= rescale;
                MT_UNROLL for (int c = 0; c < dv; ++c)
                    acc[c] *= rescale;
                for (int j = 0; j < n; ++j) {
                    const T p = mt_exp(scores[j] - m_new);
                    l += p;
                    MT_UNROLL for (int c = 0; c < dv; ++c)
                        acc[c] += p * v_tile[j][c];
                }
                m = m_new;
            }
        }
        __syncthreads(); /* everyone is done with the tile before the next overwrites it */
    }
    if (active) {
        T *ob = out + (batch * length + row) * dv;
        MT_UNROLL for (int c = 0; c < dv; ++c)
            ob[c] = acc[c] / l; /* l = 0 (no key at all) gives NaN, as softmax over nothing */
        /* The row's log-sum-exp, m + log(l): all the backward needs to
         * recompute any weight, p_ij = exp(s_ij - lse_i), without a pass over
         * the row. */
        lse[batch * length + row] = m + mt_log(l);
    }
}

/*
 * The backward pass, given dO = dL/dout. With s_ij = q_i . k_j * scale and
 * p_ij = exp(s_ij - lse_i) (recomputed, never stored):
 *
 *   dv_j = sum_i p_ij dO_i
 *   ds_ij = p_ij (dO_i . v_j - D_i),   D_i = dO_i . out_i = sum_j p_ij dO_i . v_j
 *   dq_i = scale * sum_j ds_ij k_j
 *   dk_j = scale * sum_i ds_ij q_i
 *
 * (D_i is the softmax backward's sum over the row, taken from the output
 * instead of from the L x S weights.) dq_i sums over keys and dk_j, dv_j
 * over queries, so the work splits into two kernels that need no atomics:
 * one thread per query row walking tiles of keys (as the forward does), then
 * one thread per key row walking tiles of queries.
 */
template <typename T, int kDim>
__global__ void attention_backward_dq(T *dq, T *delta, const T *dout, const T *out, const T *lse, const T *q,
                                      const T *k, const T *v, int64_t length, int64_t keys, int d_arg,
                                      int dv_arg, T scale, int causal, int64_t row_tiles)
{
    const int d = kDim ? kDim : d_arg, dv = kDim ? kDim : dv_arg; /* as in attention_flash */
    __shared__ T k_tile[kCols][kMaxAttentionDim];
    __shared__ T v_tile[kCols][kMaxAttentionDim];
    const int64_t batch = blockIdx.x / row_tiles;
    const int64_t first_row = (blockIdx.x % row_tiles) * kRows;
    const int64_t row = first_row + threadIdx.x;
    const bool active = row < length; /* spare threads still load tiles and meet the barriers */
    const T *kb = k + batch * keys * d;
    const T *vb = v + batch * keys * dv;
    const int64_t r = batch * length + row;

    T q_row[kMaxAttentionDim], do_row[kMaxAttentionDim], acc[kMaxAttentionDim];
    T row_delta = T(0);
    MT_UNROLL for (int c = 0; c < d; ++c) {
        q_row[c] = active ? q[r * d + c] : T(0);
        acc[c] = T(0);
    }
    MT_UNROLL for (int c = 0; c < dv; ++c) {
        do_row[c] = active ? dout[r * dv + c] : T(0);
        row_delta += active ? do_row[c] * out[r * dv + c] : T(0);
    }
    const T row_lse = active ? lse[r] : T(0);
    if (active)
        delta[r] = row_delta; /* for the second kernel */

    const int64_t key_end = keys_needed(keys, first_row, causal);
    for (int64_t start = 0; start < key_end; start += kCols) {
        const int n = tile_rows(start, key_end);
        load_tile(k_tile, kb, start, n, d);
        load_tile(v_tile, vb, start, n, dv);
        __syncthreads(); /* the tile is complete before anyone reads it */
        if (active)
            for (int j = 0; j < n; ++j) {
                if (causal && start + j > row)
                    break; /* the rest of the tile is in this query's future: p = 0 */
                T s = T(0), dp = T(0);
                MT_UNROLL for (int c = 0; c < d; ++c)
                    s += q_row[c] * k_tile[j][c];
                MT_UNROLL for (int c = 0; c < dv; ++c)
                    dp += do_row[c] * v_tile[j][c];
                const T ds = mt_exp(s * scale - row_lse) * (dp - row_delta);
                MT_UNROLL for (int c = 0; c < d; ++c)
                    acc[c] += ds * k_tile[j][c];
            }
        __syncthreads(); /* everyone is done with the tile before the next overwrites it */
    }
    if (active)
        MT_UNROLL for (int c = 0; c < d; ++c)
            dq[r * d + c] = acc[c] * scale;
}

/* One thread per key row j: its k and v rows and its dk, dv sums, walking
 * tiles of queries (q, dO, lse and D of kCols queries in shared memory).
 * Under the causal mask key j is seen only by queries i >= j, so a block's
 * walk starts at its first key's tile. */
template <typename T, int kDim>
__global__ void attention_backward_dkdv(T *dk, T *dv_out, const T *delta, const T *dout, const T *lse, const T *q,
                                        const T *k, const T *v, int64_t length, int64_t keys, int d_arg,
                                        int dv_arg, T scale, int causal, int64_t key_tiles)
{
    const int d = kDim ? kDim : d_arg, dv = kDim ? kDim : dv_arg; /* as in attention_flash */
    __shared__ T q_tile[kCols][kMaxAttentionDim];
    __shared__ T do_tile[kCols][kMaxAttentionDim];
    __shared__ T lse_tile[kCols];
    __shared__ T delta_tile[kCols];
    const int64_t batch = blockIdx.x / key_tiles;
    const int64_t first_key = (blockIdx.x % key_tiles) * kRows;
    const int64_t key = first_key + threadIdx.x;
    const bool active = key < keys;
    const int64_t kr = batch * keys + key;
    const T *qb = q + batch * length * d;
    const T *dob = dout + batch * length * dv;

    T k_row[kMaxAttentionDim], v_row[kMaxAttentionDim], dk_acc[kMaxAttentionDim], dv_acc[kMaxAttentionDim];
    MT_UNROLL for (int c = 0; c < d; ++c) {
        k_row[c] = active ? k[kr * d + c] : T(0);
        dk_acc[c] = T(0);
    }
    MT_UNROLL for (int c = 0; c < dv; ++c) {
        v_row[c] = active ? v[kr * dv + c] : T(0);
        dv_acc[c] = T(0);
    }
    const int64_t first_query = causal ? first_key / kCols * kCols : 0;
    for (int64_t start = first_query; start < length; start += kCols) {
        const int n = tile_rows(start, length);
        load_tile(q_tile, qb, start, n, d);
        load_tile(do_tile, dob, start, n, dv);
        for (int e = threadIdx.x; e < n; e += kRows) {
            lse_tile[e] = lse[batch * length + start + e];
            delta_tile[e] = delta[batch * length + start + e];
        }
        __syncthreads(); /* the tile is complete before anyone reads it */
        if (active)
            for (int i = 0; i < n; ++i) {
                if (causal && key > start + i)
                    continue; /* query start + i comes before this key: it never saw it */
                T s = T(0), dp = T(0);
                MT_UNROLL for (int c = 0; c < d; ++c)
                    s += q_tile[i][c] * k_row[c];
                const T p = mt_exp(s * scale - lse_tile[i]);
                MT_UNROLL for (int c = 0; c < dv; ++c) {
                    dp += do_tile[i][c] * v_row[c];
                    dv_acc[c] += p * do_tile[i][c];
                }
                const T ds = p * (dp - delta_tile[i]);
                MT_UNROLL for (int c = 0; c < d; ++c)
                    dk_acc[c] += ds * q_tile[i][c];
            }
        __syncthreads(); /* everyone is done with the tile before the next overwrites it */
    }
    if (active) {
        MT_UNROLL for (int c = 0; c < d; ++c)
            dk[kr * d + c] = dk_acc[c] * scale;
        MT_UNROLL for (int c = 0; c < dv; ++c)
            dv_out[kr * dv + c] = dv_acc[c];
    }
}

template <typename T>
static T *first(const mt_tensor &t)
{
    return static_cast<T *>(t.data) + t.offset;
}

/* Runs launch(std::integral_constant<int, kDim>) with the kernels'
 * compile-time head dim: 16, 32 or 64 when q's and v's head dims are both
 * that, else 0 (any dims, at run time). */
template <typename Launch>
static mt_status with_head_dim(const mt_tensor &q, const mt_tensor &v, Launch launch)
{
    const int64_t d = q.shape[2];
    switch (d == v.shape[2] ? d : 0) {
    case 16: return launch(std::integral_constant<int, 16>{});
    case 32: return launch(std::integral_constant<int, 32>{});
    case 64: return launch(std::integral_constant<int, 64>{});
    default: return launch(std::integral_constant<int, 0>{});
    }
}

template <typename T, int kDim>
static mt_status launch_attention_dim(const mt_tensor &out, const mt_tensor &lse, const mt_tensor &q,
                                      const mt_tensor &k, const mt_tensor &v, double scale, int causal,
                                      unsigned int grid, int64_t row_tiles)
{
    attention_flash<T, kDim><<<grid, kRows, 0, mt_stream()>>>(
        first<T>(out), first<T>(lse), first<T>(q), first<T>(k), first<T>(v), q.shape[1], k.shape[1],
        (int)q.shape[2], (int)v.shape[2], (T)scale, causal != 0, row_tiles);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

template <typename T>
static mt_status launch_attention(const mt_tensor &out, const mt_tensor &lse, const mt_tensor &q,
                                  const mt_tensor &k, const mt_tensor &v, double scale, int causal,
                                  unsigned int grid, int64_t row_tiles)
{
    return with_head_dim(q, v, [&](auto dim) {
        return launch_attention_dim<T, decltype(dim)::value>(out, lse, q, k, v, scale, causal, grid, row_tiles);
    });
}

/* The checks both directions share: q (B, L, D), k (B, S, D), v (B, S, Dv)
 * contiguous, of one float dtype with `like`, head dims at most max_dim, and
 * lse a contiguous (B, L) tensor of that dtype. */
static mt_status check_attention_operands(const char *func, const mt_tensor &like, const char *like_name,
                                          const mt_tensor &q, const mt_tensor &k, const mt_tensor &v,
                                          const mt_tensor &lse, int max_dim)
{
    const mt_tensor *inputs[] = {&q, &k, &v, &lse};
    const char *names[] = {"q", "k", "v", "lse"};
    for (int t = 0; t < 4; ++t) {
        MT_TRY(mt_check_tensor(func, names[t], inputs[t]));
        MT_TRY(mt_check_extent(func, names[t], inputs[t]));
        MT_TRY(mt_check_same_dtype(func, inputs[t], names[t], &like, like_name));
        if (inputs[t]->ndim != (t < 3 ? 3 : 2) || !is_contiguous(*inputs[t]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s must be a contiguous %s tensor", names[t],
                           t < 3 ? "(batch, length, dim)" : "(batch, length)");
    }
    MT_TRY(mt_check_float(func, "q", &q));
    const int64_t b = q.shape[0], length = q.shape[1], keys = k.shape[1], d = q.shape[2], dv = v.shape[2];
    if (k.shape[0] != b || v.shape[0] != b || k.shape[2] != d || v.shape[1] != keys)
        return mt_fail(MT_ERR_SHAPE, func, "q, k and v do not agree: (B, L, D), (B, S, D) and (B, S, Dv) expected");
    if (lse.shape[0] != b || lse.shape[1] != length)
        return mt_fail(MT_ERR_SHAPE, func, "lse must be (%lld, %lld)", (long long)b, (long long)length);
    if (d > max_dim || dv > max_dim)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "head dims %lld and %lld: this kernel keeps a row in "
                       "registers and takes at most %d", (long long)d, (long long)dv, max_dim);
    if (b * (((length > keys ? length : keys) + kRows - 1) / kRows) > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "more blocks than a grid holds");
    return MT_OK;
}

/* An output must be a contiguous tensor of `shape` overlapping none of the
 * inputs. */
static mt_status check_attention_output(const char *func, const char *name, const mt_tensor &t,
                                        const int64_t (&shape)[3], int ndim, const mt_tensor *const *inputs,
                                        int n_inputs)
{
    MT_TRY(mt_check_output(func, name, &t));
    MT_TRY(mt_check_extent(func, name, &t));
    bool ok = t.ndim == ndim && is_contiguous(t);
    for (int i = 0; ok && i < ndim; ++i)
        ok = t.shape[i] == shape[i];
    if (!ok)
        return ndim == 3 ? mt_fail(MT_ERR_SHAPE, func, "%s must be a contiguous (%lld, %lld, %lld) tensor", name,
                                   (long long)shape[0], (long long)shape[1], (long long)shape[2])
                         : mt_fail(MT_ERR_SHAPE, func, "%s must be a contiguous (%lld, %lld) tensor", name,
                                   (long long)shape[0], (long long)shape[1]);
    for (int i = 0; i < n_inputs; ++i)
        if (tensors_overlap(t, *inputs[i]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s overlaps an input", name);
    return MT_OK;
}

mt_status check_attention_forward(const char *func, const mt_tensor &out, const mt_tensor &lse, const mt_tensor &q,
                                  const mt_tensor &k, const mt_tensor &v, int max_dim)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    MT_TRY(mt_check_output(func, "lse", &lse));
    MT_TRY(check_attention_operands(func, out, "out", q, k, v, lse, max_dim));
    const int64_t out_shape[3] = {q.shape[0], q.shape[1], v.shape[2]};
    const mt_tensor *inputs[] = {&q, &k, &v, &lse};
    MT_TRY(check_attention_output(func, "out", out, out_shape, 3, inputs, 4));
    MT_TRY(check_attention_output(func, "lse", lse, out_shape, 2, inputs, 3));
    return MT_OK;
}

mt_status mt_attention(mt_tensor out, mt_tensor lse, mt_tensor q, mt_tensor k, mt_tensor v, double scale, int causal)
{
    MT_TRY(check_attention_forward("mt_attention", out, lse, q, k, v, kMaxAttentionDim));
    const int64_t b = q.shape[0], length = q.shape[1];
    if (tensor_numel(out) == 0 && tensor_numel(lse) == 0)
        return MT_OK;
    const int64_t row_tiles = (length + kRows - 1) / kRows;
    const unsigned int grid = (unsigned int)(b * row_tiles);
    if (q.dtype == MT_FLOAT32)
        return launch_attention<float>(out, lse, q, k, v, scale, causal, grid, row_tiles);
    return launch_attention<double>(out, lse, q, k, v, scale, causal, grid, row_tiles);
}

template <typename T, int kDim>
static mt_status launch_attention_backward_dim(const mt_tensor &dq, const mt_tensor &dk, const mt_tensor &dv,
                                               const mt_tensor &dout, const mt_tensor &q, const mt_tensor &k,
                                               const mt_tensor &v, const mt_tensor &out, const mt_tensor &lse,
                                               double scale, int causal)
{
    const int64_t b = q.shape[0], length = q.shape[1], keys = k.shape[1];
    const int d = (int)q.shape[2], dvd = (int)v.shape[2];
    DeviceScratch delta; /* D_i = dO_i . out_i, written by the first kernel, read by the second */
    CUDA_CHECK(delta.allocate(sizeof(T) * (size_t)(b * length > 0 ? b * length : 1)));
    T *delta_data = delta.as<T>();
    const int64_t row_tiles = (length + kRows - 1) / kRows, key_tiles = (keys + kRows - 1) / kRows;
    if (b * row_tiles > 0) {
        attention_backward_dq<T, kDim><<<(unsigned int)(b * row_tiles), kRows, 0, mt_stream()>>>(
            first<T>(dq), delta_data, first<T>(dout), first<T>(out), first<T>(lse), first<T>(q), first<T>(k),
            first<T>(v), length, keys, d, dvd, (T)scale, causal != 0, row_tiles);
        CUDA_CHECK(mt_launch_status());
    }
    if (b * key_tiles > 0) {
        attention_backward_dkdv<T, kDim><<<(unsigned int)(b * key_tiles), kRows, 0, mt_stream()>>>(
            first<T>(dk), first<T>(dv), delta_data, first<T>(dout), first<T>(lse), first<T>(q), first<T>(k),
            first<T>(v), length, keys, d, dvd, (T)scale, causal != 0, key_tiles);
        CUDA_CHECK(mt_launch_status());
    }
    CUDA_CHECK(delta.release());
    return MT_OK;
}

template <typename T>
static mt_status launch_attention_backward(const mt_tensor &dq, const mt_tensor &dk, const mt_tensor &dv,
                                           const mt_tensor &dout, const mt_tensor &q, const mt_tensor &k,
                                           const mt_tensor &v, const mt_tensor &out, const mt_tensor &lse,
                                           double scale, int causal)
{
    return with_head_dim(q, v, [&](auto dim) {
        return launch_attention_backward_dim<T, decltype(dim)::value>(dq, dk, dv, dout, q, k, v, out, lse, scale,
                                                                      causal);
    });
}

mt_status check_attention_backward(const char *func, const mt_tensor &dq, const mt_tensor &dk, const mt_tensor &dv,
                                   const mt_tensor &dout, const mt_tensor &q, const mt_tensor &k, const mt_tensor &v,
                                   const mt_tensor &out, const mt_tensor &lse, int max_dim)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "dq", &dq));
    MT_TRY(check_attention_operands(func, dq, "dq", q, k, v, lse, max_dim));
    const int64_t b = q.shape[0], length = q.shape[1], keys = k.shape[1];
    const int64_t out_shape[3] = {b, length, v.shape[2]};
    const mt_tensor *more[] = {&dout, &out};
    const char *more_names[] = {"dout", "out"};
    for (int t = 0; t < 2; ++t) {
        MT_TRY(mt_check_tensor(func, more_names[t], more[t]));
        MT_TRY(mt_check_extent(func, more_names[t], more[t]));
        MT_TRY(mt_check_same_dtype(func, more[t], more_names[t], &dq, "dq"));
        bool ok = more[t]->ndim == 3 && is_contiguous(*more[t]);
        for (int i = 0; ok && i < 3; ++i)
            ok = more[t]->shape[i] == out_shape[i];
        if (!ok)
            return mt_fail(MT_ERR_SHAPE, func, "%s must be a contiguous (%lld, %lld, %lld) tensor", more_names[t],
                           (long long)b, (long long)length, (long long)out_shape[2]);
    }
    const mt_tensor *inputs[] = {&q, &k, &v, &lse, &dout, &out};
    const int64_t dq_shape[3] = {b, length, q.shape[2]}, dk_shape[3] = {b, keys, k.shape[2]},
                  dv_shape[3] = {b, keys, v.shape[2]};
    MT_TRY(check_attention_output(func, "dq", dq, dq_shape, 3, inputs, 6));
    MT_TRY(check_attention_output(func, "dk", dk, dk_shape, 3, inputs, 6));
    MT_TRY(check_attention_output(func, "dv", dv, dv_shape, 3, inputs, 6));
    if (tensors_overlap(dq, dk) || tensors_overlap(dq, dv) || tensors_overlap(dk, dv))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "dq, dk and dv must not overlap");
    return MT_OK;
}

mt_status mt_attention_backward(mt_tensor dq, mt_tensor dk, mt_tensor dv, mt_tensor dout, mt_tensor q, mt_tensor k,
                                mt_tensor v, mt_tensor out, mt_tensor lse, double scale, int causal)
{
    MT_TRY(check_attention_backward("mt_attention_backward", dq, dk, dv, dout, q, k, v, out, lse,
                                    kMaxAttentionDim));
    if (q.dtype == MT_FLOAT32)
        return launch_attention_backward<float>(dq, dk, dv, dout, q, k, v, out, lse, scale, causal);
    return launch_attention_backward<double>(dq, dk, dv, dout, q, k, v, out, lse, scale, causal);
}
