/*
 * batchnorm.cu: batch normalization in training mode, forward and backward,
 * each a column reduction (per channel, over N and S) and then one
 * elementwise pass: the least memory the computation can move.
 *
 *   forward   mean_c = sum x / count,  var_c = sum (x - mean_c)^2 / count (biased)
 *             rstd_c = 1 / sqrt(var_c + eps),  y = (x - mean_c) * rstd_c * w_c + b_c
 *   backward  with g = dL/dy, xhat = (x - mean_c) * rstd_c, k_c = w_c * rstd_c:
 *             db_c = sum g,  dw_c = sum g * xhat,
 *             dx = k_c * (g - db_c / count - xhat * dw_c / count)
 *
 * The input is (N, C, S): channel c's values are N planes of S contiguous
 * values, plane (n, c) at (n * C + c) * S. The composite of elementwise ops
 * and reductions this replaces moved the tensor about ten times forward and
 * as often backward; here the forward reads x twice and writes y once, the
 * backward reads g and x twice and writes dx once.
 *
 * Kernels:
 *   batch_norm_partials     block (c, split) sums the planes n = split,
 *                  split + splits, ... of channel c: the values and their
 *                  squares, each taken from the channel's first value (a
 *                  shift: sum (x - s)^2 / count - (sum (x - s) / count)^2 is
 *                  the variance without the cancellation of E[x^2] - E[x]^2
 *                  when the mean is far from 0). Splitting each channel's
 *                  N planes over several blocks fills the GPU when C is
 *                  small (64 channels are 64 blocks on 132 SMs otherwise).
 *   batch_norm_finish       one thread per channel adds the splits' partial
 *                  sums (in double), writes mean and rstd and moves the
 *                  running statistics.
 *   batch_norm_apply        y = x * scale_c + shift_c, a plane at a time.
 *   batch_norm_backward_partials, batch_norm_backward_finish,
 *   batch_norm_backward_apply: the same three steps for the gradients (the
 *                  sums are of g and g * (x - mean)).
 *
 * A block covers kBlockSize / lanes planes at once, `lanes` threads to a
 * plane (the smallest power of two that covers S, up to kBlockSize): an 8 x 8
 * plane (64 values) would otherwise leave 192 of 256 threads idle. When S is
 * a multiple of 4 floats (2 doubles) and the tensors are 16-byte aligned,
 * every pass loads and stores 16-byte Packs (vec), a lane to a Pack.
 */
#include "batchnorm.h"

#include "layernorm.h" /* check_layout, first_of: the same argument layouts as layer norm's */

/* The threads of a block given to one plane of s values (a power of two). */
static int lanes_for(int64_t s)
{
    int lanes = 1;
    while (lanes < kBlockSize && lanes < s)
        lanes *= 2;
    return lanes;
}

/* ---- forward ---------------------------------------------------------------------------- */

/* partial[(c * splits + split) * 2 + {0, 1}]: the sum of x - shift_c and of
 * (x - shift_c)^2 over the planes (n, c) with n = split mod splits. */
template <typename T>
__global__ void batch_norm_partials(double *partial, const T *x, int64_t n, int64_t channels, int64_t s, int lanes,
                                    bool vec)
{
    __shared__ BlockScratch<T> scratch;
    constexpr int W = Pack<T>::kWidth;
    const int64_t c = blockIdx.x;
    const int64_t split = blockIdx.y, splits = gridDim.y;
    const int lane = threadIdx.x % lanes;
    const int64_t rows = blockDim.x / lanes;
    const T shift = x[c * s]; /* plane (0, c)'s first value */
    T sum = T(0), squares = T(0);
    for (int64_t i = split + splits * (threadIdx.x / lanes); i < n; i += splits * rows) {
        const T *plane = x + (i * channels + c) * s;
        if (vec) { /* 16-byte loads: four floats in flight per instruction, not one */
            for (int64_t k = lane; k < s / W; k += lanes) {
                const Pack<T> v = reinterpret_cast<const Pack<T> *>(plane)[k];
                MT_UNROLL for (int j = 0; j < W; ++j) {
                    const T d = v.v[j] - shift;
                    sum += d;
                    squares += d * d;
                }
            }
        } else {
            for (int64_t k = lane; k < s; k += lanes) {
                const T d = plane[k] - shift;
                sum += d;
                squares += d * d;
            }
        }
    }
    sum = block_reduce_warps(scratch, sum, T(0), CombineSum<T>());
    squares = block_reduce_warps(scratch, squares, T(0), CombineSum<T>());
    if (threadIdx.x == 0) {
        partial[(c * splits + split) * 2] = (double)sum;
        partial[(c * splits + split) * 2 + 1] = (double)squares;
    }
}

