/*
 * pool.cu: 2-D pooling, forward and backward, one kernel each: max pooling
 * (with the position of each maximum), average pooling, adaptive average
 * pooling. Every tensor is (N, C, H, W) with any strides.
 *
 * The forward kernels give one thread to each output element: it walks its
 * window, the taps (i, j) at input row oy * stride_h - pad_h + i * dilation_h
 * (columns alike), skipping the taps that fall in the padding, and writes
 * one value. Nothing is shared between threads, so there is no barrier; the
 * windows of neighbouring outputs overlap, and the cache serves the
 * repeated reads.
 *
 * The backward kernels give one thread to each INPUT element (the gather
 * form): it finds the output windows that read it and sums their gradients.
 * The other way round (one thread per output adding into its window's
 * inputs) needs atomics wherever windows overlap (stride < kernel), and
 * float atomics add in whatever order the threads arrive, so the last bits
 * of the gradient change from run to run. Here each gradient element is
 * written by one thread, in a fixed order: deterministic, no atomics.
 *
 * Which windows read input row y? Tap i of window oy reads row
 * oy * stride - pad + i * dilation, so for each tap i, window
 * oy = (y + pad - i * dilation) / stride reads it when that division is
 * exact and oy is a real window (0 <= oy < OH). Each tap gives at most one
 * window, so a thread loops over the KH x KW taps, not over the outputs.
 *
 * Output sizes are the caller's choice of torch's two formulas (floor, or
 * ceil_mode's, whose last window may hang over the right edge but must start
 * inside the input or its left padding); the kernels only need every window
 * to be clipped to the input, which they do tap by tap.
 *
 *   make build/tests/emu/test_pool && build/tests/emu/test_pool
 */
#include "ops_common.h"

/* What the kernels need to know about the shapes (sizes in elements). */
struct PoolShape {
    int64_t channels, height, width; /* C, H, W of the input */
    int64_t out_h, out_w;            /* OH, OW */
    int kh, kw, sh, sw, ph, pw, dh, dw;
};

/* Position of element (n, c, y, x) of a 4-D view in its storage. */
MT_DEVICE int64_t at4(const mt_tensor &t, int64_t n, int64_t c, int64_t y, int64_t x)
{
    return t.offset + n * t.strides[0] + c * t.strides[1] + y * t.strides[2] + x * t.strides[3];
}

/* Ordinal i of an (N, C, rows, cols) grid as (n, c, y, x), x fastest. */
MT_DEVICE void split4(int64_t i, int64_t channels, int64_t rows, int64_t cols, int64_t *n, int64_t *c,
                      int64_t *y, int64_t *x)
{
    *x = i % cols;
    i /= cols;
    *y = i % rows;
    i /= rows;
    *c = i % channels;
    *n = i / channels;
}

/* The window of output row o that covers input row y through tap i, or -1:
 * o * stride - pad + i * dilation == y for a real window 0 <= o < outs. */
MT_DEVICE int64_t window_through(int64_t y, int i, int stride, int pad, int dilation, int64_t outs)
{
    const int64_t start = y + pad - (int64_t)i * dilation; /* o * stride */
    if (start < 0 || start % stride != 0)
        return -1;
    const int64_t o = start / stride;
    return o < outs ? o : -1;
}

/* ---- max pooling ---------------------------------------------------------- */

/* out = the maximum of each window, indices = its position y * W + x in its
 * input plane (torch's return_indices). The first maximum wins a tie
 * (strict >); a NaN wins over any number, as in torch, so that a NaN in the
 * data is not hidden. A window of -inf only points at its first tap inside
 * the input. */
