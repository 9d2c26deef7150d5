/*
 * test_attention.c: mt_attention, the fused (flash) attention kernel, against
 * softmax(q k^T * scale) v computed row by row in double, float32 and
 * float64, with and without the causal mask. Lengths cross the kernel's
 * 64-query blocks and 32-key tiles; head dims go up to its limit of 64, and
 * include 16, 32 and 64 for both q and v (the instances with the head dim
 * fixed at compile time) as well as others (read at run time).
 * Each row's log-sum-exp (lse) is checked too. Then mt_attention_backward,
 * the two backward kernels, against the chain rule in double (the weights
 * P, dV = P^T dO, dS = P * (dO V^T - rowsum), dQ = dS K * scale,
 * dK = dS^T Q * scale). Then the refusals: int64, a non-contiguous or
 * misshapen operand, a head dim over 64, out overlapping an input.
 * The same cases again for the warp rung (mt_attention_warp and its fused
 * backward, src/attention_warp.cu) with head dims 32, 64 and 128, lengths
 * off its 64-query blocks and 32/64-key tiles, down to one query and one
 * key; it refuses other head dims (16, 24, 65, or q's and v's differing),
 * which the flash rung or the three-op rung computes.
 *
 *   make build/tests/emu/test_attention && build/tests/emu/test_attention
 */
#include <stdlib.h>
#include <string.h>
#include "test_util.h"

/* out[b, i, :] for one query row: the reference, two passes over the keys. */
static double ref_row(const tt_tensor *q, const tt_tensor *k, const tt_tensor *v, int64_t b, int64_t i,
                      double scale, int causal, double *out, double *weights)
{
    const int64_t keys = k->t.shape[1], d = q->t.shape[2], dv = v->t.shape[2];
    double m = -INFINITY;
    for (int64_t j = 0; j < keys; ++j) {
        double s = 0.0;
        for (int64_t c = 0; c < d; ++c) {
            int64_t qi[3] = {b, i, c}, ki[3] = {b, j, c};
            s += tt_at(q, qi) * tt_at(k, ki);
        }
        weights[j] = causal && j > i ? -INFINITY : s * scale;
        m = fmax(m, weights[j]);
    }
    double l = 0.0;
    for (int64_t j = 0; j < keys; ++j) {
        weights[j] = exp(weights[j] - m);
        l += weights[j];
    }
    for (int64_t c = 0; c < dv; ++c) {
        out[c] = 0.0;
        for (int64_t j = 0; j < keys; ++j) {
            int64_t vi[3] = {b, j, c};
            out[c] += weights[j] / l * tt_at(v, vi);
        }
    }
    for (int64_t j = 0; j < keys; ++j)
        weights[j] /= l; /* the caller may want the weights */
    return m + log(l);   /* the row's log-sum-exp */
}

/* Which rung a case runs: the flash rung (src/attention.cu) or the warp rung
 * (src/attention_warp.cu), the same arguments. */
static int use_warp = 0;
#define FORWARD (use_warp ? mt_attention_warp : mt_attention)
#define FORWARD_NAME (use_warp ? "mt_attention_warp" : "mt_attention")
#define BACKWARD (use_warp ? mt_attention_warp_backward : mt_attention_backward)
#define BACKWARD_NAME (use_warp ? "mt_attention_warp_backward" : "mt_attention_backward")

