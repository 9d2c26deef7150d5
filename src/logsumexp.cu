/*
 * logsumexp.cu: log(sum(exp(x))) along one dim, one block per row, the row
 * read once (online_lse.h).
 *
 * The composite m + log(sum(exp(x - m))) with m = max(x) is seven kernels and
 * reads x twice (the max, then the sum); here each row is one block's
 * stream of loads. A row is the elements that share every index but dim's:
 * row r starts at ordinal r of `in` with shape[dim] set to 1, and its k-th
 * element is k strides of dim further (as softmax.cu walks its rows).
 *
 * The backward, mt_logsumexp_backward, is the softmax times the incoming
 * gradient, grad_in = grad_out * exp(x - lse), with grad_out and the saved
 * lse repeated along the reduced dims. The chain (sub, exp, mul) is three
 * kernels and two temporaries of x's size; here it is one elementwise pass:
 *
 *   logsumexp_backward_rows     x and grad_in contiguous, one dim reduced,
 *                  the last: a group of lanes per row reads that row's lse
 *                  and grad_out once, then streams the row (16-byte Packs
 *                  when aligned). No barrier, so no group waits for another.
 *   logsumexp_backward_strided  any layout, any reduced dims: each thread
 *                  turns its ordinal into an index, as zip_strided does.
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

/* ---- the backward ---------------------------------------------------------- */

/* Rows of `len` elements, contiguous; lse and grad_out one value per row.
 * `group` lanes (a power of two up to blockDim.x) share a row: rows
 * blockIdx.x * (blockDim.x / group) + threadIdx.x / group, then a grid's
 * worth further on. With `vec` the row is read as Packs. */
template <typename T>
__global__ void logsumexp_backward_rows(T *grad_in, const T *grad_out, const T *in, const T *lse, int64_t len,
                                        int64_t rows, int group, bool vec)
{
    constexpr int W = Pack<T>::kWidth;
    const int64_t member = threadIdx.x % group;
    const int64_t per_block = blockDim.x / group;
    for (int64_t row = blockIdx.x * per_block + threadIdx.x / group; row < rows; row += gridDim.x * per_block) {
        const T shift = lse[row];
        const T g = grad_out[row];
        const T *x = in + row * len;
        T *dx = grad_in + row * len;
        if (vec) {
            /* Four Packs loaded before any is stored: dx may be x itself, so
             * the compiler could not move a later load above an earlier
             * store, and one load at a time in flight is too few. */
            constexpr int kBatch = 4;
            const int64_t packs = len / W;
            for (int64_t c = member; c < packs; c += kBatch * group) {
                Pack<T> p[kBatch];
                MT_UNROLL for (int u = 0; u < kBatch; ++u)
                    if (c + u * group < packs)
                        p[u] = reinterpret_cast<const Pack<T> *>(x)[c + u * group];
                MT_UNROLL for (int u = 0; u < kBatch; ++u) {
                    if (c + u * group >= packs)
                        break;
                    Pack<T> r;
                    MT_UNROLL for (int w = 0; w < W; ++w)
                        r.v[w] = g * mt_exp(p[u].v[w] - shift);
                    reinterpret_cast<Pack<T> *>(dx)[c + u * group] = r;
                }
            }
        } else {
            for (int64_t k = member; k < len; k += group)
                dx[k] = g * mt_exp(x[k] - shift);
        }
    }
}

/* Any layout: grad_out and lse broadcast to in's shape (size 1 along the
 * reduced dims), grad_in of in's shape; n elements. */
template <typename T>
__global__ void logsumexp_backward_strided(mt_tensor grad_in, mt_tensor grad_out, mt_tensor in, mt_tensor lse,
                                           int64_t n)
{
    T *dx = static_cast<T *>(grad_in.data);
    const T *g = static_cast<const T *>(grad_out.data);
    const T *x = static_cast<const T *>(in.data);
    const T *l = static_cast<const T *>(lse.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        int64_t index[MT_MAX_DIMS];
        int64_t row_index[MT_MAX_DIMS];
        to_index(i, in.shape, in.ndim, index);
        broadcast_index(index, in.ndim, lse.shape, lse.ndim, row_index);
        const T shift = l[lse.offset + index_to_position(row_index, lse.strides, lse.ndim)];
        broadcast_index(index, in.ndim, grad_out.shape, grad_out.ndim, row_index);
        const T gv = g[grad_out.offset + index_to_position(row_index, grad_out.strides, grad_out.ndim)];
        const T xv = x[in.offset + index_to_position(index, in.strides, in.ndim)];
        dx[grad_in.offset + index_to_position(index, grad_in.strides, grad_in.ndim)] = gv * mt_exp(xv - shift);
    }
}

/* Is t contiguous with in's shape but its last dim 1 (one value per row of
 * in's last dim)? */
