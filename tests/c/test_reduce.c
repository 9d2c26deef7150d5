/*
 * test_reduce.c: mt_reduce along each dim and mt_reduce_all, every
 * mt_reduce_op in every dtype that takes it (float32, float64, int64 with
 * wrapping sums and products, bool's any and all), argmax/argmin into an
 * int64 out; mt_reduce_variant with every rung of the reduction ladder
 * (mt_reduce_algo); mt_reduce_with_indices (max and min with their indices,
 * one pass); the refusals (sum of bools, a float out for argmax).
 *
 * Reduced lengths 0 (the identity; argmax/argmin must fail), 1, 31, 32, 33,
 * 1023, 1025 and 5000 catch the classic block-reduction bugs: one pass that
 * stops at the block size, non-powers of two, a missing bounds guard. The
 * other dims stay small so the emulator stays fast. Inputs are strided
 * (permuted, sliced, offset, expanded); argmax/argmin inputs are often whole
 * numbers so that ties happen, and a tie takes the first index.
 *
 *   make build/tests/emu/test_reduce && build/tests/emu/test_reduce
 *   MT_TEST_SEED=42 build/tests/emu/test_reduce     (replay a run)
 */
#include "test_util.h"

static const int all_dtypes[] = {MT_FLOAT32, MT_FLOAT64, MT_INT64, MT_BOOL};

static int is_arg(int op)
{
    return op == MT_REDUCE_ARGMAX || op == MT_REDUCE_ARGMIN;
}

/* Which dtypes take which op: the dtype rule of each op in MT_REDUCE_OPS
 * (minitensor.h), which the kernels follow too. */
#define REDUCE_DTYPES_(id, name, dtypes) dtypes,
static const char *const reduce_dtypes[] = {MT_REDUCE_OPS(REDUCE_DTYPES_)};
#undef REDUCE_DTYPES_

static int reduce_takes(int op, int dtype)
{
    return tt_rule_takes(reduce_dtypes[op], dtype);
}

/* The dtype of out: int64 indices for argmax/argmin, else in's. */
static int out_dtype_of(int op, int dtype)
{
    return is_arg(op) ? MT_INT64 : dtype;
}

/* Accumulates the terms of one output element in double: the reference.
 * int64 sums and products are also kept exactly, wrapping (iacc). */
typedef struct {
    int op;
    int dtype;
    int64_t count;  /* terms seen                                 */
    double acc;     /* sum, product, max or min so far            */
    double sumsq;   /* sum of squares (the magnitude of a sum)    */
    int64_t arg;    /* index of the first max/min                 */
    uint64_t iacc;  /* int64 sum or product, modulo 2^64          */
} reducer;

/* The identities: max's is the lowest value of the dtype, min's the
 * highest (-inf/+inf, INT64_MIN/INT64_MAX, false/true). */
static reducer reducer_start(int op, int dtype)
{
    reducer r = {op, dtype, 0, 0.0, 0.0, -1, op == MT_REDUCE_PROD ? 1u : 0u};
    const double lo = dtype == MT_INT64 ? (double)INT64_MIN : dtype == MT_BOOL ? 0.0 : -INFINITY;
    const double hi = dtype == MT_INT64 ? (double)INT64_MAX : dtype == MT_BOOL ? 1.0 : INFINITY;
    switch (op) {
    case MT_REDUCE_SUM: r.acc = 0.0; break;
    case MT_REDUCE_PROD: r.acc = 1.0; break;
    case MT_REDUCE_MAX: case MT_REDUCE_ARGMAX: r.acc = lo; break;
    case MT_REDUCE_MIN: case MT_REDUCE_ARGMIN: r.acc = hi; break;
    }
    return r;
}

/* Term number k (its index along the reduction) has value x. NaN propagates
 * through sum and prod by arithmetic; max, min, argmax and argmin let the
 * first NaN win (NumPy), and otherwise the first best value. */
static void reducer_add(reducer *r, int64_t k, double x)
{
    switch (r->op) {
    case MT_REDUCE_SUM: r->acc += x; r->sumsq += x * x; r->iacc += (uint64_t)(int64_t)x; break;
    case MT_REDUCE_PROD: r->acc *= x; r->iacc *= (uint64_t)(int64_t)x; break;
    case MT_REDUCE_MAX: case MT_REDUCE_ARGMAX:
        if (r->arg < 0 || (isnan(x) && !isnan(r->acc)) || x > r->acc) { r->acc = x; r->arg = k; }
        break;
    case MT_REDUCE_MIN: case MT_REDUCE_ARGMIN:
        if (r->arg < 0 || (isnan(x) && !isnan(r->acc)) || x < r->acc) { r->acc = x; r->arg = k; }
        break;
    }
    r->count++;
}

