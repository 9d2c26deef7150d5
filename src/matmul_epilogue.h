/*
 * matmul_epilogue.h: what a matmul kernel does with each output value as it
 * stores it (its epilogue), for mt_matmul_epilogue (src/matmul_epilogue.cu).
 *
 * When the warptile kernel (src/matmul_warptile.cu) reaches its store, the
 * product's sums are in registers. A separate kernel that then adds a bias,
 * applies GELU and adds a residual must read the whole M x N output back
 * from memory and write it again, once per pass. Done here, on the values
 * still in registers, the same work costs no memory traffic beyond reading
 * the bias and residual themselves: the epilogue is where fusion is free.
 *
 * The kernel takes its epilogue as a template parameter Epi, an object with
 *
 *     Epi::Batch at_batch(int64_t z) const;    once per block, after the loop
 *     void Batch::apply(T (&v)[n], int64_t row, int64_t col) const;
 *                                             v: out(row, col .. col + n - 1)
 *
 * PlainStore (matmul_internal.h) changes nothing: the plain product.
 * BiasActResidual computes, for each output element inside out,
 *
 *     z = acc + bias[col]          (bias: MT_EPILOGUE_BIAS)
 *     pre[row, col] = z            (MT_EPILOGUE_PRE: what a backward needs)
 *     v = act(z) + residual[row, col]   (residual: MT_EPILOGUE_RESIDUAL)
 *
 * This header declares no __shared__ arrays and launches nothing (it is not
 * passed through minitensor/cuda/_cu2emu.py).
 */
#ifndef MT_MATMUL_EPILOGUE_H
#define MT_MATMUL_EPILOGUE_H

#include "matmul_view.h"

/* act(z) for an mt_epilogue_act, in T's precision. The constants are
 * torch's: gelu is x * Phi(x) = x * (1 + erf(x / sqrt(2))) / 2, gelu_tanh
 * its approximation x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) / 2.
 * relu keeps a NaN (z < 0 is false for it), as torch.relu does. act is the
 * same for every thread of the launch: the switch costs no divergence. */
template <typename T>
MT_DEVICE T epilogue_act(int act, T z)
{
    switch (act) {
    case MT_EPILOGUE_RELU:
        return z < T(0) ? T(0) : z;
    case MT_EPILOGUE_GELU:
        return T(0.5) * z * (T(1) + mt_erf(z * T(0.70710678118654752440)));
    case MT_EPILOGUE_GELU_TANH: {
        const T inner = T(0.79788456080286535588) * (z + T(0.044715) * z * z * z);
        return T(0.5) * z * (T(1) + mt_tanh(inner));
    }
    default: /* MT_EPILOGUE_NONE */
        return z;
    }
}

/* epilogue_act as one out-of-line function (a call per value): inlined, its
 * erf and tanh would be copied into each of the 64 stores of a thread's
 * outputs (the loops there are unrolled, to keep the sums in registers),
 * kilobytes of code that every warp fetches once; a call keeps one copy. */
#if defined(__CUDACC__)
#define MT_EPILOGUE_OUTLINED __device__ __noinline__
#else
#define MT_EPILOGUE_OUTLINED inline
#endif
template <typename T>
MT_EPILOGUE_OUTLINED T epilogue_act_outlined(int act, T z)
{
    return epilogue_act(act, z);
}

/* Where batch z's matrix of x (a tensor of out's shape, any strides: 0 for
 * a broadcast dim) starts. */
MT_DEVICE int64_t epilogue_batch_start(const mt_tensor &x, int64_t z)
{
    int64_t index[MT_MAX_DIMS];
    to_index(z, x.shape, x.ndim - 2, index);
    return x.offset + index_to_position(index, x.strides, x.ndim - 2);
}

/* bias + activation + residual, and the pre-activation saved for backward.
 * bias is (N,), residual and pre have out's shape; flags says which are
 * there (an absent one is never read or written). */
template <typename T>
struct BiasActResidual {
    mt_tensor bias;
    mt_tensor residual;
    mt_tensor pre;
    int act;
    int flags;

    /* One batch's view of the same: pointers at that batch's matrices. */
    struct Batch {
        const T *bias; /* bias[0], offset included; nullptr when absent */
        int64_t bias_stride;
        MatrixView<const T> residual; /* data nullptr when absent */
        MatrixView<T> pre;            /* data nullptr when absent */
        int act;

        template <int kCount>
        MT_DEVICE void apply(T (&v)[kCount], int64_t row, int64_t col) const
        {
            /* pre and residual have out's shape: residual.rows/cols are out's. */
            if (row >= residual.rows)
                return;
            /* Every test is on a value the whole launch shares (which
             * tensors are there, the activation) or predicates one access
             * (a column past out, which store_row skips too): no early exit
             * from the unrolled loop. */
            MT_UNROLL for (int j = 0; j < kCount; ++j) {
                const bool inside = col + j < residual.cols;
                T z = v[j];
                if (bias != nullptr && inside)
                    z += bias[(col + j) * bias_stride];
                if (pre.data != nullptr && inside)
                    pre.at(row, col + j) = z;
                T y = z;
                if (act == MT_EPILOGUE_RELU)
                    y = z < T(0) ? T(0) : z; /* relu keeps a NaN, as epilogue_act */
                else if (act != MT_EPILOGUE_NONE)
                    y = epilogue_act_outlined(act, z);
                if (residual.data != nullptr && inside)
                    y += residual.at(row, col + j);
                v[j] = y;
            }
        }

