/*
 * attention_reference.h: the attention of one batch element written out in
 * double as matrices, the reference of tests/c/test_attention_tiled.c and
 * tests/c/test_attention_mma.c (their file comments give the formulas).
 */
#ifndef MT_ATTENTION_REFERENCE_H
#define MT_ATTENTION_REFERENCE_H

#include <math.h>
#include <stdlib.h>
#include "test_util.h"

/* One batch element's reference, in double: o (L, D), lse (L), and when
 * dout is given dq (L, D), dk (S, D), dv (S, D). */
typedef struct {
    double *o, *lse, *dq, *dk, *dv;
} reference;

static void reference_attention(const tt_tensor *q, const tt_tensor *k, const tt_tensor *v, const tt_tensor *dout,
                                int64_t b, double scale, int causal, reference *r)
{
    const int64_t L = q->t.shape[1], S = k->t.shape[1], D = q->t.shape[2];
#define AT(t, i, c) tt_at((t), (int64_t[3]){b, (i), (c)})
    double *p = calloc((size_t)(L * S + 1), sizeof(double));
    for (int64_t i = 0; i < L; ++i) {
        double m = -INFINITY, l = 0.0;
        for (int64_t j = 0; j < S; ++j) {
            double s = 0.0;
            for (int64_t c = 0; c < D; ++c)
                s += AT(q, i, c) * AT(k, j, c);
            p[i * S + j] = causal && j > i ? -INFINITY : s * scale;
            m = fmax(m, p[i * S + j]);
        }
        for (int64_t j = 0; j < S; ++j)
            l += exp(p[i * S + j] - m);
        for (int64_t j = 0; j < S; ++j)
            p[i * S + j] = exp(p[i * S + j] - m) / l;
        r->lse[i] = m + log(l);
        for (int64_t c = 0; c < D; ++c) {
            r->o[i * D + c] = 0.0;
            for (int64_t j = 0; j < S; ++j)
                r->o[i * D + c] += p[i * S + j] * AT(v, j, c);
        }
    }
    if (dout) {
        double *ds = calloc((size_t)(L * S + 1), sizeof(double));
        for (int64_t i = 0; i < L; ++i) {
            double delta = 0.0;
            for (int64_t c = 0; c < D; ++c)
                delta += AT(dout, i, c) * r->o[i * D + c];
            for (int64_t j = 0; j < S; ++j) {
                double dp = 0.0;
                for (int64_t c = 0; c < D; ++c)
                    dp += AT(dout, i, c) * AT(v, j, c);
                ds[i * S + j] = p[i * S + j] * (dp - delta);
            }
        }
        for (int64_t c = 0; c < D; ++c) {
            for (int64_t i = 0; i < L; ++i) {
                double acc = 0.0;
                for (int64_t j = 0; j < S; ++j)
                    acc += ds[i * S + j] * AT(k, j, c);
                r->dq[i * D + c] = acc * scale;
            }
            for (int64_t j = 0; j < S; ++j) {
                double acc_k = 0.0, acc_v = 0.0;
                for (int64_t i = 0; i < L; ++i) {
                    acc_k += ds[i * S + j] * AT(q, i, c);
                    acc_v += p[i * S + j] * AT(dout, i, c);
                }
                r->dk[j * D + c] = acc_k * scale;
                r->dv[j * D + c] = acc_v;
            }
        }
        free(ds);
    }
#undef AT
    free(p);
}

#endif /* MT_ATTENTION_REFERENCE_H */
