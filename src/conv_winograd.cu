/*
 * conv_winograd.cu: the Winograd rung of the convolution ladder, F(2x2, 3x3),
 * for dense 3x3 convolutions at stride 1 and their gradients
 * (mt_conv2d_winograd_filter, _input, _output, and the weight gradient's
 * _output_grad, _filter_grad; minitensor/ops/conv.py strings them together).
 *
 * The implicit GEMM spends 9 multiply-adds on each output pixel and input
 * channel. Winograd's minimal filtering computes a 2x2 block of outputs
 * from a 4x4 tile of the input with 16 products instead of 36:
 *
 *     Y = A^T [ (G g G^T) (*) (B^T d B) ] A
 *
 * with g the 3x3 filter, d the 4x4 input tile (overlapping its neighbours
 * by 2), (*) the element-wise product and the fixed matrices
 *
 *     B^T = | 1  0 -1  0 |     G = | 1    0    0   |     A^T = | 1  1  1  0 |
 *           | 0  1  1  0 |         | 1/2  1/2  1/2 |           | 0  1 -1 -1 |
 *           | 0 -1  1  0 |         | 1/2 -1/2  1/2 |
 *           | 0  1  0 -1 |         | 0    0    1   |
 *
 * Summed over the input channels, position xi (0..15) of the 4x4 product is
 * a matrix product: M[xi] (K x P) = U[xi] (K x C) @ V[xi] (C x P), for K
 * output channels, C input channels and P tiles (N x tiles_h x tiles_w).
 * So the rung is three small kernels around 16 matrix products, which the
 * matmul ladder's best rung runs (one batched call):
 *
 *   1. winograd_filter:  U = G g G^T for every (k, c): 9 loads, 16 stores;
 *   2. winograd_input:   V = B^T d B for every (c, tile): only additions;
 *   3. (the batched matmul, by the caller);
 *   4. winograd_output:  Y = A^T M A + bias for every (k, tile), the 2x2
 *      outputs written where they fall inside the image (an odd side's last
 *      tile has one row or column in the padding).
 *
 * The products do 16/36 of the implicit GEMM's multiply-adds (2.25x
 * fewer); the price is memory: V and M are 16/4 = 4 times the input and
 * output. That trade pays where channels are many and images small (a
 * ResNet's deeper layers), which is also where cuDNN leaves the GEMM (its
 * profile there runs an FFT). Every coefficient above is a power of two, so
 * the transforms add no rounding of their own beyond the sums' order.
 *
 * The input gradient of a stride-1 convolution is a convolution too: of
 * grad_out, padded by 2 - pad, with each filter turned by 180 degrees and
 * the in/out channels swapped (flip: U (16, C, K) from weight (K, C, 3, 3)).
 *
 * The weight gradient runs the filter and output steps backwards. A tile's
 * dU = dM (*) V with dM = A dY A^T (winograd_output_grad), summed over the
 * tiles: 16 products dU[xi] (K x C) = dM[xi] (K x P) @ V[xi]^T (P x C),
 * with V the forward's input step; then dg = G^T dU G (winograd_filter_grad).
 * P is long (every tile of the batch) and K x C small, so the caller cuts P
 * into slices, one product each, to fill the GPU; the last step adds them.
 *
 * One thread per (channel, tile) (TileThread): consecutive threads take
 * consecutive tiles, so V's and M's rows are written and read coalesced.
 */
#include "conv_winograd.h"
#include "conv_implicit_gemm.h" /* first, first_out */

constexpr int kThreads = 256;

/* The sizes of one call: the input (N, C, H, W), K output channels, the
 * output (OH, OW) and its grid of 2x2 tiles, the padding. */
struct WinogradDims {
    int n, c, k, h, w, oh, ow, tiles_h, tiles_w, pad_h, pad_w;
    MT_HD int64_t tiles() const { return (int64_t)n * tiles_h * tiles_w; }
};

/* What a thread of a (channel, tile) kernel works on: tile (image, ty, tx)
 * of one channel, and where its 16 values lie in a (16, channels, P)
 * buffer: at + xi * plane. Tiles run along a row, then down, then on to the
 * next image; consecutive threads take consecutive tiles, so the buffer is
 * written and read coalesced. */
