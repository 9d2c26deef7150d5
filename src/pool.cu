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
 * Which windows read input row y? Window oy spans rows oy * stride - pad
 * to oy * stride - pad + (k - 1) * dilation, so those whose span holds y
 * are a range of oy found with two divisions (windows_over); a thread loops
 * over that range (about k / stride windows per dim), not over the outputs.
 *
 * The index arithmetic is 32-bit whenever the tensors allow (PoolShape).
 *
 * Output sizes are the caller's choice of torch's two formulas (floor, or
 * ceil_mode's, whose last window may hang over the right edge but must start
 * inside the input or its left padding); the kernels only need every window
 * to be clipped to the input, which they do tap by tap.
 *
 *   make build/tests/emu/test_pool && build/tests/emu/test_pool
 */
#include <initializer_list>

#include "ops_common.h"

/* The index type I of a launch: int32_t when every ordinal and every
 * position the launch reaches fits (index_fits_int32, below), else int64_t.
 * The kernels split each ordinal into (n, c, y, x) and find window ranges
 * by division; a 32-bit division by a number known only at run time is a
 * few instructions, a 64-bit one a subroutine of dozens. With 64-bit
 * indices these kernels were bound by that arithmetic, not by memory. */

/* What the kernels need to know about the shapes (sizes in elements). */
template <typename I>
struct PoolShape {
    I channels, height, width; /* C, H, W of the input */
    I out_h, out_w;            /* OH, OW */
    int kh, kw, sh, sw, ph, pw, dh, dw;
};

/* A 4-D view as the kernels read it: its first element (offset applied)
 * and its strides in I. v(n, c, y, x) is that element. */
template <typename T, typename I>
struct View4 {
    T *first;
    I s0, s1, s2, s3;
    MT_DEVICE T &operator()(I n, I c, I y, I x) const { return first[n * s0 + c * s1 + y * s2 + x * s3]; }
};

/* Ordinal i of an (N, C, rows, cols) grid as (n, c, y, x), x fastest. */
template <typename I>
MT_DEVICE void split4(I i, I channels, I rows, I cols, I *n, I *c, I *y, I *x)
{
    *x = i % cols;
    i /= cols;
    *y = i % rows;
    i /= rows;
    *c = i % channels;
    *n = i / channels;
}

/* The windows along one dim whose span [o * stride - pad, o * stride - pad
 * + (k - 1) * dilation] holds input position p: o from ceil((p + pad -
 * (k - 1) * dilation) / stride) to floor((p + pad) / stride), kept inside
 * [0, outs); [*first, *end). Two divisions per dim, where testing each of
 * the k taps took one each. With dilation 1 every such window reads p;
 * with more, p may fall between a window's taps (max pooling's index test
 * then never matches it). */
template <typename I>
MT_DEVICE void windows_over(I p, int k, int stride, int pad, int dilation, I outs, I *first, I *end)
{
    const I lo = p + pad - (I)(k - 1) * dilation;
    *first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
    const I past = (p + pad) / stride + 1;
    *end = past < outs ? past : outs;
}

/* ---- max pooling ---------------------------------------------------------- */

/* out = the maximum of each window, indices = its position y * W + x in its
 * input plane (torch's return_indices), unless indices is none (first
 * NULL: a forward no backward will follow, 4 bytes written an output where
 * 12 were). The first maximum wins a tie
 * (strict >); a NaN wins over any number, as in torch, so that a NaN in the
 * data is not hidden. A window of -inf only points at its first tap inside
 * the input. */
/* p moved into [0, size): the nearest position inside the plane. */
template <typename I>
MT_DEVICE I mt_clamp(I p, I size) { return p < 0 ? 0 : p >= size ? size - 1 : p; }

/*
 * KH x KW: the window as template arguments with dilation 1 (the 2 x 2 and
 * 3 x 3 windows of the CNNs), or 0 x 0: s's window, any dilation. With the
 * trip counts known the compiler unrolls both loops and issues the window's
 * loads together, before the comparisons that wait on them; with loops of
 * a run-time length each tap's load waited on the one before it.
 */
