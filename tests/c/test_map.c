/*
 * test_map.c: mt_map (every mt_map_op, float32 and float64), the dtype
 * conversions of MT_MAP_COPY, and mt_fill, on random strided tensors:
 * permuted, sliced and offset views, stride-0 (expanded) inputs, rank 0 and
 * empty tensors; the contiguous and transposed-copy fast paths, and
 * mt_copy_variant with every rung of the transpose ladder.
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
    case MT_MAP_SOFTPLUS: return log1p(exp(x));
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
    case MT_MAP_SOFTPLUS: tt_fill(in, -30, 30, 0); break; /* where exp(x) alone would lose digits */
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

/* Layouts with fast paths: map_case's input is TT_INPUT (a random layout),
 * or, when g_in_transposed is set, a transposed view of a row-major buffer
 * (what A.T is), and its output g_out_role. g_copy_algo >= 0 runs COPY
 * through mt_copy_variant with that rung of the transpose ladder. */
static int g_in_role = TT_INPUT;
static int g_in_transposed = 0;
static int g_out_role = TT_OUTPUT;
static int g_copy_algo = -1;

/* A tensor of `shape` that is a transposed view: a row-major buffer of the
 * shape with its last two dims swapped, seen with them swapped back. */
static tt_tensor transposed_view(int dtype, int ndim, const int64_t *shape)
{
    int64_t swapped[MT_MAX_DIMS];
    for (int d = 0; d < ndim; ++d)
        swapped[d] = shape[d];
    swapped[ndim - 2] = shape[ndim - 1];
    swapped[ndim - 1] = shape[ndim - 2];
    tt_tensor x = tt_new(dtype, ndim, swapped, TT_CONTIGUOUS);
    int64_t st = x.t.strides[ndim - 1];
    x.t.shape[ndim - 1] = shape[ndim - 1];
    x.t.shape[ndim - 2] = shape[ndim - 2];
    x.t.strides[ndim - 1] = x.t.strides[ndim - 2];
    x.t.strides[ndim - 2] = st;
    return x;
}

