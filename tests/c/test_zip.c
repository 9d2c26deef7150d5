/*
 * test_zip.c: mt_zip, every mt_zip_op in every dtype that takes it (and the
 * refusal of the others), with NumPy broadcasting of both inputs (fewer
 * leading dims, size-1 dims, stride-0 expanded views), non-contiguous inputs
 * and outputs, rank 0 and empty tensors. Comparisons write a bool out for
 * inputs of every dtype and refuse any other out. int64 edge cases
 * (wrapping, floor division and remainder of negative operands and by zero,
 * INT64_MIN // -1) are checked exactly, on int64 arrays.
 *
 *   make build/tests/emu/test_zip && build/tests/emu/test_zip
 *   MT_TEST_SEED=42 build/tests/emu/test_zip     (replay a run)
 */
#include "test_util.h"

#define CASES_PER_OP 24 /* random cases per (op, dtype) */

static const int all_dtypes[] = {MT_FLOAT32, MT_FLOAT64, MT_INT64, MT_BOOL};

static int is_comparison(int op)
{
    return op == MT_ZIP_EQ || op == MT_ZIP_NE || op == MT_ZIP_LT || op == MT_ZIP_LE || op == MT_ZIP_GT ||
           op == MT_ZIP_GE;
}

static int is_bitwise(int op)
{
    return op == MT_ZIP_BITWISE_AND || op == MT_ZIP_BITWISE_OR || op == MT_ZIP_BITWISE_XOR;
}

/* Which dtypes take which op: the dtype rule of each op in MT_ZIP_OPS
 * (minitensor.h), which the kernels follow too. */
#define ZIP_DTYPES_(id, name, dtypes) dtypes,
static const char *const zip_dtypes[] = {MT_ZIP_OPS(ZIP_DTYPES_)};
#undef ZIP_DTYPES_

static int zip_takes(int op, int dtype)
{
    return tt_rule_takes(zip_dtypes[op], dtype);
}

/* Python's a // b for floats (torch.floor_divide): the whole number
 * nearest to (a - fmod(a, b)) / b, stepped down when fmod has the wrong
 * sign; b == 0 gives a / b. */
static double py_floor_divide(double a, double b)
{
    if (b == 0)
        return a / b;
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0 && (b < 0) != (mod < 0))
        div -= 1;
    if (div == 0)
        return copysign(0.0, a / b);
    double f = floor(div);
    return div - f > 0.5 ? f + 1 : f;
}

/* Python's a % b for floats: the sign of b; b == 0 gives NaN. */
static double py_remainder(double a, double b)
{
    double mod = fmod(a, b);
    if (mod != 0 && (b < 0) != (mod < 0))
        mod += b;
    return mod;
}

/* The specification of every op on int64: wrapping +, -, * and powers
 * (computed in uint64_t), floor division and remainder with the sign of the
 * divisor, x // 0 = x % 0 = 0, INT64_MIN // -1 = INT64_MIN. */
static int64_t zip_ref_i64(int op, int64_t a, int64_t b)
{
    switch (op) {
    case MT_ZIP_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case MT_ZIP_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case MT_ZIP_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case MT_ZIP_POW: {
        if (b < 0)
            return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
        /* a ** b = product of a ** (2^k) over the bits k of b. */
        uint64_t r = 1, sq = (uint64_t)a;
        for (uint64_t e = (uint64_t)b; e; e >>= 1, sq *= sq)
            if (e & 1)
                r *= sq;
        return (int64_t)r;
    }
    case MT_ZIP_MAXIMUM: return a > b ? a : b;
    case MT_ZIP_MINIMUM: return a < b ? a : b;
    case MT_ZIP_EQ: return a == b;
    case MT_ZIP_NE: return a != b;
    case MT_ZIP_LT: return a < b;
    case MT_ZIP_LE: return a <= b;
    case MT_ZIP_GT: return a > b;
    case MT_ZIP_GE: return a >= b;
    case MT_ZIP_BITWISE_AND: return a & b;
    case MT_ZIP_BITWISE_OR: return a | b;
    case MT_ZIP_BITWISE_XOR: return a ^ b;
    case MT_ZIP_FLOOR_DIVIDE: {
        if (b == 0)
            return 0;
        if (b == -1)
            return (int64_t)(0u - (uint64_t)a);
        int64_t q = a / b;
        return (q * b != a && (a < 0) != (b < 0)) ? q - 1 : q;
    }
    case MT_ZIP_REMAINDER: {
        if (b == 0 || b == -1)
            return 0;
        int64_t r = a % b;
        return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
    }
    }
    return 0;
}

