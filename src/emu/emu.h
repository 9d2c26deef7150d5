/*
 * emu.h: CUDA on the CPU, for the emulator build of minitensor.
 *
 * The emulator compiles the library's .cu files with the host C++ compiler
 * and runs their kernels with CUDA's semantics:
 *   - every thread of every block runs; each CUDA thread is a coroutine
 *     (a fiber with its own stack, src/emu/emu_fibers.cpp) on the OS
 *     thread that runs its block;
 *   - __syncthreads() is a real barrier: a thread that reaches it is
 *     suspended until every thread of its block has reached it;
 *   - __shared__ memory belongs to one block and is poisoned (filled with
 *     0xFF bytes, a NaN for float and double) when the block starts, so a read
 *     of shared memory that nothing wrote shows up as NaN in a test;
 *   - between barriers the threads of a block run in a shuffled order, so a
 *     missing barrier gives a wrong answer instead of passing by luck;
 *   - warp shuffles meet per warp (all lanes named in the mask exchange their
 *     values at once);
 *   - a bad launch configuration gets CUDA 13's error (cudaErrorInvalidValue),
 *     and a barrier that some threads reach while others have exited or wait
 *     elsewhere is reported as an error naming the kernel, never a hang.
 *
 * Two pieces of CUDA syntax are not C++: the launch `k<<<grid, block>>>(...)`
 * and `__shared__` declarations. minitensor/cuda/_cu2emu.py rewrites those (line for
 * line, so gdb and compiler messages point at the .cu file); everything else
 * is defined here. The CUDA runtime calls the host code makes (cudaMalloc,
 * cudaMemcpy, cudaGetLastError, ...) have twins with the same names.
 *
 * Environment (read once per process):
 *   MINITENSOR_EMU_SHUFFLE=0   run threads in order (default: shuffled)
 *   MINITENSOR_EMU_POISON=0    leave shared memory unpoisoned
 *   MINITENSOR_EMU_SEED=n      seed of the shuffle (default 0: fixed)
 *   MINITENSOR_EMU_THREADS=n   OS threads that run blocks (default: cores;
 *                              1 makes printf output and gdb sessions orderly)
 *   MINITENSOR_EMU_STACK=KiB   stack of each emulated thread (default 64)
 *   MINITENSOR_EMU_CHECK=full  shared-memory bounds, race and initialisation
 *                              checks (raw pointers and __shared__ structs
 *                              too), device allocations against a guard
 *                              page, reads of device memory nothing wrote
 *   MINITENSOR_EMU_INTERLEAVE=1  a thread yields after each read of a
 *                              checked __shared__ element, so an unguarded
 *                              read-modify-write loses updates
 *   MINITENSOR_EMU_DEVICES=n   emulated devices (default 1; emu_devices.cpp)
 *   MINITENSOR_EMU_WAIT=s      how long a kernel of a launch group waits at a
 *                              flag, or a thread on an mbarrier while no
 *                              barrier of its block changes, before it fails
 *                              (default 30; emu_group.cpp, emu_tma.cpp)
 */
#ifndef MT_EMU_H
#define MT_EMU_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

/* ---- qualifiers: meaningless on the CPU --------------------------------- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) alignas(n)
/* __restrict__ is understood by g++ and clang++ as it is. */

/* ---- built-in vector types ---------------------------------------------- */
struct uint3 {
    unsigned int x, y, z;
};

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
        : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

/* ---- runtime types (same names and numeric codes as CUDA's) -------------- */
enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorPeerAccessUnsupported = 217,
    cudaErrorPeerAccessAlreadyEnabled = 704,
    cudaErrorPeerAccessNotEnabled = 705,
    cudaErrorNotReady = 600,
    /* Faults inside a running kernel. The emulator reports its own kernel
     * errors as cudaErrorLaunchFailure; the others exist so host code can
     * name them in both builds. */
    cudaErrorIllegalAddress = 700,
    cudaErrorMisalignedAddress = 716,
    cudaErrorIllegalInstruction = 715,
    cudaErrorHardwareStackError = 714,
    cudaErrorInvalidAddressSpace = 717,
    cudaErrorAssert = 710,
    cudaErrorLaunchFailure = 719,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureUnmatched = 903,
    cudaErrorUnknown = 999,
    /* The emulator's own (no CUDA runtime has it): a launch abandoned
     * because the user pressed Ctrl-C while it ran. */
    cudaErrorInterrupted = 10000
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8
};

