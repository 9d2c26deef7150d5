/*
 * tt_expect.h: the tolerance policy and the assertions (tt_expect_close,
 * tt_check_output, tt_expect_unchanged, tt_expect_error).
 * Part of tests/c/test_util.h, which every test program includes.
 */
#ifndef MT_TT_EXPECT_H
#define MT_TT_EXPECT_H

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "indexing.h"
#include "minitensor.h"

#include "tt_harness.h"
#include "tt_tensor.h"

/* ======================================================================== */
/* The tolerance policy: the one place that says how close is close enough. */
/* ======================================================================== */
/*
 * An output element passes when
 *
 *     |got - ref| <= atol + rtol * sqrt(n) * mag
 *
 * where ref is computed in double from the exact input values, n is the
 * number of terms combined into the element (1 for an elementwise op, the
 * reduced length for sum/prod/softmax, K for matmul), and mag is the
 * magnitude the rounding error scales with: |ref| for elementwise ops and
 * products; for sums and dot products (tt_sum) the larger of |ref| and the
 * root-sum-square of the terms, since partial sums can be much larger than
 * a result that cancels. sqrt(n) is the growth of accumulated rounding
 * error; rtol leaves a wide margin above the machine epsilon (float32
 * 1.2e-7, float64 2.2e-16) for the few-ulp error of the device's
 * exp/log/pow and for summation in any order (trees, atomics).
 *
 * NaN is never close to anything, except where the reference itself is NaN
 * by definition; an infinite reference needs the same infinity. A float32
 * reference beyond FLT_MAX expects infinity (the rounding of the result).
 */
static const double TT_RTOL[MT_DTYPE_COUNT] = {
    [MT_FLOAT32] = 1e-5,
    [MT_FLOAT64] = 1e-12,
    [MT_INT64] = 0.0, /* integers and bools are exact */
    [MT_BOOL] = 0.0,
};
static const double TT_ATOL[MT_DTYPE_COUNT] = {
    [MT_FLOAT32] = 1e-6,
    [MT_FLOAT64] = 1e-13,
    [MT_INT64] = 0.0,
    [MT_BOOL] = 0.0,
};

/* What one output element should be: see the policy above. */
typedef struct {
    double ref;  /* the reference value, computed in double              */
    double mag;  /* magnitude the error scales with                      */
    int64_t n;   /* number of terms combined into this element (>= 1)    */
} tt_expect;

/* An elementwise result: mag = |ref|, n = 1. */
static inline tt_expect tt_value(double ref)
{
    tt_expect e = {ref, fabs(ref), 1};
    return e;
}

/* A sum of n terms whose exact sum is `sum` and sum of squares `sumsq`. */
static inline tt_expect tt_sum(double sum, double sumsq, int64_t n)
{
    tt_expect e = {sum, fmax(fabs(sum), sqrt(sumsq)), n};
    return e;
}


/* ======================================================================== */
/* The assertion                                                             */
/* ======================================================================== */

/* THE float comparison (the policy is stated at the top of this file).
 * `what` names the value for the failure message. Returns 1 when close. */
static inline int tt_expect_close(const char *what, double got, tt_expect e, int dtype)
{
    double ref = e.ref;
    if (dtype == MT_FLOAT32 && isfinite(ref) && isinf((float)ref))
        ref = (double)(float)ref; /* overflows float32: expect the infinity */
    int ok;
    double tol = 0.0;
    if (isnan(ref))
        ok = isnan(got);
    else if (isinf(ref))
        ok = got == ref;
    else {
        int64_t n = e.n > 1 ? e.n : 1;
        tol = TT_ATOL[dtype] + TT_RTOL[dtype] * sqrt((double)n) * e.mag;
        ok = fabs(got - ref) <= tol; /* false when got is NaN or infinite */
    }
    if (!ok)
        tt_fail("%s: got %.17g, expected %.17g (|diff| %.3g > tol %.3g, n %" PRId64 ")", what, got,
                ref, fabs(got - ref), tol, e.n);
    return ok;
}

