/*
 * conv_implicit_gemm.h: the index maps of the implicit-GEMM convolution
 * (src/conv_implicit_gemm.cu): FastDiv, the sizes (ConvDims), and the three
 * matrix products the kernel there computes, each a Problem that says where
 * element (m, k) of A and (k, n) of B are gathered from and where output
 * (m, n) goes; and first / first_out, the entry points' data pointers,
 * which src/conv_depthwise_backward.cu uses too.
 *
 * Compiled as it is by nvcc and the emulator (not passed through
 * minitensor/cuda/_cu2emu.py), so it declares no __shared__ arrays and
 * launches nothing.
 */
#ifndef MT_CONV_IMPLICIT_GEMM_H
#define MT_CONV_IMPLICIT_GEMM_H

#include "ops_common.h"
#include "warptile_loop.h"

/* ---- division by a run-time constant --------------------------------------
 * x / d for 0 <= x < 2^31 and 1 <= d < 2^31 as one multiply-high and a
 * shift (Granlund and Montgomery; CUTLASS's FastDivmod): with
 * s = ceil(log2 d) and mul = ceil(2^(31 + s) / d), x / d = (x * mul) >> (31 + s)
 * exactly for every x below 2^31. */
struct FastDiv {
    uint32_t divisor;
    uint32_t mul; /* 0 when divisor is 1 (then x / d = x) */
    uint32_t shift;
};

inline FastDiv make_fast_div(int64_t d)
{
    FastDiv f{(uint32_t)d, 0u, 0u};
    if (d > 1) {
        uint32_t s = 0;
        while (((int64_t)1 << s) < d)
            ++s;
        f.mul = (uint32_t)((((uint64_t)1 << (31 + s)) + (uint64_t)d - 1) / (uint64_t)d);
        f.shift = s - 1;
    }
    return f;
}

MT_DEVICE int fdiv(int x, const FastDiv &f)
{
    if (f.divisor == 1)
        return x;
    /* The high 32 bits of the 64-bit product (nvcc: one mul.hi), then s - 1. */
    return (int)((uint32_t)(((uint64_t)(uint32_t)x * f.mul) >> 32) >> f.shift);
}

/* ---- the sizes, as every Problem sees them ---------------------------------
 * int: mt_conv2d_igemm* refuse sizes whose pixel or k counts reach 2^31;
 * memory offsets are int64. */
struct ConvDims {
    int n, c, h, w;               /* the input */
    int c_out, oh, ow;            /* the output */
    int kh, kw, sh, sw, ph, pw, dh, dw;
    int groups, c_group, c_out_group; /* C / groups, C_out / groups */
    int taps, hw, ohw;            /* KH * KW, H * W, OH * OW */
    FastDiv taps_div, kw_div, w_div, hw_div, ow_div, ohw_div, sh_div, sw_div;
};

/* k = (c, i, j), a channel and a tap (of the input in the forward, of the
 * output in the input gradient), split by two FastDivs; k_tap_step moves it
 * on by `step` with adds and compares only: the pipelined kernel's thread
 * gathers k, k + step, k + 2 step, ... of one column in each K-tile and
 * divides once per K-tile, not once per element. */
struct KTap {
    int c, i, j;
};

MT_DEVICE KTap k_tap(const ConvDims &d, int k)
{
    const int c = fdiv(k, d.taps_div), tap = k - c * d.taps;
    const int i = fdiv(tap, d.kw_div);
    return KTap{c, i, tap - i * d.kw};
}

MT_DEVICE void k_tap_step(const ConvDims &d, KTap &t, int step)
{
    t.j += step;
    while (t.j >= d.kw) {
        t.j -= d.kw;
        if (++t.i == d.kh) {
            t.i = 0;
            ++t.c;
        }
    }
}

/* ---- the three products ----------------------------------------------------
 * A Problem describes one group's product for the kernel:
 *   M, N, K             the product's sizes;
 *   Row row(g, m)       where row m of A starts;
 *   AK a_k(k)           what element k of a row depends on, the same for
 *                       every row: worked out once per K-tile by a thread,
 *                       which loads the same k of several rows;
 *                       T a(row, ak) the element;
 *   Col col(g, n)       what is known of column n of B before k;
 *   kBAlongK false:     each thread loads one column in every K-tile: col
 *                       is worked out once per thread, and T b(col, k)
 *                       gathers element k of it;
 *   kBAlongK true:      consecutive threads load consecutive k (where
 *                       consecutive k are consecutive pixels), each thread
 *                       the same k of several columns: BK b_k(k) is worked
 *                       out once per K-tile, the columns once per block
 *                       (a table in shared memory), and T b(col, bk)
 *                       gathers the element;
 *   kARowMajor          whether row m of A is the K elements from a_rows(g)
 *                       + m * K (the forward's weight): then A may be
 *                       loaded in 16-byte Packs;
 *   out_row(g, m, s), out_col(g, n)  where element (m, n) goes: at
 *                       out + out_row + out_col (s: the split of K);
 *   row_bias(g, m)      added to every element of row m.
 * a() and b() are called only with m < M, n < N and k < K. Every division
 * by a size is a FastDiv; the point of AK, BK and Col is that few of them
 * run per element. */

