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
    cudaDevAttrComputeCapabilityMinor = 76
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
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
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

/* ---- raw addresses of shared memory (MINITENSOR_EMU_CHECK=full, x86-64) -----
 * In full mode a block's shared memory is mapped twice (emu_shared.cpp): the
 * checked views below read and write it through one mapping, the *alias*;
 * every other access (a pointer kept from &tile[i], a __shared__ struct such
 * as BlockScratch, pointer arithmetic) gets an address in the other, the
 * *raw* mapping, which is inaccessible: the access faults, and the fault
 * handler records it for the race and initialisation checks before letting
 * it through (emu_faults.cpp). to_raw and from_raw convert between the two;
 * outside full mode both mappings are one and they return their argument. */
extern uintptr_t shared_alias_lo, shared_raw_lo, shared_arena_span;
template <typename T>
inline T *to_raw(T *alias)
{
    uintptr_t a = (uintptr_t)alias;
    return a - shared_alias_lo < shared_arena_span ? (T *)(a - shared_alias_lo + shared_raw_lo) : alias;
}
template <typename T>
inline T *from_raw(T *raw)
{
    uintptr_t a = (uintptr_t)raw;
    return a - shared_raw_lo < shared_arena_span ? (T *)(a - shared_raw_lo + shared_alias_lo) : raw;
}
/* Shared bytes written by the emulator on a thread's behalf without a check
 * (a WMMA store, an unchecked asynchronous copy): initialised from now on. */
void shared_initialised(const void *p, size_t bytes);

/* ---- checked shared arrays (MINITENSOR_EMU_CHECK=full) ---------------------
 * cu2emu.py declares every __shared__ array as a SharedView: an object that
 * indexes like the array (tile[i][j]) and hands out, for an element of an
 * arithmetic type, a SharedRef that records each read and write. With the
 * check off (the default), check_full is false and a view costs what the
 * plain array does (one predictable branch per access). With it on, an index
 * outside the array and an access that races with another thread's since
 * their last common barrier are kernel errors naming the array, the element,
 * the threads and the .cu lines (cu2emu rewrites `tile[` into
 * `tile(__LINE__)[` so that each access knows its line). */
extern bool check_full;
/* check_full, or MINITENSOR_EMU_INTERLEAVE: a checked read calls shared_access. */
extern bool shared_hooks;
/* MINITENSOR_EMU_INTERLEAVE: a checked read calls shared_read_done. */
extern bool interleave_reads;

/* What the checks know of one __shared__ array of the running block. */
struct SharedArrayInfo {
    const char *name;
    const char *file;
    int decl_line;
    int rank;
    size_t dims[4];
    size_t elem_size;
    unsigned char *base;
};
const SharedArrayInfo *shared_array_info(const char *name, const char *file, int line, int rank,
                                         const size_t *dims, size_t elem_size, bool dynamic);
[[noreturn]] void shared_index_error(const SharedArrayInfo *info, const void *sub, int sub_rank,
                                     long long index, size_t extent, int line);
/* line 0: the access is at code address pc (for addr2line) */
void shared_access(const SharedArrayInfo *info, const void *elem, bool write, int line, const void *pc);
/* After a checked read: with MINITENSOR_EMU_INTERLEAVE, the thread yields. */
void shared_read_done(void);
/* A vector access of `bytes` bytes at p (a load or store through a pointer
 * cast from &tile[i][j]): bounds of the whole array, alignment, and a race
 * check of every 4-byte word. */
void shared_vector_access(const SharedArrayInfo *info, const void *p, size_t bytes, bool write, int line);
/* An element of struct type read or written whole: each of its words. */
void shared_struct_access(const SharedArrayInfo *info, const void *p, size_t bytes, bool write, int line,
                          const void *pc);
/* The info of member array `member` (n elements) of the __shared__ struct
 * variable holding p. */
const SharedArrayInfo *shared_member_info(const void *p, const char *member, size_t n, size_t elem_size);

/* &tile[i][j] for a checked element: converts to T * (atomics take it so,
 * unchecked: atomics do not race), and keeps what the checks need for
 * reinterpret_cast<V *>(&tile[i][j]), which cu2emu.py rewrites into
 * shared_cast<V>(&tile[i][j]). */
template <typename T>
struct SharedPtr {
    T *p;
    const SharedArrayInfo *info;
    int line;
    /* Kept in a variable, the address is raw: its accesses fault and are checked. */
    operator T *() const { return to_raw(p); }
};

