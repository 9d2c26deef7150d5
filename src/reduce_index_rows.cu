/*
 * reduce_index_rows.cu: max / min along contiguous rows, with or without
 * their indices, in one pass (torch's max(dim), min(dim), argmax, argmin,
 * amax and amin over the last dim). The generic ladder (src/reduce_ladder.cu)
 * folds a reducer's Acc, here a ValueIndex with a 64-bit index and the full,
 * order-free combine at every element; this kernel is what that pass costs
 * when it is written for the one job:
 *
 *   - 16-byte loads (Packs), four of them in flight a thread before any is
 *     combined, as the vectorized rung;
 *   - a 32-bit index while the row is read (rows shorter than 2^31), widened
 *     to int64 only when it is stored;
 *   - an in-order fold: a thread meets its elements in increasing index, so
 *     an element replaces the thread's best only when strictly better, or
 *     the first NaN (no index comparison per element, the tie rule holds by
 *     itself). A thread whose elements are all the start value (-inf for
 *     max) takes its first one after the loop. One compare with an unordered
 *     result, `!(x <= best)`, is "x better, or x NaN", and the best's own
 *     NaN test stops a NaN from being replaced;
 *   - a group of `warps` warps per row (1, 2, 4 or 8 of a block's 8): the
 *     group's lanes take Packs lane, lane + 32 warps, ...; each warp finishes
 *     by shuffles (value and 32-bit index, the full first-best rule), and
 *     with more than one warp a row its warps meet once in shared memory:
 *     one barrier a block, and no block waits for a slow neighbour (one
 *     block reads 8 / warps rows and exits; the block scheduler balances the
 *     SMs, where warp_rows' fixed grid gives its warps 2 or 3 rows of 4096
 *     each on 16384 rows and the last round runs a third of them).
 *
 * NaN: a NaN beats every number and the first NaN's index is reported, as
 * NumPy and PyTorch do; between equal values the first index wins.
 */
#include "reduce.h"

namespace {

constexpr int kWarpsPerBlock = kBlockSize / 32;

/* Packs a thread loads before it combines any. 4 and 8 measured alike on
 * an H200 (max(dim) 1.07-1.08x torch against 1.05-1.08x, performance.md,
 * 2026-11-28), so the fewer registers stay. */
constexpr int kPacksInFlight = 4;

/* A row's best so far: its value and its index (32 bits). */
template <typename T>
struct Best {
    T value;
    int32_t index;
};

/* Does candidate a come before b: a NaN first (the first NaN of them), then
 * the larger (kMax) or smaller value, then between equal values the smaller
 * index. Order-free, for the shuffles and the group's finish. */
template <typename T, bool kMax>
MT_DEVICE bool comes_first(Best<T> a, Best<T> b)
{
    const bool a_nan = mt_isnan(a.value), b_nan = mt_isnan(b.value);
    if (a_nan || b_nan)
        return a_nan && (!b_nan || a.index < b.index);
    if (a.value != b.value)
        return kMax ? a.value > b.value : a.value < b.value;
    return a.index < b.index;
}

/* The in-order step: x, at index k larger than every index best has seen,
 * replaces it when better or the first NaN. `!(x <= v)` is true for x > v
 * and whenever either is NaN; `v == v` rules out a NaN best. */
template <typename T, bool kMax>
MT_DEVICE Best<T> fold_in_order(Best<T> best, T x, int32_t k)
{
    const bool better_or_nan = kMax ? !(x <= best.value) : !(x >= best.value);
    return (better_or_nan && best.value == best.value) ? Best<T>{x, k} : best;
}

/* The warp's best (in lane 0): five shuffle steps, two values each. */
template <typename T, bool kMax>
MT_DEVICE Best<T> warp_best(Best<T> best)
{
    MT_UNROLL for (int delta = 16; delta > 0; delta /= 2) {
        Best<T> other;
        other.value = __shfl_down_sync(0xffffffffu, best.value, delta);
        other.index = __shfl_down_sync(0xffffffffu, best.index, delta);
        if (comes_first<T, kMax>(other, best))
            best = other;
    }
    return best;
}

/* Values only (amax / amin): the NaN-propagating max or min, whose result
 * does not depend on the order. */
template <typename T, bool kMax>
MT_DEVICE T warp_extreme(T v)
{
    MT_UNROLL for (int delta = 16; delta > 0; delta /= 2) {
        const T other = __shfl_down_sync(0xffffffffu, v, delta);
        v = kMax ? mt_max(v, other) : mt_min(v, other);
    }
    return v;
}

} // namespace

