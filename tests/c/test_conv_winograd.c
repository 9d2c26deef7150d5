/*
 * test_conv_winograd.c: the Winograd rung (src/conv_winograd.cu), F(2x2,
 * 3x3). Its three steps, with the 16 products between them done here on the
 * host in double (what the caller's batched matmul computes), must give a
 * 3x3, stride-1 convolution: the forward (filters as they are, any padding)
 * and the input gradient (filters turned by 180 degrees, the channels
 * swapped, grad_out padded by 2 - padding), in float32 and float64, against
 * the definition summed in double. Cases: odd and even sides (the last
 * tile's half outside the image), padding 0, 1 and 2, N = 1 and 2, channel
 * counts off every block, bias or none, an empty batch, random cases from
 * the harness's fixed seed; then the refusals.
 *
 *     |got - exact| <= atol + rtol sqrt(9 C) 4 sum |terms|
 *
 * (the harness's per-dtype tolerance, tt_expect_close, on a magnitude of
 * four times the sum of |terms|: a transformed tile mixes up to four input
 * values and the transforms' sums round in the dtype.)
 *
 *   make check-c T=test_conv_winograd
 */
#include "test_util.h"

typedef struct {
    int64_t n, c, h, w, k;
    int pad, bias, flip; /* flip: the input gradient's form */
} wino_args;

/* out[n][k][y][x] = bias[k] + sum_{c,i,j} in[n][c][y - pad + i][x - pad + j] g_kc[i][j], with g
 * the filter of (k, c): weight[k][c][i][j], or under flip weight[c][k][2 - i][2 - j] (weight then
 * (C_in of the gradient, K, 3, 3), as the forward's weight). Sums and sums of |terms| in double. */
static void reference(const tt_tensor *in, const tt_tensor *weight, const tt_tensor *bias, const wino_args *a,
                      int64_t oh, int64_t ow, double *sum, double *sum_abs)
{
    for (int64_t n = 0; n < a->n; ++n)
        for (int64_t k = 0; k < a->k; ++k)
            for (int64_t y = 0; y < oh; ++y)
                for (int64_t x = 0; x < ow; ++x) {
                    const int64_t o = ((n * a->k + k) * oh + y) * ow + x;
                    int64_t b_i[1] = {k};
                    sum[o] = a->bias ? tt_at(bias, b_i) : 0.0;
                    sum_abs[o] = fabs(sum[o]);
                    for (int64_t c = 0; c < a->c; ++c)
                        for (int i = 0; i < 3; ++i)
                            for (int j = 0; j < 3; ++j) {
                                const int64_t yy = y - a->pad + i, xx = x - a->pad + j;
                                if (yy < 0 || yy >= a->h || xx < 0 || xx >= a->w)
                                    continue; /* zero padding */
                                int64_t in_i[4] = {n, c, yy, xx};
                                int64_t w_i[4] = {k, c, i, j}, f_i[4] = {c, k, 2 - i, 2 - j};
                                const double t = tt_at(in, in_i) * tt_at(weight, a->flip ? f_i : w_i);
                                sum[o] += t, sum_abs[o] += fabs(t);
                            }
                }
}

