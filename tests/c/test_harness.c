/*
 * test_harness.c: the harness itself (tt_harness.h): a group that crashes or
 * hangs fails alone while the others still run and count; the filter picks
 * groups and cases, and one that matches nothing fails; every failure
 * prints its replay line; a seed gives the same cases every run.
 *
 * The program runs itself again (exec) with `--inner`, where its groups
 * misbehave on purpose, and checks what that run printed and returned.
 *
 *   make check-c T=test_harness
 */
#include "test_util.h"

/* ---- the inner program: groups that pass, fail, crash and hang ------------ */

static int inner(void)
{
    tt_init("harness_inner");
    TT_GROUP("passes") {
        tt_case("first of two");
        tt_case("second of two: a random number %" PRIu64, tt_rand_u64());
    }
    TT_GROUP("fails") {
        tt_case("a case that fails");
        TT_CHECK(tt_rand_int(0, 1) == 2, "a number drawn from [0, 1] is never 2");
    }
    TT_GROUP("crashes") {
        tt_case("passes before the crash");
        tt_case("raises SIGSEGV");
        raise(SIGSEGV);
    }
    TT_GROUP("aborts") {
        tt_case("calls abort()");
        abort();
    }
    TT_GROUP("hangs") {
        tt_case("sleeps past MT_TEST_TIMEOUT");
        for (;;)
            pause();
    }
    TT_GROUP("passes again") tt_case("after the others");
    return tt_summary();
}

/* Runs the inner program with a filter (NULL: none) and a seed; its output
 * goes into out, its exit status is returned (-1 if it did not exit). */
static int run_inner(const char *filter, const char *seed, char *out, size_t size)
{
    char filter_env[128], seed_env[64];
    snprintf(filter_env, sizeof filter_env, "MT_TEST_FILTER=%s", filter ? filter : "");
    snprintf(seed_env, sizeof seed_env, "MT_TEST_SEED=%s", seed);
    const char *env[] = {filter ? filter_env : "MT_TEST_FILTER", seed_env, "MT_TEST_TIMEOUT=1", NULL};
    char *argv[] = {(char *)"test_harness", (char *)"--inner", NULL};
    return tt_run_self(argv, env, out, size);
}

#define HAS(text) (void)TT_CHECK(strstr(out, text) != NULL, "no \"%s\" in:\n%s", text, out)

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--inner") == 0)
        return inner();
    tt_init("test_harness");
    static char out[16384];

    TT_GROUP("crash isolation") {
        tt_case("a crash, an abort and a hang each fail their group; the others run and count");
        int rc = run_inner(NULL, "5", out, sizeof out);
        TT_CHECK(rc == 1, "exit status %d", rc);
        HAS("FAIL harness_inner: crashed: SIGSEGV in group 'crashes'");
        HAS("FAIL harness_inner: crashed: SIGABRT in group 'aborts'");
        HAS("FAIL harness_inner: timed out after 1 s (MT_TEST_TIMEOUT) in group 'hangs'");
        HAS("FAIL harness_inner: a case that fails");
        /* passed: 2 (passes) + 1 (fails' group freed its memory)... counted
         * per case: passes 2 + memory 1, fails 0 + memory 1, crashes 1 before
         * the crash, passes again 1 + memory 1 = 7; failed: the failing case,
         * the crash, the abort, the hang = 4. */
        HAS("7 passed, 4 failed");
    }

    TT_GROUP("replay lines") {
        tt_case("every failure prints the command that replays its group");
        run_inner(NULL, "5", out, sizeof out);
        HAS("replay: MT_TEST_SEED=5 MT_TEST_FILTER='fails' ");
        HAS("replay: MT_TEST_SEED=5 MT_TEST_FILTER='crashes' ");
        HAS("replay: MT_TEST_SEED=5 MT_TEST_FILTER='hangs' ");
    }

    TT_GROUP("filters") {
        tt_case("a group filter runs the matching groups only");
        TT_CHECK(run_inner("passes", "5", out, sizeof out) == 0, "exit status:\n%s", out);
        HAS("5 passed, 0 failed"); /* passes (2 + memory) and passes again (1 + memory) */
        tt_case("a glob must match the whole group name");
        TT_CHECK(run_inner("pass?s", "5", out, sizeof out) == 0, "exit status:\n%s", out);
        HAS("3 passed, 0 failed");
        tt_case("GROUP/CASE counts the matching cases only");
        TT_CHECK(run_inner("passes/second", "5", out, sizeof out) == 0, "exit status:\n%s", out);
        HAS("1 passed, 0 failed");
        tt_case("a filter that matches no group fails, saying so");
        TT_CHECK(run_inner("pases", "5", out, sizeof out) == 1, "exit status:\n%s", out);
        HAS("MT_TEST_FILTER group part 'pases' matches no group");
        HAS("0 passed, 1 failed");
        tt_case("a case part that matches no case fails, saying so");
        TT_CHECK(run_inner("passes/third", "5", out, sizeof out) == 1, "exit status:\n%s", out);
        HAS("MT_TEST_FILTER case part 'third' matches no case");
    }

    TT_GROUP("seeds") {
        tt_case("a seed draws the same cases, alone or with the other groups");
        static char first[16384];
        run_inner("passes/second", "5", first, sizeof first);
        run_inner(NULL, "5", out, sizeof out);
        const char *a = strstr(first, "seed 5 ");
        TT_CHECK(a != NULL, "no seed line in:\n%s", first);
        setenv("MT_TEST_VERBOSE", "1", 1);
        run_inner("passes/second", "5", first, sizeof first);
        static char all[16384];
        run_inner("passes", "5", all, sizeof all);
        char *line = strstr(first, "case: second of two");
        TT_CHECK(line != NULL, "verbose output without the case:\n%s", first);
        if (line) {
            *strchr(line, '\n') = '\0';
            TT_CHECK(strstr(all, line) != NULL, "\"%s\" differs when the group runs with others:\n%s", line, all);
        }
        tt_case("another seed draws other cases");
        run_inner("passes/second", "6", out, sizeof out);
        if (line)
            TT_CHECK(strstr(out, line) == NULL, "seed 6 drew the same number as seed 5: %s", line);
        unsetenv("MT_TEST_VERBOSE");
    }
    return tt_summary();
}
