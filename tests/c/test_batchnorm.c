/*
 * test_batchnorm.c: mt_batch_norm and mt_batch_norm_backward (batch
 * normalization in training mode, src/batchnorm.cu) on contiguous (N, C, S)
 * tensors, float32 and float64, with and without weight, bias and running
 * statistics.
 *
 * The shapes cover: many samples (each channel's planes split over several
 * blocks), planes of 1 (BatchNorm1d's (N, C)), 7, 16 (whole Packs), 64 and
 * 1025 values (the threads given to one plane change with S), one channel
 * and many. Inputs around 1000 with a spread of 1 test that the variance is
 * not E[x^2] - E[x]^2 (which cancels in float32 there).
 *
 *   make build/tests/emu/test_batchnorm && build/tests/emu/test_batchnorm
 *   MT_TEST_SEED=42 build/tests/emu/test_batchnorm     (replay a run)
 */
#include "test_util.h"

#include "batchnorm.h"

/* The reference statistics of channel c of x (n, channels, s), in double:
 * the mean, 1 / sqrt(biased variance + eps) and the unbiased variance. */
static void channel_stats(const tt_tensor *x, int64_t n, int64_t channels, int64_t s, int64_t c, double eps,
                          double *mean, double *rstd, double *unbiased)
{
    const int64_t count = n * s;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < s; ++k)
            sum += x->host[(i * channels + c) * s + k];
    const double m = sum / (double)count;
    double v = 0.0;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < s; ++k) {
            const double d = x->host[(i * channels + c) * s + k] - m;
            v += d * d;
        }
    *mean = m;
    *rstd = 1.0 / sqrt(v / (double)count + eps);
    *unbiased = v / (double)(count - 1);
}

static double param(const tt_tensor *p, int64_t k, double absent)
{
    return p ? p->host[p->t.offset + k] : absent;
}

