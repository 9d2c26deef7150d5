/*
 * matmul_internal.h: what the matmul source files share.
 *
 *   src/matmul.cu               mt_matmul: argument checks, the choice of a
 *                               kernel, operand preparation;
 *   src/matmul_<rung>.cu        one file per rung of the ladder: naive,
 *                               coalesced, tiled, blocktile_1d, blocktile_2d,
 *                               vectorized, warptile and pipelined (with
 *                               the tile configurations the autotuner
 *                               chooses from),
 *                               and the TF32 rungs on tensor cores (tf32,
 *                               tf32_pipelined), outside the ladder's
 *                               float-exact list (mt_matmul_tf32);
 *   src/matmul_view.h           one batch's matrices as the kernels see them.
 *
 * This header declares no __shared__ arrays and launches nothing (it is not
 * passed through minitensor/cuda/_cu2emu.py, only the .cu files are).
 */
#ifndef MT_MATMUL_INTERNAL_H
#define MT_MATMUL_INTERNAL_H

#include <type_traits>

#include "matmul_view.h"

/* Tiles of rungs 1-3 (naive, coalesced, tiled): blocks of 32 x 32 threads,
 * one per output of a 32 x 32 tile. 32 makes one warp exactly one row of the
 * block: in rungs 2 and 3 its 32 threads read 32 consecutive elements of a B
 * row (one coalesced load) and all read the same A element (a broadcast).
 * Two tiles of 32 x 32 doubles are 16 KiB of shared memory per block.
 * __launch_bounds__(kThreads) on the kernels tells the compiler that blocks
 * have 1024 threads, so it keeps each thread within the 64 registers that
 * leaves (65536 per SM / 1024); without it, a compiler that chose more would
 * make every launch fail with "too many resources".
 *
 * Every rung's tile parameters are static constexpr members of a struct
 * like this one (BM x BN outputs per block, BK of K per step, kThreads per
 * block), passed to its kernel as the template parameter C. */
struct SimpleTiles {
    static constexpr int BM = 32;
    static constexpr int BN = 32;
    static constexpr int BK = 32;
    static constexpr int kThreads = BM * BN;
};

/* Tiles of rung 5 (blocktile_2d) and its typed twin (blocktile_2d_typed).
 * A block computes a 128 x 128 tile with 256 threads, each an 8 x 8 block:
 * thread t owns rows (t / 16) * 8 ... + 7 and columns (t % 16) * 8 ... + 7. */
struct Blocktile2dTiles {
    static constexpr int BM = 128;
    static constexpr int BN = 128;
    static constexpr int BK = 8;
    static constexpr int TM = 8;
    static constexpr int TN = 8;
    static constexpr int kThreads = (BM / TM) * (BN / TN); /* 256 */
    static_assert((BM * BK) % kThreads == 0 && (BK * BN) % kThreads == 0, "whole loads per thread");
};

/* The plain product's epilogue (see src/matmul_epilogue.h for the idea): a
 * kernel that takes an epilogue Epi calls epi.at_batch(z) once after its
 * main loop and batch.apply(values, row, col) on each run of outputs before
 * storing them; this one leaves the values as they are, and compiles away. */
struct PlainStore {
    struct Batch {
        template <typename T, int kCount>
        MT_DEVICE void apply(T (&)[kCount], int64_t, int64_t) const {}
    };
    MT_DEVICE Batch at_batch(int64_t) const { return Batch{}; }
};

/* ---- the rungs ------------------------------------------------------------
 * Each launcher runs its rung's kernel over every batch of a validated,
 * non-empty product with K > 0 (T is float or double). Rungs 1-5 take any
 * strides. vectorized, warptile and pipelined need operands the vector loads can read
 * (gemm_operand_ok): mt_matmul copies any other operand to a contiguous
 * buffer first. `config` picks one of the rung's tile configurations
 * (0..count-1 in the rung's own numbering). */
