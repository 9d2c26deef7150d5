/*
 * conv_direct.cu: the direct convolution, for layers with few input channels
 * a group (the digits CNN's first layer: 1 -> 32 channels, 3 x 3).
 *
 * out[n, co, y, x] = bias[co] + sum over the channels c of co's group and
 * the taps (i, j) of weight[co, c, i, j] * in[n, c, y*sh - ph + i*dh, x*sw - pw + j*dw].
 *
 * With C / groups * KH * KW = 9 products per output, a matrix product has
 * K = 9: the implicit GEMM's 64 x 128 tiles stage 9-deep slices, and im2col's
 * backward writes a 9-tap window tensor and adds it back tap by tap. Here
 * every sum is short, so each kernel computes it where it is needed:
 *
 *   forward       one thread per output pixel (n, y, x) and run of
 *                 kDirectChannels output channels: it reads each input value
 *                 of its window once and uses it for the whole run, the sums
 *                 in registers; the weights are the same for the whole warp
 *                 (one broadcast load each, from the cache);
 *   input grad    one thread per input element gathers the grad_out
 *                 elements its value fed (every output channel of its
 *                 group, every tap whose window covered it), times their
 *                 taps: no im2col, no col2im, no atomics;
 *   weight grad   a reduction per (output channel, input channel) pair over
 *                 the N OH OW pixels: each block sums a slice, one register
 *                 per tap (KH x KW known at compile time for 1x1 to 7x7),
 *                 writes its partial sums, and a second kernel adds each
 *                 tap's slices in order (deterministic, no atomics).
 *
 * The depthwise rung (src/conv_depthwise*.cu) borrows both gradients: a
 * depthwise convolution is the case groups = C = C_out.
 */
#include "conv_direct.h"
#include "conv_implicit_gemm.h" /* first, first_out */

/* Output channels per pass of the forward: registers per thread. */
constexpr int kDirectChannels = 8;
/* Taps a round of the weight gradient's block sum: its shared memory, 16 x
 * 264 elements (33 KiB in float64). */
constexpr int kSumChunk = 16;
static_assert(kBlockSize == 256, "the weight gradient's block sum reads 8 x 32 sums a tap");

int64_t conv_window_count(int64_t size, int64_t kernel, int stride, int pad, int dilation)
{
    const int64_t span = (int64_t)dilation * (kernel - 1) + 1;
    const int64_t padded = size + 2 * (int64_t)pad;
    return padded < span ? 0 : (padded - span) / stride + 1;
}

/* ---- forward ---------------------------------------------------------------- */

/* KH, KW: the kernel's size when known at compile time (the loops unroll), or 0 (d.kh, d.kw).
 * Item q = chunk * N OH OW + pixel: a pixel and a run of kDirectChannels output
 * channels of one group (consecutive threads, consecutive pixels of one run:
 * coalesced stores; the runs of a pixel read its window again, from the cache).
 * Splitting the channels over threads gives the small digits layer (32768
 * pixels) four times as many threads to hide the memory's latency. */
template <typename T, int KH, int KW>
__global__ void conv_direct_forward(T *out, const T *in, const T *weight, const T *bias, DirectDims d, int runs)
{
    const int kh = KH ? KH : d.kh, kw = KW ? KW : d.kw, taps = kh * kw;
    const int ohw = d.oh * d.ow, pixels = d.n * ohw;
    const int64_t total = (int64_t)pixels * runs * (d.c_out / d.c_out_group); /* C_out > 0 here; C may be 0 */
    for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < total; q += (int64_t)gridDim.x * blockDim.x) {
        const int chunk = (int)(q / pixels), p = (int)(q % pixels);
        const int g = chunk / runs, co0 = g * d.c_out_group + chunk % runs * kDirectChannels;
        const int co_end = (g + 1) * d.c_out_group;
        const int img = p / ohw, pix = p % ohw;
        const int oy = pix / d.ow, ox = pix % d.ow;
        const int y0 = oy * d.sh - d.ph, x0 = ox * d.sw - d.pw;
        T acc[kDirectChannels];
        MT_UNROLL for (int k = 0; k < kDirectChannels; ++k)
            acc[k] = bias && co0 + k < co_end ? bias[co0 + k] : T(0);
        for (int c = 0; c < d.c_group; ++c) {
            const T *plane = in + ((int64_t)img * d.c + g * d.c_group + c) * d.h * d.w;
            const T *w_c = weight + ((int64_t)co0 * d.c_group + c) * taps; /* weight[co0, c, 0, 0] */
            MT_UNROLL for (int i = 0; i < kh; ++i) {
                const int y = y0 + i * d.dh;
                if (y < 0 || y >= d.h)
                    continue; /* zero padding: nothing to add */
                MT_UNROLL for (int j = 0; j < kw; ++j) {
                    const int x = x0 + j * d.dw;
                    if (x < 0 || x >= d.w)
                        continue;
                    const T v = plane[y * d.w + x]; /* read once, used for every channel of the run */
                    MT_UNROLL for (int k = 0; k < kDirectChannels; ++k)
                        if (co0 + k < co_end)
                            acc[k] += w_c[(int64_t)k * d.c_group * taps + i * kw + j] * v;
                }
            }
        }
        MT_UNROLL for (int k = 0; k < kDirectChannels; ++k)
            if (co0 + k < co_end)
                out[((int64_t)img * d.c_out + co0 + k) * ohw + pix] = acc[k];
    }
}

