/*
 * test_softmax.c: mt_softmax and log_softmax (log != 0) along each dim, in
 * float32 and float64, on strided inputs and outputs.
 *
 * Stability: inputs around +1000 overflow exp() in both dtypes and inputs
 * around -1000 underflow it, so only a kernel that subtracts the row's
 * maximum first gets them right. Row lengths 1, 31, 33, 1025 cross the
 * block-size boundaries of a one-pass-per-row kernel; contiguous rows of
 * up to 4100 elements cover the register kernel.
 *
 * Then the softmax family's other kernels: mt_softmax_backward (both
 * functions, any dim, strided tensors, a scale) against the formula in
 * double, and mt_masked_softmax (the attention ladder's fused rung) with a
 * broadcast additive mask holding -inf, the causal mask, both, and rows
 * that every key is hidden from (zeros, as torch's attention).
 *
 *   make build/tests/emu/test_softmax && build/tests/emu/test_softmax
 *   MT_TEST_SEED=42 build/tests/emu/test_softmax     (replay a run)
 */
#include "test_util.h"

/* center: 0 for ordinary inputs, +-1000 for the stability cases. */
/* Roles of softmax_case's tensors: TT_CONTIGUOUS for the register kernel
 * (contiguous rows along the last dim). */
static int g_role_in = TT_INPUT;
static int g_role_out = TT_OUTPUT;

static void softmax_case(int dtype, int ndim, const int64_t *shape, int dim, int log_, double center)
{
    tt_tensor in = tt_new(dtype, ndim, shape, g_role_in);
    tt_tensor out = tt_new(dtype, ndim, shape, g_role_out);
    tt_fill(&in, center - 5, center + 5, 0);
    const char *name = log_ ? "log_softmax" : "softmax";
    tt_case("mt_softmax (%s) dim %d, inputs %g +- 5: out %s, in %s", name, dim, center, tt_str(&out),
            tt_str(&in));

    /* Reference, per row along dim, in double:
     *   m = max_k x_k, z = sum_k exp(x_k - m)
     *   softmax_k = exp(x_k - m) / z,  log_softmax_k = (x_k - m) - log(z) */
    tt_expect *expect = tt_expect_alloc(&out);
    int64_t len = shape[dim];
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        int64_t index[MT_MAX_DIMS];
        to_index(i, out.t.shape, out.t.ndim, index);
        int64_t k_self = index[dim];
        double m = -INFINITY, z = 0.0;
        for (int64_t k = 0; k < len; ++k) {
            index[dim] = k;
            m = fmax(m, tt_at(&in, index));
        }
        for (int64_t k = 0; k < len; ++k) {
            index[dim] = k;
            z += exp(tt_at(&in, index) - m);
        }
        index[dim] = k_self;
        double x = tt_at(&in, index);
        double ref = log_ ? (x - m) - log(z) : exp(x - m) / z;
        tt_expect e = {ref, fabs(ref), len};
        expect[i] = e;
    }

    if (tt_expect_ok(mt_softmax(out.t, in.t, dim, log_), "mt_softmax")) {
        tt_check_output(&out, expect);
        tt_expect_unchanged(&in, "in");
    }
    free(expect);
    tt_free(&in);
    tt_free(&out);
}

/* mt_softmax_backward: out is a softmax (or log_softmax) of random inputs,
 * computed here in double and uploaded; grad_out random. */
