/*
 * test_emu_group.c: the emulator's several devices and launch groups
 * (src/emu/emu_devices.cpp, src/emu/emu_group.cpp), on the kernels of
 * group_kernels.cu, which wait for each other across devices as the p2p
 * all-reduce does. Emulator only.
 *
 *   make build/tests/emu/test_emu_group && build/tests/emu/test_emu_group
 */
#include <time.h>

#include "test_util.h"

/* tests/c/group_kernels.cu */
int mt_test_group_exchange(int world, int blocks, int missing, int broken, int in_group, int *passed, char *msg,
                           size_t msgsize);

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void test_groups(void)
{
    char msg[1024];
    int passed = 0;
    tt_case("4 devices x 3 blocks wait for each other in a launch group: every block passes");
    int err = mt_test_group_exchange(4, 3, -1, -1, 1, &passed, msg, sizeof msg);
    TT_CHECK(err == 0 && passed == 4 * 3 * 32, "error %d (%s), %d threads passed", err, msg, passed);

    tt_case("a wait for another device's flag outside a launch group is an error, not a hang");
    err = mt_test_group_exchange(2, 1, -1, -1, 0, &passed, msg, sizeof msg);
    TT_CHECK(err != 0 && strstr(msg, "not launched in a launch group") != NULL, "error %d (%s)", err, msg);

    tt_case("a device that never arrives: the others fail after MINITENSOR_EMU_WAIT seconds, naming the wait");
    double t0 = now_s();
    err = mt_test_group_exchange(3, 1, 2, -1, 1, &passed, msg, sizeof msg);
    double waited = now_s() - t0;
    TT_CHECK(err != 0 && strstr(msg, "exchange_kernel: waited 2 s") != NULL && strstr(msg, "never arrived"),
             "error %d (%s)", err, msg);
    TT_CHECK(waited < 10.0, "took %.1f s", waited);

    tt_case("a block that fails ends the whole group at once, its own error reported with its device");
    t0 = now_s();
    err = mt_test_group_exchange(2, 2, -1, 1, 1, &passed, msg, sizeof msg);
    waited = now_s() - t0;
    TT_CHECK(err != 0 && strstr(msg, "device 1") != NULL && strstr(msg, "exchange_kernel") != NULL,
             "error %d (%s)", err, msg);
    TT_CHECK(waited < 1.5, "took %.2f s: the waiting blocks did not give up at once", waited);

    tt_case("a group of more blocks than it can run at once is refused with the count");
    err = mt_test_group_exchange(2, 200, -1, -1, 1, &passed, msg, sizeof msg);
    TT_CHECK(err != 0 && strstr(msg, "400 blocks in all") != NULL && strstr(msg, "at most 256"),
             "error %d (%s)", err, msg);

    tt_case("the library works after a failed group");
    err = mt_test_group_exchange(2, 1, -1, -1, 1, &passed, msg, sizeof msg);
    TT_CHECK(err == 0 && passed == 2 * 32, "error %d (%s), %d threads passed", err, msg, passed);
}

int main(void)
{
    setenv("MINITENSOR_EMU_WAIT", "2", 1); /* read at the first wait */
    tt_init("test_emu_group");
    TT_GROUP("launch groups") test_groups();
    return tt_summary();
}