struct TileThread {
    int channel, ty, tx;
    int64_t image, at, plane;
};

/* Thread e's (channel, tile) among `channels` x s.tiles(); false past the end. */
MT_HD bool tile_thread(int64_t e, int channels, const WinogradDims &s, TileThread *w)
{
    const int64_t P = s.tiles();
    if (e >= (int64_t)channels * P)
        return false;
    const int64_t p = e % P;
    w->channel = (int)(e / P);
    w->tx = (int)(p % s.tiles_w);
    w->ty = (int)(p / s.tiles_w % s.tiles_h);
    w->image = p / ((int64_t)s.tiles_w * s.tiles_h);
    w->at = e; /* = channel * P + p */
    w->plane = (int64_t)channels * P;
    return true;
}

/* U[xi][row][col] = (G g G^T)[xi] with g = weight[k][c] (row k, column c) or,
 * under Flip, g[i][j] = weight[k][c][2 - i][2 - j] (row c, column k). */
template <typename T, bool Flip>
__global__ void winograd_filter(T *u, const T *weight, int K, int C)
{
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (int64_t)K * C)
        return;
    const int k = (int)(e / C), c = (int)(e % C);
    T g[3][3];
    const T *w = weight + e * 9;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            g[i][j] = Flip ? w[(2 - i) * 3 + (2 - j)] : w[i * 3 + j];
    /* t = G g (4 x 3), then t G^T (4 x 4). */
    T t[4][3];
    for (int j = 0; j < 3; ++j) {
        t[0][j] = g[0][j];
        t[1][j] = T(0.5) * (g[0][j] + g[1][j] + g[2][j]);
        t[2][j] = T(0.5) * (g[0][j] - g[1][j] + g[2][j]);
        t[3][j] = g[2][j];
    }
    const int64_t rows = Flip ? C : K, cols = Flip ? K : C;
    const int64_t at = Flip ? (int64_t)c * K + k : (int64_t)k * C + c, plane = rows * cols;
    for (int i = 0; i < 4; ++i) {
        u[(i * 4 + 0) * plane + at] = t[i][0];
        u[(i * 4 + 1) * plane + at] = T(0.5) * (t[i][0] + t[i][1] + t[i][2]);
        u[(i * 4 + 2) * plane + at] = T(0.5) * (t[i][0] - t[i][1] + t[i][2]);
        u[(i * 4 + 3) * plane + at] = t[i][2];
    }
}

/* V[xi][c][p] = (B^T d B)[xi] of the 4x4 input tile of p = (n, ty, tx),
 * whose corner is (2 ty - pad_h, 2 tx - pad_w): zeros outside the image. */
template <typename T>
__global__ void winograd_input(T *v, const T *in, WinogradDims s)
{
    TileThread w;
    if (!tile_thread((int64_t)blockIdx.x * blockDim.x + threadIdx.x, s.c, s, &w))
        return;
    const T *plane = in + (w.image * s.c + w.channel) * s.h * s.w;
    const int y0 = 2 * w.ty - s.pad_h, x0 = 2 * w.tx - s.pad_w;
    T d[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
            const int y = y0 + i, x = x0 + j;
            d[i][j] = y >= 0 && y < s.h && x >= 0 && x < s.w ? plane[(int64_t)y * s.w + x] : T(0);
        }
    /* t = B^T d, then t B. */
    T t[4][4];
    for (int j = 0; j < 4; ++j) {
        t[0][j] = d[0][j] - d[2][j];
        t[1][j] = d[1][j] + d[2][j];
        t[2][j] = d[2][j] - d[1][j];
        t[3][j] = d[1][j] - d[3][j];
    }
    for (int i = 0; i < 4; ++i) {
        v[(i * 4 + 0) * w.plane + w.at] = t[i][0] - t[i][2];
        v[(i * 4 + 1) * w.plane + w.at] = t[i][1] + t[i][2];
        v[(i * 4 + 2) * w.plane + w.at] = t[i][2] - t[i][1];
        v[(i * 4 + 3) * w.plane + w.at] = t[i][1] - t[i][3];
    }
}

