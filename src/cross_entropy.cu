/*
 * cross_entropy.cu: the cross-entropy of each row of logits against its
 * target class, forward and backward, each one kernel reading the logits once.
 *
 *   forward   lse_i  = log(sum_j exp(x_ij))            (online_lse.h; NaN where a
 *                                                     logit is +inf, as torch)
 *             loss_i = lse_i - x_i,t_i                 (t_i: row i's target class)
 *   backward  dx_ij  = g_i * (exp(x_ij - lse_i) - [j == t_i])
 *             with g_i the gradient of loss_i (one value broadcast for a mean
 *             or a sum, times `scale`: 1/N for the mean)
 *
 * The composite -gather(log_softmax(x), t) is five kernels forward (and the
 * mean) and ten backward, each a pass over the logits; the forward saves lse
 * (one number per row) so that the backward needs no reduction at all.
 * Targets are class indices, int64 or held in the logits' float dtype (as
 * gather takes them), checked to be whole numbers in [0, C) before any launch, unless the
 * caller says it has checked them (Python checks NumPy targets on the host,
 * and the backward's targets are the forward's): the device check waits for
 * its answer, which would stall the queue of launches once per step.
 */
#include <type_traits>

#include "ops_common.h"
#include "online_lse.h" /* after ops_common.h: block_reduce.h's stub uses task.h */

/* Target t as a class index, or -1 when it is not a whole number in
 * [0, classes). The targets were checked before the launch; a target out of
 * range all the same (memory another library changed since) then reads
 * nothing and never matches a class, and a float one is range-checked before
 * it is cast (casting 1e30 to int64 is undefined). */
template <typename TT>
MT_DEVICE int64_t target_class(TT t, int64_t classes)
{
    if constexpr (std::is_same<TT, int64_t>::value)
        return t >= 0 && t < classes ? t : -1;
    else
        return t >= TT(0) && t < TT(classes) && t == mt_floor(t) ? (int64_t)t : -1;
}

/* x (N, C) with any strides; targets, loss and lse (N,); targets of type TT
 * (int64_t, or T holding whole numbers). */
template <typename T, typename TT>
__global__ void cross_entropy_forward_rows(mt_tensor loss, mt_tensor lse_out, mt_tensor x, mt_tensor targets,
                                           int64_t rows, int64_t classes)
{
    __shared__ BlockScratch<T> scratch;
    const T *xd = static_cast<const T *>(x.data);
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t first = x.offset + row * x.strides[0];
        OnlineLse<T> lse;
        add_row(lse, xd + first, classes, x.strides[1]);
        /* A +inf logit makes the row's log_softmax NaN (inf - inf), and so
         * torch's loss and gradient: lse is then saved as NaN, which the
         * loss and the backward carry. (+inf is never the lse of finite
         * logits: it is max + log(sum) with sum <= C.) */
        T row_lse = block_logsumexp(scratch, lse);
        if (row_lse == mt_infinity<T>())
            row_lse = (T)NAN;
        if (threadIdx.x == 0) {
            const int64_t t = target_class(
                static_cast<const TT *>(targets.data)[targets.offset + row * targets.strides[0]], classes);
            /* An invalid target (see target_class) gives NaN. */
            const T picked = t >= 0 ? xd[first + t * x.strides[1]] : (T)NAN;
            static_cast<T *>(loss.data)[loss.offset + row * loss.strides[0]] = row_lse - picked;
            static_cast<T *>(lse_out.data)[lse_out.offset + row * lse_out.strides[0]] = row_lse;
        }
    }
}

/* dx (N, C), x (N, C), targets, lse and grad (N,): grad may be a broadcast
 * scalar (stride 0). One block per row (rows in a grid-stride loop), so a
 * row's lse, gradient and target are read once per thread and no thread
 * divides an ordinal into row and column; 16-byte Packs where both rows are
 * contiguous and aligned. */