/* *shared_cast<V>(&tile[i][j]): a vector V read or written whole. */
template <typename V>
struct SharedVecRef {
    V *p;
    const SharedArrayInfo *info;
    int line;
    operator V() const
    {
        if (__builtin_expect(check_full, 0))
            shared_vector_access(info, p, sizeof(V), false, line);
        return *p;
    }
    const SharedVecRef &operator=(const V &v) const
    {
        if (__builtin_expect(check_full, 0))
            shared_vector_access(info, p, sizeof(V), true, line);
        *p = v;
        return *this;
    }
};
template <typename V>
struct SharedVecPtr {
    V *p;
    const SharedArrayInfo *info;
    int line;
    SharedVecRef<V> operator*() const { return SharedVecRef<V>{p, info, line}; }
    SharedVecRef<V> operator[](ptrdiff_t i) const { return SharedVecRef<V>{p + i, info, line}; }
    operator V *() const { return to_raw(p); }
};
template <typename V, typename E>
SharedVecPtr<V> shared_cast(SharedPtr<E> q)
{
    return SharedVecPtr<V>{reinterpret_cast<V *>(q.p), q.info, q.line};
}
/* An element of struct type, or a pointer from elsewhere: the plain cast. */
template <typename V, typename P>
V *shared_cast(P *q)
{
    return reinterpret_cast<V *>(to_raw(q));
}

/* ---- asynchronous copies into shared memory (cp.async; src/async_copy.h) --
 * A copy is queued by the thread that issues it and lands (its bytes are
 * written) only when that thread waits for its group, so a kernel that reads
 * a stage before waiting for it reads stale bytes here, as it may on a GPU.
 * In full mode the destination is checked (bounds, alignment) and counted as
 * written twice, when the copy is issued and when it lands: on a GPU the
 * write happens somewhere in between, so a reader that no barrier orders
 * after either point races with it. */
void async_copy(const SharedArrayInfo *info, void *dst, const void *src, size_t bytes, size_t src_bytes, int line);
void async_commit(void);
void async_wait(int prior);
template <typename T>
void async_copy_to(SharedPtr<T> dst, const void *src, size_t bytes, size_t src_bytes)
{
    async_copy(dst.info, dst.p, src, bytes, src_bytes, dst.line);
}
inline void async_copy_to(void *dst, const void *src, size_t bytes, size_t src_bytes)
{
    async_copy(nullptr, from_raw(dst), src, bytes, src_bytes, 0);
}

template <typename T>
struct SharedRef {
    T *p;
    const SharedArrayInfo *info;
    int line;
    const void *pc; /* where it is used, when line is 0 */
    void check(bool write) const
    {
        if constexpr (std::is_arithmetic<T>::value)
            shared_access(info, p, write, line, pc);
        else
            shared_struct_access(info, p, sizeof(T), write, line, pc);
    }
    operator T() const
    {
        if (__builtin_expect(shared_hooks, 0)) {
            check(false);
            T v = *p;
            if (interleave_reads)
                shared_read_done();
            return v;
        }
        return *p;
    }
    const SharedRef &operator=(const T &v) const
    {
        if (__builtin_expect(check_full, 0))
            check(true);
        *p = v;
        return *this;
    }
    const SharedRef &operator=(const SharedRef &o) const { return *this = (T)o; }
    template <typename U> const SharedRef &operator+=(U v) const { return *this = (T)(T(*this) + v); }
    template <typename U> const SharedRef &operator-=(U v) const { return *this = (T)(T(*this) - v); }
    template <typename U> const SharedRef &operator*=(U v) const { return *this = (T)(T(*this) * v); }
    template <typename U> const SharedRef &operator/=(U v) const { return *this = (T)(T(*this) / v); }
    const SharedRef &operator++() const { return *this = (T)(T(*this) + 1); }
    const SharedRef &operator--() const { return *this = (T)(T(*this) - 1); }
    T operator++(int) const { T old = *this; *this = (T)(old + 1); return old; }
    T operator--(int) const { T old = *this; *this = (T)(old - 1); return old; }
    /* The address: accesses through it are not seen, except the vector
     * loads and stores of shared_cast (atomics on shared memory are no
     * races anyway). */
    SharedPtr<T> operator&() const { return SharedPtr<T>{p, info, line}; }
};

template <typename A>
struct SharedView;

template <typename E>
struct SharedElem {
    /* Every element is read and written whole through a SharedRef (a
     * struct's words all at once: its members are not reached one by one,
     * which is all the library's kernels do with one). */
    using type = SharedRef<E>;
    static type make(E *p, const SharedArrayInfo *info, int line) { return SharedRef<E>{p, info, line, nullptr}; }
};
template <typename E, size_t M>
struct SharedElem<E[M]> {
    using type = SharedView<E[M]>;
    static type make(E (*p)[M], const SharedArrayInfo *info, int line) { return type{p, info, line, M}; }
};

