/*
 * activations.h: the activation functions as functors of the map and zip
 * kernels (map.cu, zip.cu), forward and backward, and the way a functor
 * receives its scalars.
 *
 * Each activation is one map op (out = f(x)) and its gradient one zip op
 * (grad_in = g(grad_out, x)), so that F.gelu(x) is one kernel forward and
 * one backward, where a chain of Tensor ops (x * (1 + erf(x / sqrt 2)) / 2)
 * launches five kernels and keeps four temporaries alive for the backward.
 * The gradients are computed from the forward's input x, as torch's are.
 *
 * Scalars. A functor that needs a parameter holds it as a member: `s` for
 * the first (elu's alpha, leaky_relu's slope, add_scalar's operand), `t` for
 * a second (hardtanh's max). make_op builds any functor from the two
 * scalars of mt_map_scalars / mt_zip_scalars, giving it only the members it
 * has, so the dispatch (one generated switch per family) stays the same for
 * every op. A functor is a kernel argument, passed by value: the scalars
 * reach every thread in the kernel's parameter space, with no memory read.
 */
#ifndef MT_ACTIVATIONS_H
#define MT_ACTIVATIONS_H

#include <type_traits>
#include <utility>

#include "device_math.h"

/* ---- the scalars of a functor ------------------------------------------- */

/* Does Op have a member s (a first scalar), a member t (a second)? */
template <typename Op, typename = void>
struct takes_scalar : std::false_type {};
template <typename Op>
struct takes_scalar<Op, decltype((void)std::declval<Op &>().s)> : std::true_type {};
template <typename Op, typename = void>
struct takes_second_scalar : std::false_type {};
template <typename Op>
struct takes_second_scalar<Op, decltype((void)std::declval<Op &>().t)> : std::true_type {};

/* The functor Op with the scalars it holds, from s and t. */
template <typename Op, typename T>
static Op make_op(T s, T t)
{
    if constexpr (takes_second_scalar<Op>::value)
        return Op{s, t};
    else if constexpr (takes_scalar<Op>::value)
        return Op{s};
    else
        return Op{};
}

/* ---- helpers of the GELUs ----------------------------------------------- */

template <typename T>
MT_DEVICE T inv_sqrt2() { return T(0.70710678118654752440); } /* 1 / sqrt(2) */
template <typename T>
MT_DEVICE T inv_sqrt_2pi() { return T(0.39894228040143267794); } /* 1 / sqrt(2 pi) */
template <typename T>
MT_DEVICE T sqrt_2_over_pi() { return T(0.79788456080286535588); } /* sqrt(2 / pi) */
template <typename T>
MT_DEVICE T gelu_kappa() { return T(0.044715); } /* the cubic term of the tanh form */

/* sigmoid(x) and sigmoid(-x) without overflow, from one exp of a number
 * <= 0: with e = exp(-|x|) and r = 1 / (1 + e), they are r and e * r, in
 * the order x's sign says. Selects, not branches: a warp whose lanes hold x
 * of both signs ran both branches of an if, two exps and two divisions per
 * element, and the activations that take a sigmoid were bound by that. */
template <typename T>
struct SigmoidPair {
    T pos, neg; /* sigmoid(x), sigmoid(-x) */
};

template <typename T>
MT_DEVICE SigmoidPair<T> sigmoid_pair(T x)
{
    const T e = mt_exp(-mt_fabs(x));
    const T r = T(1) / (T(1) + e);
    const T small = e * r; /* the sigmoid of the side of 0 that x is not on */
    return x >= T(0) ? SigmoidPair<T>{r, small} : SigmoidPair<T>{small, r};
}

template <typename T>
MT_DEVICE T stable_sigmoid(T x)
{
    return sigmoid_pair(x).pos;
}

/* ---- forward: map ops ----------------------------------------------------- */

/* GELU, x * Phi(x) with Phi the standard normal CDF, (1 + erf(x / sqrt 2)) / 2. */
template <typename T>
struct map_gelu {
    __device__ T operator()(T x) const { return T(0.5) * x * (T(1) + mt_erf(x * inv_sqrt2<T>())); }
};

/* GELU with Phi(x) ~ (1 + tanh(u)) / 2, u = sqrt(2/pi) (x + 0.044715 x^3)
 * (GPT-2's). (1 + tanh(u)) / 2 is sigmoid(2u), written so: where tanh(u) is
 * nearly -1 (x below -3), 1 + tanh(u) in float32 keeps only the last digits
 * of tanh's rounding, and the left tail would be off by percents. */
