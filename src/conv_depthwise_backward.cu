/*
 * conv_depthwise_backward.cu: the gradients of a depthwise convolution, the
 * depthwise rung's backward.
 *
 * Depthwise: groups = C = C_out, so output channel c reads input channel c
 * alone, through its own KH x KW weights (weight (C, 1, KH, KW)):
 *
 *     out[n, c, oy, ox] = sum_{i, j} weight[c, i, j] * in[n, c, oy*sh - ph + i*dh, ox*sw - pw + j*dw]
 *
 * A group's matrix product has a single row (M = 1) and K = KH * KW: as a
 * GEMM, 127 of the 128 rows of a tile multiply zeros. Both gradients are
 * short sums instead, one output element per thread or per block:
 *
 *   input gradient   grad_in[n, c, y, x] = sum over the taps (i, j) whose
 *                    window read (y, x) of weight[c, i, j] * grad_out[n, c,
 *                    oy, ox], oy * sh = y + ph - i * dh (a convolution of
 *                    grad_out with the flipped kernel). One thread per input
 *                    element gathers its KH x KW output neighbours and
 *                    writes its own element: no atomics, a fixed order.
 *   weight gradient  grad_weight[c, i, j] = sum over (n, oy, ox) of
 *                    grad_out[n, c, oy, ox] * in[n, c, oy*sh - ph + i*dh,
 *                    ox*sw - pw + j*dw]: one block per (channel, tap), each
 *                    thread a strided share of the N OH OW products, then the
 *                    block's tree (block_reduce.h). One pass, and the same
 *                    order every run (deterministic, as torch's is not).
 *
 * The next rung: a block per channel and tile of output rows with the rows
 * staged in shared memory (each grad_out element is read KH * KW times
 * here, from the cache), and the taps summed from one staged tile.
 */
#include "conv_implicit_gemm.h" /* first, first_out */
#include "block_reduce.h"
#include "combine.h"

/* The sizes; N C H W and N C OH OW each below 2^31 (checked at launch). */
struct DepthwiseDims {
    int n, c, h, w, oh, ow;
    int kh, kw, sh, sw, ph, pw, dh, dw;
};

/* One thread per input element e = ((n * C + c) * H + y) * W + x. */
template <typename T>
__global__ void depthwise_input_grad(T *grad_in, const T *grad_out, const T *weight, DepthwiseDims d)
{
    const int64_t total = (int64_t)d.n * d.c * d.h * d.w;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
         e += (int64_t)gridDim.x * blockDim.x) {
        const int x = (int)(e % d.w), y = (int)(e / d.w % d.h);
        const int64_t plane = e / ((int64_t)d.w * d.h); /* n * C + c */
        const T *go = grad_out + plane * d.oh * d.ow;
        const T *wc = weight + (plane % d.c) * d.kh * d.kw;
        T acc = T(0);
        for (int i = 0; i < d.kh; ++i) {
            /* The output row whose tap i read row y: none when it lies above
             * the first row, past the last, or between two (stride > 1). */
            const int ny = y + d.ph - i * d.dh;
            if (ny < 0 || ny % d.sh != 0 || ny / d.sh >= d.oh)
                continue;
            const T *go_row = go + (int64_t)(ny / d.sh) * d.ow;
            for (int j = 0; j < d.kw; ++j) {
                const int nx = x + d.pw - j * d.dw;
                if (nx < 0 || nx % d.sw != 0 || nx / d.sw >= d.ow)
                    continue;
                acc += wc[i * d.kw + j] * go_row[nx / d.sw];
            }
        }
        grad_in[e] = acc;
    }
}

/* Block b computes grad_weight[b] = tap (i, j) of channel c, b = c * KH * KW + i * KW + j.
 * kBlockSize threads (block_reduce's power of two). */
