/*
 * optim.cu: the optimizers' updates, one kernel per parameter, in place.
 *
 * minitensor/optim.py writes each update as a chain of ops too (the course's
 * task): Adam's is ten kernels and nine temporary tensors per parameter, each
 * a pass over the whole parameter. Here each element's update is one thread's
 * arithmetic: read p, g and the state once, write p and the state once.
 *
 *   sgd_step   g' = g + weight_decay * p
 *              b  = g' (first step) or momentum * b + g'   (when momentum != 0)
 *              p  = p - lr * b                              (b = g' without momentum)
 *   adam_step  g' = g + weight_decay * p          (Adam: L2 in the gradient)
 *              p  = p * (1 - lr * weight_decay)   (AdamW: decoupled instead)
 *              m  = beta1 * m + (1 - beta1) * g'
 *              v  = beta2 * v + (1 - beta2) * g' * g'
 *              p  = p - step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps)
 *   with step_size = lr / (1 - beta1^t) and inv_sqrt_bc2 = 1 / sqrt(1 - beta2^t),
 *   computed once on the host, as torch does.
 *
 * Every tensor is contiguous (the Python layer falls back to the chain of
 * ops otherwise), so element i of each is at first + i: a grid-stride loop.
 *
 * Capturable (torch's capturable=True): the step count t lives on the device,
 * in a one-element int64 tensor, so that a CUDA graph that captured a step
 * advances it at every replay (a count passed from the host would be frozen
 * at its captured value). count_step adds one to it first, in a launch of its
 * own: every block of the update must read the same count, and a kernel has
 * no barrier across its blocks. Then each thread of the update reads t and
 * computes the bias corrections itself, once, before its loop.
 */
#include "optim.h"

/* One thread: the step count of a capturable update, advanced on the device. */
__global__ void count_step(int64_t *step)
{
    *step += 1;
}

/* step: the device count, already advanced (capturable), or null (first from the host). */
template <typename T>
__global__ void sgd_step(T *p, const T *g, T *buf, int64_t n, T lr, T momentum, T weight_decay, bool first,
                         const int64_t *step)
{
    if (step)
        first = *step == 1;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const T pi = p[i];
        T d = g[i] + weight_decay * pi;
        if (buf) {
            d = first ? d : momentum * buf[i] + d;
            buf[i] = d;
        }
        p[i] = pi - lr * d;
    }
}

/* step: the device count, already advanced (capturable), or null (the host
 * computed step_size and inv_sqrt_bc2). */
template <typename T>
__global__ void adam_step(T *p, const T *g, T *m, T *v, int64_t n, AdamScalars<T> s, const int64_t *step)
{
    if (step)
        adam_corrections(s, *step);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        adam_element(p, g, m, v, i, s);
}

template <typename T>
static T *first_of(const mt_tensor &t)
{
    return t.data ? static_cast<T *>(t.data) + t.offset : nullptr;
}

/* Every argument of an update: a contiguous float tensor of param's shape and
 * dtype, sharing no byte with param unless it is exactly param (an element is
 * read and written by one thread only). */
mt_status optim_check_operand(const char *func, const char *name, const mt_tensor *t, const mt_tensor *param,
                              bool output)
{
    MT_TRY(output ? mt_check_output(func, name, t) : mt_check_tensor(func, name, t));
    MT_TRY(mt_check_extent(func, name, t));
    MT_TRY(mt_check_same_dtype(func, t, name, param, "param"));
    MT_TRY(mt_check_same_shape(func, t, name, param, "param"));
    if (!is_contiguous(*t) && tensor_numel(*t) > 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s is not contiguous (the fused update takes contiguous "
                       "tensors; use the optimizer's fused=False for others)", name);
    if (t != param)
        MT_TRY(mt_check_alias(func, t, param, "param"));
    return MT_OK;
}

mt_status optim_check_param(const char *func, const mt_tensor *param)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_tensor(func, "param", param));
    MT_TRY(mt_check_float(func, "param", param));
    return optim_check_operand(func, "param", param, param, true);
}

static mt_status check_hyper(const char *func, const char *name, double value, double low, double high)
{
    if (!(value >= low && value <= high))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s must be in [%g, %g], got %g", name, low, high, value);
    return MT_OK;
}

/* The step count of a capturable update: one int64 element, in memory the
 * library knows, sharing none with param. */