template <typename T>
MT_DEVICE T gelu_tanh_inner(T x) { return sqrt_2_over_pi<T>() * (x + gelu_kappa<T>() * x * x * x); }

template <typename T>
struct map_gelu_tanh {
    __device__ T operator()(T x) const { return x * stable_sigmoid(T(2) * gelu_tanh_inner(x)); }
};

/* SiLU (swish), x * sigmoid(x). */
template <typename T>
struct map_silu {
    __device__ T operator()(T x) const { return x * stable_sigmoid(x); }
};

/* ELU: alpha * (exp(x) - 1) below 0. expm1 keeps the digits that exp(x) - 1
 * loses near 0, where exp(x) is 1 + a little. NaN fails x > 0 and stays NaN
 * through expm1. */
template <typename T>
struct map_elu {
    T s; /* alpha */
    __device__ T operator()(T x) const { return x > T(0) ? x : s * mt_expm1(x); }
};

template <typename T>
struct map_leaky_relu {
    T s; /* negative_slope */
    __device__ T operator()(T x) const { return x > T(0) ? x : x * s; }
};

/* hardtanh, x clamped to [s, t]. Written as two comparisons that are false
 * for NaN, so NaN passes through, as torch's clamp lets it. */
template <typename T>
struct map_hardtanh {
    T s; /* min_val */
    T t; /* max_val */
    __device__ T operator()(T x) const { return x < s ? s : (x > t ? t : x); }
};

/* ---- backward: zip ops, (incoming gradient, forward input) -------------- */

/* d/dx x Phi(x) = Phi(x) + x phi(x), phi the normal density. */
template <typename T>
struct zip_gelu_backward {
    __device__ T operator()(T grad, T x) const
    {
        const T cdf = T(0.5) * (T(1) + mt_erf(x * inv_sqrt2<T>()));
        const T pdf = inv_sqrt_2pi<T>() * mt_exp(T(-0.5) * x * x);
        return grad * (cdf + x * pdf);
    }
};

/* With u = sqrt(2/pi) (x + k x^3): d/dx x (1 + tanh u) / 2
 *   = (1 + tanh u) / 2 + x / 2 * (1 - tanh^2 u) * du/dx,
 * torch's formula, with (1 + tanh u) / 2 = sigmoid(2u) = s and
 * (1 - tanh^2 u) / 2 = 2 s (1 - s), 1 - s being sigmoid(-2u): no 1 + tanh
 * or 1 - tanh^2 that cancels in a tail (see map_gelu_tanh). */
template <typename T>
struct zip_gelu_tanh_backward {
    __device__ T operator()(T grad, T x) const
    {
        const T u = gelu_tanh_inner(x);
        const SigmoidPair<T> sig = sigmoid_pair(T(2) * u);
        const T s = sig.pos, s_neg = sig.neg;
        const T inner_derivative = sqrt_2_over_pi<T>() * (T(1) + T(3) * gelu_kappa<T>() * x * x);
        return grad * (s + T(2) * x * s * s_neg * inner_derivative);
    }
};

/* d/dx x sigmoid(x) = sigmoid(x) (1 + x (1 - sigmoid(x))). */
template <typename T>
struct zip_silu_backward {
    __device__ T operator()(T grad, T x) const
    {
        const T sig = stable_sigmoid(x);
        return grad * sig * (T(1) + x * (T(1) - sig));
    }
};

/* d/dx alpha (exp(x) - 1) = alpha exp(x) for x <= 0; 1 above (torch's
 * elu_backward from the input). */
template <typename T>
struct zip_elu_backward {
    T s; /* alpha */
    __device__ T operator()(T grad, T x) const { return x > T(0) ? grad : grad * s * mt_exp(x); }
};

template <typename T>
struct zip_leaky_relu_backward {
    T s; /* negative_slope */
    __device__ T operator()(T grad, T x) const { return x > T(0) ? grad : grad * s; }
};

/* 0 where the clamp held x (at the bounds too, as torch), else grad. */
template <typename T>
struct zip_hardtanh_backward {
    T s; /* min_val */
    T t; /* max_val */
    __device__ T operator()(T grad, T x) const { return (x <= s || x >= t) ? T(0) : grad; }
};

#endif /* MT_ACTIVATIONS_H */
