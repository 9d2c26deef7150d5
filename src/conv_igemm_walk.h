/*
 * conv_igemm_walk.h: the forward's gather with its address arithmetic
 * taken out of the inner loop (the pipelined kernel's "stepped" configs,
 * src/conv_igemm_pipelined.cu).
 *
 * What the profile said (Nsight Compute, H100, 3 x 3, 64 channels, 32 x 32,
 * batch 256): the forward issued instructions at 73% of the SM's rate
 * against cuDNN's 85%, and a gathered element of B feeds only BM = 64
 * multiply-adds (the layer has 64 output channels), so each instruction
 * spent on gathering it weighs. ForwardProblem::b_at works every element out
 * from (c, i, j): the row and column it reads (two multiply-adds), four
 * compares against the image's edges, and a 64-bit address from c, y and x.
 *
 * Here, as CUTLASS's "optimized" convolution iterators do, each thread
 * works out once, for each of its columns (a window), a mask of the taps
 * that lie inside the image (bit i * KW + j: the window's corner is fixed,
 * so which taps fall in the padding is too), and the k it gathers are walked
 * by a running offset (c H W + i dh W + j dw) that a step moves on with adds
 * (every thread of a warp loads the same k, so the step's branches do not
 * diverge). An element then costs a mask bit, an add and the copy. The
 * mask holds 64 taps: larger kernels run the plain gather. The input
 * gradient's phase product (src/conv_igemm_phases.h) is a correlation of
 * grad_out with a phase's taps and walks the same way (below); the weight
 * gradient, whose K is the output pixels, walks those (at the end).
 *
 * Compiled as it is by nvcc and the emulator, like conv_implicit_gemm.h.
 */
#ifndef MT_CONV_IGEMM_WALK_H
#define MT_CONV_IGEMM_WALK_H

#include "conv_igemm_phases.h"
#include "conv_implicit_gemm.h"

/* One column (output pixel) of the forward's B: where its window's corner
 * lies (an offset from the group's first channel, negative in the padding)
 * and which of its taps lie inside the image. */
template <typename T>
struct WalkCol {
    const T *x;    /* the image's first channel of the group */
    int64_t start; /* iy0 * W + ix0: the window's corner */
    uint64_t inside; /* bit i * KW + j: tap (i, j) reads the image, not the padding */
};

/* A position k = (c, i, j) of the walk: off = c H W + i dh W + j dw, tap =
 * i * KW + j (the mask's bit). */
struct WalkPos {
    int64_t off;
    int tap, j;
};

template <typename T>
MT_DEVICE WalkCol<T> walk_col(const ForwardProblem<T> &prob, int g, int p)
{
    const ConvDims &d = prob.d;
    const typename ForwardProblem<T>::Col cl = prob.col(g, p);
    uint64_t inside = 0;
    for (int i = 0; i < d.kh; ++i) {
        const int y = cl.iy0 + i * d.dh;
        if ((unsigned)y >= (unsigned)d.h)
            continue;
        for (int j = 0; j < d.kw; ++j) {
            const int x = cl.ix0 + j * d.dw;
            if ((unsigned)x < (unsigned)d.w)
                inside |= (uint64_t)1 << (i * d.kw + j);
        }
    }
    return WalkCol<T>{cl.x, (int64_t)cl.iy0 * d.w + cl.ix0, inside};
}

template <typename T>
MT_DEVICE WalkPos walk_pos(const ForwardProblem<T> &prob, int k)
{
    const ConvDims &d = prob.d;
    const KTap t = k_tap(d, k);
    return WalkPos{(int64_t)t.c * d.hw + (int64_t)t.i * d.dh * d.w + t.j * d.dw, t.i * d.kw + t.j, t.j};
}

/* k -> k + 1: the next tap of the row, the next row's first, or the next
 * channel's first. */
template <typename T>
MT_DEVICE void walk_step(const ForwardProblem<T> &prob, WalkPos &at)
{
    const ConvDims &d = prob.d;
    at.off += d.dw;
    ++at.tap;
    if (++at.j == d.kw) {
        at.j = 0;
        at.off += (int64_t)d.dh * d.w - d.kw * d.dw; /* back to column 0, down dh rows */
        if (at.tap == d.taps) {
            at.tap = 0;
            at.off += d.hw - (int64_t)d.kh * d.dh * d.w; /* back to row 0 of the next channel */
        }
    }
}

/* ---- the same walk for the input gradient's phase product ------------------
 * (src/conv_igemm_phases.h) Column (image, u, v) reads grad_out at output
 * pixel (u + qy - ti, v + qx - tj) for tap (ti, tj) of the phase: a
 * correlation of grad_out with the phase's taps, so the mask is of the taps
 * that land inside the output, and the offset co OH OW - ti OW - tj walks
 * backwards along a row. */
template <typename T>
MT_DEVICE WalkCol<T> walk_col(const InputGradPhaseProblem<T> &prob, int g, int p)
{
    const ConvDims &d = prob.d; /* kh, kw: the phase's taps */
    const typename InputGradPhaseProblem<T>::Col cl = prob.col(g, p);
    uint64_t inside = 0;
    for (int i = 0; i < d.kh; ++i) {
        if ((unsigned)(cl.ty - i) >= (unsigned)d.oh)
            continue;
        for (int j = 0; j < d.kw; ++j)
            if ((unsigned)(cl.tx - j) < (unsigned)d.ow)
                inside |= (uint64_t)1 << (i * d.kw + j);
    }
    return WalkCol<T>{cl.go, (int64_t)cl.ty * d.ow + cl.tx, inside};
}

