/*
 * comm_nccl.cu: the collectives of the CUDA build, over NCCL on device
 * memory (see comm.cu).
 *
 * Where the time goes. A collective is a kernel NCCL launches; the floor of
 * a small all-reduce is that launch and one round trip over NVLink (~10 us).
 * So a call here does what a kernel launch does and no more: the argument
 * checks, ncclAllReduce on the calling thread's current stream (the one the
 * core library queues its kernels on, mt_get_stream), and an event recorded
 * after it. No copy, no staging buffer (NCCL reads and writes the tensor in
 * place, in its own dtype), no host wait: later kernels on the stream see
 * the result because they are queued after it.
 *
 * Overlap. mtd_all_reduce_start runs the collective on a second stream of
 * the library's (non-blocking: it does not wait for the legacy default
 * stream, nor that one for it): an event recorded on the current stream
 * makes it start after the work queued so far (the kernels that wrote the
 * tensor), and an event recorded after it is the work handle, which
 * mtd_work_wait makes the current stream wait for. In between, the current
 * stream runs on: DDP reduces a bucket of gradients while the backward pass
 * computes the next ones.
 *
 * Nothing hangs. Since no call waits, a watchdog thread does: each
 * collective's event goes on a list with its deadline; the thread polls the
 * oldest every millisecond, and past the deadline aborts the communicator
 * (ncclCommAbort from another thread, as NCCL allows: the spinning kernels
 * exit) and records the message, which every later call returns
 * (MTD_ERR_TIMEOUT).
 *
 * A blocking communicator (config.blocking = 1, torch's default too). A
 * nonblocking one (what ABI 1 used, so that init could time out) hands every
 * collective to a new thread that launches it (NCCL's group.cc: the
 * nonblocking group path) and answers ncclInProgress, which the caller must
 * poll: tens of microseconds per call. The price: init has no timeout (a
 * rank that never calls it leaves the others waiting; the launcher ends the
 * job when a rank exits). And since a blocking call cannot be watched, NCCL
 * connects its rings and trees during init (NCCL_RUNTIME_CONNECT=0 unless
 * set), not inside the first collective of each kind, where it would wait
 * for the peers before the watchdog hears of it.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "comm_internal.h"

using namespace mtd;


static ncclComm_t g_nccl = nullptr;
static int g_device = 0;
static cudaStream_t g_side = nullptr;  /* the stream of the _start forms (non-blocking) */
static cudaEvent_t g_ready = nullptr;  /* "the current stream got this far", before a _start */
static float *g_barrier_buf = nullptr;

/* Work handles: the event recorded after each started collective. */
struct Work {
    cudaEvent_t done = nullptr;
    bool used = false;
};
static std::vector<Work> g_work;

/* The watchdog's list: one event per collective, in the order queued. */
struct Pending {
    cudaEvent_t done;
    double deadline;
    const char *what; /* "ncclAllReduce" */
    const char *func; /* "mtd_all_reduce" */
};
static std::mutex g_mutex; /* guards g_pending and g_spare */
static std::deque<Pending> g_pending;
static std::vector<cudaEvent_t> g_spare; /* events of finished entries, for reuse */
static std::thread g_watchdog;
static std::atomic<bool> g_stop{false};
static std::atomic<bool> g_failed{false};   /* the watchdog timed out; g_failure says what */
static std::atomic<bool> g_aborted{false};  /* ncclCommAbort was called (once) */
static char g_failure[768];

const char *mtd_backend_name(void)
{
    return "nccl";
}

int mtd_unique_id_bytes(void)
{
    return (int)sizeof(ncclUniqueId);
}

static_assert(sizeof(ncclUniqueId) == MTD_UNIQUE_ID_BYTES, "MTD_UNIQUE_ID_BYTES must match NCCL");

#define CUDA_TRY(func, call)                                                                          \
    do {                                                                                              \
        cudaError_t mtd_e_ = (call);                                                                  \
        if (mtd_e_ != cudaSuccess)                                                                    \
            return fail(MT_ERR_CUDA, func, "%s failed: %s at %s:%d", #call, cudaGetErrorString(mtd_e_), \
                        __FILE__, __LINE__);                                                          \
    } while (0)