/* The specification of every op: out = f(a, b), in double. NaN follows IEEE
 * arithmetic and comparisons; maximum and minimum let a NaN win (NumPy).
 * int64 goes through zip_ref_i64; bool + is or, * is and. */
static double zip_ref(int op, int dtype, double a, double b, double s, double t)
{
    if (dtype == MT_INT64)
        return (double)zip_ref_i64(op, (int64_t)a, (int64_t)b);
    if (dtype == MT_BOOL && op == MT_ZIP_ADD)
        return a != 0 || b != 0;
    if (dtype == MT_BOOL && op == MT_ZIP_MUL)
        return a != 0 && b != 0;
    if (dtype == MT_BOOL && is_bitwise(op))
        return (double)zip_ref_i64(op, (int64_t)a, (int64_t)b);
    switch (op) {
    case MT_ZIP_ADD: return a + b;
    case MT_ZIP_SUB: return a - b;
    case MT_ZIP_MUL: return a * b;
    case MT_ZIP_DIV: return a / b;
    case MT_ZIP_POW: return pow(a, b);
    case MT_ZIP_MAXIMUM: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case MT_ZIP_MINIMUM: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case MT_ZIP_EQ: return a == b;
    case MT_ZIP_NE: return a != b;
    case MT_ZIP_LT: return a < b;
    case MT_ZIP_LE: return a <= b;
    case MT_ZIP_GT: return a > b;
    case MT_ZIP_GE: return a >= b;
    case MT_ZIP_RELU_BACKWARD: return b > 0 ? a : 0.0;
    case MT_ZIP_FLOOR_DIVIDE: return py_floor_divide(a, b);
    case MT_ZIP_REMAINDER: return py_remainder(a, b);
    /* The activations' gradients: a the incoming gradient, b the input. */
    case MT_ZIP_GELU_BACKWARD:
        return a * (0.5 * (1.0 + erf(b / sqrt(2.0))) + b * exp(-0.5 * b * b) / sqrt(2.0 * M_PI));
    case MT_ZIP_GELU_TANH_BACKWARD: {
        double k = sqrt(2.0 / M_PI), th = tanh(k * (b + 0.044715 * b * b * b));
        return a * (0.5 * (1.0 + th) + 0.5 * b * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * b * b));
    }
    case MT_ZIP_SILU_BACKWARD: {
        double sig = 1.0 / (1.0 + exp(-b));
        return a * sig * (1.0 + b * (1.0 - sig));
    }
    case MT_ZIP_ELU_BACKWARD: return b > 0 ? a : a * s * exp(b);
    case MT_ZIP_LEAKY_RELU_BACKWARD: return b > 0 ? a : a * s;
    case MT_ZIP_HARDTANH_BACKWARD: return b <= s || b >= t ? 0.0 : a;
    }
    return NAN;
}

/* Input domains: comparisons and max/min get whole numbers in [-2, 2] so
 * that ties and equalities happen often; relu_backward's b has exact zeros;
 * floor_divide and remainder get both signs, and some b == 0 (NaN or inf
 * for floats, 0 for int64). int64 values stay small enough for a double;
 * bools are 0 and 1. */