template <typename T>
MT_DEVICE WalkPos walk_pos(const InputGradPhaseProblem<T> &prob, int k)
{
    const ConvDims &d = prob.d;
    const KTap t = k_tap(d, k);
    return WalkPos{(int64_t)t.c * d.ohw - (int64_t)t.i * d.ow - t.j, t.i * d.kw + t.j, t.j};
}

template <typename T>
MT_DEVICE void walk_step(const InputGradPhaseProblem<T> &prob, WalkPos &at)
{
    const ConvDims &d = prob.d;
    at.off -= 1;
    ++at.tap;
    if (++at.j == d.kw) {
        at.j = 0;
        at.off += d.kw - d.ow; /* back to tap column 0, one output row up */
        if (at.tap == d.taps) {
            at.tap = 0;
            at.off += d.ohw + (int64_t)d.kh * d.ow; /* back to tap row 0 of the next channel */
        }
    }
}

/* ---- the weight gradient's gather, stepped ----------------------------------
 * (WeightGradProblem) B[k][q] = in[n, c, oy sh + i dh - ph, ox sw + j dw - pw]
 * for k = (n, oy, ox), an output pixel, and q = (c, i, j). A thread copies
 * one k of the same kBLoads columns q in every K-tile, and the same k of A
 * (grad_out[n, co, oy, ox]). The plain gather reads each column's Col from
 * the block's shared table once per element and splits k with two FastDivs
 * per K-tile; here the thread keeps its columns in registers (WgradCol: the
 * plane and tap offset, worked out once), and walks its k = (n, oy, ox) on
 * by the K-tile with adds (WgradPos). An element then costs two adds, two
 * compares and the copy. */
struct WgradCol {
    int64_t off; /* (g C / groups + c) H W + di W + dj, from in */
    int di, dj;  /* the tap's offset from a window's corner: i dh - ph, j dw - pw */
};

struct WgradPos {
    int img, oy, ox;
};

template <typename T>
MT_DEVICE WgradCol wgrad_col(const WeightGradProblem<T> &prob, int g, int q)
{
    const typename WeightGradProblem<T>::Col cl = prob.col(g, q);
    return WgradCol{(cl.x - prob.in) + (int64_t)cl.di * prob.d.w + cl.dj, cl.di, cl.dj};
}

template <typename T>
MT_DEVICE WgradPos wgrad_pos(const WeightGradProblem<T> &prob, int k)
{
    const ConvDims &d = prob.d;
    const int img = fdiv(k, d.ohw_div), pix = k - img * d.ohw;
    const int oy = fdiv(pix, d.ow_div);
    return WgradPos{img, oy, pix - oy * d.ow};
}

/* k -> k + step: along the output row, then down rows, then to the next image. */
template <typename T>
MT_DEVICE void wgrad_step(const WeightGradProblem<T> &prob, WgradPos &at, int step)
{
    const ConvDims &d = prob.d;
    at.ox += step;
    while (at.ox >= d.ow) {
        at.ox -= d.ow;
        if (++at.oy == d.oh) {
            at.oy = 0;
            ++at.img;
        }
    }
}

/* A thread's walk: its kCols columns n_first + i n_step (ok: inside the
 * product's N) and its k, from k_first. */
template <int kCols>
struct WgradWalk {
    WgradCol col[kCols];
    bool ok[kCols];
    WgradPos pos;
};

template <int kCols, typename T>
MT_DEVICE WgradWalk<kCols> wgrad_walk(const WeightGradProblem<T> &prob, int g, int n_first, int n_step, int k_first)
{
    WgradWalk<kCols> w;
    const int N = prob.N();
    MT_UNROLL for (int i = 0; i < kCols; ++i) {
        const int n = n_first + i * n_step;
        w.col[i] = wgrad_col(prob, g, n < N ? n : N - 1);
        w.ok[i] = n < N;
    }
    w.pos = wgrad_pos(prob, k_first);
    return w;
}

/* A's element k of a row: prob.a_k(k) without the divisions. */
template <typename T>
MT_DEVICE int64_t wgrad_a_k(const WeightGradProblem<T> &prob, const WgradPos &at)
{
    return (int64_t)at.img * prob.d.c_out * prob.d.ohw + at.oy * prob.d.ow + at.ox;
}

/* Where B's element (k, q) lies, nullptr in the padding. */
template <typename T>
MT_DEVICE const T *wgrad_at(const WeightGradProblem<T> &prob, const WgradCol &cl, const WgradPos &at)
{
    const ConvDims &d = prob.d;
    const int y0 = at.oy * d.sh, x0 = at.ox * d.sw; /* the window's corner, before the padding */
    if ((unsigned)(y0 + cl.di) >= (unsigned)d.h || (unsigned)(x0 + cl.dj) >= (unsigned)d.w)
        return nullptr;
    return prob.in + ((int64_t)at.img * d.c * d.hw + (int64_t)y0 * d.w + x0 + cl.off);
}

/* Where element k of column cl lies, nullptr in the padding. */
template <typename T>
MT_DEVICE const T *walk_at(const WalkCol<T> &cl, const WalkPos &at)
{
    return (cl.inside >> at.tap) & 1 ? cl.x + (cl.start + at.off) : nullptr;
}

#endif /* MT_CONV_IGEMM_WALK_H */