static tt_expect reducer_result(const reducer *r)
{
    if (r->dtype == MT_INT64 && (r->op == MT_REDUCE_SUM || r->op == MT_REDUCE_PROD))
        return tt_value((double)(int64_t)r->iacc); /* exact, wrapped */
    switch (r->op) {
    case MT_REDUCE_SUM: return tt_sum(r->acc, r->sumsq, r->count);
    case MT_REDUCE_PROD: { tt_expect e = {r->acc, fabs(r->acc), r->count}; return e; }
    case MT_REDUCE_ARGMAX: case MT_REDUCE_ARGMIN: return tt_value((double)r->arg);
    default: return tt_value(r->acc); /* max and min select, they are exact */
    }
}

/* The reference of output element i (row-major in out's shape): the
 * reduced dim of in walked in order. */
static reducer reduce_reference(int op, const tt_tensor *in, const tt_tensor *out, int64_t i, int dim)
{
    int64_t index[MT_MAX_DIMS];
    to_index(i, out->t.shape, out->t.ndim, index);
    reducer r = reducer_start(op, in->t.dtype);
    for (int64_t k = 0; k < in->t.shape[dim]; ++k) {
        index[dim] = k;
        reducer_add(&r, k, tt_at(in, index));
    }
    return r;
}

/* Input values for each op. int64: sums of big values (some +-2^62, so
 * that they wrap), products of +-1, 2 and 3 (long ones wrap), small whole
 * numbers for max/min (ties). bool: rows that are all false, all true
 * (any and all then differ from a random row's) or random. */
static void fill_domain(int op, tt_tensor *in)
{
    if (in->t.dtype == MT_BOOL) {
        const double r = tt_rand_uniform(0, 1);
        tt_fill(in, 0, 1, TT_INTEGERS);
        for (int64_t i = 0; i < in->cap; ++i)
            if (r < 0.66 && !tt_chance(0.001))
                in->host[i] = r < 0.33 ? 0.0 : 1.0;
        tt_upload(in);
        return;
    }
    if (in->t.dtype == MT_INT64) {
        switch (op) {
        case MT_REDUCE_SUM:
            tt_fill(in, -1e12, 1e12, TT_INTEGERS);
            for (int64_t i = 0; i < in->cap; ++i)
                if (tt_chance(0.05))
                    in->host[i] = tt_chance(0.5) ? 4611686018427387904.0 : -4611686018427387904.0;
            tt_upload(in);
            break;
        case MT_REDUCE_PROD:
            tt_fill(in, -1, 1, TT_INTEGERS);
            for (int64_t i = 0; i < in->cap; ++i)
                if (in->host[i] == 0)
                    in->host[i] = tt_chance(0.02) ? 0 : tt_chance(0.5) ? 3.0 : 2.0;
            tt_upload(in);
            break;
        default:
            tt_fill(in, -3, 3, TT_INTEGERS);
            break;
        }
        return;
    }
    switch (op) {
    case MT_REDUCE_SUM:
        if (tt_chance(0.5))
            tt_fill(in, -1, 1, 0);
        else
            tt_fill(in, 0, 1, 0); /* no cancellation: the error grows with the length */
        break;
    case MT_REDUCE_PROD:
        tt_fill(in, 0.9, 1.1, TT_RANDOM_SIGN); /* 5000 of them stay in range */
        break;
    default:
        if (tt_chance(0.5))
            tt_fill(in, -3, 3, TT_INTEGERS); /* ties */
        else
            tt_fill(in, -4, 4, 0);
        break;
    }
}

/* The rung of the reduction ladder reduce_case asks for through
 * mt_reduce_variant (-1: plain mt_reduce), and the role of its tensors
 * (TT_CONTIGUOUS for the layouts with fast paths). */
static int g_algo = -1;
static int g_in_role = TT_INPUT;
static int g_out_role = TT_OUTPUT;

/* With g_shift, reduce_case and with_indices_case take a contiguous input
 * that starts one element into its buffer: rows of whole Packs whose
 * starts are not 16-byte aligned, which must take the element-wise loads. */
static int g_shift = 0;

