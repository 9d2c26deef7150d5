/*
 * device_math.h: the maths kernels call, one overload per precision; the
 * NaN-aware max and min; and the int64 and bool rules: casts between the
 * four dtypes (mt_cast), wrapping integer arithmetic, integer powers, and
 * division that rounds toward -inf.
 */
#ifndef MT_DEVICE_MATH_H
#define MT_DEVICE_MATH_H

#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "indexing.h" /* MT_HD: host and device */
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
MT_DEVICE float mt_expm1(float x) { return expm1f(x); }
MT_DEVICE double mt_expm1(double x) { return expm1(x); }
MT_DEVICE float mt_erf(float x) { return erff(x); }
MT_DEVICE double mt_erf(double x) { return erf(x); }
MT_DEVICE float mt_pow(float x, float y) { return powf(x, y); }
MT_DEVICE double mt_pow(double x, double y) { return pow(x, y); }
MT_DEVICE float mt_fmod(float x, float y) { return fmodf(x, y); }
MT_DEVICE double mt_fmod(double x, double y) { return fmod(x, y); }
MT_DEVICE float mt_floor(float x) { return floorf(x); }
MT_DEVICE double mt_floor(double x) { return floor(x); }
MT_DEVICE float mt_copysign(float x, float y) { return copysignf(x, y); }
MT_DEVICE double mt_copysign(double x, double y) { return copysign(x, y); }

/* x != x holds only for NaN. Used where NaN must win (max, min, argmax), as
 * in NumPy and PyTorch, so that a NaN in the data is never silently hidden. */
template <typename T>
MT_DEVICE bool mt_isnan(T x)
{
    return x != x;
}

/* Integers and bools are never NaN (and `x != x` on them reads like a bug). */
MT_DEVICE bool mt_isnan(int64_t) { return false; }
MT_DEVICE bool mt_isnan(bool) { return false; }

template <typename T>
MT_DEVICE T mt_infinity()
{
    return (T)INFINITY;
}

/* The lowest and the highest value of T: the identities of max and min. */
template <typename T>
MT_DEVICE T mt_lowest()
{
    if constexpr (std::is_same<T, bool>::value)
        return false;
    else if constexpr (std::is_same<T, int64_t>::value)
        return INT64_MIN;
    else
        return -mt_infinity<T>();
}

