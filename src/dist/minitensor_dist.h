/*
 * minitensor_dist.h: the public C API of minitensor's distributed library.
 *
 * A separate library, so that the core engine (minitensor.h) never depends
 * on MPI or NCCL:
 *   build/libminitensor_dist_emu.so   emulator build, collectives over MPI
 *                                     (OpenMPI); tensor memory is host memory
 *   build/libminitensor_dist_cuda.so  CUDA build, collectives over NCCL;
 *                                     tensor memory is device memory
 * Each is built from src/dist/comm.cu and a backend, comm_mpi.cu or
 * comm_nccl.cu (see the Makefile's "distributed" section) and loaded by
 * minitensor/distributed/_comm_lib.py.
 *
 * Conventions (the same as minitensor.h)
 *   - Every function returns a status (mtd_status: 0 is success, 1..7 mean
 *     what mt_status means, plus the two communication errors below). On
 *     failure mtd_last_error() returns a message naming the function and the
 *     rank, e.g. "mtd_all_reduce (rank 1 of 2): timed out after 30.0 s ...".
 *     Nothing exits, aborts or prints, except mtd_abort, whose job that is.
 *   - Buffers are mt_tensor descriptors (minitensor.h) of float32 or float64
 *     (broadcast: any dtype), C-contiguous (the Python side makes them so); empty tensors are allowed
 *     and move nothing. Every rank must pass the same shapes and dtypes.
 *     Each buffer must lie inside one buffer the core library knows (an
 *     mt_malloc allocation or an mt_register_buffer'ed one), checked by the
 *     core's extent check (minitensor.h, "Extents") before anything is sent.
 *   - When a collective is done (torch's semantics):
 *       NCCL: queued on the calling thread's current stream (mt_get_stream)
 *       and the call returns at once, as a kernel launch does: later work on
 *       that stream sees the result, the host does not wait. The _start
 *       forms run on the library's own stream, after the work queued so far
 *       on the current stream, and hand back a work handle: mtd_work_wait
 *       makes the current stream wait for it (the host still does not), so
 *       the collective overlaps whatever the current stream does meanwhile.
 *       MPI (host memory): the collectives return when done; the _start
 *       forms start a nonblocking MPI call that mtd_work_wait completes.
 *   - No collective hangs for ever: each must finish within the timeout
 *     (mtd_set_timeout; default 300 s or MINITENSOR_DIST_TIMEOUT). MPI polls
 *     it in the call; NCCL has a watchdog thread that polls an event
 *     recorded after each collective and, past the deadline, aborts the
 *     communicator (ncclCommAbort: its kernels exit, so a stream waiting on
 *     them drains) and records the message; from then on every call of this
 *     library fails with MTD_ERR_TIMEOUT and that message. mtd_barrier waits
 *     on the host. After a timeout the communicator is unusable: fail the
 *     job (mtd_abort).
 */
#ifndef MINITENSOR_DIST_H
#define MINITENSOR_DIST_H

#include <stddef.h>

#include "minitensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bump whenever a signature or an enum below changes. */
#define MTD_ABI_VERSION 2

/* Size of an NCCL unique id (ncclUniqueId); the MPI build needs none. */
#define MTD_UNIQUE_ID_BYTES 128

typedef int mtd_status;
/* 0..7: as mt_status (MT_OK, MT_ERR_INVALID_ARGUMENT, ...). */
#define MTD_ERR_COMM 16    /* the MPI or NCCL call failed                    */
#define MTD_ERR_TIMEOUT 17 /* a collective did not finish within the timeout */

typedef enum {
    MTD_SUM = 0,
    MTD_AVG,   /* the sum divided by the world size */
    MTD_MAX,
    MTD_OP_COUNT
} mtd_reduce_op;

/* ---- library information ---------------------------------------------- */
int mtd_abi_version(void);
/* "mpi" or "nccl": which engine this build talks to. */
const char *mtd_backend_name(void);
/* The name of reduce op `op` ("sum", "avg", "max"), NULL when unknown. */
const char *mtd_op_name(int op);
int mtd_op_count(void);
/* Bytes of the unique id mtd_init needs: MTD_UNIQUE_ID_BYTES for NCCL, 0 for MPI. */
int mtd_unique_id_bytes(void);
/* The message of the last failure in this thread ("" if none). */
const char *mtd_last_error(void);

/* ---- process group ------------------------------------------------------ */
/* NCCL: fills buf (bufsize >= MTD_UNIQUE_ID_BYTES) with a new unique id; rank 0
 * calls it and hands the bytes to every rank. MPI: an error (not needed). */
mtd_status mtd_get_unique_id(char *buf, size_t bufsize);
/* Joins the group. rank and world_size: this process's place (MPI: -1 takes
 * them from MPI; given values must agree with MPI's). local_rank: the GPU this
 * process uses (NCCL; MPI ignores it). unique_id/id_bytes: NCCL's id (MPI:
 * NULL, 0). timeout_s > 0 sets the collective timeout (0: keep the current). */
mtd_status mtd_init(int rank, int world_size, int local_rank, const char *unique_id,
                    size_t id_bytes, double timeout_s);
mtd_status mtd_get_rank(int *rank);
mtd_status mtd_get_world_size(int *world_size);
mtd_status mtd_set_timeout(double seconds);
/* Leaves the group (after a barrier-free local teardown). Safe to call twice. */
mtd_status mtd_finalize(void);
/* Ends the whole job now (MPI_Abort; NCCL: ncclCommAbort, then _exit), with
 * `code` as the exit status. For a rank that failed: the others must not wait. */
mtd_status mtd_abort(int code);

/* ---- collectives (NCCL: queued on the current stream; MPI: done on return) -- */
/* t = op over ranks of t, in place. */
mtd_status mtd_all_reduce(mt_tensor t, int op);
/* t = root's t, on every rank; any dtype (it moves bytes). */
mtd_status mtd_broadcast(mt_tensor t, int root);
/* out = the `in` of rank 0, rank 1, ... back to back: out has world_size
 * times in's elements, and must not overlap in. */
mtd_status mtd_all_gather(mt_tensor out, mt_tensor in);
/* in (world_size * n elements) is reduced over ranks with op; rank r keeps
 * elements [r*n, (r+1)*n) in out (n elements). */
mtd_status mtd_reduce_scatter(mt_tensor out, mt_tensor in, int op);
/* Returns (on the host) when every rank has called it, within the timeout. */
mtd_status mtd_barrier(void);

/* ---- asynchronous work (torch's async_op=True) ----------------------------- */
/* Starts t = op over ranks of t, in place, and sets *work to its handle. NCCL:
 * on the library's stream, after the work queued so far on the current
 * stream; t's buffer must stay alive until mtd_work_wait (its free on the
 * current stream then comes after the collective). */
mtd_status mtd_all_reduce_start(mt_tensor t, int op, int *work);
/* NCCL: the current stream waits for the work (on the device; the host does
 * not block). MPI: returns when the work is done (with the timeout). Either
 * way the handle is released: wait once per handle. */
mtd_status mtd_work_wait(int work);
/* *done = 1 when the work has finished, else 0 (never blocks). */
mtd_status mtd_work_query(int work, int *done);

#ifdef __cplusplus
}
#endif

#endif /* MINITENSOR_DIST_H */
