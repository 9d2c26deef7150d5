/*
 * comm.cu: minitensor's collectives (src/dist/minitensor_dist.h), one source
 * for both engines:
 *   - the emulator build (MT_EMULATOR, via minitensor/cuda/_cu2emu.py + g++ + mpicxx
 *     flags) talks MPI; the emulator's "device" memory is host memory, so the
 *     tensors' pointers go to MPI directly;
 *   - the CUDA build (nvcc, -lnccl) talks NCCL on device memory.
 *
 * No collective may hang: MPI's are started nonblocking and polled with
 * MPI_Test until they complete or the deadline passes; NCCL's are queued on
 * a stream without a wait, and a watchdog thread polls an event after each,
 * aborting the communicator (ncclCommAbort) past the deadline. The error
 * idiom is the core's: a status and a per-thread message naming function
 * and rank.
 *
 * This file holds what both share (errors, information, argument checks);
 * the collectives themselves are in comm_mpi.cu and comm_nccl.cu.
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

#include "comm_internal.h"

/* From the core library (src/validate.cu, declared in src/check.h): every
 * byte a descriptor addresses lies inside one buffer the core knows (an
 * mt_malloc allocation or a registered buffer), so a collective never reads
 * or writes past a tensor's memory. On failure the core's mt_last_error()
 * says why, starting with "func: ". */
mt_status mt_check_extent(const char *func, const char *name, const mt_tensor *t);

namespace mtd {

/* ---- errors ---------------------------------------------------------------- */

constexpr size_t kMessageSize = 1024;
static thread_local char t_last_error[kMessageSize] = "";

bool g_initialised = false;
int g_rank = -1;
int g_world = 0;
double g_timeout_s = 300.0;

mtd_status fail(mtd_status status, const char *func, const char *fmt, ...)
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

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void backoff(int iteration)
{
    if (iteration < 100)
        return;
    struct timespec ts = {0, iteration < 1000 ? 20000L : 1000000L};
    nanosleep(&ts, nullptr);
}

/* ---- argument checks shared by the collectives --------------------------------- */

int64_t numel(const mt_tensor *t)
{
    int64_t n = 1;
    for (int k = 0; k < t->ndim; ++k)
        n *= t->shape[k];
    return n;
}

size_t itemsize(int32_t dtype)
{
    switch (dtype) {
    case MT_FLOAT64: return sizeof(double);
    case MT_INT64: return sizeof(int64_t);
    case MT_BOOL: return 1;
    default: return sizeof(float);
    }
}

void *base(const mt_tensor *t)
{
    return (char *)t->data + t->offset * (int64_t)itemsize(t->dtype);
}

mtd_status check_ready(const char *func)
{
    if (!g_initialised)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "mtd_init has not been called (or mtd_finalize was)");
    return MT_OK;
}

mtd_status check_buffer(const char *func, const char *name, const mt_tensor *t)
{
    if (t->dtype != MT_FLOAT32 && t->dtype != MT_FLOAT64)
        return fail(MT_ERR_DTYPE, func, "%s has dtype %d; the collectives take float32 (0) or float64 (1)", name,
                    t->dtype);
    return check_bytes(func, name, t);
}

mtd_status check_bytes(const char *func, const char *name, const mt_tensor *t)
{
    if (t->dtype < 0 || t->dtype >= MT_DTYPE_COUNT)
        return fail(MT_ERR_DTYPE, func, "%s has dtype %d, not a minitensor dtype", name, t->dtype);
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
    if (n * (int64_t)itemsize(t->dtype) > INT_MAX)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "%s has %lld elements (%lld bytes); at most %d bytes per call",
                    name, (long long)n, (long long)(n * (int64_t)itemsize(t->dtype)), INT_MAX);
    if (mt_check_extent(func, name, t) != MT_OK) {
        const char *why = mt_last_error();
        const size_t skip = strlen(func) + 2; /* the core's "func: " */
        return fail(MT_ERR_INVALID_ARGUMENT, func, "%s", strncmp(why, func, skip - 2) == 0 ? why + skip : why);
    }
    return MT_OK;
}

mtd_status check_root(const char *func, int root)
{
    if (root < 0 || root >= g_world)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "root %d is not a rank (0..%d)", root, g_world - 1);
    return MT_OK;
}

mtd_status check_op(const char *func, int op)
{
    if (op < 0 || op >= MTD_OP_COUNT)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "unknown reduce op id %d (0..%d)", op, MTD_OP_COUNT - 1);
    return MT_OK;
}

mtd_status check_pair(const char *func, const mt_tensor *big, const char *bname,
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


} /* namespace mtd */

using namespace mtd;

const char *mtd_last_error(void)
{
    return t_last_error;
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