enum cudaMemPoolAttr {
    cudaMemPoolAttrReleaseThreshold = 4
};

/* The attributes cudaDeviceGetAttribute answers (CUDA's values). */
enum cudaDeviceAttr {
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};

typedef struct CUstream_st *cudaStream_t;
typedef struct CUmemPool_st *cudaMemPool_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;

enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2
};
enum {
    cudaGraphInstantiateFlagAutoFreeOnLaunch = 1
};

/* Event flags (CUDA's values). */
enum {
    cudaEventDefault = 0,
    cudaEventDisableTiming = 2
};

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int multiProcessorCount;
    int major;
    int minor;
    int l2CacheSize;
};

/* ---- runtime API twins (src/emu/emu_runtime.cpp) ------------------------- */
cudaError_t cudaMalloc(void **ptr, size_t bytes);
cudaError_t cudaFree(void *ptr);
cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = 0);
cudaError_t cudaMemset(void *ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream = 0);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
/* Streams: one in-order queue, so a stream is a handle and every launch on
 * any of them has finished when it returns. */
cudaError_t cudaStreamCreate(cudaStream_t *stream);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t err);
const char *cudaGetErrorName(cudaError_t err);
/* Devices (src/emu/emu_devices.cpp): MINITENSOR_EMU_DEVICES (default 1)
 * emulated devices, or mt_emu::set_devices. They share the host's one
 * address space, so any device's pointer works in any kernel; peer access
 * must still be enabled as on a GPU (cudaDeviceCanAccessPeer says 1 unless
 * set_devices said no), but the emulator does not check that a kernel keeps
 * to the peers enabled. The current device is per host thread. */
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceCanAccessPeer(int *can_access, int device, int peer);
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags);
cudaError_t cudaDeviceDisablePeerAccess(int peer);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaDriverGetVersion(int *version);
cudaError_t cudaRuntimeGetVersion(int *version);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
/* Host memory has no pool to tune: these accept the calls and do nothing. */
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void *value);
/* Graphs: while a stream captures, its launches, memsets and device copies
 * are recorded; a launch of the instantiated graph runs them again in order.
 * Memory allocated during the capture belongs to the graph (it keeps its
 * address for every replay, as a CUDA graph's allocation does) and is given
 * back when the graph and every instance of it are destroyed. A synchronizing
 * call, or a copy to or from the host, while this thread captures fails with
 * cudaErrorStreamCaptureUnsupported and invalidates the capture. */
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph);
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaEventCreate(cudaEvent_t *event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);

template <typename T>
cudaError_t cudaMalloc(T **ptr, size_t bytes)
{
    return cudaMalloc(reinterpret_cast<void **>(ptr), bytes);
}
template <typename T>
cudaError_t cudaMallocAsync(T **ptr, size_t bytes, cudaStream_t stream)
{
    return cudaMallocAsync(reinterpret_cast<void **>(ptr), bytes, stream);
}

