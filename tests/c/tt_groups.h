/*
 * tt_groups.h: the start and end of a test program and of its groups (see
 * the top of tt_harness.h): tt_init, TT_GROUP (each group in a child
 * process, its crash or hang a failure of its own), tt_summary, and
 * tt_run_self for tests that need a fresh process.
 * Part of tests/c/test_util.h, after tt_harness.h.
 */
#ifndef MT_TT_GROUPS_H
#define MT_TT_GROUPS_H

#include "tt_harness.h"

/* ======================================================================== */
/* Start and end of a program, and of a group                                */
/* ======================================================================== */

static inline int tt_env_int(const char *name, int fallback)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

/* Whether to run a program's whole case list: on the GPU, or on the emulator
 * under MT_TEST_ALL_CASES=1. Programs whose launches the emulator's full
 * checks make slow run only the cases that cover each kernel variant there. */
static inline int tt_all_cases(void)
{
    return strcmp(mt_backend_name(), "emulator") != 0 || tt_env_int("MT_TEST_ALL_CASES", 0);
}

/* This program's path, relative to the working directory when it is below
 * it (build/tests/emu/test_matmul), for the replay lines. */
static inline void tt_find_exe(void)
{
    char path[sizeof tt.exe], cwd[sizeof tt.exe];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) {
        snprintf(tt.exe, sizeof tt.exe, "%s", tt.program);
        return;
    }
    path[n] = '\0';
    size_t len = getcwd(cwd, sizeof cwd) ? strlen(cwd) : 0;
    if (len > 0 && strncmp(path, cwd, len) == 0 && path[len] == '/')
        snprintf(tt.exe, sizeof tt.exe, "%s", path + len + 1);
    else
        snprintf(tt.exe, sizeof tt.exe, "%s", path);
}

/* Reads the environment and prints the seed. Touches no device: each group
 * initialises the library in its own process (see the top of this file). */
static inline void tt_init(const char *program)
{
    tt.program = program;
    tt_find_exe();
    const char *s = getenv("MT_TEST_SEED");
    const char *how = "fixed";
    if (s && *s) {
        tt.seed = strtoull(s, NULL, 0);
        how = "MT_TEST_SEED";
    } else if (tt_env_int("MT_TEST_RANDOM", 0)) {
        tt.seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32) ^ ((uint64_t)getpid() << 16);
        how = "MT_TEST_RANDOM";
    } else {
        tt.seed = TT_DEFAULT_SEED;
    }
    tt.verbose = tt_env_int("MT_TEST_VERBOSE", 0);
    tt.fork = tt_env_int("MT_TEST_FORK", 1);
    tt.timeout = tt_env_int("MT_TEST_TIMEOUT", TT_DEFAULT_TIMEOUT);
    tt.group_lines = tt_env_int("MT_TEST_GROUP_LINES", 0);
    const char *f = getenv("MT_TEST_FILTER");
    tt.has_filter = f && *f;
    if (tt.has_filter) {
        const char *slash = strchr(f, '/');
        size_t glen = slash ? (size_t)(slash - f) : strlen(f);
        snprintf(tt.group_filter, sizeof tt.group_filter, "%.*s", (int)glen, f);
        snprintf(tt.case_filter, sizeof tt.case_filter, "%s", slash ? slash + 1 : "");
    }
    printf("%s: seed %" PRIu64 " (%s; replay with MT_TEST_SEED=%" PRIu64 "), backend %s, kernels %s%s%s%s\n",
           program, tt.seed, how, tt.seed, mt_backend_name(),
           getenv("MINITENSOR_KERNELS") && *getenv("MINITENSOR_KERNELS") ? getenv("MINITENSOR_KERNELS") : "fast",
           tt.has_filter ? ", filter '" : "", tt.has_filter ? f : "", tt.has_filter ? "'" : "");
    fflush(stdout);
}

