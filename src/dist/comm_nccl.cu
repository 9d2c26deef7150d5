/*
 * comm_nccl.cu: the collectives of the CUDA build, over NCCL on device
 * memory (see comm.cu). Each collective is started on the library's stream
 * and polled (cudaStreamQuery, ncclCommGetAsyncError) until it completes or
 * the deadline passes, then the communicator is aborted (ncclCommAbort).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "comm_internal.h"

using namespace mtd;


static ncclComm_t g_nccl = nullptr;
static cudaStream_t g_stream = nullptr;
static float *g_barrier_buf = nullptr;

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

/* A call that may return ncclInProgress (the communicator is nonblocking). */
#define NCCL_TRY(func, call)                                                                          \
    do {                                                                                              \
        ncclResult_t mtd_r_ = (call);                                                                 \
        if (mtd_r_ != ncclSuccess && mtd_r_ != ncclInProgress)                                        \
            return fail(MTD_ERR_COMM, func, "%s failed: %s (%s)", #call, ncclGetErrorString(mtd_r_),   \
                        ncclGetLastError(g_nccl));                                                    \
    } while (0)

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

/* Waits until the communicator has no call in progress (nonblocking init and
 * enqueue), then until the stream's work is done, both within the deadline;
 * on timeout aborts the communicator so that no kernel spins forever. */
static mtd_status wait_nccl(const char *func, const char *what, bool stream_too)
{
    double deadline = now_s() + g_timeout_s;
    for (int i = 0;; ++i) {
        ncclResult_t async = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(g_nccl, &async);
        if (r != ncclSuccess)
            return fail(MTD_ERR_COMM, func, "ncclCommGetAsyncError failed: %s", ncclGetErrorString(r));
        if (async != ncclSuccess && async != ncclInProgress)
            return fail(MTD_ERR_COMM, func, "%s failed: %s (%s)", what, ncclGetErrorString(async),
                        ncclGetLastError(g_nccl));
        bool done = async == ncclSuccess;
        if (done && stream_too) {
            cudaError_t e = cudaStreamQuery(g_stream);
            if (e != cudaSuccess && e != cudaErrorNotReady)
                return fail(MT_ERR_CUDA, func, "%s: cudaStreamQuery failed: %s", what, cudaGetErrorString(e));
            done = e == cudaSuccess;
        }
        if (done)
            return MT_OK;
        if (now_s() > deadline) {
            /* The message first, while it can still name the rank. */
            mtd_status s = fail(MTD_ERR_TIMEOUT, func,
                                "%s timed out after %.1f s: another rank failed, exited or never called "
                                "it; the communicator was aborted (set the timeout with "
                                "MINITENSOR_DIST_TIMEOUT)",
                                what, g_timeout_s);
            ncclCommAbort(g_nccl);
            g_nccl = nullptr;
            g_initialised = false;
            return s;
        }
        backoff(i);
    }
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
    CUDA_TRY(func, cudaSetDevice(local_rank));
    /* A blocking stream: it waits for the work queued before it on the legacy
     * default stream, where the core library runs its kernels. */
    CUDA_TRY(func, cudaStreamCreate(&g_stream));
    CUDA_TRY(func, cudaMalloc(&g_barrier_buf, sizeof(float)));
    ncclUniqueId id;
    memcpy(&id, unique_id, sizeof id);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    NCCL_TRY(func, ncclCommInitRankConfig(&g_nccl, world_size, id, rank, &config));
    g_rank = rank;
    g_world = world_size;
    g_initialised = true;
    mtd_status s = wait_nccl(func, "ncclCommInitRankConfig", false);
    if (s != MT_OK)
        g_initialised = false;
    return s;
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
    MTD_TRY(check_ready(func));
    MTD_TRY(check_op(func, op));
    MTD_TRY(check_buffer(func, "t", &t));
    int64_t n = numel(&t);
    if (n == 0)
        return MT_OK;
    NCCL_TRY(func, ncclAllReduce(base(&t), base(&t), (size_t)n, nccl_type(t.dtype), nccl_op(op), g_nccl,
                                 g_stream));
    return wait_nccl(func, "ncclAllReduce", true);
}

mtd_status mtd_broadcast(mt_tensor t, int root)
{
    const char *func = "mtd_broadcast";
    MTD_TRY(check_ready(func));
    MTD_TRY(check_root(func, root));
    MTD_TRY(check_buffer(func, "t", &t));
    int64_t n = numel(&t);
    if (n == 0)
        return MT_OK;
    NCCL_TRY(func, ncclBroadcast(base(&t), base(&t), (size_t)n, nccl_type(t.dtype), root, g_nccl, g_stream));
    return wait_nccl(func, "ncclBroadcast", true);
}

mtd_status mtd_all_gather(mt_tensor out, mt_tensor in)
{
    const char *func = "mtd_all_gather";
    MTD_TRY(check_ready(func));
    MTD_TRY(check_pair(func, &out, "out", &in, "in"));
    int64_t n = numel(&in);
    if (n == 0)
        return MT_OK;
    NCCL_TRY(func, ncclAllGather(base(&in), base(&out), (size_t)n, nccl_type(in.dtype), g_nccl, g_stream));
    return wait_nccl(func, "ncclAllGather", true);
}

mtd_status mtd_reduce_scatter(mt_tensor out, mt_tensor in, int op)
{
    const char *func = "mtd_reduce_scatter";
    MTD_TRY(check_ready(func));
    MTD_TRY(check_op(func, op));
    MTD_TRY(check_pair(func, &in, "in", &out, "out"));
    int64_t n = numel(&out);
    if (n == 0)
        return MT_OK;
    NCCL_TRY(func, ncclReduceScatter(base(&in), base(&out), (size_t)n, nccl_type(in.dtype), nccl_op(op), g_nccl,
                                     g_stream));
    return wait_nccl(func, "ncclReduceScatter", true);
}

mtd_status mtd_barrier(void)
{
    const char *func = "mtd_barrier";
    MTD_TRY(check_ready(func));
    NCCL_TRY(func, ncclAllReduce(g_barrier_buf, g_barrier_buf, 1, ncclFloat32, ncclSum, g_nccl, g_stream));
    return wait_nccl(func, "ncclAllReduce (barrier)", true);
}

mtd_status mtd_finalize(void)
{
    if (!g_initialised)
        return MT_OK;
    mtd_status status = MT_OK;
    if (g_nccl != nullptr) {
        /* Nonblocking communicator: finalize returns ncclInProgress and
         * completes in the background; wait for it (with the timeout). */
        NCCL_TRY("mtd_finalize", ncclCommFinalize(g_nccl));
        status = wait_nccl("mtd_finalize", "ncclCommFinalize", true);
        if (g_nccl != nullptr)
            ncclCommDestroy(g_nccl);
        g_nccl = nullptr;
    }
    g_initialised = false;
    if (g_barrier_buf != nullptr)
        cudaFree(g_barrier_buf);
    g_barrier_buf = nullptr;
    if (g_stream != nullptr)
        cudaStreamDestroy(g_stream);
    g_stream = nullptr;
    return status;
}

mtd_status mtd_abort(int code)
{
    if (g_nccl != nullptr)
        ncclCommAbort(g_nccl);
    g_nccl = nullptr;
    _exit(code);
}
