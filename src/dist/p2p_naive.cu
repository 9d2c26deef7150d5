/*
 * p2p_naive.cu: all-reduce rung 1, naive: every GPU reads every GPU's
 * buffer and sums.
 *
 *     out[rank][i] = in[0][i] + in[1][i] + ... + in[world-1][i]
 *
 * The plan is the definition of an all-reduce, written down: one thread per
 * element (grid-stride), one scalar load per rank. It needs one barrier,
 * before the loads: a rank must not read a peer's input before the peer has
 * it (its earlier work on its own stream may still be writing it). No
 * barrier after: each rank writes only its own output, which nobody else
 * reads, and the next call's first barrier keeps its writes after every
 * rank's reads of this call.
 *
 * What it costs: each GPU reads (world - 1) buffers over NVLink, the whole
 * size each, so the link carries (world - 1) x size per GPU where a ring
 * carries 2 (world - 1) / world x size; and 4-byte loads, one at a time per
 * thread, keep few bytes in flight. The oneshot rung (p2p_shot.cu) keeps the
 * plan and fixes the loads; the twoshot and ring rungs change the plan.
 */
#include "p2p_internal.h"

template <typename T>
__global__ void p2p_naive_kernel(PeerDesc d, int64_t n, unsigned epoch)
{
    p2p_barrier(d, epoch + 1); /* every rank's input is in place */
    T *out = reinterpret_cast<T *>(d.out[d.rank]);
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        T sum = 0;
        /* In rank order on every rank, so every rank rounds alike and all
         * of them hold the same bits. */
        for (int r = 0; r < d.world; ++r)
            sum += reinterpret_cast<const T *>(d.in[r])[i];
        out[i] = sum;
    }
}

mt_status p2p_launch_naive(const mtp_group *g, int rank, int dtype, int64_t count, unsigned epoch,
                           cudaStream_t stream, unsigned *barriers)
{
    const PeerDesc d = p2p_desc(g, rank);
    const int blocks = p2p_blocks(g, count);
    if (dtype == MT_FLOAT32)
        p2p_naive_kernel<float><<<blocks, kP2PThreads, 0, stream>>>(d, count, epoch);
    else
        p2p_naive_kernel<double><<<blocks, kP2PThreads, 0, stream>>>(d, count, epoch);
    *barriers = 1;
    return MT_OK;
}