/* The group's own stream of random numbers: the seed mixed with a hash of
 * its name (FNV-1a). */
static inline uint64_t tt_group_rng(const char *group)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *c = group; *c; ++c)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    return tt.seed ^ h;
}

/* In the process that runs the group: the library, the counts, the memory
 * baseline. 0 when the library cannot start (one failure, reported): the
 * group's body is then skipped. */
static inline int tt_group_start(void)
{
    tt.rng = tt_group_rng(tt.group);
    tt.in_case = 0;
    if (tt.verbose)
        printf("group: %s\n", tt.group);
    mt_status st = mt_init();
    if (st != MT_OK) {
        tt_case("%s: mt_init", tt.group);
        tt_fail("mt_init failed (status %d): %s", (int)st, mt_last_error());
        tt_case_end();
        fflush(stdout);
        return 0;
    }
    tt.mem_start = -1;
    mt_memory_in_use(&tt.mem_start);
    return 1;
}

/* In the process that ran the group: every mt_malloc of the group was freed
 * (the library's own temporaries included). */
static inline void tt_group_finish(void)
{
    tt_case("%s: every device allocation of the group is freed", tt.group);
    int64_t now = -1;
    if (TT_CHECK(mt_memory_in_use(&now) == MT_OK, "%s", mt_last_error()))
        TT_CHECK(now == tt.mem_start, "mt_memory_in_use: %" PRId64 " bytes at start, %" PRId64 " at end",
                 tt.mem_start, now);
    tt_case_end();
    fflush(stdout);
}

/* With MT_TEST_GROUP_LINES=1, one line per group that ran, for the course
 * grader (tools/course_grade.py): "group<TAB>status<TAB>passed<TAB>failed<TAB>name",
 * status "ok", "crashed", "timed out" or "exited"; the counts are the cases
 * the group finished before it ended (a crash's own failure not included),
 * so that the grader can count the cases a crash or a hang never ran. */
static inline void tt_group_line(const char *status, const tt_counts *c)
{
    if (tt.group_lines) {
        printf("group\t%s\t%d\t%d\t%s\n", status, c->passed, c->failed, tt.group);
        fflush(stdout);
    }
}

static inline void tt_add_counts(const tt_counts *c)
{
    tt.passed += c->passed;
    tt.failed += c->failed;
    tt.cases_matched += c->cases_matched;
}

/* "SIGSEGV", ... for the signals a crashing test dies of. */
static inline const char *tt_signal_name(int sig)
{
    static char other[32];
    switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: snprintf(other, sizeof other, "signal %d", sig); return other;
    }
}

/* The parent's side of a forked group: wait, then count a crash or a hang
 * as one failure of the group. */
static inline void tt_wait_group(pid_t child, const tt_counts *shared)
{
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    tt_add_counts(shared);
    const char *why = NULL, *ended = "ok";
    char buf[160];
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
        snprintf(buf, sizeof buf, "timed out after %d s (MT_TEST_TIMEOUT)", tt.timeout);
        why = buf;
        ended = "timed out";
    } else if (WIFSIGNALED(status)) {
        snprintf(buf, sizeof buf, "crashed: %s", tt_signal_name(WTERMSIG(status)));
        why = buf;
        ended = "crashed";
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(buf, sizeof buf, "exited with status %d before the end of the group", WEXITSTATUS(status));
        why = buf;
        ended = "exited";
    }
    tt_group_line(ended, shared);
    if (why) {
        printf("FAIL %s: %s in group '%s'\n", tt.program, why, tt.group);
        tt_print_replay();
        tt.failed++;
        fflush(stdout);
    }
}

/* TT_GROUP's start: 1 where the group's body is to run (the child, or this
 * process with MT_TEST_FORK=0), 0 where it is done (the parent, after the
 * child ended) or not selected by the filter. */