/* The device's SM count, from mt_device_key ("<name>|sm_<cc>|<SMs>sm"). */
static int64_t device_sms(void)
{
    char key[256];
    if (mt_device_key(key, sizeof key) != MT_OK)
        return 1;
    const char *last = strrchr(key, '|');
    return last ? strtoll(last + 1, NULL, 10) : 1;
}

/* One case: out = op(in) along dim (keepdim: out.shape[dim] == 1). With
 * `nans`, some input values are NaN. */
static void reduce_case(int op, int dtype, int ndim, const int64_t *shape, int dim, int nans)
{
    int64_t out_shape[MT_MAX_DIMS];
    for (int d = 0; d < ndim; ++d)
        out_shape[d] = d == dim ? 1 : shape[d];
    tt_tensor in = g_shift ? tt_new_shifted(dtype, ndim, shape, 1) : tt_new(dtype, ndim, shape, g_in_role);
    tt_tensor out = tt_new(out_dtype_of(op, dtype), ndim, out_shape, g_out_role);
    fill_domain(op, &in);
    if (dtype != MT_FLOAT32 && dtype != MT_FLOAT64)
        nans = 0;
    if (nans)
        tt_plant_nans(&in, 0.02);
    tt_case("mt_reduce %s%s dim %d algo %s: out %s, in %s", tt_op_name("reduce", op), nans ? " with NaNs" : "",
            dim, g_algo < 0 ? "(mt_reduce)" : tt_op_name("reduce_algo", g_algo), tt_str(&out), tt_str(&in));
    mt_status st = g_algo < 0 ? mt_reduce(op, out.t, in.t, dim) : mt_reduce_variant(op, out.t, in.t, dim, g_algo);

    if (shape[dim] == 0 && is_arg(op) && tt_numel(&out.t) > 0) {
        /* No element to point at: an error, and out untouched. */
        tt_expect_error(st, TT_ANY_ERROR, "mt_reduce", &out);
    } else {
        /* Reference: for each output element, walk the reduced dim of in. */
        tt_expect *expect = tt_expect_alloc(&out);
        for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
            const reducer r = reduce_reference(op, &in, &out, i, dim);
            expect[i] = reducer_result(&r);
        }
        if (tt_expect_ok(st, "mt_reduce"))
            tt_check_output(&out, expect);
        free(expect);
    }
    tt_expect_unchanged(&in, "in");
    tt_free(&in);
    tt_free(&out);
}

/* A tensor of `dtype` with like's shape, strides and offset (its own
 * buffer, poisoned): the indices of mt_reduce_with_indices, laid out as
 * its values. */
static tt_tensor new_with_layout(int dtype, const tt_tensor *like)
{
    tt_tensor x;
    memset(&x, 0, sizeof x);
    x.t = like->t;
    x.t.dtype = dtype;
    x.t.data = NULL;
    x.cap = like->cap;
    x.host = malloc((size_t)(x.cap ? x.cap : 1) * sizeof(double));
    for (int64_t i = 0; i < x.cap; ++i)
        x.host[i] = TT_POISON;
    if (tt_expect_ok(mt_malloc(&x.t.data, (size_t)(x.cap ? x.cap : 1) * tt_itemsize(dtype)), "mt_malloc"))
        tt_upload(&x);
    return x;
}

/* One case of mt_reduce_with_indices: op MAX or MIN along dim into values
 * (in's dtype) and indices (int64, values' layout), checked against the
 * reference's max (min) and the index of its first occurrence. */
