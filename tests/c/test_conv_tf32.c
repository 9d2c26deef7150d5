/*
 * test_conv_tf32.c: the TF32 tensor-core convolution rung
 * (src/conv_igemm_tf32.cu): mt_conv2d_tf32 and its two gradients,
 * mt_conv2d_tf32_input_grad and mt_conv2d_tf32_weight_grad, each tile
 * configuration, on float32 inputs that are not TF32 already, against the
 * definition of the convolution summed in double, within TF32's rounding:
 *
 *     |got - exact| <= 2^-10 sum |terms| + 1e-5 (1 + |exact|)
 *
 * (each operand rounded to 11 significant bits is off by at most 2^-11
 * relative, so a product by at most about 2^-10; then float sums), the
 * bound of tests/c/test_matmul_tf32.c, in one helper (tf32_expect). Cases:
 * channels and pixels off every tile (65 output channels, 7 x 9 images),
 * padding, stride, dilation and groups, N = 1, a weight gradient split over
 * blocks, an empty batch, random cases from the harness's fixed seed,
 * config 11's 16-byte gathers on channel counts that are and are not
 * multiples of 4; then
 * the refusals (float64, an unknown config).
 *
 *   make check-c T=test_conv_tf32 FILTER=config
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

/* The TF32 bound above as the harness's tolerance: tt_expect_close allows
 * 1e-6 + 1e-5 mag for float32 (n = 1), so this mag makes it the bound, plus
 * 1e-6. */
static tt_expect tf32_expect(double exact, double sum_abs)
{
    tt_expect e = tt_value(exact);
    e.mag = (0x1p-10 * sum_abs + 1e-5 * (1.0 + fabs(exact))) / 1e-5;
    return e;
}

/* The three products from one walk over the convolution's terms: every
 * in[n, ci, y, x] * weight[co, c, i, j] that the definition sums adds to
 * out[n, co, oy, ox]; the same pair read backwards gives the gradients for
 * grad_out: grad_in[n, ci, y, x] += weight * grad_out[n, co, oy, ox] and
 * grad_w[co, c, i, j] += in * grad_out. Each sum and sum of |terms| in
 * double, at the element's flat index. */
typedef struct {
    double *out, *out_abs, *gin, *gin_abs, *gw, *gw_abs;
} reference;

static reference reference_sums(const tt_tensor *in, const tt_tensor *weight, const tt_tensor *bias,
                                const tt_tensor *grad_out, const conv_args *a, int64_t oh, int64_t ow)
{
    const int64_t gi = a->c / a->groups, go = a->c_out / a->groups;
    const int64_t n_out = a->n * a->c_out * oh * ow, n_in = a->n * a->c * a->h * a->w;
    const int64_t n_w = a->c_out * gi * a->kh * a->kw;
    reference r = {calloc(n_out + 1, 8), calloc(n_out + 1, 8), calloc(n_in + 1, 8), calloc(n_in + 1, 8),
                   calloc(n_w + 1, 8), calloc(n_w + 1, 8)};
    for (int64_t n = 0; n < a->n; ++n)
        for (int64_t co = 0; co < a->c_out; ++co)
            for (int64_t oy = 0; oy < oh; ++oy)
                for (int64_t ox = 0; ox < ow; ++ox) {
                    const int64_t o = ((n * a->c_out + co) * oh + oy) * ow + ox;
                    int64_t go_i[4] = {n, co, oy, ox}, b_i[1] = {co};
                    const double gout = tt_at(grad_out, go_i);
                    if (a->bias) {
                        r.out[o] += tt_at(bias, b_i);
                        r.out_abs[o] += fabs(tt_at(bias, b_i));
                    }
                    for (int64_t c = 0; c < gi; ++c)
                        for (int64_t i = 0; i < a->kh; ++i)
                            for (int64_t j = 0; j < a->kw; ++j) {
                                const int64_t y = oy * a->sh - a->ph + i * a->dh, x = ox * a->sw - a->pw + j * a->dw;
                                if (y < 0 || y >= a->h || x < 0 || x >= a->w)
                                    continue; /* zero padding */
                                const int64_t ci = co / go * gi + c;
                                int64_t in_i[4] = {n, ci, y, x}, w_i[4] = {co, c, i, j};
                                const double xv = tt_at(in, in_i), wv = tt_at(weight, w_i);
                                const int64_t e_in = ((n * a->c + ci) * a->h + y) * a->w + x;
                                const int64_t e_w = ((co * gi + c) * a->kh + i) * a->kw + j;
                                r.out[o] += xv * wv, r.out_abs[o] += fabs(xv * wv);
                                r.gin[e_in] += wv * gout, r.gin_abs[e_in] += fabs(wv * gout);
                                r.gw[e_w] += xv * gout, r.gw_abs[e_w] += fabs(xv * gout);
                            }
                }
    return r;
}