namespace mt_emu {

/* Where the current CUDA thread is. Set by the scheduler before it resumes a
 * thread; read through the threadIdx/blockIdx/... macros below. Plain uint3
 * (no constructor), so that reading a thread-local of this type from another
 * file is a load, not a call to its initialisation check. */
struct BlockCoords {
    uint3 block_idx;
    uint3 block_dim;
    uint3 grid_dim;
};
extern thread_local const uint3 *tls_thread_idx;
extern thread_local BlockCoords tls_block;

/* Launching: what `kernel<<<grid, block, shared, stream>>>(args)` becomes
 * (the block scheduler, src/emu/emu_launch.cpp). */
struct LaunchConfig {
    const char *name;
    const void *kernel;
    dim3 grid;
    dim3 block;
    size_t shared_bytes;
    cudaStream_t stream;
};
/* Runs body(ctx) once for every thread of the grid; sets the error that
 * cudaGetLastError() will return. */
void run_kernel(const LaunchConfig &cfg, void (*body)(void *), void *ctx);
/* Graph capture (emu_runtime.cpp): while a stream captures, the work queued
 * on it is recorded instead of run, and a launch of the graph runs it. */
bool capturing(cudaStream_t stream);
void record_work(cudaStream_t stream, std::function<void()> work);
cudaError_t set_function_max_dynamic_shared(const void *kernel, int bytes);

/* Launch groups (emu_group.cpp): one kernel over several emulated devices.
 * On a GPU, launches on different devices run at the same time, and a
 * kernel may spin on a flag that another device's kernel sets. The
 * emulator runs launches one after another, and a block to its end, so
 * such a kernel would wait forever for a launch that has not started.
 * Between begin_launch_group() and end_launch_group() on one host thread,
 * launches are held instead of run; end_launch_group() runs all of them
 * together, every block of every launch on an OS thread of its own (all
 * co-resident, as the blocks of a GPU grid that fits its SMs are), and
 * returns the first error. Kernels wait for flags with wait_flag_at_least
 * (below), never a bare spin loop. */
void begin_launch_group();
cudaError_t end_launch_group();
/* Closes the open group without running what it holds (host code that
 * failed half-way through its launches). */
void abandon_launch_group();
bool in_launch_group();
void add_to_launch_group(const LaunchConfig &cfg, void (*body)(void *), std::shared_ptr<void> ctx);
/* Inside a kernel of a launch group: waits until *flag >= value (an acquire
 * load), yielding the CPU between looks; a KernelError after
 * MINITENSOR_EMU_WAIT seconds (default 30) naming `what`, or as soon as
 * another block of the group has failed (a barrier it will never reach). */
void wait_flag_at_least(const unsigned *flag, unsigned value, const char *what);
/* count emulated devices (1..64); peer_access false makes every pair
 * answer cudaDeviceCanAccessPeer 0 (to test the refusal). Refused while
 * a launch group is open. */
cudaError_t set_devices(int count, bool peer_access);

template <typename... Params>
struct Launcher {
    LaunchConfig cfg;
    void (*kernel)(Params...);

    template <typename... Args>
    void operator()(Args &&...args) const
    {
        static_assert(sizeof...(Args) == sizeof...(Params),
                      "kernel launched with the wrong number of arguments");
        /* One copy of the arguments; each emulated thread gets its own copy
         * of the by-value parameters when the kernel is called, as on a GPU. */
        struct Call {
            void (*kernel)(Params...);
            std::tuple<Params...> args;
        } call{kernel, std::tuple<Params...>(std::forward<Args>(args)...)};
        auto body = [](void *p) {
            Call *c = static_cast<Call *>(p);
            std::apply(c->kernel, c->args);
        };
        if (in_launch_group()) {
            /* Held, with its own copy of the arguments, until the group ends
             * and runs every launch of it at once (emu_group.cpp). */
            add_to_launch_group(cfg, body, std::make_shared<Call>(call));
            return;
        }
        if (cfg.stream != nullptr && capturing(cfg.stream)) {
            /* Recorded with its own copy of the arguments, as a CUDA graph's
             * kernel node keeps the values the capture saw. */
            auto saved = std::make_shared<Call>(call);
            const LaunchConfig c = cfg;
            record_work(cfg.stream, [c, saved, body] { run_kernel(c, body, saved.get()); });
            return;
        }
        run_kernel(cfg, body, &call);
    }
};

template <typename... Params>
Launcher<Params...> launch(const char *name, void (*kernel)(Params...), dim3 grid, dim3 block,
                           size_t shared_bytes = 0, cudaStream_t stream = 0)
{
    /* One in-order queue: every launch finishes before it returns (the
     * stream only matters while it captures a graph). */
    return Launcher<Params...>{
        LaunchConfig{name, reinterpret_cast<const void *>(kernel), grid, block, shared_bytes, stream},
        kernel};
}

/* Launches per kernel since the last reset (emu_launch_count.cpp), for
 * mt_launch_count: the launches of the kernels named `kernel` whose
 * demangled signature contains `with` (any, when null or ""). */
void reset_launch_counts();
int64_t launch_count(const char *kernel, const char *with);

/* Shared memory of the running block: static declarations are keyed by their
 * source line, so every thread of the block gets the same array. `type` is
 * the declared type's text for a variable that is not an array (null for an
 * array), for messages. */
void *block_shared_alloc(const char *name, const char *type, const char *file, int line, size_t bytes);
void *dynamic_shared_ptr(void);

} /* namespace mt_emu */