template <typename T>
__global__ void depthwise_weight_grad(T *grad_weight, const T *grad_out, const T *in, DepthwiseDims d)
{
    __shared__ BlockScratch<T> scratch;
    const int taps = d.kh * d.kw;
    const int c = (int)(blockIdx.x / taps), tap = (int)(blockIdx.x % taps);
    const int di = (tap / d.kw) * d.dh - d.ph, dj = (tap % d.kw) * d.dw - d.pw; /* the tap's offset from a window's corner */
    const int ohw = d.oh * d.ow, count = d.n * ohw; /* the products to sum */
    T acc = T(0);
    for (int p = threadIdx.x; p < count; p += blockDim.x) {
        const int img = p / ohw, pix = p - img * ohw;
        const int oy = pix / d.ow, ox = pix - oy * d.ow;
        const int y = oy * d.sh + di, x = ox * d.sw + dj;
        if (y < 0 || y >= d.h || x < 0 || x >= d.w)
            continue; /* the padding: zero */
        const int64_t plane = (int64_t)img * d.c + c;
        acc += grad_out[plane * ohw + pix] * in[(plane * d.h + y) * d.w + x];
    }
    const T total = block_reduce(scratch, acc, CombineSum<T>());
    if (threadIdx.x == 0)
        grad_weight[blockIdx.x] = total;
}

/* ---- the entry points ------------------------------------------------------ */

static int64_t depthwise_out_size(int64_t size, int64_t kernel, int stride, int pad, int dilation)
{
    const int64_t span = (int64_t)dilation * (kernel - 1) + 1;
    const int64_t padded = size + 2 * (int64_t)pad;
    return padded < span ? 0 : (padded - span) / stride + 1;
}

/* The checks both gradients make: `big` (grad_in, or in) of shape (N, C, H,
 * W), grad_out (N, C, OH, OW), weight-shaped (C, 1, KH, KW) `wt`; out is
 * the gradient written (one of big and wt). Fills d. */