/* One convolution through the three steps; m = u @ v on the host. */
static void wino_case(int dtype, wino_args a)
{
    const int64_t oh = a.h + 2 * a.pad - 2, ow = a.w + 2 * a.pad - 2;
    const int64_t tiles = a.n * ((oh + 1) / 2) * ((ow + 1) / 2);
    int64_t is[4] = {a.n, a.c, a.h, a.w}, bs[1] = {a.k}, os[4] = {a.n, a.k, oh, ow};
    int64_t ws[4] = {a.flip ? a.c : a.k, a.flip ? a.k : a.c, 3, 3};
    int64_t us[3] = {16, a.k, a.c}, vs[3] = {16, a.c, tiles}, ms[3] = {16, a.k, tiles};
    tt_tensor in = tt_new(dtype, 4, is, TT_CONTIGUOUS), weight = tt_new(dtype, 4, ws, TT_CONTIGUOUS);
    tt_tensor bias = tt_new(dtype, 1, bs, TT_CONTIGUOUS), out = tt_new(dtype, 4, os, TT_CONTIGUOUS);
    tt_tensor u = tt_new(dtype, 3, us, TT_CONTIGUOUS), v = tt_new(dtype, 3, vs, TT_CONTIGUOUS);
    tt_tensor m = tt_new(dtype, 3, ms, TT_CONTIGUOUS);
    tt_fill(&in, -2, 2, TT_SOME_ZEROS);
    tt_fill(&weight, -1, 1, 0);
    tt_fill(&bias, -1, 1, 0);
    const int64_t n_out = a.n * a.k * oh * ow;
    double *sum = calloc(n_out + 1, 8), *sum_abs = calloc(n_out + 1, 8);
    reference(&in, &weight, &bias, &a, oh, ow, sum, sum_abs);

    tt_case("%s: in %s, %lld out channels, padding %d%s%s", dtype == MT_FLOAT32 ? "float32" : "float64",
            tt_str(&in), (long long)a.k, a.pad, a.bias ? ", bias" : "", a.flip ? ", flipped filters" : "");
    if (tt_expect_ok(mt_conv2d_winograd_filter(u.t, weight.t, a.flip), "mt_conv2d_winograd_filter") &&
        tt_expect_ok(mt_conv2d_winograd_input(v.t, in.t, a.pad, a.pad), "mt_conv2d_winograd_input")) {
        double *hu = calloc(u.cap + 1, 8), *hv = calloc(v.cap + 1, 8);
        tt_download(&u, hu), tt_download(&v, hv);
        for (int64_t xi = 0; xi < 16; ++xi)
            for (int64_t k = 0; k < a.k; ++k)
                for (int64_t p = 0; p < tiles; ++p) {
                    double s = 0.0;
                    for (int64_t c = 0; c < a.c; ++c)
                        s += hu[(xi * a.k + k) * a.c + c] * hv[(xi * a.c + c) * tiles + p];
                    m.host[(xi * a.k + k) * tiles + p] = s;
                }
        tt_upload(&m);
        if (tt_expect_ok(mt_conv2d_winograd_output(out.t, m.t, bias.t, a.bias), "mt_conv2d_winograd_output")) {
            tt_expect *expect = tt_expect_alloc(&out);
            for (int64_t e = 0; e < n_out; ++e) {
                expect[e] = tt_value(sum[e]);
                expect[e].mag = 4 * sum_abs[e];
                expect[e].n = 9 * (a.c > 0 ? a.c : 1);
            }
            tt_check_output(&out, expect);
            free(expect);
        }
        tt_expect_unchanged(&in, "in");
        tt_expect_unchanged(&weight, "weight");
        free(hu), free(hv);
    }
    free(sum), free(sum_abs);
    tt_free(&in), tt_free(&weight), tt_free(&bias), tt_free(&out), tt_free(&u), tt_free(&v), tt_free(&m);
}

/* The weight gradient of the convolution of in by 3x3 filters with padding a.pad, for a random
 * grad_out, through the three backward steps, the 16 products cut into `slices` runs of tiles
 * (ragged: the last run is the rest) and computed on the host in double. */
static void weight_grad_case(int dtype, wino_args a, int64_t slices)
{
    const int64_t oh = a.h + 2 * a.pad - 2, ow = a.w + 2 * a.pad - 2;
    const int64_t tiles = a.n * ((oh + 1) / 2) * ((ow + 1) / 2), per = slices > 0 ? (tiles + slices - 1) / slices : 0;
    int64_t is[4] = {a.n, a.c, a.h, a.w}, gs[4] = {a.n, a.k, oh, ow}, ws[4] = {a.k, a.c, 3, 3};
    int64_t vs[3] = {16, a.c, tiles}, ms[3] = {16, a.k, tiles}, us[4] = {16, slices, a.k, a.c};
    tt_tensor in = tt_new(dtype, 4, is, TT_CONTIGUOUS), grad = tt_new(dtype, 4, gs, TT_CONTIGUOUS);
    tt_tensor dw = tt_new(dtype, 4, ws, TT_CONTIGUOUS), v = tt_new(dtype, 3, vs, TT_CONTIGUOUS);
    tt_tensor dm = tt_new(dtype, 3, ms, TT_CONTIGUOUS), du = tt_new(dtype, 4, us, TT_CONTIGUOUS);
    tt_fill(&in, -2, 2, TT_SOME_ZEROS);
    tt_fill(&grad, -1, 1, 0);

    tt_case("%s weight gradient: in %s, %lld out channels, padding %d, %lld slices",
            dtype == MT_FLOAT32 ? "float32" : "float64", tt_str(&in), (long long)a.k, a.pad, (long long)slices);
    if (tt_expect_ok(mt_conv2d_winograd_input(v.t, in.t, a.pad, a.pad), "mt_conv2d_winograd_input") &&
        tt_expect_ok(mt_conv2d_winograd_output_grad(dm.t, grad.t), "mt_conv2d_winograd_output_grad")) {
        double *hv = calloc(v.cap + 1, 8), *hm = calloc(dm.cap + 1, 8);
        tt_download(&v, hv), tt_download(&dm, hm);
        for (int64_t xi = 0; xi < 16; ++xi)
            for (int64_t sl = 0; sl < slices; ++sl)
                for (int64_t k = 0; k < a.k; ++k)
                    for (int64_t c = 0; c < a.c; ++c) {
                        double sum = 0.0;
                        for (int64_t p = sl * per; p < tiles && p < (sl + 1) * per; ++p)
                            sum += hm[(xi * a.k + k) * tiles + p] * hv[(xi * a.c + c) * tiles + p];
                        du.host[((xi * slices + sl) * a.k + k) * a.c + c] = sum;
                    }
        tt_upload(&du);
        if (tt_expect_ok(mt_conv2d_winograd_filter_grad(dw.t, du.t), "mt_conv2d_winograd_filter_grad")) {
            tt_expect *expect = tt_expect_alloc(&dw);
            for (int64_t k = 0; k < a.k; ++k)
                for (int64_t c = 0; c < a.c; ++c)
                    for (int i = 0; i < 3; ++i)
                        for (int j = 0; j < 3; ++j) {
                            double sum = 0.0, sum_abs = 0.0;
                            for (int64_t n = 0; n < a.n; ++n)
                                for (int64_t y = 0; y < oh; ++y)
                                    for (int64_t x = 0; x < ow; ++x) {
                                        const int64_t yy = y - a.pad + i, xx = x - a.pad + j;
                                        if (yy < 0 || yy >= a.h || xx < 0 || xx >= a.w)
                                            continue;
                                        int64_t g_i[4] = {n, k, y, x}, in_i[4] = {n, c, yy, xx};
                                        const double t = tt_at(&grad, g_i) * tt_at(&in, in_i);
                                        sum += t, sum_abs += fabs(t);
                                    }
                            tt_expect *e = &expect[((k * a.c + c) * 3 + i) * 3 + j];
                            *e = tt_value(sum);
                            e->mag = 16 * sum_abs;
                            e->n = 16 * (tiles > 0 ? tiles : 1);
                        }
            tt_check_output(&dw, expect);
            free(expect);
        }
        tt_expect_unchanged(&in, "in");
        tt_expect_unchanged(&grad, "grad");
        free(hv), free(hm);
    }
    tt_free(&in), tt_free(&grad), tt_free(&dw), tt_free(&v), tt_free(&dm), tt_free(&du);
}

