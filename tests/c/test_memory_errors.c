/*
 * test_memory_errors.c: the library's contract outside the arithmetic.
 *
 *   - every argument error returns its documented status, with a message in
 *     mt_last_error() that names the function, and leaves the output exactly
 *     as it was (it is poisoned before the call and compared after);
 *   - memory: mt_memory_in_use returns to its start, a failed allocation is
 *     an error, memcpy round trips;
 *   - library information: ABI version, max rank, op tables, device info
 *     and key;
 *   - broken launches (tests/c/broken_kernels.cu): a block of 2048 threads
 *     gives CUDA's bad-configuration error ("invalid configuration argument"
 *     up to CUDA 12, "invalid argument" in CUDA 13); on the emulator, a
 *     barrier that half a block never reaches is reported naming the kernel.
 *
 *   make build/tests/emu/test_memory_errors && build/tests/emu/test_memory_errors
 *   MT_TEST_SEED=42 build/tests/emu/test_memory_errors     (replay a run)
 */
#include <ctype.h>

#include "test_util.h"
#include "tt_calls.h"

#if !defined(__STDC_NO_THREADS__)
#include <threads.h>
#endif

/* tests/c/broken_kernels.cu */
int mt_test_launch_divergent_barrier(char *msg, size_t msgsize);
int mt_test_launch_2048_threads(char *msg, size_t msgsize);
int mt_test_cuda_invalid_configuration(void);
int mt_test_cuda_invalid_value(void);

/* ======================================================================== */
/* Breaking one tensor argument                                              */
/* ======================================================================== */

typedef enum {
    B_NULL_DATA, B_NDIM_TOO_BIG, B_NDIM_NEGATIVE, B_SHAPE_NEGATIVE, B_STRIDE_NEGATIVE, B_OFFSET_NEGATIVE,
    B_DTYPE_UNKNOWN, B_DTYPE_NEGATIVE, B_DTYPE_MISMATCH, B_OUT_BROADCAST, B_COUNT
} breakage;

static const struct {
    const char *what;
    mt_status want;
} BREAK[B_COUNT] = {
    [B_NULL_DATA] = {"data NULL with numel > 0", MT_ERR_INVALID_ARGUMENT},
    [B_NDIM_TOO_BIG] = {"ndim MT_MAX_DIMS + 1", MT_ERR_SHAPE},
    [B_NDIM_NEGATIVE] = {"ndim -1", MT_ERR_SHAPE},
    [B_SHAPE_NEGATIVE] = {"shape[0] = -3", MT_ERR_SHAPE},
    [B_STRIDE_NEGATIVE] = {"strides[0] = -1", MT_ERR_INVALID_ARGUMENT},
    [B_OFFSET_NEGATIVE] = {"offset -1", MT_ERR_INVALID_ARGUMENT},
    [B_DTYPE_UNKNOWN] = {"dtype MT_DTYPE_COUNT", MT_ERR_DTYPE},
    [B_DTYPE_NEGATIVE] = {"dtype -1", MT_ERR_DTYPE},
    [B_DTYPE_MISMATCH] = {"float32 among float64 tensors", MT_ERR_DTYPE},
    [B_OUT_BROADCAST] = {"output with stride 0 over a dim of length 3", MT_ERR_INVALID_ARGUMENT},
};

