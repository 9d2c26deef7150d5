/*
 * layernorm.cu: layer normalization over the last dim of contiguous rows,
 * forward and backward, each row's statistics computed by one block.
 *
 *   forward   mean = sum_k x_k / N,  var = sum_k (x_k - mean)^2 / N (biased, as torch)
 *             rstd = 1 / sqrt(var + eps)
 *             xhat_k = (x_k - mean) * rstd,  y_k = xhat_k * w_k + b_k
 *   backward  with g = dL/dy and gw_k = g_k * w_k:
 *             dx_k = rstd * (gw_k - mean_j(gw_j) - xhat_k * mean_j(gw_j * xhat_j))
 *             dw_k = sum over rows of g_k * xhat_k,  db_k = sum over rows of g_k
 *
 * The composite (x - x.mean()) / sqrt(var + eps) * w + b is eight ops, each a
 * pass over the whole tensor; here the forward reads x once and writes y
 * once, the least it can move, and saves mean and rstd (one number per row)
 * so that the backward need not recompute them.
 *
 * Kernels:
 *   layer_norm_rows_registers  rows of up to 16 * 512 Packs: the block keeps
 *                  its row in registers, so the variance is a second pass
 *                  over registers, not over memory (two passes, not
 *                  Welford's one: exact, and as cheap in registers);
 *   layer_norm_rows            any length: three passes over the row in
 *                  global memory (sum, squared deviations, write);
 *   layer_norm_backward_rows   dx, one block per row, two passes;
 *   layer_norm_param_partials  dw and db: a grid of 32-column by 8-row
 *                  tiles, each block summing a chunk of rows into partials;
 *   layer_norm_column_sums                the partials of every chunk added up.
 */
#include "ops_common.h"
#include "block_reduce.h" /* after ops_common.h: its stub uses task.h */
#include "combine.h"

#include <stdio.h>



/* Row r of `rows` rows of length n. mean and rstd may be null (nothing
 * saved); w and b may be null (no affine part). */
template <typename T>
struct LayerNormArgs {
    T *y;
    const T *x;
    T *mean;
    T *rstd;
    const T *w;
    const T *b;
    int64_t n;
    int64_t rows;
    T eps;
};

template <typename T>
static MT_DEVICE T affine(const LayerNormArgs<T> &a, T xhat, int64_t k)
{
    T v = xhat;
    if (a.w)
        v *= a.w[k];
    if (a.b)
        v += a.b[k];
    return v;
}

/* Element k of the row that slot (p, w) of thread t holds: with 16-byte Packs
 * (vec) Pack c = p * B + t covers elements c * W .. c * W + W - 1; without,
 * neighbouring threads hold neighbouring elements. As in softmax.cu. */
static MT_DEVICE int64_t slot_element(bool vec, int p, int w, int64_t B, int64_t t, int W)
{
    return vec ? (p * B + t) * W + w : (p * W + w) * B + t;
}

