/*
 * emu_wgmma.h: the emulator's twins of src/wgmma_tf32.h (wgmma_desc,
 * wgmma_fence, wgmma_commit, wgmma_wait, wgmma_fence_operand and the
 * m64nNk8 products), with the semantics the PTX ISA gives them:
 *
 *   - a descriptor holds a shared-memory address (14 bits of address >> 4),
 *     the stride byte offset and the swizzle mode, and the product decodes
 *     them as the hardware does: element (row r, k) of a K-major operand in
 *     the 128-byte swizzle lies at the address
 *         x = start + (r / 8) * stride + (r % 8) * 128 + 4 k,
 *     with the 16-byte chunk bits 4-6 of x XORed with its bits 7-9; so a
 *     kernel whose copies put a chunk anywhere else, or whose stages are not
 *     1024-byte aligned, gets a wrong product here too. (Only the 128-byte
 *     swizzle, the one the rung uses, is decoded; another mode stops the
 *     run with a message.) The "shared address" is the offset from the
 *     block's dynamic shared memory, its start rounded down to 1024 bytes,
 *     so that the swizzle sees the address bits the kernel aligned;
 *   - each thread computes its own accumulators (warp w of the warpgroup
 *     rows 16w .. 16w + 15, the m16n8 layout repeated over N, see
 *     wgmma_tf32.h), reading A's two rows and B's columns it needs from
 *     shared memory. Under MINITENSOR_EMU_CHECK=full each of those reads is
 *     recorded for the race and initialisation checks as a raw access of
 *     the thread would be (shared_emulated_read), but without going through
 *     a fault: a faulting raw read costs ~18 us (two signals, two mprotect
 *     calls), and a 128 x 128 block reads 70k operand words a K step of 8,
 *     which made test_matmul_tf32 spend most of its 664 s there;
 *   - asynchronous as on a GPU, at the latest moment it allows: a product
 *     is queued at its issue and computed when the thread waits for its
 *     group (wgmma_wait), reading shared memory then. A kernel that
 *     overwrites a stage before every warpgroup waited for the products
 *     that read it, or reads the accumulators before the wait, gets a
 *     wrong answer. (Not a race report: the kernel's stage copies are
 *     cp.async through raw pointers, which the race check does not see,
 *     so the wrong answer is what catches an early overwrite.)
 *   - TF32: the low 13 mantissa bits of each operand are dropped
 *     (truncation, as the tensor cores read them); float products of TF32
 *     values are exact, the sums are float, in k order.
 */
#ifndef MT_EMU_WGMMA_H
#define MT_EMU_WGMMA_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace mt_emu {

/* The origin of the emulated shared addresses: the block's dynamic shared
 * memory (the checked alias mapping), rounded down to 1024 bytes. */
inline uintptr_t wgmma_shared_origin()
{
    return (uintptr_t)from_raw(dynamic_shared_ptr()) & ~(uintptr_t)1023;
}

