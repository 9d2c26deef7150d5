/*
 * block_reduce.h: combining one value per thread into one value per block,
 * which reduce*.cu and softmax.cu are built on. Three ways, from the
 * textbook tree to warp shuffles:
 *
 *   block_reduce            the shared-memory tree, sequential addressing;
 *   block_reduce_last_warp  the same tree, its last five levels by warp
 *                           shuffles (the same additions, the same bits);
 *   block_reduce_warps      shuffles within each warp, then across warps
 *                           (two barriers in all; another order of additions).
 *
 * One contract for all three:
 *   - every thread of the block calls it, the same number of times, because
 *     it contains __syncthreads(): a thread that skipped the call (an early
 *     `return`) would leave the others waiting at a barrier it never reaches;
 *   - blockDim.x is a power of two (block_reduce, block_reduce_last_warp) or
 *     a multiple of 32 (block_reduce_warps), and at most the scratch's
 *     capacity (block_reduce, block_reduce_last_warp: kBlockSize threads) or
 *     1024 (block_reduce_warps); block_reduce_last_warp and
 *     block_reduce_warps need at least 32;
 *   - `combine` is associative and commutative: a tree adds in a different
 *     order than a sequential loop would;
 *   - the result: EVERY thread gets the combination of the whole block (a
 *     kernel that needs it everywhere, like softmax's row maximum, uses it at
 *     once; one that writes it out lets thread 0 do so);
 *   - when it returns, the scratch may be reused at once.
 *
 * The scratch is a BlockScratch<Acc>, declared by the calling kernel as
 * `__shared__ BlockScratch<Acc> scratch;` (one slot per thread of a
 * kBlockSize block), so that its size is part of its type.
 *
 * Compiled as it is by nvcc and the emulator (it is not passed through
 * minitensor/cuda/_cu2emu.py), so it declares no __shared__ variables itself.
 */
#ifndef MT_BLOCK_REDUCE_H
#define MT_BLOCK_REDUCE_H

#include "launch.h"

/* Shared memory for one block reduction: one slot per thread. The
 * emulator's full checks see each access of slot[i] (src/emu/emu.h,
 * SharedSlots); an access through a pointer kept from `slot` is seen too,
 * through the MMU, at a hundred times the cost. */
template <typename Acc>
struct BlockScratch {
#ifdef MT_EMULATOR
    ::mt_emu::SharedSlots<Acc, kBlockSize> slot;
#else
    Acc slot[kBlockSize];
#endif
};

/* ---- block_reduce: the shared-memory tree ---------------------------------
 *
 * Each level of the tree halves the number of active threads: thread t adds
 * in element t + stride. With a power-of-two block every level pairs all the
 * remaining elements exactly; with, say, 6 threads the level with stride 3
 * would leave element 2 unpaired and drop it from the result.
 *
 * "Sequential addressing": at every level the active threads are 0..stride-1
 * and they read a contiguous range, so the active threads of a warp stay
 * together (no divergence inside a warp until stride < 32) and consecutive
 * threads touch consecutive shared-memory banks (no bank conflicts).
 */
/* TASK(reductions) BEGIN */
template <typename Acc, typename Combine>
MT_DEVICE Acc block_reduce(BlockScratch<Acc> &scratch, Acc value, Combine combine)
{
    auto &s = scratch.slot; /* the array itself: s[i] is scratch.slot[i] */
    const unsigned int tid = threadIdx.x;
    s[tid] = value;
    /* Every partial must be in shared memory before any thread reads another
     * thread's slot in the first level. */
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (tid < stride)
            s[tid] = combine(s[tid], s[tid + stride]);
        /* One level must be finished before the next level reads its results:
         * s[tid + stride] of the next level was written in this one by
         * another thread. */
        __syncthreads();
    }
    Acc result = s[0];
    /* Every thread must have read s[0] before the caller may write the
     * scratch again (the next row, or the next reduction of the same row). */
    __syncthreads();
    return result;
}

/* TASK(reductions) STUB */
//| MT_TASK_MISSING(reductions, "block_reduce", "src/block_reduce.h")
//|
//| template <typename Acc, typename Combine>
//| MT_DEVICE Acc block_reduce(BlockScratch<Acc> &scratch, Acc value, Combine combine)
//| {
//|     /* TODO (task reductions): return the combination of the `value`s of all
//|      * blockDim.x threads of the block, to every thread, using a tree in
//|      * shared memory:
//|      *   1. each thread writes its value into scratch.slot[threadIdx.x];
//|      *   2. for stride = blockDim.x / 2, blockDim.x / 4, ..., 1: each thread
//|      *      with threadIdx.x < stride sets slot[threadIdx.x] to
//|      *      combine(slot[threadIdx.x], slot[threadIdx.x + stride]);
//|      *   3. every thread reads slot[0].
//|      * Where does a thread read a slot that another thread wrote? Each such
//|      * place needs a __syncthreads() before it. The caller may write scratch
//|      * again as soon as this function returns. blockDim.x is a power of two.
//|      */
//|     return value;
//| }
/* TASK(reductions) END */