static void fill_domain(int op, tt_tensor *a, tt_tensor *b)
{
    if (a->t.dtype == MT_BOOL) {
        tt_fill(a, 0, 1, TT_INTEGERS);
        tt_fill(b, 0, 1, TT_INTEGERS);
        return;
    }
    if (a->t.dtype == MT_INT64) {
        switch (op) {
        case MT_ZIP_POW:
            tt_fill(a, -4, 4, TT_INTEGERS);
            tt_fill(b, -2, 3, TT_INTEGERS); /* negative exponents too */
            break;
        case MT_ZIP_FLOOR_DIVIDE: case MT_ZIP_REMAINDER: case MT_ZIP_BITWISE_AND: case MT_ZIP_BITWISE_OR:
        case MT_ZIP_BITWISE_XOR:
            tt_fill(a, -9, 9, TT_INTEGERS);
            tt_fill(b, -4, 4, TT_INTEGERS); /* b == 0 happens */
            break;
        default:
            tt_fill(a, -4, 4, TT_INTEGERS);
            tt_fill(b, -4, 4, TT_INTEGERS);
            break;
        }
        return;
    }
    switch (op) {
    case MT_ZIP_FLOOR_DIVIDE: case MT_ZIP_REMAINDER:
        if (tt_chance(0.5)) {
            tt_fill(a, -9, 9, TT_INTEGERS);
            tt_fill(b, -4, 4, TT_INTEGERS);
        } else {
            tt_fill(a, -8, 8, TT_SOME_ZEROS);
            tt_fill(b, 0.25, 4, TT_RANDOM_SIGN | TT_SOME_ZEROS);
        }
        break;
    case MT_ZIP_DIV:
        tt_fill(a, -4, 4, 0);
        tt_fill(b, 0.25, 4, TT_RANDOM_SIGN); /* away from 0 */
        break;
    case MT_ZIP_POW:
        tt_fill(a, 0.1, 4, 0); /* positive base */
        tt_fill(b, -3, 3, 0);
        break;
    case MT_ZIP_MAXIMUM: case MT_ZIP_MINIMUM:
    case MT_ZIP_EQ: case MT_ZIP_NE: case MT_ZIP_LT: case MT_ZIP_LE: case MT_ZIP_GT: case MT_ZIP_GE:
        tt_fill(a, -2, 2, TT_INTEGERS);
        tt_fill(b, -2, 2, TT_INTEGERS);
        break;
    case MT_ZIP_RELU_BACKWARD: case MT_ZIP_LEAKY_RELU_BACKWARD: case MT_ZIP_ELU_BACKWARD:
        tt_fill(a, -4, 4, 0);
        tt_fill(b, -2, 2, TT_SOME_ZEROS);
        break;
    case MT_ZIP_HARDTANH_BACKWARD: /* whole numbers: x at the bounds, where the gradient is 0 */
        tt_fill(a, -4, 4, 0);
        tt_fill(b, -3, 3, TT_INTEGERS);
        break;
    case MT_ZIP_GELU_BACKWARD: case MT_ZIP_GELU_TANH_BACKWARD: case MT_ZIP_SILU_BACKWARD:
        tt_fill(a, -4, 4, 0);
        tt_fill(b, -12, 12, TT_SOME_ZEROS); /* both tails */
        break;
    default:
        tt_fill(a, -4, 4, TT_SOME_ZEROS);
        tt_fill(b, -4, 4, TT_SOME_ZEROS);
        break;
    }
}

/* One case: out = op(a, b), a and b broadcasting to out's shape; with
 * `nans`, about 1 in 8 input values is NaN. */
/* Layouts with fast paths (zip.cu): roles for zip_case's tensors, where
 * TRANSPOSED_VIEW makes an input a transposed view of a row-major buffer
 * (what B.T is). */
enum { TRANSPOSED_VIEW = 100 };
static int g_out_role = TT_OUTPUT;
static int g_a_role = TT_INPUT;
static int g_b_role = TT_INPUT;

