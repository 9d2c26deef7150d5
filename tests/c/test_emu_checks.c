/*
 * test_emu_checks.c: the CPU emulator's own checks (docs/emulator.md, "What
 * it checks"), on the deliberately broken kernels of broken_kernels.cu.
 * Emulator only: on a GPU these kernels are undefined behaviour.
 *
 *   make build/tests/emu/test_emu_checks && build/tests/emu/test_emu_checks
 */
#include <stdbool.h>
#include <unistd.h>

#include "test_util.h"
#include "tt_calls.h"

/* tests/c/broken_kernels.cu */
int mt_test_launch_interrupted(char *msg, size_t msgsize, double *seconds, int *handler_calls);
int mt_test_cuda_interrupted(void);
int mt_test_kernel_error_reported_by(int how, char *msg, size_t msgsize, int *then);
int mt_test_cuda_launch_failure(void);
int mt_test_cuda_illegal_address(void);
int mt_test_launch_bug(int which, char *msg, size_t msgsize, int *line0, int *line1);
int mt_test_launch_mbarrier_bug(int which, char *msg, size_t msgsize);
float mt_test_rmw_sum(char *msg, size_t msgsize);
int mt_test_cuda_stack_error(void);

/* The bug corpus by index (broken_kernels.cu, bug_names). */
enum { BUG_SHARED_POINTER_RACE = 14, BUG_SCRATCH_RMW = 15, BUG_UNINIT_SHARED = 16, BUG_OVERRUN_BYTES = 17,
       BUG_STACK_OVERFLOW = 18 };

/* Runs broken kernel `which`; checks the error is a launch failure whose
 * message holds each of `needles` ("%d" in one is the line of the bug). */
static void expect_bug(int which, const char *const *needles, int count, int want_err)
{
    char msg[1024], want[256];
    int line0 = 0, line1 = 0;
    int err = mt_test_launch_bug(which, msg, sizeof msg, &line0, &line1);
    if (getenv("MT_TEST_VERBOSE"))
        printf("  message: %s\n", msg);
    if (!TT_CHECK(err == want_err, "error %d (%s), expected %d", err, msg, want_err))
        return;
    for (int i = 0; i < count; ++i) {
        snprintf(want, sizeof want, needles[i], i == 0 || !line1 ? line0 : line1);
        TT_CHECK(strstr(msg, want) != NULL, "no \"%s\" in \"%s\"", want, msg);
    }
    /* Both lines of a two-line bug, whichever the message names first
     * ("at file.cu:L1, ... at line L2"). */
    for (int i = 0; i < 2 && line1; ++i) {
        char at_file[64], at_line[64];
        snprintf(at_file, sizeof at_file, ".cu:%d", i ? line1 : line0);
        snprintf(at_line, sizeof at_line, "line %d", i ? line1 : line0);
        TT_CHECK(strstr(msg, at_file) || strstr(msg, at_line), "line %d not named in \"%s\"",
                 i ? line1 : line0, msg);
    }
}

/* After an emulator error the next call works. */
static void expect_library_works(const char *after)
{
    tt_case("the library works after %s", after);
    call c = valid_call(F_FILL);
    tt_expect_ok(run_call(&c), FUNC[F_FILL]);
    free_call(&c);
}

static void test_interrupt(void)
{
    char msg[512];
    double seconds = 0;
    int calls = 0;
    tt_case("Ctrl-C (SIGINT) abandons a long launch, which fails as interrupted");
    int err = mt_test_launch_interrupted(msg, sizeof msg, &seconds, &calls);
    TT_CHECK(err == mt_test_cuda_interrupted(), "error %d (%s)", err, msg);
    TT_CHECK(strstr(msg, "endless_kernel") != NULL && strstr(msg, "Ctrl-C") != NULL, "message \"%s\"", msg);
    TT_CHECK(seconds < 1.5, "the launch took %.2f s after a SIGINT at 0.2 s", seconds);
    TT_CHECK(calls == 1, "the program's own SIGINT handler ran %d times, expected once", calls);

    expect_library_works("the interrupted launch");
}

/* A kernel's error waits for the host: the next synchronize (or
 * cudaGetLastError) reports it, once; cudaPeekAtLastError leaves it for the
 * synchronize. */
