/*
 * attention_tiles.h: the pieces of a register-tiled attention block that the
 * warp rung (src/attention_warp.cu) and the tiled rung
 * (src/attention_tiled.cu) share.
 *
 * The layout both use: a row of a score tile belongs to 8 consecutive lanes
 * of one warp (tx = lane % 8), a warp holds 4 rows at once, so kGroups row
 * groups (ty) cover kGroups rows and a thread owns rows ty + kGroups * i of
 * a tile. The softmax's row reductions are then 3 shuffles inside a warp,
 * never a block barrier. Shared tiles of head-dim rows are padded by 16
 * bytes so that the 8 rows a warp reads at once start in different banks.
 */
#ifndef MT_ATTENTION_TILES_H
#define MT_ATTENTION_TILES_H

#include "async_copy.h"
#include "ops_common.h"

/* Four consecutive values from shared memory (16-byte aligned) in one or two
 * 16-byte loads. */
template <typename T>
MT_DEVICE void load4(T (&dst)[4], const T *src)
{
    constexpr int W = Pack<T>::kWidth;
    MT_UNROLL for (int v = 0; v < 4; v += W) {
        const Pack<T> p = *reinterpret_cast<const Pack<T> *>(src + v);
        MT_UNROLL for (int w = 0; w < W; ++w)
            dst[v + w] = p.v[w];
    }
}

/* A block of kThreads copies rows start .. start + rows - 1 of a (total,
 * kDim) matrix into a shared tile of row stride `stride`, zero-filling rows
 * at or past `total`, with cp.async: 16-byte copies when the matrix is
 * 16-byte aligned (`vec`), else one per element. The caller commits and
 * waits. */
template <typename T, int kDim, int kThreads>
MT_DEVICE void stage_rows(T *tile, int stride, const T *matrix, int64_t start, int rows, int64_t total, bool vec)
{
    constexpr int W = 16 / (int)sizeof(T);
    constexpr int kPieces = kDim / W;
    for (int e = threadIdx.x; e < rows * kPieces; e += kThreads) {
        const int r = e / kPieces, c = e % kPieces * W;
        const bool ok = start + r < total;
        const T *src = ok ? matrix + (start + r) * kDim + c : matrix; /* a copy of 0 bytes still needs an address */
        if (vec) {
            async_copy<16>(tile + r * stride + c, src, ok ? 16 : 0);
        } else {
            MT_UNROLL for (int w = 0; w < W; ++w)
                async_copy<(int)sizeof(T)>(tile + r * stride + c + w, ok ? src + w : matrix, ok ? (int)sizeof(T) : 0);
        }
    }
}

/* The same for `rows` values of a vector (lse, D), zero past `total`. */
template <typename T, int kThreads>
MT_DEVICE void stage_values(T *tile, const T *vector, int64_t start, int rows, int64_t total)
{
    for (int e = threadIdx.x; e < rows; e += kThreads) {
        const bool ok = start + e < total;
        async_copy<(int)sizeof(T)>(tile + e, ok ? vector + start + e : vector, ok ? (int)sizeof(T) : 0);
    }
}

/* The sum, or the maximum, over the 8 lanes of a row (lanes 8r .. 8r + 7). */
template <typename T>
MT_DEVICE T row_sum8(T x)
{
    MT_UNROLL for (int o = 1; o < 8; o *= 2)
        x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
template <typename T>
MT_DEVICE T row_max8(T x)
{
    MT_UNROLL for (int o = 1; o < 8; o *= 2) {
        const T y = __shfl_xor_sync(0xffffffffu, x, o);
        x = y > x ? y : x;
    }
    return x;
}

/* acc[i][j] += sum_c A[ty + kGroups i][c] * B[tx + 8 j][c]: an
 * (RI*kGroups) x (NJ*8) product of two row-major shared tiles over a head
 * dim of kDim (A B^T: scores from queries and keys). */
template <typename T, int kDim, int kGroups, int RI, int NJ>
MT_DEVICE void product_abt(T (&acc)[RI][NJ], const T *a, const T *b, int stride, int ty, int tx)
{
    for (int c = 0; c < kDim; c += 4) {
        T ar[RI][4], br[NJ][4];
        MT_UNROLL for (int i = 0; i < RI; ++i)
            load4(ar[i], a + (ty + kGroups * i) * stride + c);
        MT_UNROLL for (int j = 0; j < NJ; ++j)
            load4(br[j], b + (tx + 8 * j) * stride + c);
        MT_UNROLL for (int i = 0; i < RI; ++i)
            MT_UNROLL for (int j = 0; j < NJ; ++j)
                MT_UNROLL for (int e = 0; e < 4; ++e)
                    acc[i][j] += ar[i][e] * br[j][e];
    }
}

/* acc[i][4 g + w] += sum_k A[ty + kGroups i][k] * B[k][tx * 4 + 32 g + w]:
 * an (RI*kGroups) x kDim product of a weights tile A (row stride a_stride,
 * kInner columns) and a head-dim tile B (row stride b_stride): P V, P^T dO,
 * dS K, dS^T Q. */
template <typename T, int kDim, int kInner, int kGroups, int RI>
MT_DEVICE void product_ab(T (&acc)[RI][kDim / 8], const T *a, int a_stride, const T *b, int b_stride, int ty,
                          int tx)
{
    constexpr int G = kDim / 32;
    for (int k = 0; k < kInner; k += 4) {
        T ar[RI][4];
        MT_UNROLL for (int i = 0; i < RI; ++i)
            load4(ar[i], a + (ty + kGroups * i) * a_stride + k);
        MT_UNROLL for (int e = 0; e < 4; ++e) {
            T br[G][4];
            MT_UNROLL for (int g = 0; g < G; ++g)
                load4(br[g], b + (k + e) * b_stride + tx * 4 + 32 * g);
            MT_UNROLL for (int i = 0; i < RI; ++i)
                MT_UNROLL for (int g = 0; g < G; ++g)
                    MT_UNROLL for (int w = 0; w < 4; ++w)
                        acc[i][4 * g + w] += ar[i][e] * br[g][w];
        }
    }
}

template <typename T>
static T *first_of(const mt_tensor &t)
{
    return static_cast<T *>(t.data) + t.offset;
}

/* A backward with no query: dK and dV (`elements` each) are sums over
 * nothing, zeros. */
template <typename T>
static mt_status zero_key_grads(const mt_tensor &dk, const mt_tensor &dv, int64_t elements)
{
    if (elements > 0) {
        CUDA_CHECK(cudaMemsetAsync(first_of<T>(dk), 0, sizeof(T) * (size_t)elements, mt_stream()));
        CUDA_CHECK(cudaMemsetAsync(first_of<T>(dv), 0, sizeof(T) * (size_t)elements, mt_stream()));
    }
    return MT_OK;
}

#endif /* MT_ATTENTION_TILES_H */