template <typename T, int kPacks>
__global__ void __launch_bounds__(512) layer_norm_rows_registers(LayerNormArgs<T> a, bool vec)
{
    __shared__ BlockScratch<T> scratch;
    constexpr int W = Pack<T>::kWidth;
    const int64_t B = blockDim.x;
    const int64_t t = threadIdx.x;
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        const T *x = a.x + row * a.n;
        T *y = a.y + row * a.n;
        T v[kPacks][W];
        T local = T(0);
        MT_UNROLL for (int p = 0; p < kPacks; ++p) {
            if (vec) {
                const int64_t c = p * B + t;
                /* Slots past the row's end hold 0, which adds nothing to the sum. */
                Pack<T> pack{};
                if (c * W < a.n)
                    pack = reinterpret_cast<const Pack<T> *>(x)[c];
                MT_UNROLL for (int w = 0; w < W; ++w)
                    v[p][w] = pack.v[w];
            } else {
                MT_UNROLL for (int w = 0; w < W; ++w) {
                    const int64_t k = slot_element(false, p, w, B, t, W);
                    v[p][w] = k < a.n ? x[k] : T(0);
                }
            }
            MT_UNROLL for (int w = 0; w < W; ++w)
                local += v[p][w];
        }
        const T mean = block_reduce_warps(scratch, local, T(0), CombineSum<T>()) / T(a.n);

        /* The second pass is over registers; a slot past the end would add
         * mean^2, so it is skipped. */
        local = T(0);
        MT_UNROLL for (int p = 0; p < kPacks; ++p)
            MT_UNROLL for (int w = 0; w < W; ++w) {
                const T d = v[p][w] - mean;
                if (slot_element(vec, p, w, B, t, W) < a.n)
                    local += d * d;
            }
        const T var = block_reduce_warps(scratch, local, T(0), CombineSum<T>()) / T(a.n);
        const T rstd = T(1) / mt_sqrt(var + a.eps);
        if (t == 0 && a.mean) {
            a.mean[row] = mean;
            a.rstd[row] = rstd;
        }

        MT_UNROLL for (int p = 0; p < kPacks; ++p) {
            if (vec) {
                const int64_t c = p * B + t;
                if (c * W < a.n) {
                    Pack<T> pack;
                    MT_UNROLL for (int w = 0; w < W; ++w)
                        pack.v[w] = affine(a, (v[p][w] - mean) * rstd, c * W + w);
                    reinterpret_cast<Pack<T> *>(y)[c] = pack;
                }
            } else {
                MT_UNROLL for (int w = 0; w < W; ++w) {
                    const int64_t k = slot_element(false, p, w, B, t, W);
                    if (k < a.n)
                        y[k] = affine(a, (v[p][w] - mean) * rstd, k);
                }
            }
        }
    }
}

template <typename T>
__global__ void layer_norm_rows(LayerNormArgs<T> a)
{
    __shared__ BlockScratch<T> scratch;
    /* `row` is the same for every thread of the block, so all of them reach
     * every block_reduce_warps (it has barriers) equally often. */
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        const T *x = a.x + row * a.n;
        T *y = a.y + row * a.n;
        T local = T(0);
        for (int64_t k = threadIdx.x; k < a.n; k += blockDim.x)
            local += x[k];
        const T mean = block_reduce_warps(scratch, local, T(0), CombineSum<T>()) / T(a.n);
        local = T(0);
        for (int64_t k = threadIdx.x; k < a.n; k += blockDim.x) {
            const T d = x[k] - mean;
            local += d * d;
        }
        const T var = block_reduce_warps(scratch, local, T(0), CombineSum<T>()) / T(a.n);
        const T rstd = T(1) / mt_sqrt(var + a.eps);
        if (threadIdx.x == 0 && a.mean) {
            a.mean[row] = mean;
            a.rstd[row] = rstd;
        }
        for (int64_t k = threadIdx.x; k < a.n; k += blockDim.x)
            y[k] = affine(a, (x[k] - mean) * rstd, k);
    }
}

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

/* The whole backward in one pass over g and x, for rows of up to
 * kCols * blockDim.x: thread t owns the columns t, t + B, ..., the same ones in
 * every row its block visits (rows blockIdx.x, + gridDim.x, ...), so it keeps
 * its row slice in registers for dx AND adds g * xhat and g of its columns
 * into registers across those rows. Each block then writes one row of
 * partial sums of the weight's and bias's gradients (partial_w/partial_b
 * [blockIdx.x][n], either may be null), which layer_norm_column_sums adds up:
 * a few hundred rows of partials instead of a second pass over g and x. */