static void test_pending_kernel_error(void)
{
    static const char *const how[] = {"cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
                                      "cudaGetLastError", "cudaPeekAtLastError"};
    for (int i = 0; i < 5; ++i) {
        char msg[512];
        int then = -1;
        tt_case("a barrier divergence is reported by %s", how[i]);
        int err = mt_test_kernel_error_reported_by(i, msg, sizeof msg, &then);
        TT_CHECK(err == mt_test_cuda_launch_failure(), "%s returned %d (%s)", how[i], err, msg);
        TT_CHECK(strstr(msg, "divergent_barrier_kernel") != NULL, "message \"%s\"", msg);
        if (i == 4)
            TT_CHECK(then == err, "after cudaPeekAtLastError, cudaDeviceSynchronize returned %d", then);
        else
            TT_CHECK(then == 0, "reported once, but the next cudaDeviceSynchronize returned %d", then);
    }
    expect_library_works("the reported kernel error");
}

static void test_bug_corpus(void)
{
    tt_case("threads at different __syncthreads() statements: barrier divergence naming both lines");
    {
        const char *const needles[] = {"broken_kernels.cu:%d", "broken_kernels.cu:%d",
                                       "barrier divergence in kernel 'split_barrier_kernel' block (0, 0, 0)"};
        expect_bug(0, needles, 3, mt_test_cuda_launch_failure());
    }
    tt_case("full check: a read of a slot another thread wrote with no barrier between is a race");
    {
        const char *const needles[] = {"shared-memory race in kernel 'missing_barrier_kernel', block (0, 0, 0)",
                                       "tile[", "with no __syncthreads() between"};
        expect_bug(1, needles, 3, mt_test_cuda_launch_failure());
    }
    tt_case("full check: two threads writing one shared slot between barriers is a race");
    {
        const char *const needles[] = {"broken_kernels.cu:%d", "wrote slot[", "written by thread",
                                       "kernel 'two_writers_kernel'"};
        expect_bug(2, needles, 4, mt_test_cuda_launch_failure());
    }
    tt_case("full check: a shared write one past the end of a row is out of bounds");
    {
        const char *const needles[] = {"broken_kernels.cu:%d", "index 16 is outside [0, 16)",
                                       "kernel 'shared_overflow_kernel'", "__shared__ buf[4][16]"};
        expect_bug(3, needles, 4, mt_test_cuda_launch_failure());
    }
    tt_case("full check: a shared write one past the end of the whole array is out of bounds");
    {
        const char *const needles[] = {"broken_kernels.cu:%d", "index 64 is outside [0, 64)",
                                       "kernel 'shared_past_end_kernel', block (0, 0, 0), thread (63, 0, 0)"};
        expect_bug(10, needles, 3, mt_test_cuda_launch_failure());
    }
    tt_case("full check: a vector store through &row[i] that runs past the array is out of bounds");
    {
        const char *const needles[] = {"broken_kernels.cu:%d",
                                       "kernel 'shared_vector_overflow_kernel', block (0, 0, 0), thread (15, 0, 0): "
                                       "shared-memory vector store of 16 bytes out of bounds",
                                       "bytes [256, 272) of __shared__ row[66], which has 264 bytes"};
        expect_bug(11, needles, 3, mt_test_cuda_launch_failure());
    }
    tt_case("full check: a vector store through &row[i] at a float not aligned to 16 bytes is misaligned");
    {
        const char *const needles[] = {"broken_kernels.cu:%d",
                                       "kernel 'shared_vector_misaligned_kernel', block (0, 0, 0), thread (",
                                       "misaligned shared-memory vector store of 16 bytes at row[",
                                       "it must start at a multiple of 16 bytes"};
        expect_bug(12, needles, 4, mt_test_cuda_launch_failure());
    }
    tt_case("full check: a cp.async destination read before its thread waited for the copy is a race");
    {
        const char *const needles[] = {"at line %d, has not landed",
                                       "shared-memory race in kernel 'async_copy_early_read_kernel', block (0, 0, 0)",
                                       "read tile[", "while the asynchronous copy into it"};
        expect_bug(13, needles, 4, mt_test_cuda_launch_failure());
    }
    tt_case("full check: a tiled matmul without the barrier after its tile loads is a race");
    {
        const char *const needles[] = {"shared-memory race in kernel 'matmul_missing_barrier_kernel', block (0, 0, 0), "
                                       "thread (", "_tile[", "with no __syncthreads() between"};
        expect_bug(9, needles, 3, mt_test_cuda_launch_failure());
    }
    tt_case("full check: a race through a pointer kept from &tile[0] names both threads and lines");
    {
        const char *const needles[] = {"shared-memory race in kernel 'shared_pointer_race_kernel', block (0, 0, 0), "
                                       "thread (", "tile[", "with no __syncthreads() between"};
        expect_bug(BUG_SHARED_POINTER_RACE, needles, 3, mt_test_cuda_launch_failure());
    }
    tt_case("full check: every thread folding into one slot of a BlockScratch (through a pointer) is a race");
    {
        const char *const needles[] = {"broken_kernels.cu:%d",
                                       "shared-memory race in kernel 'scratch_rmw_race_kernel', block (0, 0, 0), "
                                       "thread (", "__shared__ BlockScratch<float> scratch",
                                       "with no __syncthreads() between"};
        expect_bug(BUG_SCRATCH_RMW, needles, 4, mt_test_cuda_launch_failure());
    }
    tt_case("full check: a read of a shared slot nothing wrote is an uninitialised read");
    {
        const char *const needles[] = {"broken_kernels.cu:%d",
                                       "read of uninitialised shared memory in kernel 'uninitialised_shared_read_kernel', "
                                       "block (0, 0, 0), thread (",
                                       "which no thread of the block has written"};
        expect_bug(BUG_UNINIT_SHARED, needles, 3, mt_test_cuda_launch_failure());
    }
    tt_case("full check: lanes ordered by __syncwarp() and shared atomics are no race");
    expect_bug(6, NULL, 0, 0);
}

