/*
 * test_matmul_tf32.c: the mma.sync TF32 rung (src/matmul_tf32_mma.cu), each
 * of its tile variants (mt_matmul_tf32_tile), on float32 inputs that are not
 * TF32 already, against a double reference within TF32's rounding:
 *
 *     |got - exact| <= 2^-10 sum_k |a_ik b_kj| + 1e-5 (1 + |exact|)
 *
 * (each input rounded to 11 significant bits is off by at most 2^-11
 * relative, so a product by at most about 2^-10; then float sums), the
 * bound of tests/test_matmul_tf32.py. Sizes off every tile (64, 128, 256
 * rows or columns; K steps of 32), K = 1 and K = 0, batches with a
 * broadcast operand, and strided operands (which the rung copies to
 * row-major first). The mma.sync rung's own tile choice (tile -1,
 * mt_matmul_tf32_tile) reads a transposed operand in place (a column-major view with aligned columns,
 * as F.linear's weight.T or the backward's grad.T): the "transposed" group
 * runs each of the four layouts, aligned and not. The "epilogue" group runs
 * mt_matmul_tf32_epilogue: act(a @ b + bias) + residual and the saved
 * pre-activation, each activation, against the same loop in double.
 * The "wgmma" group runs the wgmma rung (src/matmul_tf32_wgmma.cu), whose
 * truncation to TF32 doubles the bound's 2^-10 (tf32_terms), forced and as
 * mt_matmul_tf32 chooses it, on every layout (the ones it copies K-major
 * first too), checking on the emulator which kernel ran. The "tma" group
 * runs the TMA rung (src/matmul_tf32_tma.cu), the same products fed by TMA
 * copies on a persistent grid.
 * tests/c/test_matmul.c's "tf32" group checks every TF32 rung on TF32
 * inputs, where the product must be float-exact.
 *
 *   make check-c T=test_matmul_tf32 FILTER=tile
 */
#include "test_util.h"

static const int64_t SIZES[] = {1, 7, 33, 64, 65, 129, 200};

/* An operand's layout: row-major, random (transposed, sliced, broadcast:
 * tt_new's TT_INPUT), the transposed view of a row-major buffer (its last
 * two dims swapped: column-major), and those two with the buffer's rows
 * padded to a multiple of 4 floats and 4 more (a slice of a wider buffer:
 * 16-byte aligned rows, or columns, whatever the matrix's width). */
enum { ROW_MAJOR = 0, ANY = 1, TRANSPOSED = 2, PADDED = 3, TRANSPOSED_PADDED = 4 };

/* A float32 operand of `shape` (ndim dims) in `layout`. */
static tt_tensor operand(int ndim, const int64_t *shape, int layout)
{
    if (layout == ROW_MAJOR || layout == ANY)
        return tt_new(MT_FLOAT32, ndim, shape, layout == ANY ? TT_INPUT : TT_CONTIGUOUS);
    const int transposed = layout == TRANSPOSED || layout == TRANSPOSED_PADDED;
    int64_t buffer[MT_MAX_DIMS];
    for (int d = 0; d < ndim; ++d)
        buffer[d] = shape[d];
    if (transposed) {
        buffer[ndim - 2] = shape[ndim - 1];
        buffer[ndim - 1] = shape[ndim - 2];
    }
    const int64_t width = buffer[ndim - 1];
    if (layout != TRANSPOSED)
        buffer[ndim - 1] = (width + 3) / 4 * 4 + 4;
    tt_tensor x = tt_new(MT_FLOAT32, ndim, buffer, TT_CONTIGUOUS);
    x.t.shape[ndim - 1] = width;
    if (transposed) {
        const int64_t s = x.t.strides[ndim - 2];
        x.t.shape[ndim - 2] = shape[ndim - 2];
        x.t.shape[ndim - 1] = shape[ndim - 1];
        x.t.strides[ndim - 2] = x.t.strides[ndim - 1];
        x.t.strides[ndim - 1] = s;
    }
    return x;
}

static const char *const LAYOUT_NAMES[] = {"row-major", "any", "transposed", "row-major, padded rows",
                                           "transposed, padded columns"};

/* The TF32 bound on a sum of products whose sum of |terms| is sum_abs and
 * exact value ref, as tt_expect's mag: tt_expect_close's tolerance is
 * atol + rtol sqrt(n) mag (float32: 1e-6 + 1e-5 mag, n = 1), so this mag
 * makes it 2^-10 sum_abs + 1e-5 (1 + |ref|), plus 1e-6. `terms` is 2^-10
 * for the rounding rungs; the wgmma rung truncates (each operand off by
 * less than 2^-10 relative, a product by 2^-9): 2^-9. */
