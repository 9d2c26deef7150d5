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
 * broadcast operand, and transposed and strided operands (which the rung
 * copies to row-major first). tests/c/test_matmul.c's "tf32" group checks
 * every TF32 rung on TF32 inputs, where the product must be float-exact.
 *
 *   make check-c T=test_matmul_tf32 FILTER=tile
 */
#include "test_util.h"

static const int64_t SIZES[] = {1, 7, 33, 64, 65, 129, 200};

/* One case: out (batch..., M, N) = a (a_batch..., M, K) @ b (b_batch..., K, N)
 * on tile variant `tile`; a and b have a random strided layout (transposed,
 * sliced, broadcast: tt_new's TT_INPUT) where a_any / b_any, else are
 * row-major. */
static void tf32_case(int tile, int batch_ndim, const int64_t *batch, int a_bn, const int64_t *a_batch, int b_bn,
                      const int64_t *b_batch, int64_t M, int64_t N, int64_t K, int a_any, int b_any)
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
    tt_tensor a = tt_new(MT_FLOAT32, a_bn + 2, a_shape, a_any ? TT_INPUT : TT_CONTIGUOUS);
    tt_tensor b = tt_new(MT_FLOAT32, b_bn + 2, b_shape, b_any ? TT_INPUT : TT_CONTIGUOUS);
    tt_tensor out = tt_new(MT_FLOAT32, batch_ndim + 2, out_shape, TT_OUTPUT);
    tt_fill(&a, -1, 1, 0);
    tt_fill(&b, -1, 1, 0);
    tt_case("mt_matmul_tf32_tile %d (%s) M=%" PRId64 " N=%" PRId64 " K=%" PRId64 ": out %s, a %s, b %s", tile,
            tile >= 0 ? mt_matmul_tf32_tile_name(tile) : "the library's choice", M, N, K, tt_str(&out), tt_str(&a),
            tt_str(&b));

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
        /* tt_expect_close's tolerance is atol + rtol sqrt(n) mag (float32:
         * 1e-6 + 1e-5 mag, n = 1): this mag makes it the bound above, plus 1e-6. */
        expect[o].mag = (0x1p-10 * sum_abs + 1e-5 * (1.0 + fabs(sum))) / 1e-5;
    }

    mt_status status = mt_matmul_tf32_tile(out.t, a.t, b.t, tile);
    if (tt_expect_ok(status, "mt_matmul_tf32_tile")) {
        tt_check_output(&out, expect);
        tt_expect_unchanged(&a, "a");
        tt_expect_unchanged(&b, "b");
    }
    free(expect);
    tt_free(&a);
    tt_free(&b);
    tt_free(&out);
}

static void plain(int tile, int64_t M, int64_t N, int64_t K, int a_any, int b_any)
{
    tf32_case(tile, 0, NULL, 0, NULL, 0, NULL, M, N, K, a_any, b_any);
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
            plain(tile, 1, 1, 1, 0, 0);
            plain(tile, 129, 130, 135, 0, 0); /* every edge: see above */
            plain(tile, 7, 33, 0, 0, 0);      /* K = 0: zeros */
            if (all) {
                plain(tile, 129, 130, 33, 0, 0); /* one past 128 on every side, K one past 32 */
                plain(tile, 256, 256, 64, 0, 0); /* whole tiles, 2 K steps */
                plain(tile, 65, 257, 100, 0, 0); /* K = 100: a partial 32-step, rows not 16-byte multiples */
                plain(tile, 40, 24, 160, 0, 0);  /* more K steps than stages */
                for (int c = 0; c < 4; ++c)
                    plain(tile, TT_PICK(SIZES), TT_PICK(SIZES), TT_PICK(SIZES), (int)tt_rand_int(0, 1),
                          (int)tt_rand_int(0, 1));
            }
        }

    /* The library's choice (-1), batched: three products sharing one b, and
     * a batch of a against a broadcast batch dim of b. */
    TT_GROUP("batched") {
        static const int64_t b3[] = {3}, b1[] = {1}, b23[] = {2, 3}, b13[] = {1, 3};
        tf32_case(-1, 1, b3, 1, b3, 0, NULL, 70, 45, 50, 0, 0);
        tf32_case(-1, 1, b3, 1, b3, 1, b1, 33, 65, 31, 0, 1);
        tf32_case(-1, 2, b23, 2, b23, 2, b13, 17, 140, 37, 1, 0);
        plain(-1, 300, 260, 90, 1, 1);
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
        tt_free(&x);
        tt_free(&y);
        tt_free(&d);
        tt_free(&dy);
    }
    return tt_summary();
}