inline float wgmma_tf32_value(const float *p)
{
    uint32_t bits;
    std::memcpy(&bits, p, sizeof bits);
    bits &= 0xffffe000u;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

/* Where element (r, k) of the K-major operand a descriptor names lies:
 * its address in the checked (alias) mapping of shared memory. */
inline const float *wgmma_operand_at(uint64_t desc, int r, int k)
{
    if ((desc >> 62) != 1 || ((desc >> 49) & 7) != 0) {
        std::fprintf(stderr, "emulator: wgmma descriptor %#llx: only the 128-byte swizzle with base offset 0 "
                             "is emulated\n", (unsigned long long)desc);
        std::abort();
    }
    const uintptr_t start = (uintptr_t)(desc & 0x3fff) << 4;
    const uintptr_t stride = (uintptr_t)((desc >> 32) & 0x3fff) << 4;
    const uintptr_t x = start + (uintptr_t)(r / 8) * stride + (uintptr_t)(r % 8) * 128 + 4 * (uintptr_t)k;
    const uintptr_t swizzled = x ^ (((x >> 7) & 7) << 4);
    return reinterpret_cast<const float *>(wgmma_shared_origin() + swizzled);
}

/* Element (r, k) as TF32, read for this thread (checked in full mode, as if
 * the thread read it at code address pc). */
inline float wgmma_operand(uint64_t desc, int r, int k, const void *pc)
{
    const float *p = wgmma_operand_at(desc, r, k);
    if (check_full)
        shared_emulated_read(p, pc);
    return wgmma_tf32_value(p);
}

/* One queued product of this thread: d (n / 2 floats) += A B. */
struct WgmmaPending {
    float *d;
    int n;
    uint64_t a_desc, b_desc;
    int accumulate;
    long group;
};
struct WgmmaQueue {
    std::vector<WgmmaPending> pending;
    long committed = 0;
};

/* This thread's linear index in its block. */
inline int wgmma_thread()
{
    return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}

/* Each emulated thread's queue, by its index in the block (a block's threads
 * run on one OS thread, one block at a time); a queue is emptied by its
 * thread's last wait, so the next block finds it empty. */
inline WgmmaQueue &wgmma_queue()
{
    /* 1024: the most threads a block has; sized once, so that a queue never
     * moves while a thread that may yield (a checked read) holds it */
    thread_local std::vector<WgmmaQueue> queues(1024);
    return queues[(size_t)wgmma_thread()];
}

/* The accumulators of this thread (see wgmma_tf32.h's layout). */
inline void wgmma_run(const WgmmaPending &op, const void *pc)
{
    const int tid = wgmma_thread();
    const int warp = (tid % 128) / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    float a[2][8];
    for (int h = 0; h < 2; ++h)
        for (int k = 0; k < 8; ++k)
            a[h][k] = wgmma_operand(op.a_desc, 16 * warp + g + 8 * h, k, pc);
    for (int j = 0; j < op.n / 8; ++j)
        for (int c = 0; c < 2; ++c) {
            float b[8];
            for (int k = 0; k < 8; ++k)
                b[k] = wgmma_operand(op.b_desc, 8 * j + 2 * t + c, k, pc);
            for (int h = 0; h < 2; ++h) {
                float &out = op.d[4 * j + 2 * h + c];
                float sum = op.accumulate ? out : 0.0f;
                for (int k = 0; k < 8; ++k)
                    sum += a[h][k] * b[k];
                out = sum;
            }
        }
}

} /* namespace mt_emu */

inline uint64_t wgmma_desc(const float *start)
{
    const uintptr_t address = (uintptr_t)::mt_emu::from_raw(start) - ::mt_emu::wgmma_shared_origin();
    return wgmma_desc_encode((uint32_t)address) | (wgmma_desc_encode(16) << 16) |
           (wgmma_desc_encode(kWgmmaAtomBytes) << 32) | (kWgmmaSwizzle128 << 62);
}

/* Ordering is what the queue gives: nothing to do. */
inline void wgmma_fence() {}
inline void wgmma_fence_shared_writes() {}

inline void wgmma_commit() { ++::mt_emu::wgmma_queue().committed; }

/* Runs, in issue order, the products of every group but the newest N. */
template <int N>
inline void wgmma_wait()
{
    ::mt_emu::WgmmaQueue &q = ::mt_emu::wgmma_queue();
    /* where a race report says the operands were read: this wait */
here:
    const void *pc = &&here;
    size_t done = 0;
    while (done < q.pending.size() && q.pending[done].group < q.committed - N)
        ::mt_emu::wgmma_run(q.pending[done++], pc);
    q.pending.erase(q.pending.begin(), q.pending.begin() + (long)done);
}

template <int R>
inline void wgmma_fence_operand(float (&d)[R])
{
    (void)d;
}

inline void wgmma_tf32_m64n128k8(float (&d)[64], uint64_t a_desc, uint64_t b_desc, int accumulate)
{
    ::mt_emu::WgmmaQueue &q = ::mt_emu::wgmma_queue();
    q.pending.push_back(::mt_emu::WgmmaPending{d, 128, a_desc, b_desc, accumulate, q.committed});
}

inline void wgmma_tf32_m64n256k8(float (&d)[128], uint64_t a_desc, uint64_t b_desc, int accumulate)
{
    ::mt_emu::WgmmaQueue &q = ::mt_emu::wgmma_queue();
    q.pending.push_back(::mt_emu::WgmmaPending{d, 256, a_desc, b_desc, accumulate, q.committed});
}

#endif /* MT_EMU_WGMMA_H */