static double tf32_mag(double terms, double sum_abs, double ref)
{
    return (terms * sum_abs + 1e-5 * (1.0 + fabs(ref))) / 1e-5;
}

/* tf32_case's `tile` for the wgmma rung (mt_matmul_tf32_rung, MT_TF32_WGMMA),
 * the TMA rung (MT_TF32_TMA) and for mt_matmul_tf32, the library's choice between the wgmma and mma.sync
 * rungs (-1 is the mma.sync rung's own tile choice, mt_matmul_tf32_tile). */
enum { WGMMA = -2, CHOICE = -3, TMA = -4 };

/* The bound's factor for a case: 2^-9 where the wgmma rung may run (it, or
 * mt_matmul_tf32 and mt_matmul_tf32_epilogue on any layout: as many
 * 128 x 128 tiles as SMs, which on the emulator, one SM per OS thread, are
 * few), else 2^-10. */
static double tf32_terms(int tile)
{
    return tile == WGMMA || tile == CHOICE || tile == TMA ? 0x1p-9 : 0x1p-10;
}

/* One case: out (batch..., M, N) = a (a_batch..., M, K) @ b (b_batch..., K, N)
 * on tile variant `tile` (-1: mt_matmul_tf32's choice); a and b in layouts
 * a_layout / b_layout. */
static void tf32_case(int tile, int batch_ndim, const int64_t *batch, int a_bn, const int64_t *a_batch, int b_bn,
                      const int64_t *b_batch, int64_t M, int64_t N, int64_t K, int a_layout, int b_layout)
{
    int64_t a_shape[MT_MAX_DIMS], b_shape[MT_MAX_DIMS], out_shape[MT_MAX_DIMS];
    for (int d = 0; d < a_bn; ++d)
        a_shape[d] = a_batch[d];
    for (int d = 0; d < b_bn; ++d)
        b_shape[d] = b_batch[d];
    for (int d = 0; d < batch_ndim; ++d)
        out_shape[d] = batch[d];
    a_shape[a_bn] = M, a_shape[a_bn + 1] = K;
    b_shape[b_bn] = K, b_shape[b_bn + 1] = N;
    out_shape[batch_ndim] = M, out_shape[batch_ndim + 1] = N;
    tt_tensor a = operand(a_bn + 2, a_shape, a_layout);
    tt_tensor b = operand(b_bn + 2, b_shape, b_layout);
    tt_tensor out = tt_new(MT_FLOAT32, batch_ndim + 2, out_shape, TT_OUTPUT);
    tt_fill(&a, -1, 1, 0);
    tt_fill(&b, -1, 1, 0);
    tt_case("mt_matmul_tf32_tile %d (%s) M=%" PRId64 " N=%" PRId64 " K=%" PRId64 ": out %s, a %s (%s), b %s (%s)",
            tile,
            tile >= 0         ? mt_matmul_tf32_tile_name(tile)
            : tile == WGMMA ? "the wgmma rung"
            : tile == TMA     ? "the tma rung"
            : tile == CHOICE  ? "mt_matmul_tf32"
                              : "the mma rung's choice",
            M, N, K, tt_str(&out), tt_str(&a), LAYOUT_NAMES[a_layout], tt_str(&b), LAYOUT_NAMES[b_layout]);

    /* out[z, i, j] = sum_k a[za, i, k] b[zb, k, j], with the TF32 bound as
     * the tolerance: mag = sum_k |a b| (2^-10 of it) over rtol. */
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t o = 0; o < tt_numel(&out.t); ++o) {
        int64_t idx[MT_MAX_DIMS], ai[MT_MAX_DIMS], bi[MT_MAX_DIMS];
        to_index(o, out.t.shape, out.t.ndim, idx);
        broadcast_index(idx, batch_ndim, a.t.shape, a_bn, ai);
        broadcast_index(idx, batch_ndim, b.t.shape, b_bn, bi);
        ai[a_bn] = idx[batch_ndim];
        bi[b_bn + 1] = idx[batch_ndim + 1];
        double sum = 0.0, sum_abs = 0.0;
        for (int64_t k = 0; k < K; ++k) {
            ai[a_bn + 1] = k;
            bi[b_bn] = k;
            const double term = tt_at(&a, ai) * tt_at(&b, bi);
            sum += term;
            sum_abs += fabs(term);
        }
        expect[o] = tt_value(sum);
        expect[o].mag = tf32_mag(tf32_terms(tile), sum_abs, sum);
    }

    mt_status status = tile == WGMMA    ? mt_matmul_tf32_rung(out.t, a.t, b.t, MT_TF32_WGMMA)
                       : tile == TMA    ? mt_matmul_tf32_rung(out.t, a.t, b.t, MT_TF32_TMA)
                       : tile == CHOICE ? mt_matmul_tf32(out.t, a.t, b.t)
                                        : mt_matmul_tf32_tile(out.t, a.t, b.t, tile);
    if (tt_expect_ok(status, tile == WGMMA || tile == TMA ? "mt_matmul_tf32_rung"
                             : tile == CHOICE ? "mt_matmul_tf32"
                                              : "mt_matmul_tf32_tile")) {
        tt_check_output(&out, expect);
        tt_expect_unchanged(&a, "a");
        tt_expect_unchanged(&b, "b");
    }
    free(expect);
    tt_free(&a);
    tt_free(&b);
    tt_free(&out);
}