/* Applies breakage b to t; returns 0 where b does not apply. */
static int apply_breakage(breakage b, family f, int k, mt_tensor *t)
{
    switch (b) {
    case B_NULL_DATA: t->data = NULL; return 1;
    case B_NDIM_TOO_BIG: t->ndim = MT_MAX_DIMS + 1; return 1;
    case B_NDIM_NEGATIVE: t->ndim = -1; return 1;
    case B_SHAPE_NEGATIVE:
        if (t->ndim == 0)
            return 0;
        t->shape[0] = -3;
        return 1;
    case B_STRIDE_NEGATIVE:
        if (t->ndim == 0)
            return 0;
        t->strides[0] = -1;
        return 1;
    case B_OFFSET_NEGATIVE: t->offset = -1; return 1;
    case B_DTYPE_UNKNOWN: t->dtype = MT_DTYPE_COUNT; return 1;
    case B_DTYPE_NEGATIVE: t->dtype = -1; return 1;
    case B_DTYPE_MISMATCH:
        /* fill has one tensor; whether an index may have another float
         * dtype than the data is not specified, so it is not tested. */
        if (f == F_FILL || is_index_arg(f, k))
            return 0;
        t->dtype = MT_FLOAT32;
        return 1;
    case B_OUT_BROADCAST:
        if (k != 0 || t->ndim == 0 || t->shape[0] < 2)
            return 0;
        t->strides[0] = 0;
        return 1;
    default: return 0;
    }
}

static void test_breakages(void)
{
    for (int f = 0; f < F_COUNT; ++f) {
        call c = valid_call((family)f);
        tt_case("%s: the valid call the error tests start from", FUNC[f]);
        tt_expect_ok(run_call(&c), FUNC[f]);
        free_call(&c);

        for (int k = 0; k < NARGS[f]; ++k)
            for (int b = 0; b < B_COUNT; ++b) {
                c = valid_call((family)f);
                mt_tensor saved = c.t[k].t;
                if (!apply_breakage((breakage)b, (family)f, k, &c.t[k].t)) {
                    free_call(&c);
                    continue;
                }
                tt_case("%s: %s %s", FUNC[f], ARG[f][k], BREAK[b].what);
                mt_status st = run_call(&c);
                c.t[k].t = saved;
                tt_expect_error(st, BREAK[b].want, FUNC[f], &c.t[0]);
                free_call(&c);
            }
    }
}

/* ======================================================================== */
/* Bad op ids, dims and shapes                                               */
/* ======================================================================== */

static void test_unknown_ops(void)
{
    static const family fams[] = {F_MAP, F_ZIP, F_REDUCE, F_REDUCE_ALL, F_MATMUL};
    static const int counts[] = {MT_MAP_OP_COUNT, MT_ZIP_OP_COUNT, MT_REDUCE_OP_COUNT, MT_REDUCE_OP_COUNT,
                                 MT_MATMUL_ALGO_COUNT};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; ++i) {
        int bad[] = {-1, counts[i], 1000};
        for (int j = 0; j < 3; ++j) {
            call c = valid_call(fams[i]);
            c.op = bad[j];
            tt_case("%s: unknown %s %d", FUNC[fams[i]], fams[i] == F_MATMUL ? "algo" : "op id", bad[j]);
            tt_expect_error(run_call(&c), MT_ERR_INVALID_ARGUMENT, FUNC[fams[i]], &c.t[0]);
            free_call(&c);
        }
    }
}

static void dim_error(family f, int dim)
{
    call c = valid_call(f);
    c.dim = dim;
    tt_case("%s: dim %d of a rank-2 tensor", FUNC[f], dim);
    tt_expect_error(run_call(&c), MT_ERR_DIM, FUNC[f], &c.t[0]);
    free_call(&c);
}

/* The valid call with argument k replaced by a tensor of another shape. */
static void shape_error(family f, int k, int ndim, const int64_t *shape, int want, const char *what)
{
    call c = valid_call(f);
    tt_free(&c.t[k]);
    c.t[k] = arg_tensor(f, k, ndim, shape);
    tt_case("%s: %s %s (%s)", FUNC[f], ARG[f][k], tt_str(&c.t[k]), what);
    mt_status st = run_call(&c);
    if (want == MT_OK)
        tt_expect_ok(st, FUNC[f]);
    else
        tt_expect_error(st, want, FUNC[f], &c.t[0]);
    free_call(&c);
}