static void check_against(const tt_tensor *got, const double *sum, const double *sum_abs)
{
    tt_expect *expect = tt_expect_alloc(got);
    for (int64_t e = 0; e < tt_numel(&got->t); ++e)
        expect[e] = tf32_expect(sum[e], sum_abs[e]);
    tt_check_output(got, expect);
    free(expect);
}

/* One convolution through all three entry points on tile configuration
 * `config` (-1: the library's choice). */
static void tf32_case(int config, conv_args a)
{
    const int64_t oh = out_size(a.h, a.kh, a.sh, a.ph, a.dh), ow = out_size(a.w, a.kw, a.sw, a.pw, a.dw);
    int64_t is[4] = {a.n, a.c, a.h, a.w}, ws[4] = {a.c_out, a.c / a.groups, a.kh, a.kw}, bs[1] = {a.c_out};
    int64_t os[4] = {a.n, a.c_out, oh, ow};
    tt_tensor in = tt_new(MT_FLOAT32, 4, is, TT_CONTIGUOUS), weight = tt_new(MT_FLOAT32, 4, ws, TT_CONTIGUOUS);
    tt_tensor bias = tt_new(MT_FLOAT32, 1, bs, TT_CONTIGUOUS), out = tt_new(MT_FLOAT32, 4, os, TT_CONTIGUOUS);
    tt_tensor grad_out = tt_new(MT_FLOAT32, 4, os, TT_CONTIGUOUS);
    tt_tensor grad_in = tt_new(MT_FLOAT32, 4, is, TT_CONTIGUOUS), grad_w = tt_new(MT_FLOAT32, 4, ws, TT_CONTIGUOUS);
    tt_fill(&in, -2, 2, TT_SOME_ZEROS);
    tt_fill(&weight, -1, 1, 0);
    tt_fill(&bias, -1, 1, 0);
    tt_fill(&grad_out, -1, 1, 0);
    const reference r = reference_sums(&in, &weight, &bias, &grad_out, &a, oh, ow);
    char what[256];
    snprintf(what, sizeof what, "config %d (%s): in %s, weight %s%s, stride (%d, %d), padding (%d, %d), "
             "dilation (%d, %d), groups %d", config, config >= 0 ? mt_conv2d_tf32_config_name(config) : "default",
             tt_str(&in), tt_str(&weight), a.bias ? ", bias" : "", a.sh, a.sw, a.ph, a.pw, a.dh, a.dw, a.groups);

    tt_case("mt_conv2d_tf32 %s", what);
    if (tt_expect_ok(mt_conv2d_tf32(out.t, in.t, weight.t, bias.t, a.bias, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw,
                                    a.groups, config), "mt_conv2d_tf32")) {
        check_against(&out, r.out, r.out_abs);
        tt_expect_unchanged(&in, "in");
        tt_expect_unchanged(&weight, "weight");
    }
    tt_case("mt_conv2d_tf32_input_grad %s", what);
    if (tt_expect_ok(mt_conv2d_tf32_input_grad(grad_in.t, grad_out.t, weight.t, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw,
                                               a.groups, config), "mt_conv2d_tf32_input_grad")) {
        check_against(&grad_in, r.gin, r.gin_abs);
        tt_expect_unchanged(&grad_out, "grad_out");
    }
    tt_case("mt_conv2d_tf32_weight_grad %s", what);
    if (tt_expect_ok(mt_conv2d_tf32_weight_grad(grad_w.t, grad_out.t, in.t, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw,
                                                a.groups, config), "mt_conv2d_tf32_weight_grad")) {
        check_against(&grad_w, r.gw, r.gw_abs);
        tt_expect_unchanged(&in, "in");
    }
    free(r.out), free(r.out_abs), free(r.gin), free(r.gin_abs), free(r.gw), free(r.gw_abs);
    tt_free(&in), tt_free(&weight), tt_free(&bias), tt_free(&out);
    tt_free(&grad_out), tt_free(&grad_in), tt_free(&grad_w);
}

