/*
 * logsumexp.cu: log(sum(exp(x))) along one dim, one block per row, the row
 * read once (online_lse.h).
 *
 * The composite m + log(sum(exp(x - m))) with m = max(x) is seven kernels and
 * reads x twice (the max, then the sum); here each row is one block's
 * stream of loads. A row is the elements that share every index but dim's:
 * row r starts at ordinal r of `in` with shape[dim] set to 1, and its k-th
 * element is k strides of dim further (as softmax.cu walks its rows).
 */
#include "ops_common.h"
#include "online_lse.h" /* after ops_common.h: block_reduce.h's stub uses task.h */

template <typename T>
__global__ void logsumexp_rows(mt_tensor out_rows, mt_tensor in_rows, int64_t len, int64_t in_stride, int64_t rows)
{
    __shared__ BlockScratch<T> scratch;
    T *out = static_cast<T *>(out_rows.data);
    const T *in = static_cast<const T *>(in_rows.data);
    /* `row` is the same for every thread of the block, so all of them reach
     * block_logsumexp's barriers equally often. */
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t first = ordinal_to_position(row, &in_rows);
        OnlineLse<T> lse;
        add_row(lse, in + first, len, in_stride);
        const T result = block_logsumexp(scratch, lse);
        if (threadIdx.x == 0)
            out[ordinal_to_position(row, &out_rows)] = result;
    }
}

template <typename T>
static mt_status launch_logsumexp(const mt_tensor &out, const mt_tensor &in, int dim)
{
    mt_tensor in_rows = in;
    in_rows.shape[dim] = 1;
    const int64_t rows = tensor_numel(in_rows);
    const int64_t len = in.shape[dim];
    logsumexp_rows<T><<<grid_size(rows, 1), row_block_size(len), 0, mt_stream()>>>(out, in_rows, len, in.strides[dim], rows);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_logsumexp(mt_tensor out, mt_tensor in, int dim)
{
    const char *func = "mt_logsumexp";
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    MT_TRY(mt_check_tensor(func, "in", &in));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "in", &in));
    MT_TRY(mt_check_same_dtype(func, &in, "in", &out, "out"));
    MT_TRY(mt_check_float(func, "in", &in));
    MT_TRY(mt_check_dim(func, &in, "in", dim));
    /* out is in's shape with dim kept as 1 (keepdim). */
    bool shape_ok = out.ndim == in.ndim;
    for (int d = 0; shape_ok && d < in.ndim; ++d)
        shape_ok = out.shape[d] == (d == dim ? 1 : in.shape[d]);
    if (!shape_ok) {
        char got[96], want[96];
        mt_tensor keep = in;
        keep.shape[dim] = 1;
        return mt_fail(MT_ERR_SHAPE, func, "out has shape %s; expected %s (in's with dim %d kept as 1)",
                       mt_shape_str(&out, got, sizeof got), mt_shape_str(&keep, want, sizeof want), dim);
    }
    MT_TRY(mt_check_alias(func, &out, &in, "in"));
    if (tensor_numel(out) == 0)
        return MT_OK;
    /* An empty row sums nothing: log(0) = -inf, as torch gives. */
    if (in.shape[dim] == 0) {
        mt_tensor neg_inf = out;
        return mt_fill(neg_inf, -INFINITY);
    }
    if (in.dtype == MT_FLOAT32)
        return launch_logsumexp<float>(out, in, dim);
    return launch_logsumexp<double>(out, in, dim);
}
