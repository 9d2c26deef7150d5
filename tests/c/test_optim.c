/*
 * test_optim.c: mt_sgd_step and mt_adam_step, and their capturable forms
 * (the step count on the device), several steps in a row, on
 * parameters of random length (empty, one element, lengths off the block
 * size), float32 and float64, against the formulas of torch.optim in double.
 *
 *   make build/tests/emu/test_optim && build/tests/emu/test_optim
 *   MT_TEST_SEED=42 build/tests/emu/test_optim     (replay a run)
 */
#include "test_util.h"

#define STEPS 3

typedef struct {
    double lr, momentum, weight_decay;
} sgd_args;

/* capturable: the update with the step count on the device
 * (mt_*_step_capturable), a one-element int64 tensor from 0, which must read
 * STEPS at the end. */
static void check_count(mt_tensor *count, int64_t want)
{
    int64_t got = -1;
    if (tt_raw_read(count, &got) && got != want)
        tt_fail("the device step count is %lld after %lld steps", (long long)got, (long long)want);
    tt_raw_free(count);
}

static void sgd_case(int dtype, int64_t n, sgd_args a, int capturable)
{
    const int64_t zero = 0;
    mt_tensor count = tt_raw_1d(MT_INT64, 1, &zero);
    tt_tensor p = tt_new(dtype, 1, &n, TT_CONTIGUOUS);
    tt_tensor g = tt_new(dtype, 1, &n, TT_CONTIGUOUS);
    tt_tensor buf = tt_new(dtype, 1, &n, TT_CONTIGUOUS);
    tt_fill(&p, -2, 2, 0);
    tt_case("mt_sgd_step%s n %lld, lr %g, momentum %g, weight_decay %g", capturable ? "_capturable" : "",
            (long long)n, a.lr, a.momentum, a.weight_decay);
    /* The reference, in double: p and the buffer after each step. */
    double *rp = malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    double *rb = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    for (int64_t i = 0; i < n; ++i)
        rp[i] = p.host[i];
    tt_expect *expect = tt_expect_alloc(&p);
    for (int step = 0; step < STEPS; ++step) {
        tt_fill(&g, -1, 1, 0);
        for (int64_t i = 0; i < n; ++i) {
            double d = g.host[i] + a.weight_decay * rp[i];
            if (a.momentum != 0.0) {
                d = step == 0 ? d : a.momentum * rb[i] + d;
                rb[i] = d;
            }
            rp[i] -= a.lr * d;
            expect[i] = (tt_expect){rp[i], fabs(rp[i]) + 1.0, 4 * (step + 1)};
        }
        mt_status st = capturable
                           ? mt_sgd_step_capturable(p.t, g.t, buf.t, count, a.lr, a.momentum, a.weight_decay)
                           : mt_sgd_step(p.t, g.t, buf.t, a.lr, a.momentum, a.weight_decay, step == 0);
        if (!tt_expect_ok(st, "mt_sgd_step"))
            break;
        if (!tt_check_output(&p, expect))
            break;
        tt_download(&p, p.host); /* the next step starts from what the library computed */
        for (int64_t i = 0; i < n; ++i)
            rp[i] = p.host[i];
    }
    if (capturable)
        check_count(&count, STEPS);
    else
        tt_raw_free(&count);
    free(rp);
    free(rb);
    free(expect);
    tt_free(&p);
    tt_free(&g);
    tt_free(&buf);
}

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    int decoupled;
} adam_args;

