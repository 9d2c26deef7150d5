/*
 * test_conv.c: mt_conv2d, the tiled convolution kernel, and mt_conv2d_igemm,
 * the implicit GEMM, against the sum of
 * torch's conv2d formula computed in double, float32 and float64: strides,
 * padding, dilations (each dim its own), groups up to depthwise, with and
 * without bias; output planes that are and are not multiples of the 16 x 16
 * tile, 1 x 1 images, kernels larger than the tile's stride, an empty batch,
 * no output or input channel, the largest patch that fits in shared memory; random
 * cases from the harness's fixed seed. Then the refusals: int64, mixed
 * dtypes, a non-contiguous or misshapen operand, groups that do not divide,
 * no window, a patch over 48 KiB, bad strides, out overlapping an input.
 * The implicit GEMM runs the same cases (and output channels and pixels off
 * its 64 / 128 x 128 tiles, strides the tiled patch cannot hold), and its two
 * gradients, mt_conv2d_igemm_input_grad and mt_conv2d_igemm_weight_grad,
 * against their sums (stride > 1, dilation, groups, a weight gradient split
 * over blocks, an empty batch), with their refusals; the input gradient of
 * a strided convolution, which runs one product per stride phase, on phases
 * with and without taps and on every tile configuration. The depthwise rung's
 * backward, mt_conv2d_depthwise_input_grad and _weight_grad, against the same
 * sums (groups = C = C_out: stride, padding, dilation, per-dim arguments,
 * planes off the 256-thread block, a 7 x 7 stem-like kernel at stride 2, an
 * empty batch, random cases), with their refusals. The depthwise rung's
 * forward (mt_conv2d_depthwise: 32 x 32 tiles whole and partial, 3 x 3 and
 * 5 x 5 compiled, other sizes at run time, strides, dilation) and the direct
 * rung (mt_conv2d_direct and its two gradients: every forward case, the
 * digits layer, the stem, groups, a weight gradient over several slices, N =
 * 1, an empty batch); these gradients read grad_out in random layouts
 * (transposed, sliced, expanded). Refused: a channel multiplier, a depthwise
 * patch over 48 KiB, the direct entry points' bad operands.
 *
 *   make check-c T=test_conv
 */
#include "test_util.h"

typedef struct {
    int64_t n, c, h, w, c_out, kh, kw;
    int sh, sw, ph, pw, dh, dw, groups, bias;
} conv_args;

static int64_t out_size(int64_t size, int64_t k, int stride, int pad, int dilation)
{
    return (size + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
}

/* out[n, co, y, x] in double, straight from the definition, as a sum for the
 * tolerance policy (n terms: the taps of every channel of the group). */
static tt_expect ref_pixel(const tt_tensor *in, const tt_tensor *weight, const tt_tensor *bias, const conv_args *a,
                           int64_t n, int64_t co, int64_t y, int64_t x)
{
    const int64_t group_in = a->c / a->groups, group_out = a->c_out / a->groups;
    const int64_t first = co / group_out * group_in;
    double sum = 0.0, sumsq = 0.0;
    for (int64_t c = 0; c < group_in; ++c)
        for (int64_t i = 0; i < a->kh; ++i)
            for (int64_t j = 0; j < a->kw; ++j) {
                const int64_t iy = y * a->sh - a->ph + i * a->dh, ix = x * a->sw - a->pw + j * a->dw;
                if (iy < 0 || iy >= a->h || ix < 0 || ix >= a->w)
                    continue; /* zero padding */
                int64_t ii[4] = {n, first + c, iy, ix}, wi[4] = {co, c, i, j};
                const double p = tt_at(in, ii) * tt_at(weight, wi);
                sum += p;
                sumsq += p * p;
            }
    if (a->bias) {
        int64_t bi[1] = {co};
        sum += tt_at(bias, bi);
        sumsq += tt_at(bias, bi) * tt_at(bias, bi);
    }
    const int64_t terms = group_in * a->kh * a->kw + 1;
    return tt_sum(sum, sumsq, terms);
}

/* Which entry point conv_case calls: the tiled kernel or the implicit GEMM,
 * and the implicit GEMM's tile configuration (-1: the library's choice); or
 * the depthwise rung (use_depthwise, below) or the direct one (use_direct,
 * both also for grad_case's gradients). */
static int use_igemm = 0;
static int igemm_config = -1;
static int use_depthwise = 0; /* mt_conv2d_depthwise*: a.groups = a.c = a.c_out */
static int use_direct = 0;    /* mt_conv2d_direct* */

static mt_status forward(mt_tensor out, mt_tensor in, mt_tensor weight, mt_tensor bias, const conv_args *a)
{
    if (use_depthwise)
        return mt_conv2d_depthwise(out, in, weight, bias, a->bias, a->sh, a->sw, a->ph, a->pw, a->dh, a->dw);
    if (use_direct)
        return mt_conv2d_direct(out, in, weight, bias, a->bias, a->sh, a->sw, a->ph, a->pw, a->dh, a->dw, a->groups);
    if (use_igemm)
        return mt_conv2d_igemm(out, in, weight, bias, a->bias, a->sh, a->sw, a->ph, a->pw, a->dh, a->dw, a->groups,
                               igemm_config);
    return mt_conv2d(out, in, weight, bias, a->bias, a->sh, a->sw, a->ph, a->pw, a->dh, a->dw, a->groups);
}

static void conv_case(int dtype, conv_args a)
{
    const int64_t oh = out_size(a.h, a.kh, a.sh, a.ph, a.dh), ow = out_size(a.w, a.kw, a.sw, a.pw, a.dw);
    int64_t is[4] = {a.n, a.c, a.h, a.w}, ws[4] = {a.c_out, a.c / a.groups, a.kh, a.kw}, bs[1] = {a.c_out};
    int64_t os[4] = {a.n, a.c_out, oh, ow};
    tt_tensor in = tt_new(dtype, 4, is, TT_CONTIGUOUS), weight = tt_new(dtype, 4, ws, TT_CONTIGUOUS);
    tt_tensor bias = tt_new(dtype, 1, bs, TT_CONTIGUOUS), out = tt_new(dtype, 4, os, TT_CONTIGUOUS);
    tt_fill(&in, -2, 2, TT_SOME_ZEROS);
    tt_fill(&weight, -1, 1, 0);
    tt_fill(&bias, -1, 1, 0);
    const char *func = use_depthwise ? "mt_conv2d_depthwise" : use_direct ? "mt_conv2d_direct"
                     : use_igemm   ? "mt_conv2d_igemm"
                                   : "mt_conv2d";
    tt_case("%s %s: in %s, weight %s%s, stride (%d, %d), padding (%d, %d), dilation (%d, %d), groups %d", func,
            tt_dtype_name(dtype), tt_str(&in), tt_str(&weight), a.bias ? ", bias" : "", a.sh, a.sw, a.ph, a.pw,
            a.dh, a.dw, a.groups);
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        int64_t index[4];
        to_index(i, out.t.shape, 4, index);
        expect[i] = ref_pixel(&in, &weight, &bias, &a, index[0], index[1], index[2], index[3]);
    }
    if (tt_expect_ok(forward(out.t, in.t, weight.t, bias.t, &a), func)) {
        tt_check_output(&out, expect);
        tt_expect_unchanged(&in, "in");
        tt_expect_unchanged(&weight, "weight");
        tt_expect_unchanged(&bias, "bias");
    }
    free(expect);
    tt_free(&in);
    tt_free(&weight);
    tt_free(&bias);
    tt_free(&out);
}

