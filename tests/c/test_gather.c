/*
 * test_gather.c: mt_gather (data of all four dtypes) and mt_scatter_add
 * (float32, float64, int64) along each dim, on strided tensors; the index
 * tensor int64 or either float dtype, whatever the data's; repeated indices
 * (scatter_add must add them all up, atomically; int64 sums wrap); a bad
 * index (-1, the dim's length, 1.5, NaN) must fail and leave out untouched;
 * a bool index, and scatter_add into bool, are refused; the _unchecked
 * entry points gather 0 and add nothing for a bad index.
 *
 *   make build/tests/emu/test_gather && build/tests/emu/test_gather
 *   MT_TEST_SEED=42 build/tests/emu/test_gather     (replay a run)
 */
#include "test_util.h"

/* Writes `bad` into one random element of index's view (through the host
 * copy) and uploads it. */
static void plant_bad_index(tt_tensor *index, double bad)
{
    int64_t i = tt_rand_int(0, tt_numel(&index->t) - 1);
    index->host[ordinal_to_position(i, &index->t)] = bad;
    tt_upload(index);
}

/* ", one bad index -1" for case names; "" when bad == 0 (a valid call). */
static const char *bad_label(double bad)
{
    static char buf[64];
    if (bad == 0)
        return "";
    snprintf(buf, sizeof buf, ", one bad index %g", bad);
    return buf;
}

/* out[i] = in[i with i[dim] replaced by index[i]]; index has out's shape.
 * bad_index: 0 for a valid call, else the value of one planted bad index
 * (out of range, not a whole number, NaN). */
static void gather_case(int dtype, int index_dtype, int ndim, const int64_t *in_shape, int dim,
                        const int64_t *index_shape, double bad_index)
{
    tt_tensor in = tt_new(dtype, ndim, in_shape, TT_INPUT);
    tt_tensor index = tt_new(index_dtype, ndim, index_shape, TT_INPUT);
    tt_tensor out = tt_new(dtype, ndim, index_shape, TT_OUTPUT);
    if (dtype == MT_BOOL)
        tt_fill(&in, 0, 1, TT_INTEGERS);
    else
        tt_fill(&in, -4, 4, dtype == MT_INT64 ? TT_INTEGERS : 0);
    tt_fill(&index, 0, in_shape[dim] - 1, TT_INTEGERS);
    if (bad_index != 0)
        plant_bad_index(&index, bad_index);
    tt_case("mt_gather dim %d%s: out %s, in %s, index %s", dim, bad_label(bad_index), tt_str(&out), tt_str(&in),
            tt_str(&index));
    mt_status st = mt_gather(out.t, in.t, index.t, dim);

    if (bad_index != 0) {
        tt_expect_error(st, MT_ERR_INVALID_ARGUMENT, "mt_gather", &out);
    } else {
        /* Reference: walk the output, read in at the gathered index. */
        tt_expect *expect = tt_expect_alloc(&out);
        for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
            int64_t idx[MT_MAX_DIMS];
            to_index(i, out.t.shape, out.t.ndim, idx);
            idx[dim] = (int64_t)tt_at(&index, idx);
            expect[i] = tt_value(tt_at(&in, idx));
        }
        if (tt_expect_ok(st, "mt_gather"))
            tt_check_output(&out, expect);
        free(expect);
    }
    tt_expect_unchanged(&in, "in");
    tt_expect_unchanged(&index, "index");
    tt_free(&in);
    tt_free(&index);
    tt_free(&out);
}

/* out[j with j[dim] = index[j]] += src[j] for every j of src (in place);
 * index has src's shape. max_index < out's length along dim forces repeats. */
