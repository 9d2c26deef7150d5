/*
 * softmax.cu: softmax and log_softmax along any dim, fused: one kernel, one
 * block per row (the elements that share all indices except along dim).
 *
 *   softmax(x)_k     = exp(x_k - m) / s
 *   log_softmax(x)_k = (x_k - m) - log(s)
 *   where m = max_j x_j and s = sum_j exp(x_j - m).
 *
 * Subtracting the row maximum m changes nothing mathematically but keeps
 * every exp argument <= 0, so exp never overflows (exp(1000) would be inf and
 * the result NaN); the largest term is exp(0) = 1, so s >= 1 and log(s) is
 * safe. log_softmax computed this way also avoids log(0) for tiny
 * probabilities, which log(softmax(x)) would hit.
 *
 * Two kernels, one block per row, rows handed out in a grid-stride loop:
 *
 *   softmax_rows_registers  contiguous rows of up to 16 * 512 Packs (32768
 *                  floats): the block reads its row from global memory ONCE
 *                  into registers (each thread a few 16-byte Packs), finds
 *                  the max and the sum of exponentials from the registers
 *                  (warp-shuffle block reductions, block_reduce_warps) and
 *                  writes the result: one read and one write of the data,
 *                  the least a softmax can move.
 *   softmax_rows   any layout and length: three passes over the row in
 *                  global memory (max, sum of exponentials, write), each
 *                  thread a block-strided slice, as in reduce.cu.
 */
#include "ops_common.h"
#include "block_reduce.h" /* after ops_common.h: its stub uses task.h */
#include "combine.h"


/* TASK(softmax) BEGIN */
/* in_rows and out_rows are in and out with shape[dim] set to 1: ordinal r of
 * each is the first element of row r; element k of the row is k strides of
 * dim further on. */
template <typename T>
__global__ void softmax_rows(mt_tensor out_rows, mt_tensor in_rows, int64_t len, int64_t in_stride, int64_t out_stride, int64_t rows, int log_softmax)
{
    __shared__ BlockScratch<T> scratch;
    T *out_data = static_cast<T *>(out_rows.data);
    const T *in_data = static_cast<const T *>(in_rows.data);
    /* `row` is the same for every thread of the block: all of them run the
     * loop equally often and meet the same barriers in block_reduce. */
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t in_first = ordinal_to_position(row, &in_rows);
        const int64_t out_first = ordinal_to_position(row, &out_rows);

        T local_max = -mt_infinity<T>();
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x)
            local_max = mt_max(local_max, in_data[in_first + k * in_stride]);
        const T row_max = block_reduce(scratch, local_max, CombineMax<T>());

        T local_sum = T(0);
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x)
            local_sum += mt_exp(in_data[in_first + k * in_stride] - row_max);
        const T row_sum = block_reduce(scratch, local_sum, CombineSum<T>());

        /* block_reduce ends with a barrier, so every thread has finished
         * reading the row before any thread writes: out may be the same
         * tensor as in (an in-place softmax). */
        const T log_sum = mt_log(row_sum);
        const T inv_sum = T(1) / row_sum;
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x) {
            const T shifted = in_data[in_first + k * in_stride] - row_max;
            T value;
            if (log_softmax)
                value = shifted - log_sum;
            else
                value = mt_exp(shifted) * inv_sum;
            out_data[out_first + k * out_stride] = value;
        }
    }
}

/* TASK(softmax) STUB */
//| MT_TASK_MISSING(softmax, "softmax_rows", "src/softmax.cu")
//|
//| /* in_rows and out_rows are in and out with shape[dim] set to 1: ordinal r of
//|  * each is the first element of row r; element k of the row is k strides of
//|  * dim further on. One block per row, rows in a grid-stride loop. */
//| template <typename T>
//| __global__ void softmax_rows(mt_tensor out_rows, mt_tensor in_rows, int64_t len, int64_t in_stride, int64_t out_stride, int64_t rows, int log_softmax)
//| {
//|     /* TODO (task softmax): for each row of this block, three passes over
//|      * its elements, each thread taking k = threadIdx.x, + blockDim.x, ...:
//|      *   1. the row maximum m (block_reduce with CombineMax: every thread
//|      *      gets it);
//|      *   2. s = the sum of exp(x_k - m) (block_reduce with CombineSum);
//|      *   3. out_k = exp(x_k - m) / s, or (x_k - m) - log(s) for log_softmax.
//|      * Why subtract m? What must every thread of the block do the same number
//|      * of times? out may be the same tensor as in: may a thread write before
//|      * every thread has read the row? */
//| }
/* TASK(softmax) END */