/* Block b, warp w: row b * (8 / warps) + w / warps, member lane
 * (w % warps) * 32 + lane of its group. in_rows is `in` with its last dim
 * set to 1 (ordinal r is the first element of row r); every row start is
 * 16-byte aligned and len is a whole number of Packs (the host checked).
 * indices (int64) and values (T) have the same strides; either may be null
 * (argmax: no values; amax: no indices, kIndex false). */
template <typename T, bool kMax, bool kIndex>
__global__ void __launch_bounds__(kBlockSize) reduce_index_rows(mt_tensor in_rows, int64_t len, int64_t rows,
                                                                int warps, int64_t *indices_first,
                                                                T *values_first, mt_tensor out_rows)
{
    constexpr int W = Pack<T>::kWidth;
    /* One slot per warp: its best, read by the first warp of its group. */
    __shared__ Best<T> warp_results[kWarpsPerBlock];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int group_threads = 32 * warps;
    const int member = threadIdx.x % group_threads;
    const int64_t row = (int64_t)blockIdx.x * (kWarpsPerBlock / warps) + warp / warps;
    const int32_t packs = (int32_t)(len / W);
    Best<T> best{kMax ? mt_lowest<T>() : mt_highest<T>(), INT32_MAX}; /* no element yet */
    if (row < rows && member < packs) {
        const Pack<T> *p = reinterpret_cast<const Pack<T> *>(static_cast<const T *>(in_rows.data) +
                                                            ordinal_to_position(row, &in_rows));
        int32_t c = member;
        /* U Packs in flight before any is combined. */
        constexpr int U = kPacksInFlight;
        for (; c + (U - 1) * group_threads < packs; c += U * group_threads) {
            Pack<T> q[U];
            MT_UNROLL for (int u = 0; u < U; ++u)
                q[u] = p[c + u * group_threads];
            MT_UNROLL for (int u = 0; u < U; ++u)
                MT_UNROLL for (int w = 0; w < W; ++w) {
                    if constexpr (kIndex)
                        best = fold_in_order<T, kMax>(best, q[u].v[w], (c + u * group_threads) * W + w);
                    else
                        best.value = kMax ? mt_max(best.value, q[u].v[w]) : mt_min(best.value, q[u].v[w]);
                }
        }
        for (; c < packs; c += group_threads) {
            const Pack<T> q = p[c];
            MT_UNROLL for (int w = 0; w < W; ++w) {
                if constexpr (kIndex)
                    best = fold_in_order<T, kMax>(best, q.v[w], c * W + w);
                else
                    best.value = kMax ? mt_max(best.value, q.v[w]) : mt_min(best.value, q.v[w]);
            }
        }
        /* Nothing replaced the start (the worst value, no index): every
         * element the thread read was that worst value (-inf for max; a NaN
         * would have replaced it), so its best is its first element. */
        if (best.index == INT32_MAX)
            best.index = member * W;
    }
    /* Every lane of the warp joins the shuffles (rows past the last too). */
    if constexpr (kIndex)
        best = warp_best<T, kMax>(best);
    else
        best.value = warp_extreme<T, kMax>(best.value);
    if (warps > 1) {
        if (lane == 0)
            warp_results[warp] = best;
        /* Every warp's best is parked before its group's first warp reads them. */
        __syncthreads();
        if (member == 0)
            for (int w = 1; w < warps; ++w) {
                const Best<T> other = warp_results[warp + w];
                if constexpr (kIndex) {
                    if (comes_first<T, kMax>(other, best))
                        best = other;
                } else {
                    best.value = kMax ? mt_max(best.value, other.value) : mt_min(best.value, other.value);
                }
            }
    }
    if (member == 0 && row < rows) {
        const int64_t pos = ordinal_to_position(row, &out_rows); /* counted from out_rows.offset's base */
        if (indices_first != nullptr)
            indices_first[pos] = best.index;
        if (values_first != nullptr)
            values_first[pos] = best.value;
    }
}