template <typename T, typename I, int KH, int KW>
__global__ void max_pool2d_forward(View4<T, I> out, View4<int64_t, I> indices, View4<const T, I> in, PoolShape<I> s,
                                   I count)
{
    const int kh = KH > 0 ? KH : s.kh, kw = KW > 0 ? KW : s.kw;
    const int dh = KH > 0 ? 1 : s.dh, dw = KW > 0 ? 1 : s.dw;
    const I step = (I)gridDim.x * blockDim.x;
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += step) {
        I n, c, oy, ox;
        split4(e, s.channels, s.out_h, s.out_w, &n, &c, &oy, &ox);
        T best = -mt_infinity<T>();
        I best_at = -1;
        MT_UNROLL for (int i = 0; i < kh; ++i) {
            const I y = oy * s.sh - s.ph + (I)i * dh;
            const bool row_in = y >= 0 && y < s.height;
            if (KH == 0 && !row_in)
                continue; /* padding: never the maximum */
            MT_UNROLL for (int j = 0; j < kw; ++j) {
                const I x = ox * s.sw - s.pw + (I)j * dw;
                const bool tap_in = row_in && x >= 0 && x < s.width;
                if (KH == 0 && !tap_in)
                    continue;
                /* A fixed window loads every tap, a padding tap from the nearest
                 * in-plane position and then ignored: no load waits on a branch. */
                const T v = KH == 0 ? in(n, c, y, x) : in(n, c, mt_clamp(y, s.height), mt_clamp(x, s.width));
                if (tap_in && (best_at < 0 || v > best || mt_isnan(v))) {
                    best = v;
                    best_at = y * s.width + x;
                }
            }
        }
        out(n, c, oy, ox) = best;
        if (indices.first != nullptr) /* the same for every thread: no divergence */
            indices(n, c, oy, ox) = best_at;
    }
}

/* grad_in[y, x] = the sum of grad_out over the windows over (y, x)
 * (windows_over) that recorded this position in indices. */
template <typename T, typename I>
__global__ void max_pool2d_backward(View4<T, I> grad_in, View4<const T, I> grad_out,
                                    View4<const int64_t, I> indices, PoolShape<I> s, I count)
{
    const I step = (I)gridDim.x * blockDim.x;
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += step) {
        I n, c, y, x, oy0, oy1, ox0, ox1;
        split4(e, s.channels, s.height, s.width, &n, &c, &y, &x);
        windows_over(y, s.kh, s.sh, s.ph, s.dh, s.out_h, &oy0, &oy1);
        windows_over(x, s.kw, s.sw, s.pw, s.dw, s.out_w, &ox0, &ox1);
        const int64_t here = y * s.width + x;
        T sum = T(0);
        for (I oy = oy0; oy < oy1; ++oy)
            for (I ox = ox0; ox < ox1; ++ox)
                if (indices(n, c, oy, ox) == here)
                    sum += grad_out(n, c, oy, ox);
        grad_in(n, c, y, x) = sum;
    }
}

/* ---- average pooling ------------------------------------------------------ */

/* What window (oy, ox)'s sum is divided by, as torch computes it: the
 * divisor when one is given; else the window's taps inside the input and
 * the padding (count_include_pad), where a ceil_mode window hanging past
 * the padding counts only up to it; else its taps inside the input. */
template <typename I>
MT_DEVICE I avg_divisor(const PoolShape<I> &s, I oy, I ox, int count_include_pad, I divisor)
{
    if (divisor != 0)
        return divisor;
    const I y0 = oy * s.sh - s.ph, x0 = ox * s.sw - s.pw;
    I y1 = y0 + s.kh, x1 = x0 + s.kw;
    if (count_include_pad) {
        y1 = y1 < s.height + s.ph ? y1 : s.height + s.ph;
        x1 = x1 < s.width + s.pw ? x1 : s.width + s.pw;
        return (y1 - y0) * (x1 - x0);
    }
    const I ya = y0 > 0 ? y0 : 0, xa = x0 > 0 ? x0 : 0;
    const I yb = y1 < s.height ? y1 : s.height, xb = x1 < s.width ? x1 : s.width;
    return (yb - ya) * (xb - xa);
}

/* out = the sum of each window's taps inside the input / avg_divisor. */
template <typename T, typename I>
__global__ void avg_pool2d_forward(View4<T, I> out, View4<const T, I> in, PoolShape<I> s, int count_include_pad,
                                   I divisor, I count)
{
    const I step = (I)gridDim.x * blockDim.x;
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += step) {
        I n, c, oy, ox;
        split4(e, s.channels, s.out_h, s.out_w, &n, &c, &oy, &ox);
        T sum = T(0);
        for (int i = 0; i < s.kh; ++i) {
            const I y = oy * s.sh - s.ph + i;
            if (y < 0 || y >= s.height)
                continue; /* padding adds 0 */
            for (int j = 0; j < s.kw; ++j) {
                const I x = ox * s.sw - s.pw + j;
                if (x >= 0 && x < s.width)
                    sum += in(n, c, y, x);
            }
        }
        out(n, c, oy, ox) = sum / T(avg_divisor(s, oy, ox, count_include_pad, divisor));
    }
}

