/*
 * layernorm_backward.cu: the gradients of layer normalization (the forward
 * is src/layernorm.cu), from the forward's x and its saved mean and rstd.
 *
 *   with g = dL/dy, xhat_k = (x_k - mean) * rstd and gw_k = g_k * w_k:
 *   dx_k = rstd * (gw_k - mean_j(gw_j) - xhat_k * mean_j(gw_j * xhat_j))
 *   dw_k = sum over rows of g_k * xhat_k,  db_k = sum over rows of g_k
 *
 * dx is a row computation (two sums over the row, then the row again); dw
 * and db are column sums over every row. Reading g and x once for both is
 * what makes the backward as fast as memory allows (llm.c's layernorm
 * backward does the same): one row pass that also keeps partial column
 * sums, then a small column reduction of those partials.
 *
 * Kernels:
 *   layer_norm_backward_fused  rows of up to 4 Packs per thread of 512 (8192
 *                  floats, 4096 doubles): thread t owns the same Packs of
 *                  every row its block visits (rows blockIdx.x, +
 *                  gridDim.x, ...), so it computes dx from registers AND
 *                  adds g * xhat and g of its columns into registers across
 *                  those rows. The two row sums travel through one block
 *                  reduction. Each block then writes one row of partial
 *                  dw and db: a few hundred rows of partials, not a second
 *                  pass over g and x. 16-byte loads when the rows allow.
 *   layer_norm_column_sums     dw and db from the partial rows, in one
 *                  launch: a block of 32 columns by 8 row groups, so a
 *                  warp reads 32 neighbouring columns, and many blocks.
 *   layer_norm_backward_rows and layer_norm_param_partials: the teaching
 *                  rung, kept for rows too long for registers: dx by one
 *                  block per row (two passes), and dw, db by a second pass
 *                  over g and x in 32-column tiles (8 partial rows per chunk
 *                  of rows, then the same column sums).
 */
#include "layernorm.h"

/* dx of each row; g, x, dx are rows of n; w may be null. */
template <typename T>
__global__ void layer_norm_backward_rows(T *dx, const T *g, const T *x, const T *mean, const T *rstd,
                                         const T *w, int64_t n, int64_t rows)
{
    __shared__ BlockScratch<T> scratch;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t first = row * n;
        const T m = mean[row];
        const T r = rstd[row];
        T sum_gw = T(0), sum_gw_xhat = T(0);
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
            const T gw = w ? g[first + k] * w[k] : g[first + k];
            sum_gw += gw;
            sum_gw_xhat += gw * (x[first + k] - m) * r;
        }
        const T mean_gw = block_reduce_warps(scratch, sum_gw, T(0), CombineSum<T>()) / T(n);
        const T mean_gw_xhat = block_reduce_warps(scratch, sum_gw_xhat, T(0), CombineSum<T>()) / T(n);
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
            const T gw = w ? g[first + k] * w[k] : g[first + k];
            const T xhat = (x[first + k] - m) * r;
            dx[first + k] = r * (gw - mean_gw - xhat * mean_gw_xhat);
        }
    }
}

constexpr int kColTile = 32; /* columns per block: a warp reads 32 neighbours */
constexpr int kRowTile = 8;  /* rows a block reads at once */

/* Block (bx, by) takes columns bx * 32 .. + 31 of the rows of chunk by (rows
 * by * per_chunk ..); its row group ty (threadIdx.y) sums every 8th of them
 * into partial_w[by * 8 + ty][col] (g * xhat) and partial_b[..][col] (g):
 * 8 partial rows per chunk, which layer_norm_column_sums adds up. Either
 * partial may be null (that gradient is not wanted). */
