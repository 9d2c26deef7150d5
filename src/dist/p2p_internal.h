/*
 * p2p_internal.h: what the all-reduce rungs (p2p_naive.cu, p2p_ring.cu,
 * p2p_shot.cu) share with the group code (p2p_group.cu): the descriptor every
 * launch gets, the group, and the barrier across GPUs.
 *
 * The descriptor holds every rank's pointers; a kernel on rank r reads
 * d.in[3] as it reads d.in[r]: with peer access enabled, a pointer into
 * another GPU's memory is an ordinary global-memory pointer, whose loads
 * and stores travel over NVLink. On the emulator every device's memory is
 * the same host memory, so nothing changes.
 */
#ifndef MT_P2P_INTERNAL_H
#define MT_P2P_INTERNAL_H

#include <stdint.h>

#include "check.h"
#include "cuda_compat.h"
#include "launch.h"
#include "minitensor_p2p.h"

/* Blocks per device and threads per block of every p2p kernel. A kernel
 * that waits at a barrier for other blocks needs all of them running at
 * once (a block spinning on an SM while its partner waits for that SM never
 * finishes), so a launch has at most one block per SM; the emulator gives
 * each block an OS thread, so it keeps to two per device. */
#ifdef MT_EMULATOR
constexpr int kP2PMaxBlocks = 2;
constexpr int kP2PThreads = 64;
#else
constexpr int kP2PMaxBlocks = 32;
constexpr int kP2PThreads = 512;
#endif
/* Flag slots per rank: one per (block, peer). */
constexpr int kP2PFlagBlocks = 64;
static_assert(kP2PMaxBlocks <= kP2PFlagBlocks, "a block without flags");
/* Buffers are whole 16-byte packs (zero padding past the data), so the
 * oneshot/twoshot/ring kernels need no scalar tail. */
constexpr int64_t kP2PPackBytes = 16;

/* Every launch's view of the group, passed by value (a kernel parameter). */
struct PeerDesc {
    int rank;                             /* which device this launch runs on, 0..world-1 */
    int world;                            /* devices in the group */
    char *in[MTP_MAX_DEVICES];            /* rank r's input, in r's memory */
    char *out[MTP_MAX_DEVICES];           /* rank r's result, in r's memory */
    unsigned *flags[MTP_MAX_DEVICES];     /* rank r's barrier flags, in r's memory:
                                             [block * MTP_MAX_DEVICES + from] */
};

struct mtp_group {
    int world;
    int devices[MTP_MAX_DEVICES];
    cudaStream_t streams[MTP_MAX_DEVICES];
    char *in[MTP_MAX_DEVICES];
    char *out[MTP_MAX_DEVICES];
    unsigned *flags[MTP_MAX_DEVICES];
    size_t capacity;   /* bytes of each in/out buffer */
    int max_blocks;    /* blocks per launch: kP2PMaxBlocks, or fewer SMs */
    unsigned epoch;    /* barriers passed so far: the next one waits for epoch + 1 */
};

/* Rank r's descriptor. */
PeerDesc p2p_desc(const mtp_group *g, int rank);

/* Blocks of a launch over `units` (elements or packs), the same on every
 * rank (a barrier pairs block b of every rank). */
int p2p_blocks(const mtp_group *g, int64_t units);

/* The rungs: launch rank `rank`'s kernel (its device is current) on
 * `stream`, over `count` elements of `dtype` (packs: count rounded up to
 * whole packs), its barriers numbered from epoch + 1. Each returns how many
 * barriers it uses through *barriers. Launch errors are checked by the
 * caller, after every rank's launch (p2p_group.cu says why). */
mt_status p2p_launch_naive(const mtp_group *g, int rank, int dtype, int64_t count, unsigned epoch,
                           cudaStream_t stream, unsigned *barriers);
mt_status p2p_launch_ring(const mtp_group *g, int rank, int dtype, int64_t count, unsigned epoch,
                          cudaStream_t stream, unsigned *barriers);
mt_status p2p_launch_shot(const mtp_group *g, int rank, int dtype, int64_t count, unsigned epoch,
                          cudaStream_t stream, bool two_shot, unsigned *barriers);

/* ---- the barrier across GPUs --------------------------------------------
 * A GPU's kernel cannot see another GPU's kernel: they meet through memory.
 * Each rank owns an array of flags in its own memory; rank s tells rank r
 * "my block b has reached barrier number v" by storing v into r's slot
 * [b][s], and waits until every peer has stored v into its own slots.
 * Three rules make that a barrier:
 *   - numbers only grow (v is the group's barrier count, which the host
 *     carries from launch to launch), so no flag is ever reset and a slow
 *     rank cannot miss a signal: waiting is "flag >= v", not "flag == v";
 *   - the store is a *release at system scope* and the wait an *acquire at
 *     system scope*: without them, the data the block wrote before the
 *     barrier may reach the peer after the flag does (stores to different
 *     GPUs, or to one GPU over NVLink, are not ordered by themselves), and a
 *     peer could read stale data. "System" scope because the observer is
 *     another device; a GPU-scope fence (__threadfence) orders only for
 *     this GPU's threads. (__threadfence_system() followed by a plain store
 *     is the older spelling of the same release.)
 *   - one thread signals every peer *before* it waits for any: if each
 *     waited for one peer before signalling the next, two ranks could each
 *     wait for a signal the other has not sent yet.
 * __syncthreads() before (the whole block's writes are done before the
 * signal) and after (no thread reads peer data before the wait is over)
 * extend the one thread's release and acquire to its block. */
MT_DEVICE unsigned p2p_flag_load(const unsigned *flag)
{
#ifdef MT_EMULATOR
    return __atomic_load_n(flag, __ATOMIC_ACQUIRE);
#else
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
    return v;
#endif
}

MT_DEVICE void p2p_flag_store(unsigned *flag, unsigned value)
{
#ifdef MT_EMULATOR
    __atomic_store_n(flag, value, __ATOMIC_RELEASE);
#else
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
#endif
}

/* Waits until *flag >= value. On a GPU a peer that never arrives would hang
 * the kernel (and the process) for good; after 10 s this traps instead,
 * which the host sees as a launch failure. The emulator waits through its
 * runtime, which yields the CPU to the other devices' blocks. */
MT_DEVICE void p2p_flag_wait(const unsigned *flag, unsigned value)
{
#ifdef MT_EMULATOR
    ::mt_emu::wait_flag_at_least(flag, value, "p2p barrier");
#else
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (p2p_flag_load(flag) < value) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > 10ull * 1000 * 1000 * 1000)
            __trap();
    }
#endif
}

/* Every rank's block blockIdx.x waits here until all of them have arrived
 * at barrier number `value` (see above). */
MT_DEVICE void p2p_barrier(const PeerDesc &d, unsigned value)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        const int slot = (int)blockIdx.x * MTP_MAX_DEVICES + d.rank;
        for (int peer = 0; peer < d.world; ++peer)
            p2p_flag_store(d.flags[peer] + slot, value);
        for (int peer = 0; peer < d.world; ++peer)
            p2p_flag_wait(d.flags[d.rank] + (int)blockIdx.x * MTP_MAX_DEVICES + peer, value);
    }
    __syncthreads();
}

/* 16 bytes of T: one vector load or store (ld.global.v4.f32 / .v2.f64). */
template <typename T>
struct alignas(16) P2PPack {
    T v[16 / sizeof(T)];
};

#endif /* MT_P2P_INTERNAL_H */
