/*
 * async_copy.h: copies from global into shared memory that do not pass
 * through registers (cp.async, compute capability 8.0 and newer).
 *
 * A thread issues copies, commits the ones it issued as a group, and later
 * waits until all but its newest kPrior groups have landed. Between the
 * issue and the wait the copy is in flight while the thread computes on a
 * stage that landed earlier: that overlap is the point, and it costs no
 * staging registers. What a thread waited for is visible to the other
 * threads of the block only after a barrier, as any shared store is.
 *
 *   async_copy<kBytes>(dst, src, src_bytes)  copy kBytes (4, 8 or 16) from
 *                                            src to dst, reading only the
 *                                            first src_bytes and zero-filling
 *                                            the rest (0: all zeros, src is
 *                                            not read; it must still be a
 *                                            valid address);
 *   async_commit()                           close the group of copies issued
 *                                            since the last commit;
 *   async_wait<kPrior>()                     wait until at most kPrior groups
 *                                            are still in flight.
 *
 * The emulator has its twin (src/emu/emu_async.cpp), which writes the bytes
 * only at the wait, so a kernel that reads a stage too early fails there too.
 * On a GPU older than 8.0 the copy is an ordinary load and store.
 */
#ifndef MT_ASYNC_COPY_H
#define MT_ASYNC_COPY_H

#include "launch.h"

#ifdef MT_EMULATOR

/* dst is a pointer into a __shared__ array (&tile[i][j]), which the
 * emulator's checks follow. */
template <int kBytes, typename P>
inline void async_copy(P dst, const void *src, int src_bytes)
{
    static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
    ::mt_emu::async_copy_to(dst, src, kBytes, (size_t)src_bytes);
}
inline void async_commit() { ::mt_emu::async_commit(); }
template <int kPrior>
inline void async_wait() { ::mt_emu::async_wait(kPrior); }

#else

template <int kBytes>
MT_DEVICE void async_copy(void *dst, const void *src, int src_bytes)
{
    static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned to = (unsigned)__cvta_generic_to_shared(dst);
    if constexpr (kBytes == 16) /* .cg: 16-byte copies may skip L1, which they would only pollute */
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(src), "r"(src_bytes)
                     : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(to), "l"(src), "n"(kBytes),
                     "r"(src_bytes)
                     : "memory");
#else
    unsigned char *to = static_cast<unsigned char *>(dst);
    const unsigned char *from = static_cast<const unsigned char *>(src);
    for (int i = 0; i < kBytes; ++i)
        to[i] = i < src_bytes ? from[i] : 0;
#endif
}

MT_DEVICE void async_commit()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/* The "memory" clobber keeps the compiler from moving shared-memory reads
 * above the wait. */
template <int kPrior>
MT_DEVICE void async_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPrior) : "memory");
#endif
}

#endif /* MT_EMULATOR */

/* The 16 bytes (16 / sizeof(T) elements) of matrix row `row` from column
 * `col` (of `cols`), at data + row * ld + col, copied to dst_row[c..]: one
 * 16-byte copy when they lie inside the matrix (the caller keeps such a run
 * 16-byte aligned), else one copy per element, zero-filled past the edge or
 * when the row is outside (row_ok false). A copy of zero bytes still needs a
 * valid address: the matrix's first element. dst_row is a row of a
 * __shared__ array (tile[s][r]). */
template <typename T, typename Row>
MT_DEVICE void async_copy_row16(Row dst_row, int c, const T *data, int64_t row, bool row_ok, int64_t col,
                                int64_t cols, int64_t ld)
{
    constexpr int W = 16 / (int)sizeof(T);
    if (row_ok && col + W <= cols) {
        async_copy<16>(&dst_row[c], data + row * ld + col, 16);
    } else {
        MT_UNROLL for (int w = 0; w < W; ++w) {
            const bool inside = row_ok && col + w < cols;
            async_copy<(int)sizeof(T)>(&dst_row[c + w], inside ? data + row * ld + col + w : data,
                                       inside ? (int)sizeof(T) : 0);
        }
    }
}

#endif /* MT_ASYNC_COPY_H */