template <typename T>
__global__ void layer_norm_param_partials(T *partial_w, T *partial_b, const T *g, const T *x, const T *mean,
                                          const T *rstd, int64_t n, int64_t rows, int64_t per_chunk)
{
    const int64_t col = (int64_t)blockIdx.x * kColTile + threadIdx.x;
    if (col >= n)
        return;
    const int64_t begin = (int64_t)blockIdx.y * per_chunk;
    const int64_t end = begin + per_chunk < rows ? begin + per_chunk : rows;
    T acc_w = T(0), acc_b = T(0);
    for (int64_t row = begin + threadIdx.y; row < end; row += kRowTile) {
        const T gv = g[row * n + col];
        acc_w += gv * (x[row * n + col] - mean[row]) * rstd[row];
        acc_b += gv;
    }
    const int64_t partial_row = (int64_t)blockIdx.y * kRowTile + threadIdx.y;
    if (partial_w)
        partial_w[partial_row * n + col] = acc_w;
    if (partial_b)
        partial_b[partial_row * n + col] = acc_b;
}

/* The two sums of a row of the backward, reduced together: one block
 * reduction (three barriers) instead of two. */
template <typename T>
struct RowSums {
    T gw;      /* sum of g * w            */
    T gw_xhat; /* sum of g * w * xhat     */
};

template <typename T>
struct CombineRowSums {
    MT_DEVICE RowSums<T> operator()(RowSums<T> a, RowSums<T> b) const
    {
        return RowSums<T>{a.gw + b.gw, a.gw_xhat + b.gw_xhat};
    }
};

/* The pair through a warp shuffle, one field at a time (found by
 * argument-dependent lookup from warp_reduce in block_reduce.h). */
template <typename T>
MT_DEVICE RowSums<T> shfl_down(RowSums<T> v, int delta)
{
    v.gw = __shfl_down_sync(0xffffffffu, v.gw, delta);
    v.gw_xhat = __shfl_down_sync(0xffffffffu, v.gw_xhat, delta);
    return v;
}

/* Blocks of 512 threads an SM runs at once, by Packs per thread: two up to
 * 2 Packs (8 floats; the bound caps registers at 64, so that the
 * accumulators do not halve the blocks an SM holds), one at 4 (16 floats
 * of g, xhat and the two accumulators need more than 64 registers: ptxas
 * spills under the tighter bound). */
constexpr int fused_blocks_per_sm(int packs)
{
    return packs >= 4 ? 1 : 2;
}

/* dx (may be null) and the partials: partials[blockIdx.x][k] of dw (when
 * want_w) then, gridDim.x rows further, of db (when want_b). Thread t holds
 * kPacks slots of W elements, slot (p, w) being element slot_element(vec, p,
 * w, ...) of the row (Packs when vec). w may be null (no weight: 1). */
