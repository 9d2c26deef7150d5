/*
 * test_policy.c: the kernel policy (minitensor.h, "kernel policy"): that
 * mt_set_kernel_policy / mt_get_kernel_policy round-trip, that
 * MINITENSOR_KERNELS is applied at initialisation and a wrong value fails
 * every call, and that under MT_KERNELS_TEACHING every default entry point
 * runs the teaching kernel while the ladders still reach every rung by name.
 *
 * Which kernel ran is observable in two ways:
 *   - launch counts (mt_launch_count; the emulator counts, the CUDA build
 *     does not): the default call launched the teaching kernel and no fast
 *     one. The same calls under MT_KERNELS_FAST launch the fast kernels,
 *     which shows that the counts can tell them apart;
 *   - bits, on both builds, where the kernels add in different orders:
 *     under teaching, mt_reduce over a dim that is not the last gives the
 *     bits of the first_add rung (the fast path walks columns, in another
 *     order), and the default matmul the bits of the tiled rung.
 *
 *   make check-c T=test_policy
 */
#include "test_util.h"

/* ---- a fresh process for the environment variable --------------------------
 * MINITENSOR_KERNELS is read when the library initialises, and every group
 * has initialised it already; so the program runs itself again (exec: a
 * fresh library) with `--probe`, which reports on one line what it saw. */

#define PROBE_ARG "--probe"

/* The probe: [set teaching first,] initialise, report, try once more. */
static int probe(int set_first)
{
    if (set_first)
        mt_set_kernel_policy(MT_KERNELS_TEACHING);
    mt_status first = mt_init();
    printf("init=%d policy=%d", (int)first, (int)mt_get_kernel_policy());
    if (first != MT_OK)
        printf(" error=%s", mt_last_error());
    void *p = NULL;
    mt_status second = mt_malloc(&p, 16); /* a later call: no fallback either */
    printf(" second=%d\n", (int)second);
    if (second == MT_OK)
        mt_free(p);
    return 0;
}

/* Runs the probe with MINITENSOR_KERNELS=value (NULL: unset); its output
 * line goes into out. */
static int run_probe(const char *value, int set_first, char *out, size_t size)
{
    char env_value[128];
    snprintf(env_value, sizeof env_value, "MINITENSOR_KERNELS=%s", value ? value : "");
    const char *env[] = {value ? env_value : "MINITENSOR_KERNELS", NULL};
    char *argv[] = {(char *)"test_policy", (char *)PROBE_ARG, (char *)(set_first ? "set" : "env"), NULL};
    int status = tt_run_self(argv, env, out, size);
    return TT_CHECK(status == 0, "probe exit status %d: %s", status, out);
}

static void environment_cases(void)
{
    char out[1024];
    const struct {
        const char *value;
        int set_first, init, policy;
    } expect[] = {
        {NULL, 0, MT_OK, MT_KERNELS_FAST},
        {"fast", 0, MT_OK, MT_KERNELS_FAST},
        {"teaching", 0, MT_OK, MT_KERNELS_TEACHING},
        {"fast", 1, MT_OK, MT_KERNELS_TEACHING}, /* mt_set_kernel_policy before init wins */
        {"teching", 0, MT_ERR_INVALID_ARGUMENT, MT_KERNELS_FAST},
        {"Teaching", 0, MT_ERR_INVALID_ARGUMENT, MT_KERNELS_FAST},
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; ++i) {
        tt_case("MINITENSOR_KERNELS=%s%s", expect[i].value ? expect[i].value : "(unset)",
                expect[i].set_first ? ", mt_set_kernel_policy(TEACHING) before mt_init" : "");
        if (!run_probe(expect[i].value, expect[i].set_first, out, sizeof out))
            continue;
        int init = -1, policy = -1;
        TT_CHECK(sscanf(out, "init=%d policy=%d", &init, &policy) == 2, "probe said: %s", out);
        TT_CHECK(init == expect[i].init, "mt_init status %d, expected %d: %s", init, expect[i].init, out);
        TT_CHECK(policy == expect[i].policy, "policy %d, expected %d: %s", policy, expect[i].policy, out);
        if (expect[i].init == MT_OK) {
            TT_CHECK(strstr(out, "second=0") != NULL, "a later call failed: %s", out);
        } else {
            /* The message names the variable, the value and the allowed values;
             * the next call fails too. */
            TT_CHECK(strstr(out, "MINITENSOR_KERNELS") && strstr(out, expect[i].value) &&
                         strstr(out, "'fast'") && strstr(out, "'teaching'"),
                     "message: %s", out);
            TT_CHECK(strstr(out, "second=1") != NULL, "a later call did not fail: %s", out);
        }
    }
}

