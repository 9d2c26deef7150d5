/*
 * test_map.c: mt_map (every mt_map_op in every dtype that takes it, and the
 * refusal of the others), the casts of MT_MAP_COPY between all four dtypes
 * (NaN, infinities and huge values into int64 and bool), and mt_fill, on
 * random strided tensors: permuted, sliced and offset views, stride-0
 * (expanded) inputs, rank 0 and empty tensors; the contiguous and
 * transposed-copy fast paths, and mt_copy_variant with every rung of the
 * transpose ladder. int64 edge cases (wrapping, saturating casts) are
 * checked exactly, on int64 arrays.
 *
 *   make build/tests/emu/test_map && build/tests/emu/test_map
 *   MT_TEST_SEED=42 build/tests/emu/test_map     (replay a run)
 */
#include "test_util.h"

#define CASES_PER_OP 20 /* random cases per (op, dtype) */

static const int all_dtypes[] = {MT_FLOAT32, MT_FLOAT64, MT_INT64, MT_BOOL};

/* Which dtypes take which op: the dtype rule of each op in MT_MAP_OPS
 * (minitensor.h), which the kernels follow too. */
#define MAP_DTYPES_(id, name, dtypes) dtypes,
static const char *const map_dtypes[] = {MT_MAP_OPS(MAP_DTYPES_)};
#undef MAP_DTYPES_

static int map_takes(int op, int dtype)
{
    return tt_rule_takes(map_dtypes[op], dtype);
}

static int is_float(int dtype)
{
    return dtype == MT_FLOAT32 || dtype == MT_FLOAT64;
}

/* The specification of every op: out = f(x, s, t), in double. */
static double map_ref(int op, double x, double s, double t)
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
    case MT_MAP_ERF: return erf(x);
    case MT_MAP_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case MT_MAP_GELU_TANH: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case MT_MAP_SILU: return x / (1.0 + exp(-x));
    case MT_MAP_ELU: return x > 0 ? x : s * expm1(x);
    case MT_MAP_LEAKY_RELU: return x > 0 ? x : s * x;
    case MT_MAP_HARDTANH: return x < s ? s : x > t ? t : x;
    }
    return NAN;
}

/* The input domain of each op: where it is defined and its result is well
 * inside the dtype's range. int64 gets small whole numbers (its random
 * cases stay exact in the double reference), bool 0 and 1; COPY from a
 * float also gets what a cast must handle: NaN, infinities, values beyond
 * the int64 range, 2^63 itself. */