/* One case: out = op(in, s) on random layouts of a random shape. */
static void map_case(int op, int in_dtype, int out_dtype, int ndim, const int64_t *shape)
{
    tt_tensor in = g_in_transposed && ndim >= 2 ? transposed_view(in_dtype, ndim, shape)
                                                : tt_new(in_dtype, ndim, shape, g_in_role);
    tt_tensor out = tt_new(out_dtype, ndim, shape, g_out_role);
    fill_domain(op, &in);
    double s = pick_scalar(op, in_dtype);
    tt_case("mt_map %s s=%.9g%s%s: out %s, in %s", tt_op_name("map", op), s, g_copy_algo < 0 ? "" : " copy_algo ",
            g_copy_algo < 0 ? "" : tt_op_name("copy_algo", g_copy_algo), tt_str(&out), tt_str(&in));

    /* Reference: walk the output; the input has the same shape. */
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        int64_t index[MT_MAX_DIMS];
        to_index(i, out.t.shape, out.t.ndim, index);
        expect[i] = tt_value(map_ref(op, tt_at(&in, index), s));
    }

    mt_status st = g_copy_algo < 0 ? mt_map(op, out.t, in.t, s) : mt_copy_variant(out.t, in.t, g_copy_algo);
    if (tt_expect_ok(st, g_copy_algo < 0 ? "mt_map" : "mt_copy_variant")) {
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
    static const int64_t s_empty1[] = {0}, s_empty3[] = {3, 0, 2}, s_one[] = {1, 1}, s_odd[] = {1025};
    static const int64_t s_1025[] = {1025}, s_vec[] = {3, 68}, s_t[] = {33, 65}, s_t3[] = {2, 40, 70},
                         s_t1[] = {1, 5}, s_big[] = {70, 97};

    /* One group per op, named by it ("exp"). */
    for (int op = 0; op < MT_MAP_OP_COUNT; ++op)
        TT_GROUP("%s", tt_op_name("map", op)) {
            int64_t shape[MT_MAX_DIMS];
            for (int t = 0; t < 2; ++t) {
                /* Both dtypes, random shapes of rank 0..4 (some empty). */
                for (int c = 0; c < CASES_PER_OP; ++c) {
                    int ndim = tt_random_shape(shape, 0, 4, 600, 0.1);
                    map_case(op, dtypes[t], dtypes[t], ndim, shape);
                }
                /* Shapes every op must handle whatever the random draw: a
                 * scalar, one element, empty tensors, a length that is not a
                 * multiple of any block. */
                map_case(op, dtypes[t], dtypes[t], 0, NULL);
                map_case(op, dtypes[t], dtypes[t], 1, s_empty1);
                map_case(op, dtypes[t], dtypes[t], 3, s_empty3);
                map_case(op, dtypes[t], dtypes[t], 2, s_one);
                map_case(op, dtypes[t], dtypes[t], 1, s_odd);

                /* The fast paths: contiguous tensors (16-byte Packs, and the
                 * elements after the last whole Pack), and COPY of a
                 * transposed view (A.T.contiguous(): the tiled transpose),
                 * with tile edges and batches. */
                g_in_role = TT_CONTIGUOUS;
                g_out_role = TT_CONTIGUOUS;
                map_case(op, dtypes[t], dtypes[t], 1, s_1025);
                map_case(op, dtypes[t], dtypes[t], 2, s_vec);
                g_in_role = TT_INPUT;
                g_in_transposed = 1;
                map_case(op, dtypes[t], dtypes[t], 2, s_t);
                g_out_role = TT_OUTPUT;
                map_case(op, dtypes[t], dtypes[t], 3, s_t3);
                g_in_transposed = 0;
            }
        }

    /* COPY converts between dtypes: f32 -> f64 is exact, f64 -> f32 rounds. */
    TT_GROUP("copy between dtypes") {
        int64_t shape[MT_MAX_DIMS];
        for (int c = 0; c < 12; ++c) {
            int ndim = tt_random_shape(shape, 0, 4, 600, 0.1);
            map_case(MT_MAP_COPY, MT_FLOAT32, MT_FLOAT64, ndim, shape);
            ndim = tt_random_shape(shape, 0, 4, 600, 0.1);
            map_case(MT_MAP_COPY, MT_FLOAT64, MT_FLOAT32, ndim, shape);
        }
    }

    TT_GROUP("mt_fill") {
        int64_t shape[MT_MAX_DIMS];
        for (int t = 0; t < 2; ++t)
            for (int c = 0; c < 8; ++c) {
                int ndim = tt_random_shape(shape, 0, 4, 600, 0.1);
                fill_case(dtypes[t], ndim, shape);
            }
    }

    /* Every rung of the transpose ladder (mt_copy_variant), every pair of
     * dtypes, transposed views (the tiled rungs' layout) and others (they
     * fall back to the naive copy); a group per rung ("copy_variant tiled"). */
    for (int algo = 0; algo < MT_COPY_ALGO_COUNT; ++algo)
        TT_GROUP("copy_variant %s", tt_op_name("copy_algo", algo)) {
            int64_t shape[MT_MAX_DIMS];
            g_copy_algo = algo;
            for (int ti = 0; ti < 2; ++ti)
                for (int to = 0; to < 2; ++to) {
                    g_in_transposed = 1;
                    g_out_role = TT_CONTIGUOUS;
                    map_case(MT_MAP_COPY, dtypes[ti], dtypes[to], 2, s_t);
                    map_case(MT_MAP_COPY, dtypes[ti], dtypes[to], 2, s_big);
                    map_case(MT_MAP_COPY, dtypes[ti], dtypes[to], 2, s_t1);
                    g_out_role = TT_OUTPUT;
                    map_case(MT_MAP_COPY, dtypes[ti], dtypes[to], 3, s_t3);
                    g_in_transposed = 0;
                    int ndim = tt_random_shape(shape, 0, 4, 600, 0.1);
                    map_case(MT_MAP_COPY, dtypes[ti], dtypes[to], ndim, shape);
                }
            g_copy_algo = -1;
        }

    /* An unknown copy algo, and shapes that differ. */
    TT_GROUP("copy_variant errors") {
        static const int64_t s23[] = {2, 3}, s32[] = {3, 2};
        tt_tensor in = tt_new(MT_FLOAT32, 2, s23, TT_INPUT), out = tt_new(MT_FLOAT32, 2, s23, TT_OUTPUT);
        tt_tensor wrong = tt_new(MT_FLOAT32, 2, s32, TT_OUTPUT);
        tt_fill(&in, -1, 1, 0);
        int bad[] = {-1, MT_COPY_ALGO_COUNT};
        for (int j = 0; j < 2; ++j) {
            tt_case("mt_copy_variant: unknown algo %d", bad[j]);
            tt_expect_error(mt_copy_variant(out.t, in.t, bad[j]), MT_ERR_INVALID_ARGUMENT, "mt_copy_variant", &out);
        }
        tt_case("mt_copy_variant: out (3, 2) for in (2, 3)");
        tt_expect_error(mt_copy_variant(wrong.t, in.t, MT_COPY_ALGO_TILED_PADDED), MT_ERR_SHAPE, "mt_copy_variant",
                        &wrong);
        tt_free(&in);
        tt_free(&out);
        tt_free(&wrong);
    }

    return tt_summary();
}