template <typename T>
__global__ void batch_norm_finish(T *mean, T *rstd, T *running_mean, T *running_var, const double *partial,
                                  const T *x, int64_t channels, int64_t s, int64_t splits, int64_t count,
                                  double momentum, double eps)
{
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < channels;
         c += (int64_t)gridDim.x * blockDim.x) {
        double sum = 0.0, squares = 0.0;
        for (int64_t k = 0; k < splits; ++k) {
            sum += partial[(c * splits + k) * 2];
            squares += partial[(c * splits + k) * 2 + 1];
        }
        const double shifted_mean = sum / (double)count;
        double var = squares / (double)count - shifted_mean * shifted_mean;
        var = var > 0.0 ? var : 0.0; /* rounding can leave a constant channel a hair below 0 */
        const double m = (double)x[c * s] + shifted_mean;
        mean[c] = (T)m;
        rstd[c] = (T)(1.0 / mt_sqrt(var + eps));
        if (running_mean) {
            running_mean[c] = (T)((1.0 - momentum) * (double)running_mean[c] + momentum * m);
            const double unbiased = var * (double)count / (double)(count - 1);
            running_var[c] = (T)((1.0 - momentum) * (double)running_var[c] + momentum * unbiased);
        }
    }
}

/* y = x * scale_c + shift_c on planes of s values (as Packs when vec: s is a
 * multiple of the Pack width and x, y are 16-byte aligned). */
template <typename T>
__global__ void batch_norm_apply(T *y, const T *x, const T *mean, const T *rstd, const T *w, const T *b,
                                 int64_t planes, int64_t channels, int64_t s, int lanes, bool vec)
{
    constexpr int W = Pack<T>::kWidth;
    const int lane = threadIdx.x % lanes;
    const int64_t rows = blockDim.x / lanes;
    for (int64_t p = blockIdx.x * rows + threadIdx.x / lanes; p < planes; p += (int64_t)gridDim.x * rows) {
        const int64_t c = p % channels;
        const T scale = w ? rstd[c] * w[c] : rstd[c];
        const T shift = (b ? b[c] : T(0)) - mean[c] * scale;
        if (vec) {
            const Pack<T> *xp = reinterpret_cast<const Pack<T> *>(x + p * s);
            Pack<T> *yp = reinterpret_cast<Pack<T> *>(y + p * s);
            for (int64_t k = lane; k < s / W; k += lanes) {
                Pack<T> v = xp[k];
                MT_UNROLL for (int j = 0; j < W; ++j)
                    v.v[j] = v.v[j] * scale + shift;
                yp[k] = v;
            }
        } else {
            for (int64_t k = lane; k < s; k += lanes)
                y[p * s + k] = x[p * s + k] * scale + shift;
        }
    }
}

/* ---- backward --------------------------------------------------------------------------- */

