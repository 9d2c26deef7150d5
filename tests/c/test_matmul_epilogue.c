/*
 * test_matmul_epilogue.c: mt_matmul_epilogue, out = act(a @ b + bias) +
 * residual in the warptile kernel's store, against a loop in double: each
 * activation (none, relu, gelu, gelu_tanh), with and without the bias, the
 * residual and the saved pre-activation, in float32 and float64.
 *
 * M, N and K come from {1, 7, 33, 65, 130} (partial tiles on every side of
 * the 64- and 128-wide tiles); a and b are random strided views or
 * transposed ones (b as F.linear's weight.T), bias a strided (N,) view,
 * residual a random layout of out's shape (stride 0 where it broadcasts),
 * or out itself; batched products with a broadcast b; K = 0 gives
 * act(bias) + residual. Every tile configuration, warptile's and
 * pipelined's (what the autotuner chooses from), on cases off its tiles. Then the bad arguments.
 *
 *   make check-c T=test_matmul_epilogue FILTER=gelu
 *   MT_TEST_SEED=42 build/tests/emu/test_matmul_epilogue
 */
#include "test_util.h"

static const int64_t SIZES[] = {1, 7, 33, 65, 130};

/* The tile configuration epilogue_case passes (-1: the library's choice). */
static int epilogue_config = -1;

/* act(z) in double, as torch defines it. */
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

/* One case: out (batch, M, N) = act(a (batch, M, K) @ b (K, N) + bias) +
 * residual, batch 0 meaning no batch dim; flags as mt_matmul_epilogue's.
 * b_transposed: b is a transposed view of a row-major (N, K) buffer.
 * residual_is_out: out holds the residual on entry (in-place add). */