/* An NCCL call; ncclInProgress is let through (see settle). */
#define NCCL_TRY(func, call)                                                                          \
    do {                                                                                              \
        ncclResult_t mtd_r_ = (call);                                                                 \
        if (mtd_r_ != ncclSuccess && mtd_r_ != ncclInProgress)                                        \
            return fail(MTD_ERR_COMM, func, "%s failed: %s (%s)", #call, ncclGetErrorString(mtd_r_),   \
                        ncclGetLastError(g_nccl));                                                    \
    } while (0)

/* ncclCommAbort, once per process, whichever thread gets there first. */
static void abort_once()
{
    if (g_nccl != nullptr && !g_aborted.exchange(true))
        ncclCommAbort(g_nccl);
}

static void watchdog_main()
{
    cudaSetDevice(g_device); /* the events belong to this process's GPU */
    while (!g_stop.load()) {
        bool late = false;
        {
            std::lock_guard<std::mutex> lock(g_mutex);
            while (!g_pending.empty()) {
                Pending &p = g_pending.front();
                cudaError_t e = cudaEventQuery(p.done);
                if (e != cudaErrorNotReady) {
                    /* Done; or the device failed, which the core's next call
                     * reports (it is not this collective's timeout). */
                    if (e == cudaSuccess)
                        g_spare.push_back(p.done);
                    g_pending.pop_front();
                    continue;
                }
                if (now_s() > p.deadline) {
                    snprintf(g_failure, sizeof g_failure,
                             "the %s queued by %s timed out after %.1f s: another rank failed, exited or "
                             "never called it; the communicator was aborted (set the timeout with "
                             "MINITENSOR_DIST_TIMEOUT)",
                             p.what, p.func, g_timeout_s);
                    late = true;
                }
                break;
            }
        }
        if (late) {
            g_failed.store(true); /* after the message: a reader that sees the flag sees it */
            abort_once();
            return;
        }
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, nullptr);
    }
}

/* check_ready, and no timeout has aborted the communicator. */
static mtd_status ready(const char *func)
{
    MTD_TRY(check_ready(func));
    if (g_failed.load())
        return fail(MTD_ERR_TIMEOUT, func, "%s", g_failure);
    return MT_OK;
}

/* The stream the core library queues on in this thread. */
static mtd_status current_stream(const char *func, cudaStream_t *stream)
{
    void *s = nullptr;
    if (mt_get_stream(&s) != MT_OK)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "mt_get_stream failed: %s", mt_last_error());
    *stream = (cudaStream_t)s;
    return MT_OK;
}

/* Hands the collective queued last on `stream` to the watchdog. Not during a
 * graph capture: that event is a node of the graph, not a point the stream
 * will reach, and replays are not watched. */
static mtd_status watch(const char *func, const char *what, cudaStream_t stream)
{
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    CUDA_TRY(func, cudaStreamIsCapturing(stream, &capturing));
    if (capturing != cudaStreamCaptureStatusNone)
        return MT_OK;
    cudaEvent_t ev = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (!g_spare.empty()) {
            ev = g_spare.back();
            g_spare.pop_back();
        }
    }
    if (ev == nullptr)
        CUDA_TRY(func, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CUDA_TRY(func, cudaEventRecord(ev, stream));
    std::lock_guard<std::mutex> lock(g_mutex);
    g_pending.push_back(Pending{ev, now_s() + g_timeout_s, what, func});
    return MT_OK;
}

mtd_status mtd_get_unique_id(char *buf, size_t bufsize)
{
    if (buf == nullptr || bufsize < sizeof(ncclUniqueId))
        return fail(MT_ERR_INVALID_ARGUMENT, "mtd_get_unique_id", "buf must hold %zu bytes",
                    sizeof(ncclUniqueId));
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
        return fail(MTD_ERR_COMM, "mtd_get_unique_id", "ncclGetUniqueId failed: %s", ncclGetErrorString(r));
    memcpy(buf, &id, sizeof id);
    return MT_OK;
}