static void scatter_add_case(int dtype, int index_dtype, int ndim, const int64_t *out_shape, int dim,
                             const int64_t *src_shape, int64_t max_index, double bad_index)
{
    tt_tensor out = tt_new(dtype, ndim, out_shape, TT_OUTPUT);
    tt_tensor index = tt_new(index_dtype, ndim, src_shape, TT_INPUT);
    tt_tensor src = tt_new(dtype, ndim, src_shape, TT_INPUT);
    const int flags = dtype == MT_INT64 ? TT_INTEGERS : 0;
    tt_fill(&out, -1, 1, flags); /* scatter_add adds into what is there */
    tt_fill(&src, -4, 4, flags);
    tt_fill(&index, 0, max_index, TT_INTEGERS);
    if (bad_index != 0)
        plant_bad_index(&index, bad_index);
    tt_case("mt_scatter_add dim %d, indices <= %" PRId64 "%s: out %s, index %s, src %s", dim, max_index,
            bad_label(bad_index), tt_str(&out), tt_str(&index), tt_str(&src));
    mt_status st = mt_scatter_add(out.t, index.t, src.t, dim);

    if (bad_index != 0) {
        tt_expect_error(st, MT_ERR_INVALID_ARGUMENT, "mt_scatter_add", &out);
    } else {
        /* Reference: start from out's values, walk src, add each term where
         * its index sends it. The magnitude is that of a sum of the terms. */
        int64_t numel = tt_numel(&out.t);
        tt_expect *expect = tt_expect_alloc(&out);
        double *sumsq = calloc((size_t)(numel ? numel : 1), sizeof(double));
        for (int64_t i = 0; i < numel; ++i) {
            double v = tt_at_ordinal(&out, i);
            expect[i].ref = v;
            expect[i].n = 1;
            sumsq[i] = v * v;
        }
        for (int64_t j = 0; j < tt_numel(&src.t); ++j) {
            int64_t idx[MT_MAX_DIMS];
            to_index(j, src.t.shape, src.t.ndim, idx);
            double v = tt_at(&src, idx);
            idx[dim] = (int64_t)tt_at(&index, idx);
            int64_t o = tt_ordinal(idx, out.t.shape, out.t.ndim);
            expect[o].ref += v;
            expect[o].n += 1;
            sumsq[o] += v * v;
        }
        for (int64_t i = 0; i < numel; ++i)
            expect[i] = tt_sum(expect[i].ref, sumsq[i], expect[i].n);
        if (tt_expect_ok(st, "mt_scatter_add"))
            tt_check_output(&out, expect);
        free(sumsq);
        free(expect);
    }
    tt_expect_unchanged(&index, "index");
    tt_expect_unchanged(&src, "src");
    tt_free(&out);
    tt_free(&index);
    tt_free(&src);
}

/* A random non-empty shape of rank 1..4 and, along `dim`, a second shape no
 * longer than it on the other dims (the index shape of gather, the src shape
 * of scatter_add); its length along dim is free. */
static int random_pair(int64_t *big, int64_t *small, int *dim)
{
    int ndim = tt_random_shape(big, 1, 4, 300, 0.0);
    *dim = (int)tt_rand_int(0, ndim - 1);
    for (int d = 0; d < ndim; ++d)
        small[d] = d == *dim ? tt_rand_int(1, 7) : tt_rand_int(1, big[d]);
    if (tt_chance(0.08))
        small[tt_rand_int(0, ndim - 1)] = 0; /* empty: nothing to do */
    return ndim;
}

/* What the dtype rules refuse (MT_ERR_DTYPE, out untouched): a bool index,
 * scatter_add into bool. */
