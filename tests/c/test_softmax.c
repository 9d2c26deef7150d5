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
    return tt_summary();
}
