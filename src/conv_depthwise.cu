/*
 * conv_depthwise.cu: the depthwise convolution (groups = C = C_out), its own
 * rung, forward and the input gradient at stride 1.
 *
 *     out[n, c, oy, ox] = bias[c] + sum_{i, j} weight[c, 0, i, j] * in[n, c, oy*sh - ph + i*dh, ox*sw - pw + j*dw]
 *
 * Each output reads KH x KW inputs and does as many multiply-adds: the op is
 * bound by memory (one read of the input, one write of the output is all it
 * needs). The tiled rung (src/conv.cu) already stages a tile's input patch
 * in shared memory, but a thread computes one output from a 16 x 16 tile,
 * so the halo is a large share of each patch and every output costs a
 * barrier's worth of staging. Here:
 *
 *   - a block of 32 x 8 threads owns a kTileH x kTileW = 32 x 32 tile of one
 *     channel plane: it copies the tile's input patch (the halo included,
 *     zeros where the window leaves the image) into shared memory once,
 *     consecutive threads reading consecutive columns (coalesced), and the
 *     channel's KH x KW taps;
 *   - each thread then computes kRows = 4 outputs of one column, their sums
 *     in registers: the taps are read once per four outputs, and the four
 *     windows share KH - 1 rows of the patch;
 *   - KH x KW is a compile-time constant for 3 x 3 and 5 x 5 (the loops
 *     unroll into straight multiply-adds); other sizes run the same code
 *     with run-time loops.
 *
 * The input gradient at stride 1 is the same kernel: grad_in is grad_out
 * convolved with each channel's kernel turned by 180 degrees, padded by
 * dh (KH - 1) - ph (the transposed convolution); the kernel reads the taps
 * flipped (Flip) and grad_out by its strides (the gradient of a .sum() is
 * an expanded tensor: no copy). Other strides gather (src/conv_direct.cu).
 */
#include "conv_depthwise.h"
#include "conv_implicit_gemm.h" /* first, first_out */

constexpr int kTileW = 32, kThreadRows = 8, kRows = 4;
constexpr int kTileH = kThreadRows * kRows;
constexpr size_t kDepthwiseSharedLimit = 48 * 1024;

/* The launch's sizes: the input read through its strides (elements). */
struct DepthwiseTile {
    int c, h, w, oh, ow;
    int kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t in_stride[4];
    int patch_h, patch_w, tiles_y, tiles_x;
};