/* The int64 counterpart of tt_expect_close, for values a double cannot
 * hold: got must be exactly want. */
static inline int tt_expect_i64(const char *what, int64_t got, int64_t want)
{
    if (got == want)
        return 1;
    tt_fail("%s: got %" PRId64 ", expected %" PRId64, what, got, want);
    return 0;
}

/* Checks an output after a call: element i of the view (row-major ordinal)
 * against expect[i], and every buffer element outside the view against what
 * was there before (tt_new/tt_fill/tt_upload), so stray writes fail. */
static inline int tt_check_output(const tt_tensor *out, const tt_expect *expect)
{
    double *got = malloc((size_t)(out->cap ? out->cap : 1) * sizeof(double));
    char *in_view = calloc((size_t)(out->cap ? out->cap : 1), 1);
    int ok = tt_download(out, got);
    int64_t numel = tt_numel(&out->t);
    for (int64_t i = 0; ok && i < numel; ++i) {
        int64_t index[MT_MAX_DIMS];
        to_index(i, out->t.shape, out->t.ndim, index);
        int64_t pos = tt_pos(out, index);
        in_view[pos] = 1;
        char what[160];
        snprintf(what, sizeof what, "out%s", tt_index_str(index, out->t.ndim));
        tt_expect_close(what, got[pos], expect[i], out->t.dtype);
    }
    for (int64_t p = 0; ok && p < out->cap; ++p)
        if (!in_view[p] && !(got[p] == out->host[p] || (isnan(got[p]) && isnan(out->host[p]))))
            tt_fail("buffer element %" PRId64 " outside the view was written: %.17g, was %.17g", p,
                    got[p], out->host[p]);
    free(got);
    free(in_view);
    return !tt.case_failed;
}

/* Checks that the whole buffer still holds what was uploaded: inputs after
 * any call, outputs after a rejected call. */
static inline int tt_expect_unchanged(const tt_tensor *x, const char *name)
{
    double *got = malloc((size_t)(x->cap ? x->cap : 1) * sizeof(double));
    int ok = tt_download(x, got);
    for (int64_t p = 0; ok && p < x->cap; ++p)
        if (!(got[p] == x->host[p] || (isnan(got[p]) && isnan(x->host[p])))) {
            tt_fail("%s was modified: buffer element %" PRId64 " is %.17g, was %.17g", name, p, got[p],
                    x->host[p]);
            ok = 0;
        }
    free(got);
    return ok;
}

/* For tt_expect_error where the header documents an error but not which. */
#define TT_ANY_ERROR (-1)

/* A call that must be rejected: status `want` (or any error for
 * TT_ANY_ERROR), a message that names `func`, and `out` (if given) left
 * exactly as it was. */
static inline int tt_expect_error(mt_status got, int want, const char *func, const tt_tensor *out)
{
    int ok = 1;
    const char *msg = mt_last_error();
    if (want == TT_ANY_ERROR ? got == MT_OK : (int)got != want) {
        tt_fail("%s returned %s, expected %s (message: \"%s\")", func, tt_status_name(got),
                want == TT_ANY_ERROR ? "an error" : tt_status_name(want), msg ? msg : "(null)");
        ok = 0;
    } else if (!msg || !*msg) {
        tt_fail("%s failed with %s but mt_last_error() is empty", func, tt_status_name(got));
        ok = 0;
    } else if (!strstr(msg, func)) {
        tt_fail("the message of the failure does not name %s: \"%s\"", func, msg);
        ok = 0;
    }
    if (out && out->t.data && !tt_expect_unchanged(out, "the output of the rejected call"))
        ok = 0;
    return ok;
}

/* An array of numel(out) expectations (at least one, so never NULL). */
static inline tt_expect *tt_expect_alloc(const tt_tensor *out)
{
    int64_t n = tt_numel(&out->t);
    return calloc((size_t)(n > 0 ? n : 1), sizeof(tt_expect));
}

#endif /* MT_TT_EXPECT_H */