        /* The same over a block of out that already holds the plain sums
         * (rows row0 .., columns col0 .. col0 + cols - 1, cols a multiple
         * of 4, clipped to out), read back and rewritten by the 32 lanes of
         * one warp that wrote it (after a __syncwarp): a lane takes 4
         * columns at a time, a warp a 128-column run of one row, so that
         * out, pre and residual move in 16-byte accesses where their rows
         * allow. A kernel whose sums are spread over many registers (the
         * TMA rung's 64 or 128 a thread) calls this instead of apply: its
         * loop is not unrolled, so the activation's code exists once, and
         * no register of the sums is live while it runs. */
        MT_DEVICE void apply_block(const MatrixView<T> &out, int64_t row0, int rows, int64_t col0, int cols,
                                   int lane) const
        {
            const int chunks = cols / 4;
            for (int i = lane; i < rows * chunks; i += 32) {
                const int64_t row = row0 + i / chunks, col = col0 + 4 * (i % chunks);
                if (row >= out.rows || col >= out.cols)
                    continue;
                T *at = &out.at(row, col);
                T *pre_at = pre.data != nullptr ? &pre.at(row, col) : nullptr;
                const T *res_at = residual.data != nullptr ? &residual.at(row, col) : nullptr;
                /* 16-byte accesses: the 4 columns inside out, contiguous
                 * and aligned in every tensor that is there */
                const bool vec = col + 4 <= out.cols && out.col_stride == 1 && (uintptr_t)at % 16 == 0 &&
                                 (pre_at == nullptr || (pre.col_stride == 1 && (uintptr_t)pre_at % 16 == 0)) &&
                                 (res_at == nullptr || (residual.col_stride == 1 && (uintptr_t)res_at % 16 == 0));
                T v[4], z[4];
                if (vec) {
                    const Pack<T> p = *reinterpret_cast<const Pack<T> *>(at);
                    for (int j = 0; j < 4; ++j)
                        v[j] = p.v[j];
                } else {
                    for (int j = 0; j < 4; ++j)
                        v[j] = col + j < out.cols ? out.at(row, col + j) : T(0);
                }
                for (int j = 0; j < 4; ++j)
                    z[j] = bias != nullptr && col + j < out.cols ? v[j] + bias[(col + j) * bias_stride] : v[j];
                if (pre_at != nullptr && vec) {
                    Pack<T> p;
                    for (int j = 0; j < 4; ++j)
                        p.v[j] = z[j];
                    *reinterpret_cast<Pack<T> *>(pre_at) = p;
                } else if (pre_at != nullptr) {
                    for (int j = 0; j < 4 && col + j < out.cols; ++j)
                        pre.at(row, col + j) = z[j];
                }
                T r[4] = {T(0), T(0), T(0), T(0)};
                if (res_at != nullptr && vec) {
                    const Pack<T> p = *reinterpret_cast<const Pack<T> *>(res_at);
                    for (int j = 0; j < 4; ++j)
                        r[j] = p.v[j];
                } else if (res_at != nullptr) {
                    for (int j = 0; j < 4 && col + j < out.cols; ++j)
                        r[j] = residual.at(row, col + j);
                }
                for (int j = 0; j < 4; ++j)
                    v[j] = epilogue_act(act, z[j]) + r[j];
                if (vec) {
                    Pack<T> p;
                    for (int j = 0; j < 4; ++j)
                        p.v[j] = v[j];
                    *reinterpret_cast<Pack<T> *>(at) = p;
                } else {
                    for (int j = 0; j < 4 && col + j < out.cols; ++j)
                        out.at(row, col + j) = v[j];
                }
            }
        }
    };

    MT_DEVICE Batch at_batch(int64_t z) const
    {
        Batch b;
        b.bias = (flags & MT_EPILOGUE_BIAS) ? static_cast<const T *>(bias.data) + bias.offset : nullptr;
        b.bias_stride = bias.ndim > 0 ? bias.strides[bias.ndim - 1] : 0;
        /* residual's shape is out's, read even when absent: it gives the bounds. */
        b.residual = matrix_view<const T>(residual, epilogue_batch_start(residual, z));
        if (!(flags & MT_EPILOGUE_RESIDUAL))
            b.residual.data = nullptr;
        b.pre = matrix_view<T>(pre, epilogue_batch_start(pre, z));
        if (!(flags & MT_EPILOGUE_PRE))
            b.pre.data = nullptr;
        b.act = act;
        return b;
    }
};

#endif /* MT_MATMUL_EPILOGUE_H */