static void test_dims_and_shapes(void)
{
    static const int64_t s43[] = {4, 3}, s14[] = {1, 4}, s5[] = {5}, s24[] = {2, 4}, s3[] = {3}, s2[] = {2},
                         s11[] = {1, 1}, s55[] = {5, 5}, s234[] = {2, 3, 4}, s345[] = {3, 4, 5},
                         s235[] = {2, 3, 5}, s42[] = {4, 2}, s33[] = {3, 3};
    static const int bad_dims[] = {2, -1, 100};
    static const family dim_fams[] = {F_REDUCE, F_SOFTMAX, F_GATHER, F_SCATTER_ADD};
    for (size_t i = 0; i < sizeof dim_fams / sizeof dim_fams[0]; ++i)
        for (int j = 0; j < 3; ++j)
            dim_error(dim_fams[i], bad_dims[j]);

    shape_error(F_MAP, 1, 2, s43, MT_ERR_SHAPE, "in's shape differs from out's");
    shape_error(F_MAP, 1, 2, s14, MT_ERR_SHAPE, "map does not broadcast");
    shape_error(F_ZIP, 2, 1, s5, MT_ERR_SHAPE, "b does not broadcast");
    shape_error(F_ZIP, 1, 2, s24, MT_ERR_SHAPE, "a does not broadcast");
    shape_error(F_ZIP, 0, 2, S31, MT_ERR_SHAPE, "out is not the broadcast shape");
    shape_error(F_REDUCE, 0, 2, S34, MT_ERR_SHAPE, "out keeps the reduced dim's length");
    shape_error(F_REDUCE, 0, 1, s3, MT_ERR_SHAPE, "out drops the reduced dim (must keep it as 1)");
    shape_error(F_REDUCE, 0, 2, (const int64_t[]){2, 1}, MT_ERR_SHAPE, "out's other dim differs");
    shape_error(F_REDUCE_ALL, 0, 1, s2, MT_ERR_SHAPE, "out has two elements");
    shape_error(F_REDUCE_ALL, 0, 2, s11, MT_OK, "out (1, 1) holds the one element");
    shape_error(F_MATMUL, 2, 2, s55, MT_ERR_SHAPE, "inner sizes 4 and 5 differ");
    shape_error(F_MATMUL, 0, 2, S34, MT_ERR_SHAPE, "out is not (M, N)");
    shape_error(F_MATMUL, 1, 1, S4, MT_ERR_SHAPE, "a has rank 1");
    shape_error(F_SOFTMAX, 0, 2, s43, MT_ERR_SHAPE, "out's shape differs from in's");
    shape_error(F_GATHER, 0, 2, s33, MT_ERR_SHAPE, "out's shape differs from index's");
    shape_error(F_SCATTER_ADD, 2, 2, s33, MT_ERR_SHAPE, "src's shape differs from index's");

    /* Batched matmul whose batch dims (2 and 3) do not broadcast. */
    {
        call c = valid_call(F_MATMUL);
        for (int k = 0; k < 3; ++k)
            tt_free(&c.t[k]);
        c.t[0] = arg_tensor(F_MATMUL, 0, 3, s235);
        c.t[1] = arg_tensor(F_MATMUL, 1, 3, s234);
        c.t[2] = arg_tensor(F_MATMUL, 2, 3, s345);
        tt_case("mt_matmul: batch dims 2 and 3 do not broadcast: out %s, a %s, b %s", tt_str(&c.t[0]),
                tt_str(&c.t[1]), tt_str(&c.t[2]));
        tt_expect_error(run_call(&c), MT_ERR_SHAPE, "mt_matmul", &c.t[0]);
        free_call(&c);
    }
    /* Gather: index (and out) longer than in along a dim other than `dim`. */
    {
        call c = valid_call(F_GATHER);
        tt_free(&c.t[0]);
        tt_free(&c.t[2]);
        c.t[0] = arg_tensor(F_GATHER, 0, 2, s42);
        c.t[2] = arg_tensor(F_GATHER, 2, 2, s42);
        tt_case("mt_gather: index %s longer than in %s on dim 0", tt_str(&c.t[2]), tt_str(&c.t[1]));
        tt_expect_error(run_call(&c), MT_ERR_SHAPE, "mt_gather", &c.t[0]);
        free_call(&c);
    }
    /* Scatter_add: index and src longer than out along a dim other than `dim`. */
    {
        call c = valid_call(F_SCATTER_ADD);
        tt_free(&c.t[1]);
        tt_free(&c.t[2]);
        c.t[1] = arg_tensor(F_SCATTER_ADD, 1, 2, s42);
        c.t[2] = arg_tensor(F_SCATTER_ADD, 2, 2, s42);
        tt_case("mt_scatter_add: index and src %s longer than out %s on dim 0", tt_str(&c.t[2]),
                tt_str(&c.t[0]));
        tt_expect_error(run_call(&c), MT_ERR_SHAPE, "mt_scatter_add", &c.t[0]);
        free_call(&c);
    }
}

