/*
 * attention_mma_frag.h: what the mma rung's forward (src/attention_mma.cu)
 * and backward (src/attention_mma_backward.cu) share: the 3xTF32 split and
 * product, the quad reductions, the argument checks, and the two warp-wide
 * products every step of the backward is made of (the forward's S = Q K^T
 * and O += P V are the same loops, written out in its kernel: through these
 * functions nvcc gave its default D64 block 134 registers a thread instead
 * of 128, one block an SM instead of two). Fragment layouts as in
 * src/mma_tf32.h: lane (g, t) = (lane / 4, lane % 4) holds rows g and g + 8,
 * columns 2t and 2t + 1 of each 16 x 8 accumulator.
 */
#ifndef MT_ATTENTION_MMA_FRAG_H
#define MT_ATTENTION_MMA_FRAG_H

#include <type_traits>

#include "attention_tiles.h"
#include "mma_tf32.h"

/* The float whose bits these are. */
MT_DEVICE float float_of_bits(uint32_t bits) { return __int_as_float((int)bits); }

/* x rounded to TF32 (nearest, ties away from zero, as cvt.rna.tf32.f32) by
 * two integer instructions on its bits: add half of the lowest kept bit,
 * clear the 13 dropped ones. Unlike cvt it does not test for NaN, which it
 * may turn into an infinity; the remainder below is then NaN - inf = NaN,
 * so a NaN still gives NaN. The split runs once per operand element of
 * every mma, twice per element: at full integer rate, not the conversion's. */
MT_DEVICE uint32_t tf32_round_int(float x)
{
    return ((uint32_t)__float_as_int(x) + 0x1000u) & 0xffffe000u;
}

/* x as a TF32 value and the TF32 remainder: x ~ big + small (x - big is
 * exact in float). */
MT_DEVICE void split_tf32(uint32_t &big, uint32_t &small, float x)
{
    big = tf32_round_int(x);
    small = tf32_round_int(x - float_of_bits(big));
}

/* d += a b at float32's accuracy: the two cross terms first (small, so
 * they are not lost against a large d), then the big product. */
MT_DEVICE void mma_3xtf32(float (&d)[4], const uint32_t (&a_big)[4], const uint32_t (&a_small)[4],
                          const uint32_t (&b_big)[2], const uint32_t (&b_small)[2])
{
    mma_tf32_16x8x8(d, a_small, b_big);
    mma_tf32_16x8x8(d, a_big, b_small);
    mma_tf32_16x8x8(d, a_big, b_big);
}