#include "emu_shared_views.h"

namespace mt_emu {

/* Barriers. Every thread of the block must reach the same __syncthreads();
 * every lane named in `mask` must reach the warp-level meeting point. */
void sync_block(const char *file, int line);
/* Publishes `bytes` bytes of `value` for the warp, waits for every lane in
 * mask, copies lane src_lane's bytes into `out` (own bytes when src_lane < 0
 * or that lane does not exist), and waits again so no lane races ahead. */
void warp_exchange(unsigned mask, const void *value, void *out, size_t bytes, int src_lane);
/* Bit i set when lane i of this warp passed a non-zero predicate. */
unsigned warp_ballot(unsigned mask, int predicate);
int lane_id(void);

} /* namespace mt_emu */

template <typename Kernel>
cudaError_t cudaFuncSetAttribute(Kernel *kernel, cudaFuncAttribute attr, int value)
{
    if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize)
        return ::mt_emu::set_function_max_dynamic_shared(reinterpret_cast<const void *>(kernel), value);
    return cudaSuccess;
}

/* ---- built-in variables -------------------------------------------------- */
#define threadIdx (*::mt_emu::tls_thread_idx)
#define blockIdx (::mt_emu::tls_block.block_idx)
#define blockDim (::mt_emu::tls_block.block_dim)
#define gridDim (::mt_emu::tls_block.grid_dim)
constexpr int warpSize = 32;

/* ---- synchronisation ------------------------------------------------------ */
/* A macro, so that the barrier knows its call site: threads of one block
 * waiting at two different __syncthreads() statements are divergence. */
#define __syncthreads() ::mt_emu::sync_block(__FILE__, __LINE__)
inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    int dummy = 0;
    ::mt_emu::warp_exchange(mask, &dummy, &dummy, sizeof dummy, -1);
}
inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
/* Orders this thread's writes for every observer, other devices and the
 * host included; one host address space makes all fences one fence here. */
