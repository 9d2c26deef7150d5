/*
 * optim_list.h: the optimizer's multi-tensor C API (src/optim_multi.cu),
 * plain C like minitensor.h, which it extends.
 */
#ifndef MT_OPTIM_LIST_H
#define MT_OPTIM_LIST_H

#include "minitensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Multi-tensor forms (src/optim_multi.cu, torch's foreach and fused
 * optimizers): one call for a list of count tensors (arrays of count
 * descriptors), a few launches in all. mt_adam_step_list is mt_adam_step on
 * every (params[i], grads[i], exp_avgs[i], exp_avg_sqs[i]); with steps (an
 * array of count one-element int64 tensors) the counts are advanced and read
 * on the device, as mt_adam_step_capturable, and step is not read.
 * mt_grad_norm_list writes the joint 2-norm of the gradients (all of them as
 * one vector; with inf_norm, the largest |g|) to norm, one float64 element,
 * summed in double in a fixed order; mt_grad_scale_list multiplies every
 * gradient by min(max_norm / (norm + 1e-6), 1), read from norm on the device
 * (torch's clip_grad_norm_: nothing read back). Each tensor is a contiguous
 * float tensor; the dtypes may differ between tensors. */
mt_status mt_adam_step_list(int64_t count, const mt_tensor *params, const mt_tensor *grads, const mt_tensor *exp_avgs,
                            const mt_tensor *exp_avg_sqs, const mt_tensor *steps, double lr, double beta1,
                            double beta2, double eps, double weight_decay, int64_t step, int decoupled);
mt_status mt_grad_norm_list(int64_t count, const mt_tensor *grads, mt_tensor norm, int inf_norm);
mt_status mt_grad_scale_list(int64_t count, const mt_tensor *grads, mt_tensor norm, double max_norm);

#ifdef __cplusplus
}
#endif

#endif /* MT_OPTIM_LIST_H */