/* Forward: out[co, p] = sum over k = (c, i, j) of weight[co, k] * in-patch[k, p]. */
template <typename T>
struct ForwardProblem {
    const T *in, *weight, *bias;
    T *out;
    ConvDims d;

    struct Row { const T *w; };
    using AK = int; /* k itself: the weight's rows are contiguous along k */
    struct Col { const T *x; int iy0, ix0; };
    static constexpr bool kARowMajor = true;
    static constexpr bool kBAlongK = false;

    MT_DEVICE int M() const { return d.c_out_group; }
    MT_DEVICE int N() const { return d.n * d.ohw; }
    MT_DEVICE int K() const { return d.c_group * d.taps; }

    MT_DEVICE Row row(int g, int m) const
    {
        return Row{weight + (int64_t)(g * d.c_out_group + m) * K()};
    }
    MT_DEVICE AK a_k(int k) const { return k; }
    MT_DEVICE T a(const Row &r, AK k) const { return r.w[k]; }
    MT_DEVICE const T *a_at(const Row &r, AK k) const { return r.w + k; }
    MT_DEVICE const T *base() const { return weight; }
    MT_DEVICE const T *a_rows(int g) const { return weight + (int64_t)g * d.c_out_group * K(); }

    /* Column p = (image, oy, ox): the image's first channel of group g and
     * the corner of the window, negative inside the padding. */
    MT_DEVICE Col col(int g, int p) const
    {
        const int img = fdiv(p, d.ohw_div), pix = p - img * d.ohw;
        const int oy = fdiv(pix, d.ow_div), ox = pix - oy * d.ow;
        return Col{in + ((int64_t)img * d.c + (int64_t)g * d.c_group) * d.hw, oy * d.sh - d.ph, ox * d.sw - d.pw};
    }
    /* b_at: where element k of column cl lies, nullptr in the padding (the
     * pipelined kernel copies from there, or zero-fills); b: its value. */
    MT_DEVICE const T *b_at(const Col &cl, const KTap &t) const
    {
        const int y = cl.iy0 + t.i * d.dh, x = cl.ix0 + t.j * d.dw;
        const bool inside = y >= 0 && y < d.h && x >= 0 && x < d.w;
        return inside ? cl.x + ((int64_t)t.c * d.hw + y * d.w + x) : nullptr; /* zero padding */
    }
    MT_DEVICE T b(const Col &cl, int k) const
    {
        const T *at = b_at(cl, k_tap(d, k));
        return at ? *at : T(0);
    }

    /* Split s of a split-K config: slice s of a buffer of `splits` outputs. */
    MT_DEVICE int64_t out_row(int g, int m, int s) const
    {
        return ((int64_t)s * d.n * d.c_out + g * d.c_out_group + m) * d.ohw;
    }
    MT_DEVICE int64_t out_col(int, int p) const
    {
        const int img = fdiv(p, d.ohw_div);
        return (int64_t)img * d.c_out * d.ohw + (p - img * d.ohw);
    }
    MT_DEVICE T row_bias(int g, int m) const { return bias ? bias[g * d.c_out_group + m] : T(0); }
};

/* Input gradient: grad_in[c, p'] = sum over k = (co, i, j) of weight[co, c, i, j] *
 * grad_out[co, the output pixel whose tap (i, j) reads p'], 0 where none does. */
template <typename T>
struct InputGradProblem {
    const T *grad_out, *weight;
    T *out; /* grad_in */
    ConvDims d;

    struct Row { const T *w; };
    using AK = int64_t; /* k = (co, tap) as an offset from weight[., c, 0, 0]: co * C / groups * taps + tap */
    struct Col { const T *go; int ty, tx; };
    static constexpr bool kARowMajor = false; /* k = (co, tap) steps co by C / groups * taps */
    static constexpr bool kBAlongK = false;

    MT_DEVICE int M() const { return d.c_group; }
    MT_DEVICE int N() const { return d.n * d.hw; }
    MT_DEVICE int K() const { return d.c_out_group * d.taps; }

