/*
 * test_optim_list.c: the multi-tensor forms of src/optim_multi.cu
 * (mt_adam_step_list, mt_grad_norm_list, mt_grad_scale_list) on random
 * lists of tensors of mixed sizes and dtypes (empty, one element, lengths
 * off the block size and across the chunks one block handles, more tensors
 * than one launch holds), several steps in a row, against the formulas in
 * double: each tensor must come out as the per-parameter update
 * (mt_adam_step, test_optim.c) and torch's clip_grad_norm_ would leave it.
 *
 *   make build/tests/emu/test_optim_list && build/tests/emu/test_optim_list
 *   MT_TEST_SEED=42 build/tests/emu/test_optim_list     (replay a run)
 */
#include "test_util.h"

#define STEPS 2
#define MAX_LIST 48
#define CHUNK 32768 /* kListChunk of src/optim_multi.cu: lengths around it cross a block's chunk */

/* A random length (unless fixed > 0): empty, one element, small, or around one and two chunks. */
static int64_t random_length(int64_t fixed)
{
    if (fixed > 0)
        return fixed;
    static const int64_t around[] = {0, 1, 2, 255, 257, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 3};
    if (tt_rand_int(0, 2) == 0)
        return tt_rand_int(2, 600);
    return around[tt_rand_int(0, (int64_t)(sizeof around / sizeof around[0]) - 1)];
}

static int random_dtype(int mixed)
{
    return mixed && tt_rand_int(0, 1) ? MT_FLOAT64 : MT_FLOAT32;
}

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    int decoupled;
} adam_args;

/* count tensors of random lengths (mixed: float32 and float64 in one list);
 * capturable: each with its step count on the device. */
static void adam_list_case(int count, int mixed, adam_args a, int capturable, int64_t fixed)
{
    tt_tensor p[MAX_LIST], g[MAX_LIST], m[MAX_LIST], v[MAX_LIST];
    mt_tensor lp[MAX_LIST], lg[MAX_LIST], lm[MAX_LIST], lv[MAX_LIST], steps[MAX_LIST];
    const int64_t zero = 0;
    int64_t total = 0;
    for (int i = 0; i < count; ++i) {
        const int64_t n = random_length(fixed);
        const int dtype = random_dtype(mixed);
        p[i] = tt_new(dtype, 1, &n, TT_CONTIGUOUS);
        g[i] = tt_new(dtype, 1, &n, TT_CONTIGUOUS);
        m[i] = tt_new(dtype, 1, &n, TT_CONTIGUOUS);
        v[i] = tt_new(dtype, 1, &n, TT_CONTIGUOUS);
        tt_fill(&p[i], -2, 2, 0);
        tt_fill_value(&m[i], 0.0);
        tt_fill_value(&v[i], 0.0);
        lp[i] = p[i].t, lg[i] = g[i].t, lm[i] = m[i].t, lv[i] = v[i].t;
        steps[i] = tt_raw_1d(MT_INT64, 1, &zero);
        total += n;
    }
    tt_case("mt_adam_step_list%s: %d tensors (%lld elements%s), lr %g, betas (%g, %g), weight_decay %g, %s",
            capturable ? " (capturable)" : "", count, (long long)total, mixed ? ", float32 and float64" : "", a.lr,
            a.beta1, a.beta2, a.weight_decay, a.decoupled ? "AdamW" : "Adam");
    int ok = 1;
    for (int step = 1; step <= STEPS && ok; ++step) {
        tt_expect *want_p[MAX_LIST], *want_m[MAX_LIST], *want_v[MAX_LIST];
        for (int i = 0; i < count; ++i) { /* the reference of test_optim.c's adam_case, tensor by tensor */
            tt_fill(&g[i], -1, 1, 0);
            tt_download(&p[i], p[i].host);
            tt_download(&m[i], m[i].host);
            tt_download(&v[i], v[i].host);
            want_p[i] = tt_expect_alloc(&p[i]);
            want_m[i] = tt_expect_alloc(&m[i]);
            want_v[i] = tt_expect_alloc(&v[i]);
            for (int64_t j = 0; j < tt_numel(&p[i].t); ++j) {
                double pj = p[i].host[j], gj = g[i].host[j];
                if (a.decoupled)
                    pj *= 1.0 - a.lr * a.weight_decay;
                else
                    gj += a.weight_decay * pj;
                const double mj = a.beta1 * m[i].host[j] + (1 - a.beta1) * gj;
                const double vj = a.beta2 * v[i].host[j] + (1 - a.beta2) * gj * gj;
                const double bc1 = 1 - pow(a.beta1, step), bc2 = 1 - pow(a.beta2, step);
                const double denom = sqrt(vj) / sqrt(bc2) + a.eps;
                pj -= a.lr / bc1 * mj / denom;
                want_p[i][j] = (tt_expect){pj, fabs(pj) + a.lr / bc1 * (fabs(mj) / denom + 1.0), 8};
                want_m[i][j] = (tt_expect){mj, fabs(mj) + fabs(gj), 2};
                want_v[i][j] = (tt_expect){vj, fabs(vj) + gj * gj, 2};
            }
        }
        mt_status st = mt_adam_step_list(count, lp, lg, lm, lv, capturable ? steps : NULL, a.lr, a.beta1, a.beta2,
                                         a.eps, a.weight_decay, step, a.decoupled);
        ok = tt_expect_ok(st, "mt_adam_step_list");
        for (int i = 0; i < count; ++i) {
            if (ok)
                ok = tt_check_output(&p[i], want_p[i]) && tt_check_output(&m[i], want_m[i])
                     && tt_check_output(&v[i], want_v[i]);
            free(want_p[i]);
            free(want_m[i]);
            free(want_v[i]);
        }
    }
    for (int i = 0; i < count; ++i) {
        int64_t got = -1;
        if (ok && capturable && tt_raw_read(&steps[i], &got) && got != STEPS) {
            tt_fail("tensor %d: the device step count is %lld after %d steps", i, (long long)got, STEPS);
            ok = 0;
        }
        tt_raw_free(&steps[i]);
        tt_free(&p[i]);
        tt_free(&g[i]);
        tt_free(&m[i]);
        tt_free(&v[i]);
    }
}

