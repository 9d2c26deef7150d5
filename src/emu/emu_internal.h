/*
 * emu_internal.h: what the two halves of the emulator's runtime share
 * (not part of the interface the translated .cu files see, which is emu.h).
 *
 *   emu_runtime.cpp    the runtime API twins host code calls (cudaMalloc,
 *                      cudaMemcpy, cudaGetLastError, ...), the settings read
 *                      from the environment, and the per-thread error state;
 *   emu_errors.cpp     the error texts and record_error;
 *   emu_devices.cpp    the emulated devices, the current one, peer access;
 *   emu_group.cpp      launch groups: one kernel over several devices;
 *   emu_memory.cpp     device memory: mappings, guard pages, quarantine,
 *                      and the pages nothing has written yet (full mode);
 *   emu_launch.cpp     the block scheduler: launching a kernel, and the
 *                      calls kernels make (barriers, shuffles, __shared__);
 *                      its parts are listed in emu_block.h (emu_block.cpp,
 *                      emu_fibers.cpp, emu_shared.cpp, emu_faults.cpp).
 */
#ifndef MT_EMU_INTERNAL_H
#define MT_EMU_INTERNAL_H

#include "emu.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace mt_emu {

/* MINITENSOR_EMU_* environment variables, read once (docs/emulator.md). */
struct Settings {
    bool shuffle = true;
    bool poison = true;
    uint64_t seed = 0;
    int os_threads = 1;
    size_t stack_bytes = 64 * 1024;
    bool interleave = false; /* MINITENSOR_EMU_INTERLEAVE */
};
const Settings &settings();

/* Hardware limits the emulator enforces: those of a current GPU. */
constexpr size_t kStaticSharedLimit = 48 * 1024;
constexpr size_t kSharedOptinLimit = 227 * 1024;

/* The CUDA runtime's error state, per host thread. */
extern thread_local cudaError_t last_error;
extern thread_local cudaError_t detail_code;
extern thread_local std::string detail_text;

/* Records an error; the detail (which names the kernel) is what
 * cudaGetErrorString returns for it, after the plain CUDA text. */
cudaError_t record_error(cudaError_t err, const std::string &detail);

/* Records the error of a kernel that failed while running (also pending
 * for the next synchronize; see emu_runtime.cpp). */
cudaError_t record_kernel_error(cudaError_t err, const std::string &detail);
extern thread_local cudaError_t pending_kernel_error;
/* The pending kernel error (cudaSuccess if none), which is then cleared. */
cudaError_t take_pending_kernel_error();

/* Device memory (emu_memory.cpp): a mapping per allocation, a guard page
 * after it, quarantine after cudaFree. */
void *device_alloc(size_t bytes);
bool device_free(void *ptr);
/* "4 bytes past the end of a 4096-byte allocation", ... */
std::string describe_address(const void *addr);

/* Reads of memory nothing wrote (full mode; emu_memory.cpp). The runtime's
 * twins call these: cudaMemset and cudaMemcpy initialise their destination,
 * and a copy from device memory reads unwritten pages as the zeros they
 * hold, without making them readable. No-ops with the mode off. */
void initialise_device_range(void *ptr, size_t bytes);
void copy_device_range(void *dst, const void *src, size_t bytes);
/* What the fault handler makes of a fault at addr: not an unwritten page of
 * a live allocation; a first write (or any host access) to one, which is now
 * writable, so retry; or a kernel's read of one. */
enum class FirstTouch { NotUnwritten, Retry, UninitialisedRead };
FirstTouch device_first_touch(const void *addr, bool write, bool in_kernel);
/* Whether the fault in this signal context (a ucontext_t) was a write. */
bool fault_was_write(const void *uctx);

/* The SIGSEGV/SIGBUS handler (emu_faults.cpp), installed once. */
void install_fault_handler();

/* The current device of this host thread (emu_devices.cpp). */
int current_device();

/* Checks a launch's configuration (grid, block, dynamic shared memory) and
 * counts it; false, with the error recorded, when CUDA would refuse it
 * (emu_launch.cpp; the launch groups of emu_group.cpp use it too). */
bool accept_launch(const LaunchConfig &cfg);

/* Counts an accepted launch (emu_launch_count.cpp). */
void count_launch(const void *kernel);

/* printf into a std::string (up to 1023 characters). */
std::string format(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

} /* namespace mt_emu */

#endif /* MT_EMU_INTERNAL_H */
