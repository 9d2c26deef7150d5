/*
 * comm.cu: minitensor's collectives (src/dist/minitensor_dist.h), one source
 * for both engines:
 *   - the emulator build (MT_EMULATOR, via tools/cu2emu.py + g++ + mpicxx
 *     flags) talks MPI; the emulator's "device" memory is host memory, so the
 *     tensors' pointers go to MPI directly;
 *   - the CUDA build (nvcc, -lnccl) talks NCCL on device memory.
 *
 * No collective may hang: each is started nonblocking and polled until it
 * completes or the deadline passes (MPI: MPI_Test; NCCL: cudaStreamQuery and
 * ncclCommGetAsyncError, then ncclCommAbort on timeout). The error idiom is
 * the core's: a status and a per-thread message naming function and rank.
 *
 * Build: `make dist` (see the Makefile). Tests: tests/test_distributed.py.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "minitensor_dist.h"

#ifdef MT_EMULATOR
#include <mpi.h>
#else
#include <cuda_runtime.h>
#include <nccl.h>
#endif

/* ---- errors ---------------------------------------------------------------- */

constexpr size_t kMessageSize = 1024;
static thread_local char t_last_error[kMessageSize] = "";

static bool g_initialised = false;
static int g_rank = -1;
static int g_world = 0;
static double g_timeout_s = 300.0;

const char *mtd_last_error(void)
{
    return t_last_error;
}

/* Records "func (rank r of w): message" and returns status. */
static mtd_status fail(mtd_status status, const char *func, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static mtd_status fail(mtd_status status, const char *func, const char *fmt, ...)
{
    int used;
    if (g_initialised)
        used = snprintf(t_last_error, kMessageSize, "%s (rank %d of %d): ", func, g_rank, g_world);
    else
        used = snprintf(t_last_error, kMessageSize, "%s: ", func);
    if (used < 0 || (size_t)used >= kMessageSize)
        return status;
    va_list args;
    va_start(args, fmt);
    vsnprintf(t_last_error + used, kMessageSize - (size_t)used, fmt, args);
    va_end(args);
    return status;
}

static double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Polling back-off: spin briefly (a fast collective finishes in
 * microseconds), then sleep up to 1 ms between polls so that ranks
 * oversubscribing a small CPU leave it to the rank being waited for. */
static void backoff(int iteration)
{
    if (iteration < 100)
        return;
    struct timespec ts = {0, iteration < 1000 ? 20000L : 1000000L};
    nanosleep(&ts, nullptr);
}

/* ---- information ------------------------------------------------------------ */

static const char *const kOpNames[MTD_OP_COUNT] = {"sum", "avg", "max"};

int mtd_abi_version(void)
{
    return MTD_ABI_VERSION;
}

int mtd_op_count(void)
{
    return MTD_OP_COUNT;
}

const char *mtd_op_name(int op)
{
    return (op >= 0 && op < MTD_OP_COUNT) ? kOpNames[op] : nullptr;
}

mtd_status mtd_set_timeout(double seconds)
{
    if (!(seconds > 0))
        return fail(MT_ERR_INVALID_ARGUMENT, "mtd_set_timeout", "the timeout must be > 0 s, got %g",
                    seconds);
    g_timeout_s = seconds;
    return MT_OK;
}

mtd_status mtd_get_rank(int *rank)
{
    if (rank == nullptr)
        return fail(MT_ERR_INVALID_ARGUMENT, "mtd_get_rank", "rank is null");
    if (!g_initialised)
        return fail(MT_ERR_INVALID_ARGUMENT, "mtd_get_rank", "mtd_init has not been called");
    *rank = g_rank;
    return MT_OK;
}

mtd_status mtd_get_world_size(int *world_size)
{
    if (world_size == nullptr)
        return fail(MT_ERR_INVALID_ARGUMENT, "mtd_get_world_size", "world_size is null");
    if (!g_initialised)
        return fail(MT_ERR_INVALID_ARGUMENT, "mtd_get_world_size", "mtd_init has not been called");
    *world_size = g_world;
    return MT_OK;
}

/* ---- argument checks shared by the collectives --------------------------------- */

static int64_t numel(const mt_tensor *t)
{
    int64_t n = 1;
    for (int k = 0; k < t->ndim; ++k)
        n *= t->shape[k];
    return n;
}

static size_t itemsize(int32_t dtype)
{
    return dtype == MT_FLOAT64 ? sizeof(double) : sizeof(float);
}

/* The address of the first element. */
static void *base(const mt_tensor *t)
{
    return (char *)t->data + t->offset * (int64_t)itemsize(t->dtype);
}

static mtd_status check_ready(const char *func)
{
    if (!g_initialised)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "mtd_init has not been called (or mtd_finalize was)");
    return MT_OK;
}