/* grad_in[y, x] = the sum over the windows that read (y, x) of their
 * gradient / their divisor: each window spreads its gradient evenly. */
template <typename T, typename I>
__global__ void avg_pool2d_backward(View4<T, I> grad_in, View4<const T, I> grad_out, PoolShape<I> s,
                                    int count_include_pad, I divisor, I count)
{
    const I step = (I)gridDim.x * blockDim.x;
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += step) {
        I n, c, y, x, oy0, oy1, ox0, ox1;
        split4(e, s.channels, s.height, s.width, &n, &c, &y, &x);
        windows_over(y, s.kh, s.sh, s.ph, 1, s.out_h, &oy0, &oy1);
        windows_over(x, s.kw, s.sw, s.pw, 1, s.out_w, &ox0, &ox1);
        T sum = T(0);
        for (I oy = oy0; oy < oy1; ++oy)
            for (I ox = ox0; ox < ox1; ++ox)
                sum += grad_out(n, c, oy, ox) / T(avg_divisor(s, oy, ox, count_include_pad, divisor));
        grad_in(n, c, y, x) = sum;
    }
}

/* ---- adaptive average pooling ---------------------------------------------
 * OH x OW windows that tile the input, whatever its size (a ResNet's global
 * pool is OH = OW = 1): output row o averages input rows
 * [floor(o * H / OH), ceil((o + 1) * H / OH)), torch's formula. Windows
 * overlap when H is not a multiple of OH. */

template <typename I>
MT_DEVICE I adaptive_start(I o, I size, I outs) { return o * size / outs; }
template <typename I>
MT_DEVICE I adaptive_end(I o, I size, I outs) { return ((o + 1) * size + outs - 1) / outs; }

template <typename T, typename I>
__global__ void adaptive_avg_pool2d_forward(View4<T, I> out, View4<const T, I> in, PoolShape<I> s, I count)
{
    const I step = (I)gridDim.x * blockDim.x;
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += step) {
        I n, c, oy, ox;
        split4(e, s.channels, s.out_h, s.out_w, &n, &c, &oy, &ox);
        const I y0 = adaptive_start(oy, s.height, s.out_h), y1 = adaptive_end(oy, s.height, s.out_h);
        const I x0 = adaptive_start(ox, s.width, s.out_w), x1 = adaptive_end(ox, s.width, s.out_w);
        T sum = T(0);
        for (I y = y0; y < y1; ++y)
            for (I x = x0; x < x1; ++x)
                sum += in(n, c, y, x);
        out(n, c, oy, ox) = sum / T((y1 - y0) * (x1 - x0));
    }
}

/* The windows that read input row y are o in [floor(y * OH / H),
 * ceil((y + 1) * OH / H)): the first whose end passes y, up to the last
 * whose start does not. */
