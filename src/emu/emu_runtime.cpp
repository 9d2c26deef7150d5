/*
 * emu_runtime.cpp: the CUDA runtime API of the CPU emulator (see emu.h):
 * the functions host code calls (cudaMalloc, cudaMemcpy, cudaGetLastError,
 * streams, graphs, events, ...), the settings read from the environment,
 * and the per-thread error state they report through. "Device" memory is
 * host memory.
 *
 * The error texts are emu_errors.cpp's; the devices (how many, the current
 * one, their properties, peer access) emu_devices.cpp's; device memory is
 * emu_memory.cpp's; running kernels is the block scheduler's job
 * (emu_launch.cpp and the files emu_block.h lists; launch groups over
 * several devices: emu_group.cpp).
 */
#include "emu_internal.h"

#include <chrono>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

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
        /* MINITENSOR_EMU_STACK_KB is the setting's older name. */
        r.stack_bytes =
            (size_t)std::max(16L, env_long("MINITENSOR_EMU_STACK", env_long("MINITENSOR_EMU_STACK_KB", 64))) * 1024;
        r.interleave = env_long("MINITENSOR_EMU_INTERLEAVE", 0) != 0;
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
bool interleave_reads = settings().interleave;
bool shared_hooks = check_full || interleave_reads;

/* ---- errors (per host thread, as in the CUDA runtime) -------------------- */

thread_local cudaError_t last_error = cudaSuccess;
thread_local cudaError_t detail_code = cudaSuccess;
thread_local std::string detail_text;


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

/* What a capture recorded: the work in order, and the memory allocated
 * during it (the graph's, kept while the graph or an instance lives). */
struct GraphData {
    std::vector<std::function<void()>> work;
    std::vector<void *> memory;
    ~GraphData();
};

struct CUgraph_st {
    std::shared_ptr<GraphData> data;
};

struct CUgraphExec_st {
    std::shared_ptr<GraphData> data;
};

/* A stream: a handle, as every launch runs to its end in order; while it
 * captures, the graph being recorded. */
struct CUstream_st {
    std::shared_ptr<GraphData> capture;
    bool invalidated = false;
};

namespace {

std::mutex g_graph_mutex;
std::set<CUstream_st *> g_streams;           /* made by cudaStreamCreate, not destroyed */
std::atomic<int> g_capturing{0};             /* streams capturing now */
std::atomic<int> g_graph_memory_count{0};    /* entries in g_graph_memory */
/* Memory allocated during a capture -> whether the program freed it since
 * (the graph still uses it; it is given back with the graph). */
std::unordered_map<void *, bool> g_graph_memory;
thread_local CUstream_st *t_capturing = nullptr; /* the stream this thread captures on */

CUstream_st *capturing_stream(cudaStream_t stream)
{
    if (g_capturing.load(std::memory_order_relaxed) == 0 || stream == nullptr)
        return nullptr;
    std::lock_guard<std::mutex> lock(g_graph_mutex);
    return g_streams.count(stream) && stream->capture ? stream : nullptr;
}

/* A call that would wait for the device, made while this thread captures:
 * refused, and the capture can no longer succeed (as on a GPU). */
cudaError_t refuse_while_capturing(const char *call)
{
    t_capturing->invalidated = true;
    return record_error(cudaErrorStreamCaptureUnsupported,
                        mt_emu::format("%s is not allowed while a stream captures a graph: it would wait for "
                                       "work that is only being recorded", call));
}

} /* namespace */

GraphData::~GraphData()
{
    std::vector<void *> mine;
    {
        std::lock_guard<std::mutex> lock(g_graph_mutex);
        for (void *p : memory) {
            auto it = g_graph_memory.find(p);
            if (it == g_graph_memory.end())
                continue;
            if (it->second) /* the program freed it already: now it goes */
                mine.push_back(p);
            g_graph_memory.erase(it); /* otherwise it is the program's again */
            g_graph_memory_count.fetch_sub(1);
        }
    }
    for (void *p : mine)
        mt_emu::device_free(p);
}

namespace mt_emu {

bool capturing(cudaStream_t stream) { return capturing_stream(stream) != nullptr; }

void record_work(cudaStream_t stream, std::function<void()> work)
{
    std::lock_guard<std::mutex> lock(g_graph_mutex);
    stream->capture->work.push_back(std::move(work));
}

} /* namespace mt_emu */

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
    if (g_graph_memory_count.load(std::memory_order_relaxed) > 0) {
        /* A graph's memory: its replays still write there, so it stays
         * until the graph goes (on a GPU a replay allocates it again). */
        std::lock_guard<std::mutex> lock(g_graph_mutex);
        auto it = g_graph_memory.find(ptr);
        if (it != g_graph_memory.end()) {
            if (it->second)
                return record_error(cudaErrorInvalidValue, mt_emu::format("cudaFree: %p was already freed", ptr));
            it->second = true;
            return cudaSuccess;
        }
    }
    if (!mt_emu::device_free(ptr))
        return record_error(cudaErrorInvalidValue,
                            mt_emu::format("cudaFree: %p is not a live device allocation (%s)", ptr,
                                           mt_emu::describe_address(ptr).c_str()));
    return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **ptr, size_t bytes, cudaStream_t stream)
{
    cudaError_t err = cudaMalloc(ptr, bytes);
    CUstream_st *s = capturing_stream(stream);
    if (err == cudaSuccess && s && *ptr) {
        std::lock_guard<std::mutex> lock(g_graph_mutex);
        s->capture->memory.push_back(*ptr);
        g_graph_memory[*ptr] = false;
        g_graph_memory_count.fetch_add(1);
    }
    return err;
}