inline void __threadfence_system(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* ---- warp shuffles: lane arithmetic as in the CUDA programming guide ------ */
template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize)
{
    int lane = ::mt_emu::lane_id();
    int src = (lane & ~(width - 1)) + (src_lane & (width - 1));
    T out = var;
    ::mt_emu::warp_exchange(mask, &var, &out, sizeof(T), src);
    return out;
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize)
{
    int lane = ::mt_emu::lane_id();
    int in_segment = lane & (width - 1);
    int src = in_segment + (int)delta < width ? lane + (int)delta : -1;
    T out = var;
    ::mt_emu::warp_exchange(mask, &var, &out, sizeof(T), src);
    return out;
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize)
{
    int lane = ::mt_emu::lane_id();
    int in_segment = lane & (width - 1);
    int src = in_segment >= (int)delta ? lane - (int)delta : -1;
    T out = var;
    ::mt_emu::warp_exchange(mask, &var, &out, sizeof(T), src);
    return out;
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize)
{
    int lane = ::mt_emu::lane_id();
    int src = lane ^ lane_mask;
    if ((src & ~(width - 1)) != (lane & ~(width - 1)))
        src = -1;
    T out = var;
    ::mt_emu::warp_exchange(mask, &var, &out, sizeof(T), src);
    return out;
}
inline unsigned __ballot_sync(unsigned mask, int predicate)
{
    return ::mt_emu::warp_ballot(mask, predicate);
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline int __all_sync(unsigned mask, int predicate)
{
    return (__ballot_sync(mask, predicate) & mask) == (__ballot_sync(mask, 1) & mask);
}

/* ---- atomics: real atomics, because blocks run on several OS threads ------
 * (through the alias of shared memory: atomics never race, so the checks
 * need not see them) */
template <typename T>
T mt_emu_atomic_update(T *address, T (*update)(T, T), T val)
{
    /* Compare-and-swap on the bit pattern, as a GPU does for float atomics. */
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics on 4- or 8-byte values only");
    using Bits = typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type;
    Bits *bits = reinterpret_cast<Bits *>(::mt_emu::from_raw(address));
    Bits expected = __atomic_load_n(bits, __ATOMIC_RELAXED);
    for (;;) {
        T old;
        std::memcpy(&old, &expected, sizeof old);
        T next = update(old, val);
        Bits desired;
        std::memcpy(&desired, &next, sizeof desired);
        if (__atomic_compare_exchange_n(bits, &expected, desired, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED))
            return old;
    }
}
template <typename T> T mt_emu_add(T a, T b) { return a + b; }
template <typename T> T mt_emu_max(T a, T b) { return a > b ? a : b; }
template <typename T> T mt_emu_min(T a, T b) { return a < b ? a : b; }
template <typename T> T mt_emu_second(T, T b) { return b; }

inline float atomicAdd(float *a, float v) { return mt_emu_atomic_update<float>(a, mt_emu_add<float>, v); }
inline double atomicAdd(double *a, double v) { return mt_emu_atomic_update<double>(a, mt_emu_add<double>, v); }
inline int atomicAdd(int *a, int v) { return __atomic_fetch_add(::mt_emu::from_raw(a), v, __ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned *a, unsigned v) { return __atomic_fetch_add(::mt_emu::from_raw(a), v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v)
{
    return __atomic_fetch_add(::mt_emu::from_raw(a), v, __ATOMIC_SEQ_CST);
}
inline int atomicMax(int *a, int v) { return mt_emu_atomic_update<int>(a, mt_emu_max<int>, v); }
inline int atomicMin(int *a, int v) { return mt_emu_atomic_update<int>(a, mt_emu_min<int>, v); }
inline unsigned long long atomicMin(unsigned long long *a, unsigned long long v)
{
    return mt_emu_atomic_update<unsigned long long>(a, mt_emu_min<unsigned long long>, v);
}
inline unsigned long long atomicMax(unsigned long long *a, unsigned long long v)
{
    return mt_emu_atomic_update<unsigned long long>(a, mt_emu_max<unsigned long long>, v);
}
inline int atomicExch(int *a, int v) { return __atomic_exchange_n(::mt_emu::from_raw(a), v, __ATOMIC_SEQ_CST); }
inline float atomicExch(float *a, float v) { return mt_emu_atomic_update<float>(a, mt_emu_second<float>, v); }
inline int atomicCAS(int *a, int compare, int v)
{
    __atomic_compare_exchange_n(::mt_emu::from_raw(a), &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;
}
inline unsigned long long atomicCAS(unsigned long long *a, unsigned long long compare,
                                    unsigned long long v)
{
    __atomic_compare_exchange_n(::mt_emu::from_raw(a), &compare, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare;
}

/* ---- device math that the host library lacks ------------------------------ */
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, sizeof f); return f; }
inline int __float_as_int(float f) { int v; std::memcpy(&v, &f, sizeof v); return v; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, sizeof d); return d; }
inline long long __double_as_longlong(double d) { long long v; std::memcpy(&v, &d, sizeof v); return v; }
template <typename T> T __ldg(const T *p) { return *p; }

/* CUDA's global min/max overloads for device code. */
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

#endif /* MT_EMU_H */
