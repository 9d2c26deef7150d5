/*
 * combine.h: the two combiners the row kernels hand to block_reduce and
 * block_reduce_warps (block_reduce.h): a row's maximum and a row's sum.
 */
#ifndef MT_COMBINE_H
#define MT_COMBINE_H

#include "device_math.h"

template <typename T>
struct CombineMax {
    __device__ T operator()(T a, T b) const { return mt_max(a, b); }
};

template <typename T>
struct CombineSum {
    __device__ T operator()(T a, T b) const { return a + b; }
};

#endif /* MT_COMBINE_H */
