/*
 * masked_softmax.cu: the attention ladder's second rung, the scores' scale,
 * mask and softmax fused into one kernel.
 *
 * The naive rung runs, on the (L, S) scores of every head, a multiply by the
 * scale, a masked_fill (or an add of the mask) and a softmax: three kernels,
 * each reading the whole score matrix and writing it again. This kernel
 * reads each score (and its mask value) once, and writes each weight once:
 *
 *   w_k = exp(x_k * scale + mask_k - lse),  lse = log(sum_k exp(x_k * scale + mask_k))
 *
 * The row's log-sum-exp comes from one streaming pass (online_lse.h: each
 * thread keeps its running maximum and rescaled sum, the same online softmax
 * as the flash rung's, here across a block instead of across key tiles).
 * With the causal mask a query i sees keys 0..i: the kernel reads only
 * those and writes zeros past them without reading.
 */
#include "ops_common.h"
#include "online_lse.h"

/* in and out: contiguous rows of len; mask_rows: the mask with in's shape
 * and its last dim set to 1, so that ordinal r is the first mask value of
 * row r (stride mask_stride along the row), or nullptr-data when there is no
 * mask. Row r is query r % queries. */
template <typename T>
__global__ void masked_softmax_rows(T *out, const T *in, mt_tensor mask_rows, int64_t mask_stride, int has_mask,
                                    int64_t len, int64_t rows, int64_t queries, T scale, int causal)
{
    __shared__ BlockScratch<T> scratch;
    const T *mask = static_cast<const T *>(mask_rows.data);
    /* `row` is the same for the whole block: every thread meets the barriers
     * of block_logsumexp equally often. */
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *x = in + row * len;
        T *y = out + row * len;
        const T *m = has_mask ? mask + ordinal_to_position(row, &mask_rows) : nullptr;
        const int64_t query = row % queries;
        const int64_t seen = causal && query + 1 < len ? query + 1 : len; /* keys this query may see */

        OnlineLse<T> mine;
        for (int64_t k = threadIdx.x; k < seen; k += blockDim.x)
            mine.add(x[k] * scale + (m ? m[k * mask_stride] : T(0)));
        const T lse = block_logsumexp(scratch, mine);
        /* A row whose every key is hidden has lse = -inf: a softmax over
         * nothing, 0/0. Attention gives such a query no weight at all (zeros,
         * as torch's scaled_dot_product_attention does) rather than NaN. */
        const bool none = lse == -mt_infinity<T>();

        /* block_logsumexp ends with a barrier: every thread has read the row
         * before any writes, so out may be in. */
        for (int64_t k = threadIdx.x; k < len; k += blockDim.x)
            y[k] = k < seen && !none ? mt_exp(x[k] * scale + (m ? m[k * mask_stride] : T(0)) - lse) : T(0);
    }
}

template <typename T>
static mt_status launch_masked_softmax(const mt_tensor &out, const mt_tensor &in, const mt_tensor &mask,
                                       double scale, int flags)
{
    const int64_t len = in.shape[in.ndim - 1];
    const int64_t rows = tensor_numel(in) / len;
    const int64_t queries = in.ndim >= 2 ? in.shape[in.ndim - 2] : 1;
    const int has_mask = (flags & MT_SOFTMAX_MASK) != 0;
    mt_tensor mask_rows = has_mask ? mask : in; /* without a mask, a descriptor that is never read */
    mask_rows.shape[mask_rows.ndim - 1] = 1;
    const int64_t mask_stride = has_mask ? mask.strides[mask.ndim - 1] : 0;
    masked_softmax_rows<T><<<grid_size(rows, 1), row_block_size(len), 0, mt_stream()>>>(
        static_cast<T *>(out.data) + out.offset, static_cast<const T *>(in.data) + in.offset, mask_rows,
        mask_stride, has_mask, len, rows, queries, (T)scale, (flags & MT_SOFTMAX_CAUSAL) != 0);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_masked_softmax(mt_tensor out, mt_tensor in, mt_tensor mask, double scale, int flags)
{
    const char *func = "mt_masked_softmax";
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    MT_TRY(mt_check_tensor(func, "in", &in));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "in", &in));
    MT_TRY(mt_check_same_dtype(func, &in, "in", &out, "out"));
    MT_TRY(mt_check_float(func, "in", &in));
    MT_TRY(mt_check_same_shape(func, &in, "in", &out, "out"));
    if (flags & ~(MT_SOFTMAX_MASK | MT_SOFTMAX_CAUSAL))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "unknown flags %d", flags);
    if (in.ndim < 1 || (tensor_numel(in) > 0 && (!is_contiguous(in) || !is_contiguous(out))))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "in and out must be contiguous tensors of at least one dim");
    if ((flags & MT_SOFTMAX_CAUSAL) && in.ndim < 2)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "the causal mask needs (..., queries, keys): in has one dim");
    MT_TRY(mt_check_alias(func, &out, &in, "in"));
    if (flags & MT_SOFTMAX_MASK) {
        MT_TRY(mt_check_tensor(func, "mask", &mask));
        MT_TRY(mt_check_extent(func, "mask", &mask));
        MT_TRY(mt_check_same_dtype(func, &mask, "mask", &in, "in"));
        MT_TRY(mt_check_same_shape(func, &mask, "mask", &in, "in"));
        if (tensors_overlap(out, mask))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "out overlaps mask");
    }
    if (tensor_numel(out) == 0)
        return MT_OK;
    if (in.dtype == MT_FLOAT32)
        return launch_masked_softmax<float>(out, in, mask, scale, flags);
    return launch_masked_softmax<double>(out, in, mask, scale, flags);
}