mt_status optim_check_step(const char *func, const mt_tensor *step, const mt_tensor *param)
{
    MT_TRY(mt_check_output(func, "step", step));
    MT_TRY(mt_check_extent(func, "step", step));
    if (step->dtype != MT_INT64 || tensor_numel(*step) != 1)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "step must be one int64 element (the step count), got "
                       "%lld elements of %s", (long long)tensor_numel(*step), dtype_name(step->dtype));
    return mt_check_alias(func, step, param, "param");
}

mt_status optim_check_adam_operands(const char *func, const mt_tensor *param, const mt_tensor *grad,
                                    const mt_tensor *exp_avg, const mt_tensor *exp_avg_sq)
{
    MT_TRY(optim_check_param(func, param));
    MT_TRY(optim_check_operand(func, "grad", grad, param, false));
    MT_TRY(optim_check_operand(func, "exp_avg", exp_avg, param, true));
    MT_TRY(optim_check_operand(func, "exp_avg_sq", exp_avg_sq, param, true));
    MT_TRY(mt_check_alias(func, exp_avg, grad, "grad"));
    MT_TRY(mt_check_alias(func, exp_avg_sq, grad, "grad"));
    MT_TRY(mt_check_alias(func, exp_avg_sq, exp_avg, "exp_avg"));
    if (tensor_numel(*param) > 0 && exp_avg->data == exp_avg_sq->data && exp_avg->offset == exp_avg_sq->offset)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "exp_avg and exp_avg_sq are the same tensor");
    return MT_OK;
}

mt_status optim_check_adam_hyper(const char *func, double lr, double beta1, double beta2, double eps,
                                 double weight_decay)
{
    MT_TRY(check_hyper(func, "lr", lr, 0.0, INFINITY));
    MT_TRY(check_hyper(func, "beta1", beta1, 0.0, 0.999999999));
    MT_TRY(check_hyper(func, "beta2", beta2, 0.0, 0.999999999));
    MT_TRY(check_hyper(func, "eps", eps, 0.0, INFINITY));
    MT_TRY(check_hyper(func, "weight_decay", weight_decay, 0.0, INFINITY));
    return MT_OK;
}

mt_status optim_host_corrections(const char *func, int64_t step, double lr, double beta1, double beta2,
                                 double *step_size, double *inv_sqrt_bc2)
{
    if (step < 1)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "step counts from 1, got %lld", (long long)step);
    /* The bias corrections in double whatever the dtype: beta^t for large t. */
    *step_size = lr / (1.0 - pow(beta1, (double)step));
    *inv_sqrt_bc2 = 1.0 / sqrt(1.0 - pow(beta2, (double)step));
    return MT_OK;
}

static int64_t *step_of(const mt_tensor *step)
{
    return step ? static_cast<int64_t *>(step->data) + step->offset : nullptr;
}

