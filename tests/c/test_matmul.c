/*
 * test_matmul.c: mt_matmul with each algorithm of the ladder (default,
 * naive, coalesced, tiled, blocktile_1d, blocktile_2d, vectorized, warptile,
 * pipelined) and mt_matmul_with_config with each tile configuration of the
 * tunable rungs (warptile and pipelined), in float32 and float64.
 *
 * M, N and K come from {1, 7, 31, 33, 65}: partial tiles on every side of a
 * 16- or 32-wide tile. Batches broadcast as in NumPy (a batch of 1, fewer
 * batch dims, stride-0 batch dims); a and b are often transposed or
 * otherwise strided views; K = 0 must give zeros and an empty batch nothing.
 *
 * One group per algo (named by it), then "configs" and "config errors".
 *
 *   make check-c T=test_matmul FILTER=tiled          (build, run one group)
 *   MT_TEST_SEED=42 build/tests/emu/test_matmul      (other cases)
 */
#include "test_util.h"

static const int64_t SIZES[] = {1, 7, 31, 33, 65};

/* Turns a view of shape (..., p, q) into its transpose (..., q, p): the same
 * storage, the last two sizes and strides swapped. */
static void transpose_last2(tt_tensor *x)
{
    int n = x->t.ndim;
    int64_t s = x->t.shape[n - 1], st = x->t.strides[n - 1];
    x->t.shape[n - 1] = x->t.shape[n - 2];
    x->t.strides[n - 1] = x->t.strides[n - 2];
    x->t.shape[n - 2] = s;
    x->t.strides[n - 2] = st;
}

/* How matrix_input lays out an operand. */
enum {
    RANDOM_LAYOUT = 0, /* a random strided layout (tt_random_layout)             */
    TRANSPOSED = 1,    /* a transposed view of a row-major (cols, rows) buffer   */
    ROW_MAJOR = 2,     /* plain row-major at offset 0 (the 16-byte-load path)    */
};
static const char *const LAYOUT_NOTE[] = {"", " (transposed)", " (row-major)"};

/* The warptile configuration matmul_case passes to mt_matmul_with_config;
 * -1 calls plain mt_matmul. */
static int g_config = -1;

/* The rung a configuration belongs to: its name says "pipelined ..." for
 * the pipelined rung's (numbered after warptile's). */
static int config_rung(int config)
{
    const char *name = mt_matmul_config_name(config);
    return name && strncmp(name, "pipelined", 9) == 0 ? MT_MATMUL_PIPELINED : MT_MATMUL_WARPTILE;
}

/* 1 + a TF32 rung (MT_TF32_SIMPLE, MT_TF32_PIPELINED, MT_TF32_MMA), or 0. Set:
 * matmul_case calls mt_matmul_tf32_rung (the tensor-core rungs) instead, with
 * inputs already rounded to TF32, so that its products are exact and the
 * float reference holds as for every other rung. */
static int g_tf32 = 0;

/* The TF32 value nearest to v (10 bits of mantissa, ties away from zero), as
 * the GPU's cvt.rna.tf32.f32 and the emulator's __float_to_tf32 round. */
static double tf32_round(double v)
{
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7f800000u) != 0x7f800000u)
        bits = (bits + 0x1000u) & 0xffffe000u;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* A (batch..., rows, cols) input laid out as `layout` says. */
static tt_tensor matrix_input(int dtype, int batch_ndim, const int64_t *batch, int64_t rows, int64_t cols,
                              int layout)
{
    int64_t shape[MT_MAX_DIMS];
    const int transposed = layout == TRANSPOSED;
    for (int d = 0; d < batch_ndim; ++d)
        shape[d] = batch[d];
    shape[batch_ndim] = transposed ? cols : rows;
    shape[batch_ndim + 1] = transposed ? rows : cols;
    tt_tensor x = tt_new(dtype, batch_ndim + 2, shape, layout == RANDOM_LAYOUT ? TT_INPUT : TT_CONTIGUOUS);
    if (transposed)
        transpose_last2(&x);
    tt_fill(&x, -1, 1, 0);
    if (g_tf32) {
        for (int64_t i = 0; i < x.cap; ++i)
            x.host[i] = tf32_round(x.host[i]);
        tt_upload(&x);
    }
    return x;
}