/* The joint norm of count random gradients (with_nan: one element NaN), then
 * the scaling by min(max_norm / (norm + 1e-6), 1), read from the norm. */
static void clip_list_case(int count, int mixed, int inf_norm, double max_norm, int with_nan, int64_t fixed)
{
    tt_tensor g[MAX_LIST];
    mt_tensor lg[MAX_LIST];
    int64_t one = 1, total = 0;
    double sum = 0.0, largest = 0.0;
    int nan_placed = 0;
    for (int i = 0; i < count; ++i) {
        const int64_t n = random_length(fixed);
        g[i] = tt_new(random_dtype(mixed), 1, &n, TT_CONTIGUOUS);
        tt_fill(&g[i], -1, 1, 0);
        if (with_nan && !nan_placed && n > 0) {
            g[i].host[n / 2] = NAN;
            tt_upload(&g[i]);
            nan_placed = 1;
        }
        lg[i] = g[i].t;
        total += n;
        for (int64_t j = 0; j < n; ++j) {
            const double x = g[i].host[j];
            sum += x * x;
            largest = isnan(x) || isnan(largest) ? NAN : fmax(largest, fabs(x));
        }
    }
    tt_tensor norm = tt_new(MT_FLOAT64, 1, &one, TT_CONTIGUOUS);
    tt_case("mt_grad_norm_list and mt_grad_scale_list: %d gradients (%lld elements%s%s), %s norm, max_norm %g",
            count, (long long)total, mixed ? ", float32 and float64" : "", nan_placed ? ", one NaN" : "",
            inf_norm ? "inf" : "2-", max_norm);
    const double want = inf_norm ? largest : sqrt(sum);
    tt_expect want_norm = {want, want, inf_norm ? 1 : 2 * total + 1};
    int ok = tt_expect_ok(mt_grad_norm_list(count, lg, norm.t, inf_norm), "mt_grad_norm_list")
             && tt_check_output(&norm, &want_norm);
    if (ok)
        ok = tt_expect_ok(mt_grad_scale_list(count, lg, norm.t, max_norm), "mt_grad_scale_list");
    const double clip = max_norm / (want + 1e-6);
    const double factor = clip < 1.0 ? clip : 1.0; /* NaN when the norm is: every gradient NaN, as torch's */
    for (int i = 0; i < count; ++i) {
        tt_expect *scaled = tt_expect_alloc(&g[i]);
        for (int64_t j = 0; j < tt_numel(&g[i].t); ++j) {
            const double x = g[i].host[j] * (g[i].t.dtype == MT_FLOAT32 ? (double)(float)factor : factor);
            scaled[j] = (tt_expect){x, fabs(x), 2};
        }
        if (ok)
            ok = tt_check_output(&g[i], scaled);
        free(scaled);
        tt_free(&g[i]);
    }
    tt_free(&norm);
}