/* SGD's update; step null: the count is the host's (first_step). */
static mt_status sgd(const char *func, mt_tensor &param, mt_tensor &grad, mt_tensor &momentum_buffer,
                     const mt_tensor *step, double lr, double momentum, double weight_decay, int first_step)
{
    MT_TRY(optim_check_param(func, &param));
    MT_TRY(optim_check_operand(func, "grad", &grad, &param, false));
    MT_TRY(check_hyper(func, "lr", lr, 0.0, INFINITY));
    MT_TRY(check_hyper(func, "momentum", momentum, 0.0, INFINITY));
    MT_TRY(check_hyper(func, "weight_decay", weight_decay, 0.0, INFINITY));
    if (momentum != 0.0) {
        MT_TRY(optim_check_operand(func, "momentum_buffer", &momentum_buffer, &param, true));
        MT_TRY(mt_check_alias(func, &momentum_buffer, &grad, "grad"));
    }
    if (step) {
        MT_TRY(optim_check_step(func, step, &param));
        MT_TRY(mt_check_alias(func, step, &grad, "grad"));
        if (momentum != 0.0)
            MT_TRY(mt_check_alias(func, step, &momentum_buffer, "momentum_buffer"));
        /* Counted even for an empty parameter: the count is the optimizer's steps. */
        count_step<<<1, 1, 0, mt_stream()>>>(step_of(step));
        CUDA_CHECK(mt_launch_status());
    }
    const int64_t n = tensor_numel(param);
    if (n == 0)
        return MT_OK;
    const unsigned int grid = grid_size(n, kBlockSize);
    if (param.dtype == MT_FLOAT32)
        sgd_step<float><<<grid, kBlockSize, 0, mt_stream()>>>(first_of<float>(param), first_of<float>(grad),
                                              momentum != 0.0 ? first_of<float>(momentum_buffer) : nullptr, n,
                                              (float)lr, (float)momentum, (float)weight_decay, first_step != 0,
                                              step_of(step));
    else
        sgd_step<double><<<grid, kBlockSize, 0, mt_stream()>>>(first_of<double>(param), first_of<double>(grad),
                                               momentum != 0.0 ? first_of<double>(momentum_buffer) : nullptr, n,
                                               lr, momentum, weight_decay, first_step != 0, step_of(step));
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_sgd_step(mt_tensor param, mt_tensor grad, mt_tensor momentum_buffer, double lr, double momentum,
                      double weight_decay, int first_step)
{
    return sgd("mt_sgd_step", param, grad, momentum_buffer, nullptr, lr, momentum, weight_decay, first_step);
}

mt_status mt_sgd_step_capturable(mt_tensor param, mt_tensor grad, mt_tensor momentum_buffer, mt_tensor step,
                                 double lr, double momentum, double weight_decay)
{
    return sgd("mt_sgd_step_capturable", param, grad, momentum_buffer, &step, lr, momentum, weight_decay, 0);
}

template <typename T>
static mt_status launch_adam(const mt_tensor &param, const mt_tensor &grad, const mt_tensor &m, const mt_tensor &v,
                             int64_t n, const AdamScalars<T> &s, const int64_t *step)
{
    adam_step<T><<<grid_size(n, kBlockSize), kBlockSize, 0, mt_stream()>>>(first_of<T>(param), first_of<T>(grad),
                                                                           first_of<T>(m), first_of<T>(v), n, s, step);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* Adam's update; step null: the count is the host's (host_step). */
static mt_status adam(const char *func, mt_tensor &param, mt_tensor &grad, mt_tensor &exp_avg, mt_tensor &exp_avg_sq,
                      const mt_tensor *step, double lr, double beta1, double beta2, double eps, double weight_decay,
                      int64_t host_step, int decoupled)
{
    MT_TRY(optim_check_adam_operands(func, &param, &grad, &exp_avg, &exp_avg_sq));
    MT_TRY(optim_check_adam_hyper(func, lr, beta1, beta2, eps, weight_decay));
    double step_size = 0.0, inv_sqrt_bc2 = 0.0;
    if (step) {
        MT_TRY(optim_check_step(func, step, &param));
        MT_TRY(mt_check_alias(func, step, &grad, "grad"));
        MT_TRY(mt_check_alias(func, step, &exp_avg, "exp_avg"));
        MT_TRY(mt_check_alias(func, step, &exp_avg_sq, "exp_avg_sq"));
        /* Counted even for an empty parameter: the count is the optimizer's steps. */
        count_step<<<1, 1, 0, mt_stream()>>>(step_of(step));
        CUDA_CHECK(mt_launch_status());
    } else {
        MT_TRY(optim_host_corrections(func, host_step, lr, beta1, beta2, &step_size, &inv_sqrt_bc2));
    }
    const int64_t n = tensor_numel(param);
    if (n == 0)
        return MT_OK;
    if (param.dtype == MT_FLOAT32) {
        AdamScalars<float> s{(float)lr, (float)beta1, (float)beta2, (float)eps, (float)weight_decay,
                             (float)step_size, (float)inv_sqrt_bc2, decoupled != 0};
        return launch_adam(param, grad, exp_avg, exp_avg_sq, n, s, step_of(step));
    }
    AdamScalars<double> s{lr, beta1, beta2, eps, weight_decay, step_size, inv_sqrt_bc2, decoupled != 0};
    return launch_adam(param, grad, exp_avg, exp_avg_sq, n, s, step_of(step));
}

mt_status mt_adam_step(mt_tensor param, mt_tensor grad, mt_tensor exp_avg, mt_tensor exp_avg_sq, double lr,
                       double beta1, double beta2, double eps, double weight_decay, int64_t step, int decoupled)
{
    return adam("mt_adam_step", param, grad, exp_avg, exp_avg_sq, nullptr, lr, beta1, beta2, eps, weight_decay, step,
                decoupled);
}

mt_status mt_adam_step_capturable(mt_tensor param, mt_tensor grad, mt_tensor exp_avg, mt_tensor exp_avg_sq,
                                  mt_tensor step, double lr, double beta1, double beta2, double eps,
                                  double weight_decay, int decoupled)
{
    return adam("mt_adam_step_capturable", param, grad, exp_avg, exp_avg_sq, &step, lr, beta1, beta2, eps,
                weight_decay, 0, decoupled);
}