/* One case: out (batch..., M, N) = a (a_batch..., M, K) @ b (b_batch..., K, N),
 * a_batch and b_batch broadcasting to batch. */
static void matmul_case(int algo, int dtype, int batch_ndim, const int64_t *batch, int a_bn,
                        const int64_t *a_batch, int b_bn, const int64_t *b_batch, int64_t M, int64_t N,
                        int64_t K, int a_t, int b_t)
{
    tt_tensor a = matrix_input(dtype, a_bn, a_batch, M, K, a_t);
    tt_tensor b = matrix_input(dtype, b_bn, b_batch, K, N, b_t);
    int64_t out_shape[MT_MAX_DIMS];
    for (int d = 0; d < batch_ndim; ++d)
        out_shape[d] = batch[d];
    out_shape[batch_ndim] = M;
    out_shape[batch_ndim + 1] = N;
    tt_tensor out = tt_new(dtype, batch_ndim + 2, out_shape, TT_OUTPUT);
    tt_case("mt_matmul %s config %d M=%" PRId64 " N=%" PRId64 " K=%" PRId64 ": out %s, a %s%s, b %s%s",
            g_tf32 == 1 + MT_TF32_SIMPLE ? "tf32 simple" : g_tf32 == 1 + MT_TF32_PIPELINED ? "tf32 pipelined" : g_tf32 ? "tf32 mma" : tt_op_name("matmul", algo), g_config, M, N, K, tt_str(&out), tt_str(&a), LAYOUT_NOTE[a_t],
            tt_str(&b), LAYOUT_NOTE[b_t]);

    /* Reference: out[z, i, j] = sum_k a[za, i, k] * b[zb, k, j], where za and
     * zb are the broadcast batch indices of z. */
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t o = 0; o < tt_numel(&out.t); ++o) {
        int64_t idx[MT_MAX_DIMS], ai[MT_MAX_DIMS], bi[MT_MAX_DIMS];
        to_index(o, out.t.shape, out.t.ndim, idx);
        broadcast_index(idx, batch_ndim, a.t.shape, a_bn, ai);
        broadcast_index(idx, batch_ndim, b.t.shape, b_bn, bi);
        ai[a_bn] = idx[batch_ndim];         /* i */
        bi[b_bn + 1] = idx[batch_ndim + 1]; /* j */
        double sum = 0.0, sumsq = 0.0;
        for (int64_t k = 0; k < K; ++k) {
            ai[a_bn + 1] = k;
            bi[b_bn] = k;
            double term = tt_at(&a, ai) * tt_at(&b, bi);
            sum += term;
            sumsq += term * term;
        }
        expect[o] = tt_sum(sum, sumsq, K);
    }

    mt_status status = g_tf32 ? mt_matmul_tf32_rung(out.t, a.t, b.t, g_tf32 - 1)
                       : g_config < 0 ? mt_matmul(out.t, a.t, b.t, algo)
                                      : mt_matmul_with_config(out.t, a.t, b.t, algo, g_config);
    if (tt_expect_ok(status, "mt_matmul")) {
        tt_check_output(&out, expect);
        tt_expect_unchanged(&a, "a");
        tt_expect_unchanged(&b, "b");
    }
    free(expect);
    tt_free(&a);
    tt_free(&b);
    tt_free(&out);
}

/* An unbatched case. */
static void plain_case(int algo, int dtype, int64_t M, int64_t N, int64_t K, int a_t, int b_t)
{
    matmul_case(algo, dtype, 0, NULL, 0, NULL, 0, NULL, M, N, K, a_t, b_t);
}