/* A random convolution: small sizes, any stride, padding, dilation, groups. */
static conv_args random_args(void)
{
    conv_args a;
    a.groups = (int)tt_rand_int(1, 3);
    a.c = a.groups * tt_rand_int(1, 3);
    a.c_out = a.groups * tt_rand_int(1, 3);
    a.n = tt_rand_int(1, 2);
    a.kh = tt_rand_int(1, 5);
    a.kw = tt_rand_int(1, 5);
    a.sh = (int)tt_rand_int(1, 3);
    a.sw = (int)tt_rand_int(1, 3);
    a.dh = (int)tt_rand_int(1, 3);
    a.dw = (int)tt_rand_int(1, 3);
    a.ph = (int)tt_rand_int(0, 3);
    a.pw = (int)tt_rand_int(0, 3);
    /* at least one window: H + 2 ph >= dh (KH - 1) + 1 */
    a.h = tt_rand_int(1, 40) + a.dh * (a.kh - 1);
    a.w = tt_rand_int(1, 40) + a.dw * (a.kw - 1);
    a.bias = tt_chance(0.5);
    return a;
}

/* ---- the implicit GEMM's gradients ---------------------------------------- */

/* grad_in[n, ci, y, x]: every (co, i, j) of ci's group whose window tap lands
 * on (y, x), i.e. oy * sh = y + ph - i * dh for a whole output row oy inside
 * the output (likewise ox), times weight[co, ci % group_in, i, j]. */
static tt_expect ref_input_grad(const tt_tensor *grad_out, const tt_tensor *weight, const conv_args *a, int64_t oh,
                                int64_t ow, int64_t n, int64_t ci, int64_t y, int64_t x)
{
    const int64_t group_in = a->c / a->groups, group_out = a->c_out / a->groups;
    const int64_t g = ci / group_in;
    double sum = 0.0, sumsq = 0.0;
    for (int64_t co = g * group_out; co < (g + 1) * group_out; ++co)
        for (int64_t i = 0; i < a->kh; ++i)
            for (int64_t j = 0; j < a->kw; ++j) {
                const int64_t ny = y + a->ph - i * a->dh, nx = x + a->pw - j * a->dw;
                if (ny < 0 || nx < 0 || ny % a->sh || nx % a->sw || ny / a->sh >= oh || nx / a->sw >= ow)
                    continue;
                int64_t gi[4] = {n, co, ny / a->sh, nx / a->sw}, wi[4] = {co, ci - g * group_in, i, j};
                const double p = tt_at(grad_out, gi) * tt_at(weight, wi);
                sum += p;
                sumsq += p * p;
            }
    return tt_sum(sum, sumsq, group_out * a->kh * a->kw);
}

/* grad_weight[co, c, i, j]: over every image and output pixel, grad_out there
 * times the input that tap (i, j) of the window read (0 in the padding). */
static tt_expect ref_weight_grad(const tt_tensor *grad_out, const tt_tensor *in, const conv_args *a, int64_t oh,
                                 int64_t ow, int64_t co, int64_t c, int64_t i, int64_t j)
{
    const int64_t ci = co / (a->c_out / a->groups) * (a->c / a->groups) + c;
    double sum = 0.0, sumsq = 0.0;
    for (int64_t n = 0; n < a->n; ++n)
        for (int64_t oy = 0; oy < oh; ++oy)
            for (int64_t ox = 0; ox < ow; ++ox) {
                const int64_t y = oy * a->sh - a->ph + i * a->dh, x = ox * a->sw - a->pw + j * a->dw;
                if (y < 0 || y >= a->h || x < 0 || x >= a->w)
                    continue;
                int64_t gi[4] = {n, co, oy, ox}, ii[4] = {n, ci, y, x};
                const double p = tt_at(grad_out, gi) * tt_at(in, ii);
                sum += p;
                sumsq += p * p;
            }
    return tt_sum(sum, sumsq, a->n * oh * ow);
}

static mt_status input_grad(mt_tensor grad_in, mt_tensor grad_out, mt_tensor weight, const conv_args *a)
{
    if (use_depthwise)
        return mt_conv2d_depthwise_input_grad(grad_in, grad_out, weight, a->sh, a->sw, a->ph, a->pw, a->dh, a->dw);
    if (use_direct)
        return mt_conv2d_direct_input_grad(grad_in, grad_out, weight, a->sh, a->sw, a->ph, a->pw, a->dh, a->dw,
                                           a->groups);
    return mt_conv2d_igemm_input_grad(grad_in, grad_out, weight, a->sh, a->sw, a->ph, a->pw, a->dh, a->dw,
                                      a->groups, igemm_config);
}

static mt_status weight_grad(mt_tensor grad_weight, mt_tensor grad_out, mt_tensor in, const conv_args *a)
{
    if (use_depthwise)
        return mt_conv2d_depthwise_weight_grad(grad_weight, grad_out, in, a->sh, a->sw, a->ph, a->pw, a->dh, a->dw);
    if (use_direct)
        return mt_conv2d_direct_weight_grad(grad_weight, grad_out, in, a->sh, a->sw, a->ph, a->pw, a->dh, a->dw,
                                            a->groups);
    return mt_conv2d_igemm_weight_grad(grad_weight, grad_out, in, a->sh, a->sw, a->ph, a->pw, a->dh, a->dw,
                                       a->groups, igemm_config);
}

