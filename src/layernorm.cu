/*
 * layernorm.cu: layer normalization over the last dim of contiguous rows,
 * the forward pass, each row's statistics computed by one block (the
 * backward is src/layernorm_backward.cu).
 *
 *   forward   mean = sum_k x_k / N,  var = sum_k (x_k - mean)^2 / N (biased, as torch)
 *             rstd = 1 / sqrt(var + eps)
 *             xhat_k = (x_k - mean) * rstd,  y_k = xhat_k * w_k + b_k
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
 *                  global memory (sum, squared deviations, write).
 */
#include "layernorm.h"

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

/* The register kernel's largest row, as softmax's: 16 Packs, 512 threads. */
constexpr int kMaxRegisterPacks = 16;

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

mt_status check_layout(const char *func, const char *name, const mt_tensor *t, int dtype, int64_t d0, int64_t d1,
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


mt_status check_in(const char *func, const mt_tensor &in)
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
