/*
 * mma_tf32.h: the three warp-wide tensor-core operations of the mma.sync
 * TF32 rung (src/matmul_tf32_mma.cu), each a small function around one PTX
 * instruction. Unlike WMMA (<mma.h>), whose fragment layouts CUDA leaves
 * unspecified, the PTX ISA says which lane holds which element, so the
 * kernel can load fragments from shared memory itself (ldmatrix) and knows
 * where each accumulator lies in out.
 *
 * For one mma.sync.m16n8k8 (D = A B + D, A 16 x 8, B 8 x 8, D 16 x 8) lane l
 * of the warp, with g = l / 4 and t = l % 4, holds
 *     A: a[0] = A[g][t]   a[1] = A[g + 8][t]   a[2] = A[g][t + 4]   a[3] = A[g + 8][t + 4]
 *     B: b[0] = B[t][g]   b[1] = B[t + 4][g]
 *     D: d[0] = D[g][2t]  d[1] = D[g][2t + 1]  d[2] = D[g + 8][2t]  d[3] = D[g + 8][2t + 1]
 * A and B as TF32 bit patterns (float's layout, the low 13 mantissa bits
 * ignored), D as float.
 *
 *   tf32_bits(x)              x rounded to TF32, nearest, ties away from zero
 *                             (cvt.rna.tf32.f32, as cuBLAS rounds);
 *   tf32_round_bits(bits)     the same for a float given by its bit pattern;
 *   ldmatrix_x4(r, row)       four 8 x 4 float matrices from shared memory:
 *                             lane l names the address of row l % 8 of
 *                             matrix l / 8 (16 bytes), and receives in r[m]
 *                             element (l / 4, l % 4) of matrix m, which is
 *                             exactly A's a[m] above when the four matrices
 *                             are A's quarters (rows 0-7 / 8-15, k 0-3 / 4-7);
 *   mma_tf32_16x8x8(d, a, b)  d += a b for one 16 x 8 x 8 fragment.
 *
 * Every lane of the warp must call them together (they are .sync.aligned).
 * The emulator build has twins with the same per-lane semantics, made of
 * warp shuffles (src/emu/emu_mma.h).
 *
 * Compute capability 8.0 or newer.
 */
#ifndef MT_MMA_TF32_H
#define MT_MMA_TF32_H

#include <stdint.h>

#include "launch.h"

#ifdef MT_EMULATOR
#include "emu/emu_mma.h"
#else

MT_DEVICE uint32_t tf32_bits(float x)
{
    uint32_t r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
#else
    r = __float_as_uint(x);
#endif
    return r;
}

/* The same for a float given by its bits (what ldmatrix delivers). */
MT_DEVICE uint32_t tf32_round_bits(uint32_t bits) { return tf32_bits(__uint_as_float(bits)); }

/* row: a pointer into shared memory, 16-byte aligned. */
MT_DEVICE void ldmatrix_x4(uint32_t (&r)[4], const float *row)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned address = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
#else
    (void)row;
    r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

MT_DEVICE void mma_tf32_16x8x8(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)d, (void)a, (void)b;
#endif
}

#endif /* MT_EMULATOR */

#endif /* MT_MMA_TF32_H */