template <typename T, typename TT>
__global__ void cross_entropy_backward_rows(mt_tensor dx, mt_tensor x, mt_tensor targets, mt_tensor lse,
                                            mt_tensor grad, int64_t rows, int64_t classes, T scale)
{
    constexpr int W = Pack<T>::kWidth;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const T *xr = static_cast<const T *>(x.data) + x.offset + row * x.strides[0];
        T *dr = static_cast<T *>(dx.data) + dx.offset + row * dx.strides[0];
        const T lv = static_cast<const T *>(lse.data)[lse.offset + row * lse.strides[0]];
        const T gv = static_cast<const T *>(grad.data)[grad.offset + row * grad.strides[0]] * scale;
        const int64_t t = target_class(
            static_cast<const TT *>(targets.data)[targets.offset + row * targets.strides[0]], classes);
        const bool vec = x.strides[1] == 1 && dx.strides[1] == 1 && classes % W == 0 &&
                         (uintptr_t)xr % 16 == 0 && (uintptr_t)dr % 16 == 0;
        if (vec) {
            for (int64_t c = threadIdx.x; c < classes / W; c += blockDim.x) {
                const Pack<T> in = reinterpret_cast<const Pack<T> *>(xr)[c];
                Pack<T> out;
                MT_UNROLL for (int w = 0; w < W; ++w)
                    out.v[w] = gv * (mt_exp(in.v[w] - lv) - (c * W + w == t ? T(1) : T(0)));
                reinterpret_cast<Pack<T> *>(dr)[c] = out;
            }
        } else {
            for (int64_t k = threadIdx.x; k < classes; k += blockDim.x)
                dr[k * dx.strides[1]] = gv * (mt_exp(xr[k * x.strides[1]] - lv) - (k == t ? T(1) : T(0)));
        }
    }
}

/* logits (N, C), float32 or float64; the (N,) arguments named in `names`,
 * each of logits' dtype, except that `targets` (one of them) may be int64. */
static mt_status check_rows(const char *func, const mt_tensor &x, const mt_tensor *vecs[], const char *names[],
                            int count, const mt_tensor *targets)
{
    MT_TRY(mt_check_float(func, "logits", &x));
    if (x.ndim != 2)
        return mt_fail(MT_ERR_SHAPE, func, "logits must be 2-D (N, C), got %d dims", x.ndim);
    for (int i = 0; i < count; ++i) {
        MT_TRY(mt_check_extent(func, names[i], vecs[i]));
        if (vecs[i] != targets || targets->dtype != MT_INT64)
            MT_TRY(mt_check_same_dtype(func, vecs[i], names[i], &x, "logits"));
        if (vecs[i]->ndim != 1 || vecs[i]->shape[0] != x.shape[0]) {
            char shape[96];
            return mt_fail(MT_ERR_SHAPE, func, "%s has shape %s; expected (%lld,), one value per row of logits",
                           names[i], mt_shape_str(vecs[i], shape, sizeof shape), (long long)x.shape[0]);
        }
    }
    return MT_OK;
}

/* Calls f(T{}, TT{}): T the logits' type (float or double, checked by
 * check_rows), TT the targets' (int64_t, or T). */
template <typename F>
static mt_status with_float_and_target(const mt_tensor &logits, const mt_tensor &targets, F f)
{
    const bool int_targets = targets.dtype == MT_INT64;
    if (logits.dtype == MT_FLOAT32)
        return int_targets ? f(float{}, int64_t{}) : f(float{}, float{});
    return int_targets ? f(double{}, int64_t{}) : f(double{}, double{});
}