static void with_indices_case(int op, int dtype, int ndim, const int64_t *shape, int dim, int nans)
{
    int64_t out_shape[MT_MAX_DIMS];
    for (int d = 0; d < ndim; ++d)
        out_shape[d] = d == dim ? 1 : shape[d];
    tt_tensor in = g_shift ? tt_new_shifted(dtype, ndim, shape, 1) : tt_new(dtype, ndim, shape, g_in_role);
    tt_tensor values = tt_new(dtype, ndim, out_shape, g_out_role);
    tt_tensor indices = new_with_layout(MT_INT64, &values);
    fill_domain(op, &in);
    if (nans && (dtype == MT_FLOAT32 || dtype == MT_FLOAT64))
        tt_plant_nans(&in, 0.02);
    tt_case("mt_reduce_with_indices %s dim %d: values %s, in %s", tt_op_name("reduce", op), dim, tt_str(&values),
            tt_str(&in));
    mt_status st = mt_reduce_with_indices(op, values.t, indices.t, in.t, dim);
    if (shape[dim] == 0 && tt_numel(&values.t) > 0) {
        tt_expect_error(st, TT_ANY_ERROR, "mt_reduce_with_indices", &values);
        tt_expect_unchanged(&indices, "indices");
    } else {
        tt_expect *e_values = tt_expect_alloc(&values);
        tt_expect *e_indices = tt_expect_alloc(&indices);
        for (int64_t i = 0; i < tt_numel(&values.t); ++i) {
            const reducer r = reduce_reference(op, &in, &values, i, dim);
            e_values[i] = reducer_result(&r);
            e_indices[i] = tt_value((double)r.arg);
        }
        if (tt_expect_ok(st, "mt_reduce_with_indices")) {
            tt_check_output(&values, e_values);
            tt_check_output(&indices, e_indices);
        }
        free(e_values);
        free(e_indices);
    }
    tt_expect_unchanged(&in, "in");
    tt_free(&in);
    tt_free(&values);
    tt_free(&indices);
}

/* What mt_reduce_with_indices refuses, values and indices untouched. */
static void with_indices_refusals(void)
{
    static const int64_t s[] = {3, 5}, s1[] = {3, 1};
    tt_tensor in = tt_new(MT_FLOAT32, 2, s, TT_CONTIGUOUS), values = tt_new(MT_FLOAT32, 2, s1, TT_CONTIGUOUS);
    tt_tensor indices = new_with_layout(MT_INT64, &values), wrong = new_with_layout(MT_FLOAT32, &values);
    tt_fill(&in, -1, 1, 0);
    tt_case("mt_reduce_with_indices: sum has no indices");
    tt_expect_error(mt_reduce_with_indices(MT_REDUCE_SUM, values.t, indices.t, in.t, 1), MT_ERR_INVALID_ARGUMENT,
                    "mt_reduce_with_indices", &values);
    tt_case("mt_reduce_with_indices: float indices");
    tt_expect_error(mt_reduce_with_indices(MT_REDUCE_MAX, values.t, wrong.t, in.t, 1), MT_ERR_DTYPE,
                    "mt_reduce_with_indices", &values);
    tt_case("mt_reduce_with_indices: int64 values of float32 in");
    tt_expect_error(mt_reduce_with_indices(MT_REDUCE_MAX, indices.t, indices.t, in.t, 1), TT_ANY_ERROR,
                    "mt_reduce_with_indices", &indices);
    tt_case("mt_reduce_with_indices: values and indices of different strides");
    tt_tensor strided = indices;
    strided.t.strides[0] = 2;
    strided.t.shape[0] = 2;
    tt_tensor small_values = values;
    small_values.t.shape[0] = 2;
    tt_tensor small_in = in;
    small_in.t.shape[0] = 2;
    tt_expect_error(mt_reduce_with_indices(MT_REDUCE_MIN, small_values.t, strided.t, small_in.t, 1),
                    MT_ERR_INVALID_ARGUMENT, "mt_reduce_with_indices", &values);
    tt_case("mt_reduce_with_indices: the wrong shape");
    tt_expect_error(mt_reduce_with_indices(MT_REDUCE_MAX, values.t, indices.t, in.t, 0), MT_ERR_SHAPE,
                    "mt_reduce_with_indices", &values);
    tt_free(&in);
    tt_free(&values);
    tt_free(&indices);
    tt_free(&wrong);
}

/* One case: the single element of out = op(every element of in). The index
 * of argmax/argmin is in's row-major ordinal. out_ndim is 0 (a scalar) or
 * in's rank with every size 1. */
static void reduce_all_case(int op, int dtype, int ndim, const int64_t *shape, int out_ndim, int nans)
{
    static const int64_t ones[MT_MAX_DIMS] = {1, 1, 1, 1, 1, 1, 1, 1};
    tt_tensor in = tt_new(dtype, ndim, shape, TT_INPUT);
    tt_tensor out = tt_new(out_dtype_of(op, dtype), out_ndim, ones, TT_OUTPUT);
    fill_domain(op, &in);
    if (dtype != MT_FLOAT32 && dtype != MT_FLOAT64)
        nans = 0;
    if (nans)
        tt_plant_nans(&in, 0.002);
    tt_case("mt_reduce_all %s%s: out %s, in %s", tt_op_name("reduce", op), nans ? " with NaNs" : "",
            tt_str(&out), tt_str(&in));
    mt_status st = mt_reduce_all(op, out.t, in.t);

    if (tt_numel(&in.t) == 0 && is_arg(op)) {
        tt_expect_error(st, TT_ANY_ERROR, "mt_reduce_all", &out);
    } else {
        reducer r = reducer_start(op, dtype);
        for (int64_t i = 0; i < tt_numel(&in.t); ++i)
            reducer_add(&r, i, tt_at_ordinal(&in, i));
        tt_expect expect = reducer_result(&r);
        if (tt_expect_ok(st, "mt_reduce_all"))
            tt_check_output(&out, &expect);
    }
    tt_expect_unchanged(&in, "in");
    tt_free(&in);
    tt_free(&out);
}

