/*
 * tt_harness.h: the test harness: cases, failures, the summary, random numbers
 * (seeded from MT_TEST_SEED), statuses and names.
 * Part of tests/c/test_util.h, which every test program includes.
 */
#ifndef MT_TT_HARNESS_H
#define MT_TT_HARNESS_H

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

/* One line of a failure report: indent, the formatted message, newline. */
static inline void tt_print_line(const char *indent, const char *fmt, va_list ap)
{
    printf("%s", indent);
    vprintf(fmt, ap);
    printf("\n");
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
    tt_print_line("  ", fmt, ap);
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
    tt_print_line("    ", fmt, ap);
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
                                  "MT_ERR_NO_DEVICE", "MT_ERR_INTERRUPTED", "MT_ERR_NOT_IMPLEMENTED"};
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

#endif /* MT_TT_HARNESS_H */