/* ---- input gradient --------------------------------------------------------- */

/* One thread per input element e = ((n * C + c) * H + y) * W + x. The taps
 * outside, the output channels inside: which output pixel a tap came from
 * (and whether any did) is worked out once per tap, not once per channel. */
template <typename T, int KH, int KW>
__global__ void conv_direct_input_grad(T *grad_in, const T *grad_out, const T *weight, DirectDims d)
{
    const int kh = KH ? KH : d.kh, kw = KW ? KW : d.kw, taps = kh * kw;
    const int64_t total = (int64_t)d.n * d.c * d.h * d.w;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        const int x = (int)(e % d.w), y = (int)(e / d.w % d.h);
        const int64_t plane = e / ((int64_t)d.w * d.h); /* n * C + c */
        const int c = (int)(plane % d.c), img = (int)(plane / d.c);
        const int g = c / d.c_group, cg = c % d.c_group;
        const int co_first = g * d.c_out_group;
        const T *go = grad_out + img * d.go_stride[0] + co_first * d.go_stride[1];
        const T *w_c = weight + ((int64_t)co_first * d.c_group + cg) * taps; /* weight[co_first, cg, 0, 0] */
        const int64_t w_step = (int64_t)d.c_group * taps;                     /* to the next output channel */
        T acc = T(0);
        MT_UNROLL for (int i = 0; i < kh; ++i) {
            /* The output row whose tap i read row y: none when it lies above
             * the first row, past the last, or between two (stride > 1). */
            const int ny = y + d.ph - i * d.dh;
            if (ny < 0 || ny % d.sh != 0 || ny / d.sh >= d.oh)
                continue;
            MT_UNROLL for (int j = 0; j < kw; ++j) {
                const int nx = x + d.pw - j * d.dw;
                if (nx < 0 || nx % d.sw != 0 || nx / d.sw >= d.ow)
                    continue;
                const T *g_tap = go + (ny / d.sh) * d.go_stride[2] + (nx / d.sw) * d.go_stride[3];
                const T *w_tap = w_c + i * kw + j;
                for (int k = 0; k < d.c_out_group; ++k)
                    acc += w_tap[k * w_step] * g_tap[k * d.go_stride[1]];
            }
        }
        grad_in[e] = acc;
    }
}

/* ---- weight gradient -------------------------------------------------------- */

/* Block (pair, slice[, tap]) sums grad_out[n, co, oy, ox] * in[n, ci, y, x]
 * over pixels [slice * per_slice, (slice + 1) * per_slice) of N OH OW, pair =
 * co * C / groups + c (ci = c of co's group). With KH, KW known, every tap in
 * its own register; else (KH = KW = 0) one tap a block, tap = blockIdx.z.
 * partial[(pair * taps + tap) * slices + slice]: a tap's slices side by side. */
