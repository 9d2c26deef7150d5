/*
 * minitensor_p2p.h: one process, one kernel over several GPUs (docs/distributed.md,
 * "One kernel over several GPUs").
 *
 * The other multi-GPU path beside NCCL's one-process-per-GPU: a group of
 * devices in this process, each holding its part of a tensor in its own
 * memory, with peer access enabled between every pair (NVLink or PCIe), so
 * that a kernel running on one GPU reads and writes the others' memory
 * through ordinary pointers. Every launch gets a descriptor with every
 * rank's pointers (p2p_internal.h). On it, an all-reduce ladder, one rung
 * per file:
 *
 *   naive    p2p_naive.cu   each GPU reads every GPU's buffer, element by
 *                           element, and sums (one barrier)
 *   ring     p2p_ring.cu    reduce-scatter then all-gather, N-1 steps each,
 *                           each step reading only the left neighbour
 *   oneshot  p2p_shot.cu    naive's plan, 16-byte loads from every peer at
 *                           once: the latency rung (one barrier)
 *   twoshot  p2p_shot.cu    each GPU reduces 1/N of the buffer from every
 *                           peer, then gathers the others' reduced parts
 *                           (two barriers): the bandwidth rung
 *   auto     oneshot up to MTP_ONESHOT_MAX_BYTES, twoshot above
 *
 * The emulator build runs the same kernels on several emulated devices
 * (MINITENSOR_EMU_DEVICES or mtp_emulate_devices), every device's blocks at
 * once (src/emu/emu_group.cpp). Built into its own library,
 * build/libminitensor_p2p_{emu,cuda}.so, linked with the core (whose error
 * state it reports through: mt_last_error()); no MPI or NCCL.
 */
#ifndef MINITENSOR_P2P_H
#define MINITENSOR_P2P_H

#include <stdint.h>

#include "minitensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MTP_ABI_VERSION 1
/* Devices in one group at most (an 8-GPU NVLink node). */
#define MTP_MAX_DEVICES 8

/* The rungs, in ladder order: X(id, name). */
#define MTP_RUNGS(X) \
    X(0, naive)      \
    X(1, ring)       \
    X(2, oneshot)    \
    X(3, twoshot)    \
    X(4, auto)
enum {
#define MTP_RUNG_ENUM(id, name) MTP_RUNG_##name = id,
    MTP_RUNGS(MTP_RUNG_ENUM)
#undef MTP_RUNG_ENUM
    MTP_RUNG_COUNT
};

typedef struct mtp_group mtp_group;

int mtp_abi_version(void);
int mtp_rung_count(void);
/* "naive", ...; NULL for an unknown id. */
const char *mtp_rung_name(int rung);
/* Bytes up to which the rung "auto" takes oneshot. */
int64_t mtp_oneshot_max_bytes(void);

/* Devices this process sees (emulated ones on the emulator). */
mt_status mtp_device_count(int *count);
/* Emulator only: `count` emulated devices (1..64); peer_access 0 makes every
 * pair unable to reach the other (to see the refusal). MT_ERR_INVALID_ARGUMENT
 * on the CUDA build. */
mt_status mtp_emulate_devices(int count, int peer_access);

/* A group over devices[0..n) (distinct, 2..MTP_MAX_DEVICES of them): enables
 * peer access between every pair, or fails naming the pair that cannot
 * reach each other. Rank r is devices[r]. */
mt_status mtp_group_create(const int *devices, int n, mtp_group **out);
mt_status mtp_group_destroy(mtp_group *group);

/* tensors[r] (n of them, one per rank, float32 or float64, the same dtype
 * and element count, contiguous) = the sum of all of them, in place. Each is
 * copied into its rank's device, reduced there by `rung`, and copied back. */
mt_status mtp_all_reduce(mtp_group *group, const mt_tensor *tensors, int n, int rung);

/* Benchmark: `iters` all-reduces of `count` elements of `dtype` on the
 * group's own buffers (no copies), after `warmup` untimed ones; ms[i] is
 * call i's time in milliseconds (CUDA events around it on every device, the
 * longest of them). */
mt_status mtp_bench(mtp_group *group, int rung, int dtype, int64_t count, int warmup, int iters, float *ms);

#ifdef __cplusplus
}
#endif

#endif /* MINITENSOR_P2P_H */
