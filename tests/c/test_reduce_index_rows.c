/*
 * test_reduce_index_rows.c: mt_reduce_index_rows, the one-pass kernel of
 * max / min / argmax / argmin over contiguous rows (src/reduce_index_rows.cu),
 * with each group size (1, 2, 4 or 8 warps a row, 0 the library's), values
 * and indices together, values alone (amax, amin) and indices alone (argmax,
 * argmin).
 *
 * The specification, row by row: the maximum (minimum) and the index of its
 * first occurrence; a NaN beats every number (the first NaN's index, value
 * NaN); a row of -inf (+inf for min) has index 0. Rows are whole 16-byte
 * Packs: 4 floats or 2 doubles; lengths around one Pack a lane, a warp's
 * and a block's worth; row counts around a block's rows (8 / warps); rows
 * contiguous, sliced out of wider rows, and batched (3 dims). Whole-number
 * inputs make ties; NaN and infinities are planted. The refusals: a layout
 * the kernel cannot read, int64, sum, a bad group size, no output.
 *
 *   make build/tests/emu/test_reduce_index_rows && build/tests/emu/test_reduce_index_rows
 */
#include "test_util.h"

static const int warp_choices[] = {0, 1, 2, 4, 8};

/* A row-major (batch, rows, len) view whose rows are `pitch` elements apart
 * (pitch >= len, a multiple of the Pack width `width`: rows sliced out of
 * wider ones), from `lead` elements into its buffer. batch 0: two dims. The
 * buffer is a whole number of Packs, so that the emulator's full checks,
 * which put its last byte against a guard page, start it 16-byte aligned. */
static tt_tensor new_rows(int dtype, int64_t batch, int64_t rows, int64_t len, int64_t pitch, int64_t lead,
                          int64_t width)
{
    const int64_t used = lead + (batch ? batch : 1) * rows * pitch;
    const int64_t total = (used + width - 1) / width * width;
    tt_tensor x = tt_new(dtype, 1, &total, TT_CONTIGUOUS);
    if (batch) {
        x.t.ndim = 3;
        x.t.shape[0] = batch, x.t.shape[1] = rows, x.t.shape[2] = len;
        x.t.strides[0] = rows * pitch, x.t.strides[1] = pitch, x.t.strides[2] = 1;
    } else {
        x.t.ndim = 2;
        x.t.shape[0] = rows, x.t.shape[1] = len;
        x.t.strides[0] = pitch, x.t.strides[1] = 1;
    }
    x.t.offset = lead;
    return x;
}

/* Row r of the view (its first element's position and its length): the
 * reference's walk, first NaN, else the first best. */
static void reference_row(const tt_tensor *in, int64_t r, int max, double *value, int64_t *index)
{
    const int last = in->t.ndim - 1;
    const int64_t len = in->t.shape[last];
    const int64_t rows = in->t.shape[last - 1];
    int64_t first = in->t.offset + (r % rows) * in->t.strides[last - 1];
    if (last == 2)
        first += (r / rows) * in->t.strides[0];
    double best = in->host[first];
    int64_t at = 0;
    for (int64_t k = 1; k < len && !isnan(best); ++k) {
        const double x = in->host[first + k];
        if (isnan(x) || (max ? x > best : x < best)) {
            best = x;
            at = k;
        }
    }
    *value = best;
    *index = at;
}

/* One case: op (MT_REDUCE_MAX / MIN: `outputs` 3 both, 1 values only;
 * ARGMAX / ARGMIN: indices only) with `warps`, checked row by row. */
