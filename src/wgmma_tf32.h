/*
 * wgmma_tf32.h: the warpgroup tensor-core operations of the wgmma TF32 rung
 * (src/matmul_tf32_wgmma.cu), each a small function around one PTX
 * instruction. Hopper (sm_90a) only: the kernel is compiled for
 * arch=compute_90a, where __CUDA_ARCH_FEAT_SM90_ALL is defined.
 *
 * A warpgroup is 4 consecutive warps (128 threads, the first a multiple of
 * 4). wgmma.mma_async multiplies a 64 x 8 tile of A by an 8 x N tile of B
 * into a 64 x N float accumulator spread over the warpgroup's registers:
 * warp w (0..3 in the group) holds rows 16w .. 16w + 15, and within a warp
 * lane l, g = l / 4, t = l % 4, holds for each 8 columns j (j = 0..N/8-1)
 *     d[4j + 0] = D[16w + g][8j + 2t]       d[4j + 1] = D[16w + g][8j + 2t + 1]
 *     d[4j + 2] = D[16w + g + 8][8j + 2t]   d[4j + 3] = D[16w + g + 8][8j + 2t + 1]
 * (mma.sync's m16n8 layout, repeated over N). A and B are read from shared
 * memory, named by descriptors (below), as TF32: the tensor core takes a
 * float's bits and ignores the low 13 mantissa bits (truncation, where the
 * mma.sync rung rounds with cvt.rna first).
 *
 * For 32-bit types both operands must be K-major in shared memory: A as 64
 * rows of K, B as N rows (its columns) of K. This rung's stages hold rows of
 * 32 floats (128 bytes) in the 128-byte swizzle: 8 rows make a 1024-byte
 * atom, and the 16-byte chunk c of row r lies at chunk c ^ (r % 8).
 *
 * It is asynchronous: the instruction returns before the product lands.
 *   wgmma_fence()         orders this thread's earlier register and shared
 *                         memory accesses before the next wgmma reads them;
 *   wgmma_fence_shared_writes()  makes this thread's writes of shared memory
 *                         (the generic proxy's) visible to wgmma's reads
 *                         (the async proxy's): before the barrier;
 *   wgmma_commit()        closes a group of the wgmmas issued so far;
 *   wgmma_wait<N>()       waits until at most N groups are still running
 *                         (after it the accumulators and the stages the
 *                         finished groups read are free again);
 *   wgmma_fence_operand(d)  tells the compiler d may change under it, so
 *                         that no read of the accumulators moves above a wait.
 * Every thread of the warpgroup calls each of them together (.sync.aligned).
 *
 * The emulator build has twins (src/emu/emu_wgmma.h) that decode the same
 * descriptors and run each product at once.
 */
#ifndef MT_WGMMA_TF32_H
#define MT_WGMMA_TF32_H

#include <stdint.h>

#include "launch.h"

/* A shared-memory matrix descriptor (the PTX ISA's "matrix descriptor"):
 *   bits  0-13  start address >> 4 (a shared-memory address)
 *   bits 16-29  leading-dimension byte offset >> 4: unused for a K-major
 *               operand in a swizzle whose width holds the wgmma's K (8
 *               floats = 32 bytes in 128 bytes); 1 by convention
 *   bits 32-45  stride byte offset >> 4: from one 8-row atom to the next
 *               (1024 bytes: 8 rows of 128 bytes)
 *   bits 49-51  base offset: 0, the atoms being 1024-byte aligned
 *   bits 62-63  swizzle: 1 = 128-byte (2 = 64-byte, 3 = 32-byte, 0 = none).
 * The K step k (8 floats) of a 32-float row starts 32 k bytes further: the
 * hardware swizzles the address it computes, so that moving the start
 * inside the row reads the chunks where the swizzle put them. */
constexpr uint64_t kWgmmaSwizzle128 = 1;
constexpr uint32_t kWgmmaAtomBytes = 1024;

MT_DEVICE uint64_t wgmma_desc_encode(uint32_t shared_address)
{
    return (uint64_t)((shared_address & 0x3ffff) >> 4);
}

#ifdef MT_EMULATOR
#include "emu/emu_wgmma.h"
#else

/* The descriptor of a K-major tile whose first row starts at `start` (its
 * atom 1024-byte aligned, start inside the first 128 bytes of it). */
MT_DEVICE uint64_t wgmma_desc(const float *start)
{
    const uint32_t address = (uint32_t)__cvta_generic_to_shared(start);
    return wgmma_desc_encode(address) | (wgmma_desc_encode(16) << 16) | (wgmma_desc_encode(kWgmmaAtomBytes) << 32) |
           (kWgmmaSwizzle128 << 62);
}

MT_DEVICE void wgmma_fence()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

/* Orders this thread's generic-proxy writes of shared memory (stores,
 * cp.async once waited for) before reads by the async proxy, which is how
 * wgmma reads its operands: after the copies land, before the barrier that
 * publishes the stage. */
MT_DEVICE void wgmma_fence_shared_writes()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

MT_DEVICE void wgmma_commit()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int N>
MT_DEVICE void wgmma_wait()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

