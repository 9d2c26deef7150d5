/*
 * test_new_output.c: mt_map_new and mt_zip_new (src/new_output.cu), the
 * ops that allocate their result and compute it in one call. Each result is
 * checked against a plain C loop, its buffer is one the library knows (it
 * frees with mt_free, and mt_memory_in_use is back where it was), and every
 * refused call leaves nothing allocated and out.data NULL.
 *
 *   make build/tests/emu/test_new_output && build/tests/emu/test_new_output
 *   MT_TEST_SEED=42 build/tests/emu/test_new_output     (replay a run)
 */
#include "test_util.h"

/* A contiguous result descriptor of shape and dtype, with no memory yet. */
static mt_tensor result_of(int dtype, int ndim, const int64_t *shape)
{
    mt_tensor out;
    memset(&out, 0, sizeof out);
    out.dtype = dtype;
    out.ndim = ndim;
    int64_t step = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        out.shape[d] = shape[d];
        out.strides[d] = step;
        step *= shape[d] > 1 ? shape[d] : 1;
    }
    return out;
}

static int64_t in_use(void)
{
    int64_t bytes = -1;
    tt_expect_ok(mt_memory_in_use(&bytes), "mt_memory_in_use");
    return bytes;
}

/* Reads a new result into a host array of doubles (n elements). */
static double *read_result(const mt_tensor *out, int64_t n)
{
    double *values = malloc((size_t)(n ? n : 1) * sizeof(double));
    size_t item = tt_itemsize(out->dtype);
    unsigned char *raw = malloc((size_t)(n ? n : 1) * item);
    if (n && !tt_expect_ok(mt_memcpy_d2h(raw, out->data, (size_t)n * item), "mt_memcpy_d2h"))
        n = 0;
    for (int64_t i = 0; i < n; ++i)
        values[i] = out->dtype == MT_FLOAT32 ? ((float *)raw)[i] : ((double *)raw)[i];
    free(raw);
    return values;
}

/* One random case of mt_map_new (map: in is a, with scalar) or mt_zip_new (a
 * and b broadcast to the result's shape), against ref elementwise. */
static void new_case(int map, int op, int dtype, double scalar, double (*ref)(double, double))
{
    int64_t shape[MT_MAX_DIMS], bshape[MT_MAX_DIMS];
    const int ndim = tt_random_shape(shape, 0, 4, 3000, 0.1);
    tt_tensor a = tt_new(dtype, ndim, shape, TT_INPUT);
    tt_tensor b;
    memset(&b, 0, sizeof b);
    tt_fill(&a, map ? 0.1 : -2, 2, 0);
    if (map) {
        tt_case("mt_map_new(%s, %g) in %s", tt_op_name("map", op), scalar, tt_str(&a));
    } else {
        b = tt_new(dtype, tt_broadcastable_shape(shape, ndim, bshape), bshape, TT_INPUT);
        tt_fill(&b, -2, 2, 0);
        tt_case("mt_zip_new(%s) a %s, b %s", tt_op_name("zip", op), tt_str(&a), tt_str(&b));
    }
    const int64_t before = in_use();
    mt_tensor out = result_of(dtype, ndim, shape);
    out.data = (void *)1; /* ignored, overwritten */
    out.offset = 7;
    mt_status st = map ? mt_map_new(op, &out, &a.t, scalar) : mt_zip_new(op, &out, &a.t, &b.t);
    void *data = out.data;
    if (tt_expect_ok(st, map ? "mt_map_new" : "mt_zip_new")) {
        const int64_t n = tt_numel(&out);
        if (n == 0 && data != NULL)
            tt_fail("a result with no element got memory %p", data);
        if (out.offset != 0)
            tt_fail("the result's offset is %lld, expected 0", (long long)out.offset);
        double *got = read_result(&out, n);
        int64_t index[MT_MAX_DIMS];
        for (int64_t i = 0; i < n; ++i) {
            to_index(i, out.shape, out.ndim, index);
            const double want = map ? ref(tt_at(&a, index), scalar)
                                    : ref(tt_at_bcast(&a, index, ndim), tt_at_bcast(&b, index, ndim));
            if (!tt_expect_close("out", got[i], tt_value(want), dtype))
                break;
        }
        free(got);
        if (data)
            tt_expect_ok(mt_free(data), "mt_free");
    }
    if (in_use() != before)
        tt_fail("memory in use went from %lld to %lld bytes", (long long)before, (long long)in_use());
    tt_free(&a);
    tt_free(&b);
}

