/*
 * conv_igemm_phases.h: the input gradient of a strided convolution as one
 * dense implicit GEMM per stride phase, with no zero taps.
 *
 * The implicit GEMM's input gradient (InputGradProblem, in
 * src/conv_implicit_gemm.h) gathers, for input pixel y, the output pixel
 * oy = (y + ph - i) / sh of every tap i, and a zero where sh does not divide
 * y + ph - i. At stride 2 that is three taps in four of a 3 x 3 kernel: the
 * kernel spends three quarters of its multiply-adds on zeros (the H100
 * measured the 3 x 3 / 2 layer's forward + backward at 0.57x cuDNN, its
 * forward alone at 0.81x).
 *
 * Which taps are zero depends only on y mod sh (the pixel's phase): with
 * dilation 1, the taps that reach y = py + sh u are i = ry + sh t, t = 0 ..
 * KI - 1, where ry = (py + ph) mod sh and KI = ceil((KH - ry) / sh), and
 * tap t reads output row oy = u + qy - t with qy = (py + ph - ry) / sh.
 * So the pixels of one phase (py, px) form a dense product of their own:
 *
 *     dx[c, (n, py + sh u, px + sw v)] = sum over k = (co, ti, tj) of
 *         weight[co, c, ry + sh ti, rx + sw tj] * grad_out[n, co, u + qy - ti, v + qx - tj]
 *
 * M = C / groups, N = N * ceil((H - py) / sh) * ceil((W - px) / sw),
 * K = C_out / groups * KI * KJ: a stride-1 correlation of grad_out with a
 * KI x KJ sub-kernel, the same shape of problem as the forward. The entry
 * point launches sh * sw of them (each on the tile config the autotuner
 * chose for the whole gradient), and together they write every input pixel
 * once; a phase no tap reaches (a 1 x 1 kernel at stride 2) has K = 0 and
 * its pixels get the 0 they should.
 *
 * The Problem's ConvDims `d` is the convolution's, except kh, kw, taps and
 * their FastDivs, which are the phase's KI, KJ: k_tap (the kernels' split of
 * k into (co, ti, tj)) and k_tap_step then walk the phase's taps only.
 *
 * At stride 1 the one phase is the whole product with every tap live
 * (ry = rx = 0, qy = ph, qx = pw): the same sums as InputGradProblem's, by a
 * gather with fewer instructions, so every input gradient with dilation 1
 * runs here.
 *
 * Compiled as it is by nvcc and the emulator, like conv_implicit_gemm.h.
 */
#ifndef MT_CONV_IGEMM_PHASES_H
#define MT_CONV_IGEMM_PHASES_H

#include "conv_implicit_gemm.h"

/* One phase (py, px): its pixels' grid (hp x wp), the first tap of each dim
 * (ry, rx) and the output row/column its tap 0 reads (qy, qx), and the full
 * kernel's sizes (the weight's layout). */
struct PhaseDims {
    int py, px, hp, wp, ry, rx, qy, qx;
    int full_kw, full_taps; /* KW and KH * KW of the weight */
    FastDiv hpwp_div, wp_div;
};

template <typename T>
struct InputGradPhaseProblem {
    const T *grad_out, *weight;
    T *out; /* grad_in: this phase's pixels */
    ConvDims d; /* kh, kw, taps: the phase's KI, KJ, KI * KJ */
    PhaseDims ph;

    struct Row { const T *w; };
    using AK = int64_t; /* k = (co, ti, tj) as an offset from weight[g C_out / groups, c, 0, 0] */
    struct Col { const T *go; int ty, tx; };
    static constexpr bool kARowMajor = false;
    static constexpr bool kBAlongK = false;

    MT_DEVICE int M() const { return d.c_group; }
    MT_DEVICE int N() const { return d.n * ph.hp * ph.wp; }
    MT_DEVICE int K() const { return d.c_out_group * d.taps; }

    MT_DEVICE Row row(int g, int c) const
    {
        return Row{weight + ((int64_t)g * d.c_out_group * d.c_group + c) * ph.full_taps};
    }
    /* Tap (ti, tj) of the phase is tap (ry + sh ti, rx + sw tj) of the weight. */
    MT_DEVICE AK a_k(int k) const
    {
        const int co = fdiv(k, d.taps_div), tap = k - co * d.taps;
        const int ti = fdiv(tap, d.kw_div), tj = tap - ti * d.kw;
        return (int64_t)co * d.c_group * ph.full_taps + (ph.ry + d.sh * ti) * ph.full_kw + ph.rx + d.sw * tj;
    }
    MT_DEVICE T a(const Row &r, AK at) const { return r.w[at]; }
    MT_DEVICE const T *a_at(const Row &r, AK at) const { return r.w + at; }
    MT_DEVICE const T *base() const { return weight; }

