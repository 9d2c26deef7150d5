/*
 * broken_driver.c: runs one kernel of the bug corpus (broken_kernels.cu) by
 * name, in either build, and prints what the synchronize after it said.
 * tools/sanitizer_compare.sh runs it once per bug, under compute-sanitizer
 * for the CUDA build and with MINITENSOR_EMU_CHECK=full for the emulator.
 *
 *   make sanitizer-emu       build/sanitizer/broken_driver_emu
 *   make sanitizer-cuda      build/sanitizer/broken_driver_cuda (nvcc)
 *   build/sanitizer/broken_driver_emu --list
 *   MINITENSOR_EMU_CHECK=full build/sanitizer/broken_driver_emu uninitialised_read
 *
 * Output: "NAME: error E: MESSAGE" and "NAME: bug at lines L0 L1" (the
 * lines are known in the emulator build only; 0 otherwise). Exits 0 when
 * the kernel ran without an error, 1 when it failed, 2 on bad usage.
 */
#include <stdio.h>
#include <string.h>

/* tests/c/broken_kernels.cu */
int mt_test_bug_count(void);
const char *mt_test_bug_name(int which);
int mt_test_launch_bug(int which, char *msg, size_t msgsize, int *line0, int *line1);

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s NAME | --list\n", argv[0]);
        return 2;
    }
    int which = -1;
    for (int i = 0; i < mt_test_bug_count(); ++i) {
        if (strcmp(argv[1], "--list") == 0)
            printf("%s\n", mt_test_bug_name(i));
        else if (strcmp(argv[1], mt_test_bug_name(i)) == 0)
            which = i;
    }
    if (strcmp(argv[1], "--list") == 0)
        return 0;
    if (which < 0) {
        fprintf(stderr, "%s: no broken kernel named '%s' (--list names them)\n", argv[0], argv[1]);
        return 2;
    }
    char msg[1024];
    int line0 = 0, line1 = 0;
    int err = mt_test_launch_bug(which, msg, sizeof msg, &line0, &line1);
    printf("%s: error %d: %s\n", argv[1], err, msg);
    printf("%s: bug at lines %d %d\n", argv[1], line0, line1);
    return err != 0;
}