static void plain(int tile, int64_t M, int64_t N, int64_t K, int a_layout, int b_layout)
{
    tf32_case(tile, 0, NULL, 0, NULL, 0, NULL, M, N, K, a_layout, b_layout);
}

/* The SMs of the device (the "|<n>sm" end of mt_device_key; the emulator's
 * are its OS threads); 0 if the key does not say. */
static int64_t sm_count(void)
{
    char key[320];
    if (mt_device_key(key, sizeof key) != MT_OK)
        return 0;
    const char *bar = strrchr(key, '|');
    long long n = 0;
    return bar && sscanf(bar + 1, "%lldsm", &n) == 1 ? (int64_t)n : 0;
}

/* The last case ran a wgmma kernel (the wgmma rung's or, where TMA reads
 * the operands, the TMA rung's) iff `want` (checked where launches are
 * counted: the emulator). */
static void expect_wgmma_launched(int want)
{
    const int64_t n = mt_launch_count("matmul_tf32_wgmma", NULL);
    const int64_t tma = mt_launch_count("matmul_tf32_tma", NULL);
    if (n >= 0)
        TT_CHECK((n + tma > 0) == want, "matmul_tf32_wgmma and matmul_tf32_tma launched %" PRId64 " times; expected %s",
                 n + tma, want ? "a wgmma kernel" : "the mma.sync rung");
}

/* The last cases ran the TMA rung's kernel (checked where launches are
 * counted), and not the wgmma rung's. */
static void expect_tma_launched(void)
{
    const int64_t n = mt_launch_count("matmul_tf32_tma", NULL);
    const int64_t wgmma = mt_launch_count("matmul_tf32_wgmma", NULL);
    if (n >= 0)
        TT_CHECK(n > 0 && wgmma == 0, "matmul_tf32_tma launched %" PRId64 " times, matmul_tf32_wgmma %" PRId64
                 " times; expected the TMA kernel only", n, wgmma);
}

/* mt_matmul_tf32 on an M x N x K product whose copies into K-major
 * operands, if any, pay (tf32_wgmma_chosen): the wgmma rung wherever it has
 * a 128 x 128 tile for each SM, else the mma.sync rung. */
static void choice_case(int64_t M, int64_t N, int64_t K, int a_layout, int b_layout, int copies_pay)
{
    const int64_t tiles = ((M + 127) / 128) * ((N + 127) / 128);
    mt_reset_launch_counts();
    plain(CHOICE, M, N, K, a_layout, b_layout);
    expect_wgmma_launched(copies_pay && tiles >= sm_count());
}

/* The last case ran the wgmma rung's transposing kernel
 * (matmul_tf32_wgmma_mn.cu) iff `want`, with K split iff `split` (checked
 * where launches are counted: the emulator). */
static void expect_mn_launched(int want, int split)
{
    const int64_t n = mt_launch_count("matmul_tf32_wgmma_mn", NULL);
    const int64_t sums = mt_launch_count("matmul_split_sum", NULL);
    if (n >= 0) {
        TT_CHECK((n > 0) == want, "matmul_tf32_wgmma_mn launched %" PRId64 " times; expected %s", n,
                 want ? "the transposing kernel" : "another");
        TT_CHECK(!want || (sums > 0) == split, "matmul_split_sum launched %" PRId64 " times; expected %s", sums,
                 split ? "a split K" : "none");
    }
}

/* One product on the wgmma rung (want: its transposing kernel ran, K split
 * iff split) or on mt_matmul_tf32 (tile CHOICE). */
static void mn_case(int tile, int64_t M, int64_t N, int64_t K, int a_layout, int b_layout, int want, int split)
{
    mt_reset_launch_counts();
    plain(tile, M, N, K, a_layout, b_layout);
    expect_mn_launched(want, split);
}

/* The products the wgmma and TMA rungs (tile WGMMA or TMA) share: one
 * element; 129 x 131 one past the 128 tile on both sides, K = 68 two whole
 * K-steps and a partial one; K = 200, more K-steps than stages (the ring
 * wraps); K = 0 (zeros); b row-major with K = 37 (rows of 37 floats: both
 * operands copied K-major, rows padded to 16 bytes); a batch of 2 with a
 * broadcast b. */
