/*
 * tt_calls.h: a valid call of every kernel family, for test_memory_errors.c,
 * whose tests each break one thing in such a call (a bad descriptor, an
 * unknown op, a wrong dim) and check the status, the message and that the
 * output is untouched.
 */
#ifndef MT_TT_CALLS_H
#define MT_TT_CALLS_H

#include "test_util.h"

/* ======================================================================== */
/* A valid call of every kernel family; each test breaks one thing in it.   */
/* ======================================================================== */

typedef enum { F_MAP, F_FILL, F_ZIP, F_REDUCE, F_REDUCE_ALL, F_MATMUL, F_SOFTMAX, F_GATHER, F_SCATTER_ADD, F_COUNT } family;

static const char *FUNC[F_COUNT] = {"mt_map",     "mt_fill",    "mt_zip",    "mt_reduce",      "mt_reduce_all",
                                    "mt_matmul",  "mt_softmax", "mt_gather", "mt_scatter_add"};

/* The tensor arguments of each family, output first, and how many. */
static const char *ARG[F_COUNT][3] = {
    {"out", "in"}, {"out"}, {"out", "a", "b"}, {"out", "in"}, {"out", "in"},
    {"out", "a", "b"}, {"out", "in"}, {"out", "in", "index"}, {"out", "index", "src"},
};
static const int NARGS[F_COUNT] = {2, 1, 3, 2, 2, 3, 2, 3, 3};

/* Is argument k an index tensor (whole numbers)? */
static int is_index_arg(family f, int k)
{
    return (f == F_GATHER && k == 2) || (f == F_SCATTER_ADD && k == 1);
}

typedef struct {
    family f;
    tt_tensor t[3]; /* t[0] is out */
    int op;         /* op id; the algo of matmul; `log` of softmax */
    int dim;
} call;

/* Valid shapes: out first. Every call here is correct as it stands. */
static const int64_t S34[] = {3, 4}, S31[] = {3, 1}, S4[] = {4}, S35[] = {3, 5}, S45[] = {4, 5}, S32[] = {3, 2};

static tt_tensor arg_tensor(family f, int k, int ndim, const int64_t *shape)
{
    /* float64 buffers: a test that declares one float32 reads less than
     * was allocated, never more. */
    tt_tensor x = tt_new(MT_FLOAT64, ndim, shape, k == 0 ? TT_OUTPUT : TT_INPUT);
    if (is_index_arg(f, k))
        tt_fill(&x, 0, 1, TT_INTEGERS);
    else if (k > 0 || f == F_SCATTER_ADD)
        tt_fill(&x, 0.5, 2, 0);
    return x; /* outputs keep TT_POISON everywhere */
}

static call valid_call(family f)
{
    call c;
    memset(&c, 0, sizeof c);
    c.f = f;
    const int64_t *shapes[3] = {S34, S34, NULL};
    int ranks[3] = {2, 2, 0};
    switch (f) {
    case F_MAP: c.op = MT_MAP_EXP; break;
    case F_FILL: break;
    case F_ZIP: c.op = MT_ZIP_ADD; shapes[2] = S4; ranks[2] = 1; break;
    case F_REDUCE: c.op = MT_REDUCE_SUM; shapes[0] = S31; c.dim = 1; break;
    case F_REDUCE_ALL: c.op = MT_REDUCE_SUM; ranks[0] = 0; break;
    case F_MATMUL: c.op = MT_MATMUL_DEFAULT; shapes[0] = S35; shapes[2] = S45; ranks[2] = 2; break;
    case F_SOFTMAX: c.op = 0; c.dim = 1; break;
    case F_GATHER: shapes[0] = S32; shapes[2] = S32; ranks[2] = 2; c.dim = 1; break;
    case F_SCATTER_ADD: shapes[1] = S32; shapes[2] = S32; ranks[2] = 2; c.dim = 1; break;
    default: break;
    }
    for (int k = 0; k < NARGS[f]; ++k)
        c.t[k] = arg_tensor(f, k, ranks[k], shapes[k]);
    return c;
}

static mt_status run_call(const call *c)
{
    const mt_tensor *t0 = &c->t[0].t, *t1 = &c->t[1].t, *t2 = &c->t[2].t;
    switch (c->f) {
    case F_MAP: return mt_map(c->op, *t0, *t1, 2.0);
    case F_FILL: return mt_fill(*t0, 2.0);
    case F_ZIP: return mt_zip(c->op, *t0, *t1, *t2);
    case F_REDUCE: return mt_reduce(c->op, *t0, *t1, c->dim);
    case F_REDUCE_ALL: return mt_reduce_all(c->op, *t0, *t1);
    case F_MATMUL: return mt_matmul(*t0, *t1, *t2, c->op);
    case F_SOFTMAX: return mt_softmax(*t0, *t1, c->dim, c->op);
    case F_GATHER: return mt_gather(*t0, *t1, *t2, c->dim);
    case F_SCATTER_ADD: return mt_scatter_add(*t0, *t1, *t2, c->dim);
    default: return MT_ERR_INVALID_ARGUMENT;
    }
}

static void free_call(call *c)
{
    for (int k = 0; k < NARGS[c->f]; ++k)
        tt_free(&c->t[k]);
}

#endif /* MT_TT_CALLS_H */