/* partial[(c * splits + split) * 2 + {0, 1}]: the sum of g and of g * (x - mean_c). */
template <typename T>
__global__ void batch_norm_backward_partials(double *partial, const T *g, const T *x, const T *mean, int64_t n,
                                             int64_t channels, int64_t s, int lanes, bool vec)
{
    __shared__ BlockScratch<T> scratch;
    constexpr int W = Pack<T>::kWidth;
    const int64_t c = blockIdx.x;
    const int64_t split = blockIdx.y, splits = gridDim.y;
    const int lane = threadIdx.x % lanes;
    const int64_t rows = blockDim.x / lanes;
    const T m = mean[c];
    T sum_g = T(0), sum_gx = T(0);
    for (int64_t i = split + splits * (threadIdx.x / lanes); i < n; i += splits * rows) {
        const int64_t first = (i * channels + c) * s;
        if (vec) {
            for (int64_t k = lane; k < s / W; k += lanes) {
                const Pack<T> gv = reinterpret_cast<const Pack<T> *>(g + first)[k];
                const Pack<T> xv = reinterpret_cast<const Pack<T> *>(x + first)[k];
                MT_UNROLL for (int j = 0; j < W; ++j) {
                    sum_g += gv.v[j];
                    sum_gx += gv.v[j] * (xv.v[j] - m);
                }
            }
        } else {
            for (int64_t k = lane; k < s; k += lanes) {
                const T gk = g[first + k];
                sum_g += gk;
                sum_gx += gk * (x[first + k] - m);
            }
        }
    }
    sum_g = block_reduce_warps(scratch, sum_g, T(0), CombineSum<T>());
    sum_gx = block_reduce_warps(scratch, sum_gx, T(0), CombineSum<T>());
    if (threadIdx.x == 0) {
        partial[(c * splits + split) * 2] = (double)sum_g;
        partial[(c * splits + split) * 2 + 1] = (double)sum_gx;
    }
}

/* The parameters' gradients (when asked), and for dx = k * g + u * (x - mean) + v
 * the three factors of each channel: coef[3c..3c+2] = k, u, v. */
template <typename T>
__global__ void batch_norm_backward_finish(T *grad_weight, T *grad_bias, T *coef, const double *partial,
                                           const T *rstd, const T *w, int64_t channels, int64_t splits,
                                           int64_t count)
{
    for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < channels;
         c += (int64_t)gridDim.x * blockDim.x) {
        double sum_g = 0.0, sum_gx = 0.0;
        for (int64_t k = 0; k < splits; ++k) {
            sum_g += partial[(c * splits + k) * 2];
            sum_gx += partial[(c * splits + k) * 2 + 1];
        }
        const double r = (double)rstd[c];
        if (grad_weight)
            grad_weight[c] = (T)(sum_gx * r); /* sum g * xhat */
        if (grad_bias)
            grad_bias[c] = (T)sum_g;
        if (coef) {
            const double k = w ? (double)w[c] * r : r;
            coef[3 * c] = (T)k;
            coef[3 * c + 1] = (T)(-k * r * r * sum_gx / (double)count);
            coef[3 * c + 2] = (T)(-k * sum_g / (double)count);
        }
    }
}

template <typename T>
__global__ void batch_norm_backward_apply(T *dx, const T *g, const T *x, const T *mean, const T *coef,
                                          int64_t planes, int64_t channels, int64_t s, int lanes, bool vec)
{
    constexpr int W = Pack<T>::kWidth;
    const int lane = threadIdx.x % lanes;
    const int64_t rows = blockDim.x / lanes;
    for (int64_t p = blockIdx.x * rows + threadIdx.x / lanes; p < planes; p += (int64_t)gridDim.x * rows) {
        const int64_t c = p % channels;
        const T k = coef[3 * c], u = coef[3 * c + 1], v = coef[3 * c + 2], m = mean[c];
        if (vec) {
            for (int64_t q = lane; q < s / W; q += lanes) {
                const Pack<T> gv = reinterpret_cast<const Pack<T> *>(g + p * s)[q];
                const Pack<T> xv = reinterpret_cast<const Pack<T> *>(x + p * s)[q];
                Pack<T> out;
                MT_UNROLL for (int j = 0; j < W; ++j)
                    out.v[j] = k * gv.v[j] + u * (xv.v[j] - m) + v;
                reinterpret_cast<Pack<T> *>(dx + p * s)[q] = out;
            }
        } else {
            for (int64_t j = p * s + lane; j < (p + 1) * s; j += lanes)
                dx[j] = k * g[j] + u * (x[j] - m) + v;
        }
    }
}

/* ---- launches ------------------------------------------------------------------------------ */

/* Splits of each channel's N planes: enough blocks to fill the GPU (four per
 * SM), at most one plane per split. */
static int64_t splits_for(int64_t n, int64_t channels)
{
    const int64_t want = 4 * (int64_t)mt_sm_count();
    int64_t splits = 1;
    while (channels * splits < want && splits * 2 <= n && splits * 2 <= kMaxGridYZ)
        splits *= 2;
    return splits;
}