cudaError_t cudaFreeAsync(void *ptr, cudaStream_t stream)
{
    (void)stream; /* a free inside a capture: the graph's memory stays with the graph (cudaFree) */
    return cudaFree(ptr);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    if (t_capturing)
        return refuse_while_capturing("cudaMemcpy");
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

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream)
{
    if (capturing_stream(stream)) {
        if (kind != cudaMemcpyDeviceToDevice)
            return refuse_while_capturing("cudaMemcpyAsync to or from host memory");
        mt_emu::record_work(stream, [dst, src, bytes] {
            mt_emu::initialise_device_range(dst, bytes);
            mt_emu::copy_device_range(dst, src, bytes);
        });
        return cudaSuccess;
    }
    if (t_capturing)
        return refuse_while_capturing("cudaMemcpyAsync on another stream");
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

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t bytes, cudaStream_t stream)
{
    if (capturing_stream(stream)) {
        mt_emu::record_work(stream, [ptr, value, bytes] { cudaMemset(ptr, value, bytes); });
        return cudaSuccess;
    }
    return cudaMemset(ptr, value, bytes);
}

/* Every emulated launch has finished when it returns; a synchronize
 * reports the error of a kernel that failed since the last report. */
cudaError_t cudaDeviceSynchronize(void)
{
    if (t_capturing)
        return refuse_while_capturing("cudaDeviceSynchronize");
    return mt_emu::take_pending_kernel_error();
}

cudaError_t cudaStreamSynchronize(cudaStream_t)
{
    if (t_capturing)
        return refuse_while_capturing("cudaStreamSynchronize");
    return mt_emu::take_pending_kernel_error();
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t err = mt_emu::last_error;
    mt_emu::last_error = cudaSuccess;
    mt_emu::pending_kernel_error = cudaSuccess;
    return err;
}

cudaError_t cudaPeekAtLastError(void) { return mt_emu::last_error; }

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
    if (!*stream)
        return record_error(cudaErrorMemoryAllocation, "cudaStreamCreate");
    std::lock_guard<std::mutex> lock(g_graph_mutex);
    g_streams.insert(*stream);
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (!stream)
        return record_error(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: the default stream");
    {
        std::lock_guard<std::mutex> lock(g_graph_mutex);
        if (!g_streams.erase(stream))
            return record_error(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: not a stream of this process");
        if (stream->capture)
            g_capturing.fetch_sub(1);
    }
    if (t_capturing == stream)
        t_capturing = nullptr;
    delete stream;
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode)
{
    if (t_capturing)
        return record_error(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture: this thread captures already");
    std::lock_guard<std::mutex> lock(g_graph_mutex);
    if (!stream || !g_streams.count(stream))
        return record_error(cudaErrorStreamCaptureUnsupported,
                            "cudaStreamBeginCapture: the legacy default stream cannot be captured; use a stream "
                            "made with cudaStreamCreate");
    stream->capture = std::make_shared<GraphData>();
    stream->invalidated = false;
    g_capturing.fetch_add(1);
    t_capturing = stream;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *graph)
{
    if (!graph)
        return record_error(cudaErrorInvalidValue, "cudaStreamEndCapture: null graph pointer");
    *graph = nullptr;
    std::shared_ptr<GraphData> data;
    bool invalidated;
    {
        std::lock_guard<std::mutex> lock(g_graph_mutex);
        if (!stream || !g_streams.count(stream) || !stream->capture)
            return record_error(cudaErrorStreamCaptureUnmatched, "cudaStreamEndCapture: the stream is not capturing");
        data = std::move(stream->capture);
        stream->capture.reset();
        invalidated = stream->invalidated;
        g_capturing.fetch_sub(1);
    }
    t_capturing = nullptr;
    if (invalidated)
        return record_error(cudaErrorStreamCaptureInvalidated,
                            "cudaStreamEndCapture: the capture was invalidated by a call it does not allow");
    *graph = new (std::nothrow) CUgraph_st{std::move(data)};
    return *graph ? cudaSuccess : record_error(cudaErrorMemoryAllocation, "cudaStreamEndCapture");
}

cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *exec, cudaGraph_t graph, unsigned long long)
{
    if (!exec || !graph)
        return record_error(cudaErrorInvalidValue, "cudaGraphInstantiateWithFlags: null argument");
    *exec = new (std::nothrow) CUgraphExec_st{graph->data};
    return *exec ? cudaSuccess : record_error(cudaErrorMemoryAllocation, "cudaGraphInstantiateWithFlags");
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t)
{
    if (!exec)
        return record_error(cudaErrorInvalidValue, "cudaGraphLaunch: null graph");
    if (t_capturing)
        return refuse_while_capturing("cudaGraphLaunch");
    /* The recorded work, in order; the first failure stops the replay and is
     * what the launch returns (a kernel's error is also pending, as after a
     * failed launch of it). */
    for (const auto &work : exec->data->work) {
        work();
        if (mt_emu::last_error != cudaSuccess)
            return mt_emu::last_error;
    }
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec)
{
    delete exec;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph)
{
    delete graph;
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
    if (t_capturing)
        return refuse_while_capturing("cudaEventSynchronize");
    return mt_emu::take_pending_kernel_error();
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (!ms || !start || !end)
        return record_error(cudaErrorInvalidValue, "cudaEventElapsedTime: null argument");
    *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
    return cudaSuccess;
}