template <typename T, int KH, int KW, bool Flip>
__global__ void depthwise_tiled(T *out, const T *in, const T *weight, const T *bias, DepthwiseTile s)
{
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    T *patch = reinterpret_cast<T *>(&shared_bytes[0]);
    const int kh = KH ? KH : s.kh, kw = KW ? KW : s.kw, taps = kh * kw;
    T *taps_shared = patch + s.patch_h * s.patch_w;

    /* blockIdx.x -> (plane n * C + c, tile row, tile column), the column fastest. */
    int64_t b = blockIdx.x;
    const int tile_x = (int)(b % s.tiles_x);
    b /= s.tiles_x;
    const int tile_y = (int)(b % s.tiles_y);
    const int64_t plane = b / s.tiles_y;
    const int c = (int)(plane % s.c);
    const T *src = in + plane / s.c * s.in_stride[0] + c * s.in_stride[1];

    /* The patch's corner in the input: negative inside the padding. */
    const int y0 = tile_y * kTileH * s.sh - s.ph, x0 = tile_x * kTileW * s.sw - s.pw;
    for (int row = threadIdx.y; row < s.patch_h; row += kThreadRows) {
        const int y = y0 + row;
        const bool row_inside = y >= 0 && y < s.h;
        for (int col = threadIdx.x; col < s.patch_w; col += kTileW) {
            const int x = x0 + col;
            /* A zero where the window leaves the image: the sum below reads
             * every tap from the patch with no bounds test. */
            patch[row * s.patch_w + col] =
                row_inside && x >= 0 && x < s.w ? src[y * s.in_stride[2] + x * s.in_stride[3]] : T(0);
        }
    }
    const int t = threadIdx.y * kTileW + threadIdx.x;
    for (int e = t; e < taps; e += kTileW * kThreadRows)
        taps_shared[e] = weight[(int64_t)c * taps + (Flip ? taps - 1 - e : e)];
    __syncthreads(); /* the patch and taps are complete before anyone reads them */

    const int ox = tile_x * kTileW + threadIdx.x, oy0 = tile_y * kTileH + threadIdx.y * kRows;
    if (ox >= s.ow || oy0 >= s.oh)
        return; /* past the edge (no barrier follows) */
    T acc[kRows];
    MT_UNROLL for (int r = 0; r < kRows; ++r)
        acc[r] = T(0);
    const T *corner = patch + threadIdx.y * kRows * s.sh * s.patch_w + threadIdx.x * s.sw; /* row 0's window */
    MT_UNROLL for (int i = 0; i < kh; ++i) {
        MT_UNROLL for (int j = 0; j < kw; ++j) {
            const T tap = taps_shared[i * kw + j]; /* one read for kRows outputs */
            const T *p = corner + i * s.dh * s.patch_w + j * s.dw;
            MT_UNROLL for (int r = 0; r < kRows; ++r)
                acc[r] += tap * p[r * s.sh * s.patch_w];
        }
    }
    const T b0 = bias ? bias[c] : T(0);
    T *dst = out + plane * s.oh * s.ow + ox;
    MT_UNROLL for (int r = 0; r < kRows; ++r)
        if (oy0 + r < s.oh)
            dst[(int64_t)(oy0 + r) * s.ow] = acc[r] + b0;
}

/* ---- launch ----------------------------------------------------------------- */

size_t depthwise_tiled_shared_bytes(int64_t kh, int64_t kw, int sh, int sw, int dh, int dw, size_t item)
{
    const int64_t limit = (int64_t)(kDepthwiseSharedLimit / item);
    const int64_t patch_h = (int64_t)(kTileH - 1) * sh + (int64_t)dh * (kh - 1) + 1;
    const int64_t patch_w = (int64_t)(kTileW - 1) * sw + (int64_t)dw * (kw - 1) + 1;
    if (kh > limit || kw > limit || patch_h > limit || patch_w > limit || patch_h * patch_w + kh * kw > limit)
        return 0;
    return (size_t)(patch_h * patch_w + kh * kw) * item;
}