/* Empty tensors need no storage: data NULL with numel 0 is valid. */
static void test_empty_null_data(void)
{
    mt_tensor out, in;
    memset(&out, 0, sizeof out);
    out.dtype = MT_FLOAT32;
    out.ndim = 2;
    out.shape[0] = 0;
    out.shape[1] = 3;
    out.strides[0] = 3;
    out.strides[1] = 1;
    in = out;
    tt_case("mt_map exp: empty (0, 3) tensors with data NULL");
    tt_expect_ok(mt_map(MT_MAP_EXP, out, in, 0.0), "mt_map");
    tt_case("mt_zip add: empty (0, 3) tensors with data NULL");
    tt_expect_ok(mt_zip(MT_ZIP_ADD, out, in, in), "mt_zip");
    tt_case("mt_fill: empty (0, 3) tensor with data NULL");
    tt_expect_ok(mt_fill(out, 1.0), "mt_fill");
}

/* ======================================================================== */
/* Memory                                                                    */
/* ======================================================================== */

static int64_t in_use(void)
{
    int64_t bytes = -1;
    tt_expect_ok(mt_memory_in_use(&bytes), "mt_memory_in_use");
    return bytes;
}

static void test_memory(void)
{
    tt_case("mt_memory_in_use counts every mt_malloc until its mt_free");
    int64_t start = in_use();
    void *p1 = NULL, *p2 = NULL, *p3 = NULL;
    tt_expect_ok(mt_malloc(&p1, 1000), "mt_malloc");
    TT_CHECK(in_use() == start + 1000, "in use %" PRId64 ", start %" PRId64, in_use(), start);
    tt_expect_ok(mt_malloc(&p2, 1 << 20), "mt_malloc");
    tt_expect_ok(mt_malloc(&p3, 3), "mt_malloc");
    TT_CHECK(in_use() == start + 1000 + (1 << 20) + 3, "in use %" PRId64 ", start %" PRId64, in_use(), start);
    TT_CHECK(p1 && p2 && p3 && p1 != p2 && p2 != p3 && p1 != p3, "pointers %p %p %p", p1, p2, p3);
    tt_expect_ok(mt_free(p2), "mt_free");
    TT_CHECK(in_use() == start + 1000 + 3, "in use %" PRId64 ", start %" PRId64, in_use(), start);
    tt_expect_ok(mt_free(p1), "mt_free");
    tt_expect_ok(mt_free(p3), "mt_free");
    TT_CHECK(in_use() == start, "in use %" PRId64 ", start %" PRId64, in_use(), start);

    tt_case("mt_malloc of 4 EiB fails with MT_ERR_OUT_OF_MEMORY and counts nothing");
    start = in_use();
    void *huge = NULL;
    tt_expect_error(mt_malloc(&huge, (size_t)1 << 62), MT_ERR_OUT_OF_MEMORY, "mt_malloc", NULL);
    TT_CHECK(in_use() == start, "in use %" PRId64 ", start %" PRId64, in_use(), start);

    /* On the emulator the page rounding of SIZE_MAX once overflowed to 0
     * pages: MT_OK, and mt_memory_in_use went to -1. */
    for (size_t k = 0; k < 2; k++) {
        size_t bytes = k == 0 ? SIZE_MAX : SIZE_MAX - 4095;
        tt_case("mt_malloc of SIZE_MAX%s fails with MT_ERR_OUT_OF_MEMORY and counts nothing", k ? " - 4095" : "");
        start = in_use();
        huge = NULL;
        tt_expect_error(mt_malloc(&huge, bytes), MT_ERR_OUT_OF_MEMORY, "mt_malloc", NULL);
        TT_CHECK(huge == NULL, "pointer %p", huge);
        TT_CHECK(in_use() == start, "in use %" PRId64 ", start %" PRId64, in_use(), start);
    }

    tt_case("mt_malloc with a NULL result pointer");
    tt_expect_error(mt_malloc(NULL, 16), MT_ERR_INVALID_ARGUMENT, "mt_malloc", NULL);
    tt_case("mt_memory_in_use with a NULL result pointer");
    tt_expect_error(mt_memory_in_use(NULL), MT_ERR_INVALID_ARGUMENT, "mt_memory_in_use", NULL);

    tt_case("memcpy round trip: h2d, d2d into the middle of a buffer, d2h");
    enum { N = 4097, AT = 100 };
    unsigned char src[N], back[N];
    for (int i = 0; i < N; ++i)
        src[i] = (unsigned char)tt_rand_int(0, 255);
    void *d1 = NULL, *d2 = NULL;
    tt_expect_ok(mt_malloc(&d1, N), "mt_malloc");
    tt_expect_ok(mt_malloc(&d2, N + 2 * AT), "mt_malloc");
    if (d1 && d2) {
        tt_expect_ok(mt_memcpy_h2d(d1, src, N), "mt_memcpy_h2d");
        tt_expect_ok(mt_memcpy_d2d((char *)d2 + AT, d1, N), "mt_memcpy_d2d");
        memset(back, 0, N);
        tt_expect_ok(mt_memcpy_d2h(back, (char *)d2 + AT, N), "mt_memcpy_d2h");
        TT_CHECK(memcmp(src, back, N) == 0, "bytes differ after the round trip");
    }

    tt_case("memcpy with a NULL pointer and bytes > 0");
    tt_expect_error(mt_memcpy_h2d(NULL, src, 8), MT_ERR_INVALID_ARGUMENT, "mt_memcpy_h2d", NULL);
    tt_expect_error(mt_memcpy_h2d(d1, NULL, 8), MT_ERR_INVALID_ARGUMENT, "mt_memcpy_h2d", NULL);
    tt_expect_error(mt_memcpy_d2h(NULL, d1, 8), MT_ERR_INVALID_ARGUMENT, "mt_memcpy_d2h", NULL);
    tt_expect_error(mt_memcpy_d2h(back, NULL, 8), MT_ERR_INVALID_ARGUMENT, "mt_memcpy_d2h", NULL);
    tt_expect_error(mt_memcpy_d2d(NULL, d1, 8), MT_ERR_INVALID_ARGUMENT, "mt_memcpy_d2d", NULL);
    tt_expect_error(mt_memcpy_d2d(d2, NULL, 8), MT_ERR_INVALID_ARGUMENT, "mt_memcpy_d2d", NULL);
    if (d1)
        tt_expect_ok(mt_free(d1), "mt_free");
    if (d2)
        tt_expect_ok(mt_free(d2), "mt_free");
}