/* Blocks of the elementwise passes over `planes` planes of `lanes` threads each. */
static unsigned int plane_blocks(int64_t planes, int lanes)
{
    return grid_size(planes, kBlockSize / lanes);
}

template <typename T>
static mt_status launch_forward(const mt_tensor &out, const mt_tensor &mean, const mt_tensor &rstd,
                                const mt_tensor &in, const mt_tensor &weight, const mt_tensor &bias,
                                const mt_tensor &running_mean, const mt_tensor &running_var, int flags,
                                double momentum, double eps)
{
    const int64_t n = in.shape[0], channels = in.shape[1], s = in.shape[2];
    const T *x = first_of<T>(in);
    const int64_t splits = splits_for(n, channels);
    DeviceScratch partial;
    CUDA_CHECK(partial.allocate((size_t)(channels * splits * 2) * sizeof(double)));
    constexpr int64_t W = Pack<T>::kWidth;
    T *y = first_of<T>(out);
    const bool vec = s % W == 0 && aligned16(x) && aligned16(y);
    const int lanes = lanes_for(vec ? s / W : s);
    batch_norm_partials<T><<<dim3((unsigned int)channels, (unsigned int)splits), kBlockSize, 0, mt_stream()>>>(
        partial.as<double>(), x, n, channels, s, lanes, vec);
    CUDA_CHECK(mt_launch_status());
    const bool running = flags & MT_BATCH_NORM_RUNNING;
    batch_norm_finish<T><<<grid_size(channels, kBlockSize), kBlockSize, 0, mt_stream()>>>(
        first_of<T>(mean), first_of<T>(rstd), running ? first_of<T>(running_mean) : nullptr,
        running ? first_of<T>(running_var) : nullptr, partial.as<double>(), x, channels, s, splits, n * s, momentum,
        eps);
    CUDA_CHECK(mt_launch_status());
    batch_norm_apply<T><<<plane_blocks(n * channels, lanes), kBlockSize, 0, mt_stream()>>>(
        y, x, first_of<T>(mean), first_of<T>(rstd), flags & MT_BATCH_NORM_WEIGHT ? first_of<T>(weight) : nullptr,
        flags & MT_BATCH_NORM_BIAS ? first_of<T>(bias) : nullptr, n * channels, channels, s, lanes, vec);
    CUDA_CHECK(mt_launch_status());
    CUDA_CHECK(partial.release());
    return MT_OK;
}

template <typename T>
static mt_status launch_backward(const mt_tensor &grad_in, const mt_tensor &grad_weight, const mt_tensor &grad_bias,
                                 const mt_tensor &grad_out, const mt_tensor &in, const mt_tensor &mean,
                                 const mt_tensor &rstd, const mt_tensor &weight, int want, int flags)
{
    const int64_t n = in.shape[0], channels = in.shape[1], s = in.shape[2];
    const T *g = first_of<T>(grad_out), *x = first_of<T>(in), *m = first_of<T>(mean);
    const int64_t splits = splits_for(n, channels);
    const bool dx = want & MT_BATCH_NORM_GRAD_IN;
    DeviceScratch partial, coef;
    CUDA_CHECK(partial.allocate((size_t)(channels * splits * 2) * sizeof(double)));
    if (dx)
        CUDA_CHECK(coef.allocate((size_t)(channels * 3) * sizeof(T)));
    constexpr int64_t W = Pack<T>::kWidth;
    const bool vec = s % W == 0 && aligned16(g) && aligned16(x) && (!dx || aligned16(first_of<T>(grad_in)));
    const int lanes = lanes_for(vec ? s / W : s);
    batch_norm_backward_partials<T><<<dim3((unsigned int)channels, (unsigned int)splits), kBlockSize, 0,
                                      mt_stream()>>>(partial.as<double>(), g, x, m, n, channels, s, lanes, vec);
    CUDA_CHECK(mt_launch_status());
    batch_norm_backward_finish<T><<<grid_size(channels, kBlockSize), kBlockSize, 0, mt_stream()>>>(
        want & MT_BATCH_NORM_WEIGHT ? first_of<T>(grad_weight) : nullptr,
        want & MT_BATCH_NORM_BIAS ? first_of<T>(grad_bias) : nullptr, dx ? coef.as<T>() : nullptr,
        partial.as<double>(), first_of<T>(rstd), flags & MT_BATCH_NORM_WEIGHT ? first_of<T>(weight) : nullptr,
        channels, splits, n * s);
    CUDA_CHECK(mt_launch_status());
    if (dx) {
        batch_norm_backward_apply<T><<<plane_blocks(n * channels, lanes), kBlockSize, 0, mt_stream()>>>(
            first_of<T>(grad_in), g, x, m, coef.as<T>(), n * channels, channels, s, lanes, vec);
        CUDA_CHECK(mt_launch_status());
        CUDA_CHECK(coef.release());
    }
    CUDA_CHECK(partial.release());
    return MT_OK;
}