    /* Row c: weight[g * C_out / groups, c, 0, 0]; k = (co, tap) steps co by C / groups * taps. */
    MT_DEVICE Row row(int g, int c) const
    {
        return Row{weight + ((int64_t)g * d.c_out_group * d.c_group + c) * d.taps};
    }
    MT_DEVICE AK a_k(int k) const
    {
        const int co = fdiv(k, d.taps_div);
        return (int64_t)co * d.c_group * d.taps + (k - co * d.taps);
    }
    MT_DEVICE T a(const Row &r, AK at) const { return r.w[at]; }
    MT_DEVICE const T *a_at(const Row &r, AK at) const { return r.w + at; }
    MT_DEVICE const T *base() const { return weight; }

    /* Column p' = (image, y, x), moved into the padded frame. */
    MT_DEVICE Col col(int g, int p) const
    {
        const int img = fdiv(p, d.hw_div), pix = p - img * d.hw;
        const int y = fdiv(pix, d.w_div), x = pix - y * d.w;
        return Col{grad_out + ((int64_t)img * d.c_out + (int64_t)g * d.c_out_group) * d.ohw, y + d.ph, x + d.pw};
    }
    /* The output pixel (oy, ox) whose tap (i, j) read (y, x): oy * sh = y + ph
     * - i * dh, if that is a whole output row inside the output (likewise ox). */
    MT_DEVICE const T *b_at(const Col &cl, const KTap &t) const
    {
        const int co = t.c;
        const int ny = cl.ty - t.i * d.dh, nx = cl.tx - t.j * d.dw;
        if (ny < 0 || nx < 0)
            return nullptr;
        const int oy = fdiv(ny, d.sh_div), ox = fdiv(nx, d.sw_div);
        if (oy * d.sh != ny || ox * d.sw != nx || oy >= d.oh || ox >= d.ow)
            return nullptr; /* between two output rows or columns (stride > 1), or past the last */
        return cl.go + ((int64_t)co * d.ohw + oy * d.ow + ox);
    }
    MT_DEVICE T b(const Col &cl, int k) const
    {
        const T *at = b_at(cl, k_tap(d, k));
        return at ? *at : T(0);
    }

    MT_DEVICE int64_t out_row(int g, int c, int s) const { return ((int64_t)s * d.n * d.c + g * d.c_group + c) * d.hw; }
    MT_DEVICE int64_t out_col(int, int p) const
    {
        const int img = fdiv(p, d.hw_div);
        return (int64_t)img * d.c * d.hw + (p - img * d.hw);
    }
    MT_DEVICE T row_bias(int, int) const { return T(0); }
};

/* Weight gradient: dW[co, q] = sum over the output pixels p = (n, oy, ox) of
 * grad_out[co, p] * in-patch[p, q], q = (c, i, j). K is split over gridDim.z:
 * split s writes its partial product to out + s * C_out * (C / groups) * taps. */
template <typename T>
struct WeightGradProblem {
    const T *grad_out, *in;
    T *out; /* grad_weight, or the partial products */
    ConvDims d;

    struct Row { const T *go; };
    using AK = int64_t; /* pixel p = (n, oy, ox) as an offset into grad_out[n, co, ...]: n C_out OH OW + oy OW + ox */
    struct Col { const T *x; int di, dj; };
    struct BK { int64_t image; int y0, x0; }; /* pixel p: image n's offset in the input, oy sh, ox sw */
    static constexpr bool kARowMajor = false; /* k = the pixels, contiguous only inside one image */
    static constexpr bool kBAlongK = true; /* K is the output pixels: consecutive k, consecutive addresses */

    MT_DEVICE int M() const { return d.c_out_group; }
    MT_DEVICE int N() const { return d.c_group * d.taps; }
    MT_DEVICE int K() const { return d.n * d.ohw; }

    MT_DEVICE Row row(int g, int m) const
    {
        return Row{grad_out + (int64_t)(g * d.c_out_group + m) * d.ohw};
    }
    MT_DEVICE AK a_k(int p) const
    {
        const int img = fdiv(p, d.ohw_div);
        return (int64_t)img * d.c_out * d.ohw + (p - img * d.ohw);
    }
    MT_DEVICE T a(const Row &r, AK at) const { return r.go[at]; }
    MT_DEVICE const T *a_at(const Row &r, AK at) const { return r.go + at; }
    MT_DEVICE const T *base() const { return grad_out; }

    /* Column q = (c, i, j): the channel's plane and the tap's offset from a window's corner. */
    MT_DEVICE Col col(int g, int q) const
    {
        const int c = fdiv(q, d.taps_div), tap = q - c * d.taps;
        const int i = fdiv(tap, d.kw_div), j = tap - i * d.kw;
        return Col{in + (int64_t)(g * d.c_group + c) * d.hw, i * d.dh - d.ph, j * d.dw - d.pw};
    }
    MT_DEVICE BK b_k(int p) const
    {
        const int img = fdiv(p, d.ohw_div), pix = p - img * d.ohw;
        const int oy = fdiv(pix, d.ow_div), ox = pix - oy * d.ow;
        return BK{(int64_t)img * d.c * d.hw, oy * d.sh, ox * d.sw};
    }
    MT_DEVICE const T *b_at(const Col &cl, const BK &at) const
    {
        const int y = at.y0 + cl.di, x = at.x0 + cl.dj;
        const bool inside = y >= 0 && y < d.h && x >= 0 && x < d.w;
        return inside ? cl.x + (at.image + y * d.w + x) : nullptr; /* zero padding */
    }
    MT_DEVICE T b(const Col &cl, const BK &at) const
    {
        const T *p = b_at(cl, at);
        return p ? *p : T(0);
    }

