/*
 * test_attention_tiled.c: the tiled attention rung (src/attention_tiled.cu),
 * mt_attention_tiled and mt_attention_tiled_backward, against the attention
 * of one batch element written out in double as matrices:
 *
 *   S = Q K^T * scale (key j hidden from query i when causal and j > i),
 *   P = softmax(S) by rows, O = P V, lse_i = log sum_j exp(S_ij),
 *   dP = dO V^T, dS = P * (dP - rowsum(dO * O)),
 *   dQ = dS K * scale, dK = dS^T Q * scale, dV = P^T dO.
 *
 * Cases: head dims 32, 64 and 128; lengths off the 64- and 128-query blocks
 * and the 32- and 64-key tiles, one query and one key, more keys than
 * queries and fewer; causal or not; both query blocks (64, 128: float32
 * only); float32 and float64; random shapes from a fixed seed. Then the
 * refusals: another head dim, q's and v's dims differing, a query block
 * other than 0, 64 and 128, float64 with 128 queries a block.
 *
 *   make build/tests/emu/test_attention_tiled && build/tests/emu/test_attention_tiled
 */
#include <stdlib.h>
#include <string.h>
#include "test_util.h"
#include "attention_tiled.h"
#include "attention_reference.h"

/* Forward and backward of one shape against the reference. */
static void tiled_case(int dtype, int64_t b, int64_t length, int64_t keys, int64_t d, int causal, int queries,
                       int thread_rows)
{
    int64_t qs[3] = {b, length, d}, ks[3] = {b, keys, d}, ls[2] = {b, length};
    tt_tensor q = tt_new(dtype, 3, qs, TT_CONTIGUOUS), k = tt_new(dtype, 3, ks, TT_CONTIGUOUS);
    tt_tensor v = tt_new(dtype, 3, ks, TT_CONTIGUOUS), out = tt_new(dtype, 3, qs, TT_CONTIGUOUS);
    tt_tensor dout = tt_new(dtype, 3, qs, TT_CONTIGUOUS), lse = tt_new(dtype, 2, ls, TT_CONTIGUOUS);
    tt_tensor dq = tt_new(dtype, 3, qs, TT_CONTIGUOUS), dk = tt_new(dtype, 3, ks, TT_CONTIGUOUS);
    tt_tensor dv = tt_new(dtype, 3, ks, TT_CONTIGUOUS);
    tt_fill(&q, -1, 1, 0);
    tt_fill(&k, -1, 1, 0);
    tt_fill(&v, -2, 2, 0);
    tt_fill(&dout, -1, 1, 0);
    const double scale = 1.0 / sqrt((double)d);
    tt_case("mt_attention_tiled %s, %d queries a block, %d rows a thread: q %s, k %s%s", tt_dtype_name(dtype),
            queries, thread_rows, tt_str(&q), tt_str(&k), causal ? ", causal" : "");
    tt_expect *eo = tt_expect_alloc(&out), *el = tt_expect_alloc(&lse), *eq = tt_expect_alloc(&dq);
    tt_expect *ek = tt_expect_alloc(&dk), *ev = tt_expect_alloc(&dv);
    reference r = {malloc(sizeof(double) * (size_t)(length * d + 1)), malloc(sizeof(double) * (size_t)(length + 1)),
                   malloc(sizeof(double) * (size_t)(length * d + 1)), malloc(sizeof(double) * (size_t)(keys * d + 1)),
                   malloc(sizeof(double) * (size_t)(keys * d + 1))};
    for (int64_t bi = 0; bi < b; ++bi) {
        reference_attention(&q, &k, &v, &dout, bi, scale, causal, &r);
        /* Error bounds: sums of keys * d products (the forward), of
         * keys * 2d or length * 2d (the gradients). */
        for (int64_t i = 0; i < length; ++i) {
            el[bi * length + i] = tt_value(r.lse[i]);
            for (int64_t c = 0; c < d; ++c) {
                eo[(bi * length + i) * d + c] = (tt_expect){r.o[i * d + c], 2.0, keys * d};
                eq[(bi * length + i) * d + c] = (tt_expect){r.dq[i * d + c], 2.0, keys * 2 * d};
            }
        }
        for (int64_t j = 0; j < keys * d; ++j) {
            ek[bi * keys * d + j] = (tt_expect){r.dk[j], 2.0, length * 2 * d};
            ev[bi * keys * d + j] = (tt_expect){r.dv[j], 2.0, length * 2 * d};
        }
    }
    if (tt_expect_ok(mt_attention_tiled(out.t, lse.t, q.t, k.t, v.t, scale, causal, queries, thread_rows),
                     "mt_attention_tiled")) {
        tt_check_output(&out, eo);
        tt_check_output(&lse, el);
        if (tt_expect_ok(mt_attention_tiled_backward(dq.t, dk.t, dv.t, dout.t, q.t, k.t, v.t, out.t, lse.t, scale,
                                                     causal, queries),
                         "mt_attention_tiled_backward")) {
            tt_check_output(&dq, eq);
            tt_check_output(&dk, ek);
            tt_check_output(&dv, ev);
            tt_expect_unchanged(&q, "q");
            tt_expect_unchanged(&dout, "dout");
        }
    }
    free(r.o);
    free(r.lse);
    free(r.dq);
    free(r.dk);
    free(r.dv);
    free(eo);
    free(el);
    free(eq);
    free(ek);
    free(ev);
    tt_tensor *all[] = {&q, &k, &v, &out, &dout, &lse, &dq, &dk, &dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        tt_free(all[i]);
}

int main(void)
{
    tt_init("test_attention_tiled");
    /* The emulator checks every shared access of these blocks (seconds a
     * block): its cases are the few that cover each shape class, under the
     * fast policy only (the kernels are called by name, the policy does not
     * change them). The GPU runs all of them. */
    const int emulator = !tt_all_cases(); /* MT_TEST_ALL_CASES=1: every case on the emulator too */
    const char *policy = getenv("MINITENSOR_KERNELS");
    if (emulator && policy && strcmp(policy, "teaching") == 0)
        return tt_summary();
    TT_GROUP("tiled rung, float32, head dim 64, 64 queries a block") {
        tiled_case(MT_FLOAT32, 1, 70, 70, 64, 0, 64, 0); /* a partial query block and key tile */
        tiled_case(MT_FLOAT32, 2, 1, 1, 64, 1, 0, 0);    /* one query, one key */
        if (!emulator)
            for (int causal = 0; causal < 2; ++causal) {
                tiled_case(MT_FLOAT32, 1, 70, 70, 64, causal, 64, 0);
                tiled_case(MT_FLOAT32, 1, 45, 150, 64, causal, 64, 0); /* more keys than queries */
                tiled_case(MT_FLOAT32, 2, 256, 256, 64, causal, 0, 0); /* whole blocks and tiles */
            }
    }
    TT_GROUP("tiled rung, float32, head dim 64, 128 queries a block") {
        tiled_case(MT_FLOAT32, 1, 130, 45, 64, 1, 128, 0); /* more queries than keys, a second block */
        if (!emulator)
            for (int causal = 0; causal < 2; ++causal) {
                tiled_case(MT_FLOAT32, 1, 130, 45, 64, causal, 128, 0);
                tiled_case(MT_FLOAT32, 2, 256, 256, 64, causal, 128, 0);
            }
    }
    TT_GROUP("tiled rung, float32, head dim 128") {
        tiled_case(MT_FLOAT32, 1, 70, 40, 128, 1, 64, 0);
        tiled_case(MT_FLOAT32, 1, 1, 1, 128, 0, 128, 0);
        if (!emulator)
            for (int causal = 0; causal < 2; ++causal) {
                tiled_case(MT_FLOAT32, 1, 129, 97, 128, causal, 128, 0);
                tiled_case(MT_FLOAT32, 1, 64, 64, 128, causal, 64, 0);
                tiled_case(MT_FLOAT32, 1, 70, 40, 128, causal, 0, 0);
            }
    }
    TT_GROUP("tiled rung, head dim 32, float64") {
        tiled_case(MT_FLOAT32, 1, 40, 33, 32, 1, 64, 0);
        tiled_case(MT_FLOAT64, 1, 20, 33, 64, 0, 0, 0);
        if (!emulator)
            for (int causal = 0; causal < 2; ++causal) {
                tiled_case(MT_FLOAT64, 1, 70, 45, 64, causal, 0, 0);
                tiled_case(MT_FLOAT64, 1, 33, 70, 128, causal, 64, 0);
                tiled_case(MT_FLOAT64, 2, 20, 20, 32, causal, 0, 0);
            }
    }
    /* One random shape on the emulator (each costs about 13 s of CPU under
     * its full checks; the groups above hold every shape class), twelve on
     * the GPU. */
    TT_GROUP("tiled rung, random shapes") {
        for (int r = 0; r < (emulator ? 1 : 12); ++r) {
            static const int64_t dims[] = {32, 64, 128};
            const int64_t d = dims[tt_rand_int(0, 2)];
            const int queries = tt_rand_int(0, 1) ? 128 : 64;
            tiled_case(MT_FLOAT32, tt_rand_int(1, 2), tt_rand_int(1, emulator ? 40 : 300),
                       tt_rand_int(1, emulator ? 40 : 300), d, (int)tt_rand_int(0, 1), queries, 0);
        }
    }
    TT_GROUP("tiled rung, float32, 2 rows a thread (twice the threads a block)") {
        tiled_case(MT_FLOAT32, 1, 70, 40, 128, 1, 64, 2);  /* a partial query block and key tile */
        tiled_case(MT_FLOAT32, 1, 130, 45, 64, 0, 128, 2); /* a second block of 128 */
        if (!emulator)
            for (int causal = 0; causal < 2; ++causal) {
                tiled_case(MT_FLOAT32, 2, 1, 1, 128, causal, 0, 2);
                tiled_case(MT_FLOAT32, 1, 129, 97, 128, causal, 128, 2);
                tiled_case(MT_FLOAT32, 2, 256, 256, 128, causal, 64, 2);
                tiled_case(MT_FLOAT32, 1, 45, 150, 64, causal, 64, 2);
                tiled_case(MT_FLOAT32, 1, 70, 33, 32, causal, 0, 2);
            }
    }
    TT_GROUP("tiled rung refuses") {
        int64_t s16[] = {1, 4, 16}, s64[] = {1, 4, 64}, s2[] = {1, 4};
        tt_tensor q16 = tt_new(MT_FLOAT32, 3, s16, TT_CONTIGUOUS), o16 = tt_new(MT_FLOAT32, 3, s16, TT_CONTIGUOUS);
        tt_tensor q64 = tt_new(MT_FLOAT32, 3, s64, TT_CONTIGUOUS), o64 = tt_new(MT_FLOAT32, 3, s64, TT_CONTIGUOUS);
        tt_tensor d64 = tt_new(MT_FLOAT64, 3, s64, TT_CONTIGUOUS), od64 = tt_new(MT_FLOAT64, 3, s64, TT_CONTIGUOUS);
        tt_tensor lse = tt_new(MT_FLOAT32, 2, s2, TT_CONTIGUOUS), lse64 = tt_new(MT_FLOAT64, 2, s2, TT_CONTIGUOUS);
        tt_fill(&q16, -1, 1, 0);
        tt_fill(&q64, -1, 1, 0);
        tt_fill(&d64, -1, 1, 0);
        tt_case("a head dim of 16");
        tt_expect_error(mt_attention_tiled(o16.t, lse.t, q16.t, q16.t, q16.t, 1.0, 0, 0, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_tiled", &o16);
        tt_case("q's and v's head dims differ");
        tt_expect_error(mt_attention_tiled(o16.t, lse.t, q64.t, q64.t, q16.t, 1.0, 0, 0, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_tiled", &o16);
        tt_case("a query block of 32");
        tt_expect_error(mt_attention_tiled(o64.t, lse.t, q64.t, q64.t, q64.t, 1.0, 0, 32, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_tiled", &o64);
        tt_case("float64 with 128 queries a block");
        tt_expect_error(mt_attention_tiled(od64.t, lse64.t, d64.t, d64.t, d64.t, 1.0, 1, 128, 0),
                        MT_ERR_INVALID_ARGUMENT, "mt_attention_tiled", &od64);
        tt_case("3 rows a thread");
        tt_expect_error(mt_attention_tiled(o64.t, lse.t, q64.t, q64.t, q64.t, 1.0, 0, 0, 3), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_tiled", &o64);
        tt_case("float64 with 2 rows a thread");
        tt_expect_error(mt_attention_tiled(od64.t, lse64.t, d64.t, d64.t, d64.t, 1.0, 0, 64, 2),
                        MT_ERR_INVALID_ARGUMENT, "mt_attention_tiled", &od64);
        tt_case("backward: dq overlaps dk");
        tt_expect_error(mt_attention_tiled_backward(o64.t, o64.t, q64.t, q64.t, q64.t, q64.t, q64.t, q64.t, lse.t,
                                                    1.0, 0, 0),
                        MT_ERR_INVALID_ARGUMENT, "mt_attention_tiled_backward", NULL);
        tt_tensor *all[] = {&q16, &o16, &q64, &o64, &d64, &od64, &lse, &lse64};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
            tt_free(all[i]);
    }
    return tt_summary();
}