static mtd_status check_buffer(const char *func, const char *name, const mt_tensor *t)
{
    if (t->dtype != MT_FLOAT32 && t->dtype != MT_FLOAT64)
        return fail(MT_ERR_DTYPE, func, "%s has unknown dtype %d (float32 = 0, float64 = 1)", name, t->dtype);
    if (t->ndim < 0 || t->ndim > MT_MAX_DIMS)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "%s has ndim %d, must be 0..%d", name, t->ndim, MT_MAX_DIMS);
    int64_t n = numel(t);
    if (n < 0)
        return fail(MT_ERR_SHAPE, func, "%s has a negative dimension", name);
    if (n == 0)
        return MT_OK;
    if (t->data == nullptr)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "%s has %lld elements but a null data pointer", name,
                    (long long)n);
    if (t->offset < 0)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "%s has a negative offset", name);
    /* C-contiguous: the collectives move one flat block. */
    int64_t expected = 1;
    for (int k = t->ndim - 1; k >= 0; --k) {
        if (t->shape[k] != 1 && t->strides[k] != expected)
            return fail(MT_ERR_INVALID_ARGUMENT, func,
                        "%s is not contiguous (dim %d has stride %lld, expected %lld); call "
                        ".contiguous() first",
                        name, k, (long long)t->strides[k], (long long)expected);
        expected *= t->shape[k];
    }
    if (n > INT_MAX)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "%s has %lld elements; at most %d per call", name,
                    (long long)n, INT_MAX);
    return MT_OK;
}

static mtd_status check_op(const char *func, int op)
{
    if (op < 0 || op >= MTD_OP_COUNT)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "unknown reduce op id %d (0..%d)", op, MTD_OP_COUNT - 1);
    return MT_OK;
}

#define MTD_TRY(expr)                     \
    do {                                  \
        mtd_status mtd_s_ = (expr);       \
        if (mtd_s_ != MT_OK)              \
            return mtd_s_;                \
    } while (0)

/* The checks of all_gather and reduce_scatter: the same dtype, `big` holds
 * world_size times `small`'s elements. */
static mtd_status check_pair(const char *func, const mt_tensor *big, const char *bname,
                             const mt_tensor *small, const char *sname)
{
    MTD_TRY(check_buffer(func, bname, big));
    MTD_TRY(check_buffer(func, sname, small));
    if (big->dtype != small->dtype)
        return fail(MT_ERR_DTYPE, func, "%s and %s have different dtypes", bname, sname);
    if (numel(big) != numel(small) * g_world)
        return fail(MT_ERR_SHAPE, func, "%s has %lld elements, expected world_size (%d) x %lld (%s)", bname,
                    (long long)numel(big), g_world, (long long)numel(small), sname);
    return MT_OK;
}

#ifdef MT_EMULATOR
/* ================================ MPI ====================================== */

static MPI_Comm g_comm = MPI_COMM_NULL;
static bool g_we_initialised_mpi = false;

const char *mtd_backend_name(void)
{
    return "mpi";
}

int mtd_unique_id_bytes(void)
{
    return 0;
}

static mtd_status mpi_fail(const char *func, const char *call, int code)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", code);
    return fail(MTD_ERR_COMM, func, "%s failed: %s", call, text);
}

#define MPI_CHECK(func, call)                          \
    do {                                               \
        int mtd_rc_ = (call);                          \
        if (mtd_rc_ != MPI_SUCCESS)                    \
            return mpi_fail(func, #call, mtd_rc_);     \
    } while (0)

mtd_status mtd_get_unique_id(char *buf, size_t bufsize)
{
    return fail(MT_ERR_INVALID_ARGUMENT, "mtd_get_unique_id", "the MPI build needs no unique id");
}

mtd_status mtd_init(int rank, int world_size, int local_rank, const char *unique_id, size_t id_bytes,
                    double timeout_s)
{
    const char *func = "mtd_init";
    if (g_initialised)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "already initialised (call mtd_finalize first)");
    if (timeout_s > 0)
        g_timeout_s = timeout_s;
    int ready = 0;
    MPI_CHECK(func, MPI_Initialized(&ready));
    if (!ready) {
        int provided = 0;
        MPI_CHECK(func, MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
        g_we_initialised_mpi = true;
    }
    MPI_CHECK(func, MPI_Comm_dup(MPI_COMM_WORLD, &g_comm));
    /* Errors become return codes (the default handler aborts the job). */
    MPI_CHECK(func, MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN));
    int mpi_rank = 0;
    int mpi_world = 0;
    MPI_CHECK(func, MPI_Comm_rank(g_comm, &mpi_rank));
    MPI_CHECK(func, MPI_Comm_size(g_comm, &mpi_world));
    if ((rank >= 0 && rank != mpi_rank) || (world_size > 0 && world_size != mpi_world)) {
        MPI_Comm_free(&g_comm);
        return fail(MT_ERR_INVALID_ARGUMENT, func,
                    "RANK=%d, WORLD_SIZE=%d disagree with MPI's rank %d of %d: start the ranks with "
                    "mpirun (python -m minitensor.distributed.run)",
                    rank, world_size, mpi_rank, mpi_world);
    }
    g_rank = mpi_rank;
    g_world = mpi_world;
    g_initialised = true;
    return MT_OK;
}