template <typename T, int KH, int KW>
__global__ void conv_weight_grad_slices(T *partial, const T *grad_out, const T *in, DirectDims d, int per_slice)
{
    constexpr int kTaps = KH ? KH * KW : 1;                       /* the taps this block sums */
    constexpr int kChunk = kTaps < kSumChunk ? kTaps : kSumChunk; /* taps a round of the block's sum */
    /* A round: every thread's kChunk sums side by side (one pad slot per 32,
     * so that the 8 readers of a tap below hit 8 banks), then 8 partial
     * sums a tap. */
    __shared__ T sums[kChunk][kBlockSize + kBlockSize / 32];
    __shared__ T eighths[kChunk][8];
    const int taps = d.kh * d.kw;
    const int pair = blockIdx.x, co = pair / d.c_group;
    const int ci = co / d.c_out_group * d.c_group + pair % d.c_group;
    const int first_tap = KH ? 0 : (int)blockIdx.z;
    const int ohw = d.oh * d.ow, count = d.n * ohw;
    const int begin = (int)blockIdx.y * per_slice;
    const int end = count - begin < per_slice ? count : begin + per_slice;
    T acc[kTaps];
    MT_UNROLL for (int t = 0; t < kTaps; ++t)
        acc[t] = T(0);
    for (int p = begin + (int)threadIdx.x; p < end; p += blockDim.x) {
        const int img = p / ohw, pix = p - img * ohw;
        const int oy = pix / d.ow, ox = pix - oy * d.ow;
        const T g = grad_out[img * d.go_stride[0] + co * d.go_stride[1] + oy * d.go_stride[2] + ox * d.go_stride[3]];
        const T *plane = in + ((int64_t)img * d.c + ci) * d.h * d.w;
        MT_UNROLL for (int t = 0; t < kTaps; ++t) {
            const int tap = first_tap + t;
            const int i = KH ? t / KW : tap / d.kw, j = KH ? t % KW : tap % d.kw;
            const int y = oy * d.sh - d.ph + i * d.dh, x = ox * d.sw - d.pw + j * d.dw;
            if (y >= 0 && y < d.h && x >= 0 && x < d.w) /* else the padding: zero */
                acc[t] += g * plane[y * d.w + x];
        }
    }
    /* The block's sum of each tap, kChunk taps a round, three barriers a
     * round and a fixed order of additions (the same bits every run). */
    const int tid = threadIdx.x;
    MT_UNROLL for (int t0 = 0; t0 < kTaps; t0 += kChunk) {
        MT_UNROLL for (int k = 0; k < kChunk; ++k)
            if (t0 + k < kTaps)
                sums[k][tid + tid / 32] = acc[t0 + k];
        __syncthreads(); /* every thread's sums are in */
        if (tid < kChunk * 8 && t0 + tid / 8 < kTaps) {
            const int k = tid / 8, eighth = tid % 8; /* 32 consecutive threads' sums: one pad slot apart */
            T sum = T(0);
            for (int e = 0; e < 32; ++e)
                sum += sums[k][eighth * 33 + e];
            eighths[k][eighth] = sum;
        }
        __syncthreads(); /* the eighths are in */
        if (tid < kChunk && t0 + tid < kTaps) {
            T sum = T(0);
            for (int e = 0; e < 8; ++e)
                sum += eighths[tid][e];
            partial[((int64_t)pair * taps + first_tap + t0 + tid) * gridDim.y + blockIdx.y] = sum;
        }
        __syncthreads(); /* the next round overwrites sums and eighths */
    }
}

/* out[e] = the sum of partial[e * slices + s] over s, in order. */
template <typename T>
__global__ void conv_weight_grad_finish(T *out, const T *partial, int64_t count, int slices)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < count; e += (int64_t)gridDim.x * blockDim.x) {
        T sum = T(0);
        for (int s = 0; s < slices; ++s)
            sum += partial[e * slices + s];
        out[e] = sum;
    }
}

/* ---- the launchers ---------------------------------------------------------- */

/* The kernel sizes with a compiled-in version: f.template operator()<KH, KW>(). */
template <typename F>
static mt_status with_kernel_size(int kh, int kw, F f)
{
    if (kh == 3 && kw == 3)
        return f.template operator()<3, 3>();
    if (kh == 5 && kw == 5)
        return f.template operator()<5, 5>();
    if (kh == 1 && kw == 1)
        return f.template operator()<1, 1>();
    if (kh == 7 && kw == 7)
        return f.template operator()<7, 7>();
    return f.template operator()<0, 0>();
}

