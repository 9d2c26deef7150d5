/*
 * test_where.c: mt_where on random shapes, with cond, a and b each
 * broadcasting to out (fewer dims, size-1 dims, stride-0 views) in random
 * layouts; a, b and out of each of the four dtypes, cond of each (bool, as
 * the Python layer passes it, and the others: non-zero is true); NaN and
 * infinities in float a and b, NaN and -0.0 in a float cond (NaN selects a,
 * as any non-zero; -0.0 selects b).
 *
 *   make build/tests/emu/test_where && build/tests/emu/test_where
 *   MT_TEST_SEED=42 build/tests/emu/test_where     (replay a run)
 */
#include "test_util.h"

static void where_case(int dtype, int cond_dtype, int ndim, const int64_t *shape, int dense)
{
    int64_t cs[MT_MAX_DIMS], as[MT_MAX_DIMS], bs[MT_MAX_DIMS];
    int cn = ndim, an = ndim, bn = ndim;
    for (int d = 0; d < ndim; ++d)
        cs[d] = as[d] = bs[d] = shape[d];
    if (!dense) {
        cn = tt_broadcastable_shape(shape, ndim, cs);
        an = tt_broadcastable_shape(shape, ndim, as);
        bn = tt_broadcastable_shape(shape, ndim, bs);
    }
    const int in_role = dense ? TT_CONTIGUOUS : TT_INPUT;
    tt_tensor out = tt_new(dtype, ndim, shape, dense ? TT_CONTIGUOUS : TT_OUTPUT);
    tt_tensor cond = tt_new(cond_dtype, cn, cs, in_role);
    tt_tensor a = tt_new(dtype, an, as, in_role);
    tt_tensor b = tt_new(dtype, bn, bs, in_role);
    tt_fill(&a, -3, 3, dtype == MT_INT64 ? TT_INTEGERS : 0); /* bool: the cast, mostly true */
    tt_fill(&b, -3, 3, dtype == MT_INT64 ? TT_INTEGERS : 0);
    tt_plant_nans(&a, 0.05);
    /* cond: 0, 1, -0.0 or NaN (cast to cond's dtype by tt_upload); a and b:
     * some infinities (INT64_MAX, true). */
    for (int64_t i = 0; i < cond.cap; ++i) {
        const int r = (int)tt_rand_int(0, 9);
        cond.host[i] = r < 4 ? 0.0 : r < 8 ? 1.0 : r == 8 ? -0.0 : NAN;
    }
    tt_upload(&cond);
    if (b.cap > 0) {
        b.host[0] = INFINITY;
        tt_upload(&b);
    }
    tt_case("mt_where out %s, cond %s (%s), a %s, b %s", tt_str(&out), tt_str(&cond), tt_dtype_name(cond_dtype),
            tt_str(&a), tt_str(&b));
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        int64_t idx[MT_MAX_DIMS];
        to_index(i, shape, ndim, idx);
        const double c = tt_at_bcast(&cond, idx, ndim);
        expect[i] = tt_value(c != 0.0 ? tt_at_bcast(&a, idx, ndim) : tt_at_bcast(&b, idx, ndim));
        expect[i].mag = 0.0; /* a copy: exact */
    }
    if (tt_expect_ok(mt_where(out.t, cond.t, a.t, b.t), "mt_where"))
        tt_check_output(&out, expect);
    free(expect);
    tt_free(&out);
    tt_free(&cond);
    tt_free(&a);
    tt_free(&b);
}

int main(void)
{
    tt_init("test_where");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64, MT_INT64, MT_BOOL};
    int64_t shape[MT_MAX_DIMS];
    for (int t = 0; t < 4; ++t)
        TT_GROUP("where %s", tt_dtype_name(dtypes[t])) {
            for (int c = 0; c < 40; ++c) {
                const int ndim = tt_random_shape(shape, 0, 4, 600, 0.1);
                where_case(dtypes[t], dtypes[c % 4], ndim, shape, 0);
            }
            static const int64_t n1025[] = {1025};
            for (int c = 0; c < 4; ++c)
                where_case(dtypes[t], dtypes[c], 1, n1025, 1); /* all of out's shape, contiguous */
        }
    TT_GROUP("bad arguments") {
        int64_t s3[] = {3}, s4[] = {4};
        tt_tensor out = tt_new(MT_FLOAT32, 1, s3, TT_CONTIGUOUS);
        tt_tensor c4 = tt_new(MT_FLOAT32, 1, s4, TT_CONTIGUOUS);
        tt_tensor a = tt_new(MT_FLOAT32, 1, s3, TT_CONTIGUOUS);
        tt_tensor b64 = tt_new(MT_FLOAT64, 1, s3, TT_CONTIGUOUS);
        tt_case("a condition that does not broadcast to out");
        tt_expect_error(mt_where(out.t, c4.t, a.t, a.t), MT_ERR_SHAPE, "mt_where", &out);
        tt_case("b of another dtype than out");
        tt_expect_error(mt_where(out.t, a.t, a.t, b64.t), MT_ERR_DTYPE, "mt_where", &out);
        tt_free(&out);
        tt_free(&c4);
        tt_free(&a);
        tt_free(&b64);
    }
    return tt_summary();
}
