/*
 * device_math.h: the maths kernels call, one overload per precision, and the
 * NaN-aware max and min.
 */
#ifndef MT_DEVICE_MATH_H
#define MT_DEVICE_MATH_H

#include <math.h>

#include "launch.h"

/* ---- device math: one overload per precision ------------------------------ */
/* Kernels are templates on T (float or double). Calling exp() on a float
 * would quietly compute in double on the GPU, which is many times slower;
 * these overloads pick the single-precision function for float. */

MT_DEVICE float mt_exp(float x) { return expf(x); }
MT_DEVICE double mt_exp(double x) { return exp(x); }
MT_DEVICE float mt_log(float x) { return logf(x); }
MT_DEVICE double mt_log(double x) { return log(x); }
MT_DEVICE float mt_tanh(float x) { return tanhf(x); }
MT_DEVICE double mt_tanh(double x) { return tanh(x); }
MT_DEVICE float mt_sqrt(float x) { return sqrtf(x); }
MT_DEVICE double mt_sqrt(double x) { return sqrt(x); }
MT_DEVICE float mt_fabs(float x) { return fabsf(x); }
MT_DEVICE double mt_fabs(double x) { return fabs(x); }
MT_DEVICE float mt_log1p(float x) { return log1pf(x); }
MT_DEVICE double mt_log1p(double x) { return log1p(x); }
MT_DEVICE float mt_pow(float x, float y) { return powf(x, y); }
MT_DEVICE double mt_pow(double x, double y) { return pow(x, y); }

/* x != x holds only for NaN. Used where NaN must win (max, min, argmax), as
 * in NumPy and PyTorch, so that a NaN in the data is never silently hidden. */
template <typename T>
MT_DEVICE bool mt_isnan(T x)
{
    return x != x;
}

template <typename T>
MT_DEVICE T mt_infinity()
{
    return (T)INFINITY;
}

/* NaN-propagating maximum and minimum of two values: a NaN in either
 * argument comes out (if a is NaN it is returned; if b is NaN, a > b is false
 * and b is returned). */
template <typename T>
MT_DEVICE T mt_max(T a, T b)
{
    return (mt_isnan(a) || a > b) ? a : b;
}

template <typename T>
MT_DEVICE T mt_min(T a, T b)
{
    return (mt_isnan(a) || a < b) ? a : b;
}

#endif /* MT_DEVICE_MATH_H */