static void k_major_products(int tile)
{
    plain(tile, 1, 1, 1, ROW_MAJOR, TRANSPOSED);
    plain(tile, 129, 131, 68, ROW_MAJOR, TRANSPOSED);
    plain(tile, 40, 24, 200, ROW_MAJOR, TRANSPOSED);
    plain(tile, 7, 33, 0, ROW_MAJOR, TRANSPOSED);
    plain(tile, 33, 65, 37, ROW_MAJOR, ROW_MAJOR);
    static const int64_t b2[] = {2}, b1[] = {1};
    tf32_case(tile, 1, b2, 1, b2, 1, b1, 36, 72, 100, ROW_MAJOR, TRANSPOSED);
}

/* act(z) in double, as torch defines it (test_matmul_epilogue.c's). */
static double act_ref(int act, double z)
{
    switch (act) {
    case MT_EPILOGUE_RELU:
        return z < 0.0 ? 0.0 : z;
    case MT_EPILOGUE_GELU:
        return 0.5 * z * (1.0 + erf(z / sqrt(2.0)));
    case MT_EPILOGUE_GELU_TANH:
        return 0.5 * z * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (z + 0.044715 * z * z * z)));
    default:
        return z;
    }
}

/* One case of mt_matmul_tf32_epilogue: out (batch, M, N) = act(a (batch, M,
 * K) @ b (K, N) + bias) + residual, batch 0 meaning no batch dim, pre = the
 * sum before the activation; flags as mt_matmul_epilogue's. b in b_layout
 * (TRANSPOSED: F.linear's weight.T), a row-major or transposed. */
static void epilogue_case(int act, int flags, int64_t batch, int64_t M, int64_t N, int64_t K, int a_layout,
                          int b_layout)
{
    const int lead = batch > 0;
    int64_t a_shape[3] = {batch, M, K}, out_shape[3] = {batch, M, N}, b_shape[2] = {K, N}, bias_shape[1] = {N};
    tt_tensor a = operand(2 + lead, a_shape + 1 - lead, a_layout);
    tt_tensor b = operand(2, b_shape, b_layout);
    tt_tensor bias = tt_new(MT_FLOAT32, 1, bias_shape, TT_INPUT);
    tt_tensor out = tt_new(MT_FLOAT32, 2 + lead, out_shape + 1 - lead, TT_OUTPUT);
    tt_tensor pre = tt_new(MT_FLOAT32, 2 + lead, out_shape + 1 - lead, TT_OUTPUT);
    tt_tensor res = tt_new(MT_FLOAT32, 2 + lead, out_shape + 1 - lead, TT_INPUT);
    tt_fill(&a, -1, 1, 0);
    tt_fill(&b, -1, 1, 0);
    tt_fill(&bias, -1, 1, 0);
    tt_fill(&res, -1, 1, 0);
    tt_case("mt_matmul_tf32_epilogue %s flags %d M=%" PRId64 " N=%" PRId64 " K=%" PRId64 ": out %s, a %s (%s), "
            "b %s (%s), bias %s, residual %s",
            tt_op_name("epilogue_act", act), flags, M, N, K, tt_str(&out), tt_str(&a), LAYOUT_NAMES[a_layout],
            tt_str(&b), LAYOUT_NAMES[b_layout], tt_str(&bias), tt_str(&res));

    /* z within the TF32 bound (the bias adds one float rounding); the
     * activations' slopes are at most ~1.13, so y's error is z's at most
     * 1.2 times, plus the roundings of the activation and the residual add. */
    tt_expect *expect = tt_expect_alloc(&out);
    tt_expect *expect_pre = tt_expect_alloc(&pre);
    for (int64_t o = 0; o < tt_numel(&out.t); ++o) {
        int64_t idx[3], ai[3], bi[2];
        to_index(o, out.t.shape, out.t.ndim, idx);
        const int64_t i = idx[lead], j = idx[lead + 1];
        double sum = 0.0, sum_abs = 0.0;
        for (int64_t k = 0; k < K; ++k) {
            ai[0] = idx[0];
            ai[lead] = i;
            ai[lead + 1] = k;
            bi[0] = k;
            bi[1] = j;
            const double term = tt_at(&a, ai) * tt_at(&b, bi);
            sum += term;
            sum_abs += fabs(term);
        }
        tt_expect z = tt_value(sum);
        if (flags & MT_EPILOGUE_BIAS)
            z.ref += tt_at(&bias, &j);
        z.mag = tf32_mag(tf32_terms(CHOICE), sum_abs, z.ref) + fabs(z.ref);
        expect_pre[o] = z;
        tt_expect y = z;
        y.ref = act_ref(act, z.ref);
        if (flags & MT_EPILOGUE_RESIDUAL)
            y.ref += tt_at(&res, idx);
        y.mag = 1.2 * z.mag + 1.0 + fabs(y.ref);
        expect[o] = y;
    }
    mt_status status = mt_matmul_tf32_epilogue(out.t, a.t, b.t, bias.t, res.t, pre.t, act, flags);
    if (tt_expect_ok(status, "mt_matmul_tf32_epilogue")) {
        tt_check_output(&out, expect);
        if (flags & MT_EPILOGUE_PRE)
            tt_check_output(&pre, expect_pre);
        else
            tt_expect_unchanged(&pre, "pre (not asked for)");
        tt_expect_unchanged(&a, "a");
        tt_expect_unchanged(&b, "b");
        tt_expect_unchanged(&bias, "bias");
        tt_expect_unchanged(&res, "residual");
    }
    free(expect);
    free(expect_pre);
    tt_free(&a);
    tt_free(&b);
    tt_free(&bias);
    tt_free(&out);
    tt_free(&pre);
    tt_free(&res);
}