static void forward_case(int dtype, int64_t n, int64_t channels, int64_t s, int flags, double center)
{
    const double eps = 1e-5, momentum = 0.25;
    int64_t shape[] = {n, channels, s};
    tt_tensor in = tt_new(dtype, 3, shape, TT_CONTIGUOUS);
    tt_tensor out = tt_new(dtype, 3, shape, TT_CONTIGUOUS);
    tt_tensor mean = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_tensor rstd = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_tensor w = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_tensor b = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_tensor rm = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_tensor rv = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_fill(&in, center - 1, center + 1, 0);
    tt_fill(&w, -2, 2, 0);
    tt_fill(&b, -1, 1, 0);
    tt_fill(&rm, -1, 1, 0);
    tt_fill(&rv, 0.5, 2, 0);
    tt_case("mt_batch_norm (%lld, %lld, %lld), flags %d, inputs %g +- 1", (long long)n, (long long)channels,
            (long long)s, flags, center);

    const tt_tensor *pw = flags & MT_BATCH_NORM_WEIGHT ? &w : NULL;
    const tt_tensor *pb = flags & MT_BATCH_NORM_BIAS ? &b : NULL;
    const int64_t count = n * s;
    tt_expect *e_out = tt_expect_alloc(&out);
    tt_expect *e_mean = tt_expect_alloc(&mean);
    tt_expect *e_rstd = tt_expect_alloc(&rstd);
    tt_expect *e_rm = tt_expect_alloc(&rm);
    tt_expect *e_rv = tt_expect_alloc(&rv);
    for (int64_t c = 0; c < channels; ++c) {
        double m, r, unbiased;
        channel_stats(&in, n, channels, s, c, eps, &m, &r, &unbiased);
        e_mean[c] = (tt_expect){m, fabs(m) + 1.0, count};
        e_rstd[c] = (tt_expect){r, r * (fabs(center) + 1.0), count};
        /* torch's update: the unbiased variance moves the running one */
        const double new_rm = (1 - momentum) * rm.host[c] + momentum * m;
        const double new_rv = (1 - momentum) * rv.host[c] + momentum * unbiased;
        e_rm[c] = (tt_expect){new_rm, fabs(new_rm) + fabs(m) + 1.0, count};
        e_rv[c] = (tt_expect){new_rv, new_rv * (fabs(center) + 1.0), count};
        for (int64_t i = 0; i < n; ++i)
            for (int64_t k = 0; k < s; ++k) {
                const int64_t j = (i * channels + c) * s + k;
                const double ref = (in.host[j] - m) * r * param(pw, c, 1.0) + param(pb, c, 0.0);
                /* xhat inherits the relative error of x - mean: |center| / 1 roundoffs */
                e_out[j] = (tt_expect){ref, (fabs(center) + 1.0) * fabs(param(pw, c, 1.0)) + fabs(ref), count};
            }
    }
    mt_status st = mt_batch_norm(out.t, mean.t, rstd.t, in.t, w.t, b.t, rm.t, rv.t, flags, momentum, eps);
    if (tt_expect_ok(st, "mt_batch_norm")) {
        tt_check_output(&out, e_out);
        tt_check_output(&mean, e_mean);
        tt_check_output(&rstd, e_rstd);
        if (flags & MT_BATCH_NORM_RUNNING) {
            tt_check_output(&rm, e_rm);
            tt_check_output(&rv, e_rv);
        } else {
            tt_expect_unchanged(&rm, "running_mean (not asked)");
            tt_expect_unchanged(&rv, "running_var (not asked)");
        }
        tt_expect_unchanged(&in, "in");
    }
    free(e_out);
    free(e_mean);
    free(e_rstd);
    free(e_rm);
    free(e_rv);
    tt_tensor *all[] = {&in, &out, &mean, &rstd, &w, &b, &rm, &rv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        tt_free(all[i]);
}

static void backward_case(int dtype, int64_t n, int64_t channels, int64_t s, int flags, int want)
{
    const double eps = 1e-5;
    int64_t shape[] = {n, channels, s};
    tt_tensor in = tt_new(dtype, 3, shape, TT_CONTIGUOUS);
    tt_tensor g = tt_new(dtype, 3, shape, TT_CONTIGUOUS);
    tt_tensor dx = tt_new(dtype, 3, shape, TT_CONTIGUOUS);
    tt_tensor mean = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_tensor rstd = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_tensor w = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_tensor dw = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_tensor db = tt_new(dtype, 1, &shape[1], TT_CONTIGUOUS);
    tt_fill(&in, -3, 3, 0);
    tt_fill(&g, -1, 1, 0);
    tt_fill(&w, -2, 2, 0);
    /* The saved statistics, as the forward computes them (exact here). */
    for (int64_t c = 0; c < channels; ++c) {
        double unbiased;
        channel_stats(&in, n, channels, s, c, eps, &mean.host[c], &rstd.host[c], &unbiased);
    }
    tt_upload(&mean);
    tt_upload(&rstd);
    tt_case("mt_batch_norm_backward (%lld, %lld, %lld), flags %d, want %d", (long long)n, (long long)channels,
            (long long)s, flags, want);

    const tt_tensor *pw = flags & MT_BATCH_NORM_WEIGHT ? &w : NULL;
    const int64_t count = n * s;
    tt_expect *e_dx = tt_expect_alloc(&dx);
    tt_expect *e_dw = tt_expect_alloc(&dw);
    tt_expect *e_db = tt_expect_alloc(&db);
    for (int64_t c = 0; c < channels; ++c) {
        const double m = mean.host[c], r = rstd.host[c], k = param(pw, c, 1.0) * r;
        double sum_g = 0.0, sum_gxhat = 0.0, mag = 0.0;
        for (int64_t i = 0; i < n; ++i)
            for (int64_t q = 0; q < s; ++q) {
                const int64_t j = (i * channels + c) * s + q;
                const double xhat = (in.host[j] - m) * r;
                sum_g += g.host[j];
                sum_gxhat += g.host[j] * xhat;
                mag += fabs(g.host[j]) * (1.0 + fabs(xhat));
            }
        e_dw[c] = (tt_expect){sum_gxhat, mag, count};
        e_db[c] = (tt_expect){sum_g, mag, count};
        for (int64_t i = 0; i < n; ++i)
            for (int64_t q = 0; q < s; ++q) {
                const int64_t j = (i * channels + c) * s + q;
                const double xhat = (in.host[j] - m) * r;
                const double ref = k * (g.host[j] - sum_g / (double)count - xhat * sum_gxhat / (double)count);
                e_dx[j] = (tt_expect){ref, fabs(k) * (fabs(g.host[j]) + (1.0 + fabs(xhat)) * mag / (double)count),
                                      count};
            }
    }
    mt_status st = mt_batch_norm_backward(dx.t, dw.t, db.t, g.t, in.t, mean.t, rstd.t, w.t, want, flags);
    if (tt_expect_ok(st, "mt_batch_norm_backward")) {
        /* A gradient not wanted is not written: its buffer keeps its poison. */
        if (want & MT_BATCH_NORM_GRAD_IN)
            tt_check_output(&dx, e_dx);
        else
            tt_expect_unchanged(&dx, "grad_in (not wanted)");
        if (want & MT_BATCH_NORM_WEIGHT)
            tt_check_output(&dw, e_dw);
        else
            tt_expect_unchanged(&dw, "grad_weight (not wanted)");
        if (want & MT_BATCH_NORM_BIAS)
            tt_check_output(&db, e_db);
        else
            tt_expect_unchanged(&db, "grad_bias (not wanted)");
        tt_expect_unchanged(&g, "grad_out");
        tt_expect_unchanged(&in, "in");
    }
    free(e_dx);
    free(e_dw);
    free(e_db);
    tt_tensor *all[] = {&in, &g, &dx, &mean, &rstd, &w, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        tt_free(all[i]);
}

int main(void)
{
    tt_init("test_batchnorm");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    /* (N, C, S): a plane per thread group of 1, 8, 16, 64 and 256 threads */
    static const int64_t shapes[][3] = {{40, 3, 1}, {5, 4, 7}, {9, 2, 16}, {3, 5, 64}, {2, 3, 1025}, {70, 1, 9}};
    static const int all = MT_BATCH_NORM_WEIGHT | MT_BATCH_NORM_BIAS;

    for (int t = 0; t < 2; ++t) {
        const int dtype = dtypes[t];
        TT_GROUP("forward %s", tt_dtype_name(dtype)) {
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i)
                forward_case(dtype, shapes[i][0], shapes[i][1], shapes[i][2],
                             (int)(i % 4) | (i % 2 ? MT_BATCH_NORM_RUNNING : 0), 0.0);
            /* Far from zero: the variance around the channel's first value. */
            forward_case(dtype, 8, 2, 33, all | MT_BATCH_NORM_RUNNING, 1000.0);
            /* A random shape, many samples: the planes split over blocks. */
            forward_case(dtype, tt_rand_int(60, 200), tt_rand_int(1, 6), tt_rand_int(1, 40), all, 0.0);
        }
        TT_GROUP("backward %s", tt_dtype_name(dtype)) {
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i)
                backward_case(dtype, shapes[i][0], shapes[i][1], shapes[i][2], (int)(i % 2),
                              MT_BATCH_NORM_GRAD_IN | all);
            /* Only the parameters' gradients; only the input's. */
            backward_case(dtype, 130, 3, 5, MT_BATCH_NORM_WEIGHT, all);
            backward_case(dtype, 7, 4, 12, MT_BATCH_NORM_WEIGHT, MT_BATCH_NORM_GRAD_IN);
            backward_case(dtype, tt_rand_int(60, 200), tt_rand_int(1, 6), tt_rand_int(1, 40), MT_BATCH_NORM_WEIGHT,
                          MT_BATCH_NORM_GRAD_IN | all);
        }
    }

    TT_GROUP("bad arguments") {
        int64_t shape[] = {3, 4, 5}, one[] = {1, 4, 1}, wrong[] = {5};
        tt_tensor in = tt_new(MT_FLOAT32, 3, shape, TT_CONTIGUOUS);
        tt_tensor out = tt_new(MT_FLOAT32, 3, shape, TT_CONTIGUOUS);
        tt_tensor single = tt_new(MT_FLOAT32, 3, one, TT_CONTIGUOUS);
        tt_tensor mean = tt_new(MT_FLOAT32, 1, &shape[1], TT_CONTIGUOUS);
        tt_tensor rstd = tt_new(MT_FLOAT32, 1, &shape[1], TT_CONTIGUOUS);
        tt_tensor w = tt_new(MT_FLOAT32, 1, wrong, TT_CONTIGUOUS);
        tt_tensor d64 = tt_new(MT_FLOAT64, 3, shape, TT_CONTIGUOUS);
        tt_fill(&in, -1, 1, 0);
        tt_fill(&single, -1, 1, 0);
        tt_case("a weight of the wrong length");
        tt_expect_error(mt_batch_norm(out.t, mean.t, rstd.t, in.t, w.t, w.t, w.t, w.t, MT_BATCH_NORM_WEIGHT, 0.1,
                                      1e-5), MT_ERR_SHAPE, "mt_batch_norm", &out);
        tt_case("an output of another dtype");
        tt_expect_error(mt_batch_norm(d64.t, mean.t, rstd.t, in.t, w.t, w.t, w.t, w.t, 0, 0.1, 1e-5), MT_ERR_DTYPE,
                        "mt_batch_norm", &d64);
        tt_case("one value per channel");
        tt_expect_error(mt_batch_norm(single.t, mean.t, rstd.t, single.t, w.t, w.t, w.t, w.t, 0, 0.1, 1e-5),
                        MT_ERR_SHAPE, "mt_batch_norm", &single);
        tt_case("a momentum above 1");
        tt_expect_error(mt_batch_norm(out.t, mean.t, rstd.t, in.t, w.t, w.t, w.t, w.t, 0, 1.5, 1e-5),
                        MT_ERR_INVALID_ARGUMENT, "mt_batch_norm", &out);
        tt_case("mean where rstd should be (overlapping statistics)");
        tt_expect_error(mt_batch_norm(out.t, mean.t, mean.t, in.t, w.t, w.t, w.t, w.t, 0, 0.1, 1e-5),
                        MT_ERR_INVALID_ARGUMENT, "mt_batch_norm", &out);
        tt_case("a backward with a grad_out of another shape");
        tt_expect_error(mt_batch_norm_backward(out.t, w.t, w.t, single.t, in.t, mean.t, rstd.t, w.t,
                                               MT_BATCH_NORM_GRAD_IN, 0), MT_ERR_SHAPE, "mt_batch_norm_backward",
                        &out);
        tt_tensor *all_bad[] = {&in, &out, &single, &mean, &rstd, &w, &d64};
        for (size_t i = 0; i < sizeof all_bad / sizeof all_bad[0]; ++i)
            tt_free(all_bad[i]);
    }
    return tt_summary();
}
