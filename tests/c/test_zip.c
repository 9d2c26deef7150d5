/*
 * test_zip.c: mt_zip, every mt_zip_op in float32 and float64, with NumPy
 * broadcasting of both inputs (fewer leading dims, size-1 dims, stride-0
 * expanded views), non-contiguous inputs and outputs, rank 0 and empty
 * tensors.
 *
 *   make build/tests/emu/test_zip && build/tests/emu/test_zip
 *   MT_TEST_SEED=42 build/tests/emu/test_zip     (replay a run)
 */
#include "test_util.h"

#define CASES_PER_OP 24 /* random cases per (op, dtype) */

/* The specification of every op: out = f(a, b), in double. NaN follows IEEE
 * arithmetic and comparisons; maximum and minimum let a NaN win (NumPy). */
static double zip_ref(int op, double a, double b)
{
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
    }
    return NAN;
}

/* Input domains: comparisons and max/min get whole numbers in [-2, 2] so
 * that ties and equalities happen often; relu_backward's b has exact zeros. */
static void fill_domain(int op, tt_tensor *a, tt_tensor *b)
{
    switch (op) {
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
    case MT_ZIP_RELU_BACKWARD:
        tt_fill(a, -4, 4, 0);
        tt_fill(b, -2, 2, TT_SOME_ZEROS);
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
    tt_tensor out = tt_new(dtype, ndim, shape, g_out_role);
    tt_tensor a = zip_input(dtype, a_ndim, a_shape, g_a_role);
    tt_tensor b = zip_input(dtype, b_ndim, b_shape, g_b_role);
    fill_domain(op, &a, &b);
    if (nans) {
        tt_plant_nans(&a, 0.125);
        tt_plant_nans(&b, 0.125);
    }
    tt_case("mt_zip %s%s: out %s, a %s, b %s", tt_op_name("zip", op), nans ? " with NaNs" : "", tt_str(&out),
            tt_str(&a), tt_str(&b));

    /* Reference: walk the output; each input is read at its broadcast index. */
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        int64_t index[MT_MAX_DIMS];
        to_index(i, out.t.shape, out.t.ndim, index);
        double av = tt_at_bcast(&a, index, out.t.ndim);
        double bv = tt_at_bcast(&b, index, out.t.ndim);
        expect[i] = tt_value(zip_ref(op, av, bv));
    }

    if (tt_expect_ok(mt_zip(op, out.t, a.t, b.t), "mt_zip")) {
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

int main(void)
{
    tt_init("test_zip");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};

    /* One group per op, named by it ("add"): random cases, fixed broadcasts,
     * then the fast paths. */
    for (int op = 0; op < MT_ZIP_OP_COUNT; ++op)
        TT_GROUP("%s", tt_op_name("zip", op)) {
            for (int t = 0; t < 2; ++t) {
                int dtype = dtypes[t];
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
            for (int t = 0; t < 2; ++t) {
                int dtype = dtypes[t];
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

    return tt_summary();
}
