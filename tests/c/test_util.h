/*
 * test_util.h: what every direct C test of minitensor shares.
 *
 * A test program reads like a specification: for each case it builds random
 * strided tensors, calls one library function, computes the expected output
 * with a plain C reference loop (walking the output with to_index /
 * index_to_position / broadcast_index from src/indexing.h, the same helpers
 * the kernels use), and compares with tt_expect_close, the one float
 * assertion. tt_summary() prints `N passed, N failed` and gives the exit code.
 *
 *   Seed      MT_TEST_SEED=<n> replays a run (the seed is printed at start).
 *   Verbose   MT_TEST_VERBOSE=1 prints every case name, not only failures.
 *
 * Tensors (tt_tensor) live in a device buffer larger than the view: a random
 * layout may permute the dims (a transposed view), step through them (a
 * sliced view), pad them, start at a non-zero offset and, for inputs, repeat
 * a dim with stride 0 (an expanded, broadcast view). The host keeps a copy of
 * the whole buffer, so a check can also prove that nothing outside an
 * output's view was written.
 *
 * Everything here is `static inline` so that each program simply includes it.
 */
#ifndef MT_TEST_UTIL_H
#define MT_TEST_UTIL_H

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
};
static const double TT_ATOL[MT_DTYPE_COUNT] = {
    [MT_FLOAT32] = 1e-6,
    [MT_FLOAT64] = 1e-13,
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
/* Run state, cases and the summary                                          */
/* ======================================================================== */

#define TT_MAX_REPORTS 6 /* mismatches printed per case; the rest are counted */

static struct {
    const char *program;
    uint64_t seed;
    uint64_t rng;
    int verbose;
    int passed, failed;
    int in_case, case_failed, case_reports;
    char case_name[1024];
    int64_t mem_start;
} tt;

static inline void tt_case_end(void);

/* Starts a case (ending the previous one). The name should say everything
 * needed to recognise the case: op, dtype, shapes, strides, offsets. */
static inline void tt_case(const char *fmt, ...)
{
    if (tt.in_case)
        tt_case_end();
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tt.case_name, sizeof tt.case_name, fmt, ap);
    va_end(ap);
    tt.in_case = 1;
    tt.case_failed = 0;
    tt.case_reports = 0;
    if (tt.verbose)
        printf("case: %s\n", tt.case_name);
}

static inline void tt_case_end(void)
{
    if (!tt.in_case)
        return;
    if (tt.case_failed) {
        tt.failed++;
        if (tt.case_reports > TT_MAX_REPORTS)
            printf("  ... %d more mismatches in this case\n", tt.case_reports - TT_MAX_REPORTS);
    } else {
        tt.passed++;
    }
    tt.in_case = 0;
}

