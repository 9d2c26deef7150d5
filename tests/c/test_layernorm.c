/*
 * test_layernorm.c: mt_layer_norm and mt_layer_norm_backward on contiguous
 * (rows, n) tensors, float32 and float64, with and without weight and bias.
 *
 * Row lengths 1, 31, 33, 1025 and 4100 cover the register kernel with 1 to
 * 16 Packs per thread, Pack-width and odd lengths; 40000 (float32) and
 * 20000 (float64) rows are too long for registers and take the three-pass
 * kernel. Backward rows of up to 4 Packs * 512 (8192 floats, 4096
 * doubles) take the fused kernel (dx and the parameters' partial sums in
 * one pass, then one column sum), longer ones the two-kernel rung.
 * Inputs around 1000 with a spread of 1 test that the variance is
 * taken of deviations, not as E[x^2] - E[x]^2 (which cancels catastrophically
 * there in float32).
 *
 *   make build/tests/emu/test_layernorm && build/tests/emu/test_layernorm
 *   MT_TEST_SEED=42 build/tests/emu/test_layernorm     (replay a run)
 */
#include "test_util.h"

/* The reference statistics of row r of x (rows, n), in double. */
static void row_stats(const tt_tensor *x, int64_t r, int64_t n, double eps, double *mean, double *rstd)
{
    double s = 0.0;
    for (int64_t k = 0; k < n; ++k)
        s += x->host[x->t.offset + r * n + k];
    const double m = s / (double)n;
    double v = 0.0;
    for (int64_t k = 0; k < n; ++k) {
        const double d = x->host[x->t.offset + r * n + k] - m;
        v += d * d;
    }
    *mean = m;
    *rstd = 1.0 / sqrt(v / (double)n + eps);
}

static double param(const tt_tensor *p, int64_t k, double absent)
{
    return p ? p->host[p->t.offset + k] : absent;
}

static void forward_case(int dtype, int64_t rows, int64_t n, int affine, double center)
{
    const double eps = 1e-5;
    int64_t shape[] = {rows, n};
    tt_tensor in = tt_new(dtype, 2, shape, TT_CONTIGUOUS);
    tt_tensor out = tt_new(dtype, 2, shape, TT_CONTIGUOUS);
    tt_tensor mean = tt_new(dtype, 1, shape, TT_CONTIGUOUS);
    tt_tensor rstd = tt_new(dtype, 1, shape, TT_CONTIGUOUS);
    tt_tensor w = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_tensor b = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_fill(&in, center - 1, center + 1, 0);
    tt_fill(&w, -2, 2, 0);
    tt_fill(&b, -1, 1, 0);
    tt_case("mt_layer_norm rows %lld, n %lld, affine %d, inputs %g +- 1", (long long)rows, (long long)n, affine,
            center);

    const tt_tensor *pw = affine & MT_LAYER_NORM_WEIGHT ? &w : NULL;
    const tt_tensor *pb = affine & MT_LAYER_NORM_BIAS ? &b : NULL;
    tt_expect *e_out = tt_expect_alloc(&out);
    tt_expect *e_mean = tt_expect_alloc(&mean);
    tt_expect *e_rstd = tt_expect_alloc(&rstd);
    for (int64_t r = 0; r < rows; ++r) {
        double m, s;
        row_stats(&in, r, n, eps, &m, &s);
        /* The statistics are sums of n terms; mean's error scales with the
         * inputs' magnitude, rstd's with rstd (the deviations are ~1). */
        e_mean[r] = (tt_expect){m, fabs(m) + 1.0, n};
        e_rstd[r] = (tt_expect){s, s, n};
        for (int64_t k = 0; k < n; ++k) {
            const double xhat = (in.host[r * n + k] - m) * s;
            const double ref = xhat * param(pw, k, 1.0) + param(pb, k, 0.0);
            /* xhat inherits the relative error of x - mean, about
             * |center| / 1 times the unit roundoff. */
            e_out[r * n + k] = (tt_expect){ref, (fabs(center) + 1.0) * fabs(param(pw, k, 1.0)) + fabs(ref), n};
        }
    }
    if (tt_expect_ok(mt_layer_norm(out.t, mean.t, rstd.t, in.t, w.t, b.t, affine, eps), "mt_layer_norm")) {
        tt_check_output(&out, e_out);
        if (n > 0) {
            tt_check_output(&mean, e_mean);
            tt_check_output(&rstd, e_rstd);
        } else { /* rows of nothing have no statistics: none is written */
            tt_expect_unchanged(&mean, "mean");
            tt_expect_unchanged(&rstd, "rstd");
        }
        tt_expect_unchanged(&in, "in");
    }
    free(e_out);
    free(e_mean);
    free(e_rstd);
    tt_free(&in);
    tt_free(&out);
    tt_free(&mean);
    tt_free(&rstd);
    tt_free(&w);
    tt_free(&b);
}