int main(void)
{
    tt_init("test_matmul");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    static const int64_t batch_sizes[] = {1, 2, 3};

    /* One group per algo of the ladder, named by it ("tiled"), so that
     * MT_TEST_FILTER=tiled runs one rung's cases. */
    for (int algo = 0; algo < MT_MATMUL_ALGO_COUNT; ++algo)
        TT_GROUP("%s", tt_op_name("matmul", algo)) {
            for (int t = 0; t < 2; ++t) {
                int dtype = dtypes[t];

                /* The corners: a 1x1x1 product and the biggest partial tiles. */
                plain_case(algo, dtype, 1, 1, 1, 0, 0);
                plain_case(algo, dtype, 65, 65, 65, 0, 0);
                plain_case(algo, dtype, 33, 31, 7, 0, 0);

                /* A sample of (M, N, K), random layouts. */
                for (int c = 0; c < 12; ++c)
                    plain_case(algo, dtype, TT_PICK(SIZES), TT_PICK(SIZES), TT_PICK(SIZES), 0, 0);

                /* Transposed views of a, of b, of both. */
                plain_case(algo, dtype, 33, 7, 31, 1, 0);
                plain_case(algo, dtype, 7, 33, 65, 0, 1);
                plain_case(algo, dtype, TT_PICK(SIZES), TT_PICK(SIZES), TT_PICK(SIZES), 1, 1);

                /* K = 0: every output element is an empty sum, 0. M or N = 0: nothing. */
                plain_case(algo, dtype, 7, 31, 0, 0, 0);
                plain_case(algo, dtype, 0, 7, 33, 0, 0);
                plain_case(algo, dtype, 7, 0, 33, 0, 0);

                /* Batched: random batch shapes, each input broadcasting to it
                 * (fewer dims, size-1 dims, stride-0 dims from the layout). */
                for (int c = 0; c < 8; ++c) {
                    int64_t batch[MT_MAX_DIMS], a_batch[MT_MAX_DIMS], b_batch[MT_MAX_DIMS];
                    int bn = (int)tt_rand_int(1, 2);
                    for (int d = 0; d < bn; ++d)
                        batch[d] = TT_PICK(batch_sizes);
                    int a_bn = tt_broadcastable_shape(batch, bn, a_batch);
                    int b_bn = tt_broadcastable_shape(batch, bn, b_batch);
                    int64_t M = TT_PICK(SIZES), N = TT_PICK(SIZES), K = TT_PICK(SIZES);
                    M = M > 33 ? 33 : M; /* keeps the emulator fast */
                    matmul_case(algo, dtype, bn, batch, a_bn, a_batch, b_bn, b_batch, M, N, K, tt_chance(0.3),
                                tt_chance(0.3));
                }

                /* A batch of 1 against a batch of 3, both ways, and an empty batch. */
                static const int64_t b3[] = {3}, b1[] = {1}, b0[] = {0}, b23[] = {2, 3};
                matmul_case(algo, dtype, 1, b3, 1, b1, 1, b3, 7, 33, 31, 0, 0);
                matmul_case(algo, dtype, 1, b3, 1, b3, 1, b1, 31, 7, 33, 1, 0);
                matmul_case(algo, dtype, 2, b23, 0, NULL, 1, b3, 7, 7, 7, 0, 1);
                matmul_case(algo, dtype, 1, b0, 1, b0, 1, b1, 7, 7, 7, 0, 0);
            }

            /* The register-blocked rungs tile by 64 or 128 and read 16-byte
             * Packs. Sizes that are multiples of 4 take the Pack path
             * (row-major and transposed operands at offset 0) without being
             * multiples of the tiles; 128 is a whole tile; 1 and 7 make
             * vectorized and warptile copy an operand first (rows that are
             * not a whole number of Packs). */
            static const int64_t PACK_SIZES[] = {4, 36, 68, 132};
            for (int t = 0; t < 2; ++t) {
                int dtype = dtypes[t];
                plain_case(algo, dtype, 132, 68, 36, ROW_MAJOR, ROW_MAJOR);
                plain_case(algo, dtype, 128, 128, 128, ROW_MAJOR, ROW_MAJOR);
                plain_case(algo, dtype, 68, 132, 36, TRANSPOSED, ROW_MAJOR);
                plain_case(algo, dtype, 36, 68, 132, ROW_MAJOR, TRANSPOSED);
                plain_case(algo, dtype, 132, 36, 68, TRANSPOSED, TRANSPOSED);
                plain_case(algo, dtype, 4, 132, 7, ROW_MAJOR, ROW_MAJOR);
                plain_case(algo, dtype, 129, 1, 36, ROW_MAJOR, RANDOM_LAYOUT);
                for (int c = 0; c < 4; ++c)
                    plain_case(algo, dtype, TT_PICK(PACK_SIZES), TT_PICK(PACK_SIZES), TT_PICK(PACK_SIZES),
                               (int)tt_rand_int(0, 2), (int)tt_rand_int(0, 2));
                /* A batch of row-major matrices against one broadcast matrix. */
                static const int64_t b3[] = {3}, b1[] = {1};
                matmul_case(algo, dtype, 1, b3, 1, b3, 1, b1, 36, 68, 132, ROW_MAJOR, ROW_MAJOR);
                matmul_case(algo, dtype, 1, b3, 1, b1, 0, NULL, 68, 36, 36, ROW_MAJOR, TRANSPOSED);
            }
        }

    /* The tensor-core rungs: float32 only, any layout, sizes off their tiles
     * (64 x 64 and 128 x 64) and K steps (8 and 16), whole tiles and more K
     * steps than the pipelined rung has stages, batches.
     * On the emulator (its full checks trap on every raw shared access of
     * the pipelined and mma rungs: seconds a block) 65^3 and 128 x 64 x 16
     * are left to the GPU (129 x 130 x 33 is off every tile and K step,
     * 256 x 128 x 64 whole tiles), two random cases of ten run, the batch
     * of 140 for the pipelined rung only (below); and the group does not run
     * again under the teaching policy: the rungs are called by name, and the
     * operand copies the policy changes are test_map's. tt_all_cases: all. */
    const int all = tt_all_cases();
    const char *policy = getenv("MINITENSOR_KERNELS");
    const int teaching_run = policy && strcmp(policy, "teaching") == 0;
    if (all || !teaching_run) TT_GROUP("tf32") for (int rung = MT_TF32_SIMPLE; rung <= MT_TF32_MMA; ++rung) {
        g_tf32 = 1 + rung;
        plain_case(0, MT_FLOAT32, 1, 1, 1, 0, 0);
        if (all) {
            plain_case(0, MT_FLOAT32, 65, 65, 65, 0, 0);
            plain_case(0, MT_FLOAT32, 128, 64, 16, ROW_MAJOR, ROW_MAJOR);
        }
        plain_case(0, MT_FLOAT32, 129, 130, 33, 0, 0);
        plain_case(0, MT_FLOAT32, 256, 128, 64, ROW_MAJOR, ROW_MAJOR); /* whole tiles, 4 to 8 K steps */
        plain_case(0, MT_FLOAT32, 129, 67, 50, ROW_MAJOR, ROW_MAJOR);  /* rows of 50 and 67: Packs across the edge */
        for (int c = 0; c < (all ? 10 : 2); ++c)
            plain_case(0, MT_FLOAT32, TT_PICK(SIZES), TT_PICK(SIZES), TT_PICK(SIZES), (int)tt_rand_int(0, 2),
                       (int)tt_rand_int(0, 2));
        plain_case(0, MT_FLOAT32, 7, 31, 0, 0, 0);
        static const int64_t b3[] = {3}, b1[] = {1};
        matmul_case(0, MT_FLOAT32, 1, b3, 1, b3, 1, b1, 33, 65, 31, 0, 1);
        /* More tiles than an H100 has SMs: the pipelined rung's wide tile
         * (the emulator counts one SM per worker thread, so it takes both).
         * On the emulator for that rung only: 140 blocks a rung, and the
         * other rungs' batches are the b3 case's. */
        static const int64_t b140[] = {140};
        if (all || rung == MT_TF32_PIPELINED)
            matmul_case(0, MT_FLOAT32, 1, b140, 1, b140, 0, NULL, 9, 11, 37, ROW_MAJOR, ROW_MAJOR);
        g_tf32 = 0;
        int64_t s22[] = {2, 2};
        tt_tensor x = tt_new(MT_FLOAT64, 2, s22, TT_CONTIGUOUS);
        tt_tensor y = tt_new(MT_FLOAT64, 2, s22, TT_CONTIGUOUS);
        tt_case("mt_matmul_tf32_rung %d of float64 operands", rung);
        tt_expect_error(mt_matmul_tf32_rung(y.t, x.t, x.t, rung), MT_ERR_DTYPE, "mt_matmul_tf32_rung", &y);
        tt_free(&x);
        tt_free(&y);
    }
    TT_GROUP("tf32 errors") {
        int64_t s22[] = {2, 2};
        tt_tensor x = tt_new(MT_FLOAT32, 2, s22, TT_INPUT);
        tt_tensor y = tt_new(MT_FLOAT32, 2, s22, TT_OUTPUT);
        tt_fill(&x, -1, 1, 0);
        tt_case("mt_matmul_tf32_rung: rung MT_TF32_TMA + 1, which does not exist");
        if (tt_expect_error(mt_matmul_tf32_rung(y.t, x.t, x.t, MT_TF32_TMA + 1), MT_ERR_INVALID_ARGUMENT,
                            "mt_matmul_tf32_rung", &y))
            TT_CHECK(strstr(mt_last_error(), "unknown TF32 rung 5") != NULL, "%s", mt_last_error());
        tt_free(&x);
        tt_free(&y);
    }

    /* A product of integers (or bools) is refused before anything runs, by
     * every entry point and algo (Python computes it in float). */
    TT_GROUP("int64 refused") {
        int64_t s22[] = {2, 2};
        const int dts[] = {MT_INT64, MT_BOOL};
        for (int t = 0; t < 2; ++t) {
            tt_tensor x = tt_new(dts[t], 2, s22, TT_CONTIGUOUS), y = tt_new(dts[t], 2, s22, TT_CONTIGUOUS);
            tt_fill(&x, 0, 1, TT_INTEGERS);
            for (int algo = 0; algo < MT_MATMUL_ALGO_COUNT; ++algo) {
                tt_case("mt_matmul %s of %s", tt_op_name("matmul", algo), tt_dtype_name(dts[t]));
                if (tt_expect_error(mt_matmul(y.t, x.t, x.t, algo), MT_ERR_DTYPE, "mt_matmul", &y))
                    TT_CHECK(strstr(mt_last_error(), "a has dtype") != NULL, "%s", mt_last_error());
                tt_expect_error(mt_matmul_with_config(y.t, x.t, x.t, algo, -1), MT_ERR_DTYPE, "mt_matmul", &y);
            }
            tt_case("mt_matmul_tf32 of %s", tt_dtype_name(dts[t]));
            tt_expect_error(mt_matmul_tf32(y.t, x.t, x.t), MT_ERR_DTYPE, "mt_matmul_tf32", &y);
            tt_free(&x);
            tt_free(&y);
        }
    }

    /* Every configuration, through its rung's algo and (under the
     * fast kernel policy) the default one; under the teaching policy the
     * default product is tiled, and a config for it is an error. */
    TT_GROUP("configs") {
        tt_case("mt_matmul_config_count / mt_matmul_config_name");
        int configs = mt_matmul_config_count();
        TT_CHECK(configs >= 1, "mt_matmul_config_count() = %d", configs);
        TT_CHECK(mt_matmul_config_name(-1) == NULL, "a name for config -1");
        TT_CHECK(mt_matmul_config_name(configs) == NULL, "a name for config %d (the count)", configs);
        for (int c = 0; c < configs; ++c)
            TT_CHECK(mt_matmul_config_name(c) && mt_matmul_config_name(c)[0], "no name for config %d", c);
        const int teaching = mt_get_kernel_policy() == MT_KERNELS_TEACHING;
        for (g_config = 0; g_config < configs; ++g_config)
            for (int i = 0; i < (teaching ? 1 : 2); ++i)
                for (int t = 0; t < 2; ++t) {
                    /* The config's own rung first, then the default. */
                    int algo = i == 1 ? MT_MATMUL_DEFAULT : config_rung(g_config), dtype = dtypes[t];
                    plain_case(algo, dtype, 132, 68, 36, ROW_MAJOR, ROW_MAJOR);
                    plain_case(algo, dtype, 68, 132, 36, TRANSPOSED, TRANSPOSED);
                    plain_case(algo, dtype, 33, 65, 31, RANDOM_LAYOUT, RANDOM_LAYOUT);
                    /* One tile, K a multiple of 2 Packs, slices of 64 or more:
                     * the split-K configs split it. */
                    plain_case(algo, dtype, 70, 60, 136, ROW_MAJOR, ROW_MAJOR);
                    plain_case(algo, dtype, 100, 64, 128, TRANSPOSED, RANDOM_LAYOUT);
                    /* K long enough for the most slices (16 of 64), as a
                     * weight gradient's sum over tokens: on a GPU of 16 SMs or
                     * more (MINITENSOR_EMU_THREADS=16 on the emulator) a split
                     * config cuts this one-tile product 16 ways. */
                    if (strstr(mt_matmul_config_name(g_config), "split"))
                        plain_case(algo, dtype, 40, 36, 1024, TRANSPOSED, ROW_MAJOR);
                    static const int64_t b2[] = {2};
                    matmul_case(algo, dtype, 1, b2, 1, b2, 0, NULL, 36, 132, 68, ROW_MAJOR, TRANSPOSED);
                }
        g_config = -1;
    }

    /* A config out of range, for an algo without configurations, or for the
     * default product under the teaching policy. */
    TT_GROUP("config errors") {
        int configs = mt_matmul_config_count();
        static const int64_t s33[] = {3, 3};
        tt_tensor a = tt_new(MT_FLOAT32, 2, s33, TT_INPUT), b = tt_new(MT_FLOAT32, 2, s33, TT_INPUT);
        tt_tensor out = tt_new(MT_FLOAT32, 2, s33, TT_OUTPUT);
        tt_fill(&a, -1, 1, 0);
        tt_fill(&b, -1, 1, 0);
        tt_case("mt_matmul_with_config: config %d (the count)", configs);
        tt_expect_error(mt_matmul_with_config(out.t, a.t, b.t, MT_MATMUL_DEFAULT, configs),
                        MT_ERR_INVALID_ARGUMENT, "mt_matmul", &out);
        tt_case("mt_matmul_with_config: config -2");
        tt_expect_error(mt_matmul_with_config(out.t, a.t, b.t, MT_MATMUL_WARPTILE, -2),
                        MT_ERR_INVALID_ARGUMENT, "mt_matmul", &out);
        int first_pipelined = 0;
        while (first_pipelined < configs && config_rung(first_pipelined) != MT_MATMUL_PIPELINED)
            ++first_pipelined;
        TT_CHECK(first_pipelined > 0 && first_pipelined < configs, "warptile's configs, then pipelined's");
        tt_case("mt_matmul_with_config: a pipelined config (%d) for warptile", first_pipelined);
        if (tt_expect_error(mt_matmul_with_config(out.t, a.t, b.t, MT_MATMUL_WARPTILE, first_pipelined),
                            MT_ERR_INVALID_ARGUMENT, "mt_matmul", &out))
            TT_CHECK(strstr(mt_last_error(), "belongs to the pipelined rung") != NULL, "%s", mt_last_error());
        tt_case("mt_matmul_with_config: warptile's config 0 for pipelined");
        tt_expect_error(mt_matmul_with_config(out.t, a.t, b.t, MT_MATMUL_PIPELINED, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_matmul", &out);
        tt_case("mt_matmul_with_config: config 0 for tiled, which has none");
        tt_expect_error(mt_matmul_with_config(out.t, a.t, b.t, MT_MATMUL_TILED, 0), MT_ERR_INVALID_ARGUMENT,
                        "mt_matmul", &out);
        if (mt_get_kernel_policy() == MT_KERNELS_TEACHING) {
            tt_case("mt_matmul_with_config: config 0 for default under the teaching policy (tiled)");
            tt_expect_error(mt_matmul_with_config(out.t, a.t, b.t, MT_MATMUL_DEFAULT, 0),
                            MT_ERR_INVALID_ARGUMENT, "mt_matmul", &out);
        }
        tt_free(&a);
        tt_free(&b);
        tt_free(&out);
    }

    return tt_summary();
}