static inline int tt_group_begin(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tt.group, sizeof tt.group, fmt, ap);
    va_end(ap);
    if (!tt_matches(tt.group_filter, tt.group))
        return 0;
    tt.groups_run++;
    if (!tt.fork) {
        static tt_counts local;
        memset(&local, 0, sizeof local);
        tt.counts = &local;
        if (tt_group_start())
            return 1;
        tt_add_counts(tt.counts);
        return 0;
    }
    tt_counts *shared = (tt_counts *)mmap(NULL, sizeof(tt_counts), PROT_READ | PROT_WRITE,
                                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        printf("FAIL %s: mmap for group '%s': %s\n", tt.program, tt.group, strerror(errno));
        tt.failed++;
        return 0;
    }
    memset(shared, 0, sizeof *shared);
    fflush(stdout); /* or the child would print the parent's buffered output again */
    pid_t child = fork();
    if (child < 0) {
        printf("FAIL %s: fork for group '%s': %s\n", tt.program, tt.group, strerror(errno));
        tt.failed++;
        munmap(shared, sizeof *shared);
        return 0;
    }
    if (child == 0) {
        /* Line-buffered: what the group printed before a crash is not lost. */
        setvbuf(stdout, NULL, _IOLBF, 0);
        tt.counts = shared;
        alarm((unsigned int)tt.timeout);
        if (!tt_group_start())
            _exit(0);
        return 1;
    }
    tt_wait_group(child, shared);
    munmap(shared, sizeof *shared);
    return 0;
}

/* TT_GROUP's end, after the body: the child exits here; in-process, the
 * counts are added and the loop ends. */
static inline int tt_group_end(void)
{
    tt_group_finish();
    if (tt.fork)
        _exit(0);
    tt_group_line("ok", tt.counts);
    tt_add_counts(tt.counts);
    tt.counts = NULL;
    return 0;
}

/* Runs this program again (exec: a fresh process and library) with argv and
 * the environment changed by env, a NULL-terminated list of "NAME=value"
 * (set) and "NAME" (unset); its standard output goes into out. Returns its
 * exit status, or -1 if it did not exit normally. For tests of what a fresh
 * process sees (test_policy.c: the environment; test_harness.c: the
 * harness itself). */
static inline int tt_run_self(char *const argv[], const char *const env[], char *out, size_t size)
{
    int fds[2];
    out[0] = '\0';
    if (pipe(fds) != 0)
        return -1;
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        for (int i = 0; env[i]; ++i) {
            char name[128];
            const char *eq = strchr(env[i], '=');
            snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - env[i]) : (int)strlen(env[i]), env[i]);
            if (eq)
                setenv(name, eq + 1, 1);
            else
                unsetenv(name);
        }
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t n;
    while (used + 1 < size && (n = read(fds[0], out + used, size - 1 - used)) > 0)
        used += (size_t)n;
    out[used] = '\0';
    close(fds[0]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Runs the block that follows as one group named by the printf-style
 * arguments (see the top of this file). */
#define TT_GROUP(...) for (int tt_group_ = tt_group_begin(__VA_ARGS__); tt_group_; tt_group_ = tt_group_end())

/* Prints `N passed, N failed` and returns the exit status for main. A
 * filter that selected nothing is one failure, with a message. */
static inline int tt_summary(void)
{
    if (tt.has_filter && tt.groups_run == 0) {
        printf("FAIL %s: MT_TEST_FILTER group part '%s' matches no group of this program\n", tt.program,
               tt.group_filter);
        tt.failed++;
    } else if (tt.has_filter && tt.case_filter[0] && tt.cases_matched == 0) {
        printf("FAIL %s: MT_TEST_FILTER case part '%s' matches no case of the %d group(s) it ran\n", tt.program,
               tt.case_filter, tt.groups_run);
        tt.failed++;
    }
    printf("%d passed, %d failed\n", tt.passed, tt.failed);
    fflush(stdout);
    return tt.failed ? 1 : 0;
}

#endif /* MT_TT_GROUPS_H */