static void refused_cases(void)
{
    static const int64_t s[] = {3, 4};
    tt_tensor in = tt_new(MT_FLOAT32, 2, s, TT_INPUT), out = tt_new(MT_FLOAT32, 2, s, TT_OUTPUT);
    tt_tensor bool_index = tt_new(MT_BOOL, 2, s, TT_INPUT);
    tt_fill(&in, -1, 1, 0);
    tt_fill(&bool_index, 0, 1, TT_INTEGERS);
    tt_case("mt_gather: a bool index");
    tt_expect_error(mt_gather(out.t, in.t, bool_index.t, 1), MT_ERR_DTYPE, "mt_gather", &out);
    tt_case("mt_scatter_add: a bool index");
    tt_expect_error(mt_scatter_add(out.t, bool_index.t, in.t, 1), MT_ERR_DTYPE, "mt_scatter_add", &out);
    tt_tensor bout = tt_new(MT_BOOL, 2, s, TT_OUTPUT), bsrc = tt_new(MT_BOOL, 2, s, TT_INPUT);
    tt_tensor index = tt_new(MT_INT64, 2, s, TT_INPUT);
    tt_fill(&bsrc, 0, 1, TT_INTEGERS);
    tt_fill(&index, 0, 3, TT_INTEGERS);
    tt_case("mt_scatter_add: into bool");
    tt_expect_error(mt_scatter_add(bout.t, index.t, bsrc.t, 1), MT_ERR_DTYPE, "mt_scatter_add", &bout);
    tt_free(&in);
    tt_free(&out);
    tt_free(&bool_index);
    tt_free(&bout);
    tt_free(&bsrc);
    tt_free(&index);
}

/* int64 scatter_add wraps (the atomics add modulo 2^64), exactly. */
static void exact_int64_scatter(void)
{
    const int64_t out0[] = {INT64_MAX, INT64_MIN, 0}, src[] = {1, 1, -1, -1, INT64_MAX, 5};
    const int64_t index[] = {0, 0, 1, 1, 2, 2};
    const int64_t want[] = {INT64_MIN + 1, INT64_MAX - 1, (int64_t)((uint64_t)INT64_MAX + 5u)};
    tt_case("mt_scatter_add int64: sums wrap");
    mt_tensor out = tt_raw_1d(MT_INT64, 3, out0), s = tt_raw_1d(MT_INT64, 6, src), ix = tt_raw_1d(MT_INT64, 6, index);
    int64_t got[3];
    if (tt_expect_ok(mt_scatter_add(out, ix, s, 0), "mt_scatter_add") && tt_raw_read(&out, got))
        for (int i = 0; i < 3; ++i)
            tt_expect_i64("out", got[i], want[i]);
    tt_raw_free(&out);
    tt_raw_free(&s);
    tt_raw_free(&ix);
}

/* mt_gather_unchecked and mt_scatter_add_unchecked (for indices the caller
 * has checked: no device check, no wait) stay memory-safe whatever they are
 * given: a bad index (out of range, negative, fractional, NaN) gathers 0 and
 * adds nothing; the good ones work as in mt_gather and mt_scatter_add. */
static void unchecked_cases(void)
{
    const int64_t in_vals[] = {10, 11, 12, 13, 14};
    const int64_t int_index[] = {0, 4, -1, 7, 2}, want_int[] = {10, 14, 0, 0, 12};
    const double float_index[] = {1.0, 0.5, NAN, 3.0, 5.0};
    const int64_t want_float[] = {11, 0, 0, 13, 0};
    mt_tensor in = tt_raw_1d(MT_INT64, 5, in_vals), out = tt_raw_1d(MT_INT64, 5, NULL);
    mt_tensor ix = tt_raw_1d(MT_INT64, 5, int_index), fx = tt_raw_1d(MT_FLOAT64, 5, float_index);
    int64_t got[5];
    tt_case("mt_gather_unchecked: bad int64 indices gather 0");
    if (tt_expect_ok(mt_gather_unchecked(out, in, ix, 0), "mt_gather_unchecked") && tt_raw_read(&out, got))
        for (int i = 0; i < 5; ++i)
            tt_expect_i64("out", got[i], want_int[i]);
    tt_case("mt_gather_unchecked: bad float indices (fractional, NaN, the length) gather 0");
    if (tt_expect_ok(mt_gather_unchecked(out, in, fx, 0), "mt_gather_unchecked") && tt_raw_read(&out, got))
        for (int i = 0; i < 5; ++i)
            tt_expect_i64("out", got[i], want_float[i]);
    tt_case("mt_gather: the same bad indices are an error");
    tt_expect_error(mt_gather(out, in, ix, 0), MT_ERR_INVALID_ARGUMENT, "mt_gather", NULL);

    const int64_t zeros[] = {0, 0, 0, 0}, ones[] = {1, 1, 1, 1, 1};
    const int64_t scatter_index[] = {0, 9, -1, 3, 3}, want_sum[] = {1, 0, 0, 2};
    mt_tensor sum = tt_raw_1d(MT_INT64, 4, zeros), src = tt_raw_1d(MT_INT64, 5, ones);
    mt_tensor sx = tt_raw_1d(MT_INT64, 5, scatter_index);
    tt_case("mt_scatter_add_unchecked: bad indices add nothing");
    if (tt_expect_ok(mt_scatter_add_unchecked(sum, sx, src, 0), "mt_scatter_add_unchecked") && tt_raw_read(&sum, got))
        for (int i = 0; i < 4; ++i)
            tt_expect_i64("out", got[i], want_sum[i]);
    tt_raw_free(&in);
    tt_raw_free(&out);
    tt_raw_free(&ix);
    tt_raw_free(&fx);
    tt_raw_free(&sum);
    tt_raw_free(&src);
    tt_raw_free(&sx);
}