template <typename T>
MT_DEVICE T mt_highest()
{
    if constexpr (std::is_same<T, bool>::value)
        return true;
    else if constexpr (std::is_same<T, int64_t>::value)
        return INT64_MAX;
    else
        return mt_infinity<T>();
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

/* ---- casts between the dtypes --------------------------------------------
 * The value of x as a TOut, by the rules of minitensor.h ("Dtypes"): to bool
 * x != 0 (NaN is true); from bool 0 or 1; float -> int64 truncates toward
 * zero, NaN gives 0 and values beyond the int64 range saturate. A plain C++
 * conversion of NaN or of a float outside the range to int64 is undefined
 * behaviour: x86 gives INT64_MIN for all of them, the GPU saturates, and a
 * host compiler may assume it never happens. So that case is written out,
 * and the conversion that remains is of a value that fits. Host and device:
 * mt_map converts its double scalar with it too. */
template <typename TOut, typename TIn>
MT_HD TOut mt_cast(TIn x)
{
    if constexpr (std::is_same<TOut, bool>::value) {
        return x != TIn(0);
    } else if constexpr (std::is_same<TOut, int64_t>::value && std::is_floating_point<TIn>::value) {
        /* 2^63 is exact in float and double; every value below it fits. */
        const TIn two63 = TIn(9223372036854775808.0);
        if (x != x)
            return 0;
        if (x >= two63)
            return INT64_MAX;
        if (x <= -two63)
            return INT64_MIN;
        return (int64_t)x;
    } else {
        return (TOut)x;
    }
}

/* ---- int64 arithmetic: wrapping, as torch's ---------------------------------
 * int64 +, -, * and negation wrap modulo 2^64 (INT64_MAX + 1 is INT64_MIN).
 * Signed overflow is undefined behaviour in C++: the emulator's host compiler
 * may assume it never happens (and drop a check that relies on it). Unsigned
 * arithmetic wraps by definition, so these compute in uint64_t and convert
 * back, which is modular (C++20, and GCC, Clang and nvcc before it). */
MT_HD int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
MT_HD int64_t wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
MT_HD int64_t wrap_mul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
MT_HD int64_t wrap_neg(int64_t a) { return (int64_t)(0u - (uint64_t)a); }

/* base ** exp, wrapping. exp >= 0: by squaring, one multiply per bit of exp
 * (64 at most, not exp of them). exp < 0: the real result truncated toward
 * zero, as torch gives for integer tensors: 1 / base**|exp| is 0 unless
 * |base| is 1 (base 0 gives 0 too: there is no integer infinity). */
MT_HD int64_t int_pow(int64_t base, int64_t exp)
{
    if (exp < 0) {
        if (base == 1)
            return 1;
        if (base == -1)
            return (exp & 1) ? -1 : 1;
        return 0;
    }
    uint64_t result = 1, square = (uint64_t)base;
    for (uint64_t e = (uint64_t)exp; e != 0; e >>= 1) {
        if (e & 1)
            result *= square;
        square *= square;
    }
    return (int64_t)result;
}

/* a // b, rounding toward -inf (Python's //, torch.floor_divide), where C's
 * a / b truncates toward zero: -7 // 2 is -4, C's -7 / 2 is -3. Two
 * divisions trap on x86 (SIGFPE, in the emulator) and are undefined in C++:
 * by zero, and INT64_MIN / -1, whose result does not fit. Neither may trap
 * here: a // 0 gives 0 (the Python layer refuses it before calling) and
 * a // -1 is -a, wrapping. */
MT_HD int64_t floor_div(int64_t a, int64_t b)
{
    if (b == 0)
        return 0;
    if (b == -1)
        return wrap_neg(a);
    const int64_t q = a / b;
    /* Truncation rounded a negative, inexact quotient up: one step down. */
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* a - (a // b) * b: the remainder with the sign of b (Python's %,
 * torch.remainder), where C's % takes the sign of a. a % 0 gives 0 (see
 * floor_div), and a % -1 is 0 for every a (INT64_MIN % -1 traps in C). */
MT_HD int64_t floor_mod(int64_t a, int64_t b)
{
    if (b == 0 || b == -1)
        return 0;
    const int64_t r = a % b;
    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}

/* The same for floats, as torch computes them (Python's algorithm): fmod is
 * exact, and (a - fmod(a, b)) / b is a whole number up to rounding, so the
 * result is the right whole number where floor(a / b) may round across one
 * (1 // 0.1 is 9: 1 / 0.1 rounds to 10, but 0.1 is a little more than 1/10).
 * b == 0 gives a / b: inf or NaN. */
template <typename T>
MT_DEVICE T floor_div(T a, T b)
{
    if (b == T(0))
        return a / b;
    const T mod = mt_fmod(a, b);
    T div = (a - mod) / b;
    if (mod != T(0) && (b < T(0)) != (mod < T(0)))
        div -= T(1);
    if (div == T(0))
        return mt_copysign(T(0), a / b);
    T floored = mt_floor(div);
    if (div - floored > T(0.5))
        floored += T(1);
    return floored;
}

/* fmod has the sign of a; move a remainder of the wrong sign across by one
 * b. b == 0 gives NaN (fmod's), as torch.remainder does. */
template <typename T>
MT_DEVICE T floor_mod(T a, T b)
{
    T mod = mt_fmod(a, b);
    if (mod != T(0) && (b < T(0)) != (mod < T(0)))
        mod += b;
    return mod;
}

#endif /* MT_DEVICE_MATH_H */
