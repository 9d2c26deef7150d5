/*
 * matmul_blocktile_2d_typed.cu: rung 5 of the matmul ladder (blocktile_2d,
 * src/matmul_blocktile_2d.cu) written again with typed dimensions
 * (src/typed_dims.h): the same tiles, loads, loops and stores, the same
 * results bit for bit, and the same machine code to within a few
 * instructions; only the index arithmetic changed. Where the original writes
 *
 *     a_tile[r][c] = (ar < M && ak < K) ? A.at(ar, ak) : T(0);
 *
 * with six plain integers, any of which could be swapped for another (`ar <
 * N` compiles, and is wrong only when M != N and the tile is partial), this
 * file writes
 *
 *     a_tile(i, k) = ((i < end_i) & (k < end_k)) ? A(i, k) : T(0);
 *
 * where i is a row (I), k a position along the sum (K), and `i < end_j`,
 * `A(i, j)` or `i + k` are compile errors (tests/test_typed_dims.py checks
 * that the compilers refuse them). A(k, i) would be the same element: views
 * are subscripted by dimension, not by position.
 *
 * The folds: a row is (row tile of the block, row within the tile), a
 * Fold<I, BM>; the shared tiles keep only the inner parts (their outer
 * stride is 0), so the block reads global and shared memory with the same
 * coordinates.
 *
 * One change the types forced: bounds tests are joined with `&`, where the
 * original writes `&&`. Both tests are cheap and may as well both run; the
 * original's `ar < M && ak < K` compares plain integers, which the compiler
 * turns into one predicate, but here each test is a function call until it
 * is inlined, too late for that, and `&&` left a branch around every load
 * and store: 216 more instructions (float) than the original, against 8
 * fewer with `&` (nvcc 13.0, sm_90; docs/kernels.md has the counts).
 */
#include "matmul_internal.h"
#include "typed_dims.h"

/* The three dimensions of out (M x N) = A (M x K) @ B (K x N), in a
 * namespace of this file's own: another file's I would be another type of
 * the same name in the same library. */
namespace matmul_dims {
TD_DIMENSION(I); /* rows of A and of out     */
TD_DIMENSION(J); /* columns of B and of out  */
TD_DIMENSION(K); /* the dimension summed over */
} /* namespace matmul_dims */
using matmul_dims::I;
using matmul_dims::J;
using matmul_dims::K;

/* A batch's matrix as a typed view, rows along R and columns along Cl. */
template <class R, class Cl, typename T>
MT_DEVICE td::View<T *, R, Cl> typed_view(const MatrixView<T> &m)
{
    return td::view(m.data, td::Stride<R>{m.row_stride}, td::Stride<Cl>{m.col_stride});
}

