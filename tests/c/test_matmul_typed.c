/*
 * test_matmul_typed.c: the typed-dimension rung (blocktile_2d_typed,
 * src/matmul_blocktile_2d_typed.cu) against the rung it rewrites
 * (blocktile_2d): the same products bit for bit, since only the index
 * arithmetic differs and every output is the same sum in the same order.
 * (Against a float64 reference both are checked by test_matmul's groups
 * "blocktile_2d" and "blocktile_2d_typed", with every other rung.)
 *
 * Sizes off the 128 x 128 x 8 tiles on every side (1, 7, 127, 129, 200),
 * strided, transposed and broadcast batched operands, K = 0 (zeros).
 *
 *   make check-c T=test_matmul_typed               (emulator, full checks)
 *   make check-c T=test_matmul_typed BACKEND=cuda  (GPU)
 */
#include "test_util.h"

static const int64_t SIZES[] = {1, 7, 127, 129, 200};

/* out1 and out2, both of `shape`, hold the same values (compared exactly,
 * element by element through each one's own layout). */
static void expect_same(const tt_tensor *out1, const tt_tensor *out2)
{
    double *v1 = malloc((size_t)(out1->cap ? out1->cap : 1) * sizeof(double));
    double *v2 = malloc((size_t)(out2->cap ? out2->cap : 1) * sizeof(double));
    if (tt_download(out1, v1) && tt_download(out2, v2)) {
        for (int64_t o = 0; o < tt_numel(&out1->t); ++o) {
            int64_t idx[MT_MAX_DIMS];
            to_index(o, out1->t.shape, out1->t.ndim, idx);
            const double x = v1[tt_pos(out1, idx)], y = v2[tt_pos(out2, idx)];
            if (!(x == y)) {
                tt_fail("blocktile_2d wrote %.17g at %s, blocktile_2d_typed %.17g", x,
                        tt_index_str(idx, out1->t.ndim), y);
                break;
            }
        }
    }
    free(v1);
    free(v2);
}

/* out (batch, M, N) = a (a_batch, M, K) @ b (K, N) by both rungs; a_batch is
 * batch or 1 (broadcast), `transposed` makes b a transposed view. */
static void typed_case(int dtype, int64_t batch, int64_t a_batch, int64_t M, int64_t N, int64_t K, int transposed)
{
    const int64_t a_shape[3] = {a_batch, M, K};
    const int64_t b_shape[2] = {transposed ? N : K, transposed ? K : N};
    const int64_t out_shape[3] = {batch, M, N};
    tt_tensor a = tt_new(dtype, 3, a_shape, TT_INPUT);
    tt_tensor b = tt_new(dtype, 2, b_shape, transposed ? TT_CONTIGUOUS : TT_INPUT);
    if (transposed) { /* (N, K) storage seen as (K, N) */
        b.t.shape[0] = K, b.t.shape[1] = N;
        const int64_t s = b.t.strides[0];
        b.t.strides[0] = b.t.strides[1], b.t.strides[1] = s;
    }
    tt_fill(&a, -1, 1, 0);
    tt_fill(&b, -1, 1, 0);
    tt_tensor out1 = tt_new(dtype, 3, out_shape, TT_OUTPUT);
    tt_tensor out2 = tt_new(dtype, 3, out_shape, TT_OUTPUT);
    tt_case("blocktile_2d_typed = blocktile_2d, %s: out %s, a %s, b %s%s", dtype == MT_FLOAT32 ? "float32" : "float64",
            tt_str(&out1), tt_str(&a), tt_str(&b), transposed ? " (transposed)" : "");
    if (tt_expect_ok(mt_matmul(out1.t, a.t, b.t, MT_MATMUL_BLOCKTILE_2D), "mt_matmul blocktile_2d") &&
        tt_expect_ok(mt_matmul(out2.t, a.t, b.t, MT_MATMUL_BLOCKTILE_2D_TYPED), "mt_matmul blocktile_2d_typed")) {
        expect_same(&out1, &out2);
        if (K == 0) { /* an empty sum: zeros (not the poison tt_new left) */
            double *v = malloc((size_t)out2.cap * sizeof(double));
            if (tt_download(&out2, v)) {
                int64_t idx[MT_MAX_DIMS] = {0, 0, 0};
                if (v[tt_pos(&out2, idx)] != 0.0)
                    tt_fail("K = 0 wrote %g, not 0", v[tt_pos(&out2, idx)]);
            }
            free(v);
        }
        tt_expect_unchanged(&a, "a");
        tt_expect_unchanged(&b, "b");
    }
    tt_free(&a);
    tt_free(&b);
    tt_free(&out1);
    tt_free(&out2);
}

int main(void)
{
    tt_init("test_matmul_typed");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    TT_GROUP("same as blocktile_2d") for (int d = 0; d < 2; ++d) {
        /* M and N over SIZES (K off the 8-deep tile), and the other way round. */
        for (int i = 0; i < 5; ++i)
            typed_case(dtypes[d], 1, 1, SIZES[i], SIZES[(i + 2) % 5], 1 + 4 * i, i % 2);
        typed_case(dtypes[d], 3, 1, 33, 65, 17, 0); /* a broadcast over the batch */
        typed_case(dtypes[d], 2, 2, 130, 7, 9, 1);
        typed_case(dtypes[d], 1, 1, 5, 6, 0, 0);    /* K = 0 */
    }
    TT_GROUP("empty") {
        const int64_t a_shape[2] = {0, 4}, b_shape[2] = {4, 3}, out_shape[2] = {0, 3};
        tt_tensor a = tt_new(MT_FLOAT32, 2, a_shape, TT_INPUT);
        tt_tensor b = tt_new(MT_FLOAT32, 2, b_shape, TT_INPUT);
        tt_tensor out = tt_new(MT_FLOAT32, 2, out_shape, TT_OUTPUT);
        tt_case("an empty product (M = 0) launches nothing and succeeds");
        tt_expect_ok(mt_matmul(out.t, a.t, b.t, MT_MATMUL_BLOCKTILE_2D_TYPED), "mt_matmul blocktile_2d_typed");
        tt_free(&a);
        tt_free(&b);
        tt_free(&out);
    }
    return tt_summary();
}
