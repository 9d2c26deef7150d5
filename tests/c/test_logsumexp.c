/*
 * test_logsumexp.c: mt_logsumexp along each dim of strided tensors, and
 * mt_logsumexp_backward from the lse the forward wrote (grad_out * exp(x - lse),
 * the reduced dim repeated), and
 * mt_cross_entropy / mt_cross_entropy_backward on (N, C) logits, float32 and
 * float64 (targets int64 or the logits' dtype), against the two-pass
 * formulas in double; int64 inputs are refused.
 *
 * Inputs around +-1000 overflow or underflow exp() unless the row's maximum
 * is taken out; rows of -inf and rows holding +inf follow the formula
 * m + log(sum(exp(x - m))) (-inf and +inf); row lengths 1, 31, 33 and 1025
 * cross the block sizes of a one-block-per-row kernel.
 *
 *   make build/tests/emu/test_logsumexp && build/tests/emu/test_logsumexp
 *   MT_TEST_SEED=42 build/tests/emu/test_logsumexp     (replay a run)
 */
#include "test_util.h"

/* The layout of logsumexp's input and cross_entropy's logits and gradient:
 * TT_CONTIGUOUS for the kernels' 16-byte-load paths. */
static int g_role_in = TT_INPUT;
static int g_role_out = TT_OUTPUT;

/* log(sum(exp(x))) of `len` values read by `at(k)`, the two-pass way. */
static double ref_lse(const tt_tensor *x, int64_t *index, int dim, int64_t len)
{
    double m = -INFINITY;
    for (int64_t k = 0; k < len; ++k) {
        index[dim] = k;
        m = fmax(m, tt_at(x, index));
    }
    if (isinf(m))
        return m; /* all -inf, or a +inf in the row */
    double s = 0.0;
    for (int64_t k = 0; k < len; ++k) {
        index[dim] = k;
        s += exp(tt_at(x, index) - m);
    }
    return m + log(s);
}

/* mt_logsumexp_backward from lse, the forward's output (in's shape, dim
 * kept as 1): grad_in = grad_out * exp(in - lse), checked against that
 * formula in double on the lse the kernel read, so that only the backward
 * is under test. A row of -inf gives NaN (-inf - -inf), as torch's. */
static void logsumexp_backward_check(const tt_tensor *in, tt_tensor *lse, int dim)
{
    tt_tensor grad = tt_new(in->t.dtype, lse->t.ndim, lse->t.shape, g_role_in);
    tt_tensor dx = tt_new(in->t.dtype, in->t.ndim, in->t.shape, g_role_out);
    tt_fill(&grad, -2, 2, 0);
    tt_download(lse, lse->host);
    tt_case("mt_logsumexp_backward dim %d: grad_in %s, grad_out %s", dim, tt_str(&dx), tt_str(&grad));
    tt_expect *expect = tt_expect_alloc(&dx);
    for (int64_t i = 0; i < tt_numel(&dx.t); ++i) {
        int64_t index[MT_MAX_DIMS];
        to_index(i, dx.t.shape, dx.t.ndim, index);
        const double x = tt_at(in, index);
        index[dim] = 0;
        const double g = tt_at(&grad, index);
        const double l = tt_at(lse, index);
        expect[i] = (tt_expect){g * exp(x - l), fabs(g), 1};
    }
    if (tt_expect_ok(mt_logsumexp_backward(dx.t, grad.t, in->t, lse->t), "mt_logsumexp_backward")) {
        tt_check_output(&dx, expect);
        tt_expect_unchanged(in, "in");
    }
    free(expect);
    tt_free(&grad);
    tt_free(&dx);
}