static void attention_case(int dtype, int64_t b, int64_t length, int64_t keys, int64_t d, int64_t dv, int causal)
{
    int64_t qs[3] = {b, length, d}, ks[3] = {b, keys, d}, vs[3] = {b, keys, dv}, os[3] = {b, length, dv};
    int64_t ls[2] = {b, length};
    tt_tensor q = tt_new(dtype, 3, qs, TT_CONTIGUOUS), k = tt_new(dtype, 3, ks, TT_CONTIGUOUS);
    tt_tensor v = tt_new(dtype, 3, vs, TT_CONTIGUOUS), out = tt_new(dtype, 3, os, TT_CONTIGUOUS);
    tt_tensor lse = tt_new(dtype, 2, ls, TT_CONTIGUOUS);
    tt_fill(&q, -1, 1, 0);
    tt_fill(&k, -1, 1, 0);
    tt_fill(&v, -2, 2, 0);
    const double scale = 1.0 / sqrt((double)d);
    tt_case("%s %s: q %s, k %s, v %s%s", FORWARD_NAME, tt_dtype_name(dtype), tt_str(&q), tt_str(&k), tt_str(&v),
            causal ? ", causal" : "");
    tt_expect *expect = tt_expect_alloc(&out), *expect_lse = tt_expect_alloc(&lse);
    double *row = malloc(sizeof(double) * (size_t)(dv > 0 ? dv : 1));
    double *weights = malloc(sizeof(double) * (size_t)(keys > 0 ? keys : 1));
    for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t i = 0; i < length; ++i) {
            expect_lse[bi * length + i] = tt_value(ref_row(&q, &k, &v, bi, i, scale, causal, row, weights));
            for (int64_t c = 0; c < dv; ++c) /* a sum over the keys of products over d */
                expect[(bi * length + i) * dv + c] = (tt_expect){row[c], 2.0, keys * d};
        }
    if (tt_expect_ok(FORWARD(out.t, lse.t, q.t, k.t, v.t, scale, causal), FORWARD_NAME)) {
        tt_check_output(&out, expect);
        tt_check_output(&lse, expect_lse);
        tt_expect_unchanged(&q, "q");
        tt_expect_unchanged(&k, "k");
        tt_expect_unchanged(&v, "v");
    }
    free(row);
    free(weights);
    free(expect);
    free(expect_lse);
    tt_free(&q);
    tt_free(&k);
    tt_free(&v);
    tt_free(&out);
    tt_free(&lse);
}