template <int R>
MT_DEVICE void wgmma_fence_operand(float (&d)[R])
{
    MT_UNROLL for (int i = 0; i < R; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* d += A B for a 64 x 128 x 8 product: d[64] in the layout above. */
MT_DEVICE void wgmma_tf32_m64n128k8(float (&d)[64], uint64_t a_desc, uint64_t b_desc, int accumulate)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("{\n.reg .pred p;\n"
                 "setp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#else
    (void)d, (void)a_desc, (void)b_desc, (void)accumulate;
#endif
}

/* d += A B for a 64 x 256 x 8 product: d[128] in the layout above. */
MT_DEVICE void wgmma_tf32_m64n256k8(float (&d)[128], uint64_t a_desc, uint64_t b_desc, int accumulate)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("{\n.reg .pred p;\n"
                 "setp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
                 "}, %128, %129, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(a_desc), "l"(b_desc), "r"(accumulate));
#else
    (void)d, (void)a_desc, (void)b_desc, (void)accumulate;
#endif
}

#endif /* MT_EMULATOR */

/* Where float c of row r of a stage's tile lies (rows of 32 floats in the
 * 128-byte swizzle): the 16-byte chunk c / 4 at chunk (c / 4) ^ (r % 8). */
MT_DEVICE int swizzle128(int r, int c)
{
    return r * 32 + ((((c >> 2) ^ (r & 7)) << 2) | (c & 3));
}

/* The stages of a block's dynamic shared memory, aligned to the swizzle's
 * 1024-byte atom (the array's own alignment is 16; the kernels ask for
 * kWgmmaAtomBytes more than the stages take). */
MT_DEVICE float *wgmma_stages(unsigned char *shared_bytes)
{
    const uintptr_t base = (uintptr_t)shared_bytes;
    return reinterpret_cast<float *>((base + kWgmmaAtomBytes - 1) / kWgmmaAtomBytes * kWgmmaAtomBytes);
}

/* Two adjacent floats, stored as one 8-byte store (both builds). */
struct alignas(8) FloatPair {
    float x, y;
};

/* Stores a warpgroup's accumulators d (its 64 x BN tile at rows row0 ..,
 * columns col0 .., in the layout above) into Out through the epilogue's
 * batch `finish`, skipping what lies outside M x N. warp: this thread's warp
 * in the warpgroup (0..3), lane its lane. */
template <int BN, typename OutView, typename Finish>
MT_DEVICE void wgmma_store_tile(float (&d)[BN / 2], const OutView &Out, const Finish &finish, int64_t row0,
                                int64_t col0, int64_t M, int64_t N, int warp, int lane)
{
    const int g = lane / 4, t = lane % 4;
    MT_UNROLL for (int j = 0; j < BN / 8; ++j)
        MT_UNROLL for (int h = 0; h < 2; ++h) {
            float v[2] = {d[4 * j + 2 * h], d[4 * j + 2 * h + 1]};
            const int64_t row = row0 + warp * 16 + g + 8 * h;
            const int64_t col = col0 + j * 8 + 2 * t;
            finish.apply(v, row, col);
            if (row >= M)
                continue;
            float *at = &Out.at(row, col);
            /* the pair as one 8-byte store where it can be: a warp then
             * writes whole 32-byte sectors (8 rows x 4 pairs), half the
             * store instructions of two 4-byte stores */
            if (col + 1 < N && Out.col_stride == 1 && (uintptr_t)at % 8 == 0) {
                *reinterpret_cast<FloatPair *>(at) = FloatPair{v[0], v[1]};
            } else {
                if (col < N)
                    *at = v[0];
                if (col + 1 < N)
                    Out.at(row, col + 1) = v[1];
            }
        }
}

/* One K step of 8 (kk: 0, 8, 16, 24 of a stage's 32) for a warpgroup:
 * d += A[its 64 rows, kk ..] B[kk .., BN columns], a_rows and b_rows the
 * stage's first A row of the warpgroup and first B row (column of B). */
template <int BN>
MT_DEVICE void wgmma_step(float (&d)[BN / 2], const float *a_rows, const float *b_rows, int kk)
{
    const uint64_t a_desc = wgmma_desc(a_rows + kk);
    const uint64_t b_desc = wgmma_desc(b_rows + kk);
    if constexpr (BN == 128)
        wgmma_tf32_m64n128k8(d, a_desc, b_desc, 1);
    else
        wgmma_tf32_m64n256k8(d, a_desc, b_desc, 1);
}

/* One stage's products for a warpgroup (BK a multiple of 8): the wgmmas
 * of its K steps, committed as one group; then a wait until only that group
 * runs, so that when it returns the previous stage's products are done and
 * that stage may be refilled, while this one's still run. */
template <int BN, int BK>
MT_DEVICE void wgmma_stage(float (&d)[BN / 2], const float *a_rows, const float *b_rows)
{
    wgmma_fence_operand(d);
    wgmma_fence();
    MT_UNROLL for (int kk = 0; kk < BK; kk += 8)
        wgmma_step<BN>(d, a_rows, b_rows, kk);
    wgmma_commit();
    wgmma_wait<1>();
    wgmma_fence_operand(d);
}

#endif /* MT_WGMMA_TF32_H */