template <typename T>
mt_status launch_naive(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
template <typename T>
mt_status launch_coalesced(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
template <typename T>
mt_status launch_tiled(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
template <typename T>
mt_status launch_blocktile_1d(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
template <typename T>
mt_status launch_blocktile_2d(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
/* blocktile_2d written with typed dimensions (src/typed_dims.h). */
template <typename T>
mt_status launch_blocktile_2d_typed(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
template <typename T>
mt_status launch_vectorized(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
template <typename T>
mt_status launch_warptile(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int config);
/* warptile with an epilogue Epi applied as each output is stored
 * (launch_warptile is this with PlainStore; src/matmul_epilogue.cu
 * instantiates BiasActResidual). */
template <typename T, typename Epi>
mt_status launch_warptile_epilogue(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int config,
                                   const Epi &epi);
template <typename T>
mt_status launch_pipelined(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int config);
/* The same with an epilogue (as launch_warptile_epilogue). */
template <typename T, typename Epi>
mt_status launch_pipelined_epilogue(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int config,
                                    const Epi &epi);
/* The tensor-core rungs (float32 operands, TF32 products): the first takes
 * any strides, the pipelined one row-major operands that gemm_operand_ok
 * accepts (without transposed views). */
mt_status launch_tf32(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
mt_status launch_tf32_pipelined(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
/* The mma.sync rung, with one of its tile variants (0..tf32_mma_tile_count()
 * - 1: row-major operands as the pipelined one) or -1: its choice, which
 * also reads column-major operands in place (gemm_operand_ok's
 * transposed_ok); and that choice with the fused epilogue (src/matmul_epilogue.h). */
mt_status launch_tf32_mma(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int tile);
template <typename T>
struct BiasActResidual;
/* Split-K's pieces (src/matmul_warptile.cu): x's matrix cut along K into
 * `splits` slices, a 3-d view (slice, rows, cols) whose slice dim steps K /
 * splits along K (along_cols: K is x's last dim, as A's; else its second
 * last, as B's); and out = epi(the sum over s of partial[s]), partial a
 * (splits, M, N) row-major buffer, summed in slice order (float32 for
 * PlainStore and BiasActResidual; the warptile kernel's own types as well). */
mt_tensor k_slices(const mt_tensor &x, int splits, bool along_cols);
/* The partial products' buffer `data` as a (splits, M, N) row-major tensor,
 * M x N being out's matrix. */
inline mt_tensor split_partials(const mt_tensor &out, int splits, void *data)
{
    mt_tensor partial = out;
    partial.data = data;
    partial.offset = 0;
    partial.ndim = 3;
    partial.shape[0] = splits;
    partial.shape[1] = out.shape[out.ndim - 2];
    partial.shape[2] = out.shape[out.ndim - 1];
    partial.strides[0] = partial.shape[1] * partial.shape[2];
    partial.strides[1] = partial.shape[2];
    partial.strides[2] = 1;
    return partial;
}
template <typename T, typename Epi>
mt_status launch_split_sum(const mt_tensor &out, const T *partial, int splits, const Epi &epi);
mt_status launch_tf32_mma_epilogue(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b,
                                   const BiasActResidual<float> &epi);
int tf32_mma_tile_count(void);
const char *tf32_mma_tile_name(int tile);
/* The wgmma rung (src/matmul_tf32_wgmma.cu): a row-major and b column-major
 * (with_k_major_operands makes them so) on a device it runs on
 * (tf32_wgmma_available); tf32_wgmma_chosen: where the library's TF32
 * product takes it (out, a and b as the caller gave them, any layout);
 * tile: 0..tf32_wgmma_tile_count() - 1 or -1, its choice. */
bool tf32_wgmma_available(void);
bool tf32_wgmma_chosen(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
int tf32_wgmma_tile_count(void);
const char *tf32_wgmma_tile_name(int tile);
mt_status launch_tf32_wgmma(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int tile);
mt_status launch_tf32_wgmma_epilogue(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b,
                                     const BiasActResidual<float> &epi);
/* The TMA rung (src/matmul_tf32_tma.cu): the wgmma rung's kernel fed by a
 * producer warpgroup's TMA copies; its operands as the wgmma rung's, each
 * batch's matrix 16-byte aligned with rows a multiple of 16 bytes apart
 * (tf32_tma_operands_ok). tile: 0 (128 x 128), 1 (128 x 256) or -1, its
 * choice. launch_tf32_wgmma_best: the TMA kernel where it reads the
 * operands, else the wgmma rung's (what mt_matmul_tf32 runs). */
bool tf32_tma_operands_ok(const mt_tensor &a, const mt_tensor &b);
mt_status launch_tf32_tma(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int tile);
mt_status launch_tf32_tma_epilogue(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b,
                                   const BiasActResidual<float> &epi);
inline mt_status launch_tf32_wgmma_best(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    return tf32_tma_operands_ok(a, b) ? launch_tf32_tma(out, a, b, -1) : launch_tf32_wgmma(out, a, b, -1);
}
/* The wgmma rung's transposing stages (src/matmul_tf32_wgmma_mn.cu): a
 * column-major and b row-major (M and N contiguous, as a weight gradient's
 * dz.T @ x), read in place, K split across blocks where the product has few
 * tiles. tf32_wgmma_mn_layout: a and b are so (aligned); tf32_wgmma_mn_chosen:
 * where mt_matmul_tf32 takes it when tf32_wgmma_chosen does not. */
bool tf32_wgmma_mn_layout(const mt_tensor &a, const mt_tensor &b);
bool tf32_wgmma_mn_chosen(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
mt_status launch_tf32_wgmma_mn(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);

/* From src/matmul.cu, for the other entry points of the family
 * (src/matmul_epilogue.cu): out = a @ b is a valid product (shapes, batch
 * broadcast, no overlap), else a failure naming func; and x made readable by
 * the vectorised kernels (gemm_operand_ok), copied into scratch if need be. */
mt_status check_product(const char *func, const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
/* MT_ERR_INVALID_ARGUMENT naming func on a GPU without TF32 tensor cores
 * (compute capability below 8.0); the emulator has them. */
mt_status check_tf32_device(const char *func);
mt_status prepare_operand(const mt_tensor &x, bool transposed_ok, mt_tensor *view, DeviceScratch *scratch);

/* launch(a_view, b_view) on a and b made readable by the vectorised
 * kernels (prepare_operand; transposed_ok for both), the copies, if any,
 * freed after it (stream-ordered): what every entry point of a vectorised
 * rung does around its launch (mt_matmul, the TF32 rungs, the epilogue). */
template <typename Launch>
mt_status with_prepared_operands(const mt_tensor &a, const mt_tensor &b, bool transposed_ok, Launch launch)
{
    mt_tensor a_view, b_view;
    DeviceScratch a_copy, b_copy;
    MT_TRY(prepare_operand(a, transposed_ok, &a_view, &a_copy));
    MT_TRY(prepare_operand(b, transposed_ok, &b_view, &b_copy));
    MT_TRY(launch(a_view, b_view));
    CUDA_CHECK(a_copy.release());
    CUDA_CHECK(b_copy.release());
    return MT_OK;
}

/* x with its last two dims swapped: the transposed view. */
inline mt_tensor swap_last_dims(mt_tensor x)
{
    const int r = x.ndim - 2, c = x.ndim - 1;
    const int64_t shape = x.shape[r], stride = x.strides[r];
    x.shape[r] = x.shape[c], x.strides[r] = x.strides[c];
    x.shape[c] = shape, x.strides[c] = stride;
    return x;
}

/* launch(a_view, b_view) with both operands K-major, as the wgmma rung
 * reads them (wgmma's TF32 form takes no other layout): a row-major and b
 * column-major, that is b's transpose row-major. So b's transpose is what
 * gets prepared, and swapped back. Each is read in place where it already
 * is so with aligned rows (x @ w.T); else prepare_operand copies it, which
 * for a transposed view (a = dy.T) or a row-major b (x @ w, dy @ w) is the
 * tiled transpose of copy_tensor: one read and one write of the operand. */
template <typename Launch>
mt_status with_k_major_operands(const mt_tensor &a, const mt_tensor &b, Launch launch)
{
    return with_prepared_operands(a, swap_last_dims(b), false, [&](const mt_tensor &a_view, const mt_tensor &bt) {
        return launch(a_view, swap_last_dims(bt));
    });
}

/* How many bm x bn tiles an M x N product (times its batches) has. */
inline int64_t out_tiles(int64_t M, int64_t N, int64_t batches, int64_t bm, int64_t bn)
{
    return ((M + bm - 1) / bm) * ((N + bn - 1) / bn) * batches;
}

/* Does out have a 128 x 256 tile for every SM? The wgmma and TMA rungs take
 * their wide tile there, else 128 x 128: fewer, wider tiles would leave SMs
 * idle. */
inline bool wide_tiles_fill_gpu(const mt_tensor &out)
{
    return out_tiles(out.shape[out.ndim - 2], out.shape[out.ndim - 1], shape_numel(out.shape, out.ndim - 2), 128,
                     256) >= mt_sm_count();
}

/* The warptile tile configurations: how many there are, each one's name, and
 * the one the library picks for a product when nobody (the autotuner) chose. */
int warptile_config_count(void);
const char *warptile_config_name(int config);
int warptile_default_config(int64_t M, int64_t N, int64_t batches, int64_t sm_count, size_t itemsize);
/* The same for the pipelined rung (its own numbering, 0..count-1). */
int pipelined_config_count(void);
const char *pipelined_config_name(int config);
int pipelined_default_config(int64_t M, int64_t N, int64_t batches, int64_t sm_count, size_t itemsize);

/* Can the vectorised kernels read x directly? They need each matrix row-major
 * (stride[-1] == 1) or, where `transposed_ok`, column-major (stride[-2] == 1),
 * with the other stride, the offset and every batch stride multiples of the
 * 16-byte Pack width and a 16-byte-aligned data pointer, so that every Pack
 * they load is aligned. */
inline bool gemm_operand_ok(const mt_tensor &x, bool transposed_ok)
{
    const int64_t width = (int64_t)(16 / dtype_size(x.dtype));
    const int64_t rows = x.shape[x.ndim - 2];
    const int64_t cols = x.shape[x.ndim - 1];
    const int64_t rs = x.strides[x.ndim - 2];
    const int64_t cs = x.strides[x.ndim - 1];
    if ((uintptr_t)x.data % 16 != 0 || x.offset % width != 0)
        return false;
    for (int d = 0; d < x.ndim - 2; ++d) {
        if (x.shape[d] != 1 && x.strides[d] % width != 0)
            return false;
    }
    /* A dim of length 1 has no meaningful stride: treat it as whatever fits. */
    const bool row_major = (cs == 1 || cols == 1) && (rows == 1 || rs % width == 0);
    const bool col_major = (rs == 1 || rows == 1) && (cols == 1 || cs % width == 0);
    return row_major || (transposed_ok && col_major);
}

/* Is x, which gemm_operand_ok accepted, stored column-major (a transposed
 * view of a row-major matrix)? Row-major wins when both hold (a vector). */
inline bool gemm_operand_transposed(const mt_tensor &x)
{
    const int64_t cols = x.shape[x.ndim - 1];
    const int64_t cs = x.strides[x.ndim - 1];
    return !(cs == 1 || cols == 1);
}

/* Calls launch(at, bt), at and bt std::true_type or std::false_type as a
 * and b are column-major (transposed views, gemm_operand_transposed), so
 * that a rung instantiates its kernel per layout: float32 has kernels for
 * transposed operands; float64 operands are made row-major by mt_matmul
 * (fewer kernels to compile), and a transposed one is refused. */
template <typename T, typename Launch>
mt_status with_operand_layouts(const mt_tensor &a, const mt_tensor &b, const char *rung, Launch launch)
{
    const bool at = gemm_operand_transposed(a);
    const bool bt = gemm_operand_transposed(b);
    if constexpr (sizeof(T) == sizeof(float)) {
        if (at && bt)
            return launch(std::true_type{}, std::true_type{});
        if (at)
            return launch(std::true_type{}, std::false_type{});
        if (bt)
            return launch(std::false_type{}, std::true_type{});
    } else {
        if (at || bt)
            return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_matmul", "%s: float64 operands must be row-major here", rung);
    }
    return launch(std::false_type{}, std::false_type{});
}

/* The leading dimension of an operand that gemm_operand_ok accepted: the
 * stride between rows (row-major) or between columns (column-major). */
inline int64_t leading_dim(const mt_tensor &x, bool transposed)
{
    return transposed ? x.strides[x.ndim - 1] : x.strides[x.ndim - 2];
}

/* Can out take Pack stores (store_row's vec_out)? Row-major rows, and a row
 * stride, an offset and batch strides that keep every Pack aligned. */
inline bool out_vector_ok(const mt_tensor &out)
{
    const int64_t width = (int64_t)(16 / dtype_size(out.dtype));
    if (out.strides[out.ndim - 1] != 1 || (uintptr_t)out.data % 16 != 0 || out.offset % width != 0)
        return false;
    if (out.shape[out.ndim - 2] > 1 && out.strides[out.ndim - 2] % width != 0)
        return false;
    for (int d = 0; d < out.ndim - 2; ++d) {
        if (out.shape[d] != 1 && out.strides[d] % width != 0)
            return false;
    }
    return true;
}

#endif /* MT_MATMUL_INTERNAL_H */
