/*
 * emu_runtime.cpp: the CUDA runtime API of the CPU emulator (see emu.h):
 * the functions host code calls (cudaMalloc, cudaMemcpy, cudaGetLastError,
 * cudaGetDeviceProperties, events, ...), the settings read from the
 * environment, and the per-thread error state they report through.
 * "Device" memory is host memory; the emulator has one device, 0.
 *
 * Device memory is emu_memory.cpp's; running kernels is the block
 * scheduler's job (emu_launch.cpp and the files emu_block.h lists).
 */
#include "emu_internal.h"

#include <chrono>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <unistd.h>

namespace mt_emu {

/* ---- settings ------------------------------------------------------------ */

namespace {

long env_long(const char *name, long fallback)
{
    const char *v = std::getenv(name);
    if (!v || !*v)
        return fallback;
    char *end = nullptr;
    long x = std::strtol(v, &end, 10);
    return (end && *end == '\0') ? x : fallback;
}

} /* namespace */

const Settings &settings()
{
    static const Settings s = [] {
        Settings r;
        r.shuffle = env_long("MINITENSOR_EMU_SHUFFLE", 1) != 0;
        r.poison = env_long("MINITENSOR_EMU_POISON", 1) != 0;
        r.seed = (uint64_t)env_long("MINITENSOR_EMU_SEED", 0);
        long cores = (long)std::thread::hardware_concurrency();
        r.os_threads = (int)std::max(1L, env_long("MINITENSOR_EMU_THREADS", cores > 0 ? cores : 1));
        r.stack_bytes = (size_t)std::max(16L, env_long("MINITENSOR_EMU_STACK_KB", 64)) * 1024;
        return r;
    }();
    return s;
}

/* MINITENSOR_EMU_CHECK=full: read when the library is loaded, before any
 * kernel runs; the checked shared arrays of emu.h test it on every access. */
bool check_full = [] {
    const char *v = std::getenv("MINITENSOR_EMU_CHECK");
    return v && std::strcmp(v, "full") == 0;
}();

/* ---- errors (per host thread, as in the CUDA runtime) -------------------- */

thread_local cudaError_t last_error = cudaSuccess;
thread_local cudaError_t detail_code = cudaSuccess;
thread_local std::string detail_text;

namespace {

const char *plain_error_string(cudaError_t err)
{
    switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
    case cudaErrorHardwareStackError: return "hardware stack error";
    case cudaErrorInvalidAddressSpace: return "operation not supported on global/shared address space";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorInterrupted: return "interrupted (Ctrl-C)";
    default: return "unknown error";
    }
}

} /* namespace */

cudaError_t record_error(cudaError_t err, const std::string &detail)
{
    last_error = err;
    detail_code = err;
    detail_text = std::string(plain_error_string(err)) + " [emulator: " + detail + "]";
    return err;
}

/* A kernel that failed while running: its error is also pending until the
 * host reports it, by the next synchronize (device, stream or event) or by
 * cudaGetLastError, whichever comes first, as on a GPU. (On a GPU such a
 * fault is sticky: every later call fails. Here, once reported, it is gone
 * and the process works on; docs/emulator.md.) */
thread_local cudaError_t pending_kernel_error = cudaSuccess;

cudaError_t record_kernel_error(cudaError_t err, const std::string &detail)
{
    pending_kernel_error = err;
    return record_error(err, detail);
}

/* What a synchronize returns: the pending kernel error, reported once. */
cudaError_t take_pending_kernel_error()
{
    cudaError_t err = pending_kernel_error;
    if (err != cudaSuccess) {
        pending_kernel_error = cudaSuccess;
        if (last_error == err)
            last_error = cudaSuccess;
    }
    return err;
}

std::string format(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}


} /* namespace mt_emu */

/* ---- the runtime API twins -------------------------------------------------- */

using mt_emu::record_error;

/* A stream: only a handle, as every launch runs to its end in order. */
struct CUstream_st {
    int unused;
};

struct CUevent_st {
    std::chrono::steady_clock::time_point when;
};

cudaError_t cudaMalloc(void **ptr, size_t bytes)
{
    if (!ptr)
        return record_error(cudaErrorInvalidValue, "cudaMalloc: null result pointer");
    *ptr = nullptr;
    if (bytes == 0)
        return cudaSuccess;
    *ptr = mt_emu::device_alloc(bytes);
    if (!*ptr)
        return record_error(cudaErrorMemoryAllocation,
                            mt_emu::format("cudaMalloc: could not allocate %zu bytes", bytes));
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    if (!ptr)
        return cudaSuccess;
    if (!mt_emu::device_free(ptr))
        return record_error(cudaErrorInvalidValue,
                            mt_emu::format("cudaFree: %p is not a live device allocation (%s)", ptr,
                                           mt_emu::describe_address(ptr).c_str()));
    return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t) { return cudaMalloc(ptr, bytes); }
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t) { return cudaFree(ptr); }

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
        return record_error(cudaErrorInvalidMemcpyDirection, "cudaMemcpy: unknown copy direction");
    if (bytes == 0)
        return cudaSuccess;
    if (!dst || !src)
        return record_error(cudaErrorInvalidValue, "cudaMemcpy: null pointer");
    mt_emu::initialise_device_range(dst, bytes);
    mt_emu::copy_device_range(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t)
{
    return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void *ptr, int value, size_t bytes)
{
    if (bytes == 0)
        return cudaSuccess;
    if (!ptr)
        return record_error(cudaErrorInvalidValue, "cudaMemset: null pointer");
    mt_emu::initialise_device_range(ptr, bytes);
    std::memset(ptr, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t)
{
    return cudaMemset(ptr, value, bytes);
}

/* Every emulated launch has finished when it returns; a synchronize
 * reports the error of a kernel that failed since the last report. */
cudaError_t cudaDeviceSynchronize(void) { return mt_emu::take_pending_kernel_error(); }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return mt_emu::take_pending_kernel_error(); }

