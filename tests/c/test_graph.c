/*
 * test_graph.c: graph capture and replay (src/graph.cu). A capture records
 * out = exp(a + b) through a temporary allocated and freed inside it; each
 * replay must compute it from the inputs' values of the moment, as the ops
 * run eagerly would. Then what a capture refuses: the legacy default stream,
 * a copy to the host in the middle (the capture is aborted and the library
 * works on), ending or replaying what was never captured.
 *
 *   make build/tests/emu/test_graph && build/tests/emu/test_graph
 *   MT_TEST_SEED=42 build/tests/emu/test_graph     (replay a run)
 */
#include "test_util.h"

/* Records out = exp(a + b) on `stream`, the sum in a buffer of the capture's own. */
static void *capture_exp_of_sum(void *stream, const tt_tensor *out, const tt_tensor *a, const tt_tensor *b)
{
    void *graph = NULL;
    if (!tt_expect_ok(mt_graph_capture_begin(stream), "mt_graph_capture_begin"))
        return NULL;
    mt_tensor sum = out->t;
    if (tt_expect_ok(mt_malloc(&sum.data, (size_t)out->cap * tt_itemsize(out->t.dtype)), "mt_malloc")) {
        tt_expect_ok(mt_zip(MT_ZIP_ADD, sum, a->t, b->t), "mt_zip");
        tt_expect_ok(mt_map(MT_MAP_EXP, out->t, sum, 0.0), "mt_map");
        tt_expect_ok(mt_free(sum.data), "mt_free"); /* freed inside the capture: the graph keeps it */
    }
    tt_expect_ok(mt_graph_capture_end(stream, &graph), "mt_graph_capture_end");
    return graph;
}

static void replay_case(int dtype, int ndim, const int64_t *shape)
{
    void *stream = NULL;
    if (!tt_expect_ok(mt_stream_create(&stream), "mt_stream_create"))
        return;
    tt_tensor out = tt_new(dtype, ndim, shape, TT_CONTIGUOUS);
    tt_tensor a = tt_new(dtype, ndim, shape, TT_CONTIGUOUS);
    tt_tensor b = tt_new(dtype, ndim, shape, TT_CONTIGUOUS);
    tt_fill(&b, -2, 2, 0);
    tt_case("capture exp(a + b) into %s", tt_str(&out));
    void *graph = capture_exp_of_sum(stream, &out, &a, &b);
    for (int replay = 0; graph && replay < 3; ++replay) {
        tt_fill(&a, -2, 2, 0); /* new inputs in the same buffers */
        tt_case("replay %d of exp(a + b), out %s", replay, tt_str(&out));
        tt_expect *expect = tt_expect_alloc(&out);
        for (int64_t i = 0; i < tt_numel(&out.t); ++i)
            expect[i] = tt_value(exp(tt_round(tt_at_ordinal(&a, i) + tt_at_ordinal(&b, i), dtype)));
        if (tt_expect_ok(mt_graph_replay(graph, stream), "mt_graph_replay") &&
            tt_expect_ok(mt_stream_synchronize(stream), "mt_stream_synchronize"))
            tt_check_output(&out, expect);
        free(expect);
    }
    tt_expect_ok(mt_graph_destroy(graph), "mt_graph_destroy");
    tt_expect_ok(mt_stream_destroy(stream), "mt_stream_destroy");
    tt_free(&out);
    tt_free(&a);
    tt_free(&b);
}

int main(void)
{
    tt_init("test_graph");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    int64_t shape[MT_MAX_DIMS];
    for (int t = 0; t < 2; ++t)
        TT_GROUP("replay %s", tt_dtype_name(dtypes[t])) {
            for (int c = 0; c < 8; ++c) {
                const int ndim = tt_random_shape(shape, 1, 3, 2000, 0.0);
                replay_case(dtypes[t], ndim, shape);
            }
        }
    TT_GROUP("what a capture refuses") {
        int64_t s4[] = {4};
        void *stream = NULL, *graph = NULL;
        tt_expect_ok(mt_stream_create(&stream), "mt_stream_create");
        tt_tensor x = tt_new(MT_FLOAT32, 1, s4, TT_CONTIGUOUS);
        tt_fill(&x, -1, 1, 0);
        tt_case("the legacy default stream cannot capture");
        tt_expect_error(mt_graph_capture_begin(NULL), MT_ERR_INVALID_ARGUMENT, "mt_graph_capture_begin", NULL);
        tt_case("a copy to the host during a capture fails, and the library works after the abort");
        double host[4];
        if (tt_expect_ok(mt_graph_capture_begin(stream), "mt_graph_capture_begin")) {
            float buf[4];
            tt_expect_error(mt_memcpy_d2h(buf, x.t.data, sizeof buf), MT_ERR_CUDA, "mt_memcpy_d2h", NULL);
            tt_expect_error(mt_graph_capture_begin(stream), MT_ERR_INVALID_ARGUMENT, "mt_graph_capture_begin",
                            NULL);
            tt_expect_ok(mt_graph_capture_abort(), "mt_graph_capture_abort");
        }
        if (tt_download(&x, host))
            TT_CHECK(host[0] == x.host[0], "x[0] reads %g after the abort, wrote %g", host[0], x.host[0]);
        tt_case("ending a capture that was not begun, replaying nothing");
        tt_expect_error(mt_graph_capture_end(stream, &graph), MT_ERR_INVALID_ARGUMENT, "mt_graph_capture_end",
                        NULL);
        tt_expect_error(mt_graph_replay(NULL, stream), MT_ERR_INVALID_ARGUMENT, "mt_graph_replay", NULL);
        tt_expect_ok(mt_graph_destroy(NULL), "mt_graph_destroy");
        tt_free(&x);
        tt_expect_ok(mt_stream_destroy(stream), "mt_stream_destroy");
    }
    return tt_summary();
}
