/*
 * p2p_ring.cu: all-reduce rung 2, the ring: what NCCL does between GPUs
 * linked in a ring, here as loads from the left neighbour's memory.
 *
 * The buffer is split into world parts. Rank r's left neighbour is r - 1
 * (mod world).
 *   reduce-scatter, steps s = 0 .. world-2: rank r takes part
 *       c = r - 1 - s, adds its own input to the partial sum the left
 *       neighbour made of part c at step s - 1 (at step 0: the left
 *       neighbour's input) and writes the result to its output. After
 *       world - 1 steps rank r holds part r + 1 summed over every rank.
 *   all-gather, steps s = 0 .. world-2: rank r copies part c = r - s from
 *       the left neighbour's output, which has it complete (step 0: the
 *       part the neighbour finished; later: the one it copied at s - 1).
 * A barrier after each step (the right neighbour reads what the step
 * wrote): 2 (world - 1) in all, with the first, before any read of a
 * peer's input. Each GPU reads 2 (world - 1) / world x size over one link,
 * the least any all-reduce can move; the price is the barriers, which make
 * small buffers slow. (A barrier of only the two neighbours would do; the
 * group's barrier keeps one mechanism for every rung.)
 *
 * Why no two steps collide: at reduce-scatter step s, rank r writes part
 * r - 1 - s and its right neighbour reads part (r + 1) - 1 - (s + 1) =
 * r - 1 - s of r at step s + 1, after the barrier: each part a rank writes
 * is read once, by one neighbour, one step later. The same holds for the
 * all-gather, one part over. Packs are handed to threads within a part the
 * same way on every rank, so the block that reads is the partner (same
 * blockIdx) of the block that wrote (p2p_shot.cu says why that matters).
 */
#include "p2p_internal.h"

template <typename T>
__global__ void p2p_ring_kernel(PeerDesc d, int64_t packs, unsigned epoch)
{
    const int world = d.world, rank = d.rank, left = (rank + world - 1) % world;
    const int64_t part = (packs + world - 1) / world;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const P2PPack<T> *mine_in = reinterpret_cast<const P2PPack<T> *>(d.in[rank]);
    P2PPack<T> *mine_out = reinterpret_cast<P2PPack<T> *>(d.out[rank]);
    unsigned barrier = epoch;

    p2p_barrier(d, ++barrier); /* every rank's input is in place */
    if (world == 1) { /* a ring of one: the sum is the input */
        for (int64_t v = first; v < packs; v += stride)
            mine_out[v] = mine_in[v];
        return;
    }
    for (int s = 0; s < world - 1; ++s) {
        const int c = ((rank - 1 - s) % world + world) % world;
        /* At step 0 the left neighbour's partial sum is its input. */
        const P2PPack<T> *partial = reinterpret_cast<const P2PPack<T> *>(s == 0 ? d.in[left] : d.out[left]);
        const int64_t start = (int64_t)c * part, end = min(packs, start + part);
        for (int64_t v = start + first; v < end; v += stride) {
            P2PPack<T> a = partial[v];
            const P2PPack<T> b = mine_in[v];
            MT_UNROLL
            for (int k = 0; k < 16 / (int)sizeof(T); ++k)
                a.v[k] += b.v[k];
            mine_out[v] = a;
        }
        p2p_barrier(d, ++barrier); /* the right neighbour may read part c */
    }
    const P2PPack<T> *left_out = reinterpret_cast<const P2PPack<T> *>(d.out[left]);
    for (int s = 0; s < world - 1; ++s) {
        const int c = ((rank - s) % world + world) % world;
        const int64_t start = (int64_t)c * part, end = min(packs, start + part);
        for (int64_t v = start + first; v < end; v += stride)
            mine_out[v] = left_out[v];
        if (s < world - 2)
            p2p_barrier(d, ++barrier); /* the right neighbour may copy part c */
    }
}

mt_status p2p_launch_ring(const mtp_group *g, int rank, int dtype, int64_t count, unsigned epoch,
                          cudaStream_t stream, unsigned *barriers)
{
    const PeerDesc d = p2p_desc(g, rank);
    const int64_t packs = (count * (dtype == MT_FLOAT32 ? 4 : 8) + kP2PPackBytes - 1) / kP2PPackBytes;
    const int blocks = p2p_blocks(g, (packs + g->world - 1) / g->world);
    if (dtype == MT_FLOAT32)
        p2p_ring_kernel<float><<<blocks, kP2PThreads, 0, stream>>>(d, packs, epoch);
    else
        p2p_ring_kernel<double><<<blocks, kP2PThreads, 0, stream>>>(d, packs, epoch);
    *barriers = g->world == 1 ? 1u : 2u * (unsigned)(g->world - 1);
    return MT_OK;
}