/* ---- entry points ---------------------------------------------------------------------------- */

/* in: a contiguous float (N, C, S) tensor with N * S >= 2. */
static mt_status check_planes(const char *func, const char *name, const mt_tensor &t, int dtype, const int64_t *shape,
                              bool output)
{
    MT_TRY(output ? mt_check_output(func, name, &t) : mt_check_tensor(func, name, &t));
    MT_TRY(mt_check_extent(func, name, &t));
    if (t.dtype != dtype)
        return mt_fail(MT_ERR_DTYPE, func, "%s is %s but in is %s", name, dtype_name(t.dtype), dtype_name(dtype));
    char got[96];
    mt_shape_str(&t, got, sizeof got);
    if (t.ndim != 3 || t.shape[0] != shape[0] || t.shape[1] != shape[1] || t.shape[2] != shape[2] ||
        !is_contiguous(t))
        return mt_fail(MT_ERR_SHAPE, func, "%s has shape %s; expected a contiguous tensor of shape (%lld, %lld, %lld)",
                       name, got, (long long)shape[0], (long long)shape[1], (long long)shape[2]);
    return MT_OK;
}

static mt_status check_input(const char *func, const mt_tensor &in)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_tensor(func, "in", &in));
    MT_TRY(mt_check_float(func, "in", &in));
    if (in.ndim != 3)
        return mt_fail(MT_ERR_SHAPE, func, "in must be 3-D (N, C, S), got %d dims", in.ndim);
    MT_TRY(check_planes(func, "in", in, in.dtype, in.shape, false));
    if (in.shape[1] < 1 || in.shape[0] * in.shape[2] < 2)
        return mt_fail(MT_ERR_SHAPE, func, "in of shape (%lld, %lld, %lld): each channel needs at least 2 values",
                       (long long)in.shape[0], (long long)in.shape[1], (long long)in.shape[2]);
    if (in.shape[1] > INT32_MAX)
        return mt_fail(MT_ERR_SHAPE, func, "in has %lld channels; at most %d", (long long)in.shape[1], INT32_MAX);
    return MT_OK;
}