static bool one_per_last_row(const mt_tensor &t, const mt_tensor &in)
{
    if (t.ndim != in.ndim || t.shape[in.ndim - 1] != 1 || !is_contiguous(t))
        return false;
    for (int d = 0; d + 1 < in.ndim; ++d)
        if (t.shape[d] != in.shape[d])
            return false;
    return true;
}

template <typename T>
static mt_status launch_logsumexp_backward(const mt_tensor &grad_in, const mt_tensor &grad_out, const mt_tensor &in,
                                           const mt_tensor &lse)
{
    const int64_t n = tensor_numel(in);
    const int64_t len = in.ndim > 0 ? in.shape[in.ndim - 1] : 1;
    if (in.ndim > 0 && len > 0 && is_contiguous(in) && is_contiguous(grad_in) && one_per_last_row(lse, in) &&
        one_per_last_row(grad_out, in)) {
        constexpr int64_t W = Pack<T>::kWidth;
        const T *x = static_cast<const T *>(in.data) + in.offset;
        T *dx = static_cast<T *>(grad_in.data) + grad_in.offset;
        const bool vec = len % W == 0 && aligned16(x) && aligned16(dx);
        /* Lanes per row: enough that each has a Pack (or an element) or
         * four, at most a block of 256; then enough blocks to fill the GPU
         * (8 blocks of 256 threads per SM), fewer when the rows are fewer. */
        const int64_t loads = vec ? len / W : len;
        int group = 1;
        while (group < kBlockSize && group * 4 < loads)
            group *= 2;
        const int64_t rows = n / len;
        const int64_t rows_per_block = kBlockSize / group;
        const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
        const int64_t resident = (int64_t)mt_sm_count() * 8;
        const unsigned int grid = (unsigned int)(blocks < resident ? blocks : resident);
        logsumexp_backward_rows<T><<<grid, kBlockSize, 0, mt_stream()>>>(
            dx, static_cast<const T *>(grad_out.data) + grad_out.offset, x,
            static_cast<const T *>(lse.data) + lse.offset, len, rows, group, vec);
    } else {
        logsumexp_backward_strided<T><<<grid_size(n, kBlockSize), kBlockSize, 0, mt_stream()>>>(grad_in, grad_out, in,
                                                                                               lse, n);
    }
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_logsumexp_backward(mt_tensor grad_in, mt_tensor grad_out, mt_tensor in, mt_tensor lse)
{
    const char *func = "mt_logsumexp_backward";
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "grad_in", &grad_in));
    const mt_tensor *inputs[] = {&grad_out, &in, &lse};
    const char *names[] = {"grad_out", "in", "lse"};
    for (int i = 0; i < 3; ++i) {
        MT_TRY(mt_check_tensor(func, names[i], inputs[i]));
        MT_TRY(mt_check_extent(func, names[i], inputs[i]));
    }
    MT_TRY(mt_check_extent(func, "grad_in", &grad_in));
    MT_TRY(mt_check_float(func, "in", &in));
    MT_TRY(mt_check_same_dtype(func, &in, "in", &grad_in, "grad_in"));
    MT_TRY(mt_check_same_dtype(func, &in, "in", &grad_out, "grad_out"));
    MT_TRY(mt_check_same_dtype(func, &in, "in", &lse, "lse"));
    MT_TRY(mt_check_same_shape(func, &grad_in, "grad_in", &in, "in"));
    /* grad_out and lse hold one value per reduced row: in's rank, size 1
     * along the reduced dims (keepdim), repeated along them here. */
    const mt_tensor *per_row[] = {&grad_out, &lse};
    const char *per_row_names[] = {"grad_out", "lse"};
    for (int i = 0; i < 2; ++i) {
        if (per_row[i]->ndim != in.ndim) {
            char got[96], want[96];
            return mt_fail(MT_ERR_SHAPE, func, "%s has shape %s; expected in's rank (in has shape %s), with the "
                           "reduced dims kept as 1", per_row_names[i], mt_shape_str(per_row[i], got, sizeof got),
                           mt_shape_str(&in, want, sizeof want));
        }
        MT_TRY(mt_check_broadcast(func, per_row[i], per_row_names[i], &in, "in"));
    }
    /* grad_in may be in itself (the same elements, read before written);
     * any other overlap with an input is refused. */
    for (int i = 0; i < 3; ++i)
        MT_TRY(mt_check_alias(func, &grad_in, inputs[i], names[i]));
    if (tensor_numel(in) == 0)
        return MT_OK;
    if (in.dtype == MT_FLOAT32)
        return launch_logsumexp_backward<float>(grad_in, grad_out, in, lse);
    return launch_logsumexp_backward<double>(grad_in, grad_out, in, lse);
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
