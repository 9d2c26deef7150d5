/*
 * conv.cu: 2-D convolution in one kernel, the tiled rung.
 *
 * out[n, co, y, x] = bias[co] + sum over the input channels c of co's group
 * and the taps (i, j) of weight[co, c, i, j] * in[n, c, y*sh - ph + i*dh,
 * x*sw - pw + j*dw] (torch's conv2d: a cross-correlation, zero padding).
 * The im2col rung (F.conv2d) copies every window of the input into a
 * (C KH KW) x (OH OW) matrix, KH * KW times the input's size, and multiplies
 * it by the weights. This kernel reads the input where it lies:
 *
 *   - a block computes a kTile x kTile tile of output pixels of one image n
 *     and one output channel co, one thread per pixel, its sum in a register;
 *   - for each input channel of the group, the block copies into shared
 *     memory the input patch its tile reads, the tile plus its halo:
 *     (kTile - 1) * stride + (K - 1) * dilation + 1 elements per dim
 *     (neighbouring outputs' windows overlap, so each input element is read
 *     from global memory once per block, not once per tap), and the
 *     channel's KH x KW weights, which every thread uses;
 *   - each thread then sums its window's KH * KW products from shared memory.
 *
 * The patch's size is known only at launch (it grows with the stride, the
 * kernel size and the dilation), so it is dynamic shared memory; a launch
 * needing more than the 48 KiB every GPU gives without an opt-in is refused.
 * The teaching version of the idea: one output channel a block, so each
 * patch is loaded once per output channel; the next rungs compute several
 * output channels from one patch, or go back to a matrix product (implicit
 * GEMM) for the tensor cores.
 */
#include "ops_common.h"

/* Output pixels per block side (one thread each: 256 threads), and the
 * dynamic shared memory a block may use without cudaFuncSetAttribute. */
constexpr int kTile = 16;
constexpr size_t kConvSharedLimit = 48 * 1024;

/* What a block needs to know about the shapes (sizes in elements). */
struct ConvShape {
    int64_t in_channels, height, width;      /* C, H, W of the input */
    int64_t out_channels, out_h, out_w;      /* C_out, OH, OW */
    int64_t group_in, group_out;             /* C / groups, C_out / groups */
    int kh, kw, sh, sw, ph, pw, dh, dw;      /* kernel, stride, padding, dilation */
    int patch_h, patch_w;                    /* the tile's input patch, halo included */
    int64_t tiles_y, tiles_x;                /* tiles per output plane */
};

template <typename T>
__global__ void conv2d_tiled(T *out, const T *in, const T *weight, const T *bias, ConvShape s)
{
    /* One buffer of bytes, used as T: a template cannot declare
     * `extern __shared__ T buf[]` (the float and double kernels would
     * declare one symbol with two types). The patch, then the weights. */
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    const auto shared = reinterpret_cast<T *>(&shared_bytes[0]);
    const int patch_size = s.patch_h * s.patch_w;
    const int taps = s.kh * s.kw;

    /* blockIdx.x -> (n, co, tile row, tile column), the column fastest. */
    int64_t b = blockIdx.x;
    const int64_t tile_x = b % s.tiles_x;
    b /= s.tiles_x;
    const int64_t tile_y = b % s.tiles_y;
    b /= s.tiles_y;
    const int64_t co = b % s.out_channels;
    const int64_t n = b / s.out_channels;
    const int64_t first_channel = co / s.group_out * s.group_in; /* of co's group */

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int t = ty * kTile + tx;
    const int64_t oy = tile_y * kTile + ty, ox = tile_x * kTile + tx;
    const bool active = oy < s.out_h && ox < s.out_w; /* the spare threads of an edge tile still load and meet the barriers */
    /* The input position of the patch's corner: negative inside the padding. */
    const int64_t y0 = tile_y * kTile * s.sh - s.ph, x0 = tile_x * kTile * s.sw - s.pw;
    const T *w_co = weight + co * s.group_in * taps;

    T acc = T(0);
    for (int64_t c = 0; c < s.group_in; ++c) {
        const T *plane = in + (n * s.in_channels + first_channel + c) * s.height * s.width;
        /* Thread t copies elements t, t + 256, ... (consecutive threads,
         * consecutive columns: coalesced). Where the patch leaves the image
         * (the padding, or past the edge behind an edge tile) it writes a
         * zero, the value zero padding means: the sum below then reads every
         * tap from the patch with no bounds test, and no thread reads a
         * value left over from the last channel. */
        for (int e = t; e < patch_size; e += kTile * kTile) {
            const int64_t y = y0 + e / s.patch_w, x = x0 + e % s.patch_w;
            const bool inside = y >= 0 && y < s.height && x >= 0 && x < s.width;
            shared[e] = inside ? plane[y * s.width + x] : T(0);
        }
        for (int e = t; e < taps; e += kTile * kTile)
            shared[patch_size + e] = w_co[c * taps + e];
        __syncthreads(); /* the patch and weights are complete before anyone reads them (each thread reads what others copied) */

        if (active) {
            for (int i = 0; i < s.kh; ++i) {
                const int row = (ty * s.sh + i * s.dh) * s.patch_w + tx * s.sw; /* tap (i, 0) of this pixel's window */
                for (int j = 0; j < s.kw; ++j)
                    acc += shared[row + j * s.dw] * shared[patch_size + i * s.kw + j];
            }
        }
        __syncthreads(); /* everyone is done with this channel before the next overwrites it */
    }
    if (active)
        out[((n * s.out_channels + co) * s.out_h + oy) * s.out_w + ox] = bias ? acc + bias[co] : acc;
}