static mt_status depthwise_check(const char *func, const mt_tensor &out, const char *out_name,
                                 const mt_tensor &grad_out, const mt_tensor &big, const char *big_name,
                                 const mt_tensor &wt, const char *wt_name, int sh, int sw, int ph, int pw, int dh,
                                 int dw, DepthwiseDims *d)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, out_name, &out));
    const mt_tensor *all[] = {&grad_out, &big, &wt};
    const char *names[] = {"grad_out", big_name, wt_name};
    for (int k = 0; k < 3; ++k) {
        MT_TRY(mt_check_tensor(func, names[k], all[k]));
        MT_TRY(mt_check_extent(func, names[k], all[k]));
        MT_TRY(mt_check_same_dtype(func, all[k], names[k], &grad_out, "grad_out"));
        if (all[k]->ndim != 4 || !(tensor_numel(*all[k]) == 0 || is_contiguous(*all[k])))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s must be a contiguous 4-D tensor", names[k]);
    }
    MT_TRY(mt_check_float(func, "grad_out", &grad_out));
    if (sh < 1 || sw < 1 || dh < 1 || dw < 1 || ph < 0 || pw < 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "stride (%d, %d) and dilation (%d, %d) must be >= 1, "
                       "padding (%d, %d) >= 0", sh, sw, dh, dw, ph, pw);
    char b_buf[96], w_buf[96], g_buf[96];
    const int64_t n = big.shape[0], c = big.shape[1], h = big.shape[2], w = big.shape[3];
    const int64_t kh = wt.shape[2], kw = wt.shape[3];
    if (wt.shape[0] != c || wt.shape[1] != 1 || kh < 1 || kw < 1)
        return mt_fail(MT_ERR_SHAPE, func, "%s %s must be (C, 1, KH, KW) for %s %s (a depthwise convolution: "
                       "groups = C = C_out, a non-empty kernel)", wt_name, mt_shape_str(&wt, w_buf, 96), big_name,
                       mt_shape_str(&big, b_buf, 96));
    const int64_t oh = depthwise_out_size(h, kh, sh, ph, dh), ow = depthwise_out_size(w, kw, sw, pw, dw);
    if (oh < 1 || ow < 1)
        return mt_fail(MT_ERR_SHAPE, func, "%s %s padded by (%d, %d) is smaller than the kernel (%lld, %lld) with "
                       "dilation (%d, %d): no window fits", big_name, mt_shape_str(&big, b_buf, 96), ph, pw,
                       (long long)kh, (long long)kw, dh, dw);
    if (grad_out.shape[0] != n || grad_out.shape[1] != c || grad_out.shape[2] != oh || grad_out.shape[3] != ow)
        return mt_fail(MT_ERR_SHAPE, func, "grad_out %s must be (%lld, %lld, %lld, %lld), the output of %s %s "
                       "convolved by %s %s", mt_shape_str(&grad_out, g_buf, 96), (long long)n, (long long)c,
                       (long long)oh, (long long)ow, big_name, mt_shape_str(&big, b_buf, 96), wt_name,
                       mt_shape_str(&wt, w_buf, 96));
    /* int indices inside the kernels: the padded sides, N C H W, N C OH OW, the taps. */
    const int64_t limit = INT32_MAX;
    if (h + 2 * (int64_t)ph > limit || w + 2 * (int64_t)pw > limit || kh * kw > limit || c * kh * kw > limit ||
        n * c * h * w > limit || n * c * oh * ow > limit)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s %s with %s %s: a size reaches 2^31, more than these "
                       "kernels' 32-bit indices hold", big_name, mt_shape_str(&big, b_buf, 96), wt_name,
                       mt_shape_str(&wt, w_buf, 96));
    for (int k = 0; k < 3; ++k)
        if (all[k] != &out && tensors_overlap(out, *all[k]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s overlaps %s", out_name, names[k]);
    *d = DepthwiseDims{(int)n, (int)c, (int)h, (int)w, (int)oh, (int)ow, (int)kh, (int)kw, sh, sw, ph, pw, dh, dw};
    return MT_OK;
}

mt_status mt_conv2d_depthwise_input_grad(mt_tensor grad_in, mt_tensor grad_out, mt_tensor weight, int stride_h,
                                         int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w)
{
    const char *func = "mt_conv2d_depthwise_input_grad";
    DepthwiseDims d;
    MT_TRY(depthwise_check(func, grad_in, "grad_in", grad_out, grad_in, "grad_in", weight, "weight", stride_h,
                           stride_w, pad_h, pad_w, dilation_h, dilation_w, &d));
    const int64_t count = tensor_numel(grad_in);
    if (count == 0)
        return MT_OK;
    if (grad_in.dtype == MT_FLOAT32)
        depthwise_input_grad<float><<<grid_size(count, kBlockSize), kBlockSize, 0, mt_stream()>>>(
            first_out<float>(grad_in), first<float>(grad_out), first<float>(weight), d);
    else
        depthwise_input_grad<double><<<grid_size(count, kBlockSize), kBlockSize, 0, mt_stream()>>>(
            first_out<double>(grad_in), first<double>(grad_out), first<double>(weight), d);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_conv2d_depthwise_weight_grad(mt_tensor grad_weight, mt_tensor grad_out, mt_tensor in, int stride_h,
                                          int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w)
{
    const char *func = "mt_conv2d_depthwise_weight_grad";
    DepthwiseDims d;
    MT_TRY(depthwise_check(func, grad_weight, "grad_weight", grad_out, in, "in", grad_weight, "grad_weight",
                           stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, &d));
    const int64_t blocks = tensor_numel(grad_weight); /* one per (channel, tap); an empty batch sums to 0 */
    if (blocks == 0)
        return MT_OK;
    if (grad_weight.dtype == MT_FLOAT32)
        depthwise_weight_grad<float><<<(unsigned int)blocks, kBlockSize, 0, mt_stream()>>>(
            first_out<float>(grad_weight), first<float>(grad_out), first<float>(in), d);
    else
        depthwise_weight_grad<double><<<(unsigned int)blocks, kBlockSize, 0, mt_stream()>>>(
            first_out<double>(grad_weight), first<double>(grad_out), first<double>(in), d);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}