template <typename T>
__global__ void max_pool2d_forward(mt_tensor out, mt_tensor indices, mt_tensor in, PoolShape s, int64_t count)
{
    const T *in_data = static_cast<const T *>(in.data);
    T *out_data = static_cast<T *>(out.data);
    int64_t *index_data = static_cast<int64_t *>(indices.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += step) {
        int64_t n, c, oy, ox;
        split4(e, s.channels, s.out_h, s.out_w, &n, &c, &oy, &ox);
        T best = -mt_infinity<T>();
        int64_t best_at = -1;
        for (int i = 0; i < s.kh; ++i) {
            const int64_t y = oy * s.sh - s.ph + (int64_t)i * s.dh;
            if (y < 0 || y >= s.height)
                continue; /* padding: never the maximum */
            for (int j = 0; j < s.kw; ++j) {
                const int64_t x = ox * s.sw - s.pw + (int64_t)j * s.dw;
                if (x < 0 || x >= s.width)
                    continue;
                const T v = in_data[at4(in, n, c, y, x)];
                if (best_at < 0 || v > best || mt_isnan(v)) {
                    best = v;
                    best_at = y * s.width + x;
                }
            }
        }
        out_data[at4(out, n, c, oy, ox)] = best;
        index_data[at4(indices, n, c, oy, ox)] = best_at;
    }
}

/* grad_in[y, x] = the sum of grad_out over the windows whose maximum was
 * (y, x): the windows through each tap (window_through) that recorded this
 * position in indices. */
template <typename T>
__global__ void max_pool2d_backward(mt_tensor grad_in, mt_tensor grad_out, mt_tensor indices, PoolShape s,
                                    int64_t count)
{
    T *gin = static_cast<T *>(grad_in.data);
    const T *gout = static_cast<const T *>(grad_out.data);
    const int64_t *index_data = static_cast<const int64_t *>(indices.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += step) {
        int64_t n, c, y, x;
        split4(e, s.channels, s.height, s.width, &n, &c, &y, &x);
        const int64_t here = y * s.width + x;
        T sum = T(0);
        for (int i = 0; i < s.kh; ++i) {
            const int64_t oy = window_through(y, i, s.sh, s.ph, s.dh, s.out_h);
            if (oy < 0)
                continue;
            for (int j = 0; j < s.kw; ++j) {
                const int64_t ox = window_through(x, j, s.sw, s.pw, s.dw, s.out_w);
                if (ox >= 0 && index_data[at4(indices, n, c, oy, ox)] == here)
                    sum += gout[at4(grad_out, n, c, oy, ox)];
            }
        }
        gin[at4(grad_in, n, c, y, x)] = sum;
    }
}

/* ---- average pooling ------------------------------------------------------ */

/* What window (oy, ox)'s sum is divided by, as torch computes it: the
 * divisor when one is given; else the window's taps inside the input and
 * the padding (count_include_pad), where a ceil_mode window hanging past
 * the padding counts only up to it; else its taps inside the input. */
MT_DEVICE int64_t avg_divisor(const PoolShape &s, int64_t oy, int64_t ox, int count_include_pad, int64_t divisor)
{
    if (divisor != 0)
        return divisor;
    const int64_t y0 = oy * s.sh - s.ph, x0 = ox * s.sw - s.pw;
    int64_t y1 = y0 + s.kh, x1 = x0 + s.kw;
    if (count_include_pad) {
        y1 = y1 < s.height + s.ph ? y1 : s.height + s.ph;
        x1 = x1 < s.width + s.pw ? x1 : s.width + s.pw;
        return (y1 - y0) * (x1 - x0);
    }
    const int64_t ya = y0 > 0 ? y0 : 0, xa = x0 > 0 ? x0 : 0;
    const int64_t yb = y1 < s.height ? y1 : s.height, xb = x1 < s.width ? x1 : s.width;
    return (yb - ya) * (xb - xa);
}

/* out = the sum of each window's taps inside the input / avg_divisor. */
template <typename T>
__global__ void avg_pool2d_forward(mt_tensor out, mt_tensor in, PoolShape s, int count_include_pad,
                                   int64_t divisor, int64_t count)
{
    const T *in_data = static_cast<const T *>(in.data);
    T *out_data = static_cast<T *>(out.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += step) {
        int64_t n, c, oy, ox;
        split4(e, s.channels, s.out_h, s.out_w, &n, &c, &oy, &ox);
        T sum = T(0);
        for (int i = 0; i < s.kh; ++i) {
            const int64_t y = oy * s.sh - s.ph + i;
            if (y < 0 || y >= s.height)
                continue; /* padding adds 0 */
            for (int j = 0; j < s.kw; ++j) {
                const int64_t x = ox * s.sw - s.pw + j;
                if (x >= 0 && x < s.width)
                    sum += in_data[at4(in, n, c, y, x)];
            }
        }
        out_data[at4(out, n, c, oy, ox)] = sum / T(avg_divisor(s, oy, ox, count_include_pad, divisor));
    }
}