int main(void)
{
    tt_init("test_gather");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64, MT_INT64, MT_BOOL};
    static const int index_dtypes[] = {MT_INT64, MT_FLOAT32, MT_FLOAT64};
    int64_t big[MT_MAX_DIMS], small[MT_MAX_DIMS];
    int dim;

    /* A group per data dtype ("f32"); scatter_add takes no bool. */
    for (int t = 0; t < 4; ++t) TT_GROUP("%s", tt_dtype_name(dtypes[t])) {
        int dtype = dtypes[t];
        const int scatter = dtype != MT_BOOL;
        for (int c = 0; c < 30; ++c) {
            int ndim = random_pair(big, small, &dim);
            gather_case(dtype, TT_PICK(index_dtypes), ndim, big, dim, small, 0);
        }
        for (int c = 0; scatter && c < 30; ++c) {
            int ndim = random_pair(big, small, &dim);
            /* Half the cases send everything to indices 0 and 1: many repeats. */
            int64_t max_index = tt_chance(0.5) ? (big[dim] > 1 ? 1 : 0) : big[dim] - 1;
            scatter_add_case(dtype, TT_PICK(index_dtypes), ndim, big, dim, small, max_index, 0);
        }

        /* Many terms into one element: the atomics must not lose any. */
        static const int64_t s_out[] = {2, 3}, s_src[] = {2, 1000};
        if (scatter) {
            scatter_add_case(dtype, MT_INT64, 2, s_out, 1, s_src, 0, 0);
            scatter_add_case(dtype, dtype == MT_INT64 ? MT_FLOAT64 : dtype, 2, s_out, 1, s_src, 0, 0);
        }

        /* Bad indices: -1, the length itself, not a whole number, NaN (the
         * last two only in a float index); out must stay exactly as it was. */
        for (int c = 0; c < 12; ++c) {
            int ndim = random_pair(big, small, &dim);
            for (int d = 0; d < ndim; ++d)
                small[d] = small[d] ? small[d] : 1;
            double bads[] = {-1.0, (double)big[dim], 0.5, NAN};
            int index_dtype = index_dtypes[c % 3];
            double bad = bads[index_dtype == MT_INT64 ? c % 2 : c % 4];
            gather_case(dtype, index_dtype, ndim, big, dim, small, bad);
            if (scatter)
                scatter_add_case(dtype, index_dtype, ndim, big, dim, small, big[dim] - 1, bad);
        }
    }

    TT_GROUP("dtypes") {
        refused_cases();
        exact_int64_scatter();
        unchecked_cases();
    }

    return tt_summary();
}