/* Waits (on the host) until the communicator has no call in progress (one
 * that answered ncclInProgress: with the blocking communicator none should,
 * and this returns at its first look), with the deadline, then aborts the
 * communicator. */
static mtd_status settle(const char *func, const char *what)
{
    double deadline = now_s() + g_timeout_s;
    for (int i = 0;; ++i) {
        ncclResult_t async = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(g_nccl, &async);
        if (r != ncclSuccess)
            return fail(MTD_ERR_COMM, func, "ncclCommGetAsyncError failed: %s", ncclGetErrorString(r));
        if (async == ncclSuccess)
            return MT_OK;
        if (async != ncclInProgress)
            return fail(MTD_ERR_COMM, func, "%s failed: %s (%s)", what, ncclGetErrorString(async),
                        ncclGetLastError(g_nccl));
        if (now_s() > deadline) {
            /* The message first, while it can still name the rank. */
            mtd_status s = fail(MTD_ERR_TIMEOUT, func,
                                "%s timed out after %.1f s: another rank failed, exited or never called "
                                "it; the communicator was aborted (set the timeout with "
                                "MINITENSOR_DIST_TIMEOUT)",
                                what, g_timeout_s);
            abort_once();
            g_initialised = false;
            return s;
        }
        backoff(i);
    }
}

/* What follows an NCCL enqueue: an error, or (ncclInProgress) a wait until
 * it is queued, then the watchdog's event. */
static mtd_status queued(const char *func, const char *what, ncclResult_t r, cudaStream_t stream)
{
    if (r != ncclSuccess && r != ncclInProgress)
        return fail(MTD_ERR_COMM, func, "%s failed: %s (%s)", what, ncclGetErrorString(r), ncclGetLastError(g_nccl));
    if (r == ncclInProgress)
        MTD_TRY(settle(func, what));
    return watch(func, what, stream);
}

mtd_status mtd_init(int rank, int world_size, int local_rank, const char *unique_id, size_t id_bytes,
                    double timeout_s)
{
    const char *func = "mtd_init";
    if (g_initialised)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "already initialised (call mtd_finalize first)");
    if (world_size < 1 || rank < 0 || rank >= world_size)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "rank %d of world size %d is not valid", rank, world_size);
    if (unique_id == nullptr || id_bytes != sizeof(ncclUniqueId))
        return fail(MT_ERR_INVALID_ARGUMENT, func, "NCCL needs the %zu-byte unique id of rank 0, got %zu bytes",
                    sizeof(ncclUniqueId), id_bytes);
    if (timeout_s > 0)
        g_timeout_s = timeout_s;
    g_device = local_rank;
    CUDA_TRY(func, cudaSetDevice(local_rank));
    /* Non-blocking: neither it nor the legacy default stream waits for the
     * other, so a started collective overlaps the core's kernels. */
    CUDA_TRY(func, cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking));
    CUDA_TRY(func, cudaEventCreateWithFlags(&g_ready, cudaEventDisableTiming));
    CUDA_TRY(func, cudaMalloc(&g_barrier_buf, sizeof(float)));
    ncclUniqueId id;
    memcpy(&id, unique_id, sizeof id);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    setenv("NCCL_RUNTIME_CONNECT", "0", 0); /* connect at init (see the top); the user's value wins */
    g_aborted.store(false);
    g_failed.store(false);
    NCCL_TRY(func, ncclCommInitRankConfig(&g_nccl, world_size, id, rank, &config));
    g_rank = rank;
    g_world = world_size;
    g_initialised = true;
    mtd_status s = settle(func, "ncclCommInitRankConfig");
    if (s != MT_OK) {
        g_initialised = false;
        return s;
    }
    g_stop.store(false);
    g_watchdog = std::thread(watchdog_main);
    return MT_OK;
}

static ncclDataType_t nccl_type(int32_t dtype)
{
    return dtype == MT_FLOAT64 ? ncclFloat64 : ncclFloat32;
}