static void rows_case(int op, int outputs, int warps, const tt_tensor *in)
{
    const int max = op == MT_REDUCE_MAX || op == MT_REDUCE_ARGMAX;
    const int with_values = outputs & 1, with_indices = (outputs & 2) || op == MT_REDUCE_ARGMAX ||
                                                        op == MT_REDUCE_ARGMIN;
    int64_t out_shape[MT_MAX_DIMS];
    for (int d = 0; d < in->t.ndim; ++d)
        out_shape[d] = d == in->t.ndim - 1 ? 1 : in->t.shape[d];
    tt_tensor values = tt_new(in->t.dtype, in->t.ndim, out_shape, TT_OUTPUT);
    tt_tensor indices = tt_new(MT_INT64, in->t.ndim, out_shape, TT_OUTPUT);
    /* Both outputs share one layout (the library's rule). */
    if (with_values && with_indices) {
        tt_free(&indices);
        memset(&indices, 0, sizeof indices);
        indices.t = values.t;
        indices.t.dtype = MT_INT64;
        indices.cap = values.cap;
        indices.host = malloc((size_t)(indices.cap ? indices.cap : 1) * sizeof(double));
        for (int64_t i = 0; i < indices.cap; ++i)
            indices.host[i] = TT_POISON;
        indices.t.data = NULL;
        if (tt_expect_ok(mt_malloc(&indices.t.data, (size_t)(indices.cap ? indices.cap : 1) * 8), "mt_malloc"))
            tt_upload(&indices);
    }
    mt_tensor none;
    memset(&none, 0, sizeof none);
    tt_case("mt_reduce_index_rows %s%s warps %d: in %s", tt_op_name("reduce", op),
            with_values && with_indices ? " (values, indices)" : with_values ? " (values)" : " (indices)", warps,
            tt_str(in));
    mt_status st = mt_reduce_index_rows(op, with_values ? values.t : none, with_indices ? indices.t : none, in->t,
                                        in->t.ndim - 1, warps);
    tt_expect *e_values = tt_expect_alloc(&values);
    tt_expect *e_indices = tt_expect_alloc(&indices);
    for (int64_t r = 0; r < tt_numel(&values.t); ++r) {
        double v;
        int64_t k;
        reference_row(in, r, max, &v, &k);
        e_values[r] = tt_value(v);
        e_indices[r] = tt_value((double)k);
    }
    if (tt_expect_ok(st, "mt_reduce_index_rows")) {
        if (with_values)
            tt_check_output(&values, e_values);
        else
            tt_expect_unchanged(&values, "values (not asked for)");
        if (with_indices)
            tt_check_output(&indices, e_indices);
        else
            tt_expect_unchanged(&indices, "indices (not asked for)");
    }
    tt_expect_unchanged(in, "in");
    free(e_values);
    free(e_indices);
    tt_free(&values);
    tt_free(&indices);
}

/* What the kernel refuses, its outputs untouched. */
static void refusals(void)
{
    static const int64_t s_in[] = {3, 8}, s_out[] = {3, 1};
    tt_tensor in = tt_new(MT_FLOAT32, 2, s_in, TT_CONTIGUOUS);
    tt_tensor values = tt_new(MT_FLOAT32, 2, s_out, TT_CONTIGUOUS);
    tt_tensor indices = tt_new(MT_INT64, 2, s_out, TT_CONTIGUOUS);
    tt_tensor ints = tt_new(MT_INT64, 2, s_in, TT_CONTIGUOUS);
    tt_fill(&in, -1, 1, 0);
    tt_fill(&ints, -5, 5, TT_INTEGERS);
    mt_tensor none;
    memset(&none, 0, sizeof none);
    const char *func = "mt_reduce_index_rows";

    tt_case("%s: neither values nor indices", func);
    tt_expect_error(mt_reduce_index_rows(MT_REDUCE_MAX, none, none, in.t, 1, 0), MT_ERR_INVALID_ARGUMENT, func, &in);
    tt_case("%s: sum has no place here", func);
    tt_expect_error(mt_reduce_index_rows(MT_REDUCE_SUM, values.t, none, in.t, 1, 0), MT_ERR_INVALID_ARGUMENT, func,
                    &values);
    tt_case("%s: 3 warps a row", func);
    tt_expect_error(mt_reduce_index_rows(MT_REDUCE_MAX, values.t, indices.t, in.t, 1, 3), MT_ERR_INVALID_ARGUMENT,
                    func, &values);
    tt_case("%s: int64 rows", func);
    tt_expect_error(mt_reduce_index_rows(MT_REDUCE_ARGMAX, none, indices.t, ints.t, 1, 0), MT_ERR_INVALID_ARGUMENT,
                    func, &indices);
    tt_case("%s: a dim that is not the last", func);
    static const int64_t s_col[] = {1, 8};
    tt_tensor col_values = tt_new(MT_FLOAT32, 2, s_col, TT_CONTIGUOUS);
    tt_expect_error(mt_reduce_index_rows(MT_REDUCE_MAX, col_values.t, none, in.t, 0, 0), MT_ERR_INVALID_ARGUMENT,
                    func, &col_values);
    tt_free(&col_values);
    tt_case("%s: rows that start off 16 bytes", func);
    mt_tensor shifted = in.t;
    shifted.offset = 1;
    shifted.shape[1] = 4;
    tt_expect_error(mt_reduce_index_rows(MT_REDUCE_MAX, values.t, indices.t, shifted, 1, 0), MT_ERR_INVALID_ARGUMENT,
                    func, &values);
    tt_case("%s: a row that is not whole Packs", func);
    mt_tensor ragged = in.t;
    ragged.shape[1] = 6;
    tt_expect_error(mt_reduce_index_rows(MT_REDUCE_MIN, values.t, indices.t, ragged, 1, 0), MT_ERR_INVALID_ARGUMENT,
                    func, &values);
    tt_case("%s: a last dim of stride 2", func);
    mt_tensor stepped = in.t;
    stepped.shape[1] = 4;
    stepped.strides[1] = 2;
    tt_expect_error(mt_reduce_index_rows(MT_REDUCE_MAX, values.t, indices.t, stepped, 1, 0), MT_ERR_INVALID_ARGUMENT,
                    func, &values);
    tt_case("%s: float indices", func);
    tt_expect_error(mt_reduce_index_rows(MT_REDUCE_ARGMAX, none, values.t, in.t, 1, 0), MT_ERR_DTYPE, func, &values);
    tt_expect_unchanged(&indices, "indices");
    tt_free(&in);
    tt_free(&values);
    tt_free(&indices);
    tt_free(&ints);
}