static void epilogue_case(int dtype, int act, int flags, int64_t batch, int64_t M, int64_t N, int64_t K,
                          int b_transposed, int residual_is_out)
{
    const int lead = batch > 0;
    int64_t a_shape[3] = {batch, M, K}, out_shape[3] = {batch, M, N};
    int64_t b_shape[2] = {b_transposed ? N : K, b_transposed ? K : N}, bias_shape[1] = {N};
    tt_tensor a = tt_new(dtype, 2 + lead, a_shape + 1 - lead, TT_INPUT);
    tt_tensor b = tt_new(dtype, 2, b_shape, b_transposed ? TT_CONTIGUOUS : TT_INPUT);
    if (b_transposed) { /* (N, K) row-major seen as (K, N) */
        int64_t s = b.t.strides[0];
        b.t.shape[0] = K;
        b.t.shape[1] = N;
        b.t.strides[0] = b.t.strides[1];
        b.t.strides[1] = s;
    }
    tt_tensor bias = tt_new(dtype, 1, bias_shape, TT_INPUT);
    tt_tensor out = tt_new(dtype, 2 + lead, out_shape + 1 - lead, TT_OUTPUT);
    tt_tensor pre = tt_new(dtype, 2 + lead, out_shape + 1 - lead, TT_OUTPUT);
    tt_tensor res = tt_new(dtype, 2 + lead, out_shape + 1 - lead, TT_INPUT);
    tt_fill(&a, -1, 1, 0);
    tt_fill(&b, -1, 1, 0);
    tt_fill(&bias, -1, 1, 0);
    tt_fill(&res, -1, 1, 0);
    if (residual_is_out) {
        tt_fill(&out, -1, 1, 0);
        flags |= MT_EPILOGUE_RESIDUAL;
    }
    const tt_tensor *residual = residual_is_out ? &out : &res;
    tt_case("mt_matmul_epilogue %s flags %d M=%" PRId64 " N=%" PRId64 " K=%" PRId64 ": out %s, a %s, b %s%s, "
            "bias %s, residual %s",
            tt_op_name("epilogue_act", act), flags, M, N, K, tt_str(&out), tt_str(&a), tt_str(&b),
            b_transposed ? " (transposed)" : "", tt_str(&bias), residual_is_out ? "out" : tt_str(&res));

    tt_expect *expect = tt_expect_alloc(&out);
    tt_expect *expect_pre = tt_expect_alloc(&pre);
    for (int64_t o = 0; o < tt_numel(&out.t); ++o) {
        int64_t idx[3], ai[3], bi[2];
        to_index(o, out.t.shape, out.t.ndim, idx);
        const int64_t i = idx[lead], j = idx[lead + 1];
        double sum = 0.0, sumsq = 0.0;
        for (int64_t k = 0; k < K; ++k) {
            ai[0] = idx[0];
            ai[lead] = i;
            ai[lead + 1] = k;
            bi[0] = k;
            bi[1] = j;
            const double term = tt_at(&a, ai) * tt_at(&b, bi);
            sum += term;
            sumsq += term * term;
        }
        tt_expect z = tt_sum(sum, sumsq, K);
        if (flags & MT_EPILOGUE_BIAS) {
            const double bj = tt_at(&bias, &j);
            z.ref += bj;
            z.mag = fmax(z.mag, fabs(z.ref)) + fabs(bj);
        }
        expect_pre[o] = z;
        /* The activations' slopes are at most ~1.13: the error of z carries
         * over at its own scale; the residual adds one rounding. */
        tt_expect y = z;
        y.ref = act_ref(act, z.ref);
        if (flags & MT_EPILOGUE_RESIDUAL) {
            const double r = tt_at(residual, idx);
            y.ref += r;
            y.mag += fabs(r);
        }
        y.mag = fmax(y.mag, fabs(y.ref));
        expect[o] = y;
    }
    mt_status status = mt_matmul_epilogue(out.t, a.t, b.t, bias.t, residual_is_out ? out.t : res.t, pre.t, act, flags,
                                          epilogue_config);
    if (tt_expect_ok(status, "mt_matmul_epilogue")) {
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
    tt_init("test_matmul_epilogue");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    for (int act = 0; act < MT_EPILOGUE_ACT_COUNT; ++act)
        TT_GROUP("%s", tt_op_name("epilogue_act", act)) {
            for (int t = 0; t < 2; ++t) {
                for (int c = 0; c < 6; ++c) {
                    const int64_t M = SIZES[tt_rand_int(0, 4)], N = SIZES[tt_rand_int(0, 4)];
                    const int64_t K = SIZES[tt_rand_int(0, 4)];
                    const int flags = (int)tt_rand_int(0, 7);
                    epilogue_case(dtypes[t], act, flags, tt_chance(0.3) ? 3 : 0, M, N, K, tt_chance(0.5), 0);
                }
                epilogue_case(dtypes[t], act, 7, 2, 33, 65, 130, 1, 0); /* everything, batched, F.linear's b */
                epilogue_case(dtypes[t], act, MT_EPILOGUE_BIAS, 0, 130, 7, 0, 0, 0); /* K = 0: act(bias) */
                epilogue_case(dtypes[t], act, MT_EPILOGUE_BIAS | MT_EPILOGUE_PRE, 0, 65, 33, 7, 1, 1); /* in place */
            }
        }
    TT_GROUP("tile configurations") {
        for (epilogue_config = 0; epilogue_config < mt_matmul_epilogue_config_count(); ++epilogue_config) {
            epilogue_case(MT_FLOAT32, MT_EPILOGUE_GELU, 7, 2, 130, 65, 33, 1, 0); /* float32: F.linear's b */
            epilogue_case(MT_FLOAT64, MT_EPILOGUE_RELU, 7, 0, 65, 130, 33, 0, 0);
            /* One product of one tile, K a multiple of 2 Packs, slices of 64
             * or more: the split-K configs split it. */
            epilogue_case(MT_FLOAT32, MT_EPILOGUE_GELU, 7, 0, 100, 60, 136, 1, 0);
            epilogue_case(MT_FLOAT64, MT_EPILOGUE_RELU, 7, 0, 65, 64, 128, 0, 1);
            /* K long enough for the most slices (16 of 64): 16 partials summed before the epilogue. */
            if (strstr(mt_matmul_config_name(epilogue_config), "split"))
                epilogue_case(MT_FLOAT32, MT_EPILOGUE_GELU, 7, 2, 40, 36, 1024, 1, 0);
        }
        epilogue_config = -1;
    }
    TT_GROUP("empty") {
        epilogue_case(MT_FLOAT32, MT_EPILOGUE_GELU, 7, 0, 0, 7, 7, 0, 0);
        epilogue_case(MT_FLOAT32, MT_EPILOGUE_GELU, 7, 0, 7, 0, 7, 0, 0);
        epilogue_case(MT_FLOAT64, MT_EPILOGUE_RELU, 7, 2, 0, 7, 7, 1, 0);
    }
    TT_GROUP("bad arguments") {
        int64_t s33[] = {3, 3}, s4[] = {4}, s3[] = {3};
        tt_tensor a = tt_new(MT_FLOAT32, 2, s33, TT_CONTIGUOUS), b = tt_new(MT_FLOAT32, 2, s33, TT_CONTIGUOUS);
        tt_tensor out = tt_new(MT_FLOAT32, 2, s33, TT_CONTIGUOUS), pre = tt_new(MT_FLOAT32, 2, s33, TT_CONTIGUOUS);
        tt_tensor bias4 = tt_new(MT_FLOAT32, 1, s4, TT_CONTIGUOUS), bias64 = tt_new(MT_FLOAT64, 1, s3, TT_CONTIGUOUS);
        tt_tensor bias = tt_new(MT_FLOAT32, 1, s3, TT_CONTIGUOUS);
        tt_case("a bias of the wrong length");
        tt_expect_error(mt_matmul_epilogue(out.t, a.t, b.t, bias4.t, out.t, pre.t, 0, MT_EPILOGUE_BIAS, -1),
                        MT_ERR_SHAPE, "mt_matmul_epilogue", &out);
        tt_case("a bias of another dtype");
        tt_expect_error(mt_matmul_epilogue(out.t, a.t, b.t, bias64.t, out.t, pre.t, 0, MT_EPILOGUE_BIAS, -1),
                        MT_ERR_DTYPE, "mt_matmul_epilogue", &out);
        tt_case("pre is out");
        tt_expect_error(mt_matmul_epilogue(out.t, a.t, b.t, bias.t, out.t, out.t, 0, MT_EPILOGUE_PRE, -1),
                        MT_ERR_INVALID_ARGUMENT, "mt_matmul_epilogue", &out);
        tt_case("an unknown activation");
        tt_expect_error(mt_matmul_epilogue(out.t, a.t, b.t, bias.t, out.t, pre.t, MT_EPILOGUE_ACT_COUNT, 0, -1),
                        MT_ERR_INVALID_ARGUMENT, "mt_matmul_epilogue", &out);
        tt_case("an unknown tile configuration");
        tt_expect_error(mt_matmul_epilogue(out.t, a.t, b.t, bias.t, out.t, pre.t, 0, 0,
                                           mt_matmul_epilogue_config_count()),
                        MT_ERR_INVALID_ARGUMENT, "mt_matmul_epilogue", &out);
        tt_expect_error(mt_matmul_epilogue(out.t, a.t, b.t, bias.t, out.t, pre.t, 0, 0, -2), MT_ERR_INVALID_ARGUMENT,
                        "mt_matmul_epilogue", &out);
        tt_case("unknown flags");
        tt_expect_error(mt_matmul_epilogue(out.t, a.t, b.t, bias.t, out.t, pre.t, 0, 8, -1), MT_ERR_INVALID_ARGUMENT,
                        "mt_matmul_epilogue", &out);
        tt_free(&a);
        tt_free(&b);
        tt_free(&out);
        tt_free(&pre);
        tt_free(&bias4);
        tt_free(&bias64);
        tt_free(&bias);
    }
    return tt_summary();
}