static void softmax_backward_case(int dtype, int ndim, const int64_t *shape, int dim, int log_, double scale)
{
    tt_tensor x = tt_new(MT_FLOAT64, ndim, shape, TT_CONTIGUOUS);
    tt_tensor out = tt_new(dtype, ndim, shape, TT_INPUT), grad = tt_new(dtype, ndim, shape, TT_INPUT);
    tt_tensor gin = tt_new(dtype, ndim, shape, TT_OUTPUT);
    tt_fill(&x, -3, 3, 0);
    tt_fill(&grad, -1, 1, 0);
    tt_fill(&out, 0, 1, 0); /* every position, then the softmax values over the ones the view reads */
    int64_t len = shape[dim];
    int64_t index[MT_MAX_DIMS];
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        to_index(i, out.t.shape, out.t.ndim, index);
        int64_t self = index[dim];
        double m = -INFINITY, z = 0.0;
        for (int64_t k = 0; k < len; ++k) {
            index[dim] = k;
            m = fmax(m, tt_at(&x, index));
        }
        for (int64_t k = 0; k < len; ++k) {
            index[dim] = k;
            z += exp(tt_at(&x, index) - m);
        }
        index[dim] = self;
        double y = tt_at(&x, index) - m;
        out.host[tt_pos(&out, index)] = log_ ? y - log(z) : exp(y) / z;
    }
    if (!tt_upload(&out))
        return;
    tt_case("mt_softmax_backward (%s) dim %d, scale %g: grad_in %s, grad_out %s, out %s",
            log_ ? "log_softmax" : "softmax", dim, scale, tt_str(&gin), tt_str(&grad), tt_str(&out));
    /* softmax: scale * y_i (g_i - sum_k g_k y_k); log_softmax: scale * (g_i - exp(y_i) sum_k g_k) */
    tt_expect *expect = tt_expect_alloc(&gin);
    for (int64_t i = 0; i < tt_numel(&gin.t); ++i) {
        to_index(i, gin.t.shape, gin.t.ndim, index);
        int64_t self = index[dim];
        double sum = 0.0;
        for (int64_t k = 0; k < len; ++k) {
            index[dim] = k;
            sum += log_ ? tt_at(&grad, index) : tt_at(&grad, index) * tt_at(&out, index);
        }
        index[dim] = self;
        double g = tt_at(&grad, index), y = tt_at(&out, index);
        double ref = scale * (log_ ? g - exp(y) * sum : y * (g - sum));
        expect[i] = (tt_expect){ref, fabs(scale) * (fabs(g) + 1.0), len};
    }
    if (tt_expect_ok(mt_softmax_backward(gin.t, grad.t, out.t, dim, log_, scale), "mt_softmax_backward")) {
        tt_check_output(&gin, expect);
        tt_expect_unchanged(&grad, "grad_out");
        tt_expect_unchanged(&out, "out");
    }
    free(expect);
    tt_free(&x);
    tt_free(&out);
    tt_free(&grad);
    tt_free(&gin);
}

/* mt_masked_softmax over the last dim of a contiguous (..., L, S) tensor.
 * The mask has a random layout (broadcast dims of stride 0) and hides about
 * one key in five with -inf. */
static void masked_softmax_case(int dtype, int ndim, const int64_t *shape, int flags, double scale)
{
    tt_tensor in = tt_new(dtype, ndim, shape, TT_CONTIGUOUS), out = tt_new(dtype, ndim, shape, TT_CONTIGUOUS);
    tt_tensor mask = tt_new(dtype, ndim, shape, TT_INPUT);
    tt_fill(&in, -4, 4, 0);
    tt_fill(&mask, -2, 2, 0);
    for (int64_t i = 0; i < mask.cap; ++i)
        if (tt_chance(0.2))
            mask.host[i] = -INFINITY;
    if (!tt_upload(&mask))
        return;
    const int use_mask = flags & MT_SOFTMAX_MASK, causal = flags & MT_SOFTMAX_CAUSAL;
    tt_case("mt_masked_softmax %s%s%s, scale %g: in %s, mask %s", tt_dtype_name(dtype), use_mask ? " mask" : "",
            causal ? " causal" : "", scale, tt_str(&in), tt_str(&mask));
    const int64_t len = shape[ndim - 1], queries = ndim >= 2 ? shape[ndim - 2] : 1;
    tt_expect *expect = tt_expect_alloc(&out);
    double *row = malloc(sizeof(double) * (size_t)(len > 0 ? len : 1));
    int64_t index[MT_MAX_DIMS];
    for (int64_t r = 0; len > 0 && r < tt_numel(&out.t) / len; ++r) {
        double m = -INFINITY, z = 0.0;
        for (int64_t k = 0; k < len; ++k) {
            to_index(r * len + k, shape, ndim, index);
            row[k] = tt_at(&in, index) * scale + (use_mask ? tt_at(&mask, index) : 0.0);
            if (causal && k > r % queries)
                row[k] = -INFINITY;
            m = fmax(m, row[k]);
        }
        for (int64_t k = 0; k < len; ++k)
            z += m == -INFINITY ? 0.0 : exp(row[k] - m);
        for (int64_t k = 0; k < len; ++k) {
            double ref = m == -INFINITY ? 0.0 : exp(row[k] - m) / z; /* every key hidden: no weight at all */
            expect[r * len + k] = (tt_expect){ref, isfinite(row[k]) ? fabs(ref) * (fabs(row[k]) + 1.0) : 0.0, len};
        }
    }
    if (tt_expect_ok(mt_masked_softmax(out.t, in.t, mask.t, scale, flags), "mt_masked_softmax")) {
        tt_check_output(&out, expect);
        tt_expect_unchanged(&in, "in");
        tt_expect_unchanged(&mask, "mask");
    }
    free(row);
    free(expect);
    tt_free(&in);
    tt_free(&out);
    tt_free(&mask);
}