static void grad_case(int dtype, conv_args a)
{
    const char *in_func = use_depthwise ? "mt_conv2d_depthwise_input_grad"
                        : use_direct  ? "mt_conv2d_direct_input_grad"
                                      : "mt_conv2d_igemm_input_grad";
    const char *w_func = use_depthwise ? "mt_conv2d_depthwise_weight_grad"
                       : use_direct  ? "mt_conv2d_direct_weight_grad"
                                     : "mt_conv2d_igemm_weight_grad";
    const int64_t oh = out_size(a.h, a.kh, a.sh, a.ph, a.dh), ow = out_size(a.w, a.kw, a.sw, a.pw, a.dw);
    int64_t is[4] = {a.n, a.c, a.h, a.w}, ws[4] = {a.c_out, a.c / a.groups, a.kh, a.kw};
    int64_t os[4] = {a.n, a.c_out, oh, ow};
    tt_tensor in = tt_new(dtype, 4, is, TT_CONTIGUOUS), weight = tt_new(dtype, 4, ws, TT_CONTIGUOUS);
    /* The depthwise and direct gradients read grad_out by its strides (any
     * layout: transposed, sliced, expanded as the gradient of a .sum() is). */
    tt_tensor grad_out = tt_new(dtype, 4, os, use_depthwise || use_direct ? TT_INPUT : TT_CONTIGUOUS);
    tt_tensor grad_in = tt_new(dtype, 4, is, TT_CONTIGUOUS), grad_w = tt_new(dtype, 4, ws, TT_CONTIGUOUS);
    tt_fill(&in, -2, 2, TT_SOME_ZEROS);
    tt_fill(&weight, -1, 1, 0);
    tt_fill(&grad_out, -1, 1, 0);

    tt_case("%s %s: grad_in %s, grad_out %s, weight %s, stride (%d, %d), padding (%d, %d), "
            "dilation (%d, %d), groups %d", in_func, tt_dtype_name(dtype), tt_str(&grad_in), tt_str(&grad_out),
            tt_str(&weight), a.sh, a.sw, a.ph, a.pw, a.dh, a.dw, a.groups);
    tt_expect *expect = tt_expect_alloc(&grad_in);
    for (int64_t e = 0; e < tt_numel(&grad_in.t); ++e) {
        int64_t index[4];
        to_index(e, grad_in.t.shape, 4, index);
        expect[e] = ref_input_grad(&grad_out, &weight, &a, oh, ow, index[0], index[1], index[2], index[3]);
    }
    if (tt_expect_ok(input_grad(grad_in.t, grad_out.t, weight.t, &a), in_func)) {
        tt_check_output(&grad_in, expect);
        tt_expect_unchanged(&grad_out, "grad_out");
        tt_expect_unchanged(&weight, "weight");
    }
    free(expect);

    tt_case("%s %s: grad_weight %s, grad_out %s, in %s, stride (%d, %d), padding (%d, %d), "
            "dilation (%d, %d), groups %d", w_func, tt_dtype_name(dtype), tt_str(&grad_w), tt_str(&grad_out), tt_str(&in),
            a.sh, a.sw, a.ph, a.pw, a.dh, a.dw, a.groups);
    expect = tt_expect_alloc(&grad_w);
    for (int64_t e = 0; e < tt_numel(&grad_w.t); ++e) {
        int64_t index[4];
        to_index(e, grad_w.t.shape, 4, index);
        expect[e] = ref_weight_grad(&grad_out, &in, &a, oh, ow, index[0], index[1], index[2], index[3]);
    }
    if (tt_expect_ok(weight_grad(grad_w.t, grad_out.t, in.t, &a), w_func)) {
        tt_check_output(&grad_w, expect);
        tt_expect_unchanged(&grad_out, "grad_out");
        tt_expect_unchanged(&in, "in");
    }
    free(expect);
    tt_free(&in);
    tt_free(&weight);
    tt_free(&grad_out);
    tt_free(&grad_in);
    tt_free(&grad_w);
}

/* The forward cases both rungs run (use_igemm picks the entry point). */
static void forward_cases(int dtype)
{
    for (int bias = 0; bias < 2; ++bias) {
        /*          n  c  h   w   co kh kw sh sw ph pw dh dw g  bias */
        conv_case(dtype, (conv_args){2, 3, 20, 20, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, bias}); /* partial tiles */
        conv_case(dtype, (conv_args){1, 2, 16, 32, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, bias}); /* whole tiles */
        conv_case(dtype, (conv_args){1, 2, 17, 33, 2, 5, 5, 2, 2, 0, 0, 1, 1, 1, bias}); /* stride 2 */
        conv_case(dtype, (conv_args){1, 2, 19, 23, 2, 3, 3, 1, 1, 2, 2, 2, 2, 1, bias}); /* dilation 2 */
        conv_case(dtype, (conv_args){2, 4, 9, 11, 6, 3, 2, 1, 1, 1, 0, 1, 1, 2, bias});  /* 2 groups */
        conv_case(dtype, (conv_args){1, 5, 18, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 5, bias});  /* depthwise */
        conv_case(dtype, (conv_args){1, 2, 13, 29, 3, 2, 4, 1, 3, 0, 2, 2, 1, 1, bias}); /* per-dim args */
        conv_case(dtype, (conv_args){1, 3, 35, 35, 2, 7, 7, 2, 2, 3, 3, 1, 1, 1, bias}); /* 7x7 stem */
        conv_case(dtype, (conv_args){3, 2, 1, 1, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, bias});   /* 1x1 images */
        conv_case(dtype, (conv_args){2, 2, 1, 1, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, bias});   /* all padding but one */
        conv_case(dtype, (conv_args){1, 1, 5, 40, 1, 1, 1, 5, 4, 0, 0, 1, 1, 1, bias});  /* strides over the kernel */
    }
    /* The largest patch that fits in 48 KiB: float32 stride 7 (106 x 106), float64 stride 5 (76 x 76). */
    const int big = dtype == MT_FLOAT32 ? 7 : 5;
    conv_case(dtype, (conv_args){1, 1, 40, 40, 2, 1, 1, big, big, 0, 0, 1, 1, 1, 1});
    conv_case(dtype, (conv_args){0, 2, 8, 8, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}); /* no batch: nothing to do */
    conv_case(dtype, (conv_args){1, 2, 8, 8, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0}); /* no output channel */
    conv_case(dtype, (conv_args){2, 0, 5, 5, 3, 3, 3, 1, 1, 0, 0, 1, 1, 1, 1}); /* no input channel: the bias */
    for (int r = 0; r < 12; ++r)
        conv_case(dtype, random_args());
}