/* in and out point at the first element of row 0; row r starts r * len
 * further on. Each thread holds kPacks Packs of its row: with `vec` (len a
 * multiple of the Pack width, both pointers 16-byte aligned) Pack c of the
 * row is elements c * W .. c * W + W - 1 and thread t takes Packs
 * t, t + B, t + 2B, ...; without it, element k = (p * W + w) * B + t, so
 * that neighbouring threads still read neighbouring elements. The caller
 * guarantees kPacks * W * blockDim.x >= len. Slots past the end of the row
 * hold -inf, which adds exp(-inf) = 0 to the sum. */
template <typename T, int kPacks>
__global__ void __launch_bounds__(512) softmax_rows_registers(T *out, const T *in, int64_t len, int64_t rows, bool vec, int log_softmax)
{
    __shared__ BlockScratch<T> scratch;
    constexpr int W = Pack<T>::kWidth;
    const int64_t B = blockDim.x;
    const int64_t t = threadIdx.x;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *x = in + row * len;
        T *y = out + row * len;
        T v[kPacks][W];
        T local_max = -mt_infinity<T>();
        MT_UNROLL for (int p = 0; p < kPacks; ++p) {
            if (vec) {
                const int64_t c = p * B + t;
                if (c * W < len) {
                    const Pack<T> pack = reinterpret_cast<const Pack<T> *>(x)[c];
                    MT_UNROLL for (int w = 0; w < W; ++w)
                        v[p][w] = pack.v[w];
                } else {
                    MT_UNROLL for (int w = 0; w < W; ++w)
                        v[p][w] = -mt_infinity<T>();
                }
            } else {
                MT_UNROLL for (int w = 0; w < W; ++w) {
                    const int64_t k = (p * W + w) * B + t;
                    v[p][w] = k < len ? x[k] : -mt_infinity<T>();
                }
            }
            MT_UNROLL for (int w = 0; w < W; ++w)
                local_max = mt_max(local_max, v[p][w]);
        }
        const T row_max = block_reduce_warps(scratch, local_max, -mt_infinity<T>(), CombineMax<T>());

        /* v becomes x - max (log_softmax) or exp(x - max) (softmax). */
        T local_sum = T(0);
        MT_UNROLL for (int p = 0; p < kPacks; ++p)
            MT_UNROLL for (int w = 0; w < W; ++w) {
                const T shifted = v[p][w] - row_max;
                const T e = mt_exp(shifted);
                const int64_t k = vec ? (p * B + t) * W + w : (p * W + w) * B + t;
                if (k < len)
                    local_sum += e;
                v[p][w] = log_softmax ? shifted : e;
            }
        const T row_sum = block_reduce_warps(scratch, local_sum, T(0), CombineSum<T>());
        const T log_sum = mt_log(row_sum);
        const T inv_sum = T(1) / row_sum;

        MT_UNROLL for (int p = 0; p < kPacks; ++p) {
            T r[W];
            MT_UNROLL for (int w = 0; w < W; ++w)
                r[w] = log_softmax ? v[p][w] - log_sum : v[p][w] * inv_sum;
            if (vec) {
                const int64_t c = p * B + t;
                if (c * W < len) {
                    Pack<T> pack;
                    MT_UNROLL for (int w = 0; w < W; ++w)
                        pack.v[w] = r[w];
                    reinterpret_cast<Pack<T> *>(y)[c] = pack;
                }
            } else {
                MT_UNROLL for (int w = 0; w < W; ++w) {
                    const int64_t k = (p * W + w) * B + t;
                    if (k < len)
                        y[k] = r[w];
                }
            }
        }
    }
}

/* The register kernel's largest row: 16 Packs per thread, 512 threads.
 * (At most 512 threads lets each keep up to 128 registers: 16 Packs of 4
 * floats are 64 of them.) */