template <typename T>
struct LaunchForward {
    T *out;
    const T *in, *weight, *bias;
    const DirectDims &d;
    template <int KH, int KW>
    mt_status operator()() const
    {
        const int runs = (d.c_out_group + kDirectChannels - 1) / kDirectChannels; /* a group's */
        const int64_t items = (int64_t)d.n * d.oh * d.ow * runs * (d.c_out / d.c_out_group);
        conv_direct_forward<T, KH, KW><<<grid_size(items, kBlockSize), kBlockSize, 0, mt_stream()>>>(
            out, in, weight, bias, d, runs);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    }
};

template <typename T>
struct LaunchInputGrad {
    T *grad_in;
    const T *grad_out, *weight;
    const DirectDims &d;
    template <int KH, int KW>
    mt_status operator()() const
    {
        const int64_t count = (int64_t)d.n * d.c * d.h * d.w;
        conv_direct_input_grad<T, KH, KW><<<grid_size(count, kBlockSize), kBlockSize, 0, mt_stream()>>>(
            grad_in, grad_out, weight, d);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    }
};

template <typename T>
struct LaunchWeightGrad {
    T *partial;
    const T *grad_out, *in;
    const DirectDims &d;
    int slices, per_slice;
    template <int KH, int KW>
    mt_status operator()() const
    {
        const dim3 grid((unsigned int)(d.c_out * d.c_group), (unsigned int)slices, KH ? 1u : (unsigned int)(d.kh * d.kw));
        conv_weight_grad_slices<T, KH, KW><<<grid, kBlockSize, 0, mt_stream()>>>(partial, grad_out, in, d, per_slice);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    }
};

template <typename T>
mt_status conv_input_grad_by_gather(T *grad_in, const T *grad_out, const T *weight, const DirectDims &d)
{
    return with_kernel_size(d.kh, d.kw, LaunchInputGrad<T>{grad_in, grad_out, weight, d});
}

/* About 2048 blocks over the GPU (the pairs times their slices), each slice
 * at least 2048 pixels (8 a thread), at most 65535 slices (gridDim.y). */
template <typename T>
mt_status conv_weight_grad_by_reduction(T *grad_weight, const T *grad_out, const T *in, const DirectDims &d)
{
    const int64_t pairs = (int64_t)d.c_out * d.c_group, count = (int64_t)d.n * d.oh * d.ow;
    const int64_t weights = pairs * d.kh * d.kw;
    int64_t slices = (2048 + pairs - 1) / pairs;
    const int64_t most = (count + 2047) / 2048;
    slices = slices < most ? slices : most;
    slices = slices < 65535 ? slices : 65535;
    slices = slices < 1 ? 1 : slices;
    const int per_slice = count > 0 ? (int)((count + slices - 1) / slices) : 1;
    slices = count > 0 ? (count + per_slice - 1) / per_slice : 1;
    if (!(d.kh == d.kw && (d.kh == 1 || d.kh == 3 || d.kh == 5 || d.kh == 7)) && (int64_t)d.kh * d.kw > 65535)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "conv weight gradient", "a %d x %d kernel: more taps than a grid's "
                       "dim z (65535) holds", d.kh, d.kw);
    DeviceScratch partial;
    CUDA_CHECK(partial.allocate((size_t)(weights * slices) * sizeof(T)));
    MT_TRY(with_kernel_size(d.kh, d.kw,
                            LaunchWeightGrad<T>{partial.as<T>(), grad_out, in, d, (int)slices, per_slice}));
    conv_weight_grad_finish<T><<<grid_size(weights, kBlockSize), kBlockSize, 0, mt_stream()>>>(
        grad_weight, partial.as<T>(), weights, (int)slices);
    CUDA_CHECK(mt_launch_status());
    CUDA_CHECK(partial.release());
    return MT_OK;
}

template mt_status conv_input_grad_by_gather<float>(float *, const float *, const float *, const DirectDims &);
template mt_status conv_input_grad_by_gather<double>(double *, const double *, const double *, const DirectDims &);
template mt_status conv_weight_grad_by_reduction<float>(float *, const float *, const float *, const DirectDims &);
template mt_status conv_weight_grad_by_reduction<double>(double *, const double *, const double *,
                                                         const DirectDims &);