/* out[n][k][2 ty + i][2 tx + j] = (A^T m A)[i][j] + bias[k] of M's 16 values
 * at (k, p), for the outputs inside the (OH, OW) image. */
template <typename T>
__global__ void winograd_output(T *out, const T *m, const T *bias, WinogradDims s)
{
    TileThread w;
    if (!tile_thread((int64_t)blockIdx.x * blockDim.x + threadIdx.x, s.k, s, &w))
        return;
    T x[4][4];
    for (int xi = 0; xi < 16; ++xi)
        x[xi / 4][xi % 4] = m[xi * w.plane + w.at];
    /* t = A^T x (2 x 4), then t A (2 x 2). */
    T t[2][4];
    for (int j = 0; j < 4; ++j) {
        t[0][j] = x[0][j] + x[1][j] + x[2][j];
        t[1][j] = x[1][j] - x[2][j] - x[3][j];
    }
    const T b = bias ? bias[w.channel] : T(0);
    T *dst = out + (w.image * s.k + w.channel) * s.oh * s.ow;
    for (int i = 0; i < 2; ++i) {
        const int y = 2 * w.ty + i;
        if (y >= s.oh)
            continue; /* the last tile of an odd side */
        const T y0 = t[i][0] + t[i][1] + t[i][2], y1 = t[i][1] - t[i][2] - t[i][3];
        const int x0 = 2 * w.tx;
        dst[(int64_t)y * s.ow + x0] = y0 + b;
        if (x0 + 1 < s.ow)
            dst[(int64_t)y * s.ow + x0 + 1] = y1 + b;
    }
}

/* ---- the weight gradient: the filter and output steps run backwards -------- */

/* dM[xi][k][p] = (A e A^T)[xi] of the 2x2 block e of grad_out at tile p:
 * since Y = A^T M A, a change dY of the outputs came from dM = A dY A^T.
 * An odd side's outputs past the image were never written, so their
 * gradient is zero (the forward's mirror of skipping them). */
template <typename T>
__global__ void winograd_output_grad(T *dm, const T *grad, WinogradDims s)
{
    TileThread w;
    if (!tile_thread((int64_t)blockIdx.x * blockDim.x + threadIdx.x, s.k, s, &w))
        return;
    const T *src = grad + (w.image * s.k + w.channel) * s.oh * s.ow;
    T g[2][2];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
            const int y = 2 * w.ty + i, x = 2 * w.tx + j;
            g[i][j] = y < s.oh && x < s.ow ? src[(int64_t)y * s.ow + x] : T(0);
        }
    /* t = A g (4 x 2), then t A^T (4 x 4), with A = (A^T)^T = [1 0; 1 1; 1 -1; 0 -1]. */
    T t[4][2];
    for (int j = 0; j < 2; ++j) {
        t[0][j] = g[0][j];
        t[1][j] = g[0][j] + g[1][j];
        t[2][j] = g[0][j] - g[1][j];
        t[3][j] = -g[1][j];
    }
    for (int i = 0; i < 4; ++i) {
        dm[(i * 4 + 0) * w.plane + w.at] = t[i][0];
        dm[(i * 4 + 1) * w.plane + w.at] = t[i][0] + t[i][1];
        dm[(i * 4 + 2) * w.plane + w.at] = t[i][0] - t[i][1];
        dm[(i * 4 + 3) * w.plane + w.at] = -t[i][1];
    }
}

/* weight_grad[k][c] = G^T dU G with dU[xi] = the sum over s of du[xi][s][k][c]:
 * since U = G g G^T, a change dU came from dg = G^T dU G. The caller's
 * products come in `slices` partial sums (each over a run of tiles, so that
 * the products fill the GPU), added here in slice order: the same sum on
 * every run. Consecutive threads take consecutive c, so du is read
 * coalesced. */