/* A call mt_reduce, mt_reduce_all and every rung of mt_reduce_variant must
 * refuse with MT_ERR_DTYPE, out untouched. */
static void refused_case(int op, int dtype, int out_dtype, const char *why)
{
    static const int64_t s[] = {3, 5}, s1[] = {3, 1};
    tt_tensor in = tt_new(dtype, 2, s, TT_INPUT), out = tt_new(out_dtype, 2, s1, TT_OUTPUT);
    tt_fill(&in, 0, 1, TT_INTEGERS);
    tt_case("mt_reduce %s refused: in %s, out %s (%s)", tt_op_name("reduce", op), tt_dtype_name(dtype),
            tt_dtype_name(out_dtype), why);
    tt_expect_error(mt_reduce(op, out.t, in.t, 1), MT_ERR_DTYPE, "mt_reduce", &out);
    tt_expect_error(mt_reduce_all(op, out.t, in.t), TT_ANY_ERROR, "mt_reduce_all", &out); /* (3, 1): also a shape error */
    for (int algo = 0; algo < MT_REDUCE_ALGO_COUNT; ++algo)
        tt_expect_error(mt_reduce_variant(op, out.t, in.t, 1, algo), MT_ERR_DTYPE, "mt_reduce_variant", &out);
    tt_free(&out);
    out = tt_new(out_dtype, 0, NULL, TT_OUTPUT);
    tt_expect_error(mt_reduce_all(op, out.t, in.t), MT_ERR_DTYPE, "mt_reduce_all", &out);
    tt_free(&in);
    tt_free(&out);
}

/* Exact int64 extremes: wrapping sums and products, INT64_MIN and INT64_MAX
 * as values of max/min/argmax/argmin (against the identities). */