template <typename T, int kPacks>
__global__ void __launch_bounds__(512, fused_blocks_per_sm(kPacks)) layer_norm_backward_fused(T *dx, T *partials, bool want_w, bool want_b,
                                                                    const T *g, const T *x, const T *mean,
                                                                    const T *rstd, const T *w, int64_t n,
                                                                    int64_t rows, bool vec)
{
    __shared__ BlockScratch<RowSums<T>> scratch;
    constexpr int W = Pack<T>::kWidth;
    const int64_t B = blockDim.x;
    const int64_t t = threadIdx.x;
    T acc_w[kPacks][W], acc_b[kPacks][W];
    MT_UNROLL for (int p = 0; p < kPacks; ++p)
        MT_UNROLL for (int e = 0; e < W; ++e)
            acc_w[p][e] = acc_b[p][e] = T(0);
    /* `row` is the same for every thread of the block, so all of them reach
     * the block reduction's barriers equally often. */
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T m = mean[row];
        const T r = rstd[row];
        const T *g_row = g + row * n;
        const T *x_row = x + row * n;
        T gv[kPacks][W], xhat[kPacks][W];
        RowSums<T> sums{T(0), T(0)};
        MT_UNROLL for (int p = 0; p < kPacks; ++p) {
            /* Slots past the row's end count as g = 0: nothing in any sum. */
            T xv[W];
            if (vec) {
                const int64_t c = p * B + t;
                Pack<T> gp{}, xp{};
                if (c * W < n) {
                    gp = reinterpret_cast<const Pack<T> *>(g_row)[c];
                    xp = reinterpret_cast<const Pack<T> *>(x_row)[c];
                }
                MT_UNROLL for (int e = 0; e < W; ++e) {
                    gv[p][e] = gp.v[e];
                    xv[e] = xp.v[e];
                }
            } else {
                MT_UNROLL for (int e = 0; e < W; ++e) {
                    const int64_t k = slot_element(false, p, e, B, t, W);
                    gv[p][e] = k < n ? g_row[k] : T(0);
                    xv[e] = k < n ? x_row[k] : T(0);
                }
            }
            MT_UNROLL for (int e = 0; e < W; ++e) {
                const int64_t k = slot_element(vec, p, e, B, t, W);
                xhat[p][e] = k < n ? (xv[e] - m) * r : T(0);
                /* The weight is read again each row (from L1, n elements
                 * shared by the block) rather than kept: registers here
                 * are what decide how many blocks an SM holds. */
                const T gw = w && k < n ? gv[p][e] * w[k] : gv[p][e];
                sums.gw += gw;
                sums.gw_xhat += gw * xhat[p][e];
                acc_w[p][e] += gv[p][e] * xhat[p][e];
                acc_b[p][e] += gv[p][e];
            }
        }
        sums = block_reduce_warps(scratch, sums, RowSums<T>{T(0), T(0)}, CombineRowSums<T>());
        const T mean_gw = sums.gw / T(n);
        const T mean_gw_xhat = sums.gw_xhat / T(n);
        if (!dx)
            continue;
        T *dx_row = dx + row * n;
        MT_UNROLL for (int p = 0; p < kPacks; ++p) {
            T out[W];
            MT_UNROLL for (int e = 0; e < W; ++e) {
                const int64_t k = slot_element(vec, p, e, B, t, W);
                const T gw = w && k < n ? gv[p][e] * w[k] : gv[p][e];
                out[e] = r * (gw - mean_gw - xhat[p][e] * mean_gw_xhat);
            }
            if (vec) {
                const int64_t c = p * B + t;
                if (c * W < n) {
                    Pack<T> pack;
                    MT_UNROLL for (int e = 0; e < W; ++e)
                        pack.v[e] = out[e];
                    reinterpret_cast<Pack<T> *>(dx_row)[c] = pack;
                }
            } else {
                MT_UNROLL for (int e = 0; e < W; ++e) {
                    const int64_t k = slot_element(false, p, e, B, t, W);
                    if (k < n)
                        dx_row[k] = out[e];
                }
            }
        }
    }
    if (!want_w && !want_b)
        return; /* (after the last barrier: no thread waits for this one) */
    T *partial_w = partials + (int64_t)blockIdx.x * n;
    T *partial_b = partials + ((int64_t)gridDim.x + blockIdx.x) * n;
    MT_UNROLL for (int p = 0; p < kPacks; ++p)
        MT_UNROLL for (int e = 0; e < W; ++e) {
            const int64_t k = slot_element(vec, p, e, B, t, W);
            if (k < n) {
                if (want_w)
                    partial_w[k] = acc_w[p][e];
                if (want_b)
                    partial_b[k] = acc_b[p][e];
            }
        }
}

/* dw[col] = sum over c < chunks of partials[c][col], db[col] the same over
 * partials[chunks + c][col] (either may be null: not wanted). Block bx takes
 * columns bx * 32 .. + 31; its 8 row groups (threadIdx.y) take every 8th
 * chunk, and row group 0 adds their 8 sums. */