static wino_args args(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int pad, int bias, int flip)
{
    return (wino_args){n, c, h, w, k, pad, bias, flip};
}

static wino_args random_args(void)
{
    wino_args a;
    a.pad = (int)tt_rand_int(0, 2);
    a.n = tt_rand_int(1, 2), a.c = tt_rand_int(1, 12), a.k = tt_rand_int(1, 12);
    a.h = tt_rand_int(3 - 2 * a.pad > 1 ? 3 - 2 * a.pad : 1, 11);
    a.w = tt_rand_int(3 - 2 * a.pad > 1 ? 3 - 2 * a.pad : 1, 11);
    a.bias = tt_chance(0.5), a.flip = tt_chance(0.5);
    return a;
}

int main(void)
{
    tt_init("test_conv_winograd");
    static const int dtypes[2] = {MT_FLOAT32, MT_FLOAT64};
    for (int d = 0; d < 2; ++d)
        TT_GROUP("%s", dtypes[d] == MT_FLOAT32 ? "float32" : "float64") {
            const int dt = dtypes[d];
            wino_case(dt, args(2, 5, 8, 8, 7, 1, 1, 0));   /* even sides, padding 1 (a ResNet's 3x3) */
            wino_case(dt, args(1, 3, 7, 9, 4, 1, 0, 0));   /* odd sides: the last tiles half outside */
            wino_case(dt, args(1, 4, 6, 5, 3, 0, 1, 0));   /* no padding */
            wino_case(dt, args(2, 2, 5, 6, 3, 2, 0, 0));   /* padding 2 */
            wino_case(dt, args(1, 1, 1, 1, 1, 1, 1, 0));   /* one pixel, one channel */
            wino_case(dt, args(2, 6, 7, 6, 5, 1, 0, 1));   /* the input gradient's form */
            wino_case(dt, args(1, 3, 9, 8, 17, 0, 0, 1));
            wino_case(dt, args(0, 3, 5, 5, 2, 1, 1, 0));   /* an empty batch */
            for (int r = 0; r < (tt_all_cases() ? 12 : 3); ++r)
                wino_case(dt, random_args());
        }
    for (int d = 0; d < 2; ++d)
        TT_GROUP("%s weight gradient", dtypes[d] == MT_FLOAT32 ? "float32" : "float64") {
            const int dt = dtypes[d];
            weight_grad_case(dt, args(2, 5, 8, 8, 7, 1, 0, 0), 1);  /* even sides, padding 1 */
            weight_grad_case(dt, args(2, 3, 7, 9, 4, 1, 0, 0), 3);  /* odd sides, ragged slices */
            weight_grad_case(dt, args(1, 4, 6, 5, 3, 0, 0, 0), 2);  /* no padding */
            weight_grad_case(dt, args(2, 2, 5, 6, 3, 2, 0, 0), 4);  /* padding 2 */
            weight_grad_case(dt, args(1, 1, 1, 1, 1, 1, 0, 0), 1);  /* one pixel, one channel */
            weight_grad_case(dt, args(0, 3, 5, 5, 2, 1, 0, 0), 1);  /* an empty batch: zeros */
            weight_grad_case(dt, args(0, 3, 5, 5, 2, 1, 0, 0), 0);  /* and no slices at all */
            for (int r = 0; r < (tt_all_cases() ? 12 : 3); ++r)
                weight_grad_case(dt, random_args(), tt_rand_int(1, 3));
        }

    TT_GROUP("refusals") {
        int64_t ws[4] = {4, 3, 5, 5}, us[3] = {16, 4, 3}, is[4] = {1, 3, 6, 6}, vs[3] = {16, 3, 9};
        int64_t vbad[3] = {16, 3, 8}, os[4] = {1, 4, 6, 6}, ms[3] = {16, 4, 9};
        tt_tensor w5 = tt_new(MT_FLOAT32, 4, ws, TT_CONTIGUOUS), u = tt_new(MT_FLOAT32, 3, us, TT_CONTIGUOUS);
        tt_tensor in = tt_new(MT_FLOAT32, 4, is, TT_CONTIGUOUS), v = tt_new(MT_FLOAT32, 3, vbad, TT_CONTIGUOUS);
        tt_tensor v64 = tt_new(MT_FLOAT64, 3, vs, TT_CONTIGUOUS), out = tt_new(MT_FLOAT32, 4, os, TT_CONTIGUOUS);
        tt_tensor m = tt_new(MT_FLOAT32, 3, ms, TT_CONTIGUOUS);
        tt_fill(&w5, -1, 1, 0), tt_fill(&in, -1, 1, 0), tt_fill(&m, -1, 1, 0);
        tt_case("a 5x5 filter");
        tt_expect_error(mt_conv2d_winograd_filter(u.t, w5.t, 0), MT_ERR_SHAPE, "mt_conv2d_winograd_filter", &u);
        tt_case("v of the wrong tile count");
        tt_expect_error(mt_conv2d_winograd_input(v.t, in.t, 1, 1), MT_ERR_SHAPE, "mt_conv2d_winograd_input", &v);
        tt_case("v of another dtype");
        tt_expect_error(mt_conv2d_winograd_input(v64.t, in.t, 1, 1), MT_ERR_DTYPE, "mt_conv2d_winograd_input",
                        &v64);
        tt_case("a negative padding");
        tt_expect_error(mt_conv2d_winograd_input(v.t, in.t, -1, 1), MT_ERR_INVALID_ARGUMENT,
                        "mt_conv2d_winograd_input", &v);
        tt_case("m of the wrong channel count for out");
        int64_t os2[4] = {1, 5, 6, 6};
        tt_tensor out5 = tt_new(MT_FLOAT32, 4, os2, TT_CONTIGUOUS);
        tt_expect_error(mt_conv2d_winograd_output(out5.t, m.t, m.t, 0), MT_ERR_SHAPE, "mt_conv2d_winograd_output",
                        &out5);
        tt_free(&w5), tt_free(&u), tt_free(&in), tt_free(&v), tt_free(&v64), tt_free(&out), tt_free(&m);
        tt_free(&out5);
        tt_case("dm of the wrong tile count for grad");
        int64_t gs[4] = {1, 4, 6, 6}, dms[3] = {16, 4, 8}, dws[4] = {4, 3, 3, 3}, dus[4] = {16, 2, 3, 4};
        tt_tensor g = tt_new(MT_FLOAT32, 4, gs, TT_CONTIGUOUS), dm = tt_new(MT_FLOAT32, 3, dms, TT_CONTIGUOUS);
        tt_tensor dw = tt_new(MT_FLOAT32, 4, dws, TT_CONTIGUOUS), du = tt_new(MT_FLOAT32, 4, dus, TT_CONTIGUOUS);
        tt_fill(&g, -1, 1, 0), tt_fill(&du, -1, 1, 0);
        tt_expect_error(mt_conv2d_winograd_output_grad(dm.t, g.t), MT_ERR_SHAPE, "mt_conv2d_winograd_output_grad",
                        &dm);
        tt_case("du with K and C swapped");
        tt_expect_error(mt_conv2d_winograd_filter_grad(dw.t, du.t), MT_ERR_SHAPE, "mt_conv2d_winograd_filter_grad",
                        &dw);
        tt_free(&g), tt_free(&dm), tt_free(&dw), tt_free(&du);
    }
    return tt_summary();
}