/* ---- the switch ------------------------------------------------------------ */

static void round_trip_cases(void)
{
    const mt_kernel_policy start = mt_get_kernel_policy();
    const char *env = getenv("MINITENSOR_KERNELS");
    tt_case("mt_get_kernel_policy after mt_init follows MINITENSOR_KERNELS (%s)", env ? env : "unset");
    TT_CHECK(start == (env && strcmp(env, "teaching") == 0 ? MT_KERNELS_TEACHING : MT_KERNELS_FAST), "got %d",
             (int)start);

    tt_case("mt_set_kernel_policy round-trips");
    const mt_kernel_policy both[] = {MT_KERNELS_TEACHING, MT_KERNELS_FAST, MT_KERNELS_TEACHING};
    for (int i = 0; i < 3; ++i) {
        TT_CHECK(mt_set_kernel_policy(both[i]) == MT_OK, "%s", mt_last_error());
        TT_CHECK(mt_get_kernel_policy() == both[i], "set %d, got %d", (int)both[i], (int)mt_get_kernel_policy());
    }

    const int bad[] = {-1, 2};
    for (int i = 0; i < 2; ++i) {
        tt_case("mt_set_kernel_policy(%d) is rejected and changes nothing", bad[i]);
        TT_CHECK(mt_set_kernel_policy((mt_kernel_policy)bad[i]) == MT_ERR_INVALID_ARGUMENT, "accepted");
        TT_CHECK(strstr(mt_last_error(), "mt_set_kernel_policy") != NULL, "message: %s", mt_last_error());
        TT_CHECK(mt_get_kernel_policy() == MT_KERNELS_TEACHING, "now %d", (int)mt_get_kernel_policy());
    }
    mt_set_kernel_policy(start);
}

/* ---- which kernels ran ---------------------------------------------------- */

/* A contiguous float32 tensor of values in [-1, 1]. */
static tt_tensor dense(int ndim, const int64_t *shape)
{
    tt_tensor x = tt_new(MT_FLOAT32, ndim, shape, TT_CONTIGUOUS);
    tt_fill(&x, -1, 1, 0);
    return x;
}

/* The transpose of a contiguous (cols, rows) matrix: a (rows, cols) view
 * whose second-to-last dim has stride 1. */
static tt_tensor transposed(int64_t rows, int64_t cols)
{
    const int64_t shape[] = {cols, rows};
    tt_tensor x = dense(2, shape);
    x.t.shape[0] = rows;
    x.t.shape[1] = cols;
    x.t.strides[0] = 1;
    x.t.strides[1] = rows;
    return x;
}

/* The entry points with a fast path, each on a layout that reaches it. */
enum { MAP, COPY_T, ZIP, ZIP_ROW, ZIP_T, REDUCE_ROWS, REDUCE_COLS, REDUCE_ALL, SOFTMAX, MATMUL, COPY_VARIANT, CALLS };

static const struct {
    const char *what;
    const char *teaching, *teaching_with; /* the kernel it must launch under teaching */
    const char *fast, *fast_with;         /* ... under fast, never under teaching */
} kCalls[CALLS] = {
    [MAP] = {"mt_map exp, contiguous", "map_contiguous", NULL, "map_contiguous_vec", NULL},
    [COPY_T] = {"mt_map copy of A.T", "map_strided", NULL, "copy_transposed", NULL},
    [ZIP] = {"mt_zip add, contiguous", "zip_contiguous", NULL, "zip_contiguous_vec", NULL},
    [ZIP_ROW] = {"mt_zip add, A + row", "zip_strided", NULL, "zip_row_broadcast", NULL},
    [ZIP_T] = {"mt_zip add, A + B.T", "zip_strided", NULL, "zip_transposed", NULL},
    [REDUCE_ROWS] = {"mt_reduce sum, last dim", "reduce_rows_first_add", NULL, "reduce_rows_warp", NULL},
    [REDUCE_COLS] = {"mt_reduce sum, dim 0", "reduce_rows_first_add", NULL, "reduce_columns", NULL},
    [REDUCE_ALL] = {"mt_reduce_all sum", "reduce_all_finish", "TreeFinish", "reduce_all_finish", "LastWarpFinish"},
    [SOFTMAX] = {"mt_softmax, contiguous rows", "softmax_rows", NULL, "softmax_rows_registers", NULL},
    [MATMUL] = {"mt_matmul default", "matmul_tiled", NULL, "matmul_warptile", NULL},
    [COPY_VARIANT] = {"mt_copy_variant default of A.T", "map_strided", NULL, "copy_transposed", NULL},
};