static void fill_domain(int op, tt_tensor *in)
{
    if (in->t.dtype == MT_BOOL) {
        tt_fill(in, 0, 1, TT_INTEGERS);
        return;
    }
    if (in->t.dtype == MT_INT64) {
        tt_fill(in, -4, 4, TT_INTEGERS);
        return;
    }
    if (op == MT_MAP_COPY && tt_chance(0.5)) {
        static const double special[] = {NAN, INFINITY, -INFINITY, 1e19, -1e19, 1e30, -1e300,
                                         9223372036854775808.0, -9223372036854775808.0, 0.5, -0.5, -2.75};
        tt_fill(in, -100, 100, TT_SOME_ZEROS);
        for (int64_t i = 0; i < in->cap; ++i)
            if (tt_chance(0.3))
                in->host[i] = TT_PICK(special);
        tt_upload(in);
        return;
    }
    switch (op) {
    case MT_MAP_EXP: tt_fill(in, -10, 10, 0); break;
    case MT_MAP_LOG: tt_fill(in, 0.01, 100, 0); break;           /* positive */
    case MT_MAP_SQRT: tt_fill(in, 0, 100, TT_SOME_ZEROS); break; /* non-negative */
    case MT_MAP_SIGMOID: tt_fill(in, -20, 20, 0); break;
    case MT_MAP_TANH: tt_fill(in, -10, 10, 0); break;
    case MT_MAP_SOFTPLUS: tt_fill(in, -30, 30, 0); break; /* where exp(x) alone would lose digits */
    case MT_MAP_ERF: tt_fill(in, -4, 4, 0); break;        /* beyond |x| = 4, erf is +-1 in float */
    case MT_MAP_GELU: case MT_MAP_GELU_TANH: case MT_MAP_SILU: case MT_MAP_ELU:
        tt_fill(in, -12, 12, TT_SOME_ZEROS); break;       /* both tails: x * Phi(x) -> 0 and -> x */
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
    if (dtype == MT_INT64 && op == MT_MAP_POW_SCALAR)
        return (double)tt_rand_int(0, 3); /* an integer power takes a whole exponent >= 0 */
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
/* >= 0: map_case's input (g_in_shift) or output (g_out_shift) is a
 * row-major view that many elements into its buffer (tt_new_shifted). */
static int g_in_shift = -1;
static int g_out_shift = -1;

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
                   : g_in_shift >= 0            ? tt_new_shifted(in_dtype, ndim, shape, g_in_shift)
                                                : tt_new(in_dtype, ndim, shape, g_in_role);
    tt_tensor out = g_out_shift >= 0 ? tt_new_shifted(out_dtype, ndim, shape, g_out_shift)
                                     : tt_new(out_dtype, ndim, shape, g_out_role);
    fill_domain(op, &in);
    double s = pick_scalar(op, in_dtype);
    /* hardtanh's second scalar, its max, lies above its min s. */
    double t = op == MT_MAP_HARDTANH ? tt_round(s + tt_rand_uniform(0.5, 6), in_dtype) : 0.0;
    tt_case("mt_map %s s=%.9g t=%.9g%s%s: out %s, in %s", tt_op_name("map", op), s, t, g_copy_algo < 0 ? "" : " copy_algo ",
            g_copy_algo < 0 ? "" : tt_op_name("copy_algo", g_copy_algo), tt_str(&out), tt_str(&in));

    /* Reference: walk the output; the input has the same shape. An int64 or
     * bool out holds the result cast (a COPY is a cast; an int64 op on the
     * small values of fill_domain is exact in double). */
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        int64_t index[MT_MAX_DIMS];
        to_index(i, out.t.shape, out.t.ndim, index);
        double ref = map_ref(op, tt_at(&in, index), s, t);
        expect[i] = tt_value(is_float(out_dtype) ? ref : tt_round(ref, out_dtype));
    }

    mt_status st = g_copy_algo >= 0 ? mt_copy_variant(out.t, in.t, g_copy_algo)
                   : t != 0.0     ? mt_map_scalars(op, out.t, in.t, s, t)
                                  : mt_map(op, out.t, in.t, s);
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

/* A (op, dtype) pair that minitensor.h does not define: MT_ERR_DTYPE with a
 * message naming the op, before anything is written. */
static void refused_case(int op, int dtype)
{
    static const int64_t s[] = {3, 4};
    tt_tensor in = tt_new(dtype, 2, s, TT_INPUT), out = tt_new(dtype, 2, s, TT_OUTPUT);
    tt_fill(&in, 0, 1, TT_INTEGERS);
    tt_case("mt_map %s refused for %s", tt_op_name("map", op), tt_dtype_name(dtype));
    if (tt_expect_error(mt_map(op, out.t, in.t, 2.0), MT_ERR_DTYPE, "mt_map", &out))
        TT_CHECK(strstr(mt_last_error(), "not defined for") != NULL, "message: %s", mt_last_error());
    tt_free(&in);
    tt_free(&out);
}

/* out = op(in, s) on an exact int64 array against `want`. */
static void exact_map(const char *what, int op, const int64_t *in, const int64_t *want, int n, double s)
{
    tt_case("mt_map %s exact: %s", tt_op_name("map", op), what);
    mt_tensor x = tt_raw_1d(MT_INT64, n, in), y = tt_raw_1d(MT_INT64, n, NULL);
    int64_t got[16];
    if (tt_expect_ok(mt_map(op, y, x, s), "mt_map") && tt_raw_read(&y, got))
        for (int i = 0; i < n; ++i) {
            char name[64];
            snprintf(name, sizeof name, "out[%d] (in %" PRId64 ")", i, in[i]);
            tt_expect_i64(name, got[i], want[i]);
        }
    tt_raw_free(&x);
    tt_raw_free(&y);
}

/* A cast of n values of in_dtype to out_dtype, checked byte for byte
 * against `want` (n values of out_dtype). */
static void exact_cast(const char *what, int in_dtype, const void *in, int out_dtype, const void *want, int n)
{
    tt_case("mt_map copy exact %s -> %s: %s", tt_dtype_name(in_dtype), tt_dtype_name(out_dtype), what);
    mt_tensor x = tt_raw_1d(in_dtype, n, in), y = tt_raw_1d(out_dtype, n, NULL);
    unsigned char got[16 * 8];
    const size_t item = tt_itemsize(out_dtype);
    if (tt_expect_ok(mt_map(MT_MAP_COPY, y, x, 0.0), "mt_map") && tt_raw_read(&y, got))
        for (int i = 0; i < n; ++i)
            TT_CHECK(memcmp(got + i * item, (const unsigned char *)want + i * item, item) == 0,
                     "element %d differs", i);
    tt_raw_free(&x);
    tt_raw_free(&y);
}

/* mt_fill of a one-element tensor of `dtype` with v: its bytes against want. */
static void exact_fill(int dtype, double v, const void *want)
{
    tt_case("mt_fill exact %s %g", tt_dtype_name(dtype), v);
    mt_tensor y = tt_raw_1d(dtype, 1, NULL);
    unsigned char got[8];
    if (tt_expect_ok(mt_fill(y, v), "mt_fill") && tt_raw_read(&y, got))
        TT_CHECK(memcmp(got, want, tt_itemsize(dtype)) == 0, "fill %g", v);
    tt_raw_free(&y);
}

/* What a double cannot show: int64 arithmetic wraps modulo 2^64 (negation
 * and abs of INT64_MIN included), casts from floats saturate and send NaN to
 * 0, every bool written is the byte 0 or 1; pow_scalar refuses an exponent
 * that is negative or not whole. */
static void exact_int64_cases(void)
{
    const int64_t mn = INT64_MIN, mx = INT64_MAX;
    {
        const int64_t in[] = {mn, mx, -5, 0, 7};
        const int64_t neg[] = {mn, -mx, 5, 0, -7}, abs_[] = {mn, mx, 5, 0, 7}, sign[] = {-1, 1, -1, 0, 1},
                      relu[] = {0, mx, 0, 0, 7};
        exact_map("-INT64_MIN wraps to INT64_MIN", MT_MAP_NEG, in, neg, 5, 0);
        exact_map("abs(INT64_MIN) wraps to INT64_MIN", MT_MAP_ABS, in, abs_, 5, 0);
        exact_map("sign", MT_MAP_SIGN, in, sign, 5, 0);
        exact_map("relu", MT_MAP_RELU, in, relu, 5, 0);
        const int64_t plus1[] = {mn + 1, mn, -4, 1, 8};
        exact_map("INT64_MAX + 1 wraps", MT_MAP_ADD_SCALAR, in, plus1, 5, 1.0);
        const int64_t plus_trunc[] = {mx - 1, mx - 2, -7, -2, 5}; /* INT64_MIN - 2 wraps */
        exact_map("the scalar -2.9 truncates to -2", MT_MAP_ADD_SCALAR, in, plus_trunc, 5, -2.9);
        const int64_t times2[] = {0, -2, -10, 0, 14};
        exact_map("INT64_MAX * 2 wraps to -2", MT_MAP_MUL_SCALAR, in, times2, 5, 2.0);
        const int64_t sat[] = {mn, -mx, 0, 0, 0}; /* s saturates to INT64_MAX: x * INT64_MAX */
        const int64_t sat_want[] = {(int64_t)((uint64_t)mn * (uint64_t)mx), (int64_t)((uint64_t)(-mx) * (uint64_t)mx),
                                    0, 0, 0};
        exact_map("a scalar beyond int64 saturates", MT_MAP_MUL_SCALAR, sat, sat_want, 5, 1e30);
    }
    {
        const int64_t in[] = {2, 2, 3, -3, 0, 0, -1, 5};
        const int64_t want[] = {(int64_t)((uint64_t)1 << 62), mn, 0, 0, 1, 0, 1, 1};
        uint64_t p3 = 1, pm3 = 1;
        for (int k = 0; k < 41; ++k) {
            p3 *= 3u;
            pm3 *= (uint64_t)-3;
        }
        int64_t in2[] = {3, -3}, want2[] = {(int64_t)p3, (int64_t)pm3};
        const int64_t e62[] = {2}, w62[] = {want[0]};
        exact_map("2 ** 62", MT_MAP_POW_SCALAR, e62, w62, 1, 62.0);
        const int64_t e63[] = {2}, w63[] = {mn};
        exact_map("2 ** 63 wraps to INT64_MIN", MT_MAP_POW_SCALAR, e63, w63, 1, 63.0);
        const int64_t w64[] = {0};
        exact_map("2 ** 64 wraps to 0", MT_MAP_POW_SCALAR, e63, w64, 1, 64.0);
        exact_map("(+-3) ** 41 wraps", MT_MAP_POW_SCALAR, in2, want2, 2, 41.0);
        const int64_t zero_pow[] = {1, 1, 1, 1, 1, 1, 1, 1};
        exact_map("x ** 0 is 1, 0 ** 0 too", MT_MAP_POW_SCALAR, in, zero_pow, 8, 0.0);
        /* Refused exponents: negative, fractional, infinite. */
        const double bad[] = {-1.0, 0.5, INFINITY, NAN};
        for (int j = 0; j < 4; ++j) {
            tt_case("mt_map pow_scalar of int64 refuses exponent %g", bad[j]);
            mt_tensor x = tt_raw_1d(MT_INT64, 8, in), y = tt_raw_1d(MT_INT64, 8, want);
            int64_t got[8];
            tt_expect_error(mt_map(MT_MAP_POW_SCALAR, y, x, bad[j]), MT_ERR_INVALID_ARGUMENT, "mt_map", NULL);
            if (tt_raw_read(&y, got))
                TT_CHECK(memcmp(got, want, sizeof got) == 0, "out was written");
            tt_raw_free(&x);
            tt_raw_free(&y);
        }
    }
    {
        /* float -> int64: truncation toward zero, NaN -> 0, saturation; the
         * edges 2^63 (just out of range) and -2^63 (INT64_MIN exactly). */
        const double f64[] = {NAN, INFINITY, -INFINITY, 1e19, -1e19, 9223372036854775808.0,
                              -9223372036854775808.0, 4611686018427387904.0, -2.75, 2.75, -0.5, 9007199254740993.0};
        const int64_t want[] = {0, mx, mn, mx, mn, mx, mn, (int64_t)1 << 62, -2, 2, 0, 9007199254740992};
        exact_cast("NaN, inf, huge, 2^63, truncation", MT_FLOAT64, f64, MT_INT64, want, 12);
        const float f32[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 9223372036854775808.0f, -9223372036854775808.0f,
                             -2.75f, 16777217.0f};
        const int64_t want32[] = {0, mx, mn, mx, mn, mx, mn, -2, 16777216};
        exact_cast("NaN, inf, huge, 2^63, truncation", MT_FLOAT32, f32, MT_INT64, want32, 9);
        /* -> bool: x != 0, NaN true; the bytes are exactly 0 and 1. */
        const uint8_t want_b[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
        exact_cast("all non-zero, NaN included", MT_FLOAT64, f64, MT_BOOL, want_b, 12);
        const double zeros[] = {0.0, -0.0, 1e-300, -5e-324};
        const uint8_t want_z[] = {0, 0, 1, 1};
        exact_cast("0 and -0 are false, the tiniest values true", MT_FLOAT64, zeros, MT_BOOL, want_z, 4);
        const int64_t ints[] = {0, mn, 1, -1, mx};
        const uint8_t want_ib[] = {0, 1, 1, 1, 1};
        exact_cast("int64 != 0", MT_INT64, ints, MT_BOOL, want_ib, 5);
        /* bool -> others: 0 or 1. */
        const uint8_t bools[] = {0, 1, 1, 0};
        const int64_t b_i64[] = {0, 1, 1, 0};
        const float b_f32[] = {0.0f, 1.0f, 1.0f, 0.0f};
        const double b_f64[] = {0.0, 1.0, 1.0, 0.0};
        exact_cast("0 and 1", MT_BOOL, bools, MT_INT64, b_i64, 4);
        exact_cast("0 and 1", MT_BOOL, bools, MT_FLOAT32, b_f32, 4);
        exact_cast("0 and 1", MT_BOOL, bools, MT_FLOAT64, b_f64, 4);
        /* int64 -> float rounds to nearest: 2^53 + 1 is not a double. */
        const int64_t big[] = {((int64_t)1 << 53) + 1, mx, mn, 16777217};
        const double big_f64[] = {9007199254740992.0, 9223372036854775808.0, -9223372036854775808.0, 16777217.0};
        const float big_f32[] = {9007199254740992.0f, 9223372036854775808.0f, -9223372036854775808.0f, 16777216.0f};
        exact_cast("rounds to nearest", MT_INT64, big, MT_FLOAT64, big_f64, 4);
        exact_cast("rounds to nearest", MT_INT64, big, MT_FLOAT32, big_f32, 4);
    }
    {
        /* mt_fill casts its double like COPY. */
        const int64_t i_sat = INT64_MAX, i_nan = 0, i_trunc = -2;
        const uint8_t b1 = 1, b0 = 0;
        exact_fill(MT_INT64, 1e30, &i_sat);
        exact_fill(MT_INT64, NAN, &i_nan);
        exact_fill(MT_INT64, -2.9, &i_trunc);
        exact_fill(MT_BOOL, 0.5, &b1);
        exact_fill(MT_BOOL, NAN, &b1);
        exact_fill(MT_BOOL, -0.0, &b0);
    }
}

int main(void)
{
    tt_init("test_map");
    static const int64_t s_empty1[] = {0}, s_empty3[] = {3, 0, 2}, s_one[] = {1, 1}, s_odd[] = {1025};
    static const int64_t s_1025[] = {1025}, s_vec[] = {3, 68}, s_t[] = {33, 65}, s_t3[] = {2, 40, 70},
                         s_t1[] = {1, 5}, s_big[] = {70, 97};

    /* One group per op, named by it ("exp"): every dtype that takes it; a
     * dtype that does not is refused (MT_ERR_DTYPE, out untouched). */
    for (int op = 0; op < MT_MAP_OP_COUNT; ++op)
        TT_GROUP("%s", tt_op_name("map", op)) {
            int64_t shape[MT_MAX_DIMS];
            const int *dtypes = all_dtypes;
            for (int t = 0; t < 4; ++t) {
                if (!map_takes(op, dtypes[t])) {
                    refused_case(op, dtypes[t]);
                    continue;
                }
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

    /* COPY converts between every pair of dtypes: f32 -> f64 is exact,
     * f64 -> f32 rounds, a float -> int64 truncates and saturates, anything
     * -> bool is x != 0; contiguous tensors too (the fast path). */
    TT_GROUP("copy between dtypes") {
        int64_t shape[MT_MAX_DIMS];
        static const int64_t s_1025[] = {1025};
        for (int ti = 0; ti < 4; ++ti)
            for (int to = 0; to < 4; ++to) {
                if (ti == to)
                    continue;
                for (int c = 0; c < 6; ++c) {
                    int ndim = tt_random_shape(shape, 0, 4, 600, 0.1);
                    map_case(MT_MAP_COPY, all_dtypes[ti], all_dtypes[to], ndim, shape);
                }
                g_in_role = g_out_role = TT_CONTIGUOUS;
                map_case(MT_MAP_COPY, all_dtypes[ti], all_dtypes[to], 1, s_1025);
                g_in_role = TT_INPUT;
                g_out_role = TT_OUTPUT;
            }
    }

    /* COPY into a row-major out of an input of any layout, same dtype: the
     * collapsed copy (src/copy_strided.cu) under the fast policy. Ranks 0..6
     * (past 4 collapsed dims: map_strided), last dims that are and are not
     * multiples of 4, expanded dims, offsets. */
    TT_GROUP("copy into a row-major out") {
        int64_t shape[MT_MAX_DIMS];
        static const int64_t s_expand[] = {5, 6, 4, 8}, s_wide[] = {3, 7, 12};
        for (int t = 0; t < 4; ++t) {
            g_out_role = TT_CONTIGUOUS;
            for (int c = 0; c < 24; ++c) {
                int ndim = tt_random_shape(shape, 0, 6, 600, 0.05);
                if (ndim > 0 && tt_chance(0.5))
                    shape[ndim - 1] = 4 * tt_rand_int(1, 4);
                map_case(MT_MAP_COPY, all_dtypes[t], all_dtypes[t], ndim, shape);
            }
            map_case(MT_MAP_COPY, all_dtypes[t], all_dtypes[t], 4, s_expand);
            map_case(MT_MAP_COPY, all_dtypes[t], all_dtypes[t], 3, s_wide);
            g_out_role = TT_OUTPUT;
        }
    }

    /* The 16-byte Pack kernel's head and tail: lengths around a Pack, a
     * block (128 threads) and neither; both views the same number of
     * elements past a 16-byte boundary (the head done one by one), or
     * different numbers (no Packs: map_contiguous). Every dtype the Packs
     * serve: a float op, int64's negation, bool's copy. */
    TT_GROUP("contiguous: Pack head and tail") {
        static const int64_t lengths[] = {0, 1, 3, 4, 5, 17, 1023, 4097};
        static const int shifts[][2] = {{0, 0}, {1, 1}, {3, 3}, {15, 15}, {1, 0}, {0, 2}}; /* in, out */
        static const int ops[] = {MT_MAP_GELU, MT_MAP_GELU_TANH, MT_MAP_SILU};
        for (int t = 0; t < 4; ++t)
            for (int k = 0; k < 3; ++k) {
                const int op = is_float(all_dtypes[t]) ? ops[k] : all_dtypes[t] == MT_INT64 ? MT_MAP_NEG : MT_MAP_COPY;
                if (k > 0 && !is_float(all_dtypes[t]))
                    break;
                for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; ++l)
                    for (size_t h = 0; h < sizeof shifts / sizeof shifts[0]; ++h) {
                        g_in_shift = shifts[h][0];
                        g_out_shift = shifts[h][1];
                        map_case(op, all_dtypes[t], all_dtypes[t], 1, &lengths[l]);
                    }
            }
        g_in_shift = g_out_shift = -1;
    }

    TT_GROUP("mt_fill") {
        int64_t shape[MT_MAX_DIMS];
        for (int t = 0; t < 4; ++t)
            for (int c = 0; c < 8; ++c) {
                int ndim = tt_random_shape(shape, 0, 4, 600, 0.1);
                fill_case(all_dtypes[t], ndim, shape);
            }
    }

    TT_GROUP("int64 exact") {
        exact_int64_cases();
    }

    /* Every rung of the transpose ladder (mt_copy_variant), every pair of
     * dtypes, transposed views (the tiled rungs' layout) and others (they
     * fall back to the naive copy); a group per rung ("copy_variant tiled"). */
    for (int algo = 0; algo < MT_COPY_ALGO_COUNT; ++algo)
        TT_GROUP("copy_variant %s", tt_op_name("copy_algo", algo)) {
            int64_t shape[MT_MAX_DIMS];
            g_copy_algo = algo;
            const int *dtypes = all_dtypes;
            for (int ti = 0; ti < 4; ++ti)
                for (int to = 0; to < 4; ++to) {
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