static ncclRedOp_t nccl_op(int op)
{
    return op == MTD_MAX ? ncclMax : (op == MTD_AVG ? ncclAvg : ncclSum);
}

mtd_status mtd_all_reduce(mt_tensor t, int op)
{
    const char *func = "mtd_all_reduce";
    MTD_TRY(ready(func));
    MTD_TRY(check_op(func, op));
    MTD_TRY(check_buffer(func, "t", &t));
    int64_t n = numel(&t);
    if (n == 0)
        return MT_OK;
    cudaStream_t stream = nullptr;
    MTD_TRY(current_stream(func, &stream));
    return queued(func, "ncclAllReduce",
                  ncclAllReduce(base(&t), base(&t), (size_t)n, nccl_type(t.dtype), nccl_op(op), g_nccl, stream),
                  stream);
}

mtd_status mtd_broadcast(mt_tensor t, int root)
{
    const char *func = "mtd_broadcast";
    MTD_TRY(ready(func));
    MTD_TRY(check_root(func, root));
    MTD_TRY(check_bytes(func, "t", &t));
    size_t nbytes = (size_t)numel(&t) * itemsize(t.dtype);
    if (nbytes == 0)
        return MT_OK;
    cudaStream_t stream = nullptr;
    MTD_TRY(current_stream(func, &stream));
    return queued(func, "ncclBroadcast", ncclBroadcast(base(&t), base(&t), nbytes, ncclUint8, root, g_nccl, stream),
                  stream);
}

mtd_status mtd_all_gather(mt_tensor out, mt_tensor in)
{
    const char *func = "mtd_all_gather";
    MTD_TRY(ready(func));
    MTD_TRY(check_pair(func, &out, "out", &in, "in"));
    int64_t n = numel(&in);
    if (n == 0)
        return MT_OK;
    cudaStream_t stream = nullptr;
    MTD_TRY(current_stream(func, &stream));
    return queued(func, "ncclAllGather",
                  ncclAllGather(base(&in), base(&out), (size_t)n, nccl_type(in.dtype), g_nccl, stream), stream);
}

mtd_status mtd_reduce_scatter(mt_tensor out, mt_tensor in, int op)
{
    const char *func = "mtd_reduce_scatter";
    MTD_TRY(ready(func));
    MTD_TRY(check_op(func, op));
    MTD_TRY(check_pair(func, &in, "in", &out, "out"));
    int64_t n = numel(&out);
    if (n == 0)
        return MT_OK;
    cudaStream_t stream = nullptr;
    MTD_TRY(current_stream(func, &stream));
    return queued(func, "ncclReduceScatter",
                  ncclReduceScatter(base(&in), base(&out), (size_t)n, nccl_type(in.dtype), nccl_op(op), g_nccl,
                                    stream),
                  stream);
}

/* Polls until the watchdog's list is empty (every collective queued so far
 * has finished) or it has failed; its deadline is the watchdog's. */
static mtd_status drain(const char *func)
{
    for (int i = 0;; ++i) {
        if (g_failed.load())
            return fail(MTD_ERR_TIMEOUT, func, "%s", g_failure);
        {
            std::lock_guard<std::mutex> lock(g_mutex);
            if (g_pending.empty())
                return MT_OK;
        }
        backoff(i);
    }
}

mtd_status mtd_barrier(void)
{
    const char *func = "mtd_barrier";
    MTD_TRY(ready(func));
    cudaStream_t stream = nullptr;
    MTD_TRY(current_stream(func, &stream));
    MTD_TRY(queued(func, "ncclAllReduce (barrier)",
                   ncclAllReduce(g_barrier_buf, g_barrier_buf, 1, ncclFloat32, ncclSum, g_nccl, stream), stream));
    return drain(func);
}

/* ---- asynchronous work ------------------------------------------------------- */

