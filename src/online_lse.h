/*
 * online_lse.h: log(sum(exp(x))) of a row in one pass, for the row kernels
 * of logsumexp.cu and cross_entropy.cu.
 *
 * Each thread streams its elements once (four or two at a time from 16-byte
 * loads where the row allows), keeping its running maximum m and
 * the sum s of exp(x - m): a larger x rescales the sum (s * exp(m - x)) before
 * adding its own exp(0) = 1, so no exp ever overflows and the row is read
 * once instead of twice (max, then sum). The block then agrees on the
 * largest m, rescales each thread's s to it, and adds them up.
 *
 * Infinities and NaN follow the two-pass formula m + log(sum(exp(x - m))):
 * a row of -inf gives -inf, a row with +inf gives +inf, a NaN gives NaN.
 * (exp(x - m) with x == m == +-inf would be exp(NaN): equal values add 1.)
 *
 * Compiled as it is by nvcc and the emulator (not through minitensor/cuda/_cu2emu.py):
 * it declares no __shared__ variables; the caller passes its scratch.
 */
#ifndef MT_ONLINE_LSE_H
#define MT_ONLINE_LSE_H

#include "block_reduce.h"
#include "combine.h"

/* One thread's running maximum and rescaled sum. */
template <typename T>
struct OnlineLse {
    T m = -mt_infinity<T>();
    T s = T(0);

    /* Takes in a group of values whose maximum is m2 and whose sum of
     * exp(x - m2) is s2 (one value x: merge(x, 1)). */
    MT_DEVICE void merge(T m2, T s2)
    {
        if (m2 > m) {
            s = s * mt_exp(m - m2) + s2; /* m - m2 is -inf while m is: s is 0 then */
            m = m2;
        } else if (m2 == m) {
            s += s2;
        } else {
            s += s2 * mt_exp(m2 - m); /* NaN stays NaN here */
        }
    }

    MT_DEVICE void add(T x) { merge(x, T(1)); }

    /* W values at once (a 16-byte Pack): one rescale for the group instead of
     * one per value. A group of -inf adds nothing. */
    template <int W>
    MT_DEVICE void add_group(const T (&v)[W])
    {
        T gm = v[0];
        MT_UNROLL for (int w = 1; w < W; ++w)
            gm = mt_max(gm, v[w]);
        if (gm == -mt_infinity<T>())
            return;
        T gs = T(0);
        MT_UNROLL for (int w = 0; w < W; ++w)
            gs += v[w] == gm ? T(1) : mt_exp(v[w] - gm);
        merge(gm, gs);
    }
};

/* Streams elements k = threadIdx.x, + blockDim.x, ... of a row of len values
 * `stride` apart into lse: 16-byte Packs when the row is contiguous and
 * aligned and len a multiple of the Pack, one value at a time otherwise. */
template <typename T>
MT_DEVICE void add_row(OnlineLse<T> &lse, const T *row, int64_t len, int64_t stride)
{
    constexpr int W = Pack<T>::kWidth;
    if (stride == 1 && len % W == 0 && (uintptr_t)row % 16 == 0) {
        const Pack<T> *packs = reinterpret_cast<const Pack<T> *>(row);
        for (int64_t c = threadIdx.x; c < len / W; c += blockDim.x) {
            const Pack<T> p = packs[c];
            lse.add_group(p.v);
        }
    } else {
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x)
            lse.add(row[k * stride]);
    }
}

/* The row's log(sum(exp(x))) from every thread's OnlineLse; every thread of
 * the block must call it (it has barriers), and every thread gets the result. */
template <typename T>
MT_DEVICE T block_logsumexp(BlockScratch<T> &scratch, const OnlineLse<T> &mine)
{
    const T row_max = block_reduce_warps(scratch, mine.m, -mt_infinity<T>(), CombineMax<T>());
    const T scaled = mine.s == T(0) ? T(0) : mine.m == row_max ? mine.s : mine.s * mt_exp(mine.m - row_max);
    const T row_sum = block_reduce_warps(scratch, scaled, T(0), CombineSum<T>());
    return row_max == -mt_infinity<T>() ? row_max : row_max + mt_log(row_sum);
}

#endif /* MT_ONLINE_LSE_H */
