/*
 * tt_harness.h: the test harness: run state, cases, failures, random
 * numbers, statuses and names; tt_groups.h adds the start and end of a
 * program and its groups (each in a child process). Both are part of
 * tests/c/test_util.h, which every test program includes.
 *
 * A program is a list of groups, each a block of cases:
 *
 *     int main(void)
 *     {
 *         tt_init("test_matmul");
 *         TT_GROUP("tiled f32") {
 *             ... tt_case(...), calls, checks ...
 *         }
 *         return tt_summary();
 *     }
 *
 * Each group runs in a child process (fork), which initialises the library
 * itself; the parent never touches the library or the device (a CUDA context
 * does not survive a fork). A group that crashes (a signal) or hangs (no end
 * within MT_TEST_TIMEOUT seconds, default 300) counts as one failure, says
 * so ("crashed: SIGSEGV in group 'tiled f32'"), and the other groups run on.
 * Cases passed before the crash still count.
 *
 * The environment:
 *   MT_TEST_SEED=n     the seed (default 1: every run draws the same cases);
 *   MT_TEST_RANDOM=1   a seed from the clock, printed, for a run of its own;
 *   MT_TEST_FILTER=f   only some groups and cases. f is GROUP or GROUP/CASE;
 *                      each part is a substring of the name, or a glob (with
 *                      *, ? or [...]) that must match the whole name; an
 *                      empty part matches everything ("/M=65" picks cases of
 *                      every group). A filter that matches no group (or no
 *                      case) is a failure, so that a misspelt filter never
 *                      passes.
 *   MT_TEST_VERBOSE=1  print every group and case, not only failures;
 *   MT_TEST_FORK=0     run the groups in this process, one after another
 *                      (for gdb; a crash then ends the program).
 *   MT_TEST_ALL_CASES=1  every case on the emulator too: the programs whose
 *                      kernels take seconds a launch under the emulator's
 *                      full checks run a few cases there, the whole list on
 *                      the GPU (tt_all_cases; each program says what it keeps).
 *
 * Every group draws its random numbers from the seed and its own name, so
 * a group gives the same cases whether it runs alone (a filter) or with
 * the others. Each failure prints the command that replays its group.
 */
#ifndef MT_TT_HARNESS_H
#define MT_TT_HARNESS_H

#include <errno.h>
#include <fnmatch.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "indexing.h"
#include "minitensor.h"

/* ======================================================================== */
/* Run state, groups, cases and the summary                                  */
/* ======================================================================== */

#define TT_MAX_REPORTS 6        /* mismatches printed per case; the rest are counted */
#define TT_DEFAULT_SEED 1       /* MT_TEST_SEED when unset (and no MT_TEST_RANDOM) */
#define TT_DEFAULT_TIMEOUT 300  /* seconds a group may run (MT_TEST_TIMEOUT) */

/* What a group's cases add up to; in a child process, in memory shared with
 * the parent, so that the counts survive a crash. */
typedef struct {
    int passed, failed;
    int cases_matched; /* cases the filter's CASE part selected */
} tt_counts;

static struct {
    const char *program;
    char exe[512];          /* how to run this program again (the replay line) */
    uint64_t seed;
    uint64_t rng;
    int verbose, fork;
    int timeout;
    int group_lines;        /* MT_TEST_GROUP_LINES: one machine-readable line per group (the grader) */
    char group_filter[256], case_filter[256];
    int has_filter;
    int passed, failed;     /* the totals over the groups */
    int groups_run, cases_matched;
    char group[256];        /* the running group */
    tt_counts *counts;      /* the running group's counts */
    int in_case, case_failed, case_reports, case_selected;
    char case_name[1024];
    int64_t mem_start;
} tt;

static inline void tt_case_end(void);
static inline void tt_fail(const char *fmt, ...);

/* Does `name` match one part of the filter: a substring, or a glob of the
 * whole name when the pattern has glob characters; "" matches everything. */
static inline int tt_matches(const char *pattern, const char *name)
{
    if (pattern[0] == '\0')
        return 1;
    if (strpbrk(pattern, "*?["))
        return fnmatch(pattern, name, 0) == 0;
    return strstr(name, pattern) != NULL;
}

/* Starts a case (ending the previous one). The name should say everything
 * needed to recognise the case: op, dtype, shapes, strides, offsets. A case
 * the filter's CASE part does not select runs, but is neither counted nor
 * reported. */