static tt_tensor zip_input(int dtype, int ndim, const int64_t *shape, int role)
{
    if (role != TRANSPOSED_VIEW || ndim < 2)
        return tt_new(dtype, ndim, shape, role == TRANSPOSED_VIEW ? TT_INPUT : role);
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

static void zip_case(int op, int dtype, int ndim, const int64_t *shape, int a_ndim,
                     const int64_t *a_shape, int b_ndim, const int64_t *b_shape, int nans)
{
    const int out_dtype = is_comparison(op) ? MT_BOOL : dtype;
    if (dtype != MT_FLOAT32 && dtype != MT_FLOAT64)
        nans = 0;
    tt_tensor out = tt_new(out_dtype, ndim, shape, g_out_role);
    tt_tensor a = zip_input(dtype, a_ndim, a_shape, g_a_role);
    tt_tensor b = zip_input(dtype, b_ndim, b_shape, g_b_role);
    fill_domain(op, &a, &b);
    if (nans) {
        tt_plant_nans(&a, 0.125);
        tt_plant_nans(&b, 0.125);
    }
    /* The scalars of the ops that take them (elu's alpha, hardtanh's min
     * and max), exact in the dtype; mt_zip_scalars passes them. */
    const int scalars = op == MT_ZIP_ELU_BACKWARD || op == MT_ZIP_LEAKY_RELU_BACKWARD || op == MT_ZIP_HARDTANH_BACKWARD;
    double s = 0.0, t = 0.0;
    if (op == MT_ZIP_HARDTANH_BACKWARD) {
        s = (double)tt_rand_int(-2, 0);
        t = s + (double)tt_rand_int(1, 3);
    } else if (scalars) {
        s = tt_round(tt_rand_uniform(-3, 3), dtype);
    }
    tt_case("mt_zip %s%s s=%.9g t=%.9g: out %s, a %s, b %s", tt_op_name("zip", op), nans ? " with NaNs" : "", s, t,
            tt_str(&out), tt_str(&a), tt_str(&b));

    /* Reference: walk the output; each input is read at its broadcast index. */
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        int64_t index[MT_MAX_DIMS];
        to_index(i, out.t.shape, out.t.ndim, index);
        double av = tt_at_bcast(&a, index, out.t.ndim);
        double bv = tt_at_bcast(&b, index, out.t.ndim);
        expect[i] = tt_value(zip_ref(op, dtype, av, bv, s, t));
    }

    mt_status st = scalars ? mt_zip_scalars(op, out.t, a.t, b.t, s, t) : mt_zip(op, out.t, a.t, b.t);
    if (tt_expect_ok(st, scalars ? "mt_zip_scalars" : "mt_zip")) {
        tt_check_output(&out, expect);
        tt_expect_unchanged(&a, "a");
        tt_expect_unchanged(&b, "b");
    }
    free(expect);
    tt_free(&out);
    tt_free(&a);
    tt_free(&b);
}

/* A random output shape and two inputs that broadcast to it. */
static void random_zip_case(int op, int dtype, int nans)
{
    int64_t shape[MT_MAX_DIMS], a_shape[MT_MAX_DIMS], b_shape[MT_MAX_DIMS];
    int ndim = tt_random_shape(shape, 0, 4, 600, 0.08);
    int a_ndim = tt_broadcastable_shape(shape, ndim, a_shape);
    int b_ndim = tt_broadcastable_shape(shape, ndim, b_shape);
    zip_case(op, dtype, ndim, shape, a_ndim, a_shape, b_ndim, b_shape, nans);
}

/* A call mt_zip must refuse with MT_ERR_DTYPE, out untouched: an op the
 * dtype does not take, a comparison into a non-bool out, or another op
 * into an out of another dtype than a's. */
