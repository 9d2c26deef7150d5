/*
 * matmul_view.h: one batch's matrices as the matmul kernels see them.
 *
 * Every rung computes, for each batch ordinal z of out,
 *     out[z] (M x N) = a[za] (M x K) @ b[zb] (K x N)
 * where za and zb are z broadcast into a's and b's batch dims (a (5, M, K)
 * times b (K, N) is five products with the same b). batch_starts works out,
 * once per block, where batch z's three matrices start, and matrix_view
 * gives each as a MatrixView (base pointer, rows, columns, row and column
 * strides), so that a kernel reads element (i, k) of A as A.at(i, k) and
 * shows only its own idea:
 *
 *     const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
 *     const MatrixView<const T> A = matrix_view<const T>(a, start.a);
 *     const MatrixView<const T> B = matrix_view<const T>(b, start.b);
 *     ... the product: M = A.rows, K = A.cols, N = B.cols ...
 *     const MatrixView<T> Out = matrix_view<T>(out, start.out);
 *
 * Also here: for_each_out_tile, the grid of a rung (x: column tiles, y: row
 * tiles, z: batches, launched in chunks), and the 16-byte loads and stores
 * of the vectorised rungs (load_pack, store_row).
 *
 * Compiled as it is by nvcc and the emulator (not passed through
 * minitensor/cuda/_cu2emu.py), so it declares no __shared__ arrays and launches nothing.
 */
#ifndef MT_MATMUL_VIEW_H
#define MT_MATMUL_VIEW_H

#include "ops_common.h"

/* A rows x cols matrix in memory: element (i, j) at data[i * row_stride +
 * j * col_stride]. T is const for the operands a and b. */
template <typename T>
struct MatrixView {
    T *data; /* element (0, 0), offset and batch included */
    int64_t rows;
    int64_t cols;
    int64_t row_stride;
    int64_t col_stride;

    MT_DEVICE T &at(int64_t i, int64_t j) const { return data[i * row_stride + j * col_stride]; }
};

/* Where batch z's matrix starts in each operand (a storage position,
 * offset included). */
struct BatchStarts {
    int64_t a;
    int64_t b;
    int64_t out;
};

/* Batch ordinal -> where that batch's matrices start. The batch dims are
 * the leading ndim - 2 dims; a and b may have fewer of them, or size 1 where
 * out's are larger (broadcast), which broadcast_index resolves. */
MT_DEVICE BatchStarts batch_starts(int64_t batch, const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
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
    BatchStarts start;
    start.a = a.offset + index_to_position(a_index, a.strides, a_batch_dims);
    start.b = b.offset + index_to_position(b_index, b.strides, b_batch_dims);
    start.out = out.offset + index_to_position(out_index, out.strides, out_batch_dims);
    return start;
}

/* The matrix of x (its last two dims) that starts at storage position
 * `start`. A kernel builds the views of A and B first and the view of out
 * only after its main loop: every field of a view takes a register from
 * where it is built, and out's pointer and strides would otherwise take
 * registers from the loop (while out's descriptor, a kernel parameter,
 * costs none until then). */
template <typename T>
MT_DEVICE MatrixView<T> matrix_view(const mt_tensor &x, int64_t start)
{
    MatrixView<T> m;
    m.data = static_cast<T *>(x.data) + start;
    m.rows = x.shape[x.ndim - 2];
    m.cols = x.shape[x.ndim - 1];
    m.row_stride = x.strides[x.ndim - 2];
    m.col_stride = x.strides[x.ndim - 1];
    return m;
}

/* The grid of a rung whose blocks compute bm x bn tiles of out: x walks the
 * column tiles, y the row tiles, z the batches, cut into launches that keep
 * y and z within 65535 (for_each_grid_chunk). launch(grid, row_tile_start,
 * batch_start) launches one piece. */
template <typename Launch>
mt_status for_each_out_tile(const mt_tensor &out, int64_t bm, int64_t bn, Launch launch)
{
    const int64_t M = out.shape[out.ndim - 2];
    const int64_t N = out.shape[out.ndim - 1];
    const int64_t batches = shape_numel(out.shape, out.ndim - 2);
    return for_each_grid_chunk((N + bn - 1) / bn, (M + bm - 1) / bm, batches, launch);
}

/* ---- 16-byte loads and stores (vectorized, warptile) ---------------------- */

/* Loads the Pack of row `row` (of `rows`) starting at column `col` (of
 * `cols`) of a matrix at `data` with row stride ld. A Pack that lies wholly
 * inside the matrix is one 16-byte load; one that crosses an edge is loaded
 * element by element, with zeros outside. */
template <typename T>
MT_DEVICE Pack<T> load_pack(const T *data, int64_t row, int64_t rows, int64_t col, int64_t cols, int64_t ld)
{
    constexpr int W = Pack<T>::kWidth;
    Pack<T> p;
    if (row < rows && col + W <= cols) {
        p = *reinterpret_cast<const Pack<T> *>(data + row * ld + col);
    } else {
        MT_UNROLL for (int v = 0; v < W; ++v)
            p.v[v] = (row < rows && col + v < cols) ? data[row * ld + col + v] : T(0);
    }
    return p;
}

/* Writes kCount (a multiple of the Pack width) consecutive values of one
 * output row starting at (row, col): as Packs when out's rows are contiguous
 * and aligned (`vec_out`, out_vector_ok) and the whole run lies inside out,
 * else element by element with out's strides, skipping what lies outside. */
template <typename T, int kCount>
MT_DEVICE void store_row(const MatrixView<T> &out, const T *values, int64_t row, int64_t col, bool vec_out)
{
    constexpr int W = Pack<T>::kWidth;
    static_assert(kCount % W == 0, "whole Packs");
    if (row >= out.rows)
        return;
    if (vec_out && col + kCount <= out.cols) {
        MT_UNROLL for (int v = 0; v < kCount; v += W) {
            Pack<T> p;
            MT_UNROLL for (int w = 0; w < W; ++w)
                p.v[w] = values[v + w];
            *reinterpret_cast<Pack<T> *>(out.data + row * out.row_stride + col + v) = p;
        }
    } else {
        MT_UNROLL for (int v = 0; v < kCount; ++v) {
            if (col + v < out.cols)
                out.at(row, col + v) = values[v];
        }
    }
}

#endif /* MT_MATMUL_VIEW_H */