/* ======================================================================== */
/* Library information                                                       */
/* ======================================================================== */

/* Each op list of minitensor.h as (ENUM_ID, name) pairs, e.g. {"SOFTPLUS",
 * "softplus"}: generated from the lists themselves, so that a new op needs
 * no edit here. */
typedef struct {
    const char *id;
    const char *name;
    const char *dtypes; /* the dtype rule; NULL for a ladder */
} op_entry;
#define TT_OP_ENTRY_(id, name, dtypes) {#id, #name, dtypes},
#define TT_ALGO_ENTRY_(id, name) {#id, #name, NULL},
static const op_entry MAP_OPS[] = {MT_MAP_OPS(TT_OP_ENTRY_)};
static const op_entry ZIP_OPS[] = {MT_ZIP_OPS(TT_OP_ENTRY_)};
static const op_entry REDUCE_OPS[] = {MT_REDUCE_OPS(TT_OP_ENTRY_)};
static const op_entry MATMUL_ALGOS[] = {MT_MATMUL_ALGOS(TT_ALGO_ENTRY_)};
static const op_entry REDUCE_ALGOS[] = {MT_REDUCE_ALGOS(TT_ALGO_ENTRY_)};
static const op_entry COPY_ALGOS[] = {MT_COPY_ALGOS(TT_ALGO_ENTRY_)};
#undef TT_ALGO_ENTRY_
#undef TT_OP_ENTRY_

