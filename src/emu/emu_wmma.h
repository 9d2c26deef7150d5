/*
 * emu_wmma.h: the part of CUDA's warp matrix API (<mma.h>, nvcuda::wmma)
 * that src/matmul_tf32.cu uses, for the emulator: TF32 fragments of
 * 16 x 16 x 8 with float accumulators.
 *
 * On a GPU the 32 lanes of a warp share a fragment, each holding a few of its
 * elements in an order CUDA leaves unspecified. Here every lane holds the
 * whole fragment (num_elements is the fragment's size), so a kernel that
 * walks `frag.x[i]` for i < num_elements (to round to TF32, say) is right on
 * both. mma_sync multiplies in float with float sums, as tensor cores do
 * (TF32 x TF32 products are exact in float; the order of the sums is this
 * emulator's, a GPU's may differ in the last bits). A store writes the
 * fragment once, from lane 0: the other lanes read it only after a barrier,
 * as on a GPU, where the warp's stores are visible to its lanes only after
 * __syncwarp().
 */
#ifndef MT_EMU_WMMA_H
#define MT_EMU_WMMA_H

#include <cstdint>
#include <cstring>

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision {
struct tf32 {};
} /* namespace precision */

enum layout_t { mem_row_major, mem_col_major };

/* Rows and columns of a fragment's matrix: A is M x K, B is K x N, C is M x N. */
template <typename Use, int M, int N, int K>
struct fragment_shape;
template <int M, int N, int K>
struct fragment_shape<matrix_a, M, N, K> {
    static constexpr int rows = M, cols = K;
};
template <int M, int N, int K>
struct fragment_shape<matrix_b, M, N, K> {
    static constexpr int rows = K, cols = N;
};
template <int M, int N, int K>
struct fragment_shape<accumulator, M, N, K> {
    static constexpr int rows = M, cols = N;
};

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
    static constexpr int rows = fragment_shape<Use, M, N, K>::rows;
    static constexpr int cols = fragment_shape<Use, M, N, K>::cols;
    static constexpr bool col = std::is_same<Layout, col_major>::value;
    static constexpr int num_elements = rows * cols;
    float x[rows * cols]; /* row-major, whatever the layout in memory */
};

inline float __float_to_tf32(float v)
{
    /* Round to the nearest value with 10 bits of mantissa, ties away from
     * zero (cvt.rna.tf32.f32); infinities and NaN stay as they are. */
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    if ((bits & 0x7f800000u) != 0x7f800000u)
        bits = (bits + 0x1000u) & 0xffffe000u;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout> &f, float value)
{
    for (int i = 0; i < f.num_elements; ++i)
        f.x[i] = value;
}

/* A pointer into shared memory is read and written through the alias
 * (emu.h's from_raw): the checks do not follow WMMA's accesses, which on a
 * GPU the warp's lanes share in a way the emulator does not model. */
template <typename P>
P wmma_address(P p)
{
    if constexpr (std::is_pointer<P>::value)
        return ::mt_emu::from_raw(p);
    else
        return p;
}

/* A or B from memory: element (r, c) at p[r * ldm + c] (row_major) or
 * p[c * ldm + r] (col_major). P is a pointer or any type that indexes like
 * one (a shared array's row). */
template <typename Use, int M, int N, int K, typename T, typename Layout, typename P>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout> &f, P p, unsigned ldm)
{
    using F = fragment<Use, M, N, K, T, Layout>;
    p = wmma_address(p);
    for (int r = 0; r < F::rows; ++r)
        for (int c = 0; c < F::cols; ++c)
            f.x[r * F::cols + c] = (float)(F::col ? p[(int64_t)c * ldm + r] : p[(int64_t)r * ldm + c]);
}

template <int M, int N, int K, typename T, typename P>
void load_matrix_sync(fragment<accumulator, M, N, K, T> &f, P p, unsigned ldm, layout_t layout)
{
    p = wmma_address(p);
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c)
            f.x[r * N + c] = (float)(layout == mem_col_major ? p[(int64_t)c * ldm + r] : p[(int64_t)r * ldm + c]);
}

template <int M, int N, int K, typename TA, typename LA, typename TB, typename LB, typename TC>
void mma_sync(fragment<accumulator, M, N, K, TC> &d, const fragment<matrix_a, M, N, K, TA, LA> &a,
              const fragment<matrix_b, M, N, K, TB, LB> &b, const fragment<accumulator, M, N, K, TC> &c)
{
    float result[M * N];
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float sum = c.x[i * N + j];
            for (int k = 0; k < K; ++k)
                sum += a.x[i * K + k] * b.x[k * N + j];
            result[i * N + j] = sum;
        }
    for (int i = 0; i < M * N; ++i)
        d.x[i] = result[i];
}

template <int M, int N, int K, typename T, typename P>
void store_matrix_sync(P p, const fragment<accumulator, M, N, K, T> &f, unsigned ldm, layout_t layout)
{
    if (::mt_emu::lane_id() != 0)
        return;
    p = wmma_address(p);
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c)
            p[layout == mem_col_major ? (int64_t)c * ldm + r : (int64_t)r * ldm + c] = f.x[r * N + c];
    /* The tile it wrote (and the padding between its rows) counts as
     * initialised for the full checks. */
    if constexpr (std::is_pointer<P>::value)
        if (::mt_emu::check_full)
            ::mt_emu::shared_initialised(p, sizeof(*p) * ((size_t)(layout == mem_col_major ? N - 1 : M - 1) * ldm +
                                                          (layout == mem_col_major ? M : N)));
}

} /* namespace wmma */
} /* namespace nvcuda */

#endif /* MT_EMU_WMMA_H */
