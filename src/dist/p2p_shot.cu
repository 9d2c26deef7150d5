/*
 * p2p_shot.cu: all-reduce rungs 3 and 4, oneshot and twoshot.
 *
 * oneshot keeps the naive plan (every GPU reads all of every peer's
 * buffer) and makes the loads fast: 16 bytes per load, and every peer's
 * load issued before the first add, so world x 16 bytes per thread are in
 * flight at once instead of 4. One barrier. Its cost is the plan's: each
 * GPU pulls (world - 1) x size over its links. For small buffers that does
 * not matter, the one barrier does: this is the latency rung.
 *
 * twoshot splits the buffer into world parts; rank r owns part r.
 *   shot 1 (reduce-scatter): rank r sums part r from every peer into its
 *          own output;
 *   barrier: every part is reduced;
 *   shot 2 (all-gather): rank r copies part p from rank p's output, p != r.
 * Each GPU reads (world - 1) / world x size per shot, 2 (world - 1) / world
 * x size in all: what a ring moves, with two barriers instead of
 * 2 (world - 1), since every GPU talks to every other at once (NVSwitch
 * gives each pair full bandwidth; a ring is for links between neighbours
 * only). The bandwidth rung.
 *
 * A thread's part of a part: pack v of part p is handled by the thread at
 * v - start(p) in the grid-stride order, on every rank, so the block that
 * reads a pack in shot 2 is the one (block b, on rank p) that wrote it in
 * shot 1, and the per-block barrier (p2p_internal.h) orders the two.
 */
#include "p2p_internal.h"

template <typename T>
MT_DEVICE P2PPack<T> p2p_pack_sum(const PeerDesc &d, int64_t v)
{
    P2PPack<T> p[MTP_MAX_DEVICES];
    /* All loads first (the unrolled loop keeps p in registers) ... */
    MT_UNROLL
    for (int r = 0; r < MTP_MAX_DEVICES; ++r)
        if (r < d.world)
            p[r] = reinterpret_cast<const P2PPack<T> *>(d.in[r])[v];
    /* ... then the adds, in rank order (every rank rounds alike). */
    P2PPack<T> sum = p[0];
    MT_UNROLL
    for (int r = 1; r < MTP_MAX_DEVICES; ++r) {
        if (r < d.world) {
            MT_UNROLL
            for (int k = 0; k < 16 / (int)sizeof(T); ++k)
                sum.v[k] += p[r].v[k];
        }
    }
    return sum;
}

template <typename T>
__global__ void p2p_oneshot_kernel(PeerDesc d, int64_t packs, unsigned epoch)
{
    p2p_barrier(d, epoch + 1); /* every rank's input is in place */
    P2PPack<T> *out = reinterpret_cast<P2PPack<T> *>(d.out[d.rank]);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t v = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; v < packs; v += stride)
        out[v] = p2p_pack_sum<T>(d, v);
}

template <typename T>
__global__ void p2p_twoshot_kernel(PeerDesc d, int64_t packs, unsigned epoch)
{
    const int64_t part = (packs + d.world - 1) / d.world;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    P2PPack<T> *out = reinterpret_cast<P2PPack<T> *>(d.out[d.rank]);

    p2p_barrier(d, epoch + 1); /* every rank's input is in place */
    /* Shot 1: reduce my part from every rank. */
    const int64_t mine = (int64_t)d.rank * part, mine_end = min(packs, mine + part);
    for (int64_t v = mine + first; v < mine_end; v += stride)
        out[v] = p2p_pack_sum<T>(d, v);

    p2p_barrier(d, epoch + 2); /* every part is reduced */
    /* Shot 2: fetch every other part from its owner. */
    for (int i = 1; i < d.world; ++i) {
        const int p = (d.rank + i) % d.world; /* rank r starts at r + 1: not everyone at rank 0 */
        const P2PPack<T> *src = reinterpret_cast<const P2PPack<T> *>(d.out[p]);
        const int64_t start = (int64_t)p * part, end = min(packs, start + part);
        for (int64_t v = start + first; v < end; v += stride)
            out[v] = src[v];
    }
}

mt_status p2p_launch_shot(const mtp_group *g, int rank, int dtype, int64_t count, unsigned epoch,
                          cudaStream_t stream, bool two_shot, unsigned *barriers)
{
    const PeerDesc d = p2p_desc(g, rank);
    const int64_t packs = (count * (dtype == MT_FLOAT32 ? 4 : 8) + kP2PPackBytes - 1) / kP2PPackBytes;
    const int blocks = p2p_blocks(g, two_shot ? (packs + g->world - 1) / g->world : packs);
    if (two_shot && dtype == MT_FLOAT32)
        p2p_twoshot_kernel<float><<<blocks, kP2PThreads, 0, stream>>>(d, packs, epoch);
    else if (two_shot)
        p2p_twoshot_kernel<double><<<blocks, kP2PThreads, 0, stream>>>(d, packs, epoch);
    else if (dtype == MT_FLOAT32)
        p2p_oneshot_kernel<float><<<blocks, kP2PThreads, 0, stream>>>(d, packs, epoch);
    else
        p2p_oneshot_kernel<double><<<blocks, kP2PThreads, 0, stream>>>(d, packs, epoch);
    *barriers = two_shot ? 2 : 1;
    return MT_OK;
}