/* ---- the entry points ------------------------------------------------------- */

mt_status conv_direct_check(const char *func, const mt_tensor &written, const mt_tensor &in_shaped,
                            const char *in_name, const mt_tensor &w_shaped, const char *w_name,
                            const mt_tensor &out_shaped, const char *out_name, int sh, int sw, int ph, int pw, int dh,
                            int dw, int groups, DirectDims *d)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, &written == &in_shaped ? in_name : &written == &w_shaped ? w_name : out_name,
                           &written));
    const mt_tensor *all[] = {&in_shaped, &w_shaped, &out_shaped};
    const char *names[] = {in_name, w_name, out_name};
    for (int k = 0; k < 3; ++k) {
        MT_TRY(mt_check_tensor(func, names[k], all[k]));
        MT_TRY(mt_check_extent(func, names[k], all[k]));
        MT_TRY(mt_check_same_dtype(func, all[k], names[k], &written, "the output"));
        const bool strided_ok = all[k] == &out_shaped && &out_shaped != &written;
        if (all[k]->ndim != 4 || !(strided_ok || tensor_numel(*all[k]) == 0 || is_contiguous(*all[k])))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s must be a %s4-D tensor", names[k],
                           strided_ok ? "" : "contiguous ");
    }
    MT_TRY(mt_check_float(func, in_name, &in_shaped));
    if (sh < 1 || sw < 1 || dh < 1 || dw < 1 || ph < 0 || pw < 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "stride (%d, %d) and dilation (%d, %d) must be >= 1, "
                       "padding (%d, %d) >= 0", sh, sw, dh, dw, ph, pw);
    char i_buf[96], w_buf[96], o_buf[96];
    const int64_t n = in_shaped.shape[0], c = in_shaped.shape[1], h = in_shaped.shape[2], w = in_shaped.shape[3];
    const int64_t c_out = w_shaped.shape[0], kh = w_shaped.shape[2], kw = w_shaped.shape[3];
    if (groups < 1 || c % groups != 0 || c_out % groups != 0 || w_shaped.shape[1] * groups != c || kh < 1 || kw < 1)
        return mt_fail(MT_ERR_SHAPE, func, "%s %s, %s %s and groups = %d do not agree: C and C_out must divide by "
                       "groups, %s's dim 1 must be C / groups and its kernel non-empty", in_name,
                       mt_shape_str(&in_shaped, i_buf, 96), w_name, mt_shape_str(&w_shaped, w_buf, 96), groups,
                       w_name);
    const int64_t oh = conv_window_count(h, kh, sh, ph, dh), ow = conv_window_count(w, kw, sw, pw, dw);
    if (oh < 1 || ow < 1)
        return mt_fail(MT_ERR_SHAPE, func, "%s %s padded by (%d, %d) is smaller than the kernel (%lld, %lld) with "
                       "dilation (%d, %d): no window fits", in_name, mt_shape_str(&in_shaped, i_buf, 96), ph, pw,
                       (long long)kh, (long long)kw, dh, dw);
    if (out_shaped.shape[0] != n || out_shaped.shape[1] != c_out || out_shaped.shape[2] != oh ||
        out_shaped.shape[3] != ow)
        return mt_fail(MT_ERR_SHAPE, func, "%s %s must be (%lld, %lld, %lld, %lld), the output of %s %s convolved "
                       "by %s %s", out_name, mt_shape_str(&out_shaped, o_buf, 96), (long long)n, (long long)c_out,
                       (long long)oh, (long long)ow, in_name, mt_shape_str(&in_shaped, i_buf, 96), w_name,
                       mt_shape_str(&w_shaped, w_buf, 96));
    /* int indices inside the kernels: the padded sides, N C H W, N C_out OH OW, the weights. */
    const int64_t limit = INT32_MAX;
    if (h + 2 * (int64_t)ph > limit || w + 2 * (int64_t)pw > limit || tensor_numel(w_shaped) > limit ||
        n * c * h * w > limit || n * c_out * oh * ow > limit)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s %s with %s %s: a size reaches 2^31, more than these "
                       "kernels' 32-bit indices hold", in_name, mt_shape_str(&in_shaped, i_buf, 96), w_name,
                       mt_shape_str(&w_shaped, w_buf, 96));
    for (int k = 0; k < 3; ++k)
        if (all[k] != &written && tensors_overlap(written, *all[k]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "the output overlaps %s", names[k]);
    *d = DirectDims{(int)n, (int)c, (int)h, (int)w, (int)c_out, (int)oh, (int)ow, (int)(c / groups),
                    (int)(c_out / groups), (int)kh, (int)kw, sh, sw, ph, pw, dh, dw,
                    {out_shaped.strides[0], out_shaped.strides[1], out_shaped.strides[2], out_shaped.strides[3]}};
    return MT_OK;
}