template <typename T, int kCols>
__global__ void __launch_bounds__(512) layer_norm_backward_fused(T *dx, T *partial_w, T *partial_b, const T *g,
                                                                 const T *x, const T *mean, const T *rstd,
                                                                 const T *w, int64_t n, int64_t rows)
{
    __shared__ BlockScratch<T> scratch;
    const int64_t B = blockDim.x;
    const int64_t t = threadIdx.x;
    T wv[kCols], acc_w[kCols], acc_b[kCols];
    MT_UNROLL for (int j = 0; j < kCols; ++j) {
        const int64_t k = t + j * B;
        wv[j] = w && k < n ? w[k] : T(1);
        acc_w[j] = acc_b[j] = T(0);
    }
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T m = mean[row];
        const T r = rstd[row];
        T gw[kCols], xhat[kCols];
        T sum_gw = T(0), sum_gw_xhat = T(0);
        MT_UNROLL for (int j = 0; j < kCols; ++j) {
            const int64_t k = t + j * B;
            /* Columns past the row's end count as g = 0: nothing in any sum. */
            const T gv = k < n ? g[row * n + k] : T(0);
            xhat[j] = k < n ? (x[row * n + k] - m) * r : T(0);
            gw[j] = gv * wv[j];
            sum_gw += gw[j];
            sum_gw_xhat += gw[j] * xhat[j];
            acc_w[j] += gv * xhat[j];
            acc_b[j] += gv;
        }
        const T mean_gw = block_reduce_warps(scratch, sum_gw, T(0), CombineSum<T>()) / T(n);
        const T mean_gw_xhat = block_reduce_warps(scratch, sum_gw_xhat, T(0), CombineSum<T>()) / T(n);
        if (dx)
            MT_UNROLL for (int j = 0; j < kCols; ++j) {
                const int64_t k = t + j * B;
                if (k < n)
                    dx[row * n + k] = r * (gw[j] - mean_gw - xhat[j] * mean_gw_xhat);
            }
    }
    MT_UNROLL for (int j = 0; j < kCols; ++j) {
        const int64_t k = t + j * B;
        if (k < n) {
            if (partial_w)
                partial_w[blockIdx.x * n + k] = acc_w[j];
            if (partial_b)
                partial_b[blockIdx.x * n + k] = acc_b[j];
        }
    }
}

constexpr int kColTile = 32; /* columns per block: a warp reads 32 neighbours */
constexpr int kRowTile = 8;  /* rows a block reads at once */

/* Block (bx, by) sums the rows of chunk by (rows by * per_chunk ..) of columns
 * bx * 32 .. + 31 into partial_w[by][col] (g * xhat) and partial_b[by][col] (g).
 * Either partial may be null (that gradient is not wanted). */
template <typename T>
__global__ void layer_norm_param_partials(T *partial_w, T *partial_b, const T *g, const T *x, const T *mean,
                                          const T *rstd, int64_t n, int64_t rows, int64_t per_chunk)
{
    __shared__ T sum_w[kRowTile][kColTile];
    __shared__ T sum_b[kRowTile][kColTile];
    const int64_t col = (int64_t)blockIdx.x * kColTile + threadIdx.x;
    const int64_t begin = (int64_t)blockIdx.y * per_chunk;
    const int64_t end = begin + per_chunk < rows ? begin + per_chunk : rows;
    T acc_w = T(0), acc_b = T(0);
    if (col < n)
        for (int64_t row = begin + threadIdx.y; row < end; row += kRowTile) {
            const T gv = g[row * n + col];
            acc_w += gv * (x[row * n + col] - mean[row]) * rstd[row];
            acc_b += gv;
        }
    sum_w[threadIdx.y][threadIdx.x] = acc_w;
    sum_b[threadIdx.y][threadIdx.x] = acc_b;
    /* Row 0 of the block adds the 8 partial sums of its column: all written first. */
    __syncthreads();
    if (threadIdx.y == 0 && col < n) {
        T w = T(0), b = T(0);
        MT_UNROLL for (int i = 0; i < kRowTile; ++i) {
            w += sum_w[i][threadIdx.x];
            b += sum_b[i][threadIdx.x];
        }
        if (partial_w)
            partial_w[blockIdx.y * n + col] = w;
        if (partial_b)
            partial_b[blockIdx.y * n + col] = b;
    }
}

/* out[col] = sum over c < chunks of partial[c][col], one thread per column. */
template <typename T>
__global__ void layer_norm_column_sums(T *out, const T *partial, int64_t n, int64_t chunks)
{
    for (int64_t col = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; col < n;
         col += (int64_t)gridDim.x * blockDim.x) {
        T s = T(0);
        for (int64_t c = 0; c < chunks; ++c)
            s += partial[c * n + col];
        out[col] = s;
    }
}

/* The register kernel's largest row, as softmax's: 16 Packs, 512 threads. */
constexpr int kMaxRegisterPacks = 16;
constexpr int kMaxRegisterThreads = 512;

template <typename T>
static T *first_of(const mt_tensor &t)
{
    return t.data ? static_cast<T *>(t.data) + t.offset : nullptr;
}

