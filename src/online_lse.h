/*
 * online_lse.h: log(sum(exp(x))) of a row in one pass, for the row kernels
 * of logsumexp.cu and cross_entropy.cu.
 *
 * Each thread streams its elements once, keeping its running maximum m and
 * the sum s of exp(x - m): a larger x rescales the sum (s * exp(m - x)) before
 * adding its own exp(0) = 1, so no exp ever overflows and the row is read
 * once instead of twice (max, then sum). The block then agrees on the
 * largest m, rescales each thread's s to it, and adds them up.
 *
 * Infinities and NaN follow the two-pass formula m + log(sum(exp(x - m))):
 * a row of -inf gives -inf, a row with +inf gives +inf, a NaN gives NaN.
 * (exp(x - m) with x == m == +-inf would be exp(NaN): equal values add 1.)
 *
 * Compiled as it is by nvcc and the emulator (not through tools/cu2emu.py):
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

    MT_DEVICE void add(T x)
    {
        if (x > m) {
            s = s * mt_exp(m - x) + T(1); /* m - x is -inf while m is: s is 0 then */
            m = x;
        } else if (x == m) {
            s += T(1);
        } else {
            s += mt_exp(x - m); /* NaN stays NaN here */
        }
    }
};

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
