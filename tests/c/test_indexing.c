/*
 * test_indexing.c: the index helpers of src/indexing.h, on the host.
 *
 * The other C tests compute their references with these very helpers, so
 * they cannot catch a wrong helper (the reference would be wrong the same
 * way). Here every expectation comes from somewhere else: an "odometer"
 * that counts through a shape one step at a time, keeping its multi-index
 * and its memory position up to date by additions alone, and, for
 * broadcasting, NumPy's rule written out per dim.
 *
 * The first case asks the library for one op: in a course handout whose
 * helpers are still stubs, it fails with the task's message.
 */
#include "test_util.h"

/* One step of the odometer: the last dim turns fastest; a dim that wraps
 * goes back to 0 and carries into the one before it. pos follows the index
 * through the strides: +strides[d] for a step of dim d, minus the whole
 * run of a dim that wraps. */
static void odometer_step(int64_t *index, int64_t *pos, const int64_t *shape, const int64_t *strides, int ndim)
{
    for (int d = ndim - 1; d >= 0; --d) {
        if (index[d] + 1 < shape[d]) {
            index[d]++;
            *pos += strides[d];
            return;
        }
        *pos -= (shape[d] - 1) * strides[d];
        index[d] = 0;
    }
}

static void random_layout(int ndim, int64_t *shape, int64_t *strides)
{
    for (int d = 0; d < ndim; ++d) {
        shape[d] = tt_rand_int(1, 5);
        strides[d] = tt_rand_int(0, 40);
    }
}

/* Returns whether the library runs an op, i.e. whether its index helpers
 * are in place: a handout's stub of this task makes every op fail with
 * "task indexing is not done". Each group starts with it and runs its
 * cases only then, so that a stub scores nothing: the few cases that a
 * stub returning zeros would pass (rank 0, all lengths 1) do not run. */
static int case_library_accepts_an_output(void)
{
    tt_case("mt_fill of 4 floats (the library's index helpers are in place)");
    void *data = NULL;
    if (!tt_expect_ok(mt_malloc(&data, 4 * sizeof(float)), "mt_malloc"))
        return 0;
    mt_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = MT_FLOAT32;
    t.ndim = 1;
    t.shape[0] = 4;
    t.strides[0] = 1;
    const int ok = tt_expect_ok(mt_fill(t, 1.5), "mt_fill");
    tt_expect_ok(mt_free(data), "mt_free");
    return ok;
}

static void case_to_index_and_position(int ndim)
{
    int64_t shape[MT_MAX_DIMS], strides[MT_MAX_DIMS];
    random_layout(ndim, shape, strides);
    tt_case("to_index and index_to_position: shape %s, strides %s", tt_index_str(shape, ndim),
            tt_index_str(strides, ndim));
    int64_t odometer[MT_MAX_DIMS] = {0};
    int64_t pos = 0;
    const int64_t n = shape_numel(shape, ndim);
    for (int64_t i = 0; i < n; ++i) {
        int64_t index[MT_MAX_DIMS];
        to_index(i, shape, ndim, index);
        for (int d = 0; d < ndim; ++d)
            if (!TT_CHECK(index[d] == odometer[d], "to_index(%" PRId64 "): dim %d is %" PRId64 ", expected %" PRId64
                          " (the index is %s)", i, d, index[d], odometer[d], tt_index_str(odometer, ndim)))
                return;
        const int64_t got = index_to_position(odometer, strides, ndim);
        if (!TT_CHECK(got == pos, "index_to_position(%s) is %" PRId64 ", expected %" PRId64,
                      tt_index_str(odometer, ndim), got, pos))
            return;
        odometer_step(odometer, &pos, shape, strides, ndim);
    }
}

static void case_broadcast_index(int big_ndim)
{
    int64_t big[MT_MAX_DIMS], unused[MT_MAX_DIMS], small[MT_MAX_DIMS];
    random_layout(big_ndim, big, unused);
    /* The small shape: the big one's last dims, some of them 1. */
    const int ndim = (int)tt_rand_int(0, big_ndim);
    const int lead = big_ndim - ndim;
    for (int d = 0; d < ndim; ++d)
        small[d] = tt_chance(0.4) ? 1 : big[d + lead];
    tt_case("broadcast_index: shape %s into %s", tt_index_str(small, ndim), tt_index_str(big, big_ndim));
    int64_t odometer[MT_MAX_DIMS] = {0};
    int64_t pos = 0;
    const int64_t n = shape_numel(big, big_ndim);
    for (int64_t i = 0; i < n; ++i) {
        int64_t got[MT_MAX_DIMS];
        broadcast_index(odometer, big_ndim, small, ndim, got);
        for (int d = 0; d < ndim; ++d) {
            /* NumPy: dims align on the right; a dim of size 1 repeats its one element. */
            const int64_t expected = small[d] == 1 ? 0 : odometer[d + lead];
            if (!TT_CHECK(got[d] == expected, "broadcast_index(%s): dim %d is %" PRId64 ", expected %" PRId64,
                          tt_index_str(odometer, big_ndim), d, got[d], expected))
                return;
        }
        odometer_step(odometer, &pos, big, unused, big_ndim);
    }
}

int main(void)
{
    tt_init("test_indexing");
    TT_GROUP("to_index") {
        if (case_library_accepts_an_output())
            for (int rep = 0; rep < 20; ++rep)
                for (int ndim = 0; ndim <= 4; ++ndim)
                    case_to_index_and_position(ndim);
    }
    TT_GROUP("broadcast_index") {
        if (case_library_accepts_an_output())
            for (int rep = 0; rep < 20; ++rep)
                for (int ndim = 0; ndim <= 4; ++ndim)
                    case_broadcast_index(ndim);
    }
    return tt_summary();
}