template <typename T>
__global__ void layer_norm_column_sums(T *dw, T *db, const T *partials, int64_t n, int64_t chunks)
{
    __shared__ T sum_w[kRowTile][kColTile];
    __shared__ T sum_b[kRowTile][kColTile];
    const int64_t col = (int64_t)blockIdx.x * kColTile + threadIdx.x;
    T acc_w = T(0), acc_b = T(0);
    if (col < n)
        for (int64_t c = threadIdx.y; c < chunks; c += kRowTile) {
            if (dw)
                acc_w += partials[c * n + col];
            if (db)
                acc_b += partials[(chunks + c) * n + col];
        }
    sum_w[threadIdx.y][threadIdx.x] = acc_w;
    sum_b[threadIdx.y][threadIdx.x] = acc_b;
    /* Row group 0 adds the 8 sums of its column: all written first. */
    __syncthreads();
    if (threadIdx.y == 0 && col < n) {
        T total_w = T(0), total_b = T(0);
        MT_UNROLL for (int i = 0; i < kRowTile; ++i) {
            total_w += sum_w[i][threadIdx.x];
            total_b += sum_b[i][threadIdx.x];
        }
        if (dw)
            dw[col] = total_w;
        if (db)
            db[col] = total_b;
    }
}

/* The fused backward's longest row: 4 Packs per thread of 512. */
constexpr int kMaxFusedPacks = 4;