/* name is ID in lower case ("RELU_BACKWARD" -> "relu_backward"). */
static int is_lower_case_of(const char *name, const char *id)
{
    for (; *name && *id; ++name, ++id)
        if (*name != tolower((unsigned char)*id))
            return 0;
    return *name == *id;
}

/* The library's table for `family` matches the op list of the header: the
 * same count and, for each id, the list's name, which is the enum's id in
 * lower case. */
static void check_table(const char *family, const op_entry *ops, int count)
{
    tt_case("mt_op_count/mt_op_name/mt_op_dtypes(\"%s\") match the op list of minitensor.h", family);
    TT_CHECK(mt_op_count(family) == count, "mt_op_count(\"%s\") = %d, header says %d", family,
             mt_op_count(family), count);
    for (int op = 0; op < count; ++op) {
        const char *name = mt_op_name(family, op);
        TT_CHECK(is_lower_case_of(ops[op].name, ops[op].id), "the header lists X(%s, %s): the name must be the id in lower case",
                 ops[op].id, ops[op].name);
        TT_CHECK(name && strcmp(name, ops[op].name) == 0, "mt_op_name(\"%s\", %d) = \"%s\", expected \"%s\"",
                 family, op, name ? name : "(null)", ops[op].name);
        const char *dtypes = mt_op_dtypes(family, op);
        TT_CHECK(ops[op].dtypes ? dtypes && strcmp(dtypes, ops[op].dtypes) == 0 : dtypes == NULL,
                 "mt_op_dtypes(\"%s\", %d) = \"%s\", the list says \"%s\"", family, op,
                 dtypes ? dtypes : "(null)", ops[op].dtypes ? ops[op].dtypes : "(null)");
    }
    TT_CHECK(mt_op_dtypes(family, count) == NULL, "a dtype rule for id %d (the count)", count);
    TT_CHECK(mt_op_name(family, -1) == NULL, "a name for id -1");
    TT_CHECK(mt_op_name(family, count) == NULL, "a name for id %d (the count)", count);
}