template <typename T, typename I>
__global__ void adaptive_avg_pool2d_backward(View4<T, I> grad_in, View4<const T, I> grad_out, PoolShape<I> s,
                                             I count)
{
    const I step = (I)gridDim.x * blockDim.x;
    for (I e = (I)blockIdx.x * blockDim.x + threadIdx.x; e < count; e += step) {
        I n, c, y, x;
        split4(e, s.channels, s.height, s.width, &n, &c, &y, &x);
        T sum = T(0);
        for (I oy = y * s.out_h / s.height; oy < adaptive_end(y, s.out_h, s.height); ++oy) {
            const I rows = adaptive_end(oy, s.height, s.out_h) - adaptive_start(oy, s.height, s.out_h);
            for (I ox = x * s.out_w / s.width; ox < adaptive_end(x, s.out_w, s.width); ++ox) {
                const I cols = adaptive_end(ox, s.width, s.out_w) - adaptive_start(ox, s.width, s.out_w);
                sum += grad_out(n, c, oy, ox) / T(rows * cols);
            }
        }
        grad_in(n, c, y, x) = sum;
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

/* a * b <= INT32_MAX, for a, b >= 0. */
static bool product_fits_int32(int64_t a, int64_t b)
{
    return a == 0 || b <= INT32_MAX / a;
}

/* Can a launch over `count` elements of big (N, C, H, W) and small (N, C,
 * OH, OW) count in int32 (see PoolShape)? The ordinals its grid-stride loop
 * reaches (count plus one grid of threads), each tensor's positions counted
 * from its first element, and the other numbers the kernels form (H * W,
 * OH * OW; H * OH and W * OW of the adaptive windows; the divisor) all
 * below 2^31. */
static bool index_fits_int32(int64_t count, std::initializer_list<const mt_tensor *> ts, const mt_tensor &big,
                             const mt_tensor &small, int64_t divisor)
{
    int64_t most = count + (int64_t)grid_size(count, kBlockSize) * kBlockSize;
    for (const mt_tensor *t : ts) {
        int64_t span = 0; /* checked extents: no overflow */
        for (int d = 0; d < t->ndim; ++d)
            span += (t->shape[d] > 0 ? t->shape[d] - 1 : 0) * t->strides[d];
        most = span > most ? span : most;
    }
    const int64_t h = big.shape[2], w = big.shape[3], oh = small.shape[2], ow = small.shape[3];
    return most <= INT32_MAX && divisor <= INT32_MAX && product_fits_int32(h, w) && product_fits_int32(oh, ow) &&
           product_fits_int32(h, oh) && product_fits_int32(w, ow);
}

/* Launches one pooling kernel over `count` elements, one thread each in a
 * grid-stride loop: launch(T{}, I{}, grid) for the float type T of dtype
 * and the index type I (int32_t when `small_index`). Nothing for count 0
 * (an empty batch, no channel). */
template <typename Launch>
static mt_status launch_pool(int32_t dtype, int64_t count, bool small_index, Launch launch)
{
    if (count == 0)
        return MT_OK;
    const unsigned int grid = grid_size(count, kBlockSize);
    return with_float(dtype, [&](auto tag) {
        if (small_index)
            launch(tag, int32_t{}, grid);
        else
            launch(tag, int64_t{}, grid);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

/* t as the kernels read it (T may be const). */
template <typename T, typename I>
static View4<T, I> view4(const mt_tensor &t)
{
    return View4<T, I>{static_cast<T *>(t.data) + t.offset, (I)t.strides[0], (I)t.strides[1], (I)t.strides[2],
                       (I)t.strides[3]};
}

template <typename I>
static PoolShape<I> pool_shape(const mt_tensor &big, const mt_tensor &small, int kh, int kw, int sh, int sw, int ph,
                               int pw, int dh, int dw)
{
    return PoolShape<I>{(I)big.shape[1], (I)big.shape[2], (I)big.shape[3], (I)small.shape[2], (I)small.shape[3],
                        kh, kw, sh, sw, ph, pw, dh, dw};
}

mt_status mt_max_pool2d(mt_tensor out, mt_tensor indices, mt_tensor in, int kernel_h, int kernel_w, int stride_h,
                        int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w)
{
    const char *func = "mt_max_pool2d";
    /* indices none: data NULL and no dims (a zeroed mt_tensor). */
    const bool with_indices = !(indices.data == nullptr && indices.ndim == 0);
    const mt_tensor *ts[] = {&out, &in, &indices};
    const char *names[] = {"out", "in", "indices"};
    MT_TRY(check_pool_tensors(func, with_indices ? 3 : 2, ts, names));
    MT_TRY(mt_check_float(func, "in", &in));
    MT_TRY(mt_check_same_dtype(func, &in, "in", &out, "out"));
    if (with_indices) {
        MT_TRY(mt_check_output(func, "indices", &indices));
        if (indices.dtype != MT_INT64)
            return mt_fail(MT_ERR_DTYPE, func, "indices must be int64, got %s", dtype_name(indices.dtype));
        MT_TRY(mt_check_same_shape(func, &out, "out", &indices, "indices"));
        if (tensors_overlap(indices, in))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "indices overlaps in");
    }
    MT_TRY(check_windows(func, in, out, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h,
                         dilation_w));
    const int64_t count = tensor_numel(out);
    const bool small = index_fits_int32(count, {&out, &indices, &in}, in, out, 0);
    return launch_pool(in.dtype, count, small, [&](auto tag, auto index, unsigned int grid) {
        using T = decltype(tag);
        using I = decltype(index);
        const PoolShape<I> s =
            pool_shape<I>(in, out, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w);
        /* 2 x 2 and 3 x 3 windows without dilation take the unrolled
         * kernel (3x3/2 0.119 to 0.087 ms on an H200, performance.md);
         * every other window the run-time one. */
        auto kernel = max_pool2d_forward<T, I, 0, 0>; /* any window */
        if (dilation_h == 1 && dilation_w == 1 && kernel_h == kernel_w) {
            if (kernel_h == 2)
                kernel = max_pool2d_forward<T, I, 2, 2>;
            else if (kernel_h == 3)
                kernel = max_pool2d_forward<T, I, 3, 3>;
        }
        kernel<<<grid, kBlockSize, 0, mt_stream()>>>(view4<T, I>(out), view4<int64_t, I>(indices),
                                                      view4<const T, I>(in), s, (I)count);
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
    const bool small = index_fits_int32(count, {&grad_in, &grad_out, &indices}, grad_in, grad_out, 0);
    return launch_pool(grad_in.dtype, count, small, [&](auto tag, auto index, unsigned int grid) {
        using T = decltype(tag);
        using I = decltype(index);
        max_pool2d_backward<T, I><<<grid, kBlockSize, 0, mt_stream()>>>(
            view4<T, I>(grad_in), view4<const T, I>(grad_out), view4<const int64_t, I>(indices),
            pool_shape<I>(grad_in, grad_out, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dilation_h,
                          dilation_w),
            (I)count);
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
    const bool small = index_fits_int32(count, {&out, &in}, in, out, divisor);
    return launch_pool(in.dtype, count, small, [&](auto tag, auto index, unsigned int grid) {
        using T = decltype(tag);
        using I = decltype(index);
        avg_pool2d_forward<T, I><<<grid, kBlockSize, 0, mt_stream()>>>(
            view4<T, I>(out), view4<const T, I>(in),
            pool_shape<I>(in, out, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, 1, 1), count_include_pad,
            (I)divisor, (I)count);
    });
}

mt_status mt_avg_pool2d_backward(mt_tensor grad_in, mt_tensor grad_out, int kernel_h, int kernel_w, int stride_h,
                                 int stride_w, int pad_h, int pad_w, int count_include_pad, int64_t divisor)
{
    const char *func = "mt_avg_pool2d_backward";
    MT_TRY(check_avg(func, grad_in, "grad_in", grad_out, "grad_out", grad_in, grad_out, kernel_h, kernel_w,
                     stride_h, stride_w, pad_h, pad_w, divisor));
    const int64_t count = tensor_numel(grad_in);
    const bool small = index_fits_int32(count, {&grad_in, &grad_out}, grad_in, grad_out, divisor);
    return launch_pool(grad_in.dtype, count, small, [&](auto tag, auto index, unsigned int grid) {
        using T = decltype(tag);
        using I = decltype(index);
        avg_pool2d_backward<T, I><<<grid, kBlockSize, 0, mt_stream()>>>(
            view4<T, I>(grad_in), view4<const T, I>(grad_out),
            pool_shape<I>(grad_in, grad_out, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, 1, 1),
            count_include_pad, (I)divisor, (I)count);
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
    const bool small = index_fits_int32(count, {&out, &in}, in, out, 0);
    return launch_pool(in.dtype, count, small, [&](auto tag, auto index, unsigned int grid) {
        using T = decltype(tag);
        using I = decltype(index);
        adaptive_avg_pool2d_forward<T, I><<<grid, kBlockSize, 0, mt_stream()>>>(
            view4<T, I>(out), view4<const T, I>(in), pool_shape<I>(in, out, 1, 1, 1, 1, 0, 0, 1, 1), (I)count);
    });
}

mt_status mt_adaptive_avg_pool2d_backward(mt_tensor grad_in, mt_tensor grad_out)
{
    const char *func = "mt_adaptive_avg_pool2d_backward";
    MT_TRY(check_adaptive(func, grad_in, "grad_in", grad_out, "grad_out", grad_in, grad_out));
    const int64_t count = tensor_numel(grad_in);
    const bool small = index_fits_int32(count, {&grad_in, &grad_out}, grad_in, grad_out, 0);
    return launch_pool(grad_in.dtype, count, small, [&](auto tag, auto index, unsigned int grid) {
        using T = decltype(tag);
        using I = decltype(index);
        adaptive_avg_pool2d_backward<T, I><<<grid, kBlockSize, 0, mt_stream()>>>(
            view4<T, I>(grad_in), view4<const T, I>(grad_out), pool_shape<I>(grad_in, grad_out, 1, 1, 1, 1, 0, 0, 1, 1),
            (I)count);
    });
}