int main(void)
{
    tt_init("test_matmul_tf32");
    const int tiles = mt_matmul_tf32_tile_count();

    /* Each tile variant, named by its number ("tile 2"). Under the
     * emulator's full checks every raw shared access of these kernels traps
     * (seconds a block), so there each variant runs three cases: one
     * element, K = 0, and one product that holds every edge of the others:
     * 129 x 130 is one past 128 on both sides (a whole tile and a partial
     * one in each dim for the 128 tiles, a partial tile for 256, three row
     * tiles for 64), K = 135 is 4 whole 32-steps (more than any variant's
     * stages: the ring wraps) and a partial one, and rows of 135 and 130
     * floats are no 16-byte multiples (both operands copied). Strided and
     * batched operands go through the same copy before any variant: the
     * "batched" group runs them. The GPU (or MT_TEST_ALL_CASES=1) runs the
     * rest on every variant. */
    const int all = tt_all_cases();
    for (int tile = 0; tile < tiles; ++tile)
        TT_GROUP("tile %d", tile) {
            plain(tile, 1, 1, 1, ROW_MAJOR, ROW_MAJOR);
            plain(tile, 129, 130, 135, ROW_MAJOR, ROW_MAJOR); /* every edge: see above */
            plain(tile, 7, 33, 0, ROW_MAJOR, ROW_MAJOR);      /* K = 0: zeros */
            if (all) {
                plain(tile, 129, 130, 33, 0, 0); /* one past 128 on every side, K one past 32 */
                plain(tile, 256, 256, 64, 0, 0); /* whole tiles, 2 K steps */
                plain(tile, 65, 257, 100, 0, 0); /* K = 100: a partial 32-step, rows not 16-byte multiples */
                plain(tile, 40, 24, 160, 0, 0);  /* more K steps than stages */
                for (int c = 0; c < 4; ++c)
                    plain(tile, TT_PICK(SIZES), TT_PICK(SIZES), TT_PICK(SIZES), (int)tt_rand_int(0, 2),
                          (int)tt_rand_int(0, 2));
            }
        }

    /* The wgmma rung (mt_matmul_tf32_rung, MT_TF32_WGMMA; a GPU of compute
     * capability 9.0, or the emulator). It reads a row-major and b
     * transposed (K-major both) in place: one element; 129 x 131 one past
     * the 128 tile on both sides (the 6-stage 128 x 128 tile on the
     * emulator's few SMs), K = 68 two whole K-steps and a partial one; K =
     * 200, more K-steps than stages (the ring wraps); K = 0. Other layouts
     * are copied into those (b transposed): row-major b, K = 37 (rows of 37
     * floats), strided views. Batched, with a broadcast b. */
    TT_GROUP("wgmma") {
        k_major_products(WGMMA);
        plain(WGMMA, 20, 9, 16, TRANSPOSED, ANY);
        static const int64_t b2[] = {2}, b1[] = {1};
        /* batched and both copied: a (2, 36, 40) transposed, the broadcast b row-major (copied once) */
        tf32_case(WGMMA, 1, b2, 1, b2, 1, b1, 36, 72, 40, TRANSPOSED, ROW_MAJOR);
        /* mt_matmul_tf32 (and the epilogue) on the layouts whose operand the
         * wgmma rung copies into K-major first: b row-major (x @ W, the
         * backward's dY @ W: b transposed into a copy), a transposed (dY^T @
         * X: a copied row-major), both. Each is wgmma where the copy pays
         * (N, resp. M, >= 512: tf32_wgmma_chosen) and there are tiles enough
         * (the emulator has few SMs), else mma.sync: 130 x 132 with a
         * transposed a copies more than it saves. */
        choice_case(530, 130, 24, ROW_MAJOR, ROW_MAJOR, 1);
        choice_case(130, 530, 24, TRANSPOSED, TRANSPOSED, 1);
        choice_case(130, 132, 24, TRANSPOSED, ROW_MAJOR, 0);
        choice_case(200, 136, 40, ROW_MAJOR, TRANSPOSED, 1); /* in place: the copies' rule has nothing to pay */
        mt_reset_launch_counts();
        epilogue_case(MT_EPILOGUE_GELU, MT_EPILOGUE_BIAS | MT_EPILOGUE_RESIDUAL | MT_EPILOGUE_PRE, 0, 530, 130, 24,
                      ROW_MAJOR, ROW_MAJOR);
        expect_wgmma_launched(((530 + 127) / 128) * ((130 + 127) / 128) >= sm_count());
        if (all) {
            choice_case(1030, 1030, 8, TRANSPOSED, ROW_MAJOR, 1); /* both copied */
            for (int c = 0; c < 4; ++c)
                plain(WGMMA, TT_PICK(SIZES), TT_PICK(SIZES), TT_PICK(SIZES), (int)tt_rand_int(0, 2),
                      (int)tt_rand_int(0, 2));
            /* The library's choice where it is wgmma on an H100 (132 SMs):
             * 133 x 2 tiles of 128 x 128 and 133 of 128 x 256 (the wide
             * tile), plain and with the epilogue, as the Linear forward. */
            plain(CHOICE, 16900, 130, 40, ROW_MAJOR, TRANSPOSED);
            epilogue_case(MT_EPILOGUE_GELU, MT_EPILOGUE_BIAS | MT_EPILOGUE_RESIDUAL | MT_EPILOGUE_PRE, 0, 16900, 130,
                          40, ROW_MAJOR, TRANSPOSED);
        }
    }

    /* The TMA rung (MT_TF32_TMA, src/matmul_tf32_tma.cu): the same products,
     * fed by a producer warpgroup's TMA copies. One element; 129 x 131 off
     * the tile on both sides with K = 68 a partial 32-step (TMA zero-fills
     * every edge); K = 200, more steps than stages (the ring wraps, the
     * barriers' parity turns); K = 520, more than twice the stages (a stage
     * handed back before the products that read it ran is refilled while
     * they wait: NaN on the emulator); 300 x 520 x 300, more tiles than the
     * emulator's SMs, so that each block of the persistent grid walks
     * several tiles and its steps' stages and parities run on across them;
     * K = 0 (no copy, zeros). Copied operands (b row-major, K = 37 rows
     * padded to 16 bytes); a batch of 2 with a broadcast b, and batches
     * (2, 3) with b's (3) broadcast over the first (3-D maps: b's matrix of
     * each batch by its ordinal). The emulator lands each copy at the
     * consumers' wait on its barrier and fills its box with NaN until then,
     * so a read before that wait gets NaN or the previous tile's values. */
    TT_GROUP("tma") {
        mt_reset_launch_counts();
        k_major_products(TMA);
        plain(TMA, 40, 24, 520, ROW_MAJOR, TRANSPOSED);
        plain(TMA, 300, 520, 300, ROW_MAJOR, TRANSPOSED);
        static const int64_t b23[] = {2, 3}, b3[] = {3};
        tf32_case(TMA, 2, b23, 2, b23, 1, b3, 70, 40, 100, ROW_MAJOR, TRANSPOSED);
        expect_tma_launched();
        if (all)
            for (int c = 0; c < 4; ++c)
                plain(TMA, TT_PICK(SIZES), TT_PICK(SIZES), TT_PICK(SIZES), (int)tt_rand_int(0, 2),
                      (int)tt_rand_int(0, 2));
    }

    /* The wgmma rung's transposing stages (src/matmul_tf32_wgmma_mn.cu): a
     * column-major (a = dz.T of a weight gradient) and b row-major, read in
     * place. 130 x 136 x 136: off the 128 tile on both sides, M = 130 not a
     * multiple of 4 (the padded columns: the last Pack of a column crosses
     * the edge), K 4 whole 32-steps and a partial one, more than the 3
     * stages; too short a K to split. 33 x 7 x 260: one tile, K split in
     * slices of 160 and 100 where the emulator has two SMs or more (its OS
     * threads), N = 7 a partial Pack of b. (Under the full checks each
     * float a block stores into a stage faults: ~0.3 s a block and K-step of
     * 32, hence the short K.)
     * Batched with a broadcast b (never split), K = 0, one element (padded:
     * the guard pages of the full checks put a lone float's buffer off 16
     * bytes, which the copying kernel would take).
     * mt_matmul_tf32 takes the kernel from 2^30 multiply-adds
     * (tf32_wgmma_mn_chosen): not at 12 x 8 x 40; at 1024^3 on the GPU
     * (every case there). */
    TT_GROUP("wgrad") {
        const int split = sm_count() > 1;
        mn_case(WGMMA, 130, 136, 136, TRANSPOSED_PADDED, ROW_MAJOR, 1, 0);
        mn_case(WGMMA, 33, 7, 260, TRANSPOSED_PADDED, PADDED, 1, split);
        mn_case(WGMMA, 8, 12, 0, TRANSPOSED, ROW_MAJOR, 1, 0);
        mn_case(WGMMA, 1, 1, 1, TRANSPOSED_PADDED, PADDED, 1, 0);
        static const int64_t b2[] = {2}, b1[] = {1};
        mt_reset_launch_counts();
        tf32_case(WGMMA, 1, b2, 1, b2, 1, b1, 36, 72, 40, TRANSPOSED, ROW_MAJOR);
        expect_mn_launched(1, 0);
        mn_case(CHOICE, 12, 8, 40, TRANSPOSED, ROW_MAJOR, 0, 0); /* far below 2^30: mma.sync */
        /* a row-major: the copying kernel (a K-major already, b copied) */
        mn_case(WGMMA, 36, 40, 100, ROW_MAJOR, ROW_MAJOR, 0, 0);
        if (all) {
            mn_case(WGMMA, 130, 136, 2000, TRANSPOSED, PADDED, 1, sm_count() > 4);
            for (int c = 0; c < 4; ++c)
                plain(WGMMA, TT_PICK(SIZES), TT_PICK(SIZES), TT_PICK(SIZES), TRANSPOSED_PADDED, PADDED);
            /* 1024^3 (2^30): 64 tiles of 128 x 128, fewer than an H100's
             * SMs, so not the copying kernel; split K on a GPU */
            mt_reset_launch_counts();
            plain(CHOICE, 1024, 1024, 1024, TRANSPOSED, ROW_MAJOR);
            if (sm_count() > 64)
                expect_mn_launched(1, 1);
        }
    }

    /* The mma.sync rung's choice (-1), batched: three products sharing one b, and
     * a batch of a against a broadcast batch dim of b. */
    TT_GROUP("batched") {
        static const int64_t b3[] = {3}, b1[] = {1}, b23[] = {2, 3}, b13[] = {1, 3};
        tf32_case(-1, 1, b3, 1, b3, 0, NULL, 70, 45, 50, 0, 0);
        tf32_case(-1, 1, b3, 1, b3, 1, b1, 33, 65, 31, 0, 1);
        tf32_case(-1, 2, b23, 2, b23, 2, b13, 17, 140, 37, 1, 0);
        plain(-1, 300, 260, 90, ANY, ANY);
    }

    /* The mma.sync rung's choice (-1) on each layout of a and b. Columns of 68 or 132
     * floats are 16-byte multiples, read in place (k-major stages for A,
     * n-major for B); 130 and 37 are not, and are copied. 129 x 131 is off
     * the 128 tile on both sides; K = 132 is 4 whole 32-steps and a partial
     * one; 300 x 260 takes the smaller tile (fewer tiles than SMs on a GPU,
     * any tile on the emulator). Batched: a transposed (2, K, M) buffer. */
    TT_GROUP("transposed") {
        for (int al = ROW_MAJOR; al <= TRANSPOSED; al += 2)
            for (int bl = ROW_MAJOR; bl <= TRANSPOSED; bl += 2) {
                if (al == ROW_MAJOR && bl == ROW_MAJOR)
                    continue; /* the groups above */
                plain(-1, 132, 68, 132, al, bl);
                plain(-1, 129, 131, 68, al, bl);
                plain(-1, 33, 65, 37, al, bl);
                plain(-1, 1, 1, 1, al, bl);
            }
        /* Vectors: a (K, 1) column with unit row stride is read column-major
         * (its rows are not 16-byte aligned), a (1, K) row row-major. */
        plain(-1, 37, 1, 40, ROW_MAJOR, TRANSPOSED);
        plain(-1, 1, 37, 40, TRANSPOSED, ROW_MAJOR);
        static const int64_t b2[] = {2}, b1[] = {1};
        tf32_case(-1, 1, b2, 1, b2, 0, NULL, 68, 40, 36, TRANSPOSED, TRANSPOSED);
        tf32_case(-1, 1, b2, 1, b2, 1, b1, 36, 72, 100, ROW_MAJOR, TRANSPOSED);
    }

    /* Split-K (a single product with fewer tiles than the GPU's block
     * slots, K long enough): slices of 256 or more, summed by a second
     * kernel, the epilogue there. On the emulator (as many SMs as threads)
     * and the GPU alike, these few-tile products split K: a weight
     * gradient's layout (a = grad.T) among them. */
    TT_GROUP("split") {
        plain(-1, 36, 40, 1024, ROW_MAJOR, ROW_MAJOR);
        plain(-1, 40, 36, 512, TRANSPOSED, ROW_MAJOR);
        plain(-1, 33, 20, 520, ROW_MAJOR, TRANSPOSED); /* two slices of 260: a partial K-tile each */
        epilogue_case(MT_EPILOGUE_GELU, MT_EPILOGUE_BIAS | MT_EPILOGUE_RESIDUAL | MT_EPILOGUE_PRE, 0, 20, 36, 512,
                      ROW_MAJOR, TRANSPOSED);
    }

    /* mt_matmul_tf32_epilogue: every activation with every operand of the
     * epilogue, the Linear's layouts (b = weight.T; a row-major or, as a
     * backward's grad.T, transposed), off the tiles, batched, K = 0. */
    TT_GROUP("epilogue") {
        const int every = MT_EPILOGUE_BIAS | MT_EPILOGUE_RESIDUAL | MT_EPILOGUE_PRE;
        for (int act = 0; act < MT_EPILOGUE_ACT_COUNT; ++act) {
            epilogue_case(act, every, 0, 129, 132, 68, ROW_MAJOR, TRANSPOSED);
            epilogue_case(act, MT_EPILOGUE_BIAS, 0, 33, 65, 37, ROW_MAJOR, TRANSPOSED);
        }
        epilogue_case(MT_EPILOGUE_GELU, MT_EPILOGUE_PRE, 2, 40, 36, 36, ROW_MAJOR, TRANSPOSED);
        epilogue_case(MT_EPILOGUE_RELU, MT_EPILOGUE_RESIDUAL, 0, 36, 130, 64, TRANSPOSED, ROW_MAJOR);
        epilogue_case(MT_EPILOGUE_GELU_TANH, every, 0, 7, 9, 5, ANY, ANY);
        epilogue_case(MT_EPILOGUE_GELU, every, 0, 7, 9, 0, ROW_MAJOR, TRANSPOSED); /* K = 0: act(bias) + residual */
        epilogue_case(MT_EPILOGUE_NONE, 0, 0, 1, 1, 1, ROW_MAJOR, ROW_MAJOR);
    }

    TT_GROUP("errors") {
        int64_t s22[] = {2, 2};
        tt_tensor x = tt_new(MT_FLOAT32, 2, s22, TT_INPUT);
        tt_tensor y = tt_new(MT_FLOAT32, 2, s22, TT_OUTPUT);
        tt_tensor d = tt_new(MT_FLOAT64, 2, s22, TT_CONTIGUOUS);
        tt_tensor dy = tt_new(MT_FLOAT64, 2, s22, TT_CONTIGUOUS);
        tt_fill(&x, -1, 1, 0);
        tt_case("mt_matmul_tf32_tile: tile %d, one past the last", tiles);
        if (tt_expect_error(mt_matmul_tf32_tile(y.t, x.t, x.t, tiles), MT_ERR_INVALID_ARGUMENT, "mt_matmul_tf32_tile",
                            &y))
            TT_CHECK(strstr(mt_last_error(), "unknown TF32 tile variant") != NULL, "%s", mt_last_error());
        tt_case("mt_matmul_tf32_tile_name of tiles -1 and %d", tiles);
        TT_CHECK(mt_matmul_tf32_tile_name(-1) == NULL && mt_matmul_tf32_tile_name(tiles) == NULL, "a name");
        tt_case("mt_matmul_tf32_tile of float64 operands");
        tt_expect_error(mt_matmul_tf32_tile(dy.t, d.t, d.t, 0), MT_ERR_DTYPE, "mt_matmul_tf32_tile", &dy);
        tt_case("mt_matmul_tf32_epilogue of float64 operands");
        tt_expect_error(mt_matmul_tf32_epilogue(dy.t, d.t, d.t, dy.t, dy.t, dy.t, MT_EPILOGUE_NONE, 0), MT_ERR_DTYPE,
                        "mt_matmul_tf32_epilogue", &dy);
        tt_case("mt_matmul_tf32_epilogue with a bias of the wrong length");
        if (tt_expect_error(mt_matmul_tf32_epilogue(y.t, x.t, x.t, x.t, y.t, y.t, MT_EPILOGUE_NONE, MT_EPILOGUE_BIAS),
                            MT_ERR_SHAPE, "mt_matmul_tf32_epilogue", &y))
            TT_CHECK(strstr(mt_last_error(), "bias") != NULL, "%s", mt_last_error());
        tt_free(&x);
        tt_free(&y);
        tt_free(&d);
        tt_free(&dy);
    }
    return tt_summary();
}
