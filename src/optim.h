/*
 * optim.h: what the optimizers' two forms share: the per-parameter kernels
 * (optim.cu) and the multi-tensor ones (optim_multi.cu) update each element
 * with the same arithmetic and check their arguments with the same helpers.
 */
#ifndef MT_OPTIM_H
#define MT_OPTIM_H

#include "ops_common.h"

template <typename T>
struct AdamScalars {
    T lr, beta1, beta2, eps, weight_decay, step_size, inv_sqrt_bc2;
    bool decoupled;
};

/* step_size and inv_sqrt_bc2 of the count t (capturable: read on the device).
 * The bias corrections in double whatever T, as on the host: beta^t for large t. */
template <typename T>
MT_DEVICE void adam_corrections(AdamScalars<T> &s, int64_t t)
{
    s.step_size = T((double)s.lr / (1.0 - pow((double)s.beta1, (double)t)));
    s.inv_sqrt_bc2 = T(1.0 / sqrt(1.0 - pow((double)s.beta2, (double)t)));
}

/* Adam's (AdamW's) update of element i: read p, g, m and v once, write p, m, v. */
template <typename T>
MT_DEVICE void adam_element(T *p, const T *g, T *m, T *v, int64_t i, const AdamScalars<T> &s)
{
    T pi = p[i];
    T gi = g[i];
    if (s.decoupled)
        pi *= T(1) - s.lr * s.weight_decay;
    else
        gi += s.weight_decay * pi;
    const T mi = s.beta1 * m[i] + (T(1) - s.beta1) * gi;
    const T vi = s.beta2 * v[i] + (T(1) - s.beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - s.step_size * mi / (mt_sqrt(vi) * s.inv_sqrt_bc2 + s.eps);
}

/* The checks of optim.cu, for one parameter's operands (host). */
mt_status optim_check_param(const char *func, const mt_tensor *param);
mt_status optim_check_operand(const char *func, const char *name, const mt_tensor *t, const mt_tensor *param,
                              bool output);
mt_status optim_check_step(const char *func, const mt_tensor *step, const mt_tensor *param);
/* param, grad, exp_avg and exp_avg_sq of one Adam update: each as
 * optim_check_operand, and no two of the state and grad sharing a byte. */
mt_status optim_check_adam_operands(const char *func, const mt_tensor *param, const mt_tensor *grad,
                                    const mt_tensor *exp_avg, const mt_tensor *exp_avg_sq);
/* Adam's step_size and inv_sqrt_bc2 of the host's count step (from 1). */
mt_status optim_host_corrections(const char *func, int64_t step, double lr, double beta1, double beta2,
                                 double *step_size, double *inv_sqrt_bc2);
mt_status optim_check_adam_hyper(const char *func, double lr, double beta1, double beta2, double eps,
                                 double weight_decay);

#endif /* MT_OPTIM_H */