static void backward_case(int dtype, int64_t rows, int64_t n, int affine, int want)
{
    const double eps = 1e-5;
    int64_t shape[] = {rows, n};
    tt_tensor in = tt_new(dtype, 2, shape, TT_CONTIGUOUS);
    tt_tensor g = tt_new(dtype, 2, shape, TT_CONTIGUOUS);
    tt_tensor dx = tt_new(dtype, 2, shape, TT_CONTIGUOUS);
    tt_tensor mean = tt_new(dtype, 1, shape, TT_CONTIGUOUS);
    tt_tensor rstd = tt_new(dtype, 1, shape, TT_CONTIGUOUS);
    tt_tensor w = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_tensor dw = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_tensor db = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_fill(&in, -3, 3, 0);
    tt_fill(&g, -1, 1, 0);
    tt_fill(&w, -2, 2, 0);
    /* The saved statistics, as the forward computes them (exact here). */
    for (int64_t r = 0; r < rows; ++r)
        row_stats(&in, r, n, eps, &mean.host[r], &rstd.host[r]);
    tt_upload(&mean);
    tt_upload(&rstd);
    tt_case("mt_layer_norm_backward rows %lld, n %lld, affine %d, want %d", (long long)rows, (long long)n, affine,
            want);

    const tt_tensor *pw = affine & MT_LAYER_NORM_WEIGHT ? &w : NULL;
    tt_expect *e_dx = tt_expect_alloc(&dx);
    tt_expect *e_dw = tt_expect_alloc(&dw);
    tt_expect *e_db = tt_expect_alloc(&db);
    double *sum_w = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    double *sum_b = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    double *abs_w = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    for (int64_t r = 0; r < rows; ++r) {
        const double m = mean.host[r], s = rstd.host[r];
        double a = 0.0, c = 0.0, mag = 0.0;
        for (int64_t k = 0; k < n; ++k) {
            const double xhat = (in.host[r * n + k] - m) * s;
            const double gw = g.host[r * n + k] * param(pw, k, 1.0);
            a += gw;
            c += gw * xhat;
            mag += fabs(gw) * (1.0 + fabs(xhat));
        }
        for (int64_t k = 0; k < n; ++k) {
            const double xhat = (in.host[r * n + k] - m) * s;
            const double gw = g.host[r * n + k] * param(pw, k, 1.0);
            const double ref = s * (gw - a / (double)n - xhat * c / (double)n);
            e_dx[r * n + k] = (tt_expect){ref, s * (fabs(gw) + mag / (double)n), n};
            sum_w[k] += g.host[r * n + k] * xhat;
            sum_b[k] += g.host[r * n + k];
            abs_w[k] += fabs(g.host[r * n + k]) * (1.0 + fabs(xhat));
        }
    }
    for (int64_t k = 0; k < n; ++k) {
        e_dw[k] = (tt_expect){sum_w[k], abs_w[k], rows};
        e_db[k] = (tt_expect){sum_b[k], abs_w[k], rows};
    }
    mt_status st = mt_layer_norm_backward(dx.t, dw.t, db.t, g.t, in.t, mean.t, rstd.t, w.t, want, affine);
    if (tt_expect_ok(st, "mt_layer_norm_backward")) {
        /* A gradient not wanted is not written: its buffer keeps its poison. */
        if (want & MT_LAYER_NORM_GRAD_IN)
            tt_check_output(&dx, e_dx);
        else
            tt_expect_unchanged(&dx, "grad_in (not wanted)");
        if (want & MT_LAYER_NORM_WEIGHT)
            tt_check_output(&dw, e_dw);
        else
            tt_expect_unchanged(&dw, "grad_weight (not wanted)");
        if (want & MT_LAYER_NORM_BIAS)
            tt_check_output(&db, e_db);
        else
            tt_expect_unchanged(&db, "grad_bias (not wanted)");
        tt_expect_unchanged(&g, "grad_out");
    }
    free(sum_w);
    free(sum_b);
    free(abs_w);
    free(e_dx);
    free(e_dw);
    free(e_db);
    tt_free(&in);
    tt_free(&g);
    tt_free(&dx);
    tt_free(&mean);
    tt_free(&rstd);
    tt_free(&w);
    tt_free(&dw);
    tt_free(&db);
}