/* Makes call `c` on fresh float32 tensors; the result is checked by the
 * kernel family's own program, under both policies. */
static void make_call(int c)
{
    const int64_t s_mat[] = {64, 64}, s_row[] = {64}, s_one[] = {1, 1}, s_col[] = {1, 64}, s_row1[] = {64, 1};
    tt_tensor a = dense(2, s_mat), b = c == ZIP_ROW ? dense(1, s_row) : c == ZIP_T ? transposed(64, 64) : dense(2, s_mat);
    tt_tensor out = tt_new(MT_FLOAT32, 2, c == REDUCE_ROWS   ? s_row1
                                          : c == REDUCE_COLS ? s_col
                                          : c == REDUCE_ALL  ? s_one
                                                             : s_mat,
                           TT_CONTIGUOUS);
    tt_tensor at = transposed(64, 64);
    mt_status st = MT_OK;
    switch (c) {
    case MAP: st = mt_map(MT_MAP_EXP, out.t, a.t, 0.0); break;
    case COPY_T: st = mt_map(MT_MAP_COPY, out.t, at.t, 0.0); break;
    case ZIP: case ZIP_ROW: case ZIP_T: st = mt_zip(MT_ZIP_ADD, out.t, a.t, b.t); break;
    case REDUCE_ROWS: st = mt_reduce(MT_REDUCE_SUM, out.t, a.t, 1); break;
    case REDUCE_COLS: st = mt_reduce(MT_REDUCE_SUM, out.t, a.t, 0); break;
    case REDUCE_ALL: st = mt_reduce_all(MT_REDUCE_SUM, out.t, a.t); break;
    case SOFTMAX: st = mt_softmax(out.t, a.t, 1, 0); break;
    case MATMUL: st = mt_matmul(out.t, a.t, b.t, MT_MATMUL_DEFAULT); break;
    case COPY_VARIANT: st = mt_copy_variant(out.t, at.t, MT_COPY_ALGO_DEFAULT); break;
    }
    tt_expect_ok(st, kCalls[c].what);
    tt_free(&a);
    tt_free(&b);
    tt_free(&out);
    tt_free(&at);
}

/* Under `policy`, call c launches its kernel of that policy and not the other's. */
static void launch_cases(mt_kernel_policy policy)
{
    const int teaching = policy == MT_KERNELS_TEACHING;
    for (int c = 0; c < CALLS; ++c) {
        const char *want = teaching ? kCalls[c].teaching : kCalls[c].fast;
        const char *want_with = teaching ? kCalls[c].teaching_with : kCalls[c].fast_with;
        const char *never = teaching ? kCalls[c].fast : kCalls[c].teaching;
        const char *never_with = teaching ? kCalls[c].fast_with : kCalls[c].teaching_with;
        tt_case("%s policy: %s launches %s%s%s, not %s%s%s", teaching ? "teaching" : "fast", kCalls[c].what, want,
                want_with ? " " : "", want_with ? want_with : "", never, never_with ? " " : "",
                never_with ? never_with : "");
        mt_set_kernel_policy(policy);
        mt_reset_launch_counts();
        make_call(c);
        const int64_t got = mt_launch_count(want, want_with);
        const int64_t other = mt_launch_count(never, never_with);
        TT_CHECK(got >= 1, "%s launched %" PRId64 " times", want, got);
        /* The teaching kernel may serve a fast path too (map_strided falls
         * back for layouts the fast kernels refuse), but a fast kernel must
         * never run under teaching. */
        if (teaching || strcmp(never, "map_strided") != 0)
            TT_CHECK(other == 0, "%s launched %" PRId64 " times", never, other);
    }
}