mt_status mt_cross_entropy(mt_tensor loss, mt_tensor lse, mt_tensor logits, mt_tensor targets, int targets_checked)
{
    const char *func = "mt_cross_entropy";
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "loss", &loss));
    MT_TRY(mt_check_output(func, "lse", &lse));
    MT_TRY(mt_check_tensor(func, "logits", &logits));
    MT_TRY(mt_check_tensor(func, "targets", &targets));
    MT_TRY(mt_check_extent(func, "logits", &logits));
    const mt_tensor *vecs[] = {&loss, &lse, &targets};
    const char *names[] = {"loss", "lse", "targets"};
    MT_TRY(check_rows(func, logits, vecs, names, 3, &targets));
    MT_TRY(mt_check_alias(func, &loss, &logits, "logits"));
    MT_TRY(mt_check_alias(func, &lse, &logits, "logits"));
    MT_TRY(mt_check_alias(func, &loss, &targets, "targets"));
    MT_TRY(mt_check_alias(func, &lse, &targets, "targets"));
    MT_TRY(mt_check_alias(func, &lse, &loss, "loss"));
    const int64_t rows = logits.shape[0], classes = logits.shape[1];
    if (rows == 0)
        return MT_OK;
    /* The device check waits for its answer: skipped for targets the caller
     * has checked (on the host, or by the forward of the same targets). */
    if (!targets_checked)
        MT_TRY(mt_check_class_indices(func, &targets, classes));
    if (loss.data == lse.data && loss.offset == lse.offset)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "loss and lse are the same tensor; each needs its own");
    const unsigned int grid = grid_size(rows, 1);
    const int block = row_block_size(classes);
    return with_float_and_target(logits, targets, [&](auto tag, auto target_tag) {
        using T = decltype(tag);
        using TT = decltype(target_tag);
        cross_entropy_forward_rows<T, TT><<<grid, block, 0, mt_stream()>>>(loss, lse, logits, targets, rows, classes);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

mt_status mt_cross_entropy_backward(mt_tensor grad_logits, mt_tensor logits, mt_tensor targets, mt_tensor lse,
                                    mt_tensor grad, double scale, int targets_checked)
{
    const char *func = "mt_cross_entropy_backward";
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "grad_logits", &grad_logits));
    MT_TRY(mt_check_tensor(func, "logits", &logits));
    MT_TRY(mt_check_tensor(func, "targets", &targets));
    MT_TRY(mt_check_tensor(func, "lse", &lse));
    MT_TRY(mt_check_tensor(func, "grad", &grad));
    MT_TRY(mt_check_extent(func, "grad_logits", &grad_logits));
    MT_TRY(mt_check_extent(func, "logits", &logits));
    MT_TRY(mt_check_same_dtype(func, &grad_logits, "grad_logits", &logits, "logits"));
    MT_TRY(mt_check_same_shape(func, &grad_logits, "grad_logits", &logits, "logits"));
    const mt_tensor *vecs[] = {&targets, &lse, &grad};
    const char *names[] = {"targets", "lse", "grad"};
    MT_TRY(check_rows(func, logits, vecs, names, 3, &targets));
    MT_TRY(mt_check_alias(func, &grad_logits, &logits, "logits"));
    MT_TRY(mt_check_alias(func, &grad_logits, &targets, "targets"));
    MT_TRY(mt_check_alias(func, &grad_logits, &lse, "lse"));
    MT_TRY(mt_check_alias(func, &grad_logits, &grad, "grad"));
    if (!(scale == scale) || scale == INFINITY || scale == -INFINITY)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "scale must be a finite number, got %g", scale);
    const int64_t rows = logits.shape[0], classes = logits.shape[1];
    if (rows == 0 || classes == 0)
        return MT_OK;
    /* The device check waits for its answer: skipped for targets the caller
     * has checked (on the host, or by the forward of the same targets). */
    if (!targets_checked)
        MT_TRY(mt_check_class_indices(func, &targets, classes));
    const unsigned int grid = grid_size(rows, 1);
    const int block = row_block_size(classes);
    return with_float_and_target(logits, targets, [&](auto tag, auto target_tag) {
        using T = decltype(tag);
        using TT = decltype(target_tag);
        cross_entropy_backward_rows<T, TT><<<grid, block, 0, mt_stream()>>>(grad_logits, logits, targets, lse, grad, rows, classes, (T)scale);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}
