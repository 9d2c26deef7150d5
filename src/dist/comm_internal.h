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
/* A contiguous float32/float64 tensor of at most INT_MAX elements. */
mtd_status check_buffer(const char *func, const char *name, const mt_tensor *t);
mtd_status check_op(const char *func, int op);
/* 0 <= root < world size. */
mtd_status check_root(const char *func, int root);
/* The checks of all_gather and reduce_scatter: the same dtype, `big` holds
 * world_size times `small`'s elements. */
mtd_status check_pair(const char *func, const mt_tensor *big, const char *bname, const mt_tensor *small,
                      const char *sname);

} /* namespace mtd */

#define MTD_TRY(expr)                     \
    do {                                  \
        mtd_status mtd_s_ = (expr);       \
        if (mtd_s_ != MT_OK)              \
            return mtd_s_;                \
    } while (0)

#endif /* MTD_COMM_INTERNAL_H */