static void refused_case(int op, int dtype, int out_dtype, const char *why)
{
    static const int64_t s[] = {3, 4};
    tt_tensor a = tt_new(dtype, 2, s, TT_INPUT), b = tt_new(dtype, 2, s, TT_INPUT);
    tt_tensor out = tt_new(out_dtype, 2, s, TT_OUTPUT);
    tt_fill(&a, 0, 1, TT_INTEGERS);
    tt_fill(&b, 1, 2, TT_INTEGERS);
    tt_case("mt_zip %s refused: a, b %s, out %s (%s)", tt_op_name("zip", op), tt_dtype_name(dtype),
            tt_dtype_name(out_dtype), why);
    tt_expect_error(mt_zip(op, out.t, a.t, b.t), MT_ERR_DTYPE, "mt_zip", &out);
    tt_free(&a);
    tt_free(&b);
    tt_free(&out);
}

/* out = op(a, b) on exact int64 arrays against zip_ref_i64, which the
 * double reference cannot carry beyond 2^53. */
static void exact_zip(int op, const int64_t *a, const int64_t *b, int n)
{
    tt_case("mt_zip %s exact int64", tt_op_name("zip", op));
    const int out_dtype = is_comparison(op) ? MT_BOOL : MT_INT64;
    mt_tensor x = tt_raw_1d(MT_INT64, n, a), y = tt_raw_1d(MT_INT64, n, b), z = tt_raw_1d(out_dtype, n, NULL);
    int64_t got[32];
    uint8_t got_b[32];
    if (tt_expect_ok(mt_zip(op, z, x, y), "mt_zip") && tt_raw_read(&z, out_dtype == MT_BOOL ? (void *)got_b : got))
        for (int i = 0; i < n; ++i) {
            char what[96];
            snprintf(what, sizeof what, "%s(%" PRId64 ", %" PRId64 ")", tt_op_name("zip", op), a[i], b[i]);
            tt_expect_i64(what, out_dtype == MT_BOOL ? got_b[i] : got[i], zip_ref_i64(op, a[i], b[i]));
        }
    tt_raw_free(&x);
    tt_raw_free(&y);
    tt_raw_free(&z);
}