static void test_info(void)
{
    tt_case("mt_abi_version() == MT_ABI_VERSION, mt_max_dims() == MT_MAX_DIMS");
    TT_CHECK(mt_abi_version() == MT_ABI_VERSION, "library %d, header %d", mt_abi_version(), MT_ABI_VERSION);
    TT_CHECK(mt_max_dims() == MT_MAX_DIMS, "library %d, header %d", mt_max_dims(), MT_MAX_DIMS);

    check_table("map", MAP_OPS, MT_MAP_OP_COUNT);
    check_table("zip", ZIP_OPS, MT_ZIP_OP_COUNT);
    check_table("reduce", REDUCE_OPS, MT_REDUCE_OP_COUNT);
    check_table("matmul", MATMUL_ALGOS, MT_MATMUL_ALGO_COUNT);
    check_table("reduce_algo", REDUCE_ALGOS, MT_REDUCE_ALGO_COUNT);
    check_table("copy_algo", COPY_ALGOS, MT_COPY_ALGO_COUNT);

    tt_case("mt_op_count/mt_op_name of an unknown family");
    TT_CHECK(mt_op_count("nonsense") == -1, "got %d", mt_op_count("nonsense"));
    TT_CHECK(mt_op_count(NULL) == -1, "got %d", mt_op_count(NULL));
    TT_CHECK(mt_op_name("nonsense", 0) == NULL, "got a name");
    TT_CHECK(mt_op_name(NULL, 0) == NULL, "got a name");

    tt_case("mt_backend_name is \"cuda\" or \"emulator\"");
    const char *backend = mt_backend_name();
    TT_CHECK(backend && (!strcmp(backend, "cuda") || !strcmp(backend, "emulator")), "got \"%s\"",
             backend ? backend : "(null)");

    tt_case("mt_device_info fills the buffer, truncates safely, rejects NULL");
    char buf[512];
    if (tt_expect_ok(mt_device_info(buf, sizeof buf), "mt_device_info"))
        TT_CHECK(strlen(buf) > 0 && strlen(buf) < sizeof buf, "device info \"%s\"", buf);
    char small[16];
    memset(small, 'X', sizeof small);
    mt_status st = mt_device_info(small, 6);
    TT_CHECK(st == MT_OK || st == MT_ERR_INVALID_ARGUMENT, "status %s", tt_status_name(st));
    if (st == MT_OK)
        TT_CHECK(memchr(small, '\0', 6) != NULL, "no terminating NUL within the 6 bytes given");
    TT_CHECK(small[6] == 'X' && small[15] == 'X', "wrote past the 6 bytes given");
    tt_expect_error(mt_device_info(NULL, 16), MT_ERR_INVALID_ARGUMENT, "mt_device_info", NULL);

    tt_case("mt_device_key: \"<name>|sm_<cc>|<SMs>sm\", the same every call; a short buffer is an error");
    char key[256], again[256];
    if (tt_expect_ok(mt_device_key(key, sizeof key), "mt_device_key") &&
        tt_expect_ok(mt_device_key(again, sizeof again), "mt_device_key")) {
        TT_CHECK(strstr(key, "|sm_") != NULL && strlen(key) > 8 && key[strlen(key) - 2] == 's' &&
                     key[strlen(key) - 1] == 'm',
                 "key \"%s\"", key);
        TT_CHECK(strcmp(key, again) == 0, "\"%s\" then \"%s\"", key, again);
    }
    memset(small, 'X', sizeof small);
    tt_expect_error(mt_device_key(small, 4), MT_ERR_INVALID_ARGUMENT, "mt_device_key", NULL);
    TT_CHECK(small[0] == '\0' && small[4] == 'X', "a rejected call wrote \"%.4s\" or past the buffer", small);
    tt_expect_error(mt_device_key(NULL, 16), MT_ERR_INVALID_ARGUMENT, "mt_device_key", NULL);

    tt_case("sync-debug mode on and off; mt_synchronize");
    call c = valid_call(F_MAP);
    tt_expect_ok(mt_set_sync_debug(1), "mt_set_sync_debug");
    tt_expect_ok(run_call(&c), "mt_map");
    tt_expect_ok(mt_set_sync_debug(0), "mt_set_sync_debug");
    tt_expect_ok(run_call(&c), "mt_map");
    tt_expect_ok(mt_synchronize(), "mt_synchronize");

    tt_case("mt_stream_wait between the library's stream and CUDA's two default streams");
    tt_expect_ok(run_call(&c), "mt_map");
    tt_expect_ok(mt_stream_wait((void *)1, NULL), "mt_stream_wait(legacy, library)");
    tt_expect_ok(mt_stream_wait((void *)2, NULL), "mt_stream_wait(per-thread, library)");
    tt_expect_ok(mt_stream_wait(NULL, (void *)2), "mt_stream_wait(library, per-thread)");
    tt_expect_ok(mt_stream_wait(NULL, NULL), "mt_stream_wait(library, library)");
    tt_expect_ok(mt_synchronize(), "mt_synchronize");
    free_call(&c);
}

/* ======================================================================== */
/* The last error is per thread                                              */
/* ======================================================================== */