/* The mbarrier twins' checks (src/emu/emu_tma.cpp): each misuse fails its
 * launch with a message that says what went wrong (MINITENSOR_EMU_WAIT is 2
 * seconds here, so the deadlock is reported soon). */
static void test_mbarriers(void)
{
    static const struct {
        const char *what, *needle;
    } cases[] = {
        {"a wait on an mbarrier whose arrivals never come: a deadlock", "while no barrier of the block changed: a "
                                                                         "deadlock on a GPU"},
        {"an arrival on an mbarrier whose phase has all its arrivals and waits for bytes",
         "more arrivals on an mbarrier than its count (1)"},
        {"a wait on an mbarrier that the block never initialised", "that this block never initialised"},
    };
    for (int which = 0; which < 3; ++which) {
        tt_case("%s", cases[which].what);
        char msg[1024];
        const int err = mt_test_launch_mbarrier_bug(which, msg, sizeof msg);
        if (TT_CHECK(err == mt_test_cuda_launch_failure(), "error %d (%s), expected a launch failure", err, msg))
            TT_CHECK(strstr(msg, cases[which].needle) != NULL && strstr(msg, "mbarrier_bug_kernel") != NULL,
                     "no \"%s\" naming the kernel in \"%s\"", cases[which].needle, msg);
    }
    expect_library_works("the mbarrier errors");
}

/* Runs this program again with `env` set and one argument, and reads what
 * it printed; false if it could not. */
static bool child_output(const char *env, const char *arg, char *out, size_t size)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s /proc/%d/exe %s", env, (int)getpid(), arg);
    FILE *p = popen(cmd, "r");
    if (!p)
        return false;
    bool got = fgets(out, (int)size, p) != NULL;
    return pclose(p) == 0 && got;
}

/* MINITENSOR_EMU_INTERLEAVE: with the checks off, a thread yields after
 * each read of a checked shared element, so every thread reads slot 0
 * before any writes it, and the read-modify-write race loses updates, the
 * same ones on every run. */
static void test_interleave(void)
{
    char plain[64] = "", first[64] = "", second[64] = "";
    tt_case("with the checks off, a read-modify-write race on one slot adds up (it hides)");
    TT_CHECK(child_output("MINITENSOR_EMU_CHECK=", "--rmw-sum", plain, sizeof plain), "the child failed");
    TT_CHECK(atof(plain) == 2080.0, "sum %s, expected 2080", plain);
    tt_case("MINITENSOR_EMU_INTERLEAVE=1 exposes it: updates are lost, the same on every run");
    TT_CHECK(child_output("MINITENSOR_EMU_CHECK= MINITENSOR_EMU_INTERLEAVE=1", "--rmw-sum", first, sizeof first),
             "the child failed");
    TT_CHECK(child_output("MINITENSOR_EMU_CHECK= MINITENSOR_EMU_INTERLEAVE=1", "--rmw-sum", second, sizeof second),
             "the child failed");
    TT_CHECK(atof(first) > 0.0 && atof(first) < 2080.0, "sum %s, expected lost updates (less than 2080)", first);
    TT_CHECK(strcmp(first, second) == 0, "two runs gave %s and %s", first, second);

    char msg[512];
    tt_case("full check: the same race through scratch.slot[0] names the element and its line");
    float sum = mt_test_rmw_sum(msg, sizeof msg);
    TT_CHECK(sum < 0.0f, "the launch succeeded (sum %g)", (double)sum);
    TT_CHECK(strstr(msg, "shared-memory race in kernel 'scratch_rmw_sum_kernel'") != NULL &&
                 strstr(msg, "scratch.slot[0] at tests/c/broken_kernels.cu:") != NULL,
             "message \"%s\"", msg);
}

