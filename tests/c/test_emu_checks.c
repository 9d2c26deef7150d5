/*
 * test_emu_checks.c: the CPU emulator's own checks (docs/emulator.md, "What
 * it checks"), on the deliberately broken kernels of broken_kernels.cu.
 * Emulator only: on a GPU these kernels are undefined behaviour.
 *
 *   make build/tests/emu/test_emu_checks && build/tests/emu/test_emu_checks
 */
#include "test_util.h"
#include "tt_calls.h"

/* tests/c/broken_kernels.cu */
int mt_test_launch_interrupted(char *msg, size_t msgsize, double *seconds, int *handler_calls);
int mt_test_cuda_interrupted(void);

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

    tt_case("the library works after the interrupted launch");
    call c = valid_call(F_FILL);
    tt_expect_ok(run_call(&c), "mt_fill");
    free_call(&c);
}

int main(void)
{
    tt_init("test_emu_checks");
    test_interrupt();
    return tt_summary();
}
