/*
 * test_matmul.c: mt_matmul with each algorithm (default, naive, tiled), in
 * float32 and float64.
 *
 * M, N and K come from {1, 7, 31, 33, 65}: partial tiles on every side of a
 * 16- or 32-wide tile. Batches broadcast as in NumPy (a batch of 1, fewer
 * batch dims, stride-0 batch dims); a and b are often transposed or
 * otherwise strided views; K = 0 must give zeros and an empty batch nothing.
 *
 *   make build/tests/emu/test_matmul && build/tests/emu/test_matmul
 *   MT_TEST_SEED=42 build/tests/emu/test_matmul     (replay a run)
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

/* A (batch..., rows, cols) input, a transposed view of a (cols, rows) buffer
 * when `transposed`, a random strided layout otherwise. */
static tt_tensor matrix_input(int dtype, int batch_ndim, const int64_t *batch, int64_t rows, int64_t cols,
                              int transposed)
{
    int64_t shape[MT_MAX_DIMS];
    for (int d = 0; d < batch_ndim; ++d)
        shape[d] = batch[d];
    shape[batch_ndim] = transposed ? cols : rows;
    shape[batch_ndim + 1] = transposed ? rows : cols;
    tt_tensor x = tt_new(dtype, batch_ndim + 2, shape, transposed ? TT_CONTIGUOUS : TT_INPUT);
    if (transposed)
        transpose_last2(&x);
    tt_fill(&x, -1, 1, 0);
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
    tt_case("mt_matmul %s M=%" PRId64 " N=%" PRId64 " K=%" PRId64 ": out %s, a %s%s, b %s%s",
            tt_op_name("matmul", algo), M, N, K, tt_str(&out), tt_str(&a), a_t ? " (transposed)" : "",
            tt_str(&b), b_t ? " (transposed)" : "");

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

    if (tt_expect_ok(mt_matmul(out.t, a.t, b.t, algo), "mt_matmul")) {
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

    for (int algo = 0; algo < MT_MATMUL_ALGO_COUNT; ++algo)
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

    return tt_summary();
}