template <typename T>
__global__ void winograd_filter_grad(T *weight_grad, const T *du, int slices, int K, int C)
{
    const int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t plane = (int64_t)K * C;
    if (e >= plane)
        return;
    T x[4][4];
    for (int xi = 0; xi < 16; ++xi) {
        T sum = T(0);
        for (int sl = 0; sl < slices; ++sl)
            sum += du[((int64_t)xi * slices + sl) * plane + e];
        x[xi / 4][xi % 4] = sum;
    }
    /* t = G^T x (3 x 4), then t G (3 x 3), with G^T = [1 1/2 1/2 0; 0 1/2 -1/2 0; 0 1/2 1/2 1]. */
    T t[3][4];
    for (int j = 0; j < 4; ++j) {
        t[0][j] = x[0][j] + T(0.5) * (x[1][j] + x[2][j]);
        t[1][j] = T(0.5) * (x[1][j] - x[2][j]);
        t[2][j] = T(0.5) * (x[1][j] + x[2][j]) + x[3][j];
    }
    T *w = weight_grad + e * 9;
    for (int i = 0; i < 3; ++i) {
        w[i * 3 + 0] = t[i][0] + T(0.5) * (t[i][1] + t[i][2]);
        w[i * 3 + 1] = T(0.5) * (t[i][1] - t[i][2]);
        w[i * 3 + 2] = T(0.5) * (t[i][1] + t[i][2]) + t[i][3];
    }
}

/* ---- the entry points ----------------------------------------------------- */

static unsigned int blocks_for(int64_t threads)
{
    return (unsigned int)((threads + kThreads - 1) / kThreads);
}

/* The checks every entry point makes: valid descriptors, one float dtype,
 * contiguous operands of the given ranks, the output apart from the input. */
static mt_status check_pair(const char *func, const mt_tensor &out, const char *out_name, int out_rank,
                            const mt_tensor &in, const char *in_name, int in_rank)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, out_name, &out));
    MT_TRY(mt_check_extent(func, out_name, &out));
    MT_TRY(mt_check_tensor(func, in_name, &in));
    MT_TRY(mt_check_extent(func, in_name, &in));
    MT_TRY(mt_check_same_dtype(func, &in, in_name, &out, out_name));
    MT_TRY(mt_check_float(func, in_name, &in));
    if (in.ndim != in_rank || !(tensor_numel(in) == 0 || is_contiguous(in)))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s must be a contiguous %d-D tensor", in_name, in_rank);
    if (out.ndim != out_rank || !(tensor_numel(out) == 0 || is_contiguous(out)))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s must be a contiguous %d-D tensor", out_name, out_rank);
    if (tensors_overlap(out, in))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s overlaps %s", out_name, in_name);
    return MT_OK;
}

/* The tile grid of an (OH, OW) output, every count below 2^31. */
static mt_status tile_dims(const char *func, int64_t n, int64_t c, int64_t k, int64_t h, int64_t w, int64_t oh,
                           int64_t ow, int pad_h, int pad_w, WinogradDims *s)
{
    const int64_t tiles_h = (oh + 1) / 2, tiles_w = (ow + 1) / 2, tiles = n * tiles_h * tiles_w;
    if (tiles * 16 * (c > k ? c : k) > INT64_C(1) << 46 || h > INT32_MAX || w > INT32_MAX || oh > INT32_MAX ||
        ow > INT32_MAX || c > INT32_MAX || k > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "sizes too large for the Winograd rung (%lld tiles, %lld "
                       "and %lld channels)", (long long)tiles, (long long)c, (long long)k);
    *s = WinogradDims{(int)n, (int)c, (int)k, (int)h, (int)w, (int)oh, (int)ow, (int)tiles_h, (int)tiles_w, pad_h,
                      pad_w};
    return MT_OK;
}

/* The tile grid of an output-sized image (N, K, OH, OW), and the check that
 * buf is its (16, K, P): the output step's operands and its gradient's. */
static mt_status image_tiles(const char *func, const mt_tensor &image, const char *image_name,
                             const mt_tensor &buf, const char *buf_name, WinogradDims *s)
{
    const int64_t n = image.shape[0], k = image.shape[1], oh = image.shape[2], ow = image.shape[3];
    MT_TRY(tile_dims(func, n, 0, k, 0, 0, oh, ow, 0, 0, s));
    if (buf.shape[0] != 16 || buf.shape[1] != k || buf.shape[2] != s->tiles())
        return mt_fail(MT_ERR_SHAPE, func, "%s must be (16, %lld, %lld) for %s (%lld, %lld, %lld, %lld)", buf_name,
                       (long long)k, (long long)s->tiles(), image_name, (long long)n, (long long)k, (long long)oh,
                       (long long)ow);
    return MT_OK;
}