static void exact_cases(void)
{
    const int64_t mn = INT64_MIN, mx = INT64_MAX;
    const struct {
        const char *what;
        int op;
        int n;
        int64_t in[6];
        int64_t want;
    } cases[] = {
        {"INT64_MAX + 1 wraps", MT_REDUCE_SUM, 2, {mx, 1}, mn},
        {"INT64_MIN + INT64_MIN wraps to 0", MT_REDUCE_SUM, 3, {mn, mn, 0}, 0},
        {"2^32 * 2^32 wraps to 0", MT_REDUCE_PROD, 2, {(int64_t)1 << 32, (int64_t)1 << 32}, 0},
        {"INT64_MAX * 3 wraps", MT_REDUCE_PROD, 2, {mx, 3}, (int64_t)((uint64_t)mx * 3u)},
        {"max of INT64_MIN alone", MT_REDUCE_MAX, 2, {mn, mn}, mn},
        {"min of INT64_MAX alone", MT_REDUCE_MIN, 2, {mx, mx}, mx},
        {"argmax of INT64_MIN alone is 0", MT_REDUCE_ARGMAX, 3, {mn, mn, mn}, 0},
        {"argmin of INT64_MAX alone is 0", MT_REDUCE_ARGMIN, 3, {mx, mx, mx}, 0},
        {"argmax, the first of two maxima", MT_REDUCE_ARGMAX, 5, {mn, mx, 0, mx, 1}, 1},
        {"argmin, the first of two minima", MT_REDUCE_ARGMIN, 5, {0, mn, mx, mn, 1}, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
        for (int all = 0; all < 2; ++all) {
            tt_case("mt_reduce%s exact int64 %s: %s", all ? "_all" : "", tt_op_name("reduce", cases[c].op),
                    cases[c].what);
            mt_tensor in = tt_raw_1d(MT_INT64, cases[c].n, cases[c].in), out = tt_raw_1d(MT_INT64, 1, NULL);
            int64_t got = 0;
            mt_status st = all ? mt_reduce_all(cases[c].op, out, in) : mt_reduce(cases[c].op, out, in, 0);
            if (tt_expect_ok(st, "mt_reduce") && tt_raw_read(&out, &got))
                tt_expect_i64("out", got, cases[c].want);
            tt_raw_free(&in);
            tt_raw_free(&out);
        }
}

int main(void)
{
    tt_init("test_reduce");
    const int *dtypes = all_dtypes;
    static const int64_t lengths[] = {0, 1, 31, 32, 33, 1023, 1025, 5000};
    static const int64_t small[] = {1, 2, 3};
    int64_t shape[MT_MAX_DIMS];
    int position = 0; /* cycles the reduced dim through every position */

    /* A group per op and dtype that takes it ("sum f32"): mt_reduce and
     * mt_reduce_all. */
    for (int op = 0; op < MT_REDUCE_OP_COUNT; ++op)
        for (int t = 0; t < 4; ++t) TT_GROUP("%s %s", tt_op_name("reduce", op), tt_dtype_name(dtypes[t])) {
            if (!reduce_takes(op, dtypes[t])) {
                refused_case(op, dtypes[t], dtypes[t], "the dtype does not take the op");
                continue;
            }
            int dtype = dtypes[t];

            /* The interesting lengths, the reduced dim at every position of
             * ranks 1..3, the other dims small and non-empty. */
            for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; ++l)
                for (int rep = 0; rep < 3; ++rep) {
                    int ndim = (int)tt_rand_int(1, 3);
                    int dim = position++ % ndim;
                    for (int d = 0; d < ndim; ++d)
                        shape[d] = d == dim ? lengths[l] : TT_PICK(small);
                    reduce_case(op, dtype, ndim, shape, dim, 0);
                }

            /* Random shapes of rank 1..4 (some empty), along each dim. */
            for (int c = 0; c < 8; ++c) {
                int ndim = tt_random_shape(shape, 1, 4, 400, 0.15);
                for (int dim = 0; dim < ndim; ++dim)
                    reduce_case(op, dtype, ndim, shape, dim, 0);
            }

            /* Everything at once: random shapes, a scalar, empty, long. */
            for (int c = 0; c < 10; ++c) {
                int ndim = tt_random_shape(shape, 0, 4, 600, 0.15);
                reduce_all_case(op, dtype, ndim, shape, tt_chance(0.5) ? 0 : ndim, 0);
            }
            static const int64_t s_empty[] = {0}, s_empty2[] = {4, 0}, s_1025[] = {1025},
                                 s_5000[] = {5, 1000};
            reduce_all_case(op, dtype, 0, NULL, 0, 0);
            reduce_all_case(op, dtype, 1, s_empty, 0, 0);
            reduce_all_case(op, dtype, 2, s_empty2, 2, 0);
            reduce_all_case(op, dtype, 1, s_1025, 1, 0);
            reduce_all_case(op, dtype, 2, s_5000, 0, 0);

            /* NaN: sum and prod give NaN; max/min give NaN and argmax/argmin
             * the index of the first NaN, as NumPy does. */
            static const int64_t s_nan[] = {4, 300};
            reduce_case(op, dtype, 2, s_nan, 1, 1);
            reduce_case(op, dtype, 2, s_nan, 0, 1);
            reduce_all_case(op, dtype, 2, s_nan, 0, 1);
        }

    /* Every rung of the reduction ladder, on strided and contiguous inputs,
     * the reduced dim at every position; a group per rung ("ladder
     * first_add"). */
    static const int64_t ladder_lengths[] = {1, 31, 33, 1025};
    for (int algo = 0; algo < MT_REDUCE_ALGO_COUNT; ++algo)
        TT_GROUP("ladder %s", tt_op_name("reduce_algo", algo)) {
            g_algo = algo;
            for (int op = 0; op < MT_REDUCE_OP_COUNT; ++op)
                for (int t = 0; t < 4; ++t) {
                    if (!reduce_takes(op, dtypes[t]))
                        continue;
                    for (size_t l = 0; l < sizeof ladder_lengths / sizeof ladder_lengths[0]; ++l) {
                        g_in_role = tt_chance(0.5) ? TT_CONTIGUOUS : TT_INPUT;
                        int ndim = (int)tt_rand_int(1, 3);
                        int dim = position++ % ndim;
                        for (int d = 0; d < ndim; ++d)
                            shape[d] = d == dim ? ladder_lengths[l] : TT_PICK(small);
                        reduce_case(op, dtypes[t], ndim, shape, dim, 0);
                    }
                    static const int64_t s_nan[] = {3, 100};
                    g_in_role = TT_INPUT;
                    reduce_case(op, dtypes[t], 2, s_nan, 1, 1);
                    /* Contiguous rows of whole Packs (16 bools, 4 floats,
                     * 2 doubles or int64s): the vectorized rung's 16-byte loads. */
                    static const int64_t s_packs[] = {3, 64}, s_long[] = {2, 1040};
                    g_in_role = TT_CONTIGUOUS;
                    reduce_case(op, dtypes[t], 2, s_packs, 1, 0);
                    reduce_case(op, dtypes[t], 2, s_long, 1, 0);
                    g_in_role = TT_INPUT;
                }
            g_algo = -1;
        }

    /* The fast paths of mt_reduce: contiguous rows read as 16-byte Packs
     * (lengths that are multiples of 4), many short rows (one warp each),
     * and a reduced dim that is not the last (columns walked by warps; a long dim with few columns is split
     * over blocks, then the partials combined). */
    static const int64_t s_rows[] = {5, 1024}, s_odd[] = {3, 1025}, s_tall[] = {1025, 33},
                         s_mid[] = {3, 5000, 2}, s_wide[] = {33, 129}, s_3d[] = {2, 33, 65};
    for (int op = 0; op < MT_REDUCE_OP_COUNT; ++op)
        TT_GROUP("contiguous %s", tt_op_name("reduce", op)) {
            g_in_role = TT_CONTIGUOUS;
            g_out_role = TT_CONTIGUOUS;
            for (int t = 0; t < 4; ++t) {
                int dtype = dtypes[t];
                if (!reduce_takes(op, dtype))
                    continue;
                reduce_case(op, dtype, 2, s_rows, 1, 0);
                reduce_case(op, dtype, 2, s_odd, 1, 0);
                reduce_case(op, dtype, 2, s_tall, 0, 0);
                reduce_case(op, dtype, 2, s_tall, 0, 1);
                reduce_case(op, dtype, 3, s_mid, 1, 0);
                reduce_case(op, dtype, 3, s_mid, 0, 0);
                reduce_case(op, dtype, 2, s_wide, 0, 0);
                reduce_case(op, dtype, 3, s_3d, 0, 0);
                reduce_case(op, dtype, 3, s_3d, 1, 0);
                /* As many rows as the device holds warps, of 260 (16-byte
                 * loads), 257 and 7 elements: mt_reduce takes one warp per
                 * row, or a group of 8 lanes per row of 7. */
                const int64_t many = 64 * device_sms();
                const int64_t s_many[] = {many, 260}, s_many_odd[] = {many, 257}, s_many_short[] = {many, 7};
                reduce_case(op, dtype, 2, s_many, 1, 0);
                reduce_case(op, dtype, 2, s_many_odd, 1, 1);
                reduce_case(op, dtype, 2, s_many_short, 1, 0); /* several rows a warp */
            }
            g_in_role = TT_INPUT;
            g_out_role = TT_OUTPUT;
        }

    /* max and min with their indices in one pass: every dtype, the lengths
     * of the classic bugs, strided and contiguous layouts (rows, one warp per
     * short row, columns), NaNs, ties (small whole numbers). */
    static const int extremes[] = {MT_REDUCE_MAX, MT_REDUCE_MIN};
    for (int e = 0; e < 2; ++e)
        TT_GROUP("with indices %s", tt_op_name("reduce", extremes[e])) {
            const int op = extremes[e];
            for (int t = 0; t < 4; ++t) {
                for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; ++l) {
                    int ndim = (int)tt_rand_int(1, 3);
                    int dim = position++ % ndim;
                    for (int d = 0; d < ndim; ++d)
                        shape[d] = d == dim ? lengths[l] : TT_PICK(small);
                    with_indices_case(op, dtypes[t], ndim, shape, dim, 0);
                }
                for (int c = 0; c < 4; ++c) {
                    int ndim = tt_random_shape(shape, 1, 4, 400, 0.15);
                    for (int dim = 0; dim < ndim; ++dim)
                        with_indices_case(op, dtypes[t], ndim, shape, dim, c % 2);
                }
                g_in_role = TT_CONTIGUOUS;
                g_out_role = TT_CONTIGUOUS;
                const int64_t many = 64 * device_sms();
                const int64_t s_many[] = {many, 260}, s_many_short[] = {many, 7};
                with_indices_case(op, dtypes[t], 2, s_rows, 1, 1);
                with_indices_case(op, dtypes[t], 2, s_tall, 0, 1);
                with_indices_case(op, dtypes[t], 3, s_mid, 1, 0);
                with_indices_case(op, dtypes[t], 2, s_many, 1, 1);
                with_indices_case(op, dtypes[t], 2, s_many_short, 1, 0);
                g_in_role = TT_INPUT;
                g_out_role = TT_OUTPUT;
            }
        }
    /* Contiguous rows, as mt_reduce and mt_reduce_with_indices take them
     * for max, min, argmax and argmin: 16-byte Packs (the vectorized rung)
     * when the length is a whole number of Packs and the rows start aligned,
     * else element by element; lengths 0..5000 around the Pack widths and
     * the block size, rows from an aligned start and one element past it
     * (g_shift), NaNs and ties. */
    static const int64_t pack_lengths[] = {0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 63, 64, 65, 255, 256, 257,
                                           1023, 1024, 1025, 1028, 2047, 2048, 2052, 4092, 4096, 4097, 4100, 5000};
    static const int row_ops[] = {MT_REDUCE_MAX, MT_REDUCE_MIN, MT_REDUCE_ARGMAX, MT_REDUCE_ARGMIN, MT_REDUCE_SUM};
    for (int t = 0; t < 4; ++t)
        TT_GROUP("rows as packs %s", tt_dtype_name(dtypes[t])) {
            g_in_role = TT_CONTIGUOUS;
            g_out_role = TT_CONTIGUOUS;
            for (g_shift = 0; g_shift < 2; ++g_shift)
                for (size_t l = 0; l < sizeof pack_lengths / sizeof pack_lengths[0]; ++l) {
                    const int64_t s_rows3[] = {3, pack_lengths[l]};
                    const int nans = (int)(l % 2);
                    for (size_t o = 0; o < sizeof row_ops / sizeof row_ops[0]; ++o)
                        if (reduce_takes(row_ops[o], dtypes[t]))
                            reduce_case(row_ops[o], dtypes[t], 2, s_rows3, 1, nans);
                    with_indices_case(MT_REDUCE_MAX, dtypes[t], 2, s_rows3, 1, nans);
                    with_indices_case(MT_REDUCE_MIN, dtypes[t], 2, s_rows3, 1, !nans);
                }
            g_shift = 0;
            g_in_role = TT_INPUT;
            g_out_role = TT_OUTPUT;
        }

    TT_GROUP("with indices refusals")
        with_indices_refusals();

    /* The dtype rules: argmax/argmin write int64 only, the other ops out of
     * in's dtype; exact int64 extremes. */
    TT_GROUP("dtypes") {
        for (int t = 0; t < 4; ++t) {
            refused_case(MT_REDUCE_ARGMAX, dtypes[t], MT_FLOAT32, "argmax writes int64");
            refused_case(MT_REDUCE_ARGMIN, dtypes[t], dtypes[t] == MT_INT64 ? MT_FLOAT64 : dtypes[t],
                         "argmin writes int64");
        }
        refused_case(MT_REDUCE_SUM, MT_FLOAT32, MT_INT64, "sum writes in's dtype");
        refused_case(MT_REDUCE_MAX, MT_INT64, MT_BOOL, "max writes in's dtype");
        exact_cases();
    }

    /* An unknown algo. */
    TT_GROUP("unknown algo") {
        static const int64_t s23[] = {2, 3}, s21[] = {2, 1};
        tt_tensor in = tt_new(MT_FLOAT32, 2, s23, TT_INPUT), out = tt_new(MT_FLOAT32, 2, s21, TT_OUTPUT);
        tt_fill(&in, -1, 1, 0);
        int bad[] = {-1, MT_REDUCE_ALGO_COUNT};
        for (int j = 0; j < 2; ++j) {
            tt_case("mt_reduce_variant: unknown algo %d", bad[j]);
            tt_expect_error(mt_reduce_variant(MT_REDUCE_SUM, out.t, in.t, 1, bad[j]), MT_ERR_INVALID_ARGUMENT,
                            "mt_reduce_variant", &out);
        }
        tt_free(&in);
        tt_free(&out);
    }

    return tt_summary();
}