static conv_args args(int64_t n, int64_t c, int64_t hw, int64_t c_out, int64_t k, int stride, int pad, int dil,
                      int groups, int bias)
{
    return (conv_args){n, c, hw, hw + 2, c_out, k, k, stride, stride, pad, pad, dil, dil, groups, bias};
}

/* A random small convolution: any stride, padding, dilation, groups. */
static conv_args random_args(void)
{
    conv_args a;
    a.groups = (int)tt_rand_int(1, 2);
    a.c = a.groups * tt_rand_int(1, 20);
    a.c_out = a.groups * tt_rand_int(1, 20);
    a.n = tt_rand_int(1, 2);
    a.kh = tt_rand_int(1, 3), a.kw = tt_rand_int(1, 3);
    a.sh = (int)tt_rand_int(1, 2), a.sw = (int)tt_rand_int(1, 2);
    a.dh = (int)tt_rand_int(1, 2), a.dw = (int)tt_rand_int(1, 2);
    a.ph = (int)tt_rand_int(0, 2), a.pw = (int)tt_rand_int(0, 2);
    a.h = tt_rand_int(1, 9) + a.dh * (a.kh - 1);
    a.w = tt_rand_int(1, 9) + a.dw * (a.kw - 1);
    a.bias = tt_chance(0.5);
    return a;
}