/* The int64 edges, and the signs of float floor_divide and remainder. */
static void exact_cases(void)
{
    const int64_t mn = INT64_MIN, mx = INT64_MAX;
    /* Every op on pairs of extremes, small numbers of both signs and 0. */
    static const int64_t vals[] = {INT64_MIN, INT64_MIN + 1, -7, -2, -1, 0, 1, 2, 3, 7, INT64_MAX - 1, INT64_MAX};
    enum { NV = sizeof vals / sizeof vals[0] };
    int64_t a[NV * NV], b[NV * NV];
    for (int i = 0; i < NV; ++i)
        for (int j = 0; j < NV; ++j) {
            a[i * NV + j] = vals[i];
            b[i * NV + j] = vals[j];
        }
    for (int op = 0; op < MT_ZIP_OP_COUNT; ++op) {
        if (!zip_takes(op, MT_INT64))
            continue;
        for (int k = 0; k < NV * NV; k += 24) /* exact_zip takes at most 32 */
            exact_zip(op, a + k, b + k, k + 24 <= NV * NV ? 24 : NV * NV - k);
    }
    /* The stated cases, by hand: floor division rounds toward -inf, the
     * remainder has the divisor's sign, by zero gives 0 (no trap), and
     * INT64_MIN // -1 wraps (the division that traps in C). */
    {
        const int64_t x[] = {7, -7, 7, -7, 5, mn, mn, mn, mx, mn};
        const int64_t y[] = {2, 2, -2, -2, 0, -1, 1, 3, -1, 0};
        const int64_t q[] = {3, -4, -4, 3, 0, mn, mn, -3074457345618258603, -mx, 0};
        const int64_t r[] = {1, 1, -1, -1, 0, 0, 0, 1, 0, 0};
        for (int i = 0; i < 10; ++i) {
            tt_case("int64 %" PRId64 " // %" PRId64 " and %%", x[i], y[i]);
            tt_expect_i64("floor_divide", zip_ref_i64(MT_ZIP_FLOOR_DIVIDE, x[i], y[i]), q[i]);
            tt_expect_i64("remainder", zip_ref_i64(MT_ZIP_REMAINDER, x[i], y[i]), r[i]);
        }
        exact_zip(MT_ZIP_FLOOR_DIVIDE, x, y, 10);
        exact_zip(MT_ZIP_REMAINDER, x, y, 10);
        const int64_t p[] = {2, 2, 3, -1, 1, 2, 0, -2};
        const int64_t e[] = {63, 64, 41, -3, -5, -1, -1, 63};
        exact_zip(MT_ZIP_POW, p, e, 8);
        const int64_t w[] = {mx, mn, mx};
        const int64_t one[] = {1, -1, 2};
        exact_zip(MT_ZIP_ADD, w, one, 3);
        exact_zip(MT_ZIP_SUB, w, one, 3);
        exact_zip(MT_ZIP_MUL, w, one, 3);
    }
    /* Floats: Python's // and %, signs and b == 0. */
    {
        const double x[] = {1.0, -7.5, 7.5, -7.5, 7.5, 1.0, -1.0, 0.0, 3.0, -0.0};
        const double y[] = {0.1, 2.0, -2.0, -2.0, 2.0, 0.0, 0.0, 0.0, INFINITY, 5.0};
        const double q[] = {9.0, -4.0, -4.0, 3.0, 3.0, INFINITY, -INFINITY, NAN, 0.0, -0.0};
        const double r[] = {0.09999999999999995, 0.5, -0.5, -1.5, 1.5, NAN, NAN, NAN, 3.0, 0.0};
        for (int t = 0; t < 2; ++t) {
            const int dtype = t ? MT_FLOAT64 : MT_FLOAT32;
            for (int op = MT_ZIP_FLOOR_DIVIDE; op <= MT_ZIP_REMAINDER; ++op) {
                static const int64_t s10[] = {10};
                tt_tensor ta = tt_new(dtype, 1, s10, TT_CONTIGUOUS), tb = tt_new(dtype, 1, s10, TT_CONTIGUOUS);
                tt_tensor out = tt_new(dtype, 1, s10, TT_OUTPUT);
                tt_expect expect[10];
                for (int i = 0; i < 10; ++i) {
                    ta.host[i] = x[i];
                    tb.host[i] = y[i];
                    expect[i] = tt_value(op == MT_ZIP_FLOOR_DIVIDE ? q[i] : (dtype == MT_FLOAT32 && i == 0)
                                                                            ? py_remainder(1.0, (double)0.1f)
                                                                            : r[i]);
                }
                tt_upload(&ta);
                tt_upload(&tb);
                tt_case("mt_zip %s %s: signs, 1 // 0.1, by zero, by inf", tt_op_name("zip", op), tt_dtype_name(dtype));
                if (tt_expect_ok(mt_zip(op, out.t, ta.t, tb.t), "mt_zip"))
                    tt_check_output(&out, expect);
                tt_free(&ta);
                tt_free(&tb);
                tt_free(&out);
            }
        }
    }
}