/* mt_attention_backward on random q, k, v, dout; out and lse from the forward. */
static void attention_backward_case(int dtype, int64_t b, int64_t length, int64_t keys, int64_t d, int64_t dv,
                                    int causal)
{
    int64_t qs[3] = {b, length, d}, ks[3] = {b, keys, d}, vs[3] = {b, keys, dv}, os[3] = {b, length, dv};
    int64_t ls[2] = {b, length};
    tt_tensor q = tt_new(dtype, 3, qs, TT_CONTIGUOUS), k = tt_new(dtype, 3, ks, TT_CONTIGUOUS);
    tt_tensor v = tt_new(dtype, 3, vs, TT_CONTIGUOUS), out = tt_new(dtype, 3, os, TT_CONTIGUOUS);
    tt_tensor dout = tt_new(dtype, 3, os, TT_CONTIGUOUS), lse = tt_new(dtype, 2, ls, TT_CONTIGUOUS);
    tt_tensor dq = tt_new(dtype, 3, qs, TT_CONTIGUOUS), dk = tt_new(dtype, 3, ks, TT_CONTIGUOUS);
    tt_tensor dvt = tt_new(dtype, 3, vs, TT_CONTIGUOUS);
    tt_fill(&q, -1, 1, 0);
    tt_fill(&k, -1, 1, 0);
    tt_fill(&v, -2, 2, 0);
    tt_fill(&dout, -1, 1, 0);
    const double scale = 1.0 / sqrt((double)(d > 0 ? d : 1));
    tt_case("%s %s: q %s, k %s, v %s%s", BACKWARD_NAME, tt_dtype_name(dtype), tt_str(&q), tt_str(&k),
            tt_str(&v), causal ? ", causal" : "");
    if (!tt_expect_ok(FORWARD(out.t, lse.t, q.t, k.t, v.t, scale, causal), FORWARD_NAME) ||
        !tt_download(&out, out.host) || !tt_download(&lse, lse.host))
        goto done;
    tt_expect *eq = tt_expect_alloc(&dq), *ek = tt_expect_alloc(&dk), *ev = tt_expect_alloc(&dvt);
    double *p = calloc((size_t)(length * keys + 1), sizeof(double)), *ds = calloc((size_t)(length * keys + 1), sizeof(double));
    double *row = malloc(sizeof(double) * (size_t)(dv + 1));
    for (int64_t bi = 0; bi < b; ++bi) {
        for (int64_t i = 0; i < length; ++i) {
            ref_row(&q, &k, &v, bi, i, scale, causal, row, p + i * keys);
            double delta = 0.0; /* sum_j P_ij dP_ij */
            for (int64_t j = 0; j < keys; ++j) {
                double dp = 0.0;
                for (int64_t c = 0; c < dv; ++c) {
                    int64_t oi[3] = {bi, i, c}, vi[3] = {bi, j, c};
                    dp += tt_at(&dout, oi) * tt_at(&v, vi);
                }
                ds[i * keys + j] = dp;
                delta += p[i * keys + j] * dp;
            }
            for (int64_t j = 0; j < keys; ++j)
                ds[i * keys + j] = p[i * keys + j] * (ds[i * keys + j] - delta);
        }
        for (int64_t i = 0; i < length; ++i)
            for (int64_t c = 0; c < d; ++c) {
                double acc = 0.0;
                for (int64_t j = 0; j < keys; ++j) {
                    int64_t ki[3] = {bi, j, c};
                    acc += ds[i * keys + j] * tt_at(&k, ki);
                }
                eq[(bi * length + i) * d + c] = (tt_expect){acc * scale, 2.0, keys * (d + dv)};
            }
        for (int64_t j = 0; j < keys; ++j) {
            for (int64_t c = 0; c < d; ++c) {
                double acc = 0.0;
                for (int64_t i = 0; i < length; ++i) {
                    int64_t qi[3] = {bi, i, c};
                    acc += ds[i * keys + j] * tt_at(&q, qi);
                }
                ek[(bi * keys + j) * d + c] = (tt_expect){acc * scale, 2.0, length * (d + dv)};
            }
            for (int64_t c = 0; c < dv; ++c) {
                double acc = 0.0;
                for (int64_t i = 0; i < length; ++i) {
                    int64_t oi[3] = {bi, i, c};
                    acc += p[i * keys + j] * tt_at(&dout, oi);
                }
                ev[(bi * keys + j) * dv + c] = (tt_expect){acc, 2.0, length * d};
            }
        }
    }
    if (tt_expect_ok(BACKWARD(dq.t, dk.t, dvt.t, dout.t, q.t, k.t, v.t, out.t, lse.t, scale, causal),
                     BACKWARD_NAME)) {
        tt_check_output(&dq, eq);
        tt_check_output(&dk, ek);
        tt_check_output(&dvt, ev);
        tt_expect_unchanged(&dout, "dout");
        tt_expect_unchanged(&lse, "lse");
    }
    free(eq);
    free(ek);
    free(ev);
    free(p);
    free(ds);
    free(row);
done:
    tt_free(&q);
    tt_free(&k);
    tt_free(&v);
    tt_free(&out);
    tt_free(&dout);
    tt_free(&lse);
    tt_free(&dq);
    tt_free(&dk);
    tt_free(&dvt);
}