int main(void)
{
    tt_init("test_conv");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    for (int ti = 0; ti < 2; ++ti) {
        const int dtype = dtypes[ti];
        TT_GROUP("conv2d %s", tt_dtype_name(dtype)) {
            use_igemm = 0;
            forward_cases(dtype);
        }
        TT_GROUP("conv2d_igemm %s", tt_dtype_name(dtype)) {
            use_igemm = 1;
            forward_cases(dtype);
            /*          n  c  h   w   co  kh kw sh sw ph pw dh dw g  bias */
            conv_case(dtype, (conv_args){1, 3, 9, 10, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}); /* the 128-row tile, 70 rows */
            conv_case(dtype, (conv_args){2, 4, 7, 6, 130, 3, 1, 2, 1, 1, 0, 1, 1, 2, 1}); /* 65 rows a group */
            conv_case(dtype, (conv_args){1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1});   /* N = C = 1, one pixel */
            conv_case(dtype, (conv_args){1, 2, 16, 16, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0});  /* 256 pixels: 2 whole column tiles */
            conv_case(dtype, (conv_args){1, 1, 40, 40, 2, 1, 1, 9, 9, 0, 0, 1, 1, 1, 1});  /* a stride no tiled patch holds */
            conv_case(dtype, (conv_args){1, 2, 30, 30, 2, 3, 3, 1, 1, 0, 0, 12, 12, 1, 0}); /* dilation 12 */
            conv_case(dtype, (conv_args){2, 6, 12, 11, 260, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1}); /* 2 row tiles a group, 2 column tiles */
        }
        TT_GROUP("conv2d_igemm tile configurations %s", tt_dtype_name(dtype)) {
            /* Every configuration the autotuner may pick, on cases off each
             * tile: the weight's 16-byte loads (C / groups KH KW a multiple
             * of 4: 36, 8 a group) and its element loads (27), rows and
             * pixels off the tiles, a weight gradient split over blocks. */
            use_igemm = 1;
            for (igemm_config = 0; igemm_config < mt_conv2d_igemm_config_count(); ++igemm_config) {
                tt_case("config %d: %s", igemm_config, mt_conv2d_igemm_config_name(igemm_config));
                /*          n  c  h   w   co  kh kw sh sw ph pw dh dw g  bias */
                conv_case(dtype, (conv_args){2, 4, 9, 10, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});
                conv_case(dtype, (conv_args){1, 16, 5, 7, 130, 1, 1, 1, 1, 0, 0, 1, 1, 2, 0});
                conv_case(dtype, (conv_args){1, 3, 11, 9, 5, 3, 3, 2, 1, 1, 0, 1, 1, 1, 1});
                grad_case(dtype, (conv_args){2, 4, 9, 10, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0});
                grad_case(dtype, (conv_args){2, 2, 32, 32, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0});
                grad_case(dtype, (conv_args){1, 4, 13, 11, 6, 3, 3, 2, 2, 1, 1, 2, 1, 2, 0}); /* stride, dilation, groups */
                /* K = 16 * 9 = 144, 18 K-tiles of 8: each of a split-K config's
                 * pieces has some (the cases above leave some pieces empty),
                 * and the bias is added once, not once a piece. */
                conv_case(dtype, (conv_args){2, 16, 6, 7, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1});
                grad_case(dtype, (conv_args){2, 16, 6, 7, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0});
            }
            igemm_config = -1;
        }
        TT_GROUP("conv2d_igemm gradients %s", tt_dtype_name(dtype)) {
            /*          n  c  h   w   co kh kw sh sw ph pw dh dw g  bias */
            grad_case(dtype, (conv_args){2, 3, 9, 10, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0});  /* padding 1 */
            grad_case(dtype, (conv_args){1, 2, 17, 13, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0}); /* stride 2 */
            grad_case(dtype, (conv_args){1, 2, 16, 19, 2, 3, 2, 3, 2, 0, 1, 2, 3, 1, 0}); /* per-dim stride, dilation */
            grad_case(dtype, (conv_args){2, 4, 9, 11, 6, 3, 2, 1, 1, 1, 0, 1, 1, 2, 0});  /* 2 groups */
            grad_case(dtype, (conv_args){1, 3, 8, 8, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0});   /* depthwise */
            grad_case(dtype, (conv_args){1, 1, 9, 9, 1, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0});   /* C = 1, 1 x 1, stride 2 */
            grad_case(dtype, (conv_args){1, 2, 5, 5, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0});  /* 70 output channels */
            grad_case(dtype, (conv_args){1, 70, 5, 4, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0});  /* 70 input channels */
            /* 130 channels a group, in and out: two row tiles of 128 in every product, 2 groups. */
            grad_case(dtype, (conv_args){1, 260, 6, 5, 260, 1, 2, 1, 1, 0, 1, 1, 1, 2, 0});
            /* N OH OW = 2 * 32 * 32: the weight gradient's K split over several blocks. */
            grad_case(dtype, (conv_args){2, 2, 32, 32, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0});
            grad_case(dtype, (conv_args){0, 2, 6, 6, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0}); /* no batch: a zero weight gradient */
            grad_case(dtype, (conv_args){2, 2, 6, 6, 0, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0}); /* no output channel: a zero input gradient */
            /* The stem's shape, small: C = 3, 7 x 7, stride 2, padding 3. */
            grad_case(dtype, (conv_args){2, 3, 19, 18, 5, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0});
            for (int r = 0; r < 8; ++r)
                grad_case(dtype, random_args());
        }
        /* Stride > 1 with dilation 1: the input gradient runs one product per
         * stride phase (src/conv_igemm_phases.h): phases with 1, 2 and 4 taps
         * of a 3 x 3 kernel, none of a 1 x 1 (its pixels get zeros), more
         * phases than rows (H = 1 at stride 2), per-dim strides, groups; each
         * on every tile configuration once, then random cases. */
        TT_GROUP("conv2d_igemm input gradient by stride phases %s", tt_dtype_name(dtype)) {
            const conv_args phase_cases[] = {
                /* n  c  h   w   co kh kw sh sw ph pw dh dw g  bias */
                {2, 3, 9, 10, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0},  /* the ResNet's 3 x 3 / 2 */
                {1, 4, 7, 8, 5, 1, 1, 2, 2, 0, 0, 1, 1, 1, 0},   /* 1 x 1 / 2: three phases without a tap */
                {1, 2, 1, 6, 3, 1, 3, 2, 3, 0, 1, 1, 1, 1, 0},   /* H = 1: one row phase */
                {2, 4, 11, 13, 6, 4, 2, 3, 2, 2, 1, 1, 1, 2, 0}, /* per-dim strides, 2 groups */
                {1, 3, 19, 18, 2, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0}, /* the stem's 7 x 7 / 2 */
            };
            for (size_t e = 0; e < sizeof(phase_cases) / sizeof(phase_cases[0]); ++e)
                grad_case(dtype, phase_cases[e]);
            for (igemm_config = 0; igemm_config < mt_conv2d_igemm_config_count(); ++igemm_config) {
                tt_case("config %d: %s", igemm_config, mt_conv2d_igemm_config_name(igemm_config));
                /*                   n  c   h  w  co  kh kw sh sw ph pw dh dw g  bias */
                grad_case(dtype, (conv_args){1, 70, 5, 6, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0}); /* M = 70: two row tiles of 64 */
            }
            igemm_config = -1;
            for (int r = 0; r < 6; ++r) {
                conv_args a = random_args();
                a.dh = a.dw = 1;
                a.sh = (int)tt_rand_int(2, 3);
                a.h = tt_rand_int(1, 20) + a.kh - 1;
                a.w = tt_rand_int(1, 20) + a.kw - 1;
                grad_case(dtype, a);
            }
        }
        TT_GROUP("conv2d depthwise gradients %s", tt_dtype_name(dtype)) {
            use_depthwise = 1;
            /*          n  c  h   w   co kh kw sh sw ph pw dh dw g  bias */
            grad_case(dtype, (conv_args){2, 3, 9, 10, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, 0});   /* 3 x 3, padding 1 */
            grad_case(dtype, (conv_args){1, 2, 17, 13, 2, 3, 3, 2, 2, 1, 1, 1, 1, 2, 0});  /* stride 2 */
            grad_case(dtype, (conv_args){1, 2, 16, 19, 2, 3, 2, 3, 2, 0, 1, 2, 3, 2, 0});  /* per-dim stride, dilation */
            grad_case(dtype, (conv_args){1, 2, 19, 18, 2, 7, 7, 2, 2, 3, 3, 1, 1, 2, 0});  /* 7 x 7, stride 2 */
            grad_case(dtype, (conv_args){1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0});    /* one pixel */
            grad_case(dtype, (conv_args){2, 1, 2, 2, 1, 5, 5, 1, 1, 2, 2, 1, 1, 1, 0});    /* mostly padding */
            /* 2 * 23 * 19 = 874 products a tap: several per thread of the 256. */
            grad_case(dtype, (conv_args){2, 2, 23, 19, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0});
            grad_case(dtype, (conv_args){0, 2, 6, 6, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 0});    /* no batch: a zero weight gradient */
            for (int r = 0; r < 6; ++r) {
                conv_args a = random_args();
                a.c = a.c_out = a.groups;
                grad_case(dtype, a);
            }
            use_depthwise = 0;
        }
        TT_GROUP("conv2d depthwise forward %s", tt_dtype_name(dtype)) {
            use_depthwise = 1;
            for (int bias = 0; bias < 2; ++bias) {
                /*          n  c  h   w   co kh kw sh sw ph pw dh dw g  bias */
                conv_case(dtype, (conv_args){2, 3, 9, 10, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, bias});  /* one partial tile */
                conv_case(dtype, (conv_args){1, 2, 64, 32, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, bias}); /* whole 32 x 32 tiles */
                conv_case(dtype, (conv_args){1, 2, 37, 41, 2, 5, 5, 1, 1, 2, 2, 1, 1, 2, bias}); /* 5 x 5, tiles off the edge */
                conv_case(dtype, (conv_args){1, 2, 35, 33, 2, 3, 3, 2, 2, 1, 1, 1, 1, 2, bias}); /* stride 2 */
                conv_case(dtype, (conv_args){1, 2, 19, 18, 2, 3, 2, 1, 2, 2, 0, 2, 1, 2, bias}); /* run-time 3 x 2, dilation */
                conv_case(dtype, (conv_args){3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, bias});   /* N = 3, 1 x 1 images */
            }
            conv_case(dtype, (conv_args){0, 2, 8, 8, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, 1}); /* no batch: nothing to do */
            for (int r = 0; r < 8; ++r) {
                conv_args a = random_args();
                a.c = a.c_out = a.groups;
                a.sh = a.sh > 2 ? 2 : a.sh; /* a float64 patch at stride 3 and dilation 3 needs over 48 KiB */
                a.sw = a.sw > 2 ? 2 : a.sw;
                conv_case(dtype, a);
            }
            use_depthwise = 0;
        }
        TT_GROUP("conv2d direct %s", tt_dtype_name(dtype)) {
            use_direct = 1;
            forward_cases(dtype); /* its forward takes every shape the tiled rung does, and larger patches */
            /*          n    c  h  w  co kh kw sh sw ph pw dh dw g  bias */
            conv_case(dtype, (conv_args){9, 1, 8, 8, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}); /* the digits layer: 8 + 3 channels */
            grad_case(dtype, (conv_args){9, 1, 8, 8, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0});
            grad_case(dtype, (conv_args){2, 3, 19, 18, 5, 7, 7, 2, 2, 3, 3, 1, 1, 1, 0}); /* the stem's shape */
            grad_case(dtype, (conv_args){2, 4, 9, 11, 6, 3, 2, 1, 1, 1, 0, 1, 1, 2, 0});  /* run-time 3 x 2, 2 groups */
            grad_case(dtype, (conv_args){40, 1, 12, 12, 2, 5, 5, 1, 1, 2, 2, 1, 1, 1, 0}); /* 5760 pixels: 3 slices */
            grad_case(dtype, (conv_args){0, 2, 6, 6, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0});   /* no batch: a zero weight gradient */
            grad_case(dtype, (conv_args){1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0});   /* N = 1, one pixel */
            for (int r = 0; r < 6; ++r)
                grad_case(dtype, random_args());
            use_direct = 0;
        }
    }
    TT_GROUP("refused") {
        int64_t is[4] = {1, 2, 6, 6}, ws[4] = {2, 2, 3, 3}, os[4] = {1, 2, 4, 4}, bs[1] = {2}, b3[1] = {3};
        int64_t ws_g[4] = {2, 1, 3, 3}, os_same[4] = {1, 2, 6, 6};
        tt_tensor in = tt_new(MT_FLOAT32, 4, is, TT_CONTIGUOUS), weight = tt_new(MT_FLOAT32, 4, ws, TT_CONTIGUOUS);
        tt_tensor out = tt_new(MT_FLOAT32, 4, os, TT_CONTIGUOUS), bias = tt_new(MT_FLOAT32, 1, bs, TT_CONTIGUOUS);
        tt_tensor bias3 = tt_new(MT_FLOAT32, 1, b3, TT_CONTIGUOUS), wg = tt_new(MT_FLOAT32, 4, ws_g, TT_CONTIGUOUS);
        tt_tensor out_same = tt_new(MT_FLOAT32, 4, os_same, TT_CONTIGUOUS);
        tt_tensor in_i = tt_new(MT_INT64, 4, is, TT_CONTIGUOUS), w_i = tt_new(MT_INT64, 4, ws, TT_CONTIGUOUS);
        tt_tensor out_i = tt_new(MT_INT64, 4, os, TT_CONTIGUOUS), w_d = tt_new(MT_FLOAT64, 4, ws, TT_CONTIGUOUS);
        tt_fill(&in, -1, 1, 0);
        tt_fill(&weight, -1, 1, 0);
        tt_fill(&bias, -1, 1, 0);
        tt_fill(&bias3, -1, 1, 0);
        tt_fill(&wg, -1, 1, 0);
        tt_fill(&in_i, -3, 3, TT_INTEGERS);
        tt_fill(&w_i, -3, 3, TT_INTEGERS);
        tt_fill(&w_d, -1, 1, 0);

        tt_case("int64 operands");
        tt_expect_error(mt_conv2d(out_i.t, in_i.t, w_i.t, bias.t, 0, 1, 1, 0, 0, 1, 1, 1), MT_ERR_DTYPE,
                        "mt_conv2d", &out_i);
        tt_case("a float64 weight for a float32 input");
        tt_expect_error(mt_conv2d(out.t, in.t, w_d.t, bias.t, 0, 1, 1, 0, 0, 1, 1, 1), MT_ERR_DTYPE, "mt_conv2d",
                        &out);
        tt_case("a transposed input (H and W swapped by strides)");
        mt_tensor in_t = in.t;
        in_t.strides[2] = 1;
        in_t.strides[3] = 6;
        tt_expect_error(mt_conv2d(out.t, in_t, weight.t, bias.t, 0, 1, 1, 0, 0, 1, 1, 1), MT_ERR_INVALID_ARGUMENT,
                        "mt_conv2d", &out);
        tt_case("a 3-D input");
        mt_tensor in_3 = in.t;
        in_3.ndim = 3;
        in_3.shape[1] = 12;
        in_3.strides[1] = 6;
        in_3.strides[2] = 1;
        tt_expect_error(mt_conv2d(out.t, in_3, weight.t, bias.t, 0, 1, 1, 0, 0, 1, 1, 1), MT_ERR_INVALID_ARGUMENT,
                        "mt_conv2d", &out);
        tt_case("groups = 2 with a weight of 2 channels a group (C = 2)");
        tt_expect_error(mt_conv2d(out.t, in.t, weight.t, bias.t, 0, 1, 1, 0, 0, 1, 1, 2), MT_ERR_SHAPE, "mt_conv2d",
                        &out);
        tt_case("groups = 0");
        tt_expect_error(mt_conv2d(out.t, in.t, wg.t, bias.t, 0, 1, 1, 0, 0, 1, 1, 0), MT_ERR_SHAPE, "mt_conv2d",
                        &out);
        tt_case("out of the wrong shape (padding 1 makes it 6 x 6)");
        tt_expect_error(mt_conv2d(out.t, in.t, weight.t, bias.t, 0, 1, 1, 1, 1, 1, 1, 1), MT_ERR_SHAPE, "mt_conv2d",
                        &out);
        tt_case("a bias of 3 for 2 out channels");
        tt_expect_error(mt_conv2d(out.t, in.t, weight.t, bias3.t, 1, 1, 1, 0, 0, 1, 1, 1), MT_ERR_SHAPE,
                        "mt_conv2d", &out);
        tt_case("no window fits (dilation 3: a 7-wide kernel on 6)");
        tt_expect_error(mt_conv2d(out.t, in.t, weight.t, bias.t, 0, 1, 1, 0, 0, 3, 3, 1), MT_ERR_SHAPE, "mt_conv2d",
                        &out);
        tt_case("stride 0, padding -1");
        tt_expect_error(mt_conv2d(out.t, in.t, weight.t, bias.t, 0, 0, 1, 0, 0, 1, 1, 1), MT_ERR_INVALID_ARGUMENT,
                        "mt_conv2d", &out);
        tt_expect_error(mt_conv2d(out_same.t, in.t, weight.t, bias.t, 0, 1, 1, -1, 1, 1, 1, 1),
                        MT_ERR_INVALID_ARGUMENT, "mt_conv2d", &out_same);
        tt_case("a patch over 48 KiB (stride 8 in float32: 121 x 121 floats)");
        int64_t one[4] = {1, 1, 1, 1};
        tt_tensor in1 = tt_new(MT_FLOAT32, 4, one, TT_CONTIGUOUS), w1 = tt_new(MT_FLOAT32, 4, one, TT_CONTIGUOUS);
        tt_tensor out1 = tt_new(MT_FLOAT32, 4, one, TT_CONTIGUOUS);
        tt_fill(&in1, -1, 1, 0);
        tt_fill(&w1, -1, 1, 0);
        if (tt_expect_error(mt_conv2d(out1.t, in1.t, w1.t, bias.t, 0, 8, 8, 0, 0, 1, 1, 1), MT_ERR_INVALID_ARGUMENT,
                            "mt_conv2d", &out1) &&
            !strstr(mt_last_error(), "121 x 121"))
            tt_fail("the message does not name the patch: \"%s\"", mt_last_error());
        tt_case("a patch over 48 KiB (dilation 100 of a 3 x 3 kernel)");
        int64_t big_is[4] = {1, 1, 201, 201}, big_os[4] = {1, 2, 1, 1};
        tt_tensor in_big = tt_new(MT_FLOAT32, 4, big_is, TT_CONTIGUOUS);
        tt_tensor out_big = tt_new(MT_FLOAT32, 4, big_os, TT_CONTIGUOUS);
        int64_t w1s[4] = {2, 1, 3, 3};
        tt_tensor w_big = tt_new(MT_FLOAT32, 4, w1s, TT_CONTIGUOUS);
        tt_expect_error(mt_conv2d(out_big.t, in_big.t, w_big.t, bias.t, 0, 1, 1, 0, 0, 100, 100, 1),
                        MT_ERR_INVALID_ARGUMENT, "mt_conv2d", &out_big);
        tt_case("out is the input");
        tt_expect_error(mt_conv2d(out_same.t, out_same.t, weight.t, bias.t, 0, 1, 1, 1, 1, 1, 1, 1), TT_ANY_ERROR,
                        "mt_conv2d", NULL);
        tt_case("out overlaps the bias");
        mt_tensor bias_in_out = out.t; /* (2,), the first two elements of out */
        bias_in_out.ndim = 1;
        bias_in_out.shape[0] = 2;
        bias_in_out.strides[0] = 1;
        tt_expect_error(mt_conv2d(out.t, in.t, weight.t, bias_in_out, 1, 1, 1, 0, 0, 1, 1, 1),
                        MT_ERR_INVALID_ARGUMENT, "mt_conv2d", NULL);

        /* The implicit GEMM's three entry points make the same checks. */
        tt_case("mt_conv2d_igemm: int64 operands");
        tt_expect_error(mt_conv2d_igemm(out_i.t, in_i.t, w_i.t, bias.t, 0, 1, 1, 0, 0, 1, 1, 1, -1), MT_ERR_DTYPE,
                        "mt_conv2d_igemm", &out_i);
        tt_case("mt_conv2d_igemm: a bias of 3 for 2 out channels");
        tt_expect_error(mt_conv2d_igemm(out.t, in.t, weight.t, bias3.t, 1, 1, 1, 0, 0, 1, 1, 1, -1), MT_ERR_SHAPE,
                        "mt_conv2d_igemm", &out);
        tt_case("mt_conv2d_igemm_input_grad: grad_out 4 x 4 where padding 1 makes the output 6 x 6");
        if (tt_expect_error(mt_conv2d_igemm_input_grad(in.t, out.t, weight.t, 1, 1, 1, 1, 1, 1, 1, -1), MT_ERR_SHAPE,
                            "mt_conv2d_igemm_input_grad", &in) &&
            !strstr(mt_last_error(), "(1, 2, 6, 6)"))
            tt_fail("the message does not name the shape grad_out must have: \"%s\"", mt_last_error());
        tt_case("mt_conv2d_igemm_input_grad: grad_in is grad_out");
        tt_expect_error(mt_conv2d_igemm_input_grad(out_same.t, out_same.t, weight.t, 1, 1, 1, 1, 1, 1, 1, -1),
                        TT_ANY_ERROR, "mt_conv2d_igemm_input_grad", NULL);
        tt_case("mt_conv2d_igemm_input_grad: groups = 2 with a weight of 2 channels a group");
        tt_expect_error(mt_conv2d_igemm_input_grad(in.t, out.t, weight.t, 1, 1, 0, 0, 1, 1, 2, -1), MT_ERR_SHAPE,
                        "mt_conv2d_igemm_input_grad", &in);
        tt_case("mt_conv2d_igemm_input_grad: a transposed grad_out");
        mt_tensor out_t = out.t;
        out_t.strides[2] = 1;
        out_t.strides[3] = 4;
        tt_expect_error(mt_conv2d_igemm_input_grad(in.t, out_t, weight.t, 1, 1, 0, 0, 1, 1, 1, -1),
                        MT_ERR_INVALID_ARGUMENT, "mt_conv2d_igemm_input_grad", &in);
        tt_case("mt_conv2d_igemm_weight_grad: an int64 input");
        tt_expect_error(mt_conv2d_igemm_weight_grad(weight.t, out.t, in_i.t, 1, 1, 0, 0, 1, 1, 1, -1), MT_ERR_DTYPE,
                        "mt_conv2d_igemm_weight_grad", &weight);
        tt_case("mt_conv2d_igemm_weight_grad: stride 0");
        tt_expect_error(mt_conv2d_igemm_weight_grad(weight.t, out.t, in.t, 0, 1, 0, 0, 1, 1, 1, -1),
                        MT_ERR_INVALID_ARGUMENT, "mt_conv2d_igemm_weight_grad", &weight);
        tt_case("mt_conv2d_igemm: padding 2^30, past the kernel's 32-bit indices");
        if (tt_expect_error(mt_conv2d_igemm(out.t, in.t, weight.t, bias.t, 0, 1, 1, 1 << 30, 0, 1, 1, 1, -1),
                            MT_ERR_INVALID_ARGUMENT, "mt_conv2d_igemm", &out) &&
            !strstr(mt_last_error(), "2^31"))
            tt_fail("the message does not name the limit: \"%s\"", mt_last_error());
        tt_case("mt_conv2d_igemm_weight_grad: no window fits (dilation 3)");
        tt_expect_error(mt_conv2d_igemm_weight_grad(weight.t, out.t, in.t, 1, 1, 0, 0, 3, 3, 1, -1), MT_ERR_SHAPE,
                        "mt_conv2d_igemm_weight_grad", &weight);
        const int configs = mt_conv2d_igemm_config_count();
        tt_case("mt_conv2d_igemm: config %d, past the last", configs);
        if (tt_expect_error(mt_conv2d_igemm(out.t, in.t, weight.t, bias.t, 0, 1, 1, 0, 0, 1, 1, 1, configs),
                            MT_ERR_INVALID_ARGUMENT, "mt_conv2d_igemm", &out) &&
            !strstr(mt_last_error(), "unknown implicit-GEMM config"))
            tt_fail("the message does not name the config: \"%s\"", mt_last_error());
        tt_case("mt_conv2d_igemm_input_grad: config -2");
        tt_expect_error(mt_conv2d_igemm_input_grad(in.t, out.t, weight.t, 1, 1, 0, 0, 1, 1, 1, -2),
                        MT_ERR_INVALID_ARGUMENT, "mt_conv2d_igemm_input_grad", &in);
        tt_case("mt_conv2d_igemm_weight_grad: config %d, past the last", configs);
        tt_expect_error(mt_conv2d_igemm_weight_grad(weight.t, out.t, in.t, 1, 1, 0, 0, 1, 1, 1, configs),
                        MT_ERR_INVALID_ARGUMENT, "mt_conv2d_igemm_weight_grad", &weight);
        tt_case("mt_conv2d_igemm_config_name: no name past the configurations");
        if (mt_conv2d_igemm_config_name(configs) != NULL || mt_conv2d_igemm_config_name(-1) != NULL)
            tt_fail("mt_conv2d_igemm_config_name names a config that does not exist");
        /* The depthwise gradients' checks: weight (2, 2, 3, 3) is not depthwise for C = 2. */
        tt_case("mt_conv2d_depthwise_input_grad: a weight of 2 channels a group");
        if (tt_expect_error(mt_conv2d_depthwise_input_grad(in.t, out.t, weight.t, 1, 1, 0, 0, 1, 1), MT_ERR_SHAPE,
                            "mt_conv2d_depthwise_input_grad", &in) &&
            !strstr(mt_last_error(), "(C, 1, KH, KW)"))
            tt_fail("the message does not name the weight's shape: \"%s\"", mt_last_error());
        tt_case("mt_conv2d_depthwise_input_grad: grad_out 4 x 4 where padding 1 makes the output 6 x 6");
        tt_expect_error(mt_conv2d_depthwise_input_grad(in.t, out.t, wg.t, 1, 1, 1, 1, 1, 1), MT_ERR_SHAPE,
                        "mt_conv2d_depthwise_input_grad", &in);
        tt_case("mt_conv2d_depthwise_input_grad: grad_in is grad_out");
        tt_expect_error(mt_conv2d_depthwise_input_grad(out_same.t, out_same.t, wg.t, 1, 1, 1, 1, 1, 1), TT_ANY_ERROR,
                        "mt_conv2d_depthwise_input_grad", NULL);
        tt_case("mt_conv2d_depthwise_input_grad: a transposed weight");
        mt_tensor wg_t = wg.t;
        wg_t.strides[2] = 1;
        wg_t.strides[3] = 3;
        tt_expect_error(mt_conv2d_depthwise_input_grad(in.t, out.t, wg_t, 1, 1, 0, 0, 1, 1), MT_ERR_INVALID_ARGUMENT,
                        "mt_conv2d_depthwise_input_grad", &in);
        tt_case("mt_conv2d_depthwise: a channel multiplier (weight (4, 1, 3, 3) for C = 2)");
        int64_t ws_m[4] = {4, 1, 3, 3}, os_m[4] = {1, 4, 4, 4};
        tt_tensor w_m = tt_new(MT_FLOAT32, 4, ws_m, TT_CONTIGUOUS), out_m = tt_new(MT_FLOAT32, 4, os_m, TT_CONTIGUOUS);
        tt_fill(&w_m, -1, 1, 0);
        if (tt_expect_error(mt_conv2d_depthwise(out_m.t, in.t, w_m.t, bias.t, 0, 1, 1, 0, 0, 1, 1), MT_ERR_SHAPE,
                            "mt_conv2d_depthwise", &out_m) &&
            !strstr(mt_last_error(), "multiplier"))
            tt_fail("the message does not name the multiplier: \"%s\"", mt_last_error());
        tt_free(&w_m);
        tt_free(&out_m);
        tt_case("mt_conv2d_depthwise: a patch over 48 KiB (stride 8: 249 x 249 floats)");
        tt_expect_error(mt_conv2d_depthwise(out1.t, in1.t, w1.t, bias.t, 0, 8, 8, 0, 0, 1, 1),
                        MT_ERR_INVALID_ARGUMENT, "mt_conv2d_depthwise", &out1);
        tt_case("mt_conv2d_direct: a bias of 3 for 2 out channels; groups that do not divide");
        tt_expect_error(mt_conv2d_direct(out.t, in.t, weight.t, bias3.t, 1, 1, 1, 0, 0, 1, 1, 1), MT_ERR_SHAPE,
                        "mt_conv2d_direct", &out);
        tt_expect_error(mt_conv2d_direct(out.t, in.t, weight.t, bias.t, 0, 1, 1, 0, 0, 1, 1, 2), MT_ERR_SHAPE,
                        "mt_conv2d_direct", &out);
        tt_case("mt_conv2d_direct_input_grad: int64 operands; grad_in is grad_out");
        tt_expect_error(mt_conv2d_direct_input_grad(in_i.t, out_i.t, w_i.t, 1, 1, 0, 0, 1, 1, 1), MT_ERR_DTYPE,
                        "mt_conv2d_direct_input_grad", &in_i);
        tt_expect_error(mt_conv2d_direct_input_grad(out_same.t, out_same.t, weight.t, 1, 1, 1, 1, 1, 1, 1),
                        TT_ANY_ERROR, "mt_conv2d_direct_input_grad", NULL);
        tt_case("mt_conv2d_direct_weight_grad: a transposed input; no window fits (dilation 3)");
        tt_expect_error(mt_conv2d_direct_weight_grad(weight.t, out.t, in_t, 1, 1, 0, 0, 1, 1, 1),
                        MT_ERR_INVALID_ARGUMENT, "mt_conv2d_direct_weight_grad", &weight);
        tt_expect_error(mt_conv2d_direct_weight_grad(weight.t, out.t, in.t, 1, 1, 0, 0, 3, 3, 1), MT_ERR_SHAPE,
                        "mt_conv2d_direct_weight_grad", &weight);
        tt_case("mt_conv2d_depthwise_weight_grad: an int64 input");
        tt_expect_error(mt_conv2d_depthwise_weight_grad(wg.t, out.t, in_i.t, 1, 1, 0, 0, 1, 1), MT_ERR_DTYPE,
                        "mt_conv2d_depthwise_weight_grad", &wg);
        tt_case("mt_conv2d_depthwise_weight_grad: stride 0, then no window fits (dilation 3)");
        tt_expect_error(mt_conv2d_depthwise_weight_grad(wg.t, out.t, in.t, 0, 1, 0, 0, 1, 1),
                        MT_ERR_INVALID_ARGUMENT, "mt_conv2d_depthwise_weight_grad", &wg);
        tt_expect_error(mt_conv2d_depthwise_weight_grad(wg.t, out.t, in.t, 1, 1, 0, 0, 3, 3), MT_ERR_SHAPE,
                        "mt_conv2d_depthwise_weight_grad", &wg);
        tt_tensor *all[] = {&in, &weight, &out, &bias, &bias3, &wg, &out_same, &in_i, &w_i, &out_i, &w_d,
                            &in1, &w1, &out1, &in_big, &out_big, &w_big};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
            tt_free(all[i]);
    }
    return tt_summary();
}