cudaError_t cudaGetLastError(void)
{
    cudaError_t err = mt_emu::last_error;
    mt_emu::last_error = cudaSuccess;
    mt_emu::pending_kernel_error = cudaSuccess;
    return err;
}

cudaError_t cudaPeekAtLastError(void) { return mt_emu::last_error; }

const char *cudaGetErrorString(cudaError_t err)
{
    if (err == mt_emu::detail_code && !mt_emu::detail_text.empty())
        return mt_emu::detail_text.c_str();
    return mt_emu::plain_error_string(err);
}

const char *cudaGetErrorName(cudaError_t err)
{
    switch (err) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case cudaErrorIllegalInstruction: return "cudaErrorIllegalInstruction";
    case cudaErrorHardwareStackError: return "cudaErrorHardwareStackError";
    case cudaErrorInvalidAddressSpace: return "cudaErrorInvalidAddressSpace";
    case cudaErrorAssert: return "cudaErrorAssert";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorInterrupted: return "cudaErrorInterrupted";
    default: return "cudaErrorUnknown";
    }
}

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return record_error(cudaErrorInvalidValue, "cudaGetDeviceCount: null pointer");
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return record_error(cudaErrorInvalidValue, "cudaGetDevice: null pointer");
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (device != 0)
        return record_error(cudaErrorInvalidDevice,
                            mt_emu::format("cudaSetDevice: the emulator has one device, not %d", device));
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    if (!prop || device != 0)
        return record_error(cudaErrorInvalidValue, "cudaGetDeviceProperties: bad argument");
    std::memset(prop, 0, sizeof *prop);
    std::snprintf(prop->name, sizeof prop->name, "minitensor CPU emulator");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    prop->totalGlobalMem = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    prop->sharedMemPerBlock = mt_emu::kStaticSharedLimit;
    prop->sharedMemPerBlockOptin = mt_emu::kSharedOptinLimit;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = 1024;
    prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = INT_MAX;
    prop->maxGridSize[1] = 65535;
    prop->maxGridSize[2] = 65535;
    prop->multiProcessorCount = mt_emu::settings().os_threads;
    /* The limits above are those of compute capability 9.0. */
    prop->major = 9;
    prop->minor = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    if (!value || device != 0)
        return record_error(cudaErrorInvalidValue, "cudaDeviceGetAttribute: bad argument");
    cudaDeviceProp prop;
    (void)cudaGetDeviceProperties(&prop, 0);
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = prop.multiProcessorCount; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = prop.major; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = prop.minor; return cudaSuccess;
    }
    return record_error(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute not emulated");
}

/* No driver or runtime: version 0 says so in messages. */
cudaError_t cudaDriverGetVersion(int *version)
{
    if (!version)
        return record_error(cudaErrorInvalidValue, "cudaDriverGetVersion: null pointer");
    *version = 0;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (!version)
        return record_error(cudaErrorInvalidValue, "cudaRuntimeGetVersion: null pointer");
    *version = 0;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return record_error(cudaErrorInvalidValue, "cudaMemGetInfo: null pointer");
    long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    *total_bytes = pages > 0 ? (size_t)pages * (size_t)page : 0;
    *free_bytes = avail > 0 ? (size_t)avail * (size_t)page : 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    if (!pool || device != 0)
        return record_error(cudaErrorInvalidValue, "cudaDeviceGetDefaultMemPool: bad argument");
    *pool = nullptr;
    return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void *) { return cudaSuccess; }

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    if (!event)
        return record_error(cudaErrorInvalidValue, "cudaEventCreate: null pointer");
    *event = new (std::nothrow) CUevent_st{};
    return *event ? cudaSuccess : record_error(cudaErrorMemoryAllocation, "cudaEventCreate");
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int)
{
    return cudaEventCreate(event);
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
    if (!event)
        return record_error(cudaErrorInvalidResourceHandle, "cudaEventQuery: null event");
    return mt_emu::take_pending_kernel_error();
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
    if (!stream)
        return record_error(cudaErrorInvalidValue, "cudaStreamCreate: null pointer");
    *stream = new (std::nothrow) CUstream_st{};
    return *stream ? cudaSuccess : record_error(cudaErrorMemoryAllocation, "cudaStreamCreate");
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (!stream)
        return record_error(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: the default stream");
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t) { return mt_emu::take_pending_kernel_error(); }

cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event, unsigned int)
{
    if (!event)
        return record_error(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: null event");
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    delete event;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t)
{
    if (!event)
        return record_error(cudaErrorInvalidValue, "cudaEventRecord: null event");
    event->when = std::chrono::steady_clock::now();
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    if (!event)
        return record_error(cudaErrorInvalidValue, "cudaEventSynchronize: null event");
    return mt_emu::take_pending_kernel_error();
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!ms || !start || !end)
        return record_error(cudaErrorInvalidValue, "cudaEventElapsedTime: null argument");
    *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
    return cudaSuccess;
}