template <typename T, typename C>
__global__ void __launch_bounds__(C::kThreads) matmul_blocktile_2d_typed(mt_tensor out, mt_tensor a, mt_tensor b, int64_t row_tile_start, int64_t batch_start)
{
    constexpr int BM = C::BM, BN = C::BN, BK = C::BK, TM = C::TM, TN = C::TN;
    constexpr int kThreads = C::kThreads;
    /* A coordinate as (tile, within the tile), for each dimension. */
    using Ib = td::Fold<I, BM>;
    using Jb = td::Fold<J, BN>;
    using Kb = td::Fold<K, BK>;
    __shared__ T a_smem[BM * BK];
    __shared__ T b_smem[BK * BN];
    /* The block's current tiles of A (BM x BK) and B (BK x BN), row-major. */
    const auto a_tile = td::view(a_smem, td::tile_stride<Ib>(BK), td::tile_stride<Kb>(1));
    const auto b_tile = td::view(b_smem, td::tile_stride<Kb>(BN), td::tile_stride<Jb>(1));

    const BatchStarts start = batch_starts(batch_start + blockIdx.z, out, a, b);
    const MatrixView<const T> a_mat = matrix_view<const T>(a, start.a);
    const MatrixView<const T> b_mat = matrix_view<const T>(b, start.b);
    const auto A = typed_view<I, K>(a_mat);
    const auto B = typed_view<K, J>(b_mat);
    /* One past the last index of each dimension (the original's M, N, K). */
    const I end_i(a_mat.rows);
    const J end_j(b_mat.cols);
    const K end_k(a_mat.cols);

    /* The compound index: this thread's first output row and column, block
     * (blockIdx.y, blockIdx.x) of the grid and 8 x 8 block (t / 16, t % 16)
     * of the tile. */
    const int tid = threadIdx.x;
    const Ib row0 = td::compound<Ib>(row_tile_start + blockIdx.y, (tid / (BN / TN)) * TM);
    const Jb col0 = td::compound<Jb>(blockIdx.x, (tid % (BN / TN)) * TN);

    T acc[TM][TN];
    MT_UNROLL for (int i = 0; i < TM; ++i)
        MT_UNROLL for (int j = 0; j < TN; ++j)
            acc[i][j] = T(0);
    T a_reg[TM];
    T b_reg[TN];

    /* k0 walks the K-tiles: (tile, 0), (tile + 1, 0), ... */
    for (Kb k0{0, 0}; k0 < end_k; ++k0.outer) {
        /* 256 threads load the 128 x 8 A tile and the 8 x 128 B tile, four
         * elements each; consecutive threads take consecutive elements.
         * (On `&` for the original's `&&`, see the top of the file.) */
        for (int e = tid; e < BM * BK; e += kThreads) {
            const Ib i{row0.outer, e / BK};
            const Kb k{k0.outer, e % BK};
            a_tile(i, k) = ((i < end_i) & (k < end_k)) ? A(i, k) : T(0);
        }
        for (int e = tid; e < BK * BN; e += kThreads) {
            const Kb k{k0.outer, e / BN};
            const Jb j{col0.outer, e % BN};
            b_tile(k, j) = ((k < end_k) & (j < end_j)) ? B(k, j) : T(0);
        }
        __syncthreads();
        MT_UNROLL for (int kk = 0; kk < BK; ++kk) {
            const Kb k{k0.outer, kk};
            /* 16 loads into registers, then 64 FMAs from registers. The
             * thread's 8 rows never leave the tile, so each coordinate is
             * built from its parts (row0 + i would work out a carry). */
            MT_UNROLL for (int i = 0; i < TM; ++i)
                a_reg[i] = a_tile(Ib{row0.outer, row0.inner + i}, k);
            MT_UNROLL for (int j = 0; j < TN; ++j)
                b_reg[j] = b_tile(k, Jb{col0.outer, col0.inner + j});
            MT_UNROLL for (int i = 0; i < TM; ++i)
                MT_UNROLL for (int j = 0; j < TN; ++j)
                    acc[i][j] += a_reg[i] * b_reg[j];
        }
        __syncthreads();
    }

    /* out's view is built only now, as in every rung (matrix_view says why). */
    const auto Out = typed_view<I, J>(matrix_view<T>(out, start.out));
    MT_UNROLL for (int i = 0; i < TM; ++i) {
        const Ib row{row0.outer, row0.inner + i};
        MT_UNROLL for (int j = 0; j < TN; ++j) {
            const Jb col{col0.outer, col0.inner + j};
            if ((row < end_i) & (col < end_j))
                Out(row, col) = acc[i][j];
        }
    }
}

template <typename T>
mt_status launch_blocktile_2d_typed(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    using C = Blocktile2dTiles;
    return for_each_out_tile(out, C::BM, C::BN, [&](dim3 grid, int64_t y0, int64_t b0) {
        matmul_blocktile_2d_typed<T, C><<<grid, C::kThreads, 0, mt_stream()>>>(out, a, b, y0, b0);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

template mt_status launch_blocktile_2d_typed<float>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
template mt_status launch_blocktile_2d_typed<double>(const mt_tensor &, const mt_tensor &, const mt_tensor &);