template <typename T>
static mt_status launch_conv2d(const mt_tensor &out, const mt_tensor &in, const mt_tensor &weight,
                               const mt_tensor &bias, int has_bias, const ConvShape &s, unsigned int grid,
                               size_t shared_bytes)
{
    const dim3 block(kTile, kTile);
    conv2d_tiled<T><<<grid, block, shared_bytes, mt_stream()>>>(
        static_cast<T *>(out.data) + out.offset, static_cast<const T *>(in.data) + in.offset,
        static_cast<const T *>(weight.data) + weight.offset,
        has_bias ? static_cast<const T *>(bias.data) + bias.offset : nullptr, s);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* out = window_count for a dim of `size` padded by `pad` on each side:
 * torch's floor formula, or 0 when not even one window fits. */
static int64_t conv_out_size(int64_t size, int64_t kernel, int stride, int pad, int dilation)
{
    const int64_t span = (int64_t)dilation * (kernel - 1) + 1;
    const int64_t padded = size + 2 * (int64_t)pad;
    return padded < span ? 0 : (padded - span) / stride + 1;
}

/* Row-major and dense, or empty: an empty tensor's strides address nothing
 * (torch, and the Python layer, give (2, 0, 3, 3) the strides (9, 9, 3, 1)). */
static bool dense(const mt_tensor &t)
{
    return tensor_numel(t) == 0 || is_contiguous(t);
}

mt_status mt_conv2d(mt_tensor out, mt_tensor in, mt_tensor weight, mt_tensor bias, int has_bias, int stride_h,
                    int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups)
{
    const char *func = "mt_conv2d";
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    MT_TRY(mt_check_extent(func, "out", &out));
    const int count = has_bias ? 3 : 2;
    const mt_tensor *inputs[] = {&in, &weight, &bias};
    const char *names[] = {"in", "weight", "bias"};
    const int ranks[] = {4, 4, 1};
    for (int k = 0; k < count; ++k) {
        MT_TRY(mt_check_tensor(func, names[k], inputs[k]));
        MT_TRY(mt_check_extent(func, names[k], inputs[k]));
        MT_TRY(mt_check_same_dtype(func, inputs[k], names[k], &out, "out"));
        if (inputs[k]->ndim != ranks[k] || !dense(*inputs[k]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s must be a contiguous %d-D tensor", names[k], ranks[k]);
    }
    MT_TRY(mt_check_float(func, "in", &in));
    if (stride_h < 1 || stride_w < 1 || dilation_h < 1 || dilation_w < 1 || pad_h < 0 || pad_w < 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "stride (%d, %d) and dilation (%d, %d) must be >= 1, "
                       "padding (%d, %d) >= 0", stride_h, stride_w, dilation_h, dilation_w, pad_h, pad_w);
    const int64_t n = in.shape[0], c = in.shape[1], h = in.shape[2], w = in.shape[3];
    const int64_t c_out = weight.shape[0], kh = weight.shape[2], kw = weight.shape[3];
    char in_buf[96], w_buf[96];
    if (groups < 1 || c % groups != 0 || c_out % groups != 0 || weight.shape[1] * groups != c)
        return mt_fail(MT_ERR_SHAPE, func, "in %s, weight %s and groups = %d do not agree: C and C_out must "
                       "divide by groups, and weight's dim 1 must be C / groups", mt_shape_str(&in, in_buf, 96),
                       mt_shape_str(&weight, w_buf, 96), groups);
    if (kh < 1 || kw < 1)
        return mt_fail(MT_ERR_SHAPE, func, "weight %s has an empty kernel", mt_shape_str(&weight, w_buf, 96));
    if (has_bias && bias.shape[0] != c_out)
        return mt_fail(MT_ERR_SHAPE, func, "bias has %lld elements, weight %lld out channels",
                       (long long)bias.shape[0], (long long)c_out);
    const int64_t oh = conv_out_size(h, kh, stride_h, pad_h, dilation_h);
    const int64_t ow = conv_out_size(w, kw, stride_w, pad_w, dilation_w);
    if (oh < 1 || ow < 1)
        return mt_fail(MT_ERR_SHAPE, func, "in %s padded by (%d, %d) is smaller than the kernel (%lld, %lld) "
                       "with dilation (%d, %d): no window fits", mt_shape_str(&in, in_buf, 96), pad_h, pad_w,
                       (long long)kh, (long long)kw, dilation_h, dilation_w);
    if (out.ndim != 4 || out.shape[0] != n || out.shape[1] != c_out || out.shape[2] != oh || out.shape[3] != ow ||
        !dense(out))
        return mt_fail(MT_ERR_SHAPE, func, "out must be a contiguous (%lld, %lld, %lld, %lld) tensor", (long long)n,
                       (long long)c_out, (long long)oh, (long long)ow);
    for (int k = 0; k < count; ++k)
        if (tensors_overlap(out, *inputs[k]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "out overlaps %s", names[k]);

    /* The block's shared memory: the patch and one channel's weights. Each
     * factor is checked on its own first, so that no product overflows. */
    const size_t item = in.dtype == MT_FLOAT32 ? sizeof(float) : sizeof(double);
    const int64_t limit = (int64_t)(kConvSharedLimit / item); /* elements */
    const int64_t patch_h = (int64_t)(kTile - 1) * stride_h + (int64_t)dilation_h * (kh - 1) + 1;
    const int64_t patch_w = (int64_t)(kTile - 1) * stride_w + (int64_t)dilation_w * (kw - 1) + 1;
    if (kh > limit || kw > limit || patch_h > limit || patch_w > limit ||
        patch_h * patch_w + kh * kw > limit)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "a %d x %d tile's input patch (%lld x %lld) and a channel's "
                       "weights (%lld x %lld) need more than the %zu bytes of shared memory a block may use "
                       "(stride (%d, %d), dilation (%d, %d), %zu-byte elements)", kTile, kTile,
                       (long long)patch_h, (long long)patch_w, (long long)kh, (long long)kw, kConvSharedLimit,
                       stride_h, stride_w, dilation_h, dilation_w, item);
    if (tensor_numel(out) == 0)
        return MT_OK; /* an empty batch or no output channel */

    const ConvShape s{c, h, w, c_out, oh, ow, c / groups, c_out / groups, (int)kh, (int)kw, stride_h, stride_w,
                      pad_h, pad_w, dilation_h, dilation_w, (int)patch_h, (int)patch_w,
                      (oh + kTile - 1) / kTile, (ow + kTile - 1) / kTile};
    const int64_t blocks = n * c_out * s.tiles_y * s.tiles_x;
    if (blocks > INT32_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%lld blocks: more than a grid holds", (long long)blocks);
    const size_t shared_bytes = (size_t)(patch_h * patch_w + kh * kw) * item;
    if (in.dtype == MT_FLOAT32)
        return launch_conv2d<float>(out, in, weight, bias, has_bias, s, (unsigned int)blocks, shared_bytes);
    return launch_conv2d<double>(out, in, weight, bias, has_bias, s, (unsigned int)blocks, shared_bytes);
}