/* The ladders by name under teaching: the fast rungs are still there. */
static void ladder_cases(void)
{
    mt_set_kernel_policy(MT_KERNELS_TEACHING);
    const int64_t s_mat[] = {64, 64}, s_row1[] = {64, 1};
    tt_tensor a = dense(2, s_mat), b = dense(2, s_mat), at = transposed(64, 64);
    tt_tensor out = tt_new(MT_FLOAT32, 2, s_mat, TT_CONTIGUOUS), rows = tt_new(MT_FLOAT32, 2, s_row1, TT_CONTIGUOUS);

    tt_case("teaching policy: mt_reduce_variant warp_shuffle launches reduce_rows_warp");
    mt_reset_launch_counts();
    tt_expect_ok(mt_reduce_variant(MT_REDUCE_SUM, rows.t, a.t, 1, MT_REDUCE_ALGO_WARP_SHUFFLE), "mt_reduce_variant");
    TT_CHECK(mt_launch_count("reduce_rows_warp", NULL) >= 1, "not launched");

    tt_case("teaching policy: mt_matmul warptile launches matmul_warptile");
    mt_reset_launch_counts();
    tt_expect_ok(mt_matmul(out.t, a.t, b.t, MT_MATMUL_WARPTILE), "mt_matmul");
    TT_CHECK(mt_launch_count("matmul_warptile", NULL) >= 1, "not launched");

    tt_case("teaching policy: mt_copy_variant tiled_padded launches copy_transposed");
    mt_reset_launch_counts();
    tt_expect_ok(mt_copy_variant(out.t, at.t, MT_COPY_ALGO_TILED_PADDED), "mt_copy_variant");
    TT_CHECK(mt_launch_count("copy_transposed", NULL) >= 1, "not launched");

    tt_free(&a);
    tt_free(&b);
    tt_free(&at);
    tt_free(&out);
    tt_free(&rows);
}

/* ---- the same bits as the named teaching rung ------------------------------ */

/* Do the device buffers of x and y hold the same values, bit for bit? (Not a
 * tolerance check: the claim is that the same kernel ran.) */
static int same_bits(const tt_tensor *x, const tt_tensor *y)
{
    double *hx = malloc((size_t)x->cap * sizeof(double)), *hy = malloc((size_t)y->cap * sizeof(double));
    int same = x->cap == y->cap && tt_download(x, hx) && tt_download(y, hy) &&
               memcmp(hx, hy, (size_t)x->cap * sizeof(double)) == 0;
    free(hx);
    free(hy);
    return same;
}

static void bit_cases(void)
{
    mt_set_kernel_policy(MT_KERNELS_TEACHING);
    const int64_t s_in[] = {1025, 33}, s_out[] = {1, 33}, s_a[] = {65, 129}, s_b[] = {129, 33}, s_c[] = {65, 33};
    tt_tensor in = dense(2, s_in), r1 = tt_new(MT_FLOAT32, 2, s_out, TT_CONTIGUOUS),
              r2 = tt_new(MT_FLOAT32, 2, s_out, TT_CONTIGUOUS);
    tt_case("teaching policy: mt_reduce sum over dim 0 has the bits of the first_add rung");
    if (tt_expect_ok(mt_reduce(MT_REDUCE_SUM, r1.t, in.t, 0), "mt_reduce") &&
        tt_expect_ok(mt_reduce_variant(MT_REDUCE_SUM, r2.t, in.t, 0, MT_REDUCE_ALGO_FIRST_ADD), "mt_reduce_variant"))
        TT_CHECK(same_bits(&r1, &r2), "the results differ");

    tt_tensor a = dense(2, s_a), b = dense(2, s_b), c1 = tt_new(MT_FLOAT32, 2, s_c, TT_CONTIGUOUS),
              c2 = tt_new(MT_FLOAT32, 2, s_c, TT_CONTIGUOUS);
    tt_case("teaching policy: mt_matmul default has the bits of the tiled rung");
    if (tt_expect_ok(mt_matmul(c1.t, a.t, b.t, MT_MATMUL_DEFAULT), "mt_matmul") &&
        tt_expect_ok(mt_matmul(c2.t, a.t, b.t, MT_MATMUL_TILED), "mt_matmul"))
        TT_CHECK(same_bits(&c1, &c2), "the results differ");
    tt_free(&in);
    tt_free(&r1);
    tt_free(&r2);
    tt_free(&a);
    tt_free(&b);
    tt_free(&c1);
    tt_free(&c2);
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], PROBE_ARG) == 0)
        return probe(strcmp(argv[2], "set") == 0);
    tt_init("test_policy");
    TT_GROUP("round trip") round_trip_cases();
    TT_GROUP("environment") environment_cases();
    TT_GROUP("launches") {
        tt_case("mt_launch_count is available (emulator) or -1 (CUDA build)");
        const int64_t n = mt_launch_count("map_contiguous", NULL);
        if (strcmp(mt_backend_name(), "emulator") == 0) {
            TT_CHECK(n >= 0, "mt_launch_count returned %" PRId64 " on the emulator", n);
            launch_cases(MT_KERNELS_TEACHING);
            launch_cases(MT_KERNELS_FAST);
            ladder_cases();
        } else {
            TT_CHECK(n == -1, "mt_launch_count returned %" PRId64 " on the CUDA build", n);
        }
    }
    TT_GROUP("same bits") bit_cases();
    return tt_summary();
}
