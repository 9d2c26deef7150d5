/*
 * comm_internal.h: what the three source files of the collectives share.
 *
 *   comm.cu       errors, the library's information, the argument checks;
 *   comm_mpi.cu   the emulator build's collectives, over MPI;
 *   comm_nccl.cu  the CUDA build's collectives, over NCCL.
 *
 * The Makefile compiles comm.cu with one of the two backends.
 */
#ifndef MTD_COMM_INTERNAL_H
#define MTD_COMM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <vector>

#include "minitensor_dist.h"

namespace mtd {

/* The state of this process's communicator (set by mtd_init). */
extern bool g_initialised;
extern int g_rank;
extern int g_world;
extern double g_timeout_s;

/* Records "func (rank r of w): message" and returns status. */
mtd_status fail(mtd_status status, const char *func, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Seconds on a monotonic clock. */
double now_s();
/* Polling back-off: spin briefly (a fast collective finishes in
 * microseconds), then sleep up to 1 ms between polls so that ranks
 * oversubscribing a small CPU leave it to the rank being waited for. */
void backoff(int iteration);

int64_t numel(const mt_tensor *t);
size_t itemsize(int32_t dtype);
/* The address of the first element. */
void *base(const mt_tensor *t);

/* Argument checks (each returns MT_OK or records a message). */
mtd_status check_ready(const char *func);
/* A contiguous float32/float64 tensor of at most INT_MAX bytes. */
mtd_status check_buffer(const char *func, const char *name, const mt_tensor *t);
/* The same, of any dtype (what broadcast moves: bytes). */
mtd_status check_bytes(const char *func, const char *name, const mt_tensor *t);
mtd_status check_op(const char *func, int op);
/* 0 <= root < world size. */
mtd_status check_root(const char *func, int root);
/* The checks of all_gather and reduce_scatter: the same dtype, `big` holds
 * world_size times `small`'s elements. */
mtd_status check_pair(const char *func, const mt_tensor *big, const char *bname, const mt_tensor *small,
                      const char *sname);

/* The most work handles (mtd_all_reduce_start) alive at once in a process. */
constexpr int kMaxWork = 4096;

/* A backend's table of work handles (entries with a `used` flag): the first
 * free slot, the table grown when all are used, at most kMaxWork. */
template <typename Work>
mtd_status free_slot(const char *func, std::vector<Work> &table, const int *work, int *slot)
{
    if (work == nullptr)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "work is null");
    int k = 0;
    while (k < (int)table.size() && table[k].used)
        ++k;
    if (k == kMaxWork)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "%d works are started and not waited for", kMaxWork);
    if (k == (int)table.size())
        table.emplace_back();
    *slot = k;
    return MT_OK;
}

/* work is a handle of table that has not been waited for. */
template <typename Work>
mtd_status check_work(const char *func, const std::vector<Work> &table, int work)
{
    if (work < 0 || work >= (int)table.size() || !table[work].used)
        return fail(MT_ERR_INVALID_ARGUMENT, func, "%d is not a live work handle (waited for already?)", work);
    return MT_OK;
}

} /* namespace mtd */

#define MTD_TRY(expr)                     \
    do {                                  \
        mtd_status mtd_s_ = (expr);       \
        if (mtd_s_ != MT_OK)              \
            return mtd_s_;                \
    } while (0)

#endif /* MTD_COMM_INTERNAL_H */