    /* Column p = (image, u, v): input pixel (py + sh u, px + sw v); tap (0, 0)
     * reads output pixel (u + qy, v + qx). */
    MT_DEVICE Col col(int g, int p) const
    {
        const int img = fdiv(p, ph.hpwp_div), pix = p - img * ph.hp * ph.wp;
        const int u = fdiv(pix, ph.wp_div), v = pix - u * ph.wp;
        return Col{grad_out + ((int64_t)img * d.c_out + (int64_t)g * d.c_out_group) * d.ohw, u + ph.qy, v + ph.qx};
    }
    /* Every tap of the phase lands on a whole output row and column: only the
     * output's edges remain to test (one unsigned compare each). */
    MT_DEVICE const T *b_at(const Col &cl, const KTap &t) const
    {
        const int oy = cl.ty - t.i, ox = cl.tx - t.j;
        if ((unsigned)oy >= (unsigned)d.oh || (unsigned)ox >= (unsigned)d.ow)
            return nullptr;
        return cl.go + ((int64_t)t.c * d.ohw + oy * d.ow + ox);
    }
    MT_DEVICE T b(const Col &cl, int k) const
    {
        const T *at = b_at(cl, k_tap(d, k));
        return at ? *at : T(0);
    }

    MT_DEVICE int64_t out_row(int g, int c, int s) const { return ((int64_t)s * d.n * d.c + g * d.c_group + c) * d.hw; }
    MT_DEVICE int64_t out_col(int, int p) const
    {
        const int img = fdiv(p, ph.hpwp_div), pix = p - img * ph.hp * ph.wp;
        const int u = fdiv(pix, ph.wp_div), v = pix - u * ph.wp;
        return (int64_t)img * d.c * d.hw + (int64_t)(ph.py + d.sh * u) * d.w + ph.px + d.sw * v;
    }
    MT_DEVICE T row_bias(int, int) const { return T(0); }
};

/* Whether the input gradient runs by phases: dilation 1 (with dilation the
 * taps of a phase need not be evenly spaced). At stride 1 there is one
 * phase, every tap of it live: the product InputGradProblem runs, with a
 * cheaper gather (two edge compares an element, against its four, two
 * divisions by the stride and their checks), which the H100 timed at 1.05
 * ms for the 64-channel 32 x 32 layer's input gradient against 0.71 for
 * its forward, the same multiply-adds. */
inline bool igemm_input_grad_by_phases(const ConvDims &d)
{
    return d.dh == 1 && d.dw == 1;
}

/* The taps of one dim that reach phase p: first r, count, and q, the output
 * index tap 0 reads for the phase's pixel 0. */
struct PhaseTaps {
    int r, count, q;
};

inline PhaseTaps phase_taps(int p, int kernel, int stride, int pad)
{
    const int r = (p + pad) % stride;
    return PhaseTaps{r, r < kernel ? (kernel - r + stride - 1) / stride : 0, (p + pad - r) / stride};
}

/* Calls launch(prob, M, N, K) for each phase's product that has a pixel. */
template <typename T, typename Launch>
mt_status for_each_input_grad_phase(const T *grad_out, const T *weight, T *grad_in, const ConvDims &d,
                                    Launch launch)
{
    for (int py = 0; py < d.sh && py < d.h; ++py)
        for (int px = 0; px < d.sw && px < d.w; ++px) {
            const PhaseTaps ty = phase_taps(py, d.kh, d.sh, d.ph), tx = phase_taps(px, d.kw, d.sw, d.pw);
            PhaseDims ph;
            ph.py = py, ph.px = px;
            ph.hp = (d.h - py + d.sh - 1) / d.sh, ph.wp = (d.w - px + d.sw - 1) / d.sw;
            ph.ry = ty.r, ph.rx = tx.r, ph.qy = ty.q, ph.qx = tx.q;
            ph.full_kw = d.kw, ph.full_taps = d.taps;
            ph.hpwp_div = make_fast_div(ph.hp * ph.wp), ph.wp_div = make_fast_div(ph.wp);
            ConvDims pd = d;
            pd.kh = ty.count, pd.kw = tx.count, pd.taps = ty.count * tx.count;
            /* A phase without taps has K = 0 (its pixels get zeros): its
             * divisors are never used, 1 keeps them well defined. */
            pd.taps_div = make_fast_div(pd.taps > 0 ? pd.taps : 1);
            pd.kw_div = make_fast_div(pd.kw > 0 ? pd.kw : 1);
            const InputGradPhaseProblem<T> prob{grad_out, weight, grad_in, pd, ph};
            const int64_t M = d.c_group, N = (int64_t)d.n * ph.hp * ph.wp, K = (int64_t)d.c_out_group * pd.taps;
            MT_TRY(launch(prob, M, N, K));
        }
    return MT_OK;
}

#endif /* MT_CONV_IGEMM_PHASES_H */