template <typename T, bool Flip>
static mt_status launch_tiled(T *out, const T *in, const T *weight, const T *bias, const DepthwiseTile &s,
                              int64_t planes, size_t shared)
{
    const int64_t blocks = planes * s.tiles_y * s.tiles_x;
    const dim3 block(kTileW, kThreadRows);
    const unsigned int grid = (unsigned int)blocks;
    if (s.kh == 3 && s.kw == 3)
        depthwise_tiled<T, 3, 3, Flip><<<grid, block, shared, mt_stream()>>>(out, in, weight, bias, s);
    else if (s.kh == 5 && s.kw == 5)
        depthwise_tiled<T, 5, 5, Flip><<<grid, block, shared, mt_stream()>>>(out, in, weight, bias, s);
    else
        depthwise_tiled<T, 0, 0, Flip><<<grid, block, shared, mt_stream()>>>(out, in, weight, bias, s);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* The tile grid of an (OH, OW) output; in_shape / in_stride the input's. */
static DepthwiseTile make_tile(const int64_t *in_shape, const int64_t *in_stride, int64_t oh, int64_t ow, int kh,
                               int kw, int sh, int sw, int ph, int pw, int dh, int dw)
{
    const int patch_h = (kTileH - 1) * sh + dh * (kh - 1) + 1, patch_w = (kTileW - 1) * sw + dw * (kw - 1) + 1;
    return DepthwiseTile{(int)in_shape[1], (int)in_shape[2], (int)in_shape[3], (int)oh, (int)ow, kh, kw, sh, sw,
                         ph, pw, dh, dw, {in_stride[0], in_stride[1], in_stride[2], in_stride[3]}, patch_h, patch_w,
                         (int)((oh + kTileH - 1) / kTileH), (int)((ow + kTileW - 1) / kTileW)};
}

mt_status depthwise_input_grad_tiled(const mt_tensor &grad_in, const mt_tensor &grad_out, const mt_tensor &weight,
                                     const DirectDims &d)
{
    const size_t item = grad_in.dtype == MT_FLOAT32 ? sizeof(float) : sizeof(double);
    const size_t shared = depthwise_tiled_shared_bytes(d.kh, d.kw, 1, 1, d.dh, d.dw, item);
    /* The transposed convolution: grad_out padded by dilation (K - 1) - padding. */
    const DepthwiseTile s = make_tile(grad_out.shape, grad_out.strides, d.h, d.w, d.kh, d.kw, 1, 1,
                                      d.dh * (d.kh - 1) - d.ph, d.dw * (d.kw - 1) - d.pw, d.dh, d.dw);
    const int64_t planes = (int64_t)d.n * d.c;
    if (grad_in.dtype == MT_FLOAT32)
        return launch_tiled<float, true>(first_out<float>(grad_in), first<float>(grad_out), first<float>(weight),
                                         nullptr, s, planes, shared);
    return launch_tiled<double, true>(first_out<double>(grad_in), first<double>(grad_out), first<double>(weight),
                                      nullptr, s, planes, shared);
}

bool depthwise_input_grad_tiled_takes(const DirectDims &d, size_t item)
{
    return d.sh == 1 && d.sw == 1 && d.ph <= d.dh * (d.kh - 1) && d.pw <= d.dw * (d.kw - 1) &&
           depthwise_tiled_shared_bytes(d.kh, d.kw, 1, 1, d.dh, d.dw, item) > 0 &&
           (int64_t)d.n * d.c * ((d.h + kTileH - 1) / kTileH) * ((d.w + kTileW - 1) / kTileW) <= INT32_MAX;
}

mt_status mt_conv2d_depthwise(mt_tensor out, mt_tensor in, mt_tensor weight, mt_tensor bias, int has_bias,
                              int stride_h, int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w)
{
    const char *func = "mt_conv2d_depthwise";
    DirectDims d;
    MT_TRY(depthwise_check(func, out, in, "in", weight, "weight", out, "out", stride_h, stride_w, pad_h, pad_w,
                           dilation_h, dilation_w, &d));
    if (has_bias)
        MT_TRY(conv_check_bias(func, out, bias, d.c_out));
    const size_t item = in.dtype == MT_FLOAT32 ? sizeof(float) : sizeof(double);
    const size_t shared = depthwise_tiled_shared_bytes(d.kh, d.kw, stride_h, stride_w, dilation_h, dilation_w, item);
    if (shared == 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "a %d x %d tile's input patch and a channel's %d x %d taps "
                       "need more than the %zu bytes of shared memory a block may use (stride (%d, %d), dilation "
                       "(%d, %d), %zu-byte elements)", kTileH, kTileW, d.kh, d.kw, kDepthwiseSharedLimit, stride_h,
                       stride_w, dilation_h, dilation_w, item);
    const DepthwiseTile s = make_tile(in.shape, in.strides, d.oh, d.ow, d.kh, d.kw, stride_h, stride_w, pad_h, pad_w,
                                      dilation_h, dilation_w);
    const int64_t planes = (int64_t)d.n * d.c;
    if (planes * s.tiles_y * s.tiles_x > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%lld blocks: more than a grid holds",
                       (long long)(planes * s.tiles_y * s.tiles_x));
    if (tensor_numel(out) == 0)
        return MT_OK;
    if (in.dtype == MT_FLOAT32)
        return launch_tiled<float, false>(first_out<float>(out), first<float>(in), first<float>(weight),
                                          has_bias ? first<float>(bias) : nullptr, s, planes, shared);
    return launch_tiled<double, false>(first_out<double>(out), first<double>(in), first<double>(weight),
                                       has_bias ? first<double>(bias) : nullptr, s, planes, shared);
}
