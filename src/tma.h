/*
 * tma.h: Hopper's tensor memory accelerator (TMA) and the shared-memory
 * barriers it signals (mbarrier), each a small function around one PTX
 * instruction, for the warp-specialised TF32 rung
 * (src/matmul_tf32_tma.cu). sm_90 and newer.
 *
 * TMA copies a whole box of a matrix (here 32 floats x up to 256 rows) from
 * global into shared memory with one instruction issued by one thread. The
 * matrix is described once, on the host, by a 128-byte tensor map (its
 * address, sizes, row stride, the box and the swizzle: tma_map_3d); the
 * copy zero-fills what lies outside the matrix, so no thread tests edges.
 * It writes the box in the 128-byte swizzle, the layout wgmma's
 * descriptors read (src/wgmma_tf32.h: chunk c of row r at c ^ (r % 8)).
 *
 * Nobody waits for a TMA copy by a register or a block barrier; it
 * signals an mbarrier in shared memory when its bytes have landed:
 *
 *   mbar_init(bar, n)         a barrier that completes a phase when n threads
 *                             have arrived and every byte it expects landed
 *                             (one thread, before the block barrier that
 *                             publishes it, with mbar_fence_init);
 *   mbar_arrive_expect(bar, bytes)  arrive, and expect `bytes` more bytes of
 *                             TMA copies in this phase (the producer);
 *   mbar_arrive(bar)          arrive (a consumer done with a stage);
 *   mbar_wait(bar, parity)    wait until the phase of this parity completed.
 *
 * Phases alternate parity 0, 1, 0, ... A fresh barrier is in phase 0;
 * waiting for parity 1 returns at once (the phase "before" it counts as
 * complete), which is how a producer's first pass over empty stages goes
 * through without waiting.
 *
 *   tma_load(dst, map, col, row, z, bar)  the box whose first element is
 *                             (row, col) of the map's matrix z, to dst
 *                             (1024-byte aligned), counted on bar.
 *
 * The emulator build has twins (src/emu/emu_tma.cpp): the barrier's state
 * is kept beside the block, a copy's box holds NaN from its issue, and the
 * copy lands when a thread first waits on the barrier that counts it (the
 * latest moment a GPU allows), so a consumer that reads a stage without
 * waiting reads NaN or the previous tile.
 */
#ifndef MT_TMA_H
#define MT_TMA_H

#include <stdint.h>

#include "launch.h"

/* A tensor map: CUDA's CUtensorMap (128 bytes, 64-byte aligned), opaque.
 * The emulator keeps its own description in the same bytes, 8-byte aligned
 * (the host compiler passes a 64-byte aligned parameter by another ABI,
 * which it notes on every kernel). */
#ifdef MT_EMULATOR
struct alignas(8) TmaMap {
#else
struct alignas(64) TmaMap {
#endif
    uint64_t words[16];
};

/* Fills *map for `batches` rows x cols float matrices at data, batch z's
 * at data + z batch_ld, rows ld floats apart (data 16-byte aligned, ld and
 * batch_ld multiples of 4), read in boxes of box_rows x 32 floats (one
 * 128-byte swizzled row each) of one matrix, zero-filled past its edges.
 * MT_OK, or a failure naming func (a driver without TMA, matrices the map
 * cannot describe). */
mt_status tma_map_3d(const char *func, TmaMap *map, const float *data, int64_t rows, int64_t cols, int64_t ld,
                     int64_t batches, int64_t batch_ld, int box_rows);
/* Can tma_map_3d describe these matrices? (alignment, sizes under 2^31, a
 * driver that encodes tensor maps) */
bool tma_map_ok(const float *data, int64_t rows, int64_t cols, int64_t ld, int64_t batches, int64_t batch_ld);

#ifdef MT_EMULATOR

inline void mbar_init(uint64_t *bar, unsigned count) { ::mt_emu::mbarrier_init(bar, count); }
inline void mbar_fence_init() {}
inline void mbar_arrive_expect(uint64_t *bar, unsigned bytes) { ::mt_emu::mbarrier_arrive(bar, bytes); }
inline void mbar_arrive(uint64_t *bar) { ::mt_emu::mbarrier_arrive(bar, 0); }
inline void mbar_wait(uint64_t *bar, unsigned parity) { ::mt_emu::mbarrier_wait(bar, parity); }
inline void tma_load(float *dst, const TmaMap &map, int col, int row, int z, uint64_t *bar)
{
    ::mt_emu::tma_load(dst, map.words, col, row, z, bar);
}
/* The emulator has one register budget: nothing to move. */
template <int kRegisters>
inline void warpgroup_registers_down() {}
template <int kRegisters>
inline void warpgroup_registers_up() {}

#else

MT_DEVICE uint32_t shared_address(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

MT_DEVICE void mbar_init(uint64_t *bar, unsigned count)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count) : "memory");
#endif
}

/* Makes the initialised barriers visible to the TMA unit (the async
 * proxy), which signals them: after mbar_init, before the block barrier. */
MT_DEVICE void mbar_fence_init()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

MT_DEVICE void mbar_arrive_expect(uint64_t *bar, unsigned bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
                 : "memory");
#endif
}

MT_DEVICE void mbar_arrive(uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
#endif
}

/* try_wait suspends the thread for a while inside the instruction (no busy
 * loop of instructions); the loop only repeats when that time ran out. */
MT_DEVICE void mbar_wait(uint64_t *bar, unsigned parity)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t done = 0;
    do {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(shared_address(bar)), "r"(parity)
                     : "memory");
    } while (!done);
#endif
}

MT_DEVICE void tma_load(float *dst, const TmaMap &map, int col, int row, int z, uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(shared_address(dst)),
                 "l"(reinterpret_cast<uint64_t>(&map)), "r"(shared_address(bar)), "r"(col), "r"(row), "r"(z)
                 : "memory");
#endif
}

/* setmaxnreg: a warpgroup gives registers back (the producer, which needs
 * few) or takes them (the consumers, whose accumulators need many). Every
 * warp of the warpgroup executes it. sm_90a only; elsewhere the budget
 * stays as ptxas set it. */
template <int kRegisters>
MT_DEVICE void warpgroup_registers_down()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}

template <int kRegisters>
MT_DEVICE void warpgroup_registers_up()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}

#endif /* MT_EMULATOR */

#endif /* MT_TMA_H */