mt_status mt_conv2d_winograd_filter(mt_tensor u, mt_tensor weight, int flip)
{
    const char *func = "mt_conv2d_winograd_filter";
    MT_TRY(check_pair(func, u, "u", 3, weight, "weight", 4));
    const int64_t K = weight.shape[0], C = weight.shape[1];
    if (weight.shape[2] != 3 || weight.shape[3] != 3)
        return mt_fail(MT_ERR_SHAPE, func, "weight must be (K, C, 3, 3), got (%lld, %lld, %lld, %lld)",
                       (long long)K, (long long)C, (long long)weight.shape[2], (long long)weight.shape[3]);
    const int64_t rows = flip ? C : K, cols = flip ? K : C;
    if (u.shape[0] != 16 || u.shape[1] != rows || u.shape[2] != cols)
        return mt_fail(MT_ERR_SHAPE, func, "u must be (16, %lld, %lld) for weight (%lld, %lld, 3, 3)%s",
                       (long long)rows, (long long)cols, (long long)K, (long long)C, flip ? ", flipped" : "");
    if (K * C > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%lld filters: more than the rung indexes", (long long)(K * C));
    if (K * C == 0)
        return MT_OK;
    const unsigned int grid = blocks_for(K * C);
    if (weight.dtype == MT_FLOAT32) {
        if (flip)
            winograd_filter<float, true><<<grid, kThreads, 0, mt_stream()>>>(first_out<float>(u), first<float>(weight),
                                                                             (int)K, (int)C);
        else
            winograd_filter<float, false><<<grid, kThreads, 0, mt_stream()>>>(first_out<float>(u),
                                                                              first<float>(weight), (int)K, (int)C);
    } else if (flip) {
        winograd_filter<double, true><<<grid, kThreads, 0, mt_stream()>>>(first_out<double>(u), first<double>(weight),
                                                                          (int)K, (int)C);
    } else {
        winograd_filter<double, false><<<grid, kThreads, 0, mt_stream()>>>(first_out<double>(u),
                                                                           first<double>(weight), (int)K, (int)C);
    }
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_conv2d_winograd_input(mt_tensor v, mt_tensor in, int pad_h, int pad_w)
{
    const char *func = "mt_conv2d_winograd_input";
    MT_TRY(check_pair(func, v, "v", 3, in, "in", 4));
    if (pad_h < 0 || pad_w < 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "padding (%d, %d) must be >= 0", pad_h, pad_w);
    const int64_t n = in.shape[0], c = in.shape[1], h = in.shape[2], w = in.shape[3];
    const int64_t oh = h + 2 * (int64_t)pad_h - 2, ow = w + 2 * (int64_t)pad_w - 2;
    if (oh < 1 || ow < 1)
        return mt_fail(MT_ERR_SHAPE, func, "a 3x3 window does not fit in (%lld, %lld) padded by (%d, %d)",
                       (long long)h, (long long)w, pad_h, pad_w);
    WinogradDims s;
    MT_TRY(tile_dims(func, n, c, 0, h, w, oh, ow, pad_h, pad_w, &s));
    if (v.shape[0] != 16 || v.shape[1] != c || v.shape[2] != s.tiles())
        return mt_fail(MT_ERR_SHAPE, func, "v must be (16, %lld, %lld) for in (%lld, %lld, %lld, %lld) padded by "
                       "(%d, %d)", (long long)c, (long long)s.tiles(), (long long)n, (long long)c, (long long)h,
                       (long long)w, pad_h, pad_w);
    if (tensor_numel(v) == 0)
        return MT_OK;
    const unsigned int grid = blocks_for(c * s.tiles());
    if (in.dtype == MT_FLOAT32)
        winograd_input<float><<<grid, kThreads, 0, mt_stream()>>>(first_out<float>(v), first<float>(in), s);
    else
        winograd_input<double><<<grid, kThreads, 0, mt_stream()>>>(first_out<double>(v), first<double>(in), s);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_conv2d_winograd_output(mt_tensor out, mt_tensor m, mt_tensor bias, int has_bias)
{
    const char *func = "mt_conv2d_winograd_output";
    MT_TRY(check_pair(func, out, "out", 4, m, "m", 3));
    const int64_t k = out.shape[1];
    WinogradDims s;
    MT_TRY(image_tiles(func, out, "out", m, "m", &s));
    if (has_bias) {
        MT_TRY(check_pair(func, out, "out", 4, bias, "bias", 1));
        if (bias.shape[0] != k)
            return mt_fail(MT_ERR_SHAPE, func, "bias has %lld elements, out %lld channels", (long long)bias.shape[0],
                           (long long)k);
    }
    if (tensor_numel(out) == 0)
        return MT_OK;
    const unsigned int grid = blocks_for(k * s.tiles());
    if (out.dtype == MT_FLOAT32)
        winograd_output<float><<<grid, kThreads, 0, mt_stream()>>>(first_out<float>(out), first<float>(m),
                                                                   has_bias ? first<float>(bias) : nullptr, s);
    else
        winograd_output<double><<<grid, kThreads, 0, mt_stream()>>>(first_out<double>(out), first<double>(m),
                                                                    has_bias ? first<double>(bias) : nullptr, s);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_conv2d_winograd_output_grad(mt_tensor dm, mt_tensor grad)
{
    const char *func = "mt_conv2d_winograd_output_grad";
    MT_TRY(check_pair(func, dm, "dm", 3, grad, "grad", 4));
    const int64_t k = grad.shape[1];
    WinogradDims s;
    MT_TRY(image_tiles(func, grad, "grad", dm, "dm", &s));
    if (tensor_numel(dm) == 0)
        return MT_OK;
    const unsigned int grid = blocks_for(k * s.tiles());
    if (grad.dtype == MT_FLOAT32)
        winograd_output_grad<float><<<grid, kThreads, 0, mt_stream()>>>(first_out<float>(dm), first<float>(grad), s);
    else
        winograd_output_grad<double><<<grid, kThreads, 0, mt_stream()>>>(first_out<double>(dm), first<double>(grad),
                                                                         s);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_conv2d_winograd_filter_grad(mt_tensor weight_grad, mt_tensor du)
{
    const char *func = "mt_conv2d_winograd_filter_grad";
    MT_TRY(check_pair(func, weight_grad, "weight_grad", 4, du, "du", 4));
    const int64_t K = weight_grad.shape[0], C = weight_grad.shape[1], slices = du.shape[1];
    if (weight_grad.shape[2] != 3 || weight_grad.shape[3] != 3 || du.shape[0] != 16 || du.shape[2] != K ||
        du.shape[3] != C)
        return mt_fail(MT_ERR_SHAPE, func, "du must be (16, slices, K, C) for weight_grad (K, C, 3, 3), got du "
                       "(%lld, %lld, %lld, %lld) and weight_grad (%lld, %lld, %lld, %lld)", (long long)du.shape[0],
                       (long long)slices, (long long)du.shape[2], (long long)du.shape[3], (long long)K, (long long)C,
                       (long long)weight_grad.shape[2], (long long)weight_grad.shape[3]);
    if (K * C > INT32_MAX || slices > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%lld filters in %lld slices: more than the rung indexes",
                       (long long)(K * C), (long long)slices);
    if (K * C == 0)
        return MT_OK;
    const unsigned int grid = blocks_for(K * C);
    if (du.dtype == MT_FLOAT32)
        winograd_filter_grad<float><<<grid, kThreads, 0, mt_stream()>>>(first_out<float>(weight_grad),
                                                                        first<float>(du), (int)slices, (int)K,
                                                                        (int)C);
    else
        winograd_filter_grad<double><<<grid, kThreads, 0, mt_stream()>>>(first_out<double>(weight_grad),
                                                                         first<double>(du), (int)slices, (int)K,
                                                                         (int)C);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}