/* ---- warp_reduce: the shuffle finish --------------------------------------
 *
 * A warp shuffle moves a register value from one lane of a warp to another
 * without shared memory or a barrier. warp_reduce halves the distance each
 * step (16, 8, 4, 2, 1): after five steps lane 0 holds the combination of
 * all 32 lanes' values (the other lanes hold partial results). It is the
 * building block of the two reductions below, not a block reduction itself.
 *
 * Every lane of the warp calls it (the full mask 0xffffffff names all 32).
 * shfl_down has an overload for every accumulator type a caller uses (float,
 * double, int64_t and bool here, the types __shfl_down_sync moves; reduce.h
 * adds the argmax candidate, a struct of two fields). */
template <typename T>
MT_DEVICE T shfl_down(T value, int delta)
{
    return __shfl_down_sync(0xffffffffu, value, delta);
}

template <typename Acc, typename Combine>
MT_DEVICE Acc warp_reduce(Acc value, Combine combine)
{
    MT_UNROLL for (int delta = 16; delta > 0; delta /= 2)
        value = combine(value, shfl_down(value, delta));
    return value;
}

/* Thread 0 holds the block's result in `value`; every thread returns it.
 * Thread 0 writes slot[0] at once, so no thread may still be reading the
 * scratch: block_reduce_last_warp calls it when every read of its is
 * ordered before by a barrier or by the warp's shuffles (a lane's read comes
 * before its first shuffle, and thread 0 passes the last shuffle only after
 * every lane of its warp has reached it). */
template <typename Acc>
MT_DEVICE Acc broadcast_from_thread0(BlockScratch<Acc> &scratch, Acc value)
{
    if (threadIdx.x == 0)
        scratch.slot[0] = value;
    /* slot[0] is written before anyone reads it. */
    __syncthreads();
    Acc result = scratch.slot[0];
    /* Everyone has read slot[0] before a caller may write the scratch again. */
    __syncthreads();
    return result;
}

/* ---- block_reduce_warps: shuffles, then shuffles again --------------------
 *
 * Each warp reduces its 32 values with shuffles, lane 0 of each warp parks
 * the result in slot[warp], and warp 0 reduces those. Three barriers in all
 * (one, then two to pass the result on), instead of one per tree level.
 * `identity` fills the lanes of warp 0 beyond the number of warps. */
template <typename Acc, typename Combine>
MT_DEVICE Acc block_reduce_warps(BlockScratch<Acc> &scratch, Acc value, Acc identity, Combine combine)
{
    const unsigned int lane = threadIdx.x % 32;
    const unsigned int warp = threadIdx.x / 32;
    const unsigned int warps = blockDim.x / 32;
    value = warp_reduce(value, combine);
    if (lane == 0)
        scratch.slot[warp] = value;
    /* Every warp's partial is parked before warp 0 reads them. */
    __syncthreads();
    if (warp == 0) {
        value = lane < warps ? scratch.slot[lane] : identity;
        value = warp_reduce(value, combine);
        /* Every lane has read its slot before its first shuffle, so lane 0
         * may overwrite slot[0] once the shuffles are done. */
        if (lane == 0)
            scratch.slot[0] = value;
    }
    /* slot[0] is written before anyone reads it. */
    __syncthreads();
    Acc result = scratch.slot[0];
    /* Everyone has read slot[0] before a caller may write the scratch again. */
    __syncthreads();
    return result;
}

/* ---- block_reduce_last_warp: the tree, its last warp by shuffles ----------
 *
 * The sequential-addressing tree of block_reduce, with its last five levels
 * (stride 16, 8, 4, 2, 1: the 32 values left all live in warp 0) done with
 * warp shuffles instead of shared memory and barriers, Harris's "unroll the
 * last warp". It adds in exactly the order of block_reduce, so it gives the
 * same bits, with four barriers fewer: five levels without one, and one
 * more to pass the result to every thread. */
template <typename Acc, typename Combine>
MT_DEVICE Acc block_reduce_last_warp(BlockScratch<Acc> &scratch, Acc value, Combine combine)
{
    auto &s = scratch.slot;
    const unsigned int tid = threadIdx.x;
    if (blockDim.x > 32) {
        s[tid] = value;
        /* Every partial is in shared memory before the first level reads. */
        __syncthreads();
        for (unsigned int stride = blockDim.x / 2; stride >= 32; stride /= 2) {
            if (tid < stride)
                s[tid] = combine(s[tid], s[tid + stride]);
            /* One level is finished before the next reads its results. */
            __syncthreads();
        }
        if (tid < 32)
            value = s[tid];
    }
    if (tid < 32)
        value = warp_reduce(value, combine);
    return broadcast_from_thread0(scratch, value);
}

#endif /* MT_BLOCK_REDUCE_H */