constexpr int kMaxRegisterPacks = 16;
constexpr int kMaxRegisterThreads = 512;

template <typename T>
static mt_status launch_softmax_registers(const mt_tensor &out, const mt_tensor &in, int log_softmax)
{
    constexpr int64_t W = Pack<T>::kWidth;
    const int64_t len = in.shape[in.ndim - 1];
    const int64_t rows = tensor_numel(in) / len;
    const T *in_first = static_cast<const T *>(in.data) + in.offset;
    T *out_first = static_cast<T *>(out.data) + out.offset;
    const bool vec = len % W == 0 && aligned16(in_first) && aligned16(out_first);
    /* Enough threads that 8 Packs each cover the row (at least a warp, at
     * most kMaxRegisterThreads), then as few Packs per thread as cover it. */
    int64_t block = 32;
    while (block < kMaxRegisterThreads && block * W * 8 < len)
        block *= 2;
    int64_t packs = 1;
    while (packs * W * block < len)
        packs *= 2;
    const unsigned int grid = grid_size(rows, 1);
    switch (packs) {
    case 1:
        softmax_rows_registers<T, 1><<<grid, (unsigned int)block, 0, mt_stream()>>>(out_first, in_first, len, rows, vec, log_softmax);
        break;
    case 2:
        softmax_rows_registers<T, 2><<<grid, (unsigned int)block, 0, mt_stream()>>>(out_first, in_first, len, rows, vec, log_softmax);
        break;
    case 4:
        softmax_rows_registers<T, 4><<<grid, (unsigned int)block, 0, mt_stream()>>>(out_first, in_first, len, rows, vec, log_softmax);
        break;
    case 8:
        softmax_rows_registers<T, 8><<<grid, (unsigned int)block, 0, mt_stream()>>>(out_first, in_first, len, rows, vec, log_softmax);
        break;
    default:
        softmax_rows_registers<T, kMaxRegisterPacks><<<grid, (unsigned int)block, 0, mt_stream()>>>(out_first, in_first, len, rows, vec, log_softmax);
        break;
    }
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

template <typename T>
static mt_status launch_softmax(const mt_tensor &out, const mt_tensor &in, int dim, int log_softmax)
{
    const int64_t len = in.shape[dim];
    /* The teaching policy (policy.h) sends every softmax to softmax_rows. */
    if (mt_fast_kernels() && dim == in.ndim - 1 && is_contiguous(in) && is_contiguous(out) &&
        len <= kMaxRegisterPacks * kMaxRegisterThreads * (int64_t)Pack<T>::kWidth)
        return launch_softmax_registers<T>(out, in, log_softmax);

    mt_tensor in_rows = in;
    mt_tensor out_rows = out;
    in_rows.shape[dim] = 1;
    out_rows.shape[dim] = 1;
    const int64_t rows = tensor_numel(in_rows);
    const int block = row_block_size(len);
    const unsigned int grid = grid_size(rows, 1);
    /* softmax_rows is the softmax task, built on the reductions task's
     * block_reduce. */
    MT_TRY(MT_TASK_CHECK(softmax));
    MT_TRY(MT_TASK_CHECK(reductions));
    softmax_rows<T><<<grid, block, 0, mt_stream()>>>(out_rows, in_rows, len, in.strides[dim], out.strides[dim], rows, log_softmax);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_softmax(mt_tensor out, mt_tensor in, int dim, int log)
{
    const char *func = "mt_softmax";
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    MT_TRY(mt_check_tensor(func, "in", &in));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "in", &in));
    MT_TRY(mt_check_same_dtype(func, &in, "in", &out, "out"));
    MT_TRY(mt_check_float(func, "in", &in));
    MT_TRY(mt_check_same_shape(func, &in, "in", &out, "out"));
    MT_TRY(mt_check_dim(func, &in, "in", dim));
    MT_TRY(mt_check_alias(func, &out, &in, "in"));
    /* A row of length 0 has nothing to normalise, and then out is empty. */
    if (tensor_numel(out) == 0)
        return MT_OK;

    if (in.dtype == MT_FLOAT32)
        return launch_softmax<float>(out, in, dim, log != 0);
    return launch_softmax<double>(out, in, dim, log != 0);
}