static double add(double a, double b) { return a + b; }
static double mul(double a, double b) { return a * b; }
static double exp_of(double x, double s) { (void)s; return exp(x); }
static double add_scalar(double x, double s) { return x + s; }

/* A refused call: the status, *data NULL, and no byte left allocated. */
static void refused(const char *what, int want, int map, int op, mt_tensor out, mt_tensor a, mt_tensor b)
{
    tt_case("%s", what);
    const int64_t before = in_use();
    out.data = (void *)1;
    const mt_status st = map ? mt_map_new(op, &out, &a, 2.0) : mt_zip_new(op, &out, &a, &b);
    if ((int)st != want)
        tt_fail("status %s, expected %s", tt_status_name(st), tt_status_name(want));
    if (out.data != NULL)
        tt_fail("out.data is %p after a refused call, expected NULL", out.data);
    if (in_use() != before)
        tt_fail("memory in use went from %lld to %lld bytes", (long long)before, (long long)in_use());
}

int main(void)
{
    tt_init("test_new_output");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    for (int t = 0; t < 2; ++t) {
        TT_GROUP("zip_new %s", tt_dtype_name(dtypes[t])) {
            for (int c = 0; c < 20; ++c) {
                new_case(0, MT_ZIP_ADD, dtypes[t], 0.0, add);
                new_case(0, MT_ZIP_MUL, dtypes[t], 0.0, mul);
            }
        }
        TT_GROUP("map_new %s", tt_dtype_name(dtypes[t])) {
            for (int c = 0; c < 20; ++c) {
                new_case(1, MT_MAP_EXP, dtypes[t], 0.0, exp_of);
                new_case(1, MT_MAP_ADD_SCALAR, dtypes[t], -1.5, add_scalar);
            }
        }
    }
    TT_GROUP("refused") {
        int64_t n = 6, m = 5;
        tt_tensor a = tt_new(MT_FLOAT32, 1, &n, TT_CONTIGUOUS);
        tt_tensor b = tt_new(MT_FLOAT32, 1, &m, TT_CONTIGUOUS);
        tt_fill(&a, -1, 1, 0);
        tt_fill(&b, -1, 1, 0);
        int64_t shape23[] = {2, 3};
        mt_tensor out = result_of(MT_FLOAT32, 1, &n);
        mt_tensor strided = result_of(MT_FLOAT32, 2, shape23);
        strided.strides[0] = 1;
        strided.strides[1] = 2; /* column-major: not a dense row-major result */
        refused("an unknown zip op", MT_ERR_INVALID_ARGUMENT, 0, MT_ZIP_OP_COUNT, out, a.t, a.t);
        refused("shapes that do not broadcast", MT_ERR_SHAPE, 0, MT_ZIP_ADD, out, a.t, b.t);
        refused("a result that is not row-major", MT_ERR_INVALID_ARGUMENT, 0, MT_ZIP_ADD, strided, a.t, a.t);
        mt_tensor rank = out;
        rank.ndim = MT_MAX_DIMS + 1;
        refused("a result of too many dims", MT_ERR_SHAPE, 1, MT_MAP_EXP, rank, a.t, a.t);
        mt_tensor wide = out;
        wide.dtype = MT_FLOAT64;
        refused("a result of another dtype", MT_ERR_DTYPE, 1, MT_MAP_EXP, wide, a.t, a.t);
        tt_case("null descriptors");
        if (mt_zip_new(MT_ZIP_ADD, NULL, &a.t, &a.t) != MT_ERR_INVALID_ARGUMENT)
            tt_fail("a null out was accepted");
        if (mt_zip_new(MT_ZIP_ADD, &out, &a.t, NULL) != MT_ERR_INVALID_ARGUMENT)
            tt_fail("a null b was accepted");
        if (mt_map_new(MT_MAP_EXP, &out, NULL, 0.0) != MT_ERR_INVALID_ARGUMENT)
            tt_fail("a null input was accepted");
        tt_free(&a);
        tt_free(&b);
    }
    return tt_summary();
}