int main(void)
{
    tt_init("test_reduce_index_rows");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    /* Elements a row, in Packs: one, a few, one a lane of a warp (32), four
     * a lane (128), a group of 8 warps' worth (256, 1024) and off those. */
    static const int64_t packs[] = {1, 3, 31, 32, 33, 127, 128, 129, 257, 1024, 1025};
    static const int64_t row_counts[] = {1, 3, 9, 17};
    static const int ops[] = {MT_REDUCE_MAX, MT_REDUCE_MIN, MT_REDUCE_ARGMAX, MT_REDUCE_ARGMIN};
    for (int t = 0; t < 2; ++t)
        for (int w = 0; w < 5; ++w)
            TT_GROUP("%s warps %d", tt_dtype_name(dtypes[t]), warp_choices[w]) {
                const int dtype = dtypes[t], width = dtype == MT_FLOAT32 ? 4 : 2;
                for (size_t p = 0; p < sizeof packs / sizeof packs[0]; ++p) {
                    const int64_t len = packs[p] * width;
                    const int64_t rows = TT_PICK(row_counts);
                    /* Long rows stay few: the emulator reads every element. */
                    const int64_t n_rows = len > 2048 ? 2 : rows;
                    const int layout = (int)(p % 3); /* contiguous, sliced, batched */
                    const int64_t pitch = layout == 1 ? len + width * tt_rand_int(1, 3) : len;
                    const int64_t lead = layout == 0 ? 0 : width * tt_rand_int(0, 2);
                    tt_tensor in = new_rows(dtype, layout == 2 ? 2 : 0, n_rows, len, pitch, lead, width);
                    const int op = ops[p % 4];
                    switch (p % 4) {
                    case 0: /* ties: a few whole numbers */
                        tt_fill(&in, -3, 3, TT_INTEGERS);
                        break;
                    case 1: /* NaNs among ties */
                        tt_fill(&in, -2, 2, TT_INTEGERS);
                        tt_plant_nans(&in, 0.01);
                        break;
                    case 2: /* random values */
                        tt_fill(&in, -100, 100, 0);
                        break;
                    default: /* every value the extreme the row starts from */
                        tt_fill_value(&in, (op == MT_REDUCE_MAX || op == MT_REDUCE_ARGMAX) ? -INFINITY : INFINITY);
                        break;
                    }
                    const int outputs = op == MT_REDUCE_MAX || op == MT_REDUCE_MIN ? (tt_chance(0.5) ? 3 : 1) : 2;
                    rows_case(op, outputs, warp_choices[w], &in);
                    /* The same rows, the other extreme, both outputs. */
                    rows_case(op == MT_REDUCE_MAX || op == MT_REDUCE_ARGMAX ? MT_REDUCE_MIN : MT_REDUCE_MAX, 3,
                              warp_choices[w], &in);
                    tt_free(&in);
                }
            }

    TT_GROUP("refusals")
        refusals();

    return tt_summary();
}
