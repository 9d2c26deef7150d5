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
 * A block makes three passes over its row: max (then a block_reduce), sum of
 * exponentials (then another block_reduce), and the write. Each thread takes
 * a block-strided slice of the row in every pass, as in reduce.cu, so rows of
 * any length work. Rows go to blocks in a grid-stride loop.
 */
#include "ops_common.h"

/* block_reduce combiners. */
template <typename T>
struct CombineMax {
    __device__ T operator()(T a, T b) const { return mt_max(a, b); }
};

template <typename T>
struct CombineSum {
    __device__ T operator()(T a, T b) const { return a + b; }
};

/* in_rows and out_rows are in and out with shape[dim] set to 1: ordinal r of
 * each is the first element of row r; element k of the row is k strides of
 * dim further on. */
template <typename T>
__global__ void softmax_rows(mt_tensor out_rows, mt_tensor in_rows, int64_t len, int64_t in_stride, int64_t out_stride, int64_t rows, int log_softmax)
{
    __shared__ T scratch[kBlockSize];
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

template <typename T>
static mt_status launch_softmax(const mt_tensor &out, const mt_tensor &in, int dim, int log_softmax)
{
    mt_tensor in_rows = in;
    mt_tensor out_rows = out;
    in_rows.shape[dim] = 1;
    out_rows.shape[dim] = 1;
    const int64_t len = in.shape[dim];
    const int64_t rows = tensor_numel(in_rows);
    const int block = row_block_size(len);
    const unsigned int grid = grid_size(rows, 1);
    softmax_rows<T><<<grid, block>>>(out_rows, in_rows, len, in.strides[dim], out.strides[dim], rows, log_softmax);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_softmax(mt_tensor out, mt_tensor in, int dim, int log)
{
    const char *func = "mt_softmax";
    mt_status status = mt_ensure_init(func);
    if (status == MT_OK)
        status = mt_check_output(func, "out", &out);
    if (status == MT_OK)
        status = mt_check_tensor(func, "in", &in);
    if (status == MT_OK)
        status = mt_check_same_dtype(func, &in, "in", &out, "out");
    if (status == MT_OK)
        status = mt_check_same_shape(func, &in, "in", &out, "out");
    if (status == MT_OK)
        status = check_dim(func, in, "in", dim);
    if (status != MT_OK)
        return status;
    /* A row of length 0 has nothing to normalise, and then out is empty. */
    if (tensor_numel(out) == 0)
        return MT_OK;

    if (in.dtype == MT_FLOAT32)
        return launch_softmax<float>(out, in, dim, log != 0);
    return launch_softmax<double>(out, in, dim, log != 0);
}