/* The maximum, or the sum, over the 4 lanes of a quad (one row's lanes). */
MT_DEVICE float quad_max(float x)
{
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
MT_DEVICE float quad_sum(float x)
{
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* Where this lane points ldmatrix_x4 in a shared tile (row stride `stride`)
 * to load the 16 x 8 A fragments of rows row0 .. row0 + 15: lane l names row
 * l % 8 (+ 8 for matrices 1 and 3) and head-dim half l / 16. */
MT_DEVICE const float *frag_row(const float *tile, int stride, int row0, int lane)
{
    return tile + (row0 + (lane / 8 % 2) * 8 + lane % 8) * stride + lane / 16 * 4;
}

/* acc[j] += A B^T over a head dim of kDim, for A's 16 rows (a_row from
 * frag_row) and B's rows 8j .. 8j + 7 of a shared tile: B[kk][n] = Brow[n][kk],
 * a row of B read in place as a column of B^T (two loads a lane). The scores
 * S = Q K^T and dP = dO V^T, or S^T = K Q^T and dP^T = V dO^T. */
template <int kDim, int NJ>
MT_DEVICE void mma_rows_abt(float (&acc)[NJ][4], const float *a_row, const float *b_tile, int stride, int g, int t)
{
    MT_UNROLL for (int kk = 0; kk < kDim; kk += 8) {
        uint32_t a[4], a_big[4], a_small[4];
        ldmatrix_x4(a, a_row + kk);
        MT_UNROLL for (int e = 0; e < 4; ++e)
            split_tf32(a_big[e], a_small[e], float_of_bits(a[e]));
        MT_UNROLL for (int j = 0; j < NJ; ++j) {
            const float *br = b_tile + (8 * j + g) * stride + kk + t; /* B^T[kk + t][8j + g] */
            uint32_t b_big[2], b_small[2];
            split_tf32(b_big[0], b_small[0], br[0]);
            split_tf32(b_big[1], b_small[1], br[4]);
            mma_3xtf32(acc[j], a_big, a_small, b_big, b_small);
        }
    }
}

/* acc[n] += W B, W (16 x 8 NJ) straight from accumulator registers w, B a
 * shared tile of 8 NJ rows and kDim columns. The accumulator holds columns
 * 2t, 2t + 1 of each 8-column fragment where an A fragment wants t, t + 4,
 * so the mma sums over W's columns in the order 0, 2, 4, 6, 1, 3, 5, 7 and
 * reads B's rows in that same order (b[0] = B[2t][n], b[1] = B[2t + 1][n]):
 * a sum does not care about its order, and W never goes through shared
 * memory. O += P V, dV += P^T dO, dK += dS^T Q, dQ += dS K. */
template <int kDim, int NJ>
MT_DEVICE void mma_acc_ab(float (&acc)[kDim / 8][4], const float (&w)[NJ][4], const float *b_tile, int stride,
                          int g, int t)
{
    MT_UNROLL for (int j = 0; j < NJ; ++j) {
        uint32_t a_big[4], a_small[4]; /* a[0..3] = W[g][2t], W[g + 8][2t], W[g][2t + 1], W[g + 8][2t + 1] */
        split_tf32(a_big[0], a_small[0], w[j][0]);
        split_tf32(a_big[1], a_small[1], w[j][2]);
        split_tf32(a_big[2], a_small[2], w[j][1]);
        split_tf32(a_big[3], a_small[3], w[j][3]);
        const float *br = b_tile + (8 * j + 2 * t) * stride + g; /* B[8j + 2t][g], B[8j + 2t + 1][g] */
        MT_UNROLL for (int n = 0; n < kDim / 8; ++n) {
            uint32_t b_big[2], b_small[2];
            split_tf32(b_big[0], b_small[0], br[8 * n]);
            split_tf32(b_big[1], b_small[1], br[stride + 8 * n]);
            mma_3xtf32(acc[n], a_big, a_small, b_big, b_small);
        }
    }
}

/* The mma rung's operands: float32, head dims 64 or 128 (the same for q and
 * v), query blocks of 0 (the default), 64 or 128, key tiles of 0 (the
 * default), 16, 32 or 64 (16 for the forward only: its backward passes 0). */
static inline mt_status check_mma_operands(const char *func, const mt_tensor &q, const mt_tensor &v,
                                           int block_queries, int block_keys)
{
    const int64_t d = q.shape[2];
    if (q.dtype != MT_FLOAT32)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "the mma rung is float32 only, got %s",
                       dtype_name(q.dtype));
    if (d != v.shape[2] || (d != 64 && d != 128))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "head dims %lld (q) and %lld (v): the mma rung takes "
                       "64 or 128, the same for both", (long long)d, (long long)v.shape[2]);
    if (block_queries != 0 && block_queries != 64 && block_queries != 128)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "block_queries %d: the mma rung takes 0 (the default), "
                       "64 or 128", block_queries);
    if (block_keys != 0 && block_keys != 16 && block_keys != 32 && block_keys != 64)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "block_keys %d: the mma rung takes 0 (the default), 16, "
                       "32 or 64", block_keys);
    return MT_OK;
}

/* Whether this GPU runs an mma-rung kernel whose block asks for `bytes` of
 * shared memory: mma.sync and cp.async need compute capability 8.0, and the
 * bytes must be within the block's opt-in limit (227 KiB on an H100, 163 on
 * an A100, 99 on sm_86 and sm_89). */
static inline mt_status mma_device_runs(size_t bytes, bool *runs)
{
    mt_device_caps caps;
    MT_TRY(mt_get_device_caps(&caps));
    *runs = caps.major >= 8 && bytes <= (size_t)caps.smem_optin;
    return MT_OK;
}

/* The error where it does not. Without it a kernel built for sm_75 (an
 * empty body there) would "succeed" and leave its output unwritten, and a
 * block too large would fail as a bare CUDA error. */
static inline mt_status check_mma_device(const char *func, size_t bytes)
{
    mt_device_caps caps;
    MT_TRY(mt_get_device_caps(&caps));
    if (caps.major < 8)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "the mma rung needs compute capability 8.0 or newer "
                       "(mma.sync, cp.async); this GPU has %d.x", caps.major);
    if (bytes > (size_t)caps.smem_optin)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "the mma rung's tiles need %zu bytes of shared memory "
                       "a block; this GPU allows %d", bytes, caps.smem_optin);
    return MT_OK;
}

/* The bytes of the backward's default tiles at head dim d (64 or 128):
 * src/attention_mma_backward.cu, for mt_attention_mma_supported. */
size_t mma_backward_default_bytes(int64_t d);

/* Runs launch(std::integral_constant<int, N>) with n (64 or 128, checked)
 * as a compile-time constant. */
template <typename Launch>
static mt_status with_64_or_128(int64_t n, Launch launch)
{
    return n == 64 ? launch(std::integral_constant<int, 64>{}) : launch(std::integral_constant<int, 128>{});
}

#endif /* MT_ATTENTION_MMA_FRAG_H */
