/*
 * comm_mpi.cu: the collectives of the emulator build, over MPI (see
 * comm.cu). The emulator's "device" memory is host memory, so the tensors'
 * pointers go to MPI directly. Each collective is started nonblocking and
 * polled with MPI_Test until it completes or the deadline passes. The
 * emulator runs every launch before it returns, so a collective here is done
 * when its call returns (the NCCL build's are queued on a stream instead);
 * mtd_all_reduce_start keeps its MPI request in a work slot, which
 * mtd_work_wait polls to the end (and divides, for "avg").
 */
#include <limits.h>
#include <vector>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "comm_internal.h"

using namespace mtd;


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
    MTD_TRY(check_root(func, root));
    MTD_TRY(check_bytes(func, "t", &t));
    int64_t nbytes = numel(&t) * (int64_t)itemsize(t.dtype);
    if (nbytes == 0)
        return MT_OK;
    MPI_Request request;
    MPI_CHECK(func, MPI_Ibcast(base(&t), (int)nbytes, MPI_BYTE, root, g_comm, &request));
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

/* ---- asynchronous work -------------------------------------------------------- */

struct Work {
    MPI_Request request = MPI_REQUEST_NULL;
    void *data = nullptr; /* for the division of "avg" */
    int64_t n = 0;
    int32_t dtype = MT_FLOAT32;
    int op = MTD_SUM;
    bool used = false;
    bool finished = false; /* completed and divided */
};
static std::vector<Work> g_work;

/* What completes a work once MPI says it is done: the division of "avg". */
static void finish(Work &w)
{
    if (!w.finished && w.op == MTD_AVG && w.n > 0)
        divide(w.data, w.n, w.dtype);
    w.finished = true;
}

mtd_status mtd_all_reduce_start(mt_tensor t, int op, int *work)
{
    const char *func = "mtd_all_reduce_start";
    MTD_TRY(check_ready(func));
    MTD_TRY(check_op(func, op));
    MTD_TRY(check_buffer(func, "t", &t));
    int slot = 0;
    MTD_TRY(free_slot(func, g_work, work, &slot));
    Work w;
    w.data = base(&t);
    w.n = numel(&t);
    w.dtype = t.dtype;
    w.op = op;
    if (w.n > 0)
        MPI_CHECK(func, MPI_Iallreduce(MPI_IN_PLACE, w.data, (int)w.n, mpi_type(t.dtype), mpi_op(op), g_comm,
                                       &w.request));
    w.used = true;
    g_work[slot] = w;
    *work = slot;
    return MT_OK;
}

mtd_status mtd_work_wait(int work)
{
    const char *func = "mtd_work_wait";
    MTD_TRY(check_ready(func));
    MTD_TRY(check_work(func, g_work, work));
    Work &w = g_work[work];
    w.used = false; /* released even when the wait fails: the job is failing then */
    MTD_TRY(wait_for(func, "MPI_Iallreduce", &w.request));
    finish(w);
    return MT_OK;
}

mtd_status mtd_work_query(int work, int *done)
{
    const char *func = "mtd_work_query";
    MTD_TRY(check_ready(func));
    MTD_TRY(check_work(func, g_work, work));
    if (done == nullptr)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "done is null");
    Work &w = g_work[work];
    int flag = 1;
    if (w.request != MPI_REQUEST_NULL)
        MPI_CHECK(func, MPI_Test(&w.request, &flag, MPI_STATUS_IGNORE));
    if (flag)
        finish(w);
    *done = flag;
    return MT_OK;
}

/* ---- the end -------------------------------------------------------------------- */

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