/* grad_in[y, x] = the sum over the windows that read (y, x) of their
 * gradient / their divisor: each window spreads its gradient evenly. */
template <typename T>
__global__ void avg_pool2d_backward(mt_tensor grad_in, mt_tensor grad_out, PoolShape s, int count_include_pad,
                                    int64_t divisor, int64_t count)
{
    T *gin = static_cast<T *>(grad_in.data);
    const T *gout = static_cast<const T *>(grad_out.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += step) {
        int64_t n, c, y, x;
        split4(e, s.channels, s.height, s.width, &n, &c, &y, &x);
        T sum = T(0);
        for (int i = 0; i < s.kh; ++i) {
            const int64_t oy = window_through(y, i, s.sh, s.ph, 1, s.out_h);
            if (oy < 0)
                continue;
            for (int j = 0; j < s.kw; ++j) {
                const int64_t ox = window_through(x, j, s.sw, s.pw, 1, s.out_w);
                if (ox >= 0)
                    sum += gout[at4(grad_out, n, c, oy, ox)] / T(avg_divisor(s, oy, ox, count_include_pad, divisor));
            }
        }
        gin[at4(grad_in, n, c, y, x)] = sum;
    }
}

/* ---- adaptive average pooling ---------------------------------------------
 * OH x OW windows that tile the input, whatever its size (a ResNet's global
 * pool is OH = OW = 1): output row o averages input rows
 * [floor(o * H / OH), ceil((o + 1) * H / OH)), torch's formula. Windows
 * overlap when H is not a multiple of OH. */

MT_DEVICE int64_t adaptive_start(int64_t o, int64_t size, int64_t outs) { return o * size / outs; }
MT_DEVICE int64_t adaptive_end(int64_t o, int64_t size, int64_t outs) { return ((o + 1) * size + outs - 1) / outs; }

template <typename T>
__global__ void adaptive_avg_pool2d_forward(mt_tensor out, mt_tensor in, PoolShape s, int64_t count)
{
    const T *in_data = static_cast<const T *>(in.data);
    T *out_data = static_cast<T *>(out.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += step) {
        int64_t n, c, oy, ox;
        split4(e, s.channels, s.out_h, s.out_w, &n, &c, &oy, &ox);
        const int64_t y0 = adaptive_start(oy, s.height, s.out_h), y1 = adaptive_end(oy, s.height, s.out_h);
        const int64_t x0 = adaptive_start(ox, s.width, s.out_w), x1 = adaptive_end(ox, s.width, s.out_w);
        T sum = T(0);
        for (int64_t y = y0; y < y1; ++y)
            for (int64_t x = x0; x < x1; ++x)
                sum += in_data[at4(in, n, c, y, x)];
        out_data[at4(out, n, c, oy, ox)] = sum / T((y1 - y0) * (x1 - x0));
    }
}

/* The windows that read input row y are o in [floor(y * OH / H),
 * ceil((y + 1) * OH / H)): the first whose end passes y, up to the last
 * whose start does not. */
template <typename T>
__global__ void adaptive_avg_pool2d_backward(mt_tensor grad_in, mt_tensor grad_out, PoolShape s, int64_t count)
{
    T *gin = static_cast<T *>(grad_in.data);
    const T *gout = static_cast<const T *>(grad_out.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += step) {
        int64_t n, c, y, x;
        split4(e, s.channels, s.height, s.width, &n, &c, &y, &x);
        T sum = T(0);
        for (int64_t oy = y * s.out_h / s.height; oy < adaptive_end(y, s.out_h, s.height); ++oy) {
            const int64_t rows = adaptive_end(oy, s.height, s.out_h) - adaptive_start(oy, s.height, s.out_h);
            for (int64_t ox = x * s.out_w / s.width; ox < adaptive_end(x, s.out_w, s.width); ++ox) {
                const int64_t cols = adaptive_end(ox, s.width, s.out_w) - adaptive_start(ox, s.width, s.out_w);
                sum += gout[at4(grad_out, n, c, oy, ox)] / T(rows * cols);
            }
        }
        gin[at4(grad_in, n, c, y, x)] = sum;
    }
}