#if !defined(__STDC_NO_THREADS__)
static int fail_in_thread(void *arg)
{
    (void)arg;
    mt_tensor t;
    memset(&t, 0, sizeof t);
    mt_status st = mt_map(-1, t, t, 0.0);
    const char *msg = mt_last_error();
    return st != MT_OK && msg && strstr(msg, "mt_map") ? 1 : 0;
}
#endif

static void test_error_is_per_thread(void)
{
#if !defined(__STDC_NO_THREADS__)
    tt_case("a failure in another thread leaves this thread's mt_last_error alone");
    tt_expect_error(mt_zip(-1, (mt_tensor){0}, (mt_tensor){0}, (mt_tensor){0}), MT_ERR_INVALID_ARGUMENT,
                    "mt_zip", NULL);
    char before[512];
    snprintf(before, sizeof before, "%s", mt_last_error());
    thrd_t th;
    int res = 0;
    if (TT_CHECK(thrd_create(&th, fail_in_thread, NULL) == thrd_success, "thrd_create failed")) {
        thrd_join(th, &res);
        TT_CHECK(res == 1, "the other thread's failure did not report itself there");
        TT_CHECK(strcmp(before, mt_last_error()) == 0, "was \"%s\", now \"%s\"", before, mt_last_error());
    }
#endif
}

/* ======================================================================== */
/* Broken launches                                                           */
/* ======================================================================== */

static void test_broken_launches(void)
{
    char msg[512];

    /* CUDA's error for a bad launch configuration depends on its version:
     * cudaErrorInvalidConfiguration ("invalid configuration argument") up to
     * CUDA 12, cudaErrorInvalidValue ("invalid argument") in CUDA 13. Either
     * is right; a crash, success, or any other error is not. */
    tt_case("a launch of 2048 threads per block fails with CUDA's bad-configuration error");
    int err = mt_test_launch_2048_threads(msg, sizeof msg);
    int config = mt_test_cuda_invalid_configuration(), value = mt_test_cuda_invalid_value();
    if (TT_CHECK(err == config || err == value, "error %d (%s), expected %d or %d", err, msg, config, value))
        TT_CHECK(strstr(msg, err == config ? "invalid configuration" : "invalid argument") != NULL,
                 "error %d, message \"%s\"", err, msg);

    tt_case("the library still works after the bad launch");
    call c = valid_call(F_FILL);
    tt_expect_ok(run_call(&c), "mt_fill");
    free_call(&c);

    if (strcmp(mt_backend_name(), "emulator") != 0) {
        printf("skipped: barrier divergence (undefined behaviour on a GPU; tested on the emulator)\n");
        return;
    }
    /* Last: a real GPU would now be in an undefined state, and the emulator
     * need not recover from it either. */
    tt_case("emulator: a __syncthreads() half the block never reaches is an error naming the kernel");
    err = mt_test_launch_divergent_barrier(msg, sizeof msg);
    TT_CHECK(err != 0, "the launch reported success");
    TT_CHECK(strstr(msg, "divergent_barrier_kernel") != NULL, "error %d, message \"%s\"", err, msg);
}

int main(void)
{
    /* Before anything can have failed. */
    const char *first = mt_last_error();
    int clean_start = first != NULL && first[0] == '\0';

    tt_init("test_memory_errors");
    TT_GROUP("clean start") {
        tt_case("mt_last_error() is \"\" before any failure");
        TT_CHECK(clean_start, "got \"%s\"", first ? first : "(null)");
    }
    TT_GROUP("info") test_info();
    TT_GROUP("memory") test_memory();
    TT_GROUP("breakages") test_breakages();
    TT_GROUP("unknown ops") test_unknown_ops();
    TT_GROUP("dims and shapes") test_dims_and_shapes();
    TT_GROUP("empty null data") test_empty_null_data();
    TT_GROUP("error is per thread") test_error_is_per_thread();
    TT_GROUP("broken launches") test_broken_launches();
    return tt_summary();
}