int main(void)
{
    tt_init("test_attention");
    const int emulator = !tt_all_cases(); /* the emulator keeps a few cases (MT_TEST_ALL_CASES=1: all) */
    const char *policy = getenv("MINITENSOR_KERNELS");
    const int teaching = policy && strcmp(policy, "teaching") == 0;
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    for (int ti = 0; ti < 2; ++ti) {
        const int dtype = dtypes[ti];
        TT_GROUP("attention %s", tt_dtype_name(dtype)) {
            for (int causal = 0; causal < 2; ++causal) {
                attention_case(dtype, 2, 70, 45, 16, 8, causal);  /* a spare-thread block, a partial tile */
                attention_case(dtype, 1, 33, 97, 64, 64, causal); /* the largest head dims */
                attention_case(dtype, 3, 5, 1, 1, 3, causal);     /* one key */
                attention_case(dtype, 1, 129, 129, 24, 24, causal);
                attention_case(dtype, 2, 64, 32, 8, 8, causal);   /* whole blocks and tiles */
                attention_case(dtype, 2, 70, 45, 16, 16, causal); /* head dims the kernels know at compile time */
                attention_case(dtype, 1, 40, 70, 32, 32, causal);
                for (int r = 0; r < 4; ++r)
                    attention_case(dtype, tt_rand_int(1, 3), tt_rand_int(1, 90), tt_rand_int(1, 90),
                                   tt_rand_int(1, 40), tt_rand_int(1, 40), causal);
            }
            attention_case(dtype, 0, 4, 4, 8, 8, 0); /* no batch: nothing to do */
        }
        TT_GROUP("attention backward %s", tt_dtype_name(dtype)) {
            for (int causal = 0; causal < 2; ++causal) {
                attention_backward_case(dtype, 2, 70, 45, 16, 8, causal); /* partial blocks and tiles */
                attention_backward_case(dtype, 1, 33, 97, 64, 64, causal);
                attention_backward_case(dtype, 3, 5, 1, 1, 3, causal);
                attention_backward_case(dtype, 1, 40, 130, 8, 12, causal); /* more keys than a block */
                attention_backward_case(dtype, 2, 70, 45, 16, 16, causal); /* compile-time head dims */
                attention_backward_case(dtype, 1, 40, 70, 32, 32, causal);
                for (int r = 0; r < 3; ++r)
                    attention_backward_case(dtype, tt_rand_int(1, 3), tt_rand_int(1, 90), tt_rand_int(1, 90),
                                            tt_rand_int(1, 40), tt_rand_int(1, 40), causal);
            }
            attention_backward_case(dtype, 0, 4, 4, 8, 8, 1);
        }
        use_warp = 1;
        TT_GROUP("attention, warp rung %s", tt_dtype_name(dtype)) {
            static const int64_t dims[] = {32, 64, 128};
            for (int causal = 0; causal < 2; ++causal)
                for (int di = 0; di < 3; ++di) {
                    const int64_t d = dims[di];
                    if (emulator) {
                        /* The emulator's full checks cost seconds per block of
                         * these kernels (every shared access is checked, and a
                         * block's tiles are whole even for a short row): a few
                         * small cases, float32 covering the shape classes, and
                         * the same kernels under either policy (they are called
                         * by name), so under the fast policy only. The GPU runs
                         * every case below. */
                        if (teaching || (dtype == MT_FLOAT64 && d != 64))
                            continue;
                        if (d == 32 && !causal)
                            attention_case(dtype, 1, 33, 20, d, d, causal); /* a partial block and tile */
                        if (d == 32 && causal)
                            attention_case(dtype, 1, 70, 45, d, d, causal); /* a block past the first */
                        if (d != 32 && causal == (d == 64))
                            attention_case(dtype, 1, 33, 20, d, d, causal);
                        continue;
                    }
                    attention_case(dtype, 2, 70, 45, d, d, causal);   /* a partial block and tile */
                    attention_case(dtype, 1, 129, 97, d, d, causal);  /* blocks and tiles past the first */
                    attention_case(dtype, 3, 1, 1, d, d, causal);     /* one query, one key */
                    attention_case(dtype, 1, 64, 64, d, d, causal);   /* whole blocks and tiles */
                    attention_case(dtype, 1, 5, 150, d, d, causal);   /* few queries, many keys */
                    attention_case(dtype, tt_rand_int(1, 3), tt_rand_int(1, 140), tt_rand_int(1, 140), d, d,
                                   causal);
                }
            attention_case(dtype, 0, 4, 4, 32, 32, 0); /* no batch */
        }
        TT_GROUP("attention backward, warp rung %s", tt_dtype_name(dtype)) {
            static const int64_t dims[] = {32, 64, 128};
            for (int causal = 0; causal < 2; ++causal)
                for (int di = 0; di < 3; ++di) {
                    const int64_t d = dims[di];
                    if (emulator) { /* as above */
                        if (teaching || (dtype == MT_FLOAT64 && d != 64))
                            continue;
                        if (d == 32)
                            attention_backward_case(dtype, 1, 20, causal ? 33 : 70, d, d, causal); /* 70: two key blocks */
                        else if (causal == (d == 64))
                            attention_backward_case(dtype, 1, 20, 33, d, d, causal);
                        continue;
                    }
                    attention_backward_case(dtype, 2, 70, 45, d, d, causal);
                    attention_backward_case(dtype, 1, 40, 130, d, d, causal); /* more keys than a block */
                    attention_backward_case(dtype, 1, 130, 40, d, d, causal); /* more queries than a tile */
                    attention_backward_case(dtype, 3, 1, 1, d, d, causal);
                    attention_backward_case(dtype, tt_rand_int(1, 3), tt_rand_int(1, 100), tt_rand_int(1, 100), d,
                                            d, causal);
                }
            attention_backward_case(dtype, 0, 4, 4, 64, 64, 1);
        }
        use_warp = 0;
    }
    TT_GROUP("refused") {
        int64_t s3[] = {1, 4, 8}, big[] = {1, 4, 65}, s2[] = {1, 4};
        tt_tensor q = tt_new(MT_FLOAT32, 3, s3, TT_CONTIGUOUS), out = tt_new(MT_FLOAT32, 3, s3, TT_CONTIGUOUS);
        tt_tensor qi = tt_new(MT_INT64, 3, s3, TT_CONTIGUOUS), oi = tt_new(MT_INT64, 3, s3, TT_CONTIGUOUS);
        tt_tensor wide = tt_new(MT_FLOAT32, 3, big, TT_CONTIGUOUS), out_wide = tt_new(MT_FLOAT32, 3, big, TT_CONTIGUOUS);
        tt_tensor lse = tt_new(MT_FLOAT32, 2, s2, TT_CONTIGUOUS), lsei = tt_new(MT_INT64, 2, s2, TT_CONTIGUOUS);
        tt_fill(&q, -1, 1, 0);
        tt_fill(&qi, -3, 3, TT_INTEGERS);
        tt_fill(&wide, -1, 1, 0);
        tt_case("int64 operands");
        tt_expect_error(mt_attention(oi.t, lsei.t, qi.t, qi.t, qi.t, 1.0, 0), MT_ERR_DTYPE, "mt_attention", &oi);
        tt_case("a head dim of 65");
        tt_expect_error(mt_attention(out_wide.t, lse.t, wide.t, wide.t, wide.t, 1.0, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention", &out_wide);
        tt_case("a transposed q");
        mt_tensor qt = q.t;
        qt.shape[1] = 8;
        qt.shape[2] = 4;
        qt.strides[1] = 1;
        qt.strides[2] = 8;
        tt_expect_error(mt_attention(out.t, lse.t, qt, q.t, q.t, 1.0, 0), MT_ERR_INVALID_ARGUMENT, "mt_attention", &out);
        tt_case("k of another dim");
        mt_tensor k_short = q.t; /* (1, 4, 4), contiguous, inside q's buffer */
        k_short.shape[2] = 4;
        k_short.strides[0] = 16;
        k_short.strides[1] = 4;
        tt_expect_error(mt_attention(out.t, lse.t, q.t, k_short, q.t, 1.0, 0), MT_ERR_SHAPE, "mt_attention", &out);
        tt_case("out is q");
        tt_expect_error(mt_attention(q.t, lse.t, q.t, q.t, q.t, 1.0, 0), TT_ANY_ERROR, "mt_attention", NULL);
        tt_case("lse of another length");
        int64_t s5[] = {1, 5};
        tt_tensor lse5 = tt_new(MT_FLOAT32, 2, s5, TT_CONTIGUOUS);
        tt_expect_error(mt_attention(out.t, lse5.t, q.t, q.t, q.t, 1.0, 0), MT_ERR_SHAPE, "mt_attention", &out);
        tt_case("backward: dq overlaps dk");
        tt_tensor g = tt_new(MT_FLOAT32, 3, s3, TT_CONTIGUOUS), o = tt_new(MT_FLOAT32, 3, s3, TT_CONTIGUOUS);
        tt_fill(&g, -1, 1, 0);
        tt_fill(&o, -1, 1, 0);
        tt_fill(&lse, 0, 1, 0);
        tt_tensor dvx = tt_new(MT_FLOAT32, 3, s3, TT_CONTIGUOUS);
        tt_expect_error(mt_attention_backward(out.t, out.t, dvx.t, g.t, q.t, q.t, q.t, o.t, lse.t, 1.0, 0),
                        MT_ERR_INVALID_ARGUMENT, "mt_attention_backward", NULL);
        tt_case("backward: dout of another shape");
        tt_expect_error(mt_attention_backward(out.t, o.t, g.t, wide.t, q.t, q.t, q.t, o.t, lse.t, 1.0, 0),
                        MT_ERR_SHAPE, "mt_attention_backward", NULL);
        tt_case("warp rung: a head dim of 8 (16, 24, ...: not 32, 64 or 128)");
        tt_expect_error(mt_attention_warp(out.t, lse.t, q.t, q.t, q.t, 1.0, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_warp", &out);
        tt_case("warp rung: q's and v's head dims differ");
        int64_t s32[] = {1, 4, 32}, s64[] = {1, 4, 64};
        tt_tensor q32 = tt_new(MT_FLOAT32, 3, s32, TT_CONTIGUOUS), v64 = tt_new(MT_FLOAT32, 3, s64, TT_CONTIGUOUS);
        tt_tensor o64 = tt_new(MT_FLOAT32, 3, s64, TT_CONTIGUOUS);
        tt_fill(&q32, -1, 1, 0);
        tt_fill(&v64, -1, 1, 0);
        tt_expect_error(mt_attention_warp(o64.t, lse.t, q32.t, q32.t, v64.t, 1.0, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_warp", &o64);
        tt_case("warp rung: a head dim of 129");
        int64_t s129[] = {1, 4, 129};
        tt_tensor w129 = tt_new(MT_FLOAT32, 3, s129, TT_CONTIGUOUS), o129 = tt_new(MT_FLOAT32, 3, s129, TT_CONTIGUOUS);
        tt_fill(&w129, -1, 1, 0);
        tt_expect_error(mt_attention_warp(o129.t, lse.t, w129.t, w129.t, w129.t, 1.0, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_warp", &o129);
        tt_case("warp rung backward: dq overlaps dk");
        tt_tensor dq32 = tt_new(MT_FLOAT32, 3, s32, TT_CONTIGUOUS), dv32 = tt_new(MT_FLOAT32, 3, s32, TT_CONTIGUOUS);
        tt_expect_error(mt_attention_warp_backward(dq32.t, dq32.t, dv32.t, q32.t, q32.t, q32.t, q32.t, q32.t, lse.t,
                                                   1.0, 0),
                        MT_ERR_INVALID_ARGUMENT, "mt_attention_warp_backward", NULL);
        tt_tensor *all[] = {&q, &out, &qi, &oi, &wide, &out_wide, &lse, &lsei, &lse5, &g, &o, &dvx,
                            &q32, &v64, &o64, &w129, &o129, &dq32, &dv32};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
            tt_free(all[i]);
    }
    return tt_summary();
}