/* Global memory: a fault inside a kernel is the launch's error. */
static void test_global_memory(void)
{
    tt_case("full check: a global write one past the end faults against the guard page, reported");
    {
        const char *const needles[] = {"broken_kernels.cu:%d", "illegal memory access in kernel 'global_overflow_kernel'",
                                       "just past the end of a 256-byte allocation"};
        expect_bug(4, needles, 3, mt_test_cuda_illegal_address());
    }
    tt_case("a kernel writing to freed memory faults, reported as a use after free");
    {
        const char *const needles[] = {"broken_kernels.cu:%d", "kernel 'use_after_free_kernel'",
                                       "inside a 256-byte allocation freed by cudaFree"};
        expect_bug(5, needles, 3, mt_test_cuda_illegal_address());
    }
    tt_case("full check: a global read one past the end faults against the guard page, reported");
    {
        const char *const needles[] = {"broken_kernels.cu:%d",
                                       "illegal memory access in kernel 'global_overread_kernel', block (0, 0, 0), "
                                       "thread (63, 0, 0): read",
                                       "just past the end of a 256-byte allocation"};
        expect_bug(7, needles, 3, mt_test_cuda_illegal_address());
    }
    tt_case("full check: a kernel reading an input nothing wrote is an uninitialised read");
    {
        const char *const needles[] = {"broken_kernels.cu:%d",
                                       "read of uninitialised device memory in kernel 'uninitialised_read_kernel', "
                                       "block (0, 0, 0), thread (",
                                       "inside a 4096-byte allocation, which nothing (no kernel, cudaMemset or "
                                       "cudaMemcpy) has written"};
        expect_bug(8, needles, 3, mt_test_cuda_launch_failure());
    }
    tt_case("full check: a write a few bytes past an allocation whose size is no multiple of 16 faults");
    {
        const char *const needles[] = {"broken_kernels.cu:%d",
                                       "illegal memory access in kernel 'global_overrun_bytes_kernel', block (0, 0, 0), "
                                       "thread (61, 0, 0): write",
                                       "just past the end of a 244-byte allocation"};
        expect_bug(BUG_OVERRUN_BYTES, needles, 3, mt_test_cuda_illegal_address());
    }
    tt_case("a local array larger than the emulated thread's stack is reported as a stack overflow");
    {
        const char *const needles[] = {"broken_kernels.cu:%d",
                                       "stack overflow in kernel 'stack_overflow_kernel', block (0, 0, 0), thread (",
                                       "the emulated thread's stack is 64 KiB", "set MINITENSOR_EMU_STACK=<KiB>"};
        expect_bug(BUG_STACK_OVERFLOW, needles, 4, mt_test_cuda_stack_error());
    }
    tt_case("MINITENSOR_EMU_STACK=256 gives the same kernel room");
    {
        char out[64] = "";
        TT_CHECK(child_output("MINITENSOR_EMU_STACK=256", "--stack-kernel", out, sizeof out), "the child failed");
        TT_CHECK(strcmp(out, "0\n") == 0, "the launch returned %s", out);
    }
    expect_library_works("the faults");
}

int main(int argc, char **argv)
{
    (void)ARG;
    /* Children of test_interleave and test_global_memory. */
    if (argc == 2 && strcmp(argv[1], "--rmw-sum") == 0) {
        char msg[512];
        printf("%g\n", (double)mt_test_rmw_sum(msg, sizeof msg));
        return 0;
    }
    if (argc == 2 && strcmp(argv[1], "--stack-kernel") == 0) {
        char msg[512];
        int line0, line1;
        printf("%d\n", mt_test_launch_bug(BUG_STACK_OVERFLOW, msg, sizeof msg, &line0, &line1));
        return 0;
    }
    /* The shared-memory checks need MINITENSOR_EMU_CHECK=full, which the
     * library reads when it is loaded: run again with it set. */
    const char *mode = getenv("MINITENSOR_EMU_CHECK");
    if (!mode || strcmp(mode, "full") != 0) {
        setenv("MINITENSOR_EMU_CHECK", "full", 1);
        execv("/proc/self/exe", argv);
        perror("test_emu_checks: execv /proc/self/exe");
        return 1;
    }
    setenv("MINITENSOR_EMU_WAIT", "2", 0); /* test_mbarriers' deadlock, read at the first wait */
    tt_init("test_emu_checks");
    TT_GROUP("interrupt") test_interrupt();
    TT_GROUP("pending kernel error") test_pending_kernel_error();
    TT_GROUP("bug corpus") test_bug_corpus();
    TT_GROUP("global memory") test_global_memory();
    TT_GROUP("interleave") test_interleave();
    TT_GROUP("mbarriers") test_mbarriers();
    return tt_summary();
}