static void adam_case(int dtype, int64_t n, adam_args a, int capturable)
{
    const int64_t zero = 0;
    mt_tensor count = tt_raw_1d(MT_INT64, 1, &zero);
    tt_tensor p = tt_new(dtype, 1, &n, TT_CONTIGUOUS);
    tt_tensor g = tt_new(dtype, 1, &n, TT_CONTIGUOUS);
    tt_tensor m = tt_new(dtype, 1, &n, TT_CONTIGUOUS);
    tt_tensor v = tt_new(dtype, 1, &n, TT_CONTIGUOUS);
    tt_fill(&p, -2, 2, 0);
    tt_fill_value(&m, 0.0);
    tt_fill_value(&v, 0.0);
    tt_case("mt_adam_step%s n %lld, lr %g, betas (%g, %g), weight_decay %g, %s", capturable ? "_capturable" : "",
            (long long)n, a.lr, a.beta1, a.beta2, a.weight_decay, a.decoupled ? "AdamW" : "Adam");
    tt_expect *expect = tt_expect_alloc(&p);
    tt_expect *expect_m = tt_expect_alloc(&m);
    tt_expect *expect_v = tt_expect_alloc(&v);
    for (int step = 1; step <= STEPS; ++step) {
        tt_fill(&g, -1, 1, 0);
        tt_download(&m, m.host);
        tt_download(&v, v.host);
        for (int64_t i = 0; i < n; ++i) {
            double pi = p.host[i], gi = g.host[i];
            if (a.decoupled)
                pi *= 1.0 - a.lr * a.weight_decay;
            else
                gi += a.weight_decay * pi;
            const double mi = a.beta1 * m.host[i] + (1 - a.beta1) * gi;
            const double vi = a.beta2 * v.host[i] + (1 - a.beta2) * gi * gi;
            const double bc1 = 1 - pow(a.beta1, step), bc2 = 1 - pow(a.beta2, step);
            const double denom = sqrt(vi) / sqrt(bc2) + a.eps;
            pi -= a.lr / bc1 * mi / denom;
            /* m / denom is at most about 1/sqrt(1 - beta2): the step's size is lr's. */
            expect[i] = (tt_expect){pi, fabs(pi) + a.lr / bc1 * (fabs(mi) / denom + 1.0), 8};
            expect_m[i] = (tt_expect){mi, fabs(mi) + fabs(gi), 2};
            expect_v[i] = (tt_expect){vi, fabs(vi) + gi * gi, 2};
        }
        mt_status st = capturable ? mt_adam_step_capturable(p.t, g.t, m.t, v.t, count, a.lr, a.beta1, a.beta2, a.eps,
                                                            a.weight_decay, a.decoupled)
                                  : mt_adam_step(p.t, g.t, m.t, v.t, a.lr, a.beta1, a.beta2, a.eps, a.weight_decay,
                                                 step, a.decoupled);
        if (!tt_expect_ok(st, "mt_adam_step"))
            break;
        if (!tt_check_output(&p, expect) || !tt_check_output(&m, expect_m) || !tt_check_output(&v, expect_v))
            break;
        tt_download(&p, p.host);
    }
    if (capturable)
        check_count(&count, STEPS);
    else
        tt_raw_free(&count);
    free(expect);
    free(expect_m);
    free(expect_v);
    tt_free(&p);
    tt_free(&g);
    tt_free(&m);
    tt_free(&v);
}