/* The backward pass, one block per row, rows as in softmax_rows (any layout):
 * a block reduction of the row's sum (grad * out for softmax, grad for
 * log_softmax), then each element's gradient from its own three values. */
template <typename T>
__global__ void softmax_backward_rows(mt_tensor gin_rows, mt_tensor grad_rows, mt_tensor out_rows, int64_t len,
                                      int64_t gin_stride, int64_t grad_stride, int64_t out_stride, int64_t rows,
                                      int log_softmax, T scale)
{
    __shared__ BlockScratch<T> scratch;
    T *gin = static_cast<T *>(gin_rows.data);
    const T *grad = static_cast<const T *>(grad_rows.data);
    const T *out = static_cast<const T *>(out_rows.data);
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t gin_first = ordinal_to_position(row, &gin_rows);
        const int64_t grad_first = ordinal_to_position(row, &grad_rows);
        const int64_t out_first = ordinal_to_position(row, &out_rows);
        T local = T(0);
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x) {
            const T g = grad[grad_first + k * grad_stride];
            local += log_softmax ? g : g * out[out_first + k * out_stride];
        }
        /* The warp-shuffle reduction, not the course's block_reduce: a
         * student's unfinished reductions task leaves the backward working. */
        const T sum = block_reduce_warps(scratch, local, T(0), CombineSum<T>());
        /* block_reduce_warps ends with a barrier: grad_in may be grad. */
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x) {
            const T g = grad[grad_first + k * grad_stride];
            const T y = out[out_first + k * out_stride];
            gin[gin_first + k * gin_stride] = scale * (log_softmax ? g - mt_exp(y) * sum : y * (g - sum));
        }
    }
}

template <typename T>
static mt_status launch_softmax_backward(const mt_tensor &grad_in, const mt_tensor &grad_out, const mt_tensor &out,
                                         int dim, int log_softmax, double scale)
{
    const int64_t len = out.shape[dim];
    mt_tensor gin_rows = grad_in, grad_rows = grad_out, out_rows = out;
    gin_rows.shape[dim] = grad_rows.shape[dim] = out_rows.shape[dim] = 1;
    const int64_t rows = tensor_numel(out_rows);
    softmax_backward_rows<T><<<grid_size(rows, 1), row_block_size(len), 0, mt_stream()>>>(
        gin_rows, grad_rows, out_rows, len, grad_in.strides[dim], grad_out.strides[dim], out.strides[dim], rows,
        log_softmax, (T)scale);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_softmax_backward(mt_tensor grad_in, mt_tensor grad_out, mt_tensor out, int dim, int log, double scale)
{
    const char *func = "mt_softmax_backward";
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "grad_in", &grad_in));
    MT_TRY(mt_check_tensor(func, "grad_out", &grad_out));
    MT_TRY(mt_check_tensor(func, "out", &out));
    MT_TRY(mt_check_extent(func, "grad_in", &grad_in));
    MT_TRY(mt_check_extent(func, "grad_out", &grad_out));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_same_dtype(func, &grad_out, "grad_out", &grad_in, "grad_in"));
    MT_TRY(mt_check_same_dtype(func, &out, "out", &grad_in, "grad_in"));
    MT_TRY(mt_check_float(func, "out", &out));
    MT_TRY(mt_check_same_shape(func, &grad_out, "grad_out", &grad_in, "grad_in"));
    MT_TRY(mt_check_same_shape(func, &out, "out", &grad_in, "grad_in"));
    MT_TRY(mt_check_dim(func, &out, "out", dim));
    MT_TRY(mt_check_alias(func, &grad_in, &grad_out, "grad_out"));
    MT_TRY(mt_check_alias(func, &grad_in, &out, "out"));
    if (tensor_numel(grad_in) == 0)
        return MT_OK;
    if (out.dtype == MT_FLOAT32)
        return launch_softmax_backward<float>(grad_in, grad_out, out, dim, log != 0, scale);
    return launch_softmax_backward<double>(grad_in, grad_out, out, dim, log != 0, scale);
}
