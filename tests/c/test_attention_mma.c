/*
 * test_attention_mma.c: the tensor-core attention rung (src/attention_mma.cu),
 * mt_attention_mma, against the attention of one batch element written out
 * in double:
 *
 *   S = Q K^T * scale (key j hidden from query i when causal and j > i),
 *   P = softmax(S) by rows, O = P V, lse_i = log sum_j exp(S_ij),
 *
 * at float32's tolerance (tests/c/tt_expect.h: 1e-5 sqrt(n) relative), which
 * plain TF32 products (1e-3) would fail: the 3xTF32 split must hold float32's
 * accuracy. Then the mma rung's backward (mt_attention_mma_backward, its
 * walked tiles of block_keys rows) or the warp rung's
 * (mt_attention_warp_backward) from the mma rung's out and lse, against dQ,
 * dK, dV in double:
 *
 *   dP = dO V^T, dS = P * (dP - rowsum(dO * O)),
 *   dQ = dS K * scale, dK = dS^T Q * scale, dV = P^T dO.
 *
 * Cases: head dims 64 and 128; both query blocks (64, 128) and key tiles
 * (32, 64) and the defaults;
 * lengths off the 64-query block and the key tiles, one query and one key,
 * more keys than queries and fewer; causal or not; random shapes from a
 * fixed seed. Then the refusals: float64, head dim 32, q's and v's dims
 * differing, a key tile of 8, a query block of 32; the backward's float64,
 * head dim 32, walked tile of 16 and overlapping outputs.
 *
 *   make build/tests/emu/test_attention_mma && build/tests/emu/test_attention_mma
 */
#include <stdlib.h>
#include <string.h>
#include "test_util.h"
#include "attention_mma.h"
#include "attention_reference.h"

enum { NO_BACKWARD, WARP_BACKWARD, MMA_BACKWARD };

/* The forward of one shape against the reference, and the warp rung's
 * gradients (backward WARP_BACKWARD) or the mma rung's (MMA_BACKWARD, tiles
 * of block_keys rows walked) from its out and lse. */