static void logsumexp_case(int dtype, int ndim, const int64_t *shape, int dim, double center, int specials)
{
    int64_t out_shape[MT_MAX_DIMS];
    for (int d = 0; d < ndim; ++d)
        out_shape[d] = d == dim ? 1 : shape[d];
    tt_tensor in = tt_new(dtype, ndim, shape, g_role_in);
    tt_tensor out = tt_new(dtype, ndim, out_shape, g_role_out);
    tt_fill(&in, center - 5, center + 5, 0);
    /* A row of -inf and a +inf in another row, where there are rows enough. */
    if (specials && tt_numel(&in.t) >= 2 * shape[dim] && shape[dim] > 0) {
        int64_t index[MT_MAX_DIMS] = {0};
        for (int64_t k = 0; k < shape[dim]; ++k) {
            index[dim] = k;
            in.host[tt_pos(&in, index)] = -INFINITY;
        }
        for (int d = 0; d < ndim; ++d)
            if (d != dim && shape[d] > 1) {
                index[d] = 1;
                index[dim] = shape[dim] - 1;
                in.host[tt_pos(&in, index)] = INFINITY;
                break;
            }
        tt_upload(&in);
    }
    tt_case("mt_logsumexp dim %d, inputs %g +- 5%s: out %s, in %s", dim, center, specials ? ", -inf and inf" : "",
            tt_str(&out), tt_str(&in));
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        int64_t index[MT_MAX_DIMS];
        to_index(i, out.t.shape, out.t.ndim, index);
        const double ref = ref_lse(&in, index, dim, shape[dim]);
        expect[i] = (tt_expect){ref, fabs(ref) + 1.0, shape[dim] > 0 ? shape[dim] : 1};
    }
    if (tt_expect_ok(mt_logsumexp(out.t, in.t, dim), "mt_logsumexp")) {
        tt_check_output(&out, expect);
        tt_expect_unchanged(&in, "in");
        logsumexp_backward_check(&in, &out, dim);
    }
    free(expect);
    tt_free(&in);
    tt_free(&out);
}

static void cross_entropy_case(int dtype, int target_dtype, int64_t rows, int64_t classes, double center,
                               int grad_broadcast)
{
    int64_t shape[] = {rows, classes};
    tt_tensor x = tt_new(dtype, 2, shape, g_role_in);
    tt_tensor t = tt_new(target_dtype, 1, shape, TT_INPUT);
    tt_tensor loss = tt_new(dtype, 1, shape, TT_OUTPUT);
    tt_tensor lse = tt_new(dtype, 1, shape, TT_OUTPUT);
    tt_tensor dx = tt_new(dtype, 2, shape, g_role_out);
    tt_tensor g = tt_new(dtype, 1, shape, TT_INPUT);
    tt_fill(&x, center - 4, center + 4, 0);
    tt_fill(&g, -1, 1, 0);
    /* Whole-number targets in [0, classes), through whatever layout t has. */
    for (int64_t r = 0; r < rows; ++r)
        t.host[tt_pos(&t, &r)] = (double)tt_rand_int(0, classes - 1);
    tt_upload(&t);
    if (grad_broadcast) { /* one loss gradient for every row: stride 0 */
        g.t.strides[0] = 0;
    }
    const double scale = grad_broadcast ? 1.0 / (double)(rows > 0 ? rows : 1) : 1.0;
    tt_case("mt_cross_entropy (and backward) rows %lld, classes %lld, logits %g +- 4%s: logits %s, targets %s",
            (long long)rows, (long long)classes, center, grad_broadcast ? ", broadcast grad" : "", tt_str(&x),
            tt_dtype_name(target_dtype));
    tt_expect *e_loss = tt_expect_alloc(&loss);
    tt_expect *e_lse = tt_expect_alloc(&lse);
    tt_expect *e_dx = tt_expect_alloc(&dx);
    for (int64_t r = 0; r < rows; ++r) {
        int64_t index[2] = {r, 0};
        const double l = ref_lse(&x, index, 1, classes);
        const int64_t target = (int64_t)t.host[tt_pos(&t, &r)];
        index[1] = target;
        const double picked = tt_at(&x, index);
        e_lse[r] = (tt_expect){l, fabs(l) + 1.0, classes};
        e_loss[r] = (tt_expect){l - picked, fabs(l) + fabs(picked) + 1.0, classes};
        const double gr = g.host[g.t.offset + r * g.t.strides[0]] * scale;
        for (int64_t k = 0; k < classes; ++k) {
            index[1] = k;
            const double ref = gr * (exp(tt_at(&x, index) - l) - (k == target ? 1.0 : 0.0));
            e_dx[r * classes + k] = (tt_expect){ref, fabs(gr) * (fabs(center) + 2.0), classes};
        }
    }
    if (tt_expect_ok(mt_cross_entropy(loss.t, lse.t, x.t, t.t, 0), "mt_cross_entropy")) {
        tt_check_output(&loss, e_loss);
        tt_check_output(&lse, e_lse);
        /* The backward reads the lse the forward wrote. */
        if (tt_expect_ok(mt_cross_entropy_backward(dx.t, x.t, t.t, lse.t, g.t, scale, 0), "mt_cross_entropy_backward"))
            tt_check_output(&dx, e_dx);
    }
    free(e_loss);
    free(e_lse);
    free(e_dx);
    tt_free(&x);
    tt_free(&t);
    tt_free(&loss);
    tt_free(&lse);
    tt_free(&dx);
    tt_free(&g);
}