int main(void)
{
    tt_init("test_zip");
    const int *dtypes = all_dtypes;

    /* One group per op, named by it ("add"): random cases, fixed broadcasts,
     * then the fast paths, in every dtype that takes the op; the others are
     * refused, and so is a comparison into a float out. */
    for (int op = 0; op < MT_ZIP_OP_COUNT; ++op)
        TT_GROUP("%s", tt_op_name("zip", op)) {
            for (int t = 0; t < 4; ++t) {
                int dtype = dtypes[t];
                if (!zip_takes(op, dtype)) {
                    refused_case(op, dtype, dtype, "the dtype does not take the op");
                    continue;
                }
                if (is_comparison(op))
                    refused_case(op, dtype, dtype == MT_BOOL ? MT_FLOAT32 : dtype, "a comparison's out is bool");
                else if (dtype != MT_BOOL)
                    refused_case(op, dtype, MT_BOOL, "out of another dtype");
                for (int c = 0; c < CASES_PER_OP; ++c)
                    random_zip_case(op, dtype, 0);
                for (int c = 0; c < 2; ++c)
                    random_zip_case(op, dtype, 1); /* NaN in, NaN out; comparisons false (ne true) */

                /* Broadcasts every op must handle whatever the random draw. */
                static const int64_t s0[] = {0}, s1[] = {1}, s34[] = {3, 4}, s4[] = {4}, s31[] = {3, 1},
                                     s14[] = {1, 4}, s234[] = {2, 3, 4}, s203[] = {2, 0, 3}, s13[] = {1, 3},
                                     s1025[] = {1025};
                zip_case(op, dtype, 0, NULL, 0, NULL, 0, NULL, 0);  /* scalars */
                zip_case(op, dtype, 2, s34, 0, NULL, 2, s34, 0);    /* scalar + matrix */
                zip_case(op, dtype, 2, s34, 1, s4, 2, s34, 0);      /* a row over every row */
                zip_case(op, dtype, 2, s34, 2, s31, 2, s14, 0);     /* outer product shape */
                zip_case(op, dtype, 3, s234, 2, s31, 1, s4, 0);     /* rank 3 from ranks 2 and 1 */
                zip_case(op, dtype, 3, s203, 2, s13, 3, s203, 0);   /* empty output, a broadcast */
                zip_case(op, dtype, 1, s0, 1, s1, 1, s0, 0);        /* 1 broadcasts to 0 */
                zip_case(op, dtype, 1, s1025, 1, s1025, 1, s1, 0);  /* odd length */
            }

            /* The fast paths of zip.cu, each operand order (every op, so that a
             * non-commutative one would show a swap): all contiguous (16-byte
             * Packs and the tail after them); a dense block of trailing dims
             * repeated over the leading ones (A + row); a transposed view (A + B.T),
             * with partial 32 x 32 tiles and a batch dim. */
            static const int64_t s1025[] = {1025}, s468[] = {4, 68}, r33[] = {33, 64}, v64[] = {64}, r5[] = {5, 33},
                                 v133[] = {1, 33}, r238[] = {2, 3, 8}, v38[] = {3, 8}, v1[] = {1}, t33[] = {33, 65},
                                 t2[] = {2, 40, 31};
            for (int t = 0; t < 4; ++t) {
                int dtype = dtypes[t];
                if (!zip_takes(op, dtype))
                    continue;
                g_out_role = g_a_role = g_b_role = TT_CONTIGUOUS;
                zip_case(op, dtype, 1, s1025, 1, s1025, 1, s1025, 0);
                zip_case(op, dtype, 2, s468, 2, s468, 2, s468, 0);
                zip_case(op, dtype, 2, r33, 2, r33, 1, v64, 0);
                zip_case(op, dtype, 2, r33, 1, v64, 2, r33, 0);
                zip_case(op, dtype, 2, r5, 2, r5, 2, v133, 0);
                zip_case(op, dtype, 2, r5, 2, v133, 2, r5, 0);
                zip_case(op, dtype, 3, r238, 3, r238, 2, v38, 0);
                zip_case(op, dtype, 3, r238, 1, v1, 3, r238, 0);
                g_b_role = TRANSPOSED_VIEW;
                zip_case(op, dtype, 2, t33, 2, t33, 2, t33, 0);
                zip_case(op, dtype, 3, t2, 3, t2, 3, t2, 0);
                g_a_role = TRANSPOSED_VIEW;
                g_b_role = TT_INPUT;
                g_out_role = TT_OUTPUT;
                zip_case(op, dtype, 2, t33, 2, t33, 2, t33, 0);
                zip_case(op, dtype, 3, t2, 3, t2, 3, t2, 0);
                g_out_role = g_a_role = g_b_role = TT_INPUT;
                g_out_role = TT_OUTPUT;
            }
        }

    TT_GROUP("exact") {
        exact_cases();
    }

    return tt_summary();
}