static void mma_case(int64_t b, int64_t length, int64_t keys, int64_t d, int causal, int block_queries, int block_keys,
                     int backward)
{
    const int dtype = MT_FLOAT32;
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
    tt_case("mt_attention_mma, %d queries a block, %d keys a tile%s: q %s, k %s%s", block_queries, block_keys,
            backward == MMA_BACKWARD ? ", mma backward" : backward ? ", warp backward" : "",
            tt_str(&q), tt_str(&k), causal ? ", causal" : "");
    tt_expect *eo = tt_expect_alloc(&out), *el = tt_expect_alloc(&lse), *eq = tt_expect_alloc(&dq);
    tt_expect *ek = tt_expect_alloc(&dk), *ev = tt_expect_alloc(&dv);
    reference r = {malloc(sizeof(double) * (size_t)(length * d + 1)), malloc(sizeof(double) * (size_t)(length + 1)),
                   malloc(sizeof(double) * (size_t)(length * d + 1)), malloc(sizeof(double) * (size_t)(keys * d + 1)),
                   malloc(sizeof(double) * (size_t)(keys * d + 1))};
    for (int64_t bi = 0; bi < b; ++bi) {
        reference_attention(&q, &k, &v, backward ? &dout : NULL, bi, scale, causal, &r);
        /* Error bounds: sums of keys * d products (the forward), of
         * keys * 2d or length * 2d (the gradients). */
        for (int64_t i = 0; i < length; ++i) {
            el[bi * length + i] = tt_value(r.lse[i]);
            for (int64_t c = 0; c < d; ++c) {
                eo[(bi * length + i) * d + c] = (tt_expect){r.o[i * d + c], 2.0, keys * d};
                if (backward)
                    eq[(bi * length + i) * d + c] = (tt_expect){r.dq[i * d + c], 2.0, keys * 2 * d};
            }
        }
        if (backward)
            for (int64_t j = 0; j < keys * d; ++j) {
                ek[bi * keys * d + j] = (tt_expect){r.dk[j], 2.0, length * 2 * d};
                ev[bi * keys * d + j] = (tt_expect){r.dv[j], 2.0, length * 2 * d};
            }
    }
    if (tt_expect_ok(mt_attention_mma(out.t, lse.t, q.t, k.t, v.t, scale, causal, block_queries, block_keys),
                     "mt_attention_mma")) {
        tt_check_output(&out, eo);
        tt_check_output(&lse, el);
        tt_expect_unchanged(&q, "q");
        tt_expect_unchanged(&k, "k");
        tt_expect_unchanged(&v, "v");
        const char *name = backward == MMA_BACKWARD ? "mt_attention_mma_backward" : "mt_attention_warp_backward";
        if (backward &&
            tt_expect_ok(backward == MMA_BACKWARD
                             ? mt_attention_mma_backward(dq.t, dk.t, dv.t, dout.t, q.t, k.t, v.t, out.t, lse.t, scale,
                                                         causal, block_keys)
                             : mt_attention_warp_backward(dq.t, dk.t, dv.t, dout.t, q.t, k.t, v.t, out.t, lse.t,
                                                          scale, causal),
                         name)) {
            tt_check_output(&dq, eq);
            tt_check_output(&dk, ek);
            tt_check_output(&dv, ev);
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
    tt_init("test_attention_mma");
    /* The emulator checks every shared access of these blocks (seconds a
     * block): its cases are the few that cover each shape class, under the
     * fast policy only (the kernel is called by name, the policy does not
     * change it). The GPU runs all of them. */
    const int emulator = !tt_all_cases(); /* MT_TEST_ALL_CASES=1: every case on the emulator too */
    const char *policy = getenv("MINITENSOR_KERNELS");
    if (emulator && policy && strcmp(policy, "teaching") == 0)
        return tt_summary();
    TT_GROUP("mma rung, head dim 64") {
        mma_case(1, 70, 70, 64, 0, 0, 64, 0);   /* a partial query block and key tile */
        mma_case(2, 1, 1, 64, 1, 0, 0, 0);      /* one query, one key */
        mma_case(1, 130, 45, 64, 1, 64, 32, 0); /* more queries than keys, a third block */
        mma_case(1, 150, 70, 64, 1, 128, 64, 0); /* 8 warps a block, a second block */
        if (!emulator)
            for (int causal = 0; causal < 2; ++causal)
                for (int rows = 64; rows <= 128; rows += 64)
                    for (int tile = 16; tile <= 64; tile *= 2) {
                        mma_case(1, 70, 70, 64, causal, rows, tile, 0);
                        mma_case(1, 45, 150, 64, causal, rows, tile, 0); /* more keys than queries */
                        mma_case(2, 256, 256, 64, causal, rows, tile, 0); /* whole blocks and tiles */
                    }
    }
    TT_GROUP("mma rung, head dim 128") {
        mma_case(1, 70, 40, 128, 1, 0, 0, 0);
        mma_case(1, 1, 1, 128, 0, 0, 64, 0);
        mma_case(1, 140, 33, 128, 0, 128, 32, 0); /* 8 warps a block */
        mma_case(1, 70, 40, 128, 1, 64, 16, 0);   /* tiles of 16 keys: a partial one, warps skipping */
        if (!emulator)
            for (int causal = 0; causal < 2; ++causal)
                for (int rows = 64; rows <= 128; rows += 64)
                    for (int tile = 16; tile <= 64; tile *= 2) {
                        mma_case(1, 129, 97, 128, causal, rows, tile, 0);
                        mma_case(1, 64, 64, 128, causal, rows, tile, 0);
                        mma_case(2, 256, 256, 128, causal, rows, tile, 0);
                    }
    }
    TT_GROUP("mma rung's lse, the warp rung's backward") {
        mma_case(1, 33, 40, 64, 1, 0, 0, WARP_BACKWARD);
        if (!emulator) {
            mma_case(2, 130, 97, 64, 0, 0, 0, WARP_BACKWARD);
            mma_case(1, 129, 129, 128, 1, 128, 0, WARP_BACKWARD);
        }
    }
    /* The mma backward: lengths off the 64-row blocks and the walked tiles,
     * more queries than keys and fewer, one of each; at head dim 128 the
     * 8-warp kernels (dK and dV, dQ's halves, on a pair of warps). */
    TT_GROUP("mma backward") {
        mma_case(1, 70, 70, 64, 1, 0, 0, MMA_BACKWARD);
        mma_case(1, 17, 130, 64, 0, 0, 32, MMA_BACKWARD);
        mma_case(2, 1, 1, 128, 1, 0, 0, MMA_BACKWARD);
        mma_case(1, 70, 33, 128, 1, 0, 64, MMA_BACKWARD);
        mma_case(1, 45, 100, 128, 0, 0, 32, MMA_BACKWARD); /* D128's 8-warp split, more keys than queries */
        if (!emulator)
            for (int causal = 0; causal < 2; ++causal)
                for (int tile = 0; tile <= 64; tile += 32)
                    for (int64_t d = 64; d <= 128; d += 64) {
                        mma_case(1, 130, 17, d, causal, 0, tile, MMA_BACKWARD);
                        mma_case(1, 45, 150, d, causal, 0, tile, MMA_BACKWARD);
                        mma_case(2, 256, 256, d, causal, 0, tile, MMA_BACKWARD);
                        mma_case(1, 300, 200, d, causal, 0, tile, MMA_BACKWARD);
                    }
    }
    /* One random shape on the emulator, twelve on the GPU. */
    TT_GROUP("mma rung, random shapes") {
        for (int r = 0; r < (emulator ? 1 : 12); ++r) {
            const int64_t d = tt_rand_int(0, 1) ? 128 : 64;
            const int tile = (int)tt_rand_int(0, 2) * 32, rows = (int)tt_rand_int(0, 2) * 64;
            mma_case(tt_rand_int(1, 2), tt_rand_int(1, emulator ? 40 : 300), tt_rand_int(1, emulator ? 40 : 300), d,
                     (int)tt_rand_int(0, 1), rows, tile, 0);
        }
    }
    TT_GROUP("mma rung refuses") {
        int64_t s32[] = {1, 4, 32}, s64[] = {1, 4, 64}, s2[] = {1, 4};
        tt_tensor q32 = tt_new(MT_FLOAT32, 3, s32, TT_CONTIGUOUS), o32 = tt_new(MT_FLOAT32, 3, s32, TT_CONTIGUOUS);
        tt_tensor q64 = tt_new(MT_FLOAT32, 3, s64, TT_CONTIGUOUS), o64 = tt_new(MT_FLOAT32, 3, s64, TT_CONTIGUOUS);
        tt_tensor d64 = tt_new(MT_FLOAT64, 3, s64, TT_CONTIGUOUS), od64 = tt_new(MT_FLOAT64, 3, s64, TT_CONTIGUOUS);
        tt_tensor lse = tt_new(MT_FLOAT32, 2, s2, TT_CONTIGUOUS), lse64 = tt_new(MT_FLOAT64, 2, s2, TT_CONTIGUOUS);
        tt_fill(&q32, -1, 1, 0);
        tt_fill(&q64, -1, 1, 0);
        tt_fill(&d64, -1, 1, 0);
        tt_case("float64");
        tt_expect_error(mt_attention_mma(od64.t, lse64.t, d64.t, d64.t, d64.t, 1.0, 0, 0, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_mma", &od64);
        tt_case("a head dim of 32");
        tt_expect_error(mt_attention_mma(o32.t, lse.t, q32.t, q32.t, q32.t, 1.0, 0, 0, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_mma", &o32);
        tt_case("q's and v's head dims differ");
        tt_expect_error(mt_attention_mma(o32.t, lse.t, q64.t, q64.t, q32.t, 1.0, 0, 0, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_mma", &o32);
        tt_case("a key tile of 8");
        tt_expect_error(mt_attention_mma(o64.t, lse.t, q64.t, q64.t, q64.t, 1.0, 1, 0, 8), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_mma", &o64);
        tt_case("a query block of 32");
        tt_expect_error(mt_attention_mma(o64.t, lse.t, q64.t, q64.t, q64.t, 1.0, 1, 32, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_mma", &o64);
        /* The backward's refusals, each with dq, dk, dv apart from the
         * inputs and from each other (so that only the named fault is). */
        tt_tensor g32[3], g64[3], gd64[3];
        for (int i = 0; i < 3; ++i) {
            g32[i] = tt_new(MT_FLOAT32, 3, s32, TT_CONTIGUOUS);
            g64[i] = tt_new(MT_FLOAT32, 3, s64, TT_CONTIGUOUS);
            gd64[i] = tt_new(MT_FLOAT64, 3, s64, TT_CONTIGUOUS);
        }
        tt_case("backward: float64");
        tt_expect_error(mt_attention_mma_backward(gd64[0].t, gd64[1].t, gd64[2].t, d64.t, d64.t, d64.t, d64.t, d64.t,
                                                  lse64.t, 1.0, 0, 0),
                        MT_ERR_INVALID_ARGUMENT, "mt_attention_mma_backward", &gd64[0]);
        tt_case("backward: a head dim of 32");
        tt_expect_error(mt_attention_mma_backward(g32[0].t, g32[1].t, g32[2].t, q32.t, q32.t, q32.t, q32.t, q32.t,
                                                  lse.t, 1.0, 0, 0),
                        MT_ERR_INVALID_ARGUMENT, "mt_attention_mma_backward", &g32[0]);
        tt_case("backward: a walked tile of 16");
        tt_expect_error(mt_attention_mma_backward(g64[0].t, g64[1].t, g64[2].t, q64.t, q64.t, q64.t, q64.t, q64.t,
                                                  lse.t, 1.0, 1, 16),
                        MT_ERR_INVALID_ARGUMENT, "mt_attention_mma_backward", &g64[0]);
        tt_case("backward: dq overlaps dk");
        tt_expect_error(mt_attention_mma_backward(g64[0].t, g64[0].t, g64[2].t, q64.t, q64.t, q64.t, q64.t, q64.t,
                                                  lse.t, 1.0, 0, 0),
                        MT_ERR_INVALID_ARGUMENT, "mt_attention_mma_backward", NULL);
        for (int i = 0; i < 3; ++i) {
            tt_free(&g32[i]);
            tt_free(&g64[i]);
            tt_free(&gd64[i]);
        }
        tt_tensor *all[] = {&q32, &o32, &q64, &o64, &d64, &od64, &lse, &lse64};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
            tt_free(all[i]);
    }
    TT_GROUP("mma rung: where it runs") {
        /* Head dims 64 and 128 run on the emulator (and on an H100, whose
         * 227 KiB a block hold the D128 backward's 141; a GPU of 99 KiB
         * does not, so on a GPU only 0 or 1 is asked); other head dims
         * nowhere. */
        const int emulator = strcmp(mt_backend_name(), "emulator") == 0;
        int forward = -1, backward = -1;
        tt_case("mt_attention_mma_supported, head dims 64 and 128");
        for (int d = 64; d <= 128; d *= 2) {
            TT_CHECK(mt_attention_mma_supported(d, &forward, &backward) == MT_OK, "%s", mt_last_error());
            if (emulator)
                TT_CHECK(forward == 1 && backward == 1, "head dim %d: forward %d, backward %d", d, forward, backward);
            else
                TT_CHECK((forward == 0 || forward == 1) && (backward == 0 || backward == 1),
                         "head dim %d: forward %d, backward %d", d, forward, backward);
        }
        tt_case("mt_attention_mma_supported, head dim 32");
        TT_CHECK(mt_attention_mma_supported(32, &forward, &backward) == MT_OK, "%s", mt_last_error());
        TT_CHECK(forward == 0 && backward == 0, "head dim 32: forward %d, backward %d", forward, backward);
        tt_case("mt_attention_mma_supported, NULL");
        tt_expect_error(mt_attention_mma_supported(64, NULL, &backward), MT_ERR_INVALID_ARGUMENT,
                        "mt_attention_mma_supported", NULL);
    }
    return tt_summary();
}