/* Polls a started request until it completes or the deadline passes. */
static mtd_status wait_for(const char *func, const char *what, MPI_Request *request)
{
    double deadline = now_s() + g_timeout_s;
    for (int i = 0;; ++i) {
        int done = 0;
        int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_fail(func, what, rc);
        if (done)
            return MT_OK;
        if (now_s() > deadline)
            return fail(MTD_ERR_TIMEOUT, func,
                        "%s timed out after %.1f s: another rank failed, exited or never called it "
                        "(set the timeout with MINITENSOR_DIST_TIMEOUT)",
                        what, g_timeout_s);
        backoff(i);
    }
}

static MPI_Datatype mpi_type(int32_t dtype)
{
    return dtype == MT_FLOAT64 ? MPI_DOUBLE : MPI_FLOAT;
}

static MPI_Op mpi_op(int op)
{
    return op == MTD_MAX ? MPI_MAX : MPI_SUM;
}

/* AVG = SUM then a division by world_size, on the host memory of the emulator. */
static void divide(void *data, int64_t n, int32_t dtype)
{
    if (dtype == MT_FLOAT64) {
        double *p = (double *)data;
        for (int64_t i = 0; i < n; ++i)
            p[i] /= (double)g_world;
    } else {
        float *p = (float *)data;
        for (int64_t i = 0; i < n; ++i)
            p[i] /= (float)g_world;
    }
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
    MPI_Request request;
    MPI_CHECK(func, MPI_Iallreduce(MPI_IN_PLACE, base(&t), (int)n, mpi_type(t.dtype), mpi_op(op), g_comm,
                                   &request));
    MTD_TRY(wait_for(func, "MPI_Iallreduce", &request));
    if (op == MTD_AVG)
        divide(base(&t), n, t.dtype);
    return MT_OK;
}

mtd_status mtd_broadcast(mt_tensor t, int root)
{
    const char *func = "mtd_broadcast";
    MTD_TRY(check_ready(func));
    if (root < 0 || root >= g_world)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "root %d is not a rank (0..%d)", root, g_world - 1);
    MTD_TRY(check_buffer(func, "t", &t));
    int64_t n = numel(&t);
    if (n == 0)
        return MT_OK;
    MPI_Request request;
    MPI_CHECK(func, MPI_Ibcast(base(&t), (int)n, mpi_type(t.dtype), root, g_comm, &request));
    return wait_for(func, "MPI_Ibcast", &request);
}

mtd_status mtd_all_gather(mt_tensor out, mt_tensor in)
{
    const char *func = "mtd_all_gather";
    MTD_TRY(check_ready(func));
    MTD_TRY(check_pair(func, &out, "out", &in, "in"));
    int64_t n = numel(&in);
    if (n == 0)
        return MT_OK;
    MPI_Request request;
    MPI_CHECK(func, MPI_Iallgather(base(&in), (int)n, mpi_type(in.dtype), base(&out), (int)n,
                                   mpi_type(in.dtype), g_comm, &request));
    return wait_for(func, "MPI_Iallgather", &request);
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
    MPI_Request request;
    MPI_CHECK(func, MPI_Ireduce_scatter_block(base(&in), base(&out), (int)n, mpi_type(in.dtype), mpi_op(op),
                                              g_comm, &request));
    MTD_TRY(wait_for(func, "MPI_Ireduce_scatter_block", &request));
    if (op == MTD_AVG)
        divide(base(&out), n, out.dtype);
    return MT_OK;
}

mtd_status mtd_barrier(void)
{
    const char *func = "mtd_barrier";
    MTD_TRY(check_ready(func));
    MPI_Request request;
    MPI_CHECK(func, MPI_Ibarrier(g_comm, &request));
    return wait_for(func, "MPI_Ibarrier", &request);
}

mtd_status mtd_finalize(void)
{
    if (!g_initialised)
        return MT_OK;
    g_initialised = false;
    MPI_Comm_free(&g_comm);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (g_we_initialised_mpi && !finalized)
        MPI_CHECK("mtd_finalize", MPI_Finalize());
    return MT_OK;
}

mtd_status mtd_abort(int code)
{
    int ready = 0;
    MPI_Initialized(&ready);
    if (ready)
        MPI_Abort(MPI_COMM_WORLD, code);
    _exit(code);
}

#else
/* ================================ NCCL ===================================== */

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
    if (root < 0 || root >= g_world)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "root %d is not a rank (0..%d)", root, g_world - 1);
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
#endif