mt_status mt_batch_norm(mt_tensor out, mt_tensor mean, mt_tensor rstd, mt_tensor in, mt_tensor weight,
                        mt_tensor bias, mt_tensor running_mean, mt_tensor running_var, int flags, double momentum,
                        double eps)
{
    const char *func = "mt_batch_norm";
    MT_TRY(check_input(func, in));
    if (flags & ~(MT_BATCH_NORM_WEIGHT | MT_BATCH_NORM_BIAS | MT_BATCH_NORM_RUNNING))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "flags must combine MT_BATCH_NORM_WEIGHT, _BIAS and _RUNNING, "
                       "got %d", flags);
    if (!(eps >= 0.0) || eps == INFINITY)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "eps must be a finite number >= 0, got %g", eps);
    if (!(momentum >= 0.0 && momentum <= 1.0))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "momentum must be in [0, 1], got %g", momentum);
    const int64_t c = in.shape[1];
    MT_TRY(check_planes(func, "out", out, in.dtype, in.shape, true));
    MT_TRY(check_layout(func, "mean", &mean, in.dtype, c, -1, true));
    MT_TRY(check_layout(func, "rstd", &rstd, in.dtype, c, -1, true));
    if (flags & MT_BATCH_NORM_WEIGHT)
        MT_TRY(check_layout(func, "weight", &weight, in.dtype, c, -1, false));
    if (flags & MT_BATCH_NORM_BIAS)
        MT_TRY(check_layout(func, "bias", &bias, in.dtype, c, -1, false));
    if (flags & MT_BATCH_NORM_RUNNING) {
        MT_TRY(check_layout(func, "running_mean", &running_mean, in.dtype, c, -1, true));
        MT_TRY(check_layout(func, "running_var", &running_var, in.dtype, c, -1, true));
    }
    /* out may be in; the statistics share no byte with the big tensors or each other. */
    MT_TRY(mt_check_alias(func, &out, &in, "in"));
    MT_TRY(mt_check_alias(func, &mean, &in, "in"));
    MT_TRY(mt_check_alias(func, &mean, &out, "out"));
    MT_TRY(mt_check_alias(func, &rstd, &in, "in"));
    MT_TRY(mt_check_alias(func, &rstd, &out, "out"));
    if (mean.data == rstd.data && mean.offset == rstd.offset)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "mean and rstd are the same tensor; each needs its own");
    MT_TRY(mt_check_alias(func, &rstd, &mean, "mean"));
    if (flags & MT_BATCH_NORM_RUNNING) {
        if (running_mean.data == running_var.data && running_mean.offset == running_var.offset)
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "running_mean and running_var are the same tensor");
        MT_TRY(mt_check_alias(func, &running_var, &running_mean, "running_mean"));
    }
    if (in.dtype == MT_FLOAT32)
        return launch_forward<float>(out, mean, rstd, in, weight, bias, running_mean, running_var, flags, momentum,
                                     eps);
    return launch_forward<double>(out, mean, rstd, in, weight, bias, running_mean, running_var, flags, momentum, eps);
}

mt_status mt_batch_norm_backward(mt_tensor grad_in, mt_tensor grad_weight, mt_tensor grad_bias, mt_tensor grad_out,
                                 mt_tensor in, mt_tensor mean, mt_tensor rstd, mt_tensor weight, int want, int flags)
{
    const char *func = "mt_batch_norm_backward";
    MT_TRY(check_input(func, in));
    if (want & ~(MT_BATCH_NORM_WEIGHT | MT_BATCH_NORM_BIAS | MT_BATCH_NORM_GRAD_IN))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "want must combine MT_BATCH_NORM_GRAD_IN, _WEIGHT and _BIAS, "
                       "got %d", want);
    if (flags & ~MT_BATCH_NORM_WEIGHT)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "flags may only be MT_BATCH_NORM_WEIGHT, got %d", flags);
    const int64_t c = in.shape[1];
    MT_TRY(check_planes(func, "grad_out", grad_out, in.dtype, in.shape, false));
    MT_TRY(check_layout(func, "mean", &mean, in.dtype, c, -1, false));
    MT_TRY(check_layout(func, "rstd", &rstd, in.dtype, c, -1, false));
    if (flags & MT_BATCH_NORM_WEIGHT)
        MT_TRY(check_layout(func, "weight", &weight, in.dtype, c, -1, false));
    if (want & MT_BATCH_NORM_GRAD_IN) {
        MT_TRY(check_planes(func, "grad_in", grad_in, in.dtype, in.shape, true));
        /* grad_in may be grad_out or in: the last pass reads each element before it writes it */
        MT_TRY(mt_check_alias(func, &grad_in, &grad_out, "grad_out"));
        MT_TRY(mt_check_alias(func, &grad_in, &in, "in"));
    }
    if (want & MT_BATCH_NORM_WEIGHT)
        MT_TRY(check_layout(func, "grad_weight", &grad_weight, in.dtype, c, -1, true));
    if (want & MT_BATCH_NORM_BIAS)
        MT_TRY(check_layout(func, "grad_bias", &grad_bias, in.dtype, c, -1, true));
    if (in.dtype == MT_FLOAT32)
        return launch_backward<float>(grad_in, grad_weight, grad_bias, grad_out, in, mean, rstd, weight, want, flags);
    return launch_backward<double>(grad_in, grad_weight, grad_bias, grad_out, in, mean, rstd, weight, want, flags);
}
