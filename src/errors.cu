/*
 * errors.cu: how the library reports failure.
 *
 * Every entry point returns an mt_status. The human-readable reason is kept
 * in a per-thread buffer that mt_last_error() returns, so two Python threads
 * calling the library never see each other's messages. Nothing here exits,
 * aborts or prints: a student's mistake must become a Python exception, not
 * a dead interpreter.
 *
 * Kernel launches are asynchronous: a kernel that reads out of bounds fails
 * after its launch has already returned "success", and the error surfaces at
 * some later, unrelated call. Sync-debug mode (mt_set_sync_debug, or
 * MINITENSOR_SYNC=1 in the environment) synchronizes after every launch so
 * that the fault is reported by the launch that caused it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "check.h"
#include "launch.h"
#include "task.h"

/* Long enough for a function name, two shapes of MT_MAX_DIMS dims and a CUDA
 * error string; longer messages are truncated, never overflowed. */
constexpr size_t kMessageSize = 1024;

static thread_local char t_last_error[kMessageSize] = "";

/* The entry point this thread is in (set by mt_ensure_init, which every entry
 * point that touches the device calls first), so that a failed CUDA call
 * deep inside it is reported as "mt_matmul: cudaMallocAsync(...) failed". */
static thread_local const char *t_current_call = nullptr;

void mt_set_current_call(const char *func)
{
    t_current_call = func;
}

static bool sync_debug_from_env()
{
    const char *value = getenv("MINITENSOR_SYNC");
    return value != nullptr && strcmp(value, "1") == 0;
}

/* Read once, when the library is loaded; atomic because any thread may flip
 * it while another launches. */
static std::atomic<bool> g_sync_debug{sync_debug_from_env()};

/* Versions as "13.0" for CUDA's encoding 13000 ("12.4" for 12040); "none"
 * for 0, which cudaDriverGetVersion reports when no driver is installed. */
void mt_cuda_versions(char *buf, size_t size)
{
    int driver = 0;
    int runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    char d[16] = "none";
    char r[16] = "none";
    if (driver > 0)
        snprintf(d, sizeof d, "%d.%d", driver / 1000, (driver % 1000) / 10);
    if (runtime > 0)
        snprintf(r, sizeof r, "%d.%d", runtime / 1000, (runtime % 1000) / 10);
    snprintf(buf, size, "CUDA driver %s, runtime %s", d, r);
}

const char *mt_last_error(void)
{
    return t_last_error;
}

mt_status mt_fail(mt_status status, const char *func, const char *fmt, ...)
{
    int used = snprintf(t_last_error, kMessageSize, "%s: ", func ? func : "minitensor");
    if (used < 0 || (size_t)used >= kMessageSize)
        return status;
    va_list args;
    va_start(args, fmt);
    vsnprintf(t_last_error + used, kMessageSize - (size_t)used, fmt, args);
    va_end(args);
    return status;
}

/* In the emulator a launch has finished (or failed) when it returns, and a
 * failed kernel breaks nothing; on a GPU a fault surfaces later and leaves
 * the context unusable. The advice in messages differs accordingly. */
#ifdef MT_EMULATOR
static const bool kLaunchesFinishAtOnce = true;
#else
static const bool kLaunchesFinishAtOnce = false;
#endif

/* Errors that a kernel raises while it runs (not at its launch). Without
 * sync-debug they are reported by whichever call happens to look next. */
static bool is_asynchronous_fault(cudaError_t err)
{
    return err == cudaErrorLaunchFailure || err == cudaErrorIllegalAddress
           || err == cudaErrorMisalignedAddress || err == cudaErrorIllegalInstruction || err == cudaErrorHardwareStackError
           || err == cudaErrorInvalidAddressSpace || err == cudaErrorAssert;
}

mt_status mt_fail_cuda(cudaError_t err, const char *expr, const char *file, int line)
{
    mt_status status = err == cudaErrorMemoryAllocation ? MT_ERR_OUT_OF_MEMORY : MT_ERR_CUDA;
#ifdef MT_EMULATOR
    /* Ctrl-C stopped an emulated launch (src/emu: the error exists only there). */
    if (err == cudaErrorInterrupted)
        status = MT_ERR_INTERRUPTED;
#endif
    /* The runtime also keeps a failed call's error as its "last error", which
     * the next mt_launch_status would read and blame on an innocent launch.
     * This error is being reported now, so clear it. (A fault that broke the
     * context stays: every later call reports it, as it should.) */
    (void)cudaGetLastError();
    int used = snprintf(t_last_error, kMessageSize, "%s: %s failed: %s (%s) at %s:%d",
                        t_current_call ? t_current_call : "minitensor", expr,
                        cudaGetErrorString(err), cudaGetErrorName(err), file, line);
    if (used < 0 || (size_t)used >= kMessageSize)
        return status;
    char *rest = t_last_error + used;
    size_t room = kMessageSize - (size_t)used;

    if (is_asynchronous_fault(err) && kLaunchesFinishAtOnce) {
        snprintf(rest, room,
                 ". The kernel launched here failed while running (the emulator runs each"
                 " launch to the end before returning; nothing is left broken, the next call"
                 " works)");
    } else if (is_asynchronous_fault(err) && g_sync_debug.load()) {
        snprintf(rest, room,
                 ". The kernel launched here failed while running; the CUDA context is now"
                 " unusable: restart the process");
    } else if (is_asynchronous_fault(err)) {
        snprintf(rest, room,
                 ". A kernel failed while running, possibly one launched by an earlier call;"
                 " set MINITENSOR_SYNC=1 to report such faults at the launch that caused them"
                 " (the CUDA context is now unusable: restart the process)");
    } else if (err != cudaErrorMemoryAllocation && err != cudaErrorInvalidValue) {
        /* Most other failures (no kernel image for this GPU, a PTX version the
         * driver cannot load) come from driver and runtime disagreeing, so
         * say which versions met. */
        char versions[64];
        mt_cuda_versions(versions, sizeof versions);
        snprintf(rest, room, " (%s)", versions);
    }
    return status;
}

/* A stubbed course task (task.h): the message names the task, the function
 * to write and its file, after the entry point the student called. */
mt_status mt_task_not_done(const char *message)
{
    return mt_fail(MT_ERR_NOT_IMPLEMENTED, t_current_call, "%s", message);
}

cudaError_t mt_launch_status(void)
{
    /* A bad configuration (too many threads, a zero-sized grid, too much
     * shared memory) is known at once and reported here. */
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return err;
    /* A fault inside the kernel is only known once it has run. (Not while
     * a graph is captured: nothing runs, and a synchronize would end it.) */
    if (g_sync_debug.load() && !mt_capturing())
        return cudaDeviceSynchronize();
    return cudaSuccess;
}

mt_status mt_set_sync_debug(int on)
{
    g_sync_debug.store(on != 0);
    return MT_OK;
}

mt_status mt_synchronize(void)
{
    MT_TRY(mt_ensure_init("mt_synchronize"));
    CUDA_CHECK(cudaDeviceSynchronize());
    return MT_OK;
}