/* ---- host side -------------------------------------------------------------- */

/* torch's pooling output size: floor((size + 2 pad - dilation (k - 1) - 1) /
 * stride) + 1, or with ceil_mode the ceiling, less one when that last window
 * would start past the input and its left padding. */
static int64_t pool_out_size(int64_t size, int k, int stride, int pad, int dilation, bool ceil_mode)
{
    const int64_t span = size + 2 * (int64_t)pad - (int64_t)dilation * (k - 1) - 1;
    if (span < 0)
        return 0;
    int64_t outs = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
    if (ceil_mode && (outs - 1) * stride >= size + pad)
        --outs;
    return outs;
}

/* The checks every pooling entry point shares: a float 4-D `first` (the
 * input, or the gradient the backward writes) and the other tensors of its
 * dtype and 4 dims, none overlapping the output. */
static mt_status check_pool_tensors(const char *func, int count, const mt_tensor *const *ts, const char *const *names)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, names[0], ts[0]));
    for (int k = 0; k < count; ++k) {
        if (k > 0)
            MT_TRY(mt_check_tensor(func, names[k], ts[k]));
        MT_TRY(mt_check_extent(func, names[k], ts[k]));
        if (ts[k]->ndim != 4)
            return mt_fail(MT_ERR_SHAPE, func, "%s must be a 4-D (N, C, H, W) tensor, got %d dims", names[k],
                           (int)ts[k]->ndim);
        if (k > 0 && tensors_overlap(*ts[0], *ts[k]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s overlaps %s", names[0], names[k]);
    }
    return MT_OK;
}

/* in (N, C, H, W) and out (N, C, OH, OW) agree on N and C; the window
 * parameters are in range (padding at most half the kernel, as torch); OH
 * and OW are one of torch's two output sizes. */
static mt_status check_windows(const char *func, const mt_tensor &big, const mt_tensor &small, int kh, int kw,
                               int sh, int sw, int ph, int pw, int dh, int dw)
{
    char big_buf[96], small_buf[96];
    if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || dh < 1 || dw < 1 || ph < 0 || pw < 0 || 2 * ph > kh ||
        2 * pw > kw)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "kernel (%d, %d), stride (%d, %d) and dilation (%d, %d) "
                       "must be >= 1, padding (%d, %d) >= 0 and at most half the kernel", kh, kw, sh, sw, dh, dw,
                       ph, pw);
    const int64_t oh = small.shape[2], ow = small.shape[3];
    const bool rows_ok = oh >= 1 && (oh == pool_out_size(big.shape[2], kh, sh, ph, dh, false) ||
                                     oh == pool_out_size(big.shape[2], kh, sh, ph, dh, true));
    const bool cols_ok = ow >= 1 && (ow == pool_out_size(big.shape[3], kw, sw, pw, dw, false) ||
                                     ow == pool_out_size(big.shape[3], kw, sw, pw, dw, true));
    /* H, W >= 1, as torch: a window of padding alone has no maximum. */
    if (big.shape[0] != small.shape[0] || big.shape[1] != small.shape[1] || big.shape[2] < 1 || big.shape[3] < 1 ||
        !rows_ok || !cols_ok)
        return mt_fail(MT_ERR_SHAPE, func, "an input %s (H, W >= 1) and an output %s do not agree with kernel "
                       "(%d, %d), stride (%d, %d), padding (%d, %d), dilation (%d, %d)", mt_shape_str(&big, big_buf, 96),
                       mt_shape_str(&small, small_buf, 96), kh, kw, sh, sw, ph, pw, dh, dw);
    return MT_OK;
}

/* f(T{}) for the float type of a dtype the caller checked is float32 or
 * float64, so that no kernel is compiled for int64 or bool. */
template <typename F>
static mt_status with_float(int32_t dtype, F f)
{
    return dtype == MT_FLOAT32 ? f(float{}) : f(double{});
}

/* Launches one pooling kernel over `count` elements, one thread each in a
 * grid-stride loop: launch(T{}, grid) for the float type of dtype. Nothing
 * for count 0 (an empty batch, no channel). */