template <typename I>
constexpr bool negative_index(I i)
{
    if constexpr (std::is_signed<I>::value)
        return i < 0;
    else
        return false;
}

/* A view of an array A = E[N] (E maybe an array itself); extent is N, or
 * for a dynamic array (E[]) the number of elements the launch gave. */
template <typename E, size_t N>
struct SharedView<E[N]> {
    E (*p)[N];
    const SharedArrayInfo *info;
    int line;
    size_t extent;
    template <typename I>
    typename SharedElem<E>::type operator[](I i) const
    {
        if (__builtin_expect(check_full, 0) && (negative_index(i) || (size_t)i >= extent))
            shared_index_error(info, p, (int)std::rank<E[N]>::value, (long long)i, extent, line);
        return SharedElem<E>::make(&(*p)[i], info, line);
    }
    SharedView operator()(int at) const { return SharedView{p, info, at, extent}; }
    operator E *() const { return to_raw(*p); }
};

template <typename A>
SharedView<A> shared_array(const char *name, const char *file, int line)
{
    static_assert(std::rank<A>::value >= 1 && std::rank<A>::value <= 4, "__shared__ arrays of rank 1 to 4");
    void *mem = block_shared_alloc(name, nullptr, file, line, sizeof(A));
    const SharedArrayInfo *info = nullptr;
    if (check_full) {
        size_t dims[4] = {std::extent<A, 0>::value, std::extent<A, 1>::value, std::extent<A, 2>::value,
                          std::extent<A, 3>::value};
        info = shared_array_info(name, file, line, (int)std::rank<A>::value, dims,
                                 sizeof(typename std::remove_all_extents<A>::type), false);
    }
    return SharedView<A>{static_cast<A *>(mem), info, line, std::extent<A, 0>::value};
}

/* The member array of a __shared__ struct that the library declares
 * (BlockScratch's `slot`, src/block_reduce.h, under MT_EMULATOR): slot[i] is
 * checked as an element of a __shared__ array is; the array itself decays to
 * its raw address (a pointer kept from it is checked through the MMU). */
template <typename E, size_t N>
struct SharedSlots {
    E data[N];
    template <typename I>
    SharedRef<E> operator[](I i)
    {
        static_assert(std::is_integral<I>::value, "an index");
        if (__builtin_expect(check_full, 0))
            return checked((long long)i);
        return SharedRef<E>{from_raw(&data[0]) + i, nullptr, 0, nullptr};
    }
    /* Not inlined, so that its return address is a place in the caller
     * (src/block_reduce.h is not rewritten by cu2emu.py to pass __LINE__):
     * addr2line names that line in a message. */
    [[gnu::noinline]] SharedRef<E> checked(long long i)
    {
        E *alias = from_raw(&data[0]);
        /* within the call instruction: its line is the caller's */
        const void *pc = static_cast<const char *>(__builtin_return_address(0)) - 1;
        const SharedArrayInfo *info = shared_member_info(alias, "slot", N, sizeof(E));
        if (i < 0 || (unsigned long long)i >= N)
            shared_index_error(info, alias, 1, i, N, 0);
        return SharedRef<E>{alias + i, info, 0, pc};
    }
    operator E *() { return data; }
};

/* extern __shared__ T name[]: viewed as T[huge], with the launch's size.
 * Huge but below 2**31: GCC 12 does not match SharedView<E[N]> to an array
 * type whose bound is 2**31 or more (the view would be an incomplete type). */
constexpr size_t kDynamicExtent = (size_t)1 << 30;
size_t dynamic_shared_bytes(void);
template <typename T>
SharedView<T[kDynamicExtent]> dynamic_shared_array(const char *name, const char *file, int line)
{
    size_t n = dynamic_shared_bytes() / sizeof(T);
    const SharedArrayInfo *info = nullptr;
    if (check_full) {
        size_t dims[4] = {n, 0, 0, 0};
        info = shared_array_info(name, file, line, 1, dims, sizeof(T), true);
    }
    return SharedView<T[kDynamicExtent]>{reinterpret_cast<T (*)[kDynamicExtent]>(dynamic_shared_ptr()), info,
                                         line, n};
}

/* __shared__ T name; of a struct type: the raw address (see to_raw). */
template <typename T>
T &block_shared(const char *name, const char *type, const char *file, int line)
{
    return *to_raw(static_cast<T *>(block_shared_alloc(name, type, file, line, sizeof(T))));
}
template <typename T>
T *dynamic_shared(void)
{
    return to_raw(static_cast<T *>(dynamic_shared_ptr()));
}

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