int main(void)
{
    tt_init("test_layernorm");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    static const int64_t lengths[] = {1, 31, 33, 128, 1025, 4100};
    static const int affines[] = {0, MT_LAYER_NORM_WEIGHT, MT_LAYER_NORM_BIAS,
                                  MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS};

    for (int t = 0; t < 2; ++t) {
        const int dtype = dtypes[t];
        TT_GROUP("forward %s", tt_dtype_name(dtype)) {
            for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; ++l)
                forward_case(dtype, lengths[l] > 1000 ? 2 : tt_rand_int(1, 5), lengths[l], affines[l % 4], 0.0);
            /* Far from zero: the variance of deviations, not E[x^2] - E[x]^2. */
            forward_case(dtype, 3, 257, MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS, 1000.0);
            /* The longest rows in registers (16 Packs per thread). */
            forward_case(dtype, 1, dtype == MT_FLOAT32 ? 20000 : 10000, MT_LAYER_NORM_WEIGHT, 0.0);
            /* Too long for registers: the three-pass kernel. */
            forward_case(dtype, 2, dtype == MT_FLOAT32 ? 40000 : 20000, MT_LAYER_NORM_BIAS, 0.0);
            /* No rows, and rows of nothing: nothing is written. */
            forward_case(dtype, 0, 7, MT_LAYER_NORM_WEIGHT, 0.0);
            forward_case(dtype, 3, 0, 0, 0.0);
        }
        TT_GROUP("backward %s", tt_dtype_name(dtype)) {
            for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; ++l) {
                const int affine = affines[l % 4];
                backward_case(dtype, tt_rand_int(1, 70), lengths[l], affine, MT_LAYER_NORM_GRAD_IN | affine);
            }
            /* Only the parameters' gradients, many rows (several row chunks). */
            backward_case(dtype, 300, 40, MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS,
                          MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS);
            /* Rows longer than the fused kernel's registers: dx by rows, then the
             * parameters' partial sums by tiles. */
            backward_case(dtype, 3, 9000, MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS,
                          MT_LAYER_NORM_GRAD_IN | MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS);
            backward_case(dtype, 2, 9000, MT_LAYER_NORM_BIAS, MT_LAYER_NORM_BIAS);
            /* The longest rows the one-pass kernel keeps in registers (4
             * Packs per thread of 512), whole Packs and not; more rows than
             * the grid has blocks (each block walks several), all three
             * gradients. */
            const int64_t longest = dtype == MT_FLOAT32 ? 8192 : 4096;
            backward_case(dtype, 2, longest, MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS,
                          MT_LAYER_NORM_GRAD_IN | MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS);
            backward_case(dtype, 2, longest - 1, MT_LAYER_NORM_WEIGHT, MT_LAYER_NORM_GRAD_IN | MT_LAYER_NORM_WEIGHT);
            backward_case(dtype, 2000, 12, MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS,
                          MT_LAYER_NORM_GRAD_IN | MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS);
            /* Only the input's, with a weight. */
            backward_case(dtype, 4, 65, MT_LAYER_NORM_WEIGHT, MT_LAYER_NORM_GRAD_IN);
            /* No rows: the parameters' gradients are zeros. */
            backward_case(dtype, 0, 9, MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS,
                          MT_LAYER_NORM_GRAD_IN | MT_LAYER_NORM_WEIGHT | MT_LAYER_NORM_BIAS);
        }
    }

    TT_GROUP("bad arguments") {
        int64_t shape[] = {3, 4};
        int64_t wrong[] = {5};
        tt_tensor in = tt_new(MT_FLOAT32, 2, shape, TT_CONTIGUOUS);
        tt_tensor out = tt_new(MT_FLOAT32, 2, shape, TT_CONTIGUOUS);
        tt_tensor mean = tt_new(MT_FLOAT32, 1, shape, TT_CONTIGUOUS);
        tt_tensor rstd = tt_new(MT_FLOAT32, 1, shape, TT_CONTIGUOUS);
        tt_tensor w = tt_new(MT_FLOAT32, 1, wrong, TT_CONTIGUOUS);
        tt_tensor d64 = tt_new(MT_FLOAT64, 2, shape, TT_CONTIGUOUS);
        tt_fill(&in, -1, 1, 0);
        tt_case("a weight of the wrong length");
        tt_expect_error(mt_layer_norm(out.t, mean.t, rstd.t, in.t, w.t, w.t, MT_LAYER_NORM_WEIGHT, 1e-5),
                        MT_ERR_SHAPE, "mt_layer_norm", &out);
        tt_case("an output of another dtype");
        tt_expect_error(mt_layer_norm(d64.t, mean.t, rstd.t, in.t, w.t, w.t, 0, 1e-5), MT_ERR_DTYPE,
                        "mt_layer_norm", &d64);
        tt_case("a negative eps");
        tt_expect_error(mt_layer_norm(out.t, mean.t, rstd.t, in.t, w.t, w.t, 0, -1.0), MT_ERR_INVALID_ARGUMENT,
                        "mt_layer_norm", &out);
        tt_case("mean where rstd should be (overlapping statistics)");
        tt_expect_error(mt_layer_norm(out.t, mean.t, mean.t, in.t, w.t, w.t, 0, 1e-5), MT_ERR_INVALID_ARGUMENT,
                        "mt_layer_norm", &out);
        tt_case("int64 in: refused before anything runs");
        {
            tt_tensor ii = tt_new(MT_INT64, 2, shape, TT_CONTIGUOUS), io = tt_new(MT_INT64, 2, shape, TT_CONTIGUOUS);
            tt_tensor im = tt_new(MT_INT64, 1, shape, TT_CONTIGUOUS), ir = tt_new(MT_INT64, 1, shape, TT_CONTIGUOUS);
            tt_fill(&ii, -3, 3, TT_INTEGERS);
            if (tt_expect_error(mt_layer_norm(io.t, im.t, ir.t, ii.t, w.t, w.t, 0, 1e-5), MT_ERR_DTYPE,
                                "mt_layer_norm", &io))
                TT_CHECK(strstr(mt_last_error(), "int64; this op takes float32 or float64") != NULL, "%s",
                         mt_last_error());
            tt_case("int64 in of the backward");
            tt_expect_error(mt_layer_norm_backward(io.t, w.t, w.t, ii.t, ii.t, im.t, ir.t, w.t, MT_LAYER_NORM_GRAD_IN,
                                                   0),
                            MT_ERR_DTYPE, "mt_layer_norm_backward", &io);
            tt_free(&ii);
            tt_free(&io);
            tt_free(&im);
            tt_free(&ir);
        }
        tt_case("a weight's gradient without a weight");
        tt_expect_error(mt_layer_norm_backward(out.t, w.t, w.t, in.t, in.t, mean.t, rstd.t, w.t,
                                               MT_LAYER_NORM_WEIGHT, 0),
                        MT_ERR_INVALID_ARGUMENT, "mt_layer_norm_backward", &out);
        tt_free(&in);
        tt_free(&out);
        tt_free(&mean);
        tt_free(&rstd);
        tt_free(&w);
        tt_free(&d64);
    }
    return tt_summary();
}