int main(void)
{
    tt_init("test_softmax");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    static const int64_t lengths[] = {1, 31, 33, 1025};
    static const int64_t small[] = {1, 2, 3};
    static const double centers[] = {0.0, 1000.0, -1000.0};
    int64_t shape[MT_MAX_DIMS];

    /* A group per dtype and function ("softmax f32", "log_softmax f64"). */
    for (int t = 0; t < 2; ++t)
        for (int log_ = 0; log_ <= 1; ++log_)
            TT_GROUP("%s %s", log_ ? "log_softmax" : "softmax", tt_dtype_name(dtypes[t])) {
                int dtype = dtypes[t];

                /* Random shapes of rank 1..4 (some empty), along each dim. */
                for (int c = 0; c < 12; ++c) {
                    int ndim = tt_random_shape(shape, 1, 4, 400, 0.1);
                    for (int dim = 0; dim < ndim; ++dim)
                        softmax_case(dtype, ndim, shape, dim, log_, 0.0);
                }

                /* Row lengths across block boundaries, ordinary and huge inputs. */
                for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; ++l)
                    for (size_t c = 0; c < sizeof centers / sizeof centers[0]; ++c) {
                        int ndim = (int)tt_rand_int(1, 3);
                        int dim = (int)tt_rand_int(0, ndim - 1);
                        for (int d = 0; d < ndim; ++d)
                            shape[d] = d == dim ? lengths[l] : TT_PICK(small);
                        softmax_case(dtype, ndim, shape, dim, log_, centers[c]);
                    }

                /* An empty row: nothing to normalise, nothing written. */
                static const int64_t s_empty[] = {3, 0};
                softmax_case(dtype, 2, s_empty, 1, log_, 0.0);
                softmax_case(dtype, 2, s_empty, 0, log_, 0.0);
            }

    /* Contiguous rows along the last dim: the register kernel, with 1, 2,
     * 4 and 8 Packs per thread (16-byte Packs when the length is a multiple
     * of 4, single elements otherwise). (Rows too long for it take the
     * three-pass kernel, which the strided cases above test; the reference
     * here costs len^2 per row, so the rows stay short.) */
    static const int64_t reg_lengths[] = {1, 10, 33, 128, 200, 300, 1025, 4100};
    TT_GROUP("contiguous rows") {
        g_role_in = g_role_out = TT_CONTIGUOUS;
        for (int t = 0; t < 2; ++t)
            for (int log_ = 0; log_ <= 1; ++log_)
                for (size_t l = 0; l < sizeof reg_lengths / sizeof reg_lengths[0]; ++l) {
                    int64_t rows_shape[] = {l < 7 ? 3 : 1, reg_lengths[l]};
                    softmax_case(dtypes[t], 2, rows_shape, 1, log_, l % 2 ? 1000.0 : 0.0);
                }
        g_role_in = TT_INPUT;
        g_role_out = TT_OUTPUT;
    }

    /* softmax of integers is refused before anything runs (Python computes
     * it in float). */
    TT_GROUP("int64 refused") {
        int64_t s23[] = {2, 3};
        tt_tensor x = tt_new(MT_INT64, 2, s23, TT_CONTIGUOUS), y = tt_new(MT_INT64, 2, s23, TT_CONTIGUOUS);
        tt_fill(&x, -3, 3, TT_INTEGERS);
        for (int log_ = 0; log_ < 2; ++log_) {
            tt_case("mt_softmax (log %d) of int64", log_);
            if (tt_expect_error(mt_softmax(y.t, x.t, 1, log_), MT_ERR_DTYPE, "mt_softmax", &y))
                TT_CHECK(strstr(mt_last_error(), "in has dtype int64; this op takes float32 or float64") != NULL,
                         "%s", mt_last_error());
        }
        tt_free(&x);
        tt_free(&y);
    }
    TT_GROUP("softmax backward") {
        for (int t = 0; t < 2; ++t)
            for (int log_ = 0; log_ <= 1; ++log_) {
                for (int c = 0; c < 6; ++c) {
                    int ndim = tt_random_shape(shape, 1, 3, 300, 0.1);
                    for (int dim = 0; dim < ndim; ++dim)
                        softmax_backward_case(dtypes[t], ndim, shape, dim, log_, c % 2 ? 0.125 : 1.0);
                }
                int64_t long_row[] = {2, 1025};
                softmax_backward_case(dtypes[t], 2, long_row, 1, log_, 1.0);
            }
    }

    TT_GROUP("masked softmax") {
        static const int64_t cases[][4] = {{2, 3, 5, 7}, {1, 2, 33, 33}, {1, 1, 4, 1025}, {2, 1, 1, 1}, {1, 1, 70, 3}};
        for (int t = 0; t < 2; ++t)
            for (int flags = 0; flags < 4; ++flags) {
                for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
                    masked_softmax_case(dtypes[t], 4, cases[c], flags, c % 2 ? 0.25 : 1.0);
                for (int c = 0; c < 4; ++c) {
                    int ndim = tt_random_shape(shape, 2, 4, 400, 0.1);
                    masked_softmax_case(dtypes[t], ndim, shape, flags, 0.5);
                }
                int64_t vec[] = {37};
                if (!(flags & MT_SOFTMAX_CAUSAL)) /* causal needs two dims */
                    masked_softmax_case(dtypes[t], 1, vec, flags, 1.0);
            }
    }

    TT_GROUP("masked softmax refused") {
        int64_t s23[] = {2, 3}, s32[] = {3, 2}, s3[] = {3};
        tt_tensor x = tt_new(MT_FLOAT32, 2, s23, TT_CONTIGUOUS), y = tt_new(MT_FLOAT32, 2, s23, TT_CONTIGUOUS);
        tt_tensor other = tt_new(MT_FLOAT32, 2, s32, TT_CONTIGUOUS), xd = tt_new(MT_FLOAT64, 2, s23, TT_CONTIGUOUS);
        tt_tensor v = tt_new(MT_FLOAT32, 1, s3, TT_CONTIGUOUS), vo = tt_new(MT_FLOAT32, 1, s3, TT_CONTIGUOUS);
        tt_fill(&x, -1, 1, 0);
        tt_fill(&other, -1, 1, 0);
        tt_fill(&xd, -1, 1, 0);
        tt_fill(&v, -1, 1, 0);
        tt_case("a mask of another shape");
        tt_expect_error(mt_masked_softmax(y.t, x.t, other.t, 1.0, MT_SOFTMAX_MASK), MT_ERR_SHAPE, "mt_masked_softmax", &y);
        tt_case("a mask of another dtype");
        tt_expect_error(mt_masked_softmax(y.t, x.t, xd.t, 1.0, MT_SOFTMAX_MASK), MT_ERR_DTYPE, "mt_masked_softmax", &y);
        tt_case("a transposed input");
        mt_tensor xt = other.t;
        xt.shape[0] = 2;
        xt.shape[1] = 3;
        xt.strides[0] = 1;
        xt.strides[1] = 2;
        tt_expect_error(mt_masked_softmax(y.t, xt, x.t, 1.0, 0), MT_ERR_INVALID_ARGUMENT, "mt_masked_softmax", &y);
        tt_case("causal on one dim");
        tt_expect_error(mt_masked_softmax(vo.t, v.t, v.t, 1.0, MT_SOFTMAX_CAUSAL), MT_ERR_INVALID_ARGUMENT,
                        "mt_masked_softmax", &vo);
        tt_case("unknown flags");
        tt_expect_error(mt_masked_softmax(y.t, x.t, x.t, 1.0, 8), MT_ERR_INVALID_ARGUMENT, "mt_masked_softmax", &y);
        tt_case("out overlaps the mask");
        tt_expect_error(mt_masked_softmax(y.t, x.t, y.t, 1.0, MT_SOFTMAX_MASK), MT_ERR_INVALID_ARGUMENT,
                        "mt_masked_softmax", NULL);
        tt_case("softmax backward of int64");
        tt_tensor xi = tt_new(MT_INT64, 2, s23, TT_CONTIGUOUS), yi = tt_new(MT_INT64, 2, s23, TT_CONTIGUOUS);
        tt_fill(&xi, -3, 3, TT_INTEGERS);
        tt_expect_error(mt_softmax_backward(yi.t, xi.t, xi.t, 1, 0, 1.0), MT_ERR_DTYPE, "mt_softmax_backward", &yi);
        tt_case("softmax backward, grad_out of another shape");
        tt_expect_error(mt_softmax_backward(y.t, other.t, x.t, 1, 0, 1.0), MT_ERR_SHAPE, "mt_softmax_backward", &y);
        tt_tensor *all[] = {&x, &y, &other, &xd, &v, &vo, &xi, &yi};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
            tt_free(all[i]);
    }
    return tt_summary();
}
