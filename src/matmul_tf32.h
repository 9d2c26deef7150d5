/*
 * matmul_tf32.h: the TF32 tensor-core products (src/matmul_tf32*.cu,
 * src/matmul.cu, src/matmul_epilogue.cu), a family header included at the
 * end of minitensor.h as attention_mma.h is: mt_matmul_tf32, its rungs and
 * tile variants, and its fused epilogue.
 */
#ifndef MT_MATMUL_TF32_H
#define MT_MATMUL_TF32_H

/* out = a @ b as mt_matmul, on tensor cores: float32 operands rounded to
 * TF32 (10 bits of mantissa) for the products, float sums. Not exact in
 * float32 (about 1e-3 relative), hence not an algo of the ladder above:
 * Python calls it only where mt.backends.cuda.matmul.allow_tf32 is set.
 * The mma.sync rung reads row-major and column-major operands (transposed
 * views) in place and copies any other; the wgmma rung, where it is taken
 * (below), copies any operand that is not K-major, but for a column-major a
 * with a row-major b (a weight gradient's dz.T @ x), which it reads in place
 * through transposing stages; a single product with few output tiles splits
 * K. MT_ERR_DTYPE for any dtype but float32; MT_ERR_INVALID_ARGUMENT
 * on a GPU older than compute capability 8.0. */
mt_status mt_matmul_tf32(mt_tensor out, mt_tensor a, mt_tensor b);
/* The TF32 rungs, for teaching and benchmarks: MT_TF32_SIMPLE, WMMA fed by
 * scalar loads staged between two barriers per K step of 8
 * (src/matmul_tf32.cu); MT_TF32_PIPELINED, the same mma fed by cp.async
 * stages (src/matmul_tf32_pipelined.cu); MT_TF32_MMA, mma.sync with
 * ldmatrix from swizzled stages (src/matmul_tf32_mma.cu); MT_TF32_WGMMA,
 * Hopper's wgmma reading cp.async stages in the 128-byte swizzle
 * (src/matmul_tf32_wgmma.cu): compute capability 9.0 with the library built
 * for 90 (sm_90a), else MT_ERR_INVALID_ARGUMENT; it reads a row-major and b
 * column-major (K contiguous in both, as x @ w.T) in place and copies other
 * layouts into those (b transposed), and truncates the operands to TF32
 * where the others round; a column-major a with a row-major b (M and N
 * contiguous, as dz.T @ x) it reads in place through transposing stages
 * that round (src/matmul_tf32_wgmma_mn.cu), K split where out has few
 * tiles. mt_matmul_tf32 (and mt_matmul_tf32_epilogue) runs the wgmma rung
 * where it runs and the product has a 128 x 128 tile per SM, any layout,
 * unless the copies it needs are large against the product (an operand to
 * copy while the other side of out has fewer than 512 rows or columns);
 * mt_matmul_tf32 also runs the transposing stages on that layout from 2^30
 * multiply-adds; else the mma rung (MT_TF32_MMA here is always mma.sync).
 * An unknown rung is MT_ERR_INVALID_ARGUMENT. */
#define MT_TF32_SIMPLE 0
#define MT_TF32_PIPELINED 1
#define MT_TF32_MMA 2
#define MT_TF32_WGMMA 3
/* MT_TF32_TMA: the wgmma rung's products fed by TMA copies from a producer
 * warpgroup, stages handed over by mbarriers, on a persistent grid
 * (src/matmul_tf32_tma.cu); where MT_TF32_WGMMA runs, with its layouts and
 * its truncation. Operands TMA cannot describe take the MT_TF32_WGMMA
 * kernel: batch dims that are not one stride between matrices (an
 * expanded, stride-0 batch dim among them), or a driver without TMA.
 * mt_matmul_tf32 and mt_matmul_tf32_epilogue take this kernel wherever they
 * take the wgmma rung and TMA can read the operands. */
#define MT_TF32_TMA 4
mt_status mt_matmul_tf32_rung(mt_tensor out, mt_tensor a, mt_tensor b, int rung);
/* MT_TF32_MMA with a chosen tile variant (0..count-1, named by
 * mt_matmul_tf32_tile_name; -1: the library's choice), for benchmarks. */
int mt_matmul_tf32_tile_count(void);
const char *mt_matmul_tf32_tile_name(int tile);
mt_status mt_matmul_tf32_tile(mt_tensor out, mt_tensor a, mt_tensor b, int tile);
/* The same on the TF32 tensor-core rung (mt_matmul_tf32's products, float32
 * only): the wgmma or mma.sync kernel, as mt_matmul_tf32 chooses, with the
 * same epilogue in its stores. */
mt_status mt_matmul_tf32_epilogue(mt_tensor out, mt_tensor a, mt_tensor b, mt_tensor bias, mt_tensor residual,
                                  mt_tensor pre, int act, int flags);

#endif /* MT_MATMUL_TF32_H */