/* Can reduce_index_rows read in along dim: float32 or float64, the last dim,
 * stride 1, every row start 16-byte aligned (the first element aligned and
 * every other stride a whole number of Packs), a whole number of Packs a
 * row, at least one, and fewer than 2^31 elements? */
bool index_rows_fit(const mt_tensor &in, int dim)
{
    if (in.dtype != MT_FLOAT32 && in.dtype != MT_FLOAT64)
        return false;
    const int64_t width = 16 / dtype_size(in.dtype);
    const int64_t len = in.shape[dim];
    if (dim != in.ndim - 1 || in.strides[dim] != 1 || len < width || len % width != 0 || len > INT32_MAX)
        return false;
    for (int d = 0; d < in.ndim - 1; ++d)
        if (in.shape[d] > 1 && in.strides[d] % width != 0)
            return false;
    const char *first = static_cast<const char *>(in.data) + in.offset * dtype_size(in.dtype);
    return aligned16(first);
}

/* The library's group size: one warp a row. The H100 checkpoint (bench/
 * reduce_indices.py, max(dim) with indices, float32) measured 1 warp the
 * fastest of 1, 2, 4 and 8 on every shape: 16384 x 4096 0.103 ms (8 warps
 * 0.109, torch 0.101), 16384 x 16384 0.368 (0.390; torch 0.395), 65536 x
 * 1024 0.107 (2 warps 0.113; torch 0.109), 131072 x 512 0.115 (torch 0.122):
 * the more Packs a thread reads, the more loads it keeps in flight, and
 * with one warp a row no barrier and no shared memory. The group sizes stay
 * for the benchmark and the tests. */
int index_rows_default_warps(const mt_tensor &, int)
{
    return 1;
}

template <typename T, bool kMax, bool kIndex>
static mt_status launch_index_rows(const mt_tensor *values, const mt_tensor *indices, const mt_tensor &in, int dim,
                                   int warps)
{
    const mt_tensor &out = indices != nullptr ? *indices : *values;
    mt_tensor in_rows = in;
    in_rows.shape[dim] = 1;
    /* Positions of out counted from its first element's base pointer: both
     * outputs have out's strides, each its own data and offset. */
    mt_tensor out_rows = out;
    out_rows.offset = 0;
    const int64_t rows = tensor_numel(out);
    int64_t *indices_first = indices ? static_cast<int64_t *>(indices->data) + indices->offset : nullptr;
    T *values_first = values ? static_cast<T *>(values->data) + values->offset : nullptr;
    const int64_t rows_per_block = kWarpsPerBlock / warps;
    const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
    if (blocks > 0x7fffffff)
        return mt_fail(MT_ERR_SHAPE, "mt_reduce_index_rows", "%lld rows are more than one launch takes",
                       (long long)rows);
    reduce_index_rows<T, kMax, kIndex><<<(unsigned int)blocks, kBlockSize, 0, mt_stream()>>>(
        in_rows, in.shape[dim], rows, warps, indices_first, values_first, out_rows);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* Runs reduce_index_rows for validated, non-empty tensors that fit
 * (index_rows_fit): max (or min) of in along dim into values, its index into
 * indices; either may be null, not both. warps: 1, 2, 4 or 8. */
mt_status reduce_index_rows_launch(bool max, const mt_tensor *values, const mt_tensor *indices, const mt_tensor &in,
                                   int dim, int warps)
{
    const bool with_index = indices != nullptr;
    if (in.dtype == MT_FLOAT64) {
        if (max)
            return with_index ? launch_index_rows<double, true, true>(values, indices, in, dim, warps)
                              : launch_index_rows<double, true, false>(values, indices, in, dim, warps);
        return with_index ? launch_index_rows<double, false, true>(values, indices, in, dim, warps)
                          : launch_index_rows<double, false, false>(values, indices, in, dim, warps);
    }
    if (max)
        return with_index ? launch_index_rows<float, true, true>(values, indices, in, dim, warps)
                          : launch_index_rows<float, true, false>(values, indices, in, dim, warps);
    return with_index ? launch_index_rows<float, false, true>(values, indices, in, dim, warps)
                      : launch_index_rows<float, false, false>(values, indices, in, dim, warps);
}