/* Records a failure of the current case and prints why (the first few). */
static inline void tt_fail(const char *fmt, ...)
{
    if (!tt.in_case)
        tt_case("(outside any case)");
    if (!tt.case_failed)
        printf("FAIL %s: %s\n", tt.program, tt.case_name);
    tt.case_failed = 1;
    if (++tt.case_reports > TT_MAX_REPORTS)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("  ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

/* A plain condition (statuses, counts, strings: anything that is not a float
 * comparison). Returns cond so a test can stop a case early. */
#define TT_CHECK(cond, ...)                                                  \
    ((cond) ? 1 : (tt_fail("line %d: %s: ", __LINE__, #cond),               \
                   tt_fail_more(__VA_ARGS__), 0))

static inline void tt_fail_more(const char *fmt, ...)
{
    if (tt.case_reports > TT_MAX_REPORTS)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("    ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

/* ======================================================================== */
/* Random numbers: splitmix64, seeded from MT_TEST_SEED                      */
/* ======================================================================== */

static inline uint64_t tt_rand_u64(void)
{
    uint64_t z = (tt.rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform integer in [lo, hi] (inclusive). */
static inline int64_t tt_rand_int(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(tt_rand_u64() % (uint64_t)(hi - lo + 1));
}

/* Uniform double in [lo, hi). */
static inline double tt_rand_uniform(double lo, double hi)
{
    return lo + (hi - lo) * ((double)(tt_rand_u64() >> 11) * 0x1.0p-53);
}

/* True with probability p. */
static inline int tt_chance(double p)
{
    return tt_rand_uniform(0.0, 1.0) < p;
}

/* One element of a list. */
#define TT_PICK(array) ((array)[tt_rand_int(0, (int64_t)(sizeof(array) / sizeof((array)[0])) - 1)])

/* ======================================================================== */
/* Start and end of a program                                               */
/* ======================================================================== */

static inline void tt_init(const char *program)
{
    tt.program = program;
    const char *s = getenv("MT_TEST_SEED");
    if (s && *s)
        tt.seed = strtoull(s, NULL, 0);
    else
        tt.seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    tt.rng = tt.seed;
    const char *v = getenv("MT_TEST_VERBOSE");
    tt.verbose = v && *v && strcmp(v, "0") != 0;
    printf("%s: seed %" PRIu64 " (replay with MT_TEST_SEED=%" PRIu64 "), backend %s\n",
           program, tt.seed, tt.seed, mt_backend_name());
    fflush(stdout);
    mt_status st = mt_init();
    if (st != MT_OK) {
        printf("%s: mt_init failed (status %d): %s\n", program, (int)st, mt_last_error());
        printf("0 passed, 1 failed\n");
        exit(1);
    }
    tt.mem_start = -1;
    mt_memory_in_use(&tt.mem_start);
}

/* Ends the last case, checks that every mt_malloc of the run was freed (the
 * library's own temporaries included), prints `N passed, N failed` and
 * returns the exit status for main. */
static inline int tt_summary(void)
{
    tt_case("every device allocation of the run is freed");
    int64_t now = -1;
    if (TT_CHECK(mt_memory_in_use(&now) == MT_OK, "%s", mt_last_error()))
        TT_CHECK(now == tt.mem_start, "mt_memory_in_use: %" PRId64 " bytes at start, %" PRId64 " at end",
                 tt.mem_start, now);
    tt_case_end();
    printf("%d passed, %d failed\n", tt.passed, tt.failed);
    fflush(stdout);
    return tt.failed ? 1 : 0;
}

/* ======================================================================== */
/* Statuses                                                                  */
/* ======================================================================== */

static inline const char *tt_status_name(int s)
{
    static const char *names[] = {"MT_OK", "MT_ERR_INVALID_ARGUMENT", "MT_ERR_SHAPE", "MT_ERR_DIM",
                                  "MT_ERR_DTYPE", "MT_ERR_OUT_OF_MEMORY", "MT_ERR_CUDA",
                                  "MT_ERR_NO_DEVICE"};
    return s >= 0 && s < (int)(sizeof names / sizeof names[0]) ? names[s] : "(unknown status)";
}

/* A call that must succeed. */
static inline int tt_expect_ok(mt_status st, const char *func)
{
    if (st == MT_OK)
        return 1;
    tt_fail("%s returned %s: %s", func, tt_status_name(st), mt_last_error());
    return 0;
}

/* The library's name of an op ("exp", "add", ...), never NULL. */
static inline const char *tt_op_name(const char *family, int op)
{
    const char *name = mt_op_name(family, op);
    return name ? name : "(unnamed op)";
}

static inline const char *tt_dtype_name(int dtype)
{
    return dtype == MT_FLOAT32 ? "f32" : dtype == MT_FLOAT64 ? "f64" : "bad-dtype";
}

static inline size_t tt_itemsize(int dtype)
{
    return dtype == MT_FLOAT64 ? sizeof(double) : sizeof(float);
}

/* A value as the dtype stores it. */
static inline double tt_round(double v, int dtype)
{
    return dtype == MT_FLOAT32 ? (double)(float)v : v;
}

/* ======================================================================== */
/* Random shapes                                                             */
/* ======================================================================== */

/* A shape of rank in [rmin, rmax] with at most `max_numel` elements. Sizes
 * favour 1 and odd numbers; with probability p_empty one dim is 0. */
static inline int tt_random_shape(int64_t *shape, int rmin, int rmax, int64_t max_numel, double p_empty)
{
    static const int64_t sizes[] = {1, 1, 2, 3, 3, 4, 5, 7, 8, 9, 13};
    int ndim = (int)tt_rand_int(rmin, rmax);
    int64_t numel = 1;
    for (int d = 0; d < ndim; ++d) {
        int64_t s = TT_PICK(sizes);
        while (s > 1 && numel * s > max_numel)
            s = s / 2;
        shape[d] = s;
        numel *= s;
    }
    if (ndim > 0 && tt_chance(p_empty))
        shape[tt_rand_int(0, ndim - 1)] = 0;
    return ndim;
}

/* A shape that broadcasts (NumPy rules) to `big`: possibly fewer leading
 * dims, and some dims 1 where big has another size. */
static inline int tt_broadcastable_shape(const int64_t *big, int big_ndim, int64_t *shape)
{
    int ndim = tt_chance(0.3) ? (int)tt_rand_int(0, big_ndim) : big_ndim;
    int lead = big_ndim - ndim;
    for (int d = 0; d < ndim; ++d)
        shape[d] = tt_chance(0.3) ? 1 : big[d + lead];
    return ndim;
}

static inline int64_t tt_numel(const mt_tensor *t)
{
    return shape_numel(t->shape, t->ndim);
}

/* Row-major ordinal of a multi-index (the inverse of to_index). */
static inline int64_t tt_ordinal(const int64_t *index, const int64_t *shape, int ndim)
{
    int64_t o = 0;
    for (int d = 0; d < ndim; ++d)
        o = o * shape[d] + index[d];
    return o;
}

/* ======================================================================== */
/* Strided test tensors                                                      */
/* ======================================================================== */

typedef struct {
    mt_tensor t;  /* the view the library sees                          */
    double *host; /* what the whole device buffer holds, as doubles     */
    int64_t cap;  /* elements in the device buffer                      */
} tt_tensor;

enum {
    TT_INPUT = 0,       /* random layout, may broadcast with stride 0       */
    TT_OUTPUT = 1,      /* random layout, every element written once        */
    TT_CONTIGUOUS = 2,  /* plain row-major, offset 0                        */
};

/* Any value the library would never compute: fills outputs before a call. */
#define TT_POISON (-1234.5)

/* A random layout for a view of `shape`:
 *   - the storage is row-major over the dims taken in a random order
 *     (permuted, e.g. a transpose);
 *   - each dim may be stepped (a slice x[::2]) and padded;
 *   - the view may start at a non-zero offset;
 *   - an input may repeat a dim with stride 0 (an expanded view);
 *   - a size-1 dim may carry any stride, since it is never stepped.
 * Sets strides and offset, returns the buffer length in elements. */
static inline int64_t tt_random_layout(int ndim, const int64_t *shape, int role,
                                       int64_t *strides, int64_t *offset)
{
    int perm[MT_MAX_DIMS], step[MT_MAX_DIMS], start[MT_MAX_DIMS];
    int64_t base[MT_MAX_DIMS], storage_stride[MT_MAX_DIMS];
    int plain = role == TT_CONTIGUOUS || tt_chance(0.25);
    for (int d = 0; d < ndim; ++d)
        perm[d] = d;
    if (!plain && tt_chance(0.5)) /* permuted / transposed */
        for (int d = ndim - 1; d > 0; --d) {
            int j = (int)tt_rand_int(0, d), tmp = perm[d];
            perm[d] = perm[j];
            perm[j] = tmp;
        }
    for (int d = 0; d < ndim; ++d) {
        step[d] = !plain && tt_chance(0.3) ? (int)tt_rand_int(2, 3) : 1; /* sliced */
        int pad = !plain && tt_chance(0.3) ? (int)tt_rand_int(1, 2) : 0;
        start[d] = pad ? (int)tt_rand_int(0, pad) : 0;
        int64_t span = shape[d] > 0 ? (shape[d] - 1) * step[d] + 1 : 1;
        base[d] = span + pad;
    }
    int64_t size = 1;
    for (int k = ndim - 1; k >= 0; --k) {
        storage_stride[perm[k]] = size;
        size *= base[perm[k]];
    }
    int64_t lead = role != TT_CONTIGUOUS && tt_chance(0.5) ? tt_rand_int(1, 5) : 0;
    *offset = lead;
    for (int d = 0; d < ndim; ++d) {
        strides[d] = storage_stride[d] * step[d];
        *offset += start[d] * storage_stride[d];
    }
    if (role == TT_CONTIGUOUS)
        return size;
    for (int d = 0; d < ndim; ++d) {
        if (shape[d] == 1 && tt_chance(0.3))
            strides[d] = tt_chance(0.5) ? 0 : 1000003; /* never used: any stride is fine */
        else if (role == TT_INPUT && shape[d] > 1 && tt_chance(0.15))
            strides[d] = 0; /* expanded: every index reads the same element */
    }
    return lead + size + (tt_chance(0.3) ? tt_rand_int(1, 3) : 0);
}

/* The position of a multi-index of x's own shape in x's buffer. */
static inline int64_t tt_pos(const tt_tensor *x, const int64_t *index)
{
    return x->t.offset + index_to_position(index, x->t.strides, x->t.ndim);
}

/* The value of x at a multi-index of its own shape. */
static inline double tt_at(const tt_tensor *x, const int64_t *index)
{
    return x->host[tt_pos(x, index)];
}

/* The value of x (which broadcasts to a bigger shape) at an index of the big
 * shape: what an elementwise kernel reads for that output element. */
static inline double tt_at_bcast(const tt_tensor *x, const int64_t *big_index, int big_ndim)
{
    int64_t index[MT_MAX_DIMS];
    broadcast_index(big_index, big_ndim, x->t.shape, x->t.ndim, index);
    return tt_at(x, index);
}

/* The value of x at ordinal i of its own shape (row-major). */
static inline double tt_at_ordinal(const tt_tensor *x, int64_t i)
{
    return x->host[ordinal_to_position(i, &x->t)];
}

/* Writes host[] into the device buffer. */
static inline int tt_upload(tt_tensor *x)
{
    size_t item = tt_itemsize(x->t.dtype), bytes = (size_t)x->cap * item;
    char *buf = malloc(bytes ? bytes : 1);
    for (int64_t i = 0; i < x->cap; ++i) {
        if (x->t.dtype == MT_FLOAT32)
            ((float *)buf)[i] = (float)x->host[i];
        else
            ((double *)buf)[i] = x->host[i];
    }
    mt_status st = mt_memcpy_h2d(x->t.data, buf, bytes);
    free(buf);
    return tt_expect_ok(st, "mt_memcpy_h2d");
}

/* Reads the whole device buffer into `dst` (cap doubles). */
static inline int tt_download(const tt_tensor *x, double *dst)
{
    size_t item = tt_itemsize(x->t.dtype), bytes = (size_t)x->cap * item;
    char *buf = malloc(bytes ? bytes : 1);
    mt_status st = mt_memcpy_d2h(buf, x->t.data, bytes);
    for (int64_t i = 0; i < x->cap; ++i)
        dst[i] = x->t.dtype == MT_FLOAT32 ? (double)((float *)buf)[i] : ((double *)buf)[i];
    free(buf);
    return tt_expect_ok(st, "mt_memcpy_d2h");
}

/* A tensor of `shape` in a fresh device buffer, with a layout for `role`,
 * every buffer element set to TT_POISON (fill it with tt_fill). */
static inline tt_tensor tt_new(int dtype, int ndim, const int64_t *shape, int role)
{
    tt_tensor x;
    memset(&x, 0, sizeof x);
    x.t.dtype = dtype;
    x.t.ndim = ndim;
    for (int d = 0; d < ndim; ++d)
        x.t.shape[d] = shape[d];
    x.cap = tt_random_layout(ndim, shape, role, x.t.strides, &x.t.offset);
    x.host = malloc((size_t)(x.cap ? x.cap : 1) * sizeof(double));
    for (int64_t i = 0; i < x.cap; ++i)
        x.host[i] = TT_POISON;
    mt_status st = mt_malloc(&x.t.data, (size_t)(x.cap ? x.cap : 1) * tt_itemsize(dtype));
    if (tt_expect_ok(st, "mt_malloc"))
        tt_upload(&x);
    return x;
}

static inline void tt_free(tt_tensor *x)
{
    if (x->t.data)
        tt_expect_ok(mt_free(x->t.data), "mt_free");
    free(x->host);
    memset(x, 0, sizeof *x);
}

/* How tt_fill draws values. */
enum {
    TT_SOME_ZEROS = 1, /* about 1 in 8 values exactly 0                        */
    TT_INTEGERS = 2,   /* whole numbers in [lo, hi]: ties and equalities happen */
    TT_RANDOM_SIGN = 4 /* |value| in [lo, hi], sign random                      */
};

/* Fills the whole buffer (view and padding) with values drawn uniformly from
 * [lo, hi), rounded to the dtype, and uploads it. */
static inline void tt_fill(tt_tensor *x, double lo, double hi, int flags)
{
    for (int64_t i = 0; i < x->cap; ++i) {
        double v = (flags & TT_INTEGERS) ? (double)tt_rand_int((int64_t)lo, (int64_t)hi)
                                         : tt_rand_uniform(lo, hi);
        if ((flags & TT_RANDOM_SIGN) && tt_chance(0.5))
            v = -v;
        if ((flags & TT_SOME_ZEROS) && tt_chance(0.125))
            v = 0.0;
        x->host[i] = tt_round(v, x->t.dtype);
    }
    tt_upload(x);
}

/* Replaces about a fraction p of the buffer's values with NaN, uploads. */
static inline void tt_plant_nans(tt_tensor *x, double p)
{
    for (int64_t i = 0; i < x->cap; ++i)
        if (tt_chance(p))
            x->host[i] = NAN;
    tt_upload(x);
}

/* Sets the whole buffer to one value and uploads it. */
static inline void tt_fill_value(tt_tensor *x, double v)
{
    for (int64_t i = 0; i < x->cap; ++i)
        x->host[i] = tt_round(v, x->t.dtype);
    tt_upload(x);
}

/* "f32 (3,4) strides (1,3) offset 2": for case names. Rotates through a few
 * static buffers so that several can appear in one printf. */
static inline const char *tt_str(const tt_tensor *x)
{
    static char bufs[8][256];
    static int next;
    char *b = bufs[next++ % 8];
    int n = snprintf(b, 256, "%s (", tt_dtype_name(x->t.dtype));
    for (int d = 0; d < x->t.ndim; ++d)
        n += snprintf(b + n, 256 - n, "%s%" PRId64, d ? "," : "", x->t.shape[d]);
    n += snprintf(b + n, 256 - n, ") strides (");
    for (int d = 0; d < x->t.ndim; ++d)
        n += snprintf(b + n, 256 - n, "%s%" PRId64, d ? "," : "", x->t.strides[d]);
    snprintf(b + n, 256 - n, ") offset %" PRId64, x->t.offset);
    return b;
}

static inline const char *tt_index_str(const int64_t *index, int ndim)
{
    static char bufs[4][128];
    static int next;
    char *b = bufs[next++ % 4];
    int n = snprintf(b, 128, "(");
    for (int d = 0; d < ndim; ++d)
        n += snprintf(b + n, 128 - n, "%s%" PRId64, d ? "," : "", index[d]);
    snprintf(b + n, 128 - n, ")");
    return b;
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

#endif /* MT_TEST_UTIL_H */