template <typename Launch>
static mt_status launch_pool(int32_t dtype, int64_t count, Launch launch)
{
    if (count == 0)
        return MT_OK;
    return with_float(dtype, [&](auto tag) {
        launch(tag, grid_size(count, kBlockSize));
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

static PoolShape pool_shape(const mt_tensor &big, const mt_tensor &small, int kh, int kw, int sh, int sw, int ph,
                            int pw, int dh, int dw)
{
    return PoolShape{big.shape[1], big.shape[2], big.shape[3], small.shape[2], small.shape[3],
                     kh, kw, sh, sw, ph, pw, dh, dw};
}

mt_status mt_max_pool2d(mt_tensor out, mt_tensor indices, mt_tensor in, int kernel_h, int kernel_w, int stride_h,
                        int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w)
{
    const char *func = "mt_max_pool2d";
    const mt_tensor *ts[] = {&out, &indices, &in};
    const char *names[] = {"out", "indices", "in"};
    MT_TRY(check_pool_tensors(func, 3, ts, names));
    MT_TRY(mt_check_output(func, "indices", &indices));
    MT_TRY(mt_check_float(func, "in", &in));
    MT_TRY(mt_check_same_dtype(func, &in, "in", &out, "out"));
    if (indices.dtype != MT_INT64)
        return mt_fail(MT_ERR_DTYPE, func, "indices must be int64, got %s", dtype_name(indices.dtype));
    MT_TRY(mt_check_same_shape(func, &out, "out", &indices, "indices"));
    if (tensors_overlap(indices, in))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "indices overlaps in");
    MT_TRY(check_windows(func, in, out, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h,
                         dilation_w));
    const int64_t count = tensor_numel(out);
    const PoolShape s = pool_shape(in, out, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h,
                                   dilation_w);
    return launch_pool(in.dtype, count, [&](auto tag, unsigned int grid) {
        using T = decltype(tag);
        max_pool2d_forward<T><<<grid, kBlockSize, 0, mt_stream()>>>(out, indices, in, s, count);
    });
}

mt_status mt_max_pool2d_backward(mt_tensor grad_in, mt_tensor grad_out, mt_tensor indices, int kernel_h, int kernel_w,
                                 int stride_h, int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w)
{
    const char *func = "mt_max_pool2d_backward";
    const mt_tensor *ts[] = {&grad_in, &grad_out, &indices};
    const char *names[] = {"grad_in", "grad_out", "indices"};
    MT_TRY(check_pool_tensors(func, 3, ts, names));
    MT_TRY(mt_check_float(func, "grad_in", &grad_in));
    MT_TRY(mt_check_same_dtype(func, &grad_out, "grad_out", &grad_in, "grad_in"));
    if (indices.dtype != MT_INT64)
        return mt_fail(MT_ERR_DTYPE, func, "indices must be int64, got %s", dtype_name(indices.dtype));
    MT_TRY(mt_check_same_shape(func, &grad_out, "grad_out", &indices, "indices"));
    MT_TRY(check_windows(func, grad_in, grad_out, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h,
                         dilation_w));
    const int64_t count = tensor_numel(grad_in);
    const PoolShape s = pool_shape(grad_in, grad_out, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w,
                                   dilation_h, dilation_w);
    return launch_pool(grad_in.dtype, count, [&](auto tag, unsigned int grid) {
        using T = decltype(tag);
        max_pool2d_backward<T><<<grid, kBlockSize, 0, mt_stream()>>>(
            grad_in, grad_out, indices, s, count);
    });
}

/* The avg_pool2d checks shared by forward and backward: big is the input
 * (or its gradient), small the output (or its gradient). */
static mt_status check_avg(const char *func, const mt_tensor &written, const char *written_name,
                           const mt_tensor &read, const char *read_name, const mt_tensor &big,
                           const mt_tensor &small, int kh, int kw, int sh, int sw, int ph, int pw, int64_t divisor)
{
    const mt_tensor *ts[] = {&written, &read};
    const char *names[] = {written_name, read_name};
    MT_TRY(check_pool_tensors(func, 2, ts, names));
    MT_TRY(mt_check_float(func, read_name, &read));
    MT_TRY(mt_check_same_dtype(func, &read, read_name, &written, written_name));
    if (divisor < 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "divisor must be >= 0 (0: none), got %lld",
                       (long long)divisor);
    return check_windows(func, big, small, kh, kw, sh, sw, ph, pw, 1, 1);
}

mt_status mt_avg_pool2d(mt_tensor out, mt_tensor in, int kernel_h, int kernel_w, int stride_h, int stride_w,
                        int pad_h, int pad_w, int count_include_pad, int64_t divisor)
{
    const char *func = "mt_avg_pool2d";
    MT_TRY(check_avg(func, out, "out", in, "in", in, out, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w,
                     divisor));
    const int64_t count = tensor_numel(out);
    const PoolShape s = pool_shape(in, out, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, 1, 1);
    return launch_pool(in.dtype, count, [&](auto tag, unsigned int grid) {
        using T = decltype(tag);
        avg_pool2d_forward<T><<<grid, kBlockSize, 0, mt_stream()>>>(
            out, in, s, count_include_pad, divisor, count);
    });
}

mt_status mt_avg_pool2d_backward(mt_tensor grad_in, mt_tensor grad_out, int kernel_h, int kernel_w, int stride_h,
                                 int stride_w, int pad_h, int pad_w, int count_include_pad, int64_t divisor)
{
    const char *func = "mt_avg_pool2d_backward";
    MT_TRY(check_avg(func, grad_in, "grad_in", grad_out, "grad_out", grad_in, grad_out, kernel_h, kernel_w,
                     stride_h, stride_w, pad_h, pad_w, divisor));
    const int64_t count = tensor_numel(grad_in);
    const PoolShape s = pool_shape(grad_in, grad_out, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, 1, 1);
    return launch_pool(grad_in.dtype, count, [&](auto tag, unsigned int grid) {
        using T = decltype(tag);
        avg_pool2d_backward<T><<<grid, kBlockSize, 0, mt_stream()>>>(
            grad_in, grad_out, s, count_include_pad, divisor, count);
    });
}

/* The adaptive checks: big (N, C, H, W) with H, W >= 1, small (N, C, OH, OW). */
static mt_status check_adaptive(const char *func, const mt_tensor &written, const char *written_name,
                                const mt_tensor &read, const char *read_name, const mt_tensor &big,
                                const mt_tensor &small)
{
    const mt_tensor *ts[] = {&written, &read};
    const char *names[] = {written_name, read_name};
    MT_TRY(check_pool_tensors(func, 2, ts, names));
    MT_TRY(mt_check_float(func, read_name, &read));
    MT_TRY(mt_check_same_dtype(func, &read, read_name, &written, written_name));
    char big_buf[96], small_buf[96];
    if (big.shape[0] != small.shape[0] || big.shape[1] != small.shape[1] || big.shape[2] < 1 || big.shape[3] < 1)
        return mt_fail(MT_ERR_SHAPE, func, "an input %s and an output %s: N and C must agree, H and W be >= 1",
                       mt_shape_str(&big, big_buf, 96), mt_shape_str(&small, small_buf, 96));
    return MT_OK;
}

mt_status mt_adaptive_avg_pool2d(mt_tensor out, mt_tensor in)
{
    const char *func = "mt_adaptive_avg_pool2d";
    MT_TRY(check_adaptive(func, out, "out", in, "in", in, out));
    const int64_t count = tensor_numel(out);
    const PoolShape s = pool_shape(in, out, 1, 1, 1, 1, 0, 0, 1, 1);
    return launch_pool(in.dtype, count, [&](auto tag, unsigned int grid) {
        using T = decltype(tag);
        adaptive_avg_pool2d_forward<T><<<grid, kBlockSize, 0, mt_stream()>>>(out, in, s, count);
    });
}

mt_status mt_adaptive_avg_pool2d_backward(mt_tensor grad_in, mt_tensor grad_out)
{
    const char *func = "mt_adaptive_avg_pool2d_backward";
    MT_TRY(check_adaptive(func, grad_in, "grad_in", grad_out, "grad_out", grad_in, grad_out));
    const int64_t count = tensor_numel(grad_in);
    const PoolShape s = pool_shape(grad_in, grad_out, 1, 1, 1, 1, 0, 0, 1, 1);
    return launch_pool(grad_in.dtype, count, [&](auto tag, unsigned int grid) {
        using T = decltype(tag);
        adaptive_avg_pool2d_backward<T><<<grid, kBlockSize, 0, mt_stream()>>>(
            grad_in, grad_out, s, count);
    });
}