int main(void)
{
    tt_init("test_logsumexp");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    static const int64_t lengths[] = {1, 31, 33, 1025};
    static const double centers[] = {0.0, 1000.0, -1000.0};
    int64_t shape[MT_MAX_DIMS];
    for (int ti = 0; ti < 2; ++ti) {
        const int dtype = dtypes[ti];
        TT_GROUP("logsumexp %s", tt_dtype_name(dtype)) {
            for (int c = 0; c < 10; ++c) {
                int ndim = tt_random_shape(shape, 1, 4, 300, 0.1);
                for (int dim = 0; dim < ndim; ++dim)
                    logsumexp_case(dtype, ndim, shape, dim, 0.0, c % 2);
            }
            for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; ++l)
                for (size_t c = 0; c < sizeof centers / sizeof centers[0]; ++c) {
                    int64_t rows_shape[] = {3, lengths[l]};
                    logsumexp_case(dtype, 2, rows_shape, 1, centers[c], 1);
                }
            /* Empty rows give -inf; no rows, nothing. */
            static const int64_t s_empty[] = {3, 0};
            logsumexp_case(dtype, 2, s_empty, 1, 0.0, 0);
            logsumexp_case(dtype, 2, s_empty, 0, 0.0, 0);
        }
        TT_GROUP("cross_entropy %s", tt_dtype_name(dtype)) {
            for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; ++l)
                for (size_t c = 0; c < sizeof centers / sizeof centers[0]; ++c)
                    cross_entropy_case(dtype, (l + c) % 2 ? MT_INT64 : dtype, tt_rand_int(1, 9), lengths[l],
                                       centers[c], (int)(l + c) % 2);
            cross_entropy_case(dtype, dtype, 0, 5, 0.0, 1);
            cross_entropy_case(dtype, MT_INT64, 0, 5, 0.0, 1);
        }
    }
    /* Contiguous rows whose length is a multiple of the Pack: 16-byte loads
     * (and stores, for the gradient). */
    TT_GROUP("contiguous rows") {
        g_role_in = g_role_out = TT_CONTIGUOUS;
        static const int64_t widths[] = {4, 64, 1024, 4100};
        for (int ti = 0; ti < 2; ++ti)
            for (size_t w = 0; w < sizeof widths / sizeof widths[0]; ++w) {
                int64_t rows_shape[] = {3, widths[w]};
                logsumexp_case(dtypes[ti], 2, rows_shape, 1, w % 2 ? 1000.0 : 0.0, 1);
                cross_entropy_case(dtypes[ti], w < 2 ? MT_INT64 : dtypes[ti], 5, widths[w], w % 2 ? -1000.0 : 0.0,
                                   (int)w % 2);
            }
        /* Many short rows: several rows per block in the backward, a row
         * count off the block's. */
        static const int64_t many[][2] = {{257, 5}, {130, 8}, {9, 3000}};
        for (int ti = 0; ti < 2; ++ti)
            for (size_t m = 0; m < sizeof many / sizeof many[0]; ++m)
                logsumexp_case(dtypes[ti], 2, many[m], 1, 0.0, 0);
        g_role_in = TT_INPUT;
        g_role_out = TT_OUTPUT;
    }
    TT_GROUP("bad targets") {
        int64_t shape[] = {2, 3};
        tt_tensor x = tt_new(MT_FLOAT32, 2, shape, TT_CONTIGUOUS);
        tt_tensor t = tt_new(MT_FLOAT32, 1, shape, TT_CONTIGUOUS);
        tt_tensor loss = tt_new(MT_FLOAT32, 1, shape, TT_CONTIGUOUS);
        tt_tensor lse = tt_new(MT_FLOAT32, 1, shape, TT_CONTIGUOUS);
        tt_fill(&x, -1, 1, 0);
        t.host[0] = 1.0;
        t.host[1] = 3.0;
        tt_upload(&t);
        tt_case("a target equal to the number of classes");
        tt_expect_error(mt_cross_entropy(loss.t, lse.t, x.t, t.t, 0), MT_ERR_INVALID_ARGUMENT, "mt_cross_entropy", &loss);
        t.host[1] = 0.5;
        tt_upload(&t);
        tt_case("a target that is no whole number");
        tt_expect_error(mt_cross_entropy(loss.t, lse.t, x.t, t.t, 0), MT_ERR_INVALID_ARGUMENT, "mt_cross_entropy", &loss);
        tt_case("a target out of range that the caller said it had checked: NaN, no read outside the row");
        t.host[0] = 0.0;
        t.host[1] = 1e9;
        tt_upload(&t);
        if (tt_expect_ok(mt_cross_entropy(loss.t, lse.t, x.t, t.t, 1), "mt_cross_entropy")) {
            tt_download(&loss, loss.host);
            if (!isnan(loss.host[1]) || isnan(loss.host[0]))
                tt_fail("loss: got %g and %g, expected a number and NaN", loss.host[0], loss.host[1]);
        }
        tt_case("loss and lse one tensor");
        t.host[1] = 2.0;
        tt_upload(&t);
        tt_expect_error(mt_cross_entropy(loss.t, loss.t, x.t, t.t, 0), MT_ERR_INVALID_ARGUMENT, "mt_cross_entropy",
                        &loss);
        tt_free(&x);
        tt_free(&t);
        tt_free(&loss);
        tt_free(&lse);
    }
    /* int64 targets out of range: refused when checked, NaN when the caller
     * said it had checked them (INT64_MAX and -1 read nothing). */
    TT_GROUP("bad int64 targets") {
        int64_t shape[] = {3, 3};
        tt_tensor x = tt_new(MT_FLOAT64, 2, shape, TT_CONTIGUOUS);
        tt_tensor t = tt_new(MT_INT64, 1, shape, TT_CONTIGUOUS);
        tt_tensor loss = tt_new(MT_FLOAT64, 1, shape, TT_CONTIGUOUS);
        tt_tensor lse = tt_new(MT_FLOAT64, 1, shape, TT_CONTIGUOUS);
        tt_fill(&x, -1, 1, 0);
        const double bads[] = {3.0, -1.0};
        for (int j = 0; j < 2; ++j) {
            t.host[0] = 1.0;
            t.host[1] = bads[j];
            t.host[2] = 2.0;
            tt_upload(&t);
            tt_case("an int64 target %g", bads[j]);
            tt_expect_error(mt_cross_entropy(loss.t, lse.t, x.t, t.t, 0), MT_ERR_INVALID_ARGUMENT, "mt_cross_entropy",
                            &loss);
        }
        tt_case("int64 targets out of range that the caller said it had checked: NaN");
        const int64_t raw[] = {INT64_MAX, -1, 0};
        if (tt_expect_ok(mt_memcpy_h2d(t.t.data, raw, sizeof raw), "mt_memcpy_h2d") &&
            tt_expect_ok(mt_cross_entropy(loss.t, lse.t, x.t, t.t, 1), "mt_cross_entropy")) {
            tt_download(&loss, loss.host);
            if (!isnan(loss.host[0]) || !isnan(loss.host[1]) || isnan(loss.host[2]))
                tt_fail("loss: got %g, %g and %g, expected NaN, NaN and a number", loss.host[0], loss.host[1],
                        loss.host[2]);
        }
        tt_free(&x);
        tt_free(&t);
        tt_free(&loss);
        tt_free(&lse);
    }
    /* Float-only entry points refuse int64 (and bool) before anything runs;
     * targets are int64 or the logits' dtype. */
    TT_GROUP("refused dtypes") {
        int64_t shape[] = {2, 3}, shape1[] = {2, 1};
        tt_tensor xi = tt_new(MT_INT64, 2, shape, TT_CONTIGUOUS), oi = tt_new(MT_INT64, 2, shape1, TT_CONTIGUOUS);
        tt_tensor x = tt_new(MT_FLOAT32, 2, shape, TT_CONTIGUOUS), dx = tt_new(MT_FLOAT32, 2, shape, TT_CONTIGUOUS);
        tt_tensor ti = tt_new(MT_INT64, 1, shape, TT_CONTIGUOUS), tb = tt_new(MT_BOOL, 1, shape, TT_CONTIGUOUS);
        tt_tensor t64 = tt_new(MT_FLOAT64, 1, shape, TT_CONTIGUOUS);
        tt_tensor li = tt_new(MT_INT64, 1, shape, TT_CONTIGUOUS), lsei = tt_new(MT_INT64, 1, shape, TT_CONTIGUOUS);
        tt_tensor loss = tt_new(MT_FLOAT32, 1, shape, TT_CONTIGUOUS), lse = tt_new(MT_FLOAT32, 1, shape, TT_CONTIGUOUS);
        tt_tensor g = tt_new(MT_FLOAT32, 1, shape, TT_CONTIGUOUS), dxi = tt_new(MT_INT64, 2, shape, TT_CONTIGUOUS);
        tt_fill(&xi, -3, 3, TT_INTEGERS);
        tt_fill(&x, -1, 1, 0);
        tt_fill(&ti, 0, 2, TT_INTEGERS);
        tt_fill(&tb, 0, 1, TT_INTEGERS);
        tt_fill(&t64, 0, 2, TT_INTEGERS);
        tt_fill(&lse, 1, 2, 0);
        tt_fill(&g, 1, 2, 0);
        tt_case("mt_logsumexp of int64");
        if (tt_expect_error(mt_logsumexp(oi.t, xi.t, 1), MT_ERR_DTYPE, "mt_logsumexp", &oi))
            TT_CHECK(strstr(mt_last_error(), "int64; this op takes float32 or float64") != NULL, "%s",
                     mt_last_error());
        tt_case("mt_cross_entropy of int64 logits");
        tt_expect_error(mt_cross_entropy(li.t, lsei.t, xi.t, ti.t, 0), MT_ERR_DTYPE, "mt_cross_entropy", &li);
        tt_case("mt_cross_entropy_backward of int64 logits");
        tt_expect_error(mt_cross_entropy_backward(dxi.t, xi.t, ti.t, lsei.t, li.t, 1.0, 0), MT_ERR_DTYPE,
                        "mt_cross_entropy_backward", &dxi);
        tt_case("mt_cross_entropy: bool targets");
        tt_expect_error(mt_cross_entropy(loss.t, lse.t, x.t, tb.t, 0), MT_ERR_DTYPE, "mt_cross_entropy", &loss);
        tt_case("mt_cross_entropy: float64 targets for float32 logits");
        tt_expect_error(mt_cross_entropy(loss.t, lse.t, x.t, t64.t, 0), MT_ERR_DTYPE, "mt_cross_entropy", &loss);
        tt_case("mt_cross_entropy_backward: bool targets");
        tt_expect_error(mt_cross_entropy_backward(dx.t, x.t, tb.t, lse.t, g.t, 1.0, 0), MT_ERR_DTYPE,
                        "mt_cross_entropy_backward", &dx);
        tt_tensor *all[] = {&xi, &oi, &x, &dx, &ti, &tb, &t64, &li, &lsei, &loss, &lse, &g, &dxi};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; ++k)
            tt_free(all[k]);
    }
    return tt_summary();
}
