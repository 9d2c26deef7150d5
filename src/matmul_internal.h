/*
 * matmul_internal.h: what the two matmul source files share.
 *
 *   src/matmul.cu            mt_matmul: argument checks, the choice of a
 *                            kernel, operand preparation, and rungs 1-3 of
 *                            the ladder (naive, coalesced, tiled);
 *   src/matmul_blocktile.cu  rungs 4-7 (blocktile_1d, blocktile_2d,
 *                            vectorized, warptile) and the tile
 *                            configurations of warptile (autotuning).
 *
 * Every kernel computes, for each batch ordinal z of out,
 *     out[z] (M x N) = a[za] (M x K) @ b[zb] (K x N)
 * where za and zb are z broadcast into a's and b's batch dims. Where each
 * batch's matrix starts is worked out per block by batch_start_of; inside a
 * matrix, element (i, j) of x is at start + i * x.strides[-2] + j * x.strides[-1].
 *
 * This header declares no __shared__ arrays and launches nothing (it is not
 * passed through tools/cu2emu.py, only the .cu files are).
 */
#ifndef MT_MATMUL_INTERNAL_H
#define MT_MATMUL_INTERNAL_H

#include "ops_common.h"

/* Where one batch's matrix starts in each operand, offset included. */
struct BatchStart {
    int64_t out;
    int64_t a;
    int64_t b;
};

/* Batch ordinal -> start of that batch's matrix in out, a and b. The batch
 * dims are the leading ndim - 2 dims; a and b may have fewer of them, or size
 * 1 where out's are larger (broadcast), which broadcast_index resolves. */
MT_DEVICE BatchStart batch_start_of(int64_t batch, const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    int64_t out_index[MT_MAX_DIMS];
    int64_t a_index[MT_MAX_DIMS];
    int64_t b_index[MT_MAX_DIMS];
    const int out_batch_dims = out.ndim - 2;
    const int a_batch_dims = a.ndim - 2;
    const int b_batch_dims = b.ndim - 2;
    to_index(batch, out.shape, out_batch_dims, out_index);
    broadcast_index(out_index, out_batch_dims, a.shape, a_batch_dims, a_index);
    broadcast_index(out_index, out_batch_dims, b.shape, b_batch_dims, b_index);
    BatchStart start;
    start.out = out.offset + index_to_position(out_index, out.strides, out_batch_dims);
    start.a = a.offset + index_to_position(a_index, a.strides, a_batch_dims);
    start.b = b.offset + index_to_position(b_index, b.strides, b_batch_dims);
    return start;
}

/* ---- rungs 4-7 (src/matmul_blocktile.cu) ---------------------------------
 * Each launcher runs one kernel over every batch of a validated, non-empty
 * product with K > 0. blocktile_1d and blocktile_2d take any strides.
 * vectorized and warptile need operands the vector loads can read (see
 * gemm_operand_ok): mt_matmul copies any other operand to a contiguous
 * buffer first. `config` picks a warptile tile configuration (0 .. count-1). */
template <typename T>
mt_status launch_blocktile_1d(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
template <typename T>
mt_status launch_blocktile_2d(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
template <typename T>
mt_status launch_vectorized(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b);
template <typename T>
mt_status launch_warptile(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b, int config);

/* The warptile tile configurations: how many there are, each one's name, and
 * the one the library picks for a product when nobody (the autotuner) chose. */
int warptile_config_count(void);
const char *warptile_config_name(int config);
int warptile_default_config(int64_t M, int64_t N, int64_t batches, int64_t sm_count, size_t itemsize);

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

#endif /* MT_MATMUL_INTERNAL_H */