int main(void)
{
    tt_init("test_conv_tf32");
    const int configs = mt_conv2d_tf32_config_count();

    /* Each tile configuration, named by its number ("config 2"). */
    for (int config = 0; config < configs; ++config)
        TT_GROUP("config %d", config) {
            tf32_case(config, args(2, 16, 7, 65, 3, 1, 1, 1, 1, 1)); /* 65 channels, 7 x 9 pixels: off the tiles */
            tf32_case(config, args(1, 24, 9, 8, 3, 2, 1, 1, 1, 0));  /* N = 1, stride 2 */
            tf32_case(config, args(1, 8, 9, 12, 3, 1, 2, 2, 2, 1));  /* dilation 2, padding 2, 2 groups */
            tf32_case(config, random_args());
        }

    /* Config 11's forward gathers 16 bytes (four channels of a pixel) where
     * C / groups % 4 == 0 and falls back to config 8 elsewhere: both sides of
     * that line, stride 2 with padding, dilation, groups of 4 and 12
     * channels, 130 output channels and 2 x 12 x 14 pixels (off the 128 x 128
     * tile), K over several K-tiles (36 x 9), N = 1, 1 x 1. */
    TT_GROUP("16-byte gathers") {
        tf32_case(11, args(1, 4, 5, 3, 3, 1, 1, 1, 1, 1));    /* the fewest channels: one chunk */
        tf32_case(11, args(2, 36, 12, 130, 3, 1, 1, 1, 1, 1)); /* 36 x 9 = 324 k, 130 channels */
        tf32_case(11, args(1, 12, 11, 20, 3, 2, 1, 1, 1, 0));  /* stride 2, padding 1, N = 1 */
        tf32_case(11, args(2, 8, 9, 6, 3, 1, 2, 2, 1, 1));     /* dilation 2, padding 2 */
        tf32_case(11, args(1, 24, 6, 10, 3, 2, 0, 1, 2, 1));   /* 2 groups of 12 channels, stride 2 */
        tf32_case(11, args(2, 16, 7, 9, 1, 1, 0, 1, 1, 0));    /* 1 x 1 */
        tf32_case(11, args(1, 6, 7, 5, 3, 1, 1, 1, 1, 1));     /* 6 channels: config 8's 4-byte gathers */
        tf32_case(11, args(1, 10, 6, 4, 3, 1, 1, 1, 2, 0));    /* 2 groups of 5: the fallback too */
    }

    /* The library's choice: 1 x 1, a weight gradient split over blocks (K = N
     * OH OW = 2 x 36 x 38), an empty batch. */
    TT_GROUP("default") {
        tf32_case(-1, args(3, 40, 5, 33, 1, 1, 0, 1, 1, 1));
        tf32_case(-1, args(2, 4, 36, 8, 3, 1, 1, 1, 1, 0));
        tf32_case(-1, args(0, 4, 5, 6, 3, 1, 1, 1, 1, 1));
        tf32_case(-1, random_args());
    }

    TT_GROUP("errors") {
        int64_t s[4] = {1, 2, 3, 3}, w[4] = {2, 2, 1, 1};
        tt_tensor x = tt_new(MT_FLOAT64, 4, s, TT_CONTIGUOUS), k = tt_new(MT_FLOAT64, 4, w, TT_CONTIGUOUS);
        tt_tensor y = tt_new(MT_FLOAT64, 4, s, TT_CONTIGUOUS);
        tt_tensor xf = tt_new(MT_FLOAT32, 4, s, TT_CONTIGUOUS), kf = tt_new(MT_FLOAT32, 4, w, TT_CONTIGUOUS);
        tt_tensor yf = tt_new(MT_FLOAT32, 4, s, TT_CONTIGUOUS);
        tt_fill(&x, -1, 1, 0), tt_fill(&k, -1, 1, 0), tt_fill(&xf, -1, 1, 0), tt_fill(&kf, -1, 1, 0);
        tt_case("mt_conv2d_tf32 of float64 operands");
        tt_expect_error(mt_conv2d_tf32(y.t, x.t, k.t, k.t, 0, 1, 1, 0, 0, 1, 1, 1, -1), MT_ERR_DTYPE,
                        "mt_conv2d_tf32", &y);
        tt_case("mt_conv2d_tf32_input_grad of float64 operands");
        tt_expect_error(mt_conv2d_tf32_input_grad(y.t, x.t, k.t, 1, 1, 0, 0, 1, 1, 1, -1), MT_ERR_DTYPE,
                        "mt_conv2d_tf32_input_grad", &y);
        tt_case("mt_conv2d_tf32 config %d, one past the last", configs);
        if (tt_expect_error(mt_conv2d_tf32(yf.t, xf.t, kf.t, kf.t, 0, 1, 1, 0, 0, 1, 1, 1, configs),
                            MT_ERR_INVALID_ARGUMENT, "mt_conv2d_tf32", &yf))
            TT_CHECK(strstr(mt_last_error(), "unknown TF32 convolution config") != NULL, "%s", mt_last_error());
        tt_case("mt_conv2d_tf32_config_name of configs -1 and %d", configs);
        TT_CHECK(mt_conv2d_tf32_config_name(-1) == NULL && mt_conv2d_tf32_config_name(configs) == NULL, "a name");
        tt_free(&x), tt_free(&k), tt_free(&y), tt_free(&xf), tt_free(&kf), tt_free(&yf);
    }
    return tt_summary();
}