static inline void tt_case(const char *fmt, ...)
{
    if (tt.in_case)
        tt_case_end();
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tt.case_name, sizeof tt.case_name, fmt, ap);
    va_end(ap);
    if (!tt.counts) {
        /* Only a group's cases are counted (tt_groups.h): a case outside
         * one would pass or fail unseen, so it is a failure of its own. */
        printf("FAIL %s: case \"%s\" runs outside any TT_GROUP, so its result would not be counted\n",
               tt.program, tt.case_name);
        tt.failed++;
    }
    tt.in_case = 1;
    tt.case_failed = 0;
    tt.case_reports = 0;
    tt.case_selected = tt_matches(tt.case_filter, tt.case_name);
    if (tt.case_selected && tt.counts)
        tt.counts->cases_matched++;
    if (tt.verbose && tt.case_selected)
        printf("case: %s\n", tt.case_name);
}

static inline void tt_case_end(void)
{
    if (!tt.in_case)
        return;
    tt.in_case = 0;
    if (!tt.case_selected || !tt.counts)
        return;
    if (tt.case_failed) {
        tt.counts->failed++;
        if (tt.case_reports > TT_MAX_REPORTS)
            printf("  ... %d more mismatches in this case\n", tt.case_reports - TT_MAX_REPORTS);
    } else {
        tt.counts->passed++;
    }
}

/* One line of a failure report: indent, the formatted message, newline. */
static inline void tt_print_line(const char *indent, const char *fmt, va_list ap)
{
    printf("%s", indent);
    vprintf(fmt, ap);
    printf("\n");
}

/* The command that runs the current group again with the same cases. */
static inline void tt_print_replay(void)
{
    printf("  replay: MT_TEST_SEED=%" PRIu64 " MT_TEST_FILTER='%s' %s\n", tt.seed, tt.group, tt.exe);
}

/* Records a failure of the current case and prints why (the first few). */
static inline void tt_fail(const char *fmt, ...)
{
    if (!tt.in_case)
        tt_case("(outside any case)");
    if (!tt.case_selected)
        return;
    if (!tt.case_failed) {
        printf("FAIL %s: %s\n", tt.program, tt.case_name);
        tt_print_replay();
    }
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
    if (!tt.case_selected || tt.case_reports > TT_MAX_REPORTS)
        return;
    va_list ap;
    va_start(ap, fmt);
    tt_print_line("    ", fmt, ap);
    va_end(ap);
}

/* ======================================================================== */
/* Random numbers: splitmix64, per group (tt_group_rng)                       */
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

/* Does the dtype rule of an op-list entry (minitensor.h: "fi", "fib>b")
 * take the dtype? f: float32 and float64, i: int64, b: bool. */
static inline int tt_rule_takes(const char *rule, int dtype)
{
    const char letter = dtype == MT_INT64 ? 'i' : dtype == MT_BOOL ? 'b' : 'f';
    for (; *rule != '\0' && *rule != '>'; ++rule)
        if (*rule == letter)
            return 1;
    return 0;
}

static inline const char *tt_dtype_name(int dtype)
{
    switch (dtype) {
    case MT_FLOAT32: return "f32";
    case MT_FLOAT64: return "f64";
    case MT_INT64: return "i64";
    case MT_BOOL: return "bool";
    default: return "bad-dtype";
    }
}

static inline size_t tt_itemsize(int dtype)
{
    switch (dtype) {
    case MT_FLOAT64: case MT_INT64: return 8;
    case MT_BOOL: return 1;
    default: return 4;
    }
}

/* The specification of a cast to int64 (minitensor.h, "Dtypes"): truncate
 * toward zero, NaN -> 0, saturate beyond the range. */
static inline int64_t tt_to_int64(double v)
{
    if (isnan(v))
        return 0;
    if (v >= 9223372036854775808.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

/* A value as the dtype stores it (a cast, by the library's rules). int64
 * values beyond 2^53 do not survive the trip through a double: tests of
 * such values use exact int64 arrays (tt_raw_*, tt_expect_i64). */
static inline double tt_round(double v, int dtype)
{
    switch (dtype) {
    case MT_FLOAT32: return (double)(float)v;
    case MT_INT64: return (double)tt_to_int64(v);
    case MT_BOOL: return v != 0.0; /* NaN is true */
    default: return v;
    }
}

#endif /* MT_TT_HARNESS_H */
