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
 * over a warp and use tensor cores for the two products.
 */
#include "ops_common.h"

/* Queries per block (one thread each), keys per shared-memory tile, and the
 * largest head dim (a row lives in registers: 64 values of q, 64 of output). */
constexpr int kRows = 64;
constexpr int kCols = 32;
constexpr int kMaxAttentionDim = 64;

template <typename T>
__global__ void attention_flash(T *out, const T *q, const T *k, const T *v, int64_t length, int64_t keys,
                                int d, int dv, T scale, int causal, int64_t row_tiles)
{
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
    for (int c = 0; c < d; ++c)
        q_row[c] = active ? qb[row * d + c] * scale : T(0); /* scale once, not once per key */
    for (int c = 0; c < dv; ++c)
        acc[c] = T(0);
    T m = -mt_infinity<T>(); /* the largest score so far */
    T l = T(0);         /* sum of exp(score - m) so far */

    /* With the causal mask, keys past the block's last query are never needed. */
    int64_t key_end = keys;
    if (causal && first_row + kRows < key_end)
        key_end = first_row + kRows;
    for (int64_t start = 0; start < key_end; start += kCols) {
        const int n = key_end - start < kCols ? (int)(key_end - start) : kCols;
        /* Load the tile: thread t copies elements t, t + kRows, ... */
        for (int e = threadIdx.x; e < n * d; e += kRows)
            k_tile[e / d][e % d] = kb[(start + e / d) * d + e % d];
        for (int e = threadIdx.x; e < n * dv; e += kRows)
            v_tile[e / dv][e % dv] = vb[(start + e / dv) * dv + e % dv];
        __syncthreads(); /* the tile is complete before anyone reads it */

        if (active) {
            T scores[kCols];
            T tile_max = -mt_infinity<T>();
            for (int j = 0; j < n; ++j) {
                T s = T(0);
                for (int c = 0; c < d; ++c)
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
                for (int c = 0; c < dv; ++c)
                    acc[c] *= rescale;
                for (int j = 0; j < n; ++j) {
                    const T p = mt_exp(scores[j] - m_new);
                    l += p;
                    for (int c = 0; c < dv; ++c)
                        acc[c] += p * v_tile[j][c];
                }
                m = m_new;
            }
        }
        __syncthreads(); /* everyone is done with the tile before the next overwrites it */
    }
    if (active) {
        T *ob = out + (batch * length + row) * dv;
        for (int c = 0; c < dv; ++c)
            ob[c] = acc[c] / l; /* l = 0 (no key at all) gives NaN, as softmax over nothing */
    }
}

template <typename T>
static mt_status launch_attention(const mt_tensor &out, const mt_tensor &q, const mt_tensor &k, const mt_tensor &v,
                                  double scale, int causal, unsigned int grid, int64_t row_tiles)
{
    attention_flash<T><<<grid, kRows, 0, mt_stream()>>>(
        static_cast<T *>(out.data) + out.offset, static_cast<const T *>(q.data) + q.offset,
        static_cast<const T *>(k.data) + k.offset, static_cast<const T *>(v.data) + v.offset, q.shape[1],
        k.shape[1], (int)q.shape[2], (int)v.shape[2], (T)scale, causal != 0, row_tiles);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_attention(mt_tensor out, mt_tensor q, mt_tensor k, mt_tensor v, double scale, int causal)
{
    const char *func = "mt_attention";
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    const mt_tensor *inputs[] = {&q, &k, &v};
    const char *names[] = {"q", "k", "v"};
    for (int t = 0; t < 3; ++t) {
        MT_TRY(mt_check_tensor(func, names[t], inputs[t]));
        MT_TRY(mt_check_extent(func, names[t], inputs[t]));
        MT_TRY(mt_check_same_dtype(func, inputs[t], names[t], &out, "out"));
        if (inputs[t]->ndim != 3 || !is_contiguous(*inputs[t]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s must be a contiguous (batch, length, dim) tensor",
                           names[t]);
    }
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_float(func, "q", &q));
    const int64_t b = q.shape[0], length = q.shape[1], keys = k.shape[1], d = q.shape[2], dv = v.shape[2];
    if (k.shape[0] != b || v.shape[0] != b || k.shape[2] != d || v.shape[1] != keys)
        return mt_fail(MT_ERR_SHAPE, func, "q, k and v do not agree: (B, L, D), (B, S, D) and (B, S, Dv) expected");
    if (out.ndim != 3 || out.shape[0] != b || out.shape[1] != length || out.shape[2] != dv || !is_contiguous(out))
        return mt_fail(MT_ERR_SHAPE, func, "out must be a contiguous (%lld, %lld, %lld) tensor", (long long)b,
                       (long long)length, (long long)dv);
    if (d > kMaxAttentionDim || dv > kMaxAttentionDim)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "head dims %lld and %lld: this kernel keeps a row in "
                       "registers and takes at most %d", (long long)d, (long long)dv, kMaxAttentionDim);
    for (int t = 0; t < 3; ++t)
        if (tensors_overlap(out, *inputs[t]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "out overlaps %s", names[t]);
    if (tensor_numel(out) == 0)
        return MT_OK;
    const int64_t row_tiles = (length + kRows - 1) / kRows;
    if (b * row_tiles > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%lld blocks: more than a grid holds", (long long)(b * row_tiles));
    const unsigned int grid = (unsigned int)(b * row_tiles);
    if (q.dtype == MT_FLOAT32)
        return launch_attention<float>(out, q, k, v, scale, causal, grid, row_tiles);
    return launch_attention<double>(out, q, k, v, scale, causal, grid, row_tiles);
}