template <typename T>
static mt_status launch_column_sums(const mt_tensor &dw, const mt_tensor &db, const T *partials, int64_t n,
                                    int64_t chunks)
{
    const unsigned int grid = (unsigned int)((n + kColTile - 1) / kColTile);
    layer_norm_column_sums<T><<<grid, dim3(kColTile, kRowTile), 0, mt_stream()>>>(first_of<T>(dw), first_of<T>(db),
                                                                                 partials, n, chunks);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

template <typename T>
static mt_status launch_backward_fused(const mt_tensor &dx, const mt_tensor &dw, const mt_tensor &db,
                                       const mt_tensor &g, const mt_tensor &x, const mt_tensor &mean,
                                       const mt_tensor &rstd, const mt_tensor &w, int64_t n, int64_t rows)
{
    constexpr int64_t W = Pack<T>::kWidth;
    const T *gp = first_of<T>(g), *xp = first_of<T>(x), *mp = first_of<T>(mean), *rp = first_of<T>(rstd);
    const T *wp = first_of<T>(w);
    T *dxp = first_of<T>(dx);
    const bool vec = n % W == 0 && aligned16(gp) && aligned16(xp) && (!dxp || aligned16(dxp));
    /* Threads so that about 2 Packs (8 floats) each cover the row, then as
     * few Packs per thread as cover it; blocks enough to fill the GPU once
     * (fused_blocks_per_sm of 512 threads per SM), each visiting rows / grid
     * rows, since every block writes a row of partials. */
    int64_t block = 32;
    while (block < kMaxRegisterThreads && block * W * 2 < n)
        block *= 2;
    int64_t packs = 1;
    while (packs * W * block < n)
        packs *= 2;
    int64_t blocks = fused_blocks_per_sm((int)packs) * (int64_t)mt_sm_count() * (kMaxRegisterThreads / block);
    blocks = blocks < rows ? blocks : rows;
    const unsigned int grid = (unsigned int)(blocks > 0 ? blocks : 1);
    const bool want_w = dw.data != nullptr, want_b = db.data != nullptr;
    DeviceScratch partials;
    if (want_w || want_b)
        CUDA_CHECK(partials.allocate((size_t)(2 * grid * n) * sizeof(T)));
    T *pp = partials.as<T>();
    const unsigned int threads = (unsigned int)block;
    switch (packs) {
    case 1:
        layer_norm_backward_fused<T, 1><<<grid, threads, 0, mt_stream()>>>(dxp, pp, want_w, want_b, gp, xp, mp, rp, wp,
                                                                          n, rows, vec);
        break;
    case 2:
        layer_norm_backward_fused<T, 2><<<grid, threads, 0, mt_stream()>>>(dxp, pp, want_w, want_b, gp, xp, mp, rp, wp,
                                                                          n, rows, vec);
        break;
    default:
        layer_norm_backward_fused<T, kMaxFusedPacks><<<grid, threads, 0, mt_stream()>>>(
            dxp, pp, want_w, want_b, gp, xp, mp, rp, wp, n, rows, vec);
        break;
    }
    CUDA_CHECK(mt_launch_status());
    if (want_w || want_b) {
        MT_TRY(launch_column_sums<T>(dw, db, pp, n, (int64_t)grid));
        CUDA_CHECK(partials.release());
    }
    return MT_OK;
}

template <typename T>
static mt_status launch_backward(const mt_tensor &dx, const mt_tensor &dw, const mt_tensor &db, const mt_tensor &g,
                          const mt_tensor &x, const mt_tensor &mean, const mt_tensor &rstd, const mt_tensor &w,
                          int64_t n, int64_t rows)
{
    if (n <= kMaxFusedPacks * Pack<T>::kWidth * kMaxRegisterThreads)
        return launch_backward_fused<T>(dx, dw, db, g, x, mean, rstd, w, n, rows);
    if (dx.data) {
        layer_norm_backward_rows<T><<<grid_size(rows, 1), row_block_size(n), 0, mt_stream()>>>(
            first_of<T>(dx), first_of<T>(g), first_of<T>(x), first_of<T>(mean), first_of<T>(rstd),
            first_of<T>(w), n, rows);
        CUDA_CHECK(mt_launch_status());
    }
    if (!dw.data && !db.data)
        return MT_OK;
    /* Enough chunks of rows that the partials' grid fills the GPU about four
     * times over, each chunk at least a tile of rows. */
    const int64_t col_blocks = (n + kColTile - 1) / kColTile;
    int64_t chunks = (4 * (int64_t)mt_sm_count() + col_blocks - 1) / col_blocks;
    const int64_t max_chunks = (rows + kRowTile - 1) / kRowTile;
    chunks = chunks < max_chunks ? chunks : max_chunks;
    chunks = chunks < 65535 ? (chunks > 0 ? chunks : 1) : 65535;
    const int64_t per_chunk = (rows + chunks - 1) / chunks;
    const int64_t partial_rows = chunks * kRowTile;
    DeviceScratch partials;
    CUDA_CHECK(partials.allocate((size_t)(2 * partial_rows * n) * sizeof(T)));
    T *partial_w = dw.data ? partials.as<T>() : nullptr;
    T *partial_b = db.data ? partials.as<T>() + partial_rows * n : nullptr; /* where the column sums read them */
    const dim3 grid((unsigned int)col_blocks, (unsigned int)chunks);
    layer_norm_param_partials<T><<<grid, dim3(kColTile, kRowTile), 0, mt_stream()>>>(
        partial_w, partial_b, first_of<T>(g), first_of<T>(x), first_of<T>(mean), first_of<T>(rstd), n, rows,
        per_chunk);
    CUDA_CHECK(mt_launch_status());
    MT_TRY(launch_column_sums<T>(dw, db, partials.as<T>(), n, partial_rows));
    CUDA_CHECK(partials.release());
    return MT_OK;
}

template <typename T>
static mt_status zero_param_grads(const mt_tensor &dw, const mt_tensor &db, int64_t n)
{
    if (dw.data)
        CUDA_CHECK(cudaMemsetAsync(first_of<T>(dw), 0, (size_t)n * sizeof(T), mt_stream()));
    if (db.data)
        CUDA_CHECK(cudaMemsetAsync(first_of<T>(db), 0, (size_t)n * sizeof(T), mt_stream()));
    return MT_OK;
}

mt_status mt_layer_norm_backward(mt_tensor grad_in, mt_tensor grad_weight, mt_tensor grad_bias, mt_tensor grad_out,
                                 mt_tensor in, mt_tensor mean, mt_tensor rstd, mt_tensor weight, int want, int affine)
{
    const char *func = "mt_layer_norm_backward";
    MT_TRY(check_in(func, in));
    const int known = MT_LAYER_NORM_GRAD_IN | MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS;
    if (want & ~known || affine & ~(MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "want (%d) or affine (%d) has unknown bits", want, affine);
    if (want & ~affine & (MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "a gradient of weight or bias is wanted (want %d) but the "
                       "forward had none (affine %d)", want, affine);
    const int64_t rows = in.shape[0], n = in.shape[1];
    const int dt = in.dtype;
    MT_TRY(check_layout(func, "in", &in, dt, rows, n, false));
    MT_TRY(check_layout(func, "grad_out", &grad_out, dt, rows, n, false));
    MT_TRY(check_layout(func, "mean", &mean, dt, rows, -1, false));
    MT_TRY(check_layout(func, "rstd", &rstd, dt, rows, -1, false));
    if (affine & MT_LAYER_NORM_WEIGHT)
        MT_TRY(check_layout(func, "weight", &weight, dt, n, -1, false));
    mt_tensor none = {};
    if (want & MT_LAYER_NORM_GRAD_IN) {
        MT_TRY(check_layout(func, "grad_in", &grad_in, dt, rows, n, true));
    } else {
        grad_in = none;
    }
    if (want & MT_LAYER_NORM_WEIGHT)
        MT_TRY(check_layout(func, "grad_weight", &grad_weight, dt, n, -1, true));
    else
        grad_weight = none;
    if (want & MT_LAYER_NORM_BIAS)
        MT_TRY(check_layout(func, "grad_bias", &grad_bias, dt, n, -1, true));
    else
        grad_bias = none;
    if (!(affine & MT_LAYER_NORM_WEIGHT))
        weight = none;
    /* Each output may be exactly an input of its shape (mt_check_alias) or
     * share no memory with it; the outputs share none with each other. A
     * grad_in that is grad_out or in is refused too when a parameter's
     * gradient is wanted: that pass reads them after grad_in is written. */
    const mt_tensor *inputs[] = {&grad_out, &in, &mean, &rstd, &weight};
    const char *input_names[] = {"grad_out", "in", "mean", "rstd", "weight"};
    const mt_tensor *outputs[] = {&grad_in, &grad_weight, &grad_bias};
    const char *output_names[] = {"grad_in", "grad_weight", "grad_bias"};
    for (int o = 0; o < 3; ++o) {
        if (!outputs[o]->data)
            continue;
        for (int i = 0; i < 5; ++i) {
            if (!inputs[i]->data)
                continue;
            MT_TRY(mt_check_alias(func, outputs[o], inputs[i], input_names[i]));
            if (o == 0 && i < 2 && (grad_weight.data || grad_bias.data) && tensors_overlap(grad_in, *inputs[i]))
                return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "grad_in shares memory with %s, which the gradients "
                               "of weight and bias read after grad_in is written; give grad_in its own buffer",
                               input_names[i]);
        }
        for (int p = 0; p < o; ++p)
            if (outputs[p]->data && tensors_overlap(*outputs[o], *outputs[p]))
                return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s overlaps %s; each output needs its own memory",
                               output_names[o], output_names[p]);
    }
    if (n == 0)
        return MT_OK;
    if (rows == 0) {
        /* No row: the parameters' gradients are sums of nothing. */
        if (dt == MT_FLOAT32)
            return zero_param_grads<float>(grad_weight, grad_bias, n);
        return zero_param_grads<double>(grad_weight, grad_bias, n);
    }
    if (dt == MT_FLOAT32)
        return launch_backward<float>(grad_in, grad_weight, grad_bias, grad_out, in, mean, rstd, weight, n, rows);
    return launch_backward<double>(grad_in, grad_weight, grad_bias, grad_out, in, mean, rstd, weight, n, rows);
}