template <typename T>
static mt_status launch_forward(const LayerNormArgs<T> &a)
{
    constexpr int64_t W = Pack<T>::kWidth;
    const unsigned int grid = grid_size(a.rows, 1);
    if (a.n > kMaxRegisterPacks * kMaxRegisterThreads * W) {
        layer_norm_rows<T><<<grid, row_block_size(a.n), 0, mt_stream()>>>(a);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    }
    const bool vec = a.n % W == 0 && aligned16(a.x) && aligned16(a.y);
    /* Threads so that 4 Packs each cover the row, then as few Packs as cover it.
     * (Softmax's kernel takes 8 per thread; this one also keeps the weight and
     * bias pointers and the statistics live, and at 8 Packs of floats ptxas
     * spills registers to local memory.) */
    int64_t block = 32;
    while (block < kMaxRegisterThreads && block * W * 4 < a.n)
        block *= 2;
    int64_t packs = 1;
    while (packs * W * block < a.n)
        packs *= 2;
    const unsigned int threads = (unsigned int)block;
    switch (packs) {
    case 1: layer_norm_rows_registers<T, 1><<<grid, threads, 0, mt_stream()>>>(a, vec); break;
    case 2: layer_norm_rows_registers<T, 2><<<grid, threads, 0, mt_stream()>>>(a, vec); break;
    case 4: layer_norm_rows_registers<T, 4><<<grid, threads, 0, mt_stream()>>>(a, vec); break;
    case 8: layer_norm_rows_registers<T, 8><<<grid, threads, 0, mt_stream()>>>(a, vec); break;
    default: layer_norm_rows_registers<T, kMaxRegisterPacks><<<grid, threads, 0, mt_stream()>>>(a, vec); break;
    }
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* The fused backward's longest row: 16 columns per thread of 512. */
constexpr int kMaxFusedCols = 16;

template <typename T, int kCols>
static void launch_fused_cols(unsigned int grid, unsigned int block, T *dx, T *pw, T *pb, const T *g, const T *x,
                              const T *mean, const T *rstd, const T *w, int64_t n, int64_t rows)
{
    layer_norm_backward_fused<T, kCols><<<grid, block, 0, mt_stream()>>>(dx, pw, pb, g, x, mean, rstd, w, n, rows);
}

template <typename T>
static mt_status launch_backward_fused(const mt_tensor &dx, const mt_tensor &dw, const mt_tensor &db,
                                       const mt_tensor &g, const mt_tensor &x, const mt_tensor &mean,
                                       const mt_tensor &rstd, const mt_tensor &w, int64_t n, int64_t rows)
{
    /* Threads so that about 8 columns each cover the row, then as few columns
     * per thread as cover it; blocks enough to fill the GPU about once (two
     * blocks of 512 threads per SM at 64 registers each), each visiting
     * rows / grid rows, since every block writes a row of partials. */
    int64_t block = 32;
    while (block < kMaxRegisterThreads && block * 8 < n)
        block *= 2;
    int64_t cols = 1;
    while (cols * block < n)
        cols *= 2;
    int64_t blocks = 2 * (int64_t)mt_sm_count() * (512 / block);
    blocks = blocks < rows ? blocks : rows;
    const unsigned int grid = (unsigned int)(blocks > 0 ? blocks : 1);
    DeviceScratch partials;
    const bool params = dw.data || db.data;
    if (params)
        CUDA_CHECK(partials.allocate((size_t)(2 * grid * n) * sizeof(T)));
    T *pw = dw.data ? partials.as<T>() : nullptr;
    T *pb = db.data ? partials.as<T>() + (int64_t)grid * n : nullptr;
    T *dxp = first_of<T>(dx);
    const T *gp = first_of<T>(g), *xp = first_of<T>(x), *mp = first_of<T>(mean), *rp = first_of<T>(rstd);
    const T *wp = first_of<T>(w);
    const unsigned int threads = (unsigned int)block;
    switch (cols) {
    case 1: launch_fused_cols<T, 1>(grid, threads, dxp, pw, pb, gp, xp, mp, rp, wp, n, rows); break;
    case 2: launch_fused_cols<T, 2>(grid, threads, dxp, pw, pb, gp, xp, mp, rp, wp, n, rows); break;
    case 4: launch_fused_cols<T, 4>(grid, threads, dxp, pw, pb, gp, xp, mp, rp, wp, n, rows); break;
    case 8: launch_fused_cols<T, 8>(grid, threads, dxp, pw, pb, gp, xp, mp, rp, wp, n, rows); break;
    default: /* 16 floats; doubles never get here (the caller's max_fused) */
        launch_fused_cols<T, sizeof(T) == 8 ? 8 : kMaxFusedCols>(grid, threads, dxp, pw, pb, gp, xp, mp, rp, wp, n,
                                                                 rows);
        break;
    }
    CUDA_CHECK(mt_launch_status());
    const unsigned int sum_grid = grid_size(n, kBlockSize);
    if (pw) {
        layer_norm_column_sums<T><<<sum_grid, kBlockSize, 0, mt_stream()>>>(first_of<T>(dw), pw, n, (int64_t)grid);
        CUDA_CHECK(mt_launch_status());
    }
    if (pb) {
        layer_norm_column_sums<T><<<sum_grid, kBlockSize, 0, mt_stream()>>>(first_of<T>(db), pb, n, (int64_t)grid);
        CUDA_CHECK(mt_launch_status());
    }
    if (params)
        CUDA_CHECK(partials.release());
    return MT_OK;
}

template <typename T>
static mt_status launch_backward(const mt_tensor &dx, const mt_tensor &dw, const mt_tensor &db, const mt_tensor &g,
                          const mt_tensor &x, const mt_tensor &mean, const mt_tensor &rstd, const mt_tensor &w,
                          int64_t n, int64_t rows)
{
    /* (16 doubles per thread would spill registers: 8 at most.) */
    const int64_t max_fused = (sizeof(T) == 8 ? kMaxFusedCols / 2 : kMaxFusedCols) * kMaxRegisterThreads;
    if (n <= max_fused)
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
    DeviceScratch partials;
    CUDA_CHECK(partials.allocate((size_t)(2 * chunks * n) * sizeof(T)));
    T *partial_w = dw.data ? partials.as<T>() : nullptr;
    T *partial_b = db.data ? partials.as<T>() + chunks * n : nullptr;
    const dim3 grid((unsigned int)col_blocks, (unsigned int)chunks);
    layer_norm_param_partials<T><<<grid, dim3(kColTile, kRowTile), 0, mt_stream()>>>(
        partial_w, partial_b, first_of<T>(g), first_of<T>(x), first_of<T>(mean), first_of<T>(rstd), n, rows,
        per_chunk);
    CUDA_CHECK(mt_launch_status());
    const unsigned int sum_grid = grid_size(n, kBlockSize);
    if (partial_w) {
        layer_norm_column_sums<T><<<sum_grid, kBlockSize, 0, mt_stream()>>>(first_of<T>(dw), partial_w, n, chunks);
        CUDA_CHECK(mt_launch_status());
    }
    if (partial_b) {
        layer_norm_column_sums<T><<<sum_grid, kBlockSize, 0, mt_stream()>>>(first_of<T>(db), partial_b, n, chunks);
        CUDA_CHECK(mt_launch_status());
    }
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

/* t is a contiguous tensor of `dtype` and shape (d0, d1), or (d0,) when
 * d1 < 0: the layouts every argument here has (the ops layer makes them). */
static mt_status check_layout(const char *func, const char *name, const mt_tensor *t, int dtype, int64_t d0, int64_t d1,
                       bool output)
{
    MT_TRY(output ? mt_check_output(func, name, t) : mt_check_tensor(func, name, t));
    MT_TRY(mt_check_extent(func, name, t));
    if (t->dtype != dtype)
        return mt_fail(MT_ERR_DTYPE, func, "%s is %s but in is %s", name, dtype_name(t->dtype), dtype_name(dtype));
    const bool shape_ok = d1 < 0 ? t->ndim == 1 && t->shape[0] == d0
                                 : t->ndim == 2 && t->shape[0] == d0 && t->shape[1] == d1;
    /* An empty tensor is never read or written, whatever its strides. */
    if (!shape_ok || (tensor_numel(*t) > 0 && !is_contiguous(*t))) {
        char shape[96], want[64];
        mt_shape_str(t, shape, sizeof shape);
        if (d1 < 0)
            snprintf(want, sizeof want, "(%lld)", (long long)d0);
        else
            snprintf(want, sizeof want, "(%lld, %lld)", (long long)d0, (long long)d1);
        return mt_fail(MT_ERR_SHAPE, func, "%s has shape %s%s; expected a contiguous tensor of shape %s", name,
                       shape, shape_ok ? " but is not contiguous" : "", want);
    }
    return MT_OK;
}


/* What both entry points ask of `in` first: its rank and dtype fix every
 * other argument's. */
static mt_status check_in(const char *func, const mt_tensor &in)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_tensor(func, "in", &in));
    if (in.ndim != 2)
        return mt_fail(MT_ERR_SHAPE, func, "in must be 2-D (rows, n), got %d dims", in.ndim);
    return mt_check_float(func, "in", &in);
}

