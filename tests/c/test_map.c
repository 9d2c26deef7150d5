/*
 * test_map.c: mt_map (every mt_map_op, float32 and float64), the dtype
 * conversions of MT_MAP_COPY, and mt_fill, on random strided tensors:
 * permuted, sliced and offset views, stride-0 (expanded) inputs, rank 0 and
 * empty tensors.
 *
 *   make build/tests/emu/test_map && build/tests/emu/test_map
 *   MT_TEST_SEED=42 build/tests/emu/test_map     (replay a run)
 */
#include "test_util.h"

#define CASES_PER_OP 20 /* random cases per (op, dtype) */

/* The specification of every op: out = f(x, s), in double. */
static double map_ref(int op, double x, double s)
{
    switch (op) {
    case MT_MAP_COPY: return x;
    case MT_MAP_NEG: return -x;
    case MT_MAP_EXP: return exp(x);
    case MT_MAP_LOG: return log(x);
    case MT_MAP_RELU: return x > 0 ? x : 0.0;
    case MT_MAP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case MT_MAP_TANH: return tanh(x);
    case MT_MAP_ABS: return fabs(x);
    case MT_MAP_SQRT: return sqrt(x);
    case MT_MAP_RECIPROCAL: return 1.0 / x;
    case MT_MAP_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0;
    case MT_MAP_ADD_SCALAR: return x + s;
    case MT_MAP_MUL_SCALAR: return x * s;
    case MT_MAP_POW_SCALAR: return pow(x, s);
    case MT_MAP_RPOW_SCALAR: return pow(s, x);
    case MT_MAP_FILL: return s;
    }
    return NAN;
}

/* The input domain of each op: where it is defined and its result is well
 * inside the dtype's range. */
static void fill_domain(int op, tt_tensor *in)
{
    switch (op) {
    case MT_MAP_EXP: tt_fill(in, -10, 10, 0); break;
    case MT_MAP_LOG: tt_fill(in, 0.01, 100, 0); break;           /* positive */
    case MT_MAP_SQRT: tt_fill(in, 0, 100, TT_SOME_ZEROS); break; /* non-negative */
    case MT_MAP_SIGMOID: tt_fill(in, -20, 20, 0); break;
    case MT_MAP_TANH: tt_fill(in, -10, 10, 0); break;
    case MT_MAP_RECIPROCAL: tt_fill(in, 0.1, 10, TT_RANDOM_SIGN); break; /* away from 0 */
    case MT_MAP_POW_SCALAR: tt_fill(in, 0.1, 4, 0); break;                /* positive base */
    case MT_MAP_RPOW_SCALAR: tt_fill(in, -3, 3, 0); break;               /* exponent */
    default: tt_fill(in, -4, 4, TT_SOME_ZEROS); break;                   /* 0 matters for relu, sign, abs */
    }
}

/* The scalar argument, exactly representable in the dtype so that the
 * reference and the kernel use the same number. */
static double pick_scalar(int op, int dtype)
{
    static const double exponents[] = {2.0, 3.0, 0.5, -1.0, 0.0, 1.0};
    double s;
    switch (op) {
    case MT_MAP_POW_SCALAR: s = tt_chance(0.4) ? TT_PICK(exponents) : tt_rand_uniform(-3, 3); break;
    case MT_MAP_RPOW_SCALAR: s = tt_rand_uniform(0.1, 4); break; /* positive base */
    default: s = tt_rand_uniform(-5, 5); break;
    }
    return tt_round(s, dtype);
}

/* One case: out = op(in, s) on random layouts of a random shape. */
static void map_case(int op, int in_dtype, int out_dtype, int ndim, const int64_t *shape)
{
    tt_tensor in = tt_new(in_dtype, ndim, shape, TT_INPUT);
    tt_tensor out = tt_new(out_dtype, ndim, shape, TT_OUTPUT);
    fill_domain(op, &in);
    double s = pick_scalar(op, in_dtype);
    tt_case("mt_map %s s=%.9g: out %s, in %s", tt_op_name("map", op), s, tt_str(&out), tt_str(&in));

    /* Reference: walk the output; the input has the same shape. */
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        int64_t index[MT_MAX_DIMS];
        to_index(i, out.t.shape, out.t.ndim, index);
        expect[i] = tt_value(map_ref(op, tt_at(&in, index), s));
    }

    if (tt_expect_ok(mt_map(op, out.t, in.t, s), "mt_map")) {
        tt_check_output(&out, expect);
        tt_expect_unchanged(&in, "in");
    }
    free(expect);
    tt_free(&in);
    tt_free(&out);
}

/* mt_fill(out, v): every element of the view becomes v, nothing else. */
static void fill_case(int dtype, int ndim, const int64_t *shape)
{
    tt_tensor out = tt_new(dtype, ndim, shape, TT_OUTPUT);
    double v = tt_round(tt_rand_uniform(-100, 100), dtype);
    tt_case("mt_fill %.9g: out %s", v, tt_str(&out));
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t i = 0; i < tt_numel(&out.t); ++i)
        expect[i] = tt_value(v);
    if (tt_expect_ok(mt_fill(out.t, v), "mt_fill"))
        tt_check_output(&out, expect);
    free(expect);
    tt_free(&out);
}

int main(void)
{
    tt_init("test_map");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    int64_t shape[MT_MAX_DIMS];

    /* Every op, both dtypes, random shapes of rank 0..4 (some empty). */
    for (int op = 0; op < MT_MAP_OP_COUNT; ++op)
        for (int t = 0; t < 2; ++t)
            for (int c = 0; c < CASES_PER_OP; ++c) {
                int ndim = tt_random_shape(shape, 0, 4, 600, 0.1);
                map_case(op, dtypes[t], dtypes[t], ndim, shape);
            }

    /* Shapes every op must handle whatever the random draw: a scalar, one
     * element, empty tensors, a length that is not a multiple of any block. */
    static const int64_t s_empty1[] = {0}, s_empty3[] = {3, 0, 2}, s_one[] = {1, 1}, s_odd[] = {1025};
    for (int op = 0; op < MT_MAP_OP_COUNT; ++op)
        for (int t = 0; t < 2; ++t) {
            map_case(op, dtypes[t], dtypes[t], 0, NULL);
            map_case(op, dtypes[t], dtypes[t], 1, s_empty1);
            map_case(op, dtypes[t], dtypes[t], 3, s_empty3);
            map_case(op, dtypes[t], dtypes[t], 2, s_one);
            map_case(op, dtypes[t], dtypes[t], 1, s_odd);
        }

    /* COPY converts between dtypes: f32 -> f64 is exact, f64 -> f32 rounds. */
    for (int c = 0; c < 12; ++c) {
        int ndim = tt_random_shape(shape, 0, 4, 600, 0.1);
        map_case(MT_MAP_COPY, MT_FLOAT32, MT_FLOAT64, ndim, shape);
        ndim = tt_random_shape(shape, 0, 4, 600, 0.1);
        map_case(MT_MAP_COPY, MT_FLOAT64, MT_FLOAT32, ndim, shape);
    }

    /* mt_fill. */
    for (int t = 0; t < 2; ++t)
        for (int c = 0; c < 8; ++c) {
            int ndim = tt_random_shape(shape, 0, 4, 600, 0.1);
            fill_case(dtypes[t], ndim, shape);
        }

    return tt_summary();
}