mt_status conv_check_bias(const char *func, const mt_tensor &out, const mt_tensor &bias, int c_out)
{
    MT_TRY(mt_check_tensor(func, "bias", &bias));
    MT_TRY(mt_check_extent(func, "bias", &bias));
    MT_TRY(mt_check_same_dtype(func, &bias, "bias", &out, "out"));
    if (bias.ndim != 1 || bias.shape[0] != c_out || !is_contiguous(bias))
        return mt_fail(MT_ERR_SHAPE, func, "bias must be a contiguous 1-D tensor of C_out = %d elements", c_out);
    if (tensors_overlap(out, bias))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "out overlaps bias");
    return MT_OK;
}

mt_status mt_conv2d_direct(mt_tensor out, mt_tensor in, mt_tensor weight, mt_tensor bias, int has_bias, int stride_h,
                           int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups)
{
    const char *func = "mt_conv2d_direct";
    DirectDims d;
    MT_TRY(conv_direct_check(func, out, in, "in", weight, "weight", out, "out", stride_h, stride_w, pad_h, pad_w,
                        dilation_h, dilation_w, groups, &d));
    if (has_bias)
        MT_TRY(conv_check_bias(func, out, bias, d.c_out));
    if (tensor_numel(out) == 0)
        return MT_OK;
    if (out.dtype == MT_FLOAT32)
        return with_kernel_size(d.kh, d.kw, LaunchForward<float>{first_out<float>(out), first<float>(in),
                                first<float>(weight), has_bias ? first<float>(bias) : nullptr, d});
    return with_kernel_size(d.kh, d.kw, LaunchForward<double>{first_out<double>(out), first<double>(in),
                            first<double>(weight), has_bias ? first<double>(bias) : nullptr, d});
}

mt_status mt_conv2d_direct_input_grad(mt_tensor grad_in, mt_tensor grad_out, mt_tensor weight, int stride_h,
                                      int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups)
{
    const char *func = "mt_conv2d_direct_input_grad";
    DirectDims d;
    MT_TRY(conv_direct_check(func, grad_in, grad_in, "grad_in", weight, "weight", grad_out, "grad_out", stride_h,
                        stride_w, pad_h, pad_w, dilation_h, dilation_w, groups, &d));
    if (tensor_numel(grad_in) == 0)
        return MT_OK;
    if (grad_in.dtype == MT_FLOAT32)
        return conv_input_grad_by_gather<float>(first_out<float>(grad_in), first<float>(grad_out),
                                                first<float>(weight), d);
    return conv_input_grad_by_gather<double>(first_out<double>(grad_in), first<double>(grad_out),
                                             first<double>(weight), d);
}

mt_status mt_conv2d_direct_weight_grad(mt_tensor grad_weight, mt_tensor grad_out, mt_tensor in, int stride_h,
                                       int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups)
{
    const char *func = "mt_conv2d_direct_weight_grad";
    DirectDims d;
    MT_TRY(conv_direct_check(func, grad_weight, in, "in", grad_weight, "grad_weight", grad_out, "grad_out", stride_h,
                        stride_w, pad_h, pad_w, dilation_h, dilation_w, groups, &d));
    if (tensor_numel(grad_weight) == 0)
        return MT_OK; /* no weight to write (an empty batch still writes zeros below) */
    if (grad_weight.dtype == MT_FLOAT32)
        return conv_weight_grad_by_reduction<float>(first_out<float>(grad_weight), first<float>(grad_out),
                                                    first<float>(in), d);
    return conv_weight_grad_by_reduction<double>(first_out<double>(grad_weight), first<double>(grad_out),
                                                 first<double>(in), d);
}
