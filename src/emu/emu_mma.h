/*
 * emu_mma.h: the emulator's twins of src/mma_tf32.h (tf32_bits, ldmatrix_x4,
 * mma_tf32_16x8x8), with the per-lane semantics the PTX ISA gives the
 * instructions: every lane holds only its own registers, and what a lane
 * needs from the others' comes through warp shuffles, as it does on a GPU
 * through the tensor core's own wiring. So a kernel that hands the wrong
 * lane's element to an mma, or names the wrong row address for ldmatrix,
 * gets a wrong product here too. (emu_wmma.h takes the other way: there the
 * fragment's layout is unspecified, so every lane holds all of it.)
 *
 * Shared memory is read at the lane's own address; under
 * MINITENSOR_EMU_CHECK=full each word is recorded as a raw access of the
 * lane would be (races, reads of bytes nothing wrote, the block's bounds),
 * through shared_emulated_read rather than a fault: a faulting raw read
 * costs ~18 us, and these twins read every operand of the TF32 rungs.
 */
#ifndef MT_EMU_MMA_H
#define MT_EMU_MMA_H

#include <cstdint>
#include <cstring>

/* x rounded to TF32: nearest, ties away from zero (cvt.rna.tf32.f32);
 * infinities and NaN stay as they are. */
inline uint32_t tf32_bits(float x)
{
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7f800000u) != 0x7f800000u)
        bits = (bits + 0x1000u) & 0xffffe000u;
    return bits;
}

inline uint32_t tf32_round_bits(uint32_t bits)
{
    float x;
    std::memcpy(&x, &bits, sizeof x);
    return tf32_bits(x);
}

namespace mt_emu {

/* 16 bytes: one lane's row of an ldmatrix, or its A registers. */
struct MmaQuad {
    uint32_t v[4];
};
struct MmaPair {
    uint32_t v[2];
};

/* A tensor core reads the 19 high bits of a TF32 operand. */
inline float tf32_value(uint32_t bits)
{
    bits &= 0xffffe000u;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

} /* namespace mt_emu */

/* Each lane reads its 16-byte row, then lane l takes word l % 4 of the row
 * that lane 8m + l / 4 read, for each matrix m. */
inline void ldmatrix_x4(uint32_t (&r)[4], const float *row)
{
    const int lane = ::mt_emu::lane_id();
    const float *at = ::mt_emu::from_raw(row); /* the checked mapping */
here:
    const void *pc = &&here; /* where a race report says the row was read */
    ::mt_emu::MmaQuad mine;
    for (int i = 0; i < 4; ++i) {
        if (::mt_emu::check_full)
            ::mt_emu::shared_emulated_read(at + i, pc);
        const float v = at[i];
        std::memcpy(&mine.v[i], &v, sizeof v);
    }
    for (int m = 0; m < 4; ++m) {
        const ::mt_emu::MmaQuad got = __shfl_sync(0xffffffffu, mine, 8 * m + lane / 4);
        r[m] = got.v[lane % 4];
    }
}

/* Lane (g, t) computes its four outputs D[g][2t], D[g][2t + 1], D[g + 8][2t],
 * D[g + 8][2t + 1]: it needs rows g and g + 8 of A, held by lanes 4g .. 4g + 3
 * (all four registers), and columns 2t and 2t + 1 of B, held by lanes
 * 4 (2t) .. and 4 (2t + 1) .. (+ 0..3). Products of TF32 values are exact in
 * float; the sums are float, in k order (a GPU's order may differ in the
 * last bits). */
inline void mma_tf32_16x8x8(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    const int lane = ::mt_emu::lane_id();
    const int g = lane / 4, t = lane % 4;
    float a_rows[2][8], b_cols[2][8];
    const ::mt_emu::MmaQuad my_a = {{a[0], a[1], a[2], a[3]}};
    const ::mt_emu::MmaPair my_b = {{b[0], b[1]}};
    for (int s = 0; s < 4; ++s) {
        const ::mt_emu::MmaQuad q = __shfl_sync(0xffffffffu, my_a, 4 * g + s);
        a_rows[0][s] = ::mt_emu::tf32_value(q.v[0]);
        a_rows[1][s] = ::mt_emu::tf32_value(q.v[1]);
        a_rows[0][s + 4] = ::mt_emu::tf32_value(q.v[2]);
        a_rows[1][s + 4] = ::mt_emu::tf32_value(q.v[3]);
    }
    for (int c = 0; c < 2; ++c)
        for (int s = 0; s < 4; ++s) {
            const ::mt_emu::MmaPair p = __shfl_sync(0xffffffffu, my_b, 4 * (2 * t + c) + s);
            b_cols[c][s] = ::mt_emu::tf32_value(p.v[0]);
            b_cols[c][s + 4] = ::mt_emu::tf32_value(p.v[1]);
        }
    for (int i = 0; i < 4; ++i) {
        float sum = d[i];
        for (int k = 0; k < 8; ++k)
            sum += a_rows[i / 2][k] * b_cols[i % 2][k];
        d[i] = sum;
    }
}

#endif /* MT_EMU_MMA_H */