int main(void)
{
    tt_init("test_optim_list");
    TT_GROUP("adam lists") {
        adam_list_case(1, 0, (adam_args){1e-3, 0.9, 0.999, 1e-8, 0.0, 0}, 0, 0);
        adam_list_case(7, 1, (adam_args){1e-3, 0.9, 0.999, 1e-8, 0.0, 0}, 0, 0);
        adam_list_case(9, 1, (adam_args){0.01, 0.8, 0.9, 1e-6, 0.1, 0}, 0, 0);
        adam_list_case(9, 0, (adam_args){0.01, 0.8, 0.9, 1e-6, 0.1, 1}, 0, 0);
        /* More tensors than one launch's struct holds (36): a second launch. */
        adam_list_case(MAX_LIST, 1, (adam_args){0.01, 0.8, 0.9, 1e-6, 0.1, 1}, 0, 0);
    }
    TT_GROUP("adam lists, capturable") {
        adam_list_case(5, 1, (adam_args){1e-3, 0.9, 0.999, 1e-8, 0.0, 0}, 1, 0);
        adam_list_case(MAX_LIST, 0, (adam_args){0.01, 0.8, 0.9, 1e-6, 0.1, 1}, 1, 0);
    }
    TT_GROUP("an empty list") {
        int64_t one = 1;
        tt_tensor norm = tt_new(MT_FLOAT64, 1, &one, TT_CONTIGUOUS);
        tt_case("an empty list: nothing updated, the norm 0");
        tt_expect zero = {0.0, 0.0, 1};
        tt_expect_ok(mt_adam_step_list(0, NULL, NULL, NULL, NULL, NULL, 0.1, 0.9, 0.9, 1e-8, 0.0, 1, 0),
                     "mt_adam_step_list");
        if (tt_expect_ok(mt_grad_norm_list(0, NULL, norm.t, 0), "mt_grad_norm_list"))
            tt_check_output(&norm, &zero);
        tt_expect_ok(mt_grad_scale_list(0, NULL, norm.t, 1.0), "mt_grad_scale_list");
        tt_free(&norm);
    }
    TT_GROUP("clipping") {
        for (int inf_norm = 0; inf_norm < 2; ++inf_norm) {
            clip_list_case(1, 0, inf_norm, 0.5, 0, 0);
            clip_list_case(8, 1, inf_norm, 0.5, 0, 0);
            clip_list_case(8, 1, inf_norm, 1e6, 0, 0); /* below max_norm: the factor is 1, nothing changes */
            clip_list_case(MAX_LIST, 0, inf_norm, 1.0, 0, 0);
            clip_list_case(4, 1, inf_norm, 1.0, 1, 0);
        }
        /* 12 tensors of 27 chunks: more chunks (324) than one launch's 320 blocks, so that a
         * tensor is cut between two launches and the partials' slots run on across them (the
         * packing is the one Adam's lists go through). */
        clip_list_case(12, 0, 0, 1.0, 0, 27 * CHUNK - 5);
    }
    TT_GROUP("bad arguments") {
        int64_t n = 8, other = 9, one = 1;
        tt_tensor p[3], g[3], m[3], v[3];
        mt_tensor lp[3], lg[3], lm[3], lv[3];
        for (int i = 0; i < 3; ++i) {
            p[i] = tt_new(MT_FLOAT32, 1, &n, TT_CONTIGUOUS);
            g[i] = tt_new(MT_FLOAT32, 1, i == 2 ? &other : &n, TT_CONTIGUOUS); /* the third: another shape */
            m[i] = tt_new(MT_FLOAT32, 1, &n, TT_CONTIGUOUS);
            v[i] = tt_new(MT_FLOAT32, 1, &n, TT_CONTIGUOUS);
            tt_fill(&p[i], -1, 1, 0);
            tt_fill(&g[i], -1, 1, 0);
            lp[i] = p[i].t, lg[i] = g[i].t, lm[i] = m[i].t, lv[i] = v[i].t;
        }
        tt_tensor norm32 = tt_new(MT_FLOAT32, 1, &one, TT_CONTIGUOUS);
        tt_tensor norm = tt_new(MT_FLOAT64, 1, &one, TT_CONTIGUOUS);
        tt_case("a gradient of another shape, third in the list");
        if (tt_expect_error(mt_adam_step_list(3, lp, lg, lm, lv, NULL, 0.1, 0.9, 0.9, 1e-8, 0.0, 1, 0), MT_ERR_SHAPE,
                            "mt_adam_step_list", &p[0])
            && !strstr(mt_last_error(), "parameter 2 of the list"))
            tt_fail("the message does not name the list's item: \"%s\"", mt_last_error());
        tt_case("one tensor for both moving averages");
        tt_expect_error(mt_adam_step_list(2, lp, lg, lm, lm, NULL, 0.1, 0.9, 0.9, 1e-8, 0.0, 1, 0),
                        MT_ERR_INVALID_ARGUMENT, "mt_adam_step_list", &p[0]);
        tt_case("step 0");
        tt_expect_error(mt_adam_step_list(2, lp, lg, lm, lv, NULL, 0.1, 0.9, 0.9, 1e-8, 0.0, 0, 0),
                        MT_ERR_INVALID_ARGUMENT, "mt_adam_step_list", &p[0]);
        tt_case("beta1 of 1");
        tt_expect_error(mt_adam_step_list(2, lp, lg, lm, lv, NULL, 0.1, 1.0, 0.9, 1e-8, 0.0, 1, 0),
                        MT_ERR_INVALID_ARGUMENT, "mt_adam_step_list", &p[0]);
        tt_case("a negative count");
        tt_expect_error(mt_grad_norm_list(-1, lg, norm.t, 0), MT_ERR_INVALID_ARGUMENT, "mt_grad_norm_list", &norm);
        tt_case("a float32 norm");
        tt_expect_error(mt_grad_norm_list(2, lg, norm32.t, 0), MT_ERR_INVALID_ARGUMENT, "mt_grad_norm_list",
                        &norm32);
        tt_case("a negative max_norm");
        tt_expect_error(mt_grad_scale_list(2, lg, norm.t, -1.0), MT_ERR_INVALID_ARGUMENT, "mt_grad_scale_list",
                        &g[0]);
        tt_case("the norm inside a gradient");
        tt_expect_error(mt_grad_scale_list(1, &norm.t, norm.t, 1.0), MT_ERR_INVALID_ARGUMENT, "mt_grad_scale_list",
                        &norm);
        for (int i = 0; i < 3; ++i) {
            tt_free(&p[i]);
            tt_free(&g[i]);
            tt_free(&m[i]);
            tt_free(&v[i]);
        }
        tt_free(&norm32);
        tt_free(&norm);
    }
    return tt_summary();
}