    MT_DEVICE int64_t out_row(int g, int m, int split) const
    {
        return ((int64_t)split * d.c_out + g * d.c_out_group + m) * N();
    }
    MT_DEVICE int64_t out_col(int, int q) const { return q; }
    MT_DEVICE T row_bias(int, int) const { return T(0); }
};

/* The first element of a tensor's data, to read (first) or write (first_out);
 * the convolution entry points (this rung's and the depthwise gradients') pass
 * it to a kernel with the tensor's dense index arithmetic. */
template <typename T>
inline const T *first(const mt_tensor &t)
{
    return static_cast<const T *>(t.data) + t.offset;
}

template <typename T>
inline T *first_out(const mt_tensor &t)
{
    return static_cast<T *>(t.data) + t.offset;
}

/* The epilogue of both implicit-GEMM kernels: each output of the block
 * tile at (m0, n0) written by exactly one thread, where the Problem's index
 * map says (out_row + out_col), plus the row's bias (in split 0 only: the
 * splits' partial products are summed). */
template <typename T, typename C, typename P>
MT_DEVICE void igemm_store(const P &prob, const T (&acc)[C::kMIter][C::kNIter][4][4], const WarpPlace &at, int g,
                           int split, int m0, int n0)
{
    const int M = prob.M(), N = prob.N();
    MT_UNROLL for (int im = 0; im < C::kMIter; ++im)
        MT_UNROLL for (int i = 0; i < 4; ++i) {
            const int m = m0 + at.warp_row + im * 32 + at.lane_row + i;
            if (m >= M)
                continue;
            const int64_t row_at = prob.out_row(g, m, split);
            const T bias = split == 0 ? prob.row_bias(g, m) : T(0);
            MT_UNROLL for (int in = 0; in < C::kNIter; ++in)
                MT_UNROLL for (int j = 0; j < 4; ++j) {
                    const int n = n0 + at.warp_col + in * 16 + at.lane_col + j;
                    if (n < N)
                        prob.out[row_at + prob.out_col(g, n)] = acc[im][in][i][j] + bias;
                }
        }
}

/* ---- the pipelined kernel (src/conv_igemm_pipelined.cu) -------------------
 * The same products on cp.async stages: pipelined config `which` (0 ..
 * igemm_pipelined_count() - 1) runs prob's M x N product of every group,
 * K split into `splits` pieces of k_per_split (a multiple of the K-tile);
 * piece s writes its partial product at out_row(g, m, s), and the split-K
 * configs say how many pieces they want (igemm_pipelined_splits). */
struct IgemmTileSize {
    int bm, bn, bk; /* bk: the K-tile for float (float64 halves it) */
};
int igemm_pipelined_count();
const char *igemm_pipelined_name(int which);
IgemmTileSize igemm_pipelined_tile(int which);
int igemm_pipelined_splits(int which); /* 1, or how many pieces a split-K config cuts K into */
template <typename T, typename P>
mt_status launch_igemm_pipelined(const P &prob, int which, int64_t M, int64_t N, int splits, int k_per_split);

/* ---- shared with the TF32 rung (src/conv_igemm_tf32.cu) --------------------
 * The entry points' checks (src/conv_implicit_gemm.cu): check_operands
 * (descriptors, one float dtype, the ranks, dense, no overlap), conv_dims
 * (the sizes, every count below 2^31); and weight_grad_splits (how many
 * pieces the weight gradient's K is split into for bm x bn x bk tiles,
 * src/conv_igemm_pipelined.cu beside the split-K configs). */
struct ConvParams {
    int sh, sw, ph, pw, dh, dw, groups;
};
mt_status check_operands(const char *func, const mt_tensor *out, const char *out_name,
                         const mt_tensor *const inputs[], const char *const names[], const int ranks[], int count);
mt_status conv_dims(const char *func, const int64_t in_shape[4], const int64_t w_shape[4], const ConvParams &p,
                    ConvDims *d);
void weight_grad_splits(const ConvDims &d, int64_t M, int64_t N, int64_t K, int64_t bm, int64_t bn, int64_t bk,
                        int *splits, int *k_per_split);

#endif /* MT_CONV_IMPLICIT_GEMM_H */