int main(void)
{
    tt_init("test_optim");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    static const int64_t lengths[] = {0, 1, 255, 257, 4099};
    for (int t = 0; t < 2; ++t) {
        const int dtype = dtypes[t];
        for (int capturable = 0; capturable < 2; ++capturable) {
            TT_GROUP("sgd %s%s", tt_dtype_name(dtype), capturable ? " capturable" : "") {
                for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; ++l) {
                    sgd_case(dtype, lengths[l], (sgd_args){0.1, 0.0, 0.0}, capturable);
                    sgd_case(dtype, lengths[l], (sgd_args){0.05, 0.9, 0.01}, capturable);
                }
                sgd_case(dtype, tt_rand_int(1, 3000), (sgd_args){0.01, 0.5, 0.0}, capturable);
            }
            TT_GROUP("adam %s%s", tt_dtype_name(dtype), capturable ? " capturable" : "") {
                for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; ++l) {
                    adam_case(dtype, lengths[l], (adam_args){1e-3, 0.9, 0.999, 1e-8, 0.0, 0}, capturable);
                    adam_case(dtype, lengths[l], (adam_args){0.01, 0.8, 0.9, 1e-6, 0.1, 0}, capturable);
                    adam_case(dtype, lengths[l], (adam_args){0.01, 0.8, 0.9, 1e-6, 0.1, 1}, capturable);
                }
            }
        }
    }
    TT_GROUP("bad arguments") {
        int64_t n = 8, other = 9;
        tt_tensor p = tt_new(MT_FLOAT32, 1, &n, TT_CONTIGUOUS);
        tt_tensor g = tt_new(MT_FLOAT32, 1, &n, TT_CONTIGUOUS);
        tt_tensor m = tt_new(MT_FLOAT32, 1, &n, TT_CONTIGUOUS);
        tt_tensor v = tt_new(MT_FLOAT32, 1, &n, TT_CONTIGUOUS);
        tt_tensor wrong = tt_new(MT_FLOAT32, 1, &other, TT_CONTIGUOUS);
        tt_tensor d64 = tt_new(MT_FLOAT64, 1, &n, TT_CONTIGUOUS);
        tt_fill(&p, -1, 1, 0);
        tt_case("a gradient of another shape");
        tt_expect_error(mt_sgd_step(p.t, wrong.t, m.t, 0.1, 0.0, 0.0, 1), MT_ERR_SHAPE, "mt_sgd_step", &p);
        tt_case("a gradient of another dtype");
        tt_expect_error(mt_sgd_step(p.t, d64.t, m.t, 0.1, 0.0, 0.0, 1), MT_ERR_DTYPE, "mt_sgd_step", &p);
        tt_case("a negative learning rate");
        tt_expect_error(mt_sgd_step(p.t, g.t, m.t, -0.1, 0.0, 0.0, 1), MT_ERR_INVALID_ARGUMENT, "mt_sgd_step", &p);
        tt_case("a moving average of another shape");
        tt_expect_error(mt_adam_step(p.t, g.t, m.t, wrong.t, 0.1, 0.9, 0.9, 1e-8, 0.0, 1, 0), MT_ERR_SHAPE,
                        "mt_adam_step", &p);
        tt_case("beta1 of 1");
        tt_expect_error(mt_adam_step(p.t, g.t, m.t, v.t, 0.1, 1.0, 0.9, 1e-8, 0.0, 1, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_adam_step", &p);
        tt_case("step 0");
        tt_expect_error(mt_adam_step(p.t, g.t, m.t, v.t, 0.1, 0.9, 0.9, 1e-8, 0.0, 0, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_adam_step", &p);
        tt_case("one tensor for both moving averages");
        tt_expect_error(mt_adam_step(p.t, g.t, m.t, m.t, 0.1, 0.9, 0.9, 1e-8, 0.0, 1, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_adam_step", &p);
        tt_case("a step count of two elements");
        const int64_t zeros[2] = {0, 0};
        mt_tensor two = tt_raw_1d(MT_INT64, 2, zeros);
        tt_expect_error(mt_adam_step_capturable(p.t, g.t, m.t, v.t, two, 0.1, 0.9, 0.9, 1e-8, 0.0, 0),
                        MT_ERR_INVALID_ARGUMENT, "mt_adam_step_capturable", &p);
        tt_case("a step count of float64");
        tt_expect_error(mt_sgd_step_capturable(p.t, g.t, m.t, d64.t, 0.1, 0.0, 0.0), MT_ERR_INVALID_ARGUMENT,
                        "mt_sgd_step_capturable", &p);
        tt_raw_free(&two);
        tt_free(&p);
        tt_free(&g);
        tt_free(&m);
        tt_free(&v);
        tt_free(&wrong);
        tt_free(&d64);
    }
    return tt_summary();
}