mt_status mt_layer_norm(mt_tensor out, mt_tensor mean, mt_tensor rstd, mt_tensor in, mt_tensor weight,
                        mt_tensor bias, int affine, double eps)
{
    const char *func = "mt_layer_norm";
    MT_TRY(check_in(func, in));
    if (affine & ~(MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "affine must be a combination of MT_LAYER_NORM_WEIGHT "
                       "and MT_LAYER_NORM_BIAS, got %d", affine);
    if (!(eps >= 0.0) || eps == INFINITY)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "eps must be a finite number >= 0, got %g", eps);
    const int64_t rows = in.shape[0], n = in.shape[1];
    MT_TRY(check_layout(func, "in", &in, in.dtype, rows, n, false));
    MT_TRY(check_layout(func, "out", &out, in.dtype, rows, n, true));
    MT_TRY(check_layout(func, "mean", &mean, in.dtype, rows, -1, true));
    MT_TRY(check_layout(func, "rstd", &rstd, in.dtype, rows, -1, true));
    if (affine & MT_LAYER_NORM_WEIGHT)
        MT_TRY(check_layout(func, "weight", &weight, in.dtype, n, -1, false));
    if (affine & MT_LAYER_NORM_BIAS)
        MT_TRY(check_layout(func, "bias", &bias, in.dtype, n, -1, false));
    /* out may be in (an in-place normalisation); the statistics share no byte with either. */
    MT_TRY(mt_check_alias(func, &out, &in, "in"));
    const mt_tensor *stats[] = {&mean, &rstd};
    for (int i = 0; i < 2; ++i) {
        MT_TRY(mt_check_alias(func, stats[i], &in, "in"));
        MT_TRY(mt_check_alias(func, stats[i], &out, "out"));
        if (affine & MT_LAYER_NORM_WEIGHT)
            MT_TRY(mt_check_alias(func, stats[i], &weight, "weight"));
        if (affine & MT_LAYER_NORM_BIAS)
            MT_TRY(mt_check_alias(func, stats[i], &bias, "bias"));
    }
    /* (mt_check_alias lets an output be exactly an input; two outputs may not be one.) */
    if (rows > 0 && mean.data == rstd.data && mean.offset == rstd.offset)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "mean and rstd are the same tensor; each needs its own");
    MT_TRY(mt_check_alias(func, &rstd, &mean, "mean"));
    if (affine & MT_LAYER_NORM_WEIGHT)
        MT_TRY(mt_check_alias(func, &out, &weight, "weight"));
    if (affine & MT_LAYER_NORM_BIAS)
        MT_TRY(mt_check_alias(func, &out, &bias, "bias"));
    if (rows == 0 || n == 0)
        return MT_OK; /* nothing to normalise: no row, or rows of nothing (torch gives NaN stats; none are read) */

    if (in.dtype == MT_FLOAT32) {
        LayerNormArgs<float> a{first_of<float>(out), first_of<float>(in), first_of<float>(mean), first_of<float>(rstd),
                               affine & MT_LAYER_NORM_WEIGHT ? first_of<float>(weight) : nullptr,
                               affine & MT_LAYER_NORM_BIAS ? first_of<float>(bias) : nullptr, n, rows, (float)eps};
        return launch_forward(a);
    }
    LayerNormArgs<double> a{first_of<double>(out), first_of<double>(in), first_of<double>(mean), first_of<double>(rstd),
                            affine & MT_LAYER_NORM_WEIGHT ? first_of<double>(weight) : nullptr,
                            affine & MT_LAYER_NORM_BIAS ? first_of<double>(bias) : nullptr, n, rows, eps};
    return launch_forward(a);
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
