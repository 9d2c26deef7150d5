/*
 * map_ops.h: the functors of the map kernels (src/map.cu), out = f(x), one
 * per op of MT_MAP_OPS (minitensor.h) but the activations, whose functors
 * are in activations.h. A functor with a scalar holds it as the member s
 * (make_op in activations.h fills it).
 *
 * int64 takes the ops with an integer meaning ("fi" in the list); the
 * float functors serve it where the same code is right for integers (relu,
 * sign), and a specialization where it is not: negation, abs, + and * wrap
 * modulo 2^64, and pow is an integer power. bool takes copy and fill only.
 */
#ifndef MT_MAP_OPS_H
#define MT_MAP_OPS_H

#include <stdint.h>

#include "device_math.h"

/* mt_map runs copy as copy_tensor, with map_cast (below), which converts
 * between dtypes; this one is here so that every op has a functor. */
template <typename T>
struct map_copy {
    __device__ T operator()(T x) const { return x; }
};

template <typename T>
struct map_neg {
    __device__ T operator()(T x) const { return -x; }
};

template <typename T>
struct map_exp {
    __device__ T operator()(T x) const { return mt_exp(x); }
};

template <typename T>
struct map_log {
    __device__ T operator()(T x) const { return mt_log(x); }
};

template <typename T>
struct map_relu {
    /* Written so that NaN passes through (NaN < 0 is false), as in PyTorch:
     * a NaN in the activations should not be hidden by the ReLU. */
    __device__ T operator()(T x) const { return x < T(0) ? T(0) : x; }
};

template <typename T>
struct map_sigmoid {
    __device__ T operator()(T x) const
    {
        /* 1 / (1 + exp(-x)) overflows exp for large negative x; each branch
         * only ever takes exp of a non-positive number, which cannot. */
        if (x >= T(0))
            return T(1) / (T(1) + mt_exp(-x));
        T e = mt_exp(x);
        return e / (T(1) + e);
    }
};

template <typename T>
struct map_tanh {
    __device__ T operator()(T x) const { return mt_tanh(x); }
};

template <typename T>
struct map_abs {
    __device__ T operator()(T x) const { return mt_fabs(x); }
};

template <typename T>
struct map_sqrt {
    __device__ T operator()(T x) const { return mt_sqrt(x); }
};

template <typename T>
struct map_reciprocal {
    __device__ T operator()(T x) const { return T(1) / x; }
};

template <typename T>
struct map_sign {
    /* 0 (and -0) and NaN fall through to themselves. */
    __device__ T operator()(T x) const { return x > T(0) ? T(1) : x < T(0) ? T(-1) : x; }
};

template <typename T>
struct map_add_scalar {
    T s;
    __device__ T operator()(T x) const { return x + s; }
};

template <typename T>
struct map_mul_scalar {
    T s;
    __device__ T operator()(T x) const { return x * s; }
};

template <typename T>
struct map_pow_scalar {
    T s;
    __device__ T operator()(T x) const { return mt_pow(x, s); }
};

template <typename T>
struct map_rpow_scalar {
    T s;
    __device__ T operator()(T x) const { return mt_pow(s, x); }
};

/* ---- int64: the ops that can overflow wrap (device_math.h) ------------ */

template <>
struct map_neg<int64_t> {
    /* -INT64_MIN does not fit: it wraps to INT64_MIN, as in torch. */
    __device__ int64_t operator()(int64_t x) const { return wrap_neg(x); }
};

template <>
struct map_abs<int64_t> {
    /* abs(INT64_MIN) wraps to INT64_MIN, as in torch. */
    __device__ int64_t operator()(int64_t x) const { return x < 0 ? wrap_neg(x) : x; }
};

template <>
struct map_add_scalar<int64_t> {
    int64_t s;
    __device__ int64_t operator()(int64_t x) const { return wrap_add(x, s); }
};

template <>
struct map_mul_scalar<int64_t> {
    int64_t s;
    __device__ int64_t operator()(int64_t x) const { return wrap_mul(x, s); }
};

template <>
struct map_pow_scalar<int64_t> {
    int64_t s; /* >= 0: mt_map refuses any other exponent */
    __device__ int64_t operator()(int64_t x) const { return int_pow(x, s); }
};

/* softplus(x) = log(1 + exp(x)). exp overflows for x above ~88 (float), so
 * write it as max(x, 0) + log(1 + exp(-|x|)): exp now only sees numbers <= 0,
 * and log1p keeps the digits that log(1 + tiny) would lose for large |x|. */
template <typename T>
struct map_softplus {
    __device__ T operator()(T x) const { return (x > T(0) ? x : T(0)) + mt_log1p(mt_exp(-mt_fabs(x))); }
};

/* erf(x) = 2/sqrt(pi) * integral of exp(-t^2) from 0 to x: what the exact GELU,
 * x * (1 + erf(x / sqrt(2))) / 2, is made of. The device library's erff is
 * accurate to 2 ulp. */
template <typename T>
struct map_erf {
    __device__ T operator()(T x) const { return mt_erf(x); }
};

/* mt_map runs fill as mt_fill (which never reads `in`); the functor is here
 * so that every op of MT_MAP_OPS has one. */
template <typename T>
struct map_fill {
    T s;
    __device__ T operator()(T) const { return s; }
};

/* MT_MAP_COPY from TIn to TOut: a cast by mt_cast's rules (device_math.h),
 * or the identity when they are the same type. */
template <typename TOut, typename TIn>
struct map_cast {
    __device__ TOut operator()(TIn x) const { return mt_cast<TOut>(x); }
};

#endif /* MT_MAP_OPS_H */