mtd_status mtd_all_reduce_start(mt_tensor t, int op, int *work)
{
    const char *func = "mtd_all_reduce_start";
    MTD_TRY(ready(func));
    MTD_TRY(check_op(func, op));
    MTD_TRY(check_buffer(func, "t", &t));
    int slot = 0;
    MTD_TRY(free_slot(func, g_work, work, &slot));
    Work &w = g_work[slot];
    if (w.done == nullptr)
        CUDA_TRY(func, cudaEventCreateWithFlags(&w.done, cudaEventDisableTiming));
    cudaStream_t stream = nullptr;
    MTD_TRY(current_stream(func, &stream));
    /* The side stream starts after what the current stream has queued (the
     * kernels that wrote t). */
    CUDA_TRY(func, cudaEventRecord(g_ready, stream));
    CUDA_TRY(func, cudaStreamWaitEvent(g_side, g_ready, 0));
    int64_t n = numel(&t);
    if (n > 0) {
        /* t's free (queued on its own stream) must also wait for the side stream. */
        if (mt_record_stream(t.data, g_side) != MT_OK)
            return fail(MT_ERR_INVALID_ARGUMENT, func, "%s", mt_last_error());
        MTD_TRY(queued(func, "ncclAllReduce",
                       ncclAllReduce(base(&t), base(&t), (size_t)n, nccl_type(t.dtype), nccl_op(op), g_nccl,
                                     g_side),
                       g_side));
    }
    CUDA_TRY(func, cudaEventRecord(w.done, g_side));
    w.used = true;
    *work = slot;
    return MT_OK;
}

mtd_status mtd_work_wait(int work)
{
    const char *func = "mtd_work_wait";
    MTD_TRY(ready(func));
    MTD_TRY(check_work(func, g_work, work));
    cudaStream_t stream = nullptr;
    MTD_TRY(current_stream(func, &stream));
    CUDA_TRY(func, cudaStreamWaitEvent(stream, g_work[work].done, 0));
    g_work[work].used = false;
    return MT_OK;
}

mtd_status mtd_work_query(int work, int *done)
{
    const char *func = "mtd_work_query";
    MTD_TRY(ready(func));
    MTD_TRY(check_work(func, g_work, work));
    if (done == nullptr)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "done is null");
    cudaError_t e = cudaEventQuery(g_work[work].done);
    if (e != cudaSuccess && e != cudaErrorNotReady)
        return fail(MT_ERR_CUDA, func, "cudaEventQuery failed: %s", cudaGetErrorString(e));
    *done = e == cudaSuccess;
    return MT_OK;
}

/* ---- the end ------------------------------------------------------------------ */

mtd_status mtd_finalize(void)
{
    if (!g_initialised)
        return MT_OK;
    const char *func = "mtd_finalize";
    /* Every collective queued so far finishes (or times out) first. */
    mtd_status status = g_failed.load() ? MT_OK : drain(func);
    if (g_failed.load() && status == MT_OK)
        status = fail(MTD_ERR_TIMEOUT, func, "%s", g_failure);
    g_stop.store(true);
    if (g_watchdog.joinable())
        g_watchdog.join();
    if (g_nccl != nullptr && !g_aborted.load()) {
        /* Everything queued has finished (drain): finalize only flushes. */
        NCCL_TRY(func, ncclCommFinalize(g_nccl));
        mtd_status s = settle(func, "ncclCommFinalize");
        if (status == MT_OK)
            status = s;
        if (!g_aborted.load())
            ncclCommDestroy(g_nccl);
    }
    g_nccl = nullptr;
    g_initialised = false;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        for (const Pending &p : g_pending)
            cudaEventDestroy(p.done);
        for (cudaEvent_t ev : g_spare)
            cudaEventDestroy(ev);
        g_pending.clear();
        g_spare.clear();
    }
    for (Work &w : g_work)
        if (w.done != nullptr)
            cudaEventDestroy(w.done);
    g_work.clear();
    if (g_ready != nullptr)
        cudaEventDestroy(g_ready);
    g_ready = nullptr;
    if (g_barrier_buf != nullptr)
        cudaFree(g_barrier_buf);
    g_barrier_buf = nullptr;
    if (g_side != nullptr)
        cudaStreamDestroy(g_side);
    g_side = nullptr;
    return status;
}

mtd_status mtd_abort(int code)
{
    abort_once();
    _exit(code);
}
