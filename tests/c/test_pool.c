/*
 * test_pool.c: the pooling kernels of src/pool.cu against plain loops in
 * double, float32 and float64, on random strided views (permuted, sliced,
 * offset; outputs too): max pooling's values and indices (ties go to the
 * first maximum, NaN wins), the values alone without indices, and its
 * backward from those indices; average
 * pooling with and without count_include_pad, with a divisor; adaptive
 * average pooling, global and with overlapping windows; floor and ceil_mode
 * output sizes, padding up to half the kernel, strides under, equal to and
 * over the kernel, dilation, N or C of 1, an empty batch; random cases from
 * the harness's fixed seed. Then the refusals; then mt_max_pool2d_new and
 * mt_avg_pool2d_new (their outputs allocated in the call): the same bytes as
 * the calls above, nothing left allocated after a refusal.
 *
 *   make check-c T=test_pool
 */
#include "test_util.h"

typedef struct {
    int64_t n, c, h, w;
    int kh, kw, sh, sw, ph, pw, dh, dw;
    int ceil_mode, count_include_pad;
    int64_t divisor;
} pool_args;

/* torch's output size (pooling_output_shape). */
static int64_t out_size(int64_t size, int k, int stride, int pad, int dilation, int ceil_mode)
{
    int64_t span = size + 2 * pad - (int64_t)dilation * (k - 1) - 1;
    int64_t outs = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
    if (ceil_mode && (outs - 1) * stride >= size + pad)
        --outs;
    return outs;
}

/* ---- the references ------------------------------------------------------- */

/* The maximum of window (n, c, oy, ox) and its position y * W + x: the first
 * of equal maxima, the last NaN (torch's loop: v > best || isnan(v)). */
static double ref_max(const tt_tensor *in, const pool_args *a, int64_t n, int64_t c, int64_t oy, int64_t ox,
                      int64_t *at)
{
    double best = -INFINITY;
    *at = -1;
    for (int i = 0; i < a->kh; ++i)
        for (int j = 0; j < a->kw; ++j) {
            int64_t y = oy * a->sh - a->ph + (int64_t)i * a->dh, x = ox * a->sw - a->pw + (int64_t)j * a->dw;
            if (y < 0 || y >= a->h || x < 0 || x >= a->w)
                continue;
            int64_t idx[4] = {n, c, y, x};
            double v = tt_at(in, idx);
            if (*at < 0 || v > best || isnan(v)) {
                best = v;
                *at = y * a->w + x;
            }
        }
    return best;
}

/* torch's avg_pool2d divisor of window (oy, ox). */
static double ref_divisor(const pool_args *a, int64_t oy, int64_t ox)
{
    if (a->divisor)
        return (double)a->divisor;
    int64_t y0 = oy * a->sh - a->ph, x0 = ox * a->sw - a->pw;
    int64_t y1 = y0 + a->kh < a->h + a->ph ? y0 + a->kh : a->h + a->ph;
    int64_t x1 = x0 + a->kw < a->w + a->pw ? x0 + a->kw : a->w + a->pw;
    if (a->count_include_pad)
        return (double)((y1 - y0) * (x1 - x0));
    y0 = y0 > 0 ? y0 : 0;
    x0 = x0 > 0 ? x0 : 0;
    y1 = y1 < a->h ? y1 : a->h;
    x1 = x1 < a->w ? x1 : a->w;
    return (double)((y1 - y0) * (x1 - x0));
}

static int64_t adaptive_start(int64_t o, int64_t size, int64_t outs) { return o * size / outs; }
static int64_t adaptive_end(int64_t o, int64_t size, int64_t outs) { return ((o + 1) * size + outs - 1) / outs; }

/* ---- the cases ------------------------------------------------------------- */

static tt_tensor new4(int dtype, int64_t a, int64_t b, int64_t c, int64_t d, int role)
{
    int64_t s[4] = {a, b, c, d};
    return tt_new(dtype, 4, s, role);
}

/* mt_max_pool2d, then mt_max_pool2d_backward from its indices. */
static void max_case(int dtype, pool_args a)
{
    const int64_t oh = out_size(a.h, a.kh, a.sh, a.ph, a.dh, a.ceil_mode);
    const int64_t ow = out_size(a.w, a.kw, a.sw, a.pw, a.dw, a.ceil_mode);
    tt_tensor in = new4(dtype, a.n, a.c, a.h, a.w, TT_INPUT), out = new4(dtype, a.n, a.c, oh, ow, TT_OUTPUT);
    tt_tensor indices = new4(MT_INT64, a.n, a.c, oh, ow, TT_OUTPUT);
    tt_fill(&in, -3, 3, tt_chance(0.5) ? TT_INTEGERS : 0); /* whole numbers: ties */
    if (tt_chance(0.25))
        tt_plant_nans(&in, 0.05);
    tt_case("mt_max_pool2d %s: in %s, out %s, kernel (%d, %d), stride (%d, %d), padding (%d, %d), dilation "
            "(%d, %d)%s", tt_dtype_name(dtype), tt_str(&in), tt_str(&out), a.kh, a.kw, a.sh, a.sw, a.ph, a.pw,
            a.dh, a.dw, a.ceil_mode ? ", ceil_mode" : "");
    tt_expect *values = tt_expect_alloc(&out), *positions = tt_expect_alloc(&indices);
    int64_t *chosen = malloc((size_t)(tt_numel(&out.t) ? tt_numel(&out.t) : 1) * sizeof(int64_t));
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        int64_t o[4];
        to_index(i, out.t.shape, 4, o);
        values[i] = tt_value(ref_max(&in, &a, o[0], o[1], o[2], o[3], &chosen[i]));
        positions[i] = tt_value((double)chosen[i]);
    }
    if (tt_expect_ok(mt_max_pool2d(out.t, indices.t, in.t, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw),
                     "mt_max_pool2d")) {
        tt_check_output(&out, values);
        tt_check_output(&indices, positions);
        tt_expect_unchanged(&in, "in");
    }
    /* The same values with indices none (a zeroed descriptor): nothing else written. */
    tt_tensor out_only = new4(dtype, a.n, a.c, oh, ow, TT_OUTPUT);
    mt_tensor none;
    memset(&none, 0, sizeof none);
    tt_case("mt_max_pool2d %s without indices: in %s, out %s", tt_dtype_name(dtype), tt_str(&in), tt_str(&out_only));
    if (tt_expect_ok(mt_max_pool2d(out_only.t, none, in.t, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw),
                     "mt_max_pool2d"))
        tt_check_output(&out_only, values);
    tt_free(&out_only);

    /* The backward, from the reference's indices, each inside its window as
     * a forward's are (a strided layout, no stride 0 that would repeat one
     * window's choice in another): each input element sums the gradients
     * of the windows that chose it. */
    tt_tensor grad_out = new4(dtype, a.n, a.c, oh, ow, TT_INPUT), idx = new4(MT_INT64, a.n, a.c, oh, ow, TT_OUTPUT);
    tt_tensor grad_in = new4(dtype, a.n, a.c, a.h, a.w, TT_OUTPUT);
    tt_fill(&grad_out, -2, 2, 0);
    for (int64_t i = 0; i < tt_numel(&idx.t); ++i) {
        int64_t o[4];
        to_index(i, idx.t.shape, 4, o);
        idx.host[tt_pos(&idx, o)] = (double)chosen[i];
    }
    tt_upload(&idx);
    tt_expect *grads = tt_expect_alloc(&grad_in);
    for (int64_t i = 0; i < tt_numel(&grad_in.t); ++i) {
        int64_t g[4];
        to_index(i, grad_in.t.shape, 4, g);
        double sum = 0.0, sumsq = 0.0;
        int64_t terms = 1;
        for (int64_t oy = 0; oy < oh; ++oy)
            for (int64_t ox = 0; ox < ow; ++ox) {
                int64_t o[4] = {g[0], g[1], oy, ox};
                if ((int64_t)tt_at(&idx, o) == g[2] * a.w + g[3]) {
                    sum += tt_at(&grad_out, o);
                    sumsq += tt_at(&grad_out, o) * tt_at(&grad_out, o);
                    ++terms;
                }
            }
        grads[i] = tt_sum(sum, sumsq, terms);
    }
    tt_case("mt_max_pool2d_backward %s: grad_in %s, grad_out %s, indices %s", tt_dtype_name(dtype), tt_str(&grad_in),
            tt_str(&grad_out), tt_str(&idx));
    if (tt_expect_ok(mt_max_pool2d_backward(grad_in.t, grad_out.t, idx.t, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh,
                                            a.dw), "mt_max_pool2d_backward"))
        tt_check_output(&grad_in, grads);
    free(values);
    free(positions);
    free(chosen);
    free(grads);
    tt_free(&in);
    tt_free(&out);
    tt_free(&indices);
    tt_free(&grad_out);
    tt_free(&idx);
    tt_free(&grad_in);
}

/* mt_avg_pool2d and its backward. */
static void avg_case(int dtype, pool_args a)
{
    const int64_t oh = out_size(a.h, a.kh, a.sh, a.ph, 1, a.ceil_mode);
    const int64_t ow = out_size(a.w, a.kw, a.sw, a.pw, 1, a.ceil_mode);
    tt_tensor in = new4(dtype, a.n, a.c, a.h, a.w, TT_INPUT), out = new4(dtype, a.n, a.c, oh, ow, TT_OUTPUT);
    tt_fill(&in, -2, 2, TT_SOME_ZEROS);
    tt_case("mt_avg_pool2d %s: in %s, out %s, kernel (%d, %d), stride (%d, %d), padding (%d, %d)%s%s, divisor "
            "%lld", tt_dtype_name(dtype), tt_str(&in), tt_str(&out), a.kh, a.kw, a.sh, a.sw, a.ph, a.pw,
            a.ceil_mode ? ", ceil_mode" : "", a.count_include_pad ? ", count_include_pad" : "",
            (long long)a.divisor);
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        int64_t o[4];
        to_index(i, out.t.shape, 4, o);
        double sum = 0.0, sumsq = 0.0, div = ref_divisor(&a, o[2], o[3]);
        for (int i2 = 0; i2 < a.kh; ++i2)
            for (int j = 0; j < a.kw; ++j) {
                int64_t y = o[2] * a.sh - a.ph + i2, x = o[3] * a.sw - a.pw + j;
                if (y < 0 || y >= a.h || x < 0 || x >= a.w)
                    continue;
                int64_t idx[4] = {o[0], o[1], y, x};
                sum += tt_at(&in, idx) / div;
                sumsq += tt_at(&in, idx) * tt_at(&in, idx) / (div * div);
            }
        expect[i] = tt_sum(sum, sumsq, a.kh * a.kw + 1);
    }
    if (tt_expect_ok(mt_avg_pool2d(out.t, in.t, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.count_include_pad, a.divisor),
                     "mt_avg_pool2d")) {
        tt_check_output(&out, expect);
        tt_expect_unchanged(&in, "in");
    }

    tt_tensor grad_out = new4(dtype, a.n, a.c, oh, ow, TT_INPUT), grad_in = new4(dtype, a.n, a.c, a.h, a.w, TT_OUTPUT);
    tt_fill(&grad_out, -2, 2, 0);
    tt_expect *grads = tt_expect_alloc(&grad_in);
    for (int64_t i = 0; i < tt_numel(&grad_in.t); ++i) {
        int64_t g[4];
        to_index(i, grad_in.t.shape, 4, g);
        double sum = 0.0, sumsq = 0.0;
        for (int64_t oy = 0; oy < oh; ++oy)
            for (int64_t ox = 0; ox < ow; ++ox) {
                int64_t y0 = oy * a.sh - a.ph, x0 = ox * a.sw - a.pw;
                if (g[2] < y0 || g[2] >= y0 + a.kh || g[3] < x0 || g[3] >= x0 + a.kw)
                    continue;
                int64_t o[4] = {g[0], g[1], oy, ox};
                double v = tt_at(&grad_out, o) / ref_divisor(&a, oy, ox);
                sum += v;
                sumsq += v * v;
            }
        grads[i] = tt_sum(sum, sumsq, a.kh * a.kw + 1);
    }
    tt_case("mt_avg_pool2d_backward %s: grad_in %s, grad_out %s", tt_dtype_name(dtype), tt_str(&grad_in),
            tt_str(&grad_out));
    if (tt_expect_ok(mt_avg_pool2d_backward(grad_in.t, grad_out.t, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw,
                                            a.count_include_pad, a.divisor), "mt_avg_pool2d_backward"))
        tt_check_output(&grad_in, grads);
    free(expect);
    free(grads);
    tt_free(&in);
    tt_free(&out);
    tt_free(&grad_out);
    tt_free(&grad_in);
}

/* mt_adaptive_avg_pool2d to (oh, ow), and its backward. */
static void adaptive_case(int dtype, int64_t n, int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow)
{
    tt_tensor in = new4(dtype, n, c, h, w, TT_INPUT), out = new4(dtype, n, c, oh, ow, TT_OUTPUT);
    tt_fill(&in, -2, 2, TT_SOME_ZEROS);
    tt_case("mt_adaptive_avg_pool2d %s: in %s, out %s", tt_dtype_name(dtype), tt_str(&in), tt_str(&out));
    tt_expect *expect = tt_expect_alloc(&out);
    for (int64_t i = 0; i < tt_numel(&out.t); ++i) {
        int64_t o[4];
        to_index(i, out.t.shape, 4, o);
        int64_t y0 = adaptive_start(o[2], h, oh), y1 = adaptive_end(o[2], h, oh);
        int64_t x0 = adaptive_start(o[3], w, ow), x1 = adaptive_end(o[3], w, ow);
        double sum = 0.0, sumsq = 0.0, area = (double)((y1 - y0) * (x1 - x0));
        for (int64_t y = y0; y < y1; ++y)
            for (int64_t x = x0; x < x1; ++x) {
                int64_t idx[4] = {o[0], o[1], y, x};
                sum += tt_at(&in, idx) / area;
                sumsq += tt_at(&in, idx) * tt_at(&in, idx) / (area * area);
            }
        expect[i] = tt_sum(sum, sumsq, (y1 - y0) * (x1 - x0));
    }
    if (tt_expect_ok(mt_adaptive_avg_pool2d(out.t, in.t), "mt_adaptive_avg_pool2d"))
        tt_check_output(&out, expect);

    tt_tensor grad_out = new4(dtype, n, c, oh, ow, TT_INPUT), grad_in = new4(dtype, n, c, h, w, TT_OUTPUT);
    tt_fill(&grad_out, -2, 2, 0);
    tt_expect *grads = tt_expect_alloc(&grad_in);
    for (int64_t i = 0; i < tt_numel(&grad_in.t); ++i) {
        int64_t g[4];
        to_index(i, grad_in.t.shape, 4, g);
        double sum = 0.0, sumsq = 0.0;
        int64_t terms = 1;
        for (int64_t oy = 0; oy < oh; ++oy)
            for (int64_t ox = 0; ox < ow; ++ox) {
                int64_t y0 = adaptive_start(oy, h, oh), y1 = adaptive_end(oy, h, oh);
                int64_t x0 = adaptive_start(ox, w, ow), x1 = adaptive_end(ox, w, ow);
                if (g[2] < y0 || g[2] >= y1 || g[3] < x0 || g[3] >= x1)
                    continue;
                int64_t o[4] = {g[0], g[1], oy, ox};
                double v = tt_at(&grad_out, o) / (double)((y1 - y0) * (x1 - x0));
                sum += v;
                sumsq += v * v;
                ++terms;
            }
        grads[i] = tt_sum(sum, sumsq, terms);
    }
    tt_case("mt_adaptive_avg_pool2d_backward %s: grad_in %s, grad_out %s", tt_dtype_name(dtype), tt_str(&grad_in),
            tt_str(&grad_out));
    if (tt_expect_ok(mt_adaptive_avg_pool2d_backward(grad_in.t, grad_out.t), "mt_adaptive_avg_pool2d_backward"))
        tt_check_output(&grad_in, grads);
    free(expect);
    free(grads);
    tt_free(&in);
    tt_free(&out);
    tt_free(&grad_out);
    tt_free(&grad_in);
}

/* A random pooling: kernel 1-4, stride 1-3, padding up to half the kernel,
 * dilation 1-2, either output size formula, at least one window. */
static pool_args random_args(void)
{
    pool_args a;
    a.n = tt_rand_int(0, 2) ? tt_rand_int(1, 2) : (tt_chance(0.3) ? 0 : 1);
    a.c = tt_rand_int(1, 3);
    a.kh = (int)tt_rand_int(1, 4);
    a.kw = (int)tt_rand_int(1, 4);
    a.sh = (int)tt_rand_int(1, 3);
    a.sw = (int)tt_rand_int(1, 3);
    a.ph = (int)tt_rand_int(0, a.kh / 2);
    a.pw = (int)tt_rand_int(0, a.kw / 2);
    a.dh = (int)tt_rand_int(1, 2);
    a.dw = (int)tt_rand_int(1, 2);
    int64_t min_h = (int64_t)a.dh * (a.kh - 1) + 1 - 2 * a.ph, min_w = (int64_t)a.dw * (a.kw - 1) + 1 - 2 * a.pw;
    a.h = (min_h > 1 ? min_h : 1) + tt_rand_int(0, 12);
    a.w = (min_w > 1 ? min_w : 1) + tt_rand_int(0, 12);
    a.ceil_mode = tt_chance(0.5);
    a.count_include_pad = tt_chance(0.5);
    a.divisor = tt_chance(0.2) ? tt_rand_int(1, 7) : 0;
    return a;
}

static void refusals(void)
{
    tt_tensor in = new4(MT_FLOAT32, 1, 2, 6, 6, TT_CONTIGUOUS), out = new4(MT_FLOAT32, 1, 2, 3, 3, TT_CONTIGUOUS);
    tt_tensor idx = new4(MT_INT64, 1, 2, 3, 3, TT_CONTIGUOUS), idx_f = new4(MT_FLOAT32, 1, 2, 3, 3, TT_CONTIGUOUS);
    tt_tensor out_bad = new4(MT_FLOAT32, 1, 2, 4, 4, TT_CONTIGUOUS), out_d = new4(MT_FLOAT64, 1, 2, 3, 3, TT_CONTIGUOUS);
    tt_tensor in_i = new4(MT_INT64, 1, 2, 6, 6, TT_CONTIGUOUS), out_i = new4(MT_INT64, 1, 2, 3, 3, TT_CONTIGUOUS);
    tt_tensor empty_plane = new4(MT_FLOAT32, 1, 2, 0, 6, TT_CONTIGUOUS);
    tt_fill(&in, -1, 1, 0);
    tt_fill(&in_i, -3, 3, TT_INTEGERS);
    tt_case("int64 input");
    tt_expect_error(mt_max_pool2d(out_i.t, idx.t, in_i.t, 2, 2, 2, 2, 0, 0, 1, 1), MT_ERR_DTYPE, "mt_max_pool2d",
                    &out_i);
    tt_case("float32 indices");
    tt_expect_error(mt_max_pool2d(out.t, idx_f.t, in.t, 2, 2, 2, 2, 0, 0, 1, 1), MT_ERR_DTYPE, "mt_max_pool2d", &out);
    tt_case("a float64 out for a float32 input");
    tt_expect_error(mt_avg_pool2d(out_d.t, in.t, 2, 2, 2, 2, 0, 0, 1, 0), MT_ERR_DTYPE, "mt_avg_pool2d", &out_d);
    tt_case("an out of neither output size (4 x 4 for kernel 2, stride 2 on 6)");
    tt_expect_error(mt_avg_pool2d(out_bad.t, in.t, 2, 2, 2, 2, 0, 0, 1, 0), MT_ERR_SHAPE, "mt_avg_pool2d", &out_bad);
    tt_case("padding over half the kernel (2 for kernel 3)");
    tt_expect_error(mt_max_pool2d(out.t, idx.t, in.t, 3, 3, 2, 2, 2, 2, 1, 1), MT_ERR_INVALID_ARGUMENT,
                    "mt_max_pool2d", &out);
    tt_case("stride 0, dilation 0, a negative divisor");
    tt_expect_error(mt_max_pool2d(out.t, idx.t, in.t, 2, 2, 0, 2, 0, 0, 1, 1), MT_ERR_INVALID_ARGUMENT,
                    "mt_max_pool2d", &out);
    tt_expect_error(mt_max_pool2d(out.t, idx.t, in.t, 2, 2, 2, 2, 0, 0, 0, 1), MT_ERR_INVALID_ARGUMENT,
                    "mt_max_pool2d", &out);
    tt_expect_error(mt_avg_pool2d(out.t, in.t, 2, 2, 2, 2, 0, 0, 1, -2), MT_ERR_INVALID_ARGUMENT, "mt_avg_pool2d",
                    &out);
    tt_case("an adaptive pool of an empty plane");
    tt_expect_error(mt_adaptive_avg_pool2d(out.t, empty_plane.t), MT_ERR_SHAPE, "mt_adaptive_avg_pool2d", &out);
    tt_case("out overlapping in");
    mt_tensor alias = in.t;
    alias.shape[2] = 3;
    alias.shape[3] = 3;
    tt_expect_error(mt_avg_pool2d(alias, in.t, 2, 2, 2, 2, 0, 0, 1, 0), MT_ERR_INVALID_ARGUMENT, "mt_avg_pool2d",
                    NULL);
    tt_case("a 3-D input");
    mt_tensor in3 = in.t;
    in3.ndim = 3;
    tt_expect_error(mt_adaptive_avg_pool2d(out.t, in3), MT_ERR_SHAPE, "mt_adaptive_avg_pool2d", &out);
    tt_free(&in);
    tt_free(&out);
    tt_free(&idx);
    tt_free(&idx_f);
    tt_free(&out_bad);
    tt_free(&out_d);
    tt_free(&in_i);
    tt_free(&out_i);
    tt_free(&empty_plane);
}

/* The bytes of a contiguous device tensor t into a new host buffer. */
static unsigned char *download_bytes(const mt_tensor *t, size_t bytes)
{
    unsigned char *host = malloc(bytes ? bytes : 1);
    if (bytes)
        tt_expect_ok(mt_memcpy_d2h(host, (const char *)t->data + t->offset * tt_itemsize(t->dtype), bytes),
                     "mt_memcpy_d2h");
    return host;
}

/* Do two contiguous tensors of one shape and dtype hold the same bytes? */
static void expect_same_bytes(const mt_tensor *got, const mt_tensor *want, const char *what)
{
    const size_t bytes = (size_t)tt_numel(want) * tt_itemsize(want->dtype);
    unsigned char *g = download_bytes(got, bytes), *w = download_bytes(want, bytes);
    TT_CHECK(memcmp(g, w, bytes) == 0, "%s: the new output's bytes differ from mt_*_pool2d's", what);
    free(g);
    free(w);
}

/* mt_max_pool2d_new (values and indices, then values alone) and
 * mt_avg_pool2d_new: the same bytes as mt_max_pool2d and mt_avg_pool2d (which
 * the cases above hold to the references) into outputs of the caller, in new
 * buffers the caller owns and frees (the group's end finds none left). */
static void new_output_case(int dtype, pool_args a)
{
    const int64_t oh = out_size(a.h, a.kh, a.sh, a.ph, a.dh, a.ceil_mode);
    const int64_t ow = out_size(a.w, a.kw, a.sw, a.pw, a.dw, a.ceil_mode);
    tt_tensor in = new4(dtype, a.n, a.c, a.h, a.w, TT_INPUT), out = new4(dtype, a.n, a.c, oh, ow, TT_CONTIGUOUS);
    tt_tensor indices = new4(MT_INT64, a.n, a.c, oh, ow, TT_CONTIGUOUS);
    tt_fill(&in, -3, 3, TT_INTEGERS);
    if (tt_chance(0.3))
        tt_plant_nans(&in, 0.05);
    tt_case("mt_max_pool2d_new %s: in %s, out %s", tt_dtype_name(dtype), tt_str(&in), tt_str(&out));
    mt_tensor made = out.t, made_indices = indices.t;
    made.data = made_indices.data = NULL;
    if (tt_expect_ok(mt_max_pool2d(out.t, indices.t, in.t, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw),
                     "mt_max_pool2d") &&
        tt_expect_ok(mt_max_pool2d_new(&made, &made_indices, &in.t, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw),
                     "mt_max_pool2d_new")) {
        TT_CHECK((made.data != NULL) == (tt_numel(&out.t) > 0), "out.data is %p for %lld elements", made.data,
                 (long long)tt_numel(&out.t));
        expect_same_bytes(&made, &out.t, "values");
        expect_same_bytes(&made_indices, &indices.t, "indices");
    }
    tt_expect_ok(mt_free(made.data), "mt_free");
    tt_expect_ok(mt_free(made_indices.data), "mt_free");
    made.data = NULL;
    if (tt_expect_ok(mt_max_pool2d_new(&made, NULL, &in.t, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw),
                     "mt_max_pool2d_new (values only)"))
        expect_same_bytes(&made, &out.t, "values only");
    tt_expect_ok(mt_free(made.data), "mt_free");
    tt_expect_unchanged(&in, "in");

    tt_case("mt_avg_pool2d_new %s: in %s", tt_dtype_name(dtype), tt_str(&in));
    a.dh = a.dw = 1;
    const int64_t ah = out_size(a.h, a.kh, a.sh, a.ph, 1, a.ceil_mode), aw = out_size(a.w, a.kw, a.sw, a.pw, 1, a.ceil_mode);
    tt_tensor avg = new4(dtype, a.n, a.c, ah, aw, TT_CONTIGUOUS);
    mt_tensor made_avg = avg.t;
    made_avg.data = NULL;
    if (tt_expect_ok(mt_avg_pool2d(avg.t, in.t, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.count_include_pad, a.divisor),
                     "mt_avg_pool2d") &&
        tt_expect_ok(mt_avg_pool2d_new(&made_avg, &in.t, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.count_include_pad,
                                       a.divisor), "mt_avg_pool2d_new"))
        expect_same_bytes(&made_avg, &avg.t, "avg");
    tt_expect_ok(mt_free(made_avg.data), "mt_free");
    tt_free(&in);
    tt_free(&out);
    tt_free(&indices);
    tt_free(&avg);
}

/* What the new-output entry points refuse: their outputs' data NULL after,
 * nothing left allocated (the group's end checks). */
static void new_output_refusals(void)
{
    tt_tensor in = new4(MT_FLOAT32, 1, 2, 6, 6, TT_CONTIGUOUS), in_i = new4(MT_INT64, 1, 2, 6, 6, TT_CONTIGUOUS);
    tt_tensor out = new4(MT_FLOAT32, 1, 2, 3, 3, TT_CONTIGUOUS), idx = new4(MT_INT64, 1, 2, 3, 3, TT_CONTIGUOUS);
    tt_fill(&in, -1, 1, 0);
    tt_fill(&in_i, -3, 3, TT_INTEGERS);
    mt_tensor made = out.t, made_idx = idx.t;
    tt_case("mt_max_pool2d_new: an int64 input");
    made.dtype = MT_INT64;
    tt_expect_error(mt_max_pool2d_new(&made, &made_idx, &in_i.t, 2, 2, 2, 2, 0, 0, 1, 1), MT_ERR_DTYPE,
                    "mt_max_pool2d", NULL);
    TT_CHECK(made.data == NULL && made_idx.data == NULL, "a refused call left data %p and %p", made.data,
             made_idx.data);
    tt_case("mt_max_pool2d_new: float32 indices");
    made = out.t;
    made_idx = out.t;
    tt_expect_error(mt_max_pool2d_new(&made, &made_idx, &in.t, 2, 2, 2, 2, 0, 0, 1, 1), MT_ERR_DTYPE,
                    "mt_max_pool2d", NULL);
    TT_CHECK(made.data == NULL && made_idx.data == NULL, "a refused call left data %p and %p", made.data,
             made_idx.data);
    tt_case("mt_avg_pool2d_new: an out of the wrong size, then one of column-major strides");
    made = out.t;
    made.shape[2] = 4; /* (1, 2, 4, 3), row-major */
    made.strides[1] = 12, made.strides[0] = 24;
    tt_expect_error(mt_avg_pool2d_new(&made, &in.t, 2, 2, 2, 2, 0, 0, 1, 0), MT_ERR_SHAPE, "mt_avg_pool2d", NULL);
    made = out.t;
    made.strides[2] = 1, made.strides[3] = 3;
    tt_expect_error(mt_avg_pool2d_new(&made, &in.t, 2, 2, 2, 2, 0, 0, 1, 0), MT_ERR_INVALID_ARGUMENT,
                    "mt_avg_pool2d_new", NULL);
    TT_CHECK(made.data == NULL, "a refused call left data %p", made.data);
    tt_case("mt_avg_pool2d_new: a null out");
    tt_expect_error(mt_avg_pool2d_new(NULL, &in.t, 2, 2, 2, 2, 0, 0, 1, 0), MT_ERR_INVALID_ARGUMENT,
                    "mt_avg_pool2d_new", NULL);
    tt_free(&in);
    tt_free(&in_i);
    tt_free(&out);
    tt_free(&idx);
}

int main(void)
{
    tt_init("test_pool");
    static const int dtypes[] = {MT_FLOAT32, MT_FLOAT64};
    for (int ti = 0; ti < 2; ++ti) {
        const int dtype = dtypes[ti];
        TT_GROUP("max_pool2d %s", tt_dtype_name(dtype)) {
            /*                       n  c  h   w  kh kw sh sw ph pw dh dw ceil */
            max_case(dtype, (pool_args){2, 3, 8, 8, 2, 2, 2, 2, 0, 0, 1, 1, 0, 0, 0});   /* the classic 2x2 */
            max_case(dtype, (pool_args){1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0});   /* ResNet's 3x3/2, pad 1 */
            max_case(dtype, (pool_args){1, 1, 7, 7, 3, 2, 2, 2, 1, 1, 1, 1, 1, 0, 0});   /* ceil_mode */
            max_case(dtype, (pool_args){1, 2, 11, 5, 3, 3, 1, 1, 1, 0, 2, 1, 0, 0, 0});  /* stride < kernel, dilation */
            max_case(dtype, (pool_args){2, 1, 9, 10, 2, 2, 3, 4, 1, 0, 1, 1, 1, 0, 0});  /* stride > kernel */
            max_case(dtype, (pool_args){0, 3, 6, 6, 2, 2, 2, 2, 0, 0, 1, 1, 0, 0, 0});   /* an empty batch */
            max_case(dtype, (pool_args){1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0});   /* 1 x 1 */
            max_case(dtype, (pool_args){1, 3, 7, 7, 2, 2, 2, 2, 0, 0, 1, 1, 1, 0, 0});   /* 2x2 ceil_mode, odd H, W */
            max_case(dtype, (pool_args){1, 2, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0});   /* 3x3/2 pad 1, ceil_mode */
            max_case(dtype, (pool_args){1, 2, 9, 9, 3, 3, 1, 1, 1, 1, 1, 2, 0, 0, 0});   /* 3x3, one dim dilated */
        }
        TT_GROUP("avg_pool2d %s", tt_dtype_name(dtype)) {
            /*                       n  c  h   w  kh kw sh sw ph pw dh dw ceil incl div */
            avg_case(dtype, (pool_args){2, 3, 8, 8, 2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0});
            avg_case(dtype, (pool_args){1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 0, 1, 0});   /* padding counted */
            avg_case(dtype, (pool_args){1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 0});   /* ... not counted */
            avg_case(dtype, (pool_args){1, 1, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0});   /* ceil_mode: clipped window */
            avg_case(dtype, (pool_args){1, 1, 7, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0});
            avg_case(dtype, (pool_args){2, 2, 5, 5, 2, 3, 1, 2, 1, 1, 1, 1, 0, 1, 3});   /* divisor */
            avg_case(dtype, (pool_args){0, 2, 5, 5, 2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0});   /* an empty batch */
        }
        TT_GROUP("adaptive_avg_pool2d %s", tt_dtype_name(dtype)) {
            adaptive_case(dtype, 2, 3, 7, 7, 1, 1);  /* the global pool */
            adaptive_case(dtype, 1, 2, 10, 7, 3, 4); /* overlapping windows */
            adaptive_case(dtype, 1, 1, 4, 6, 4, 6);  /* the identity */
            adaptive_case(dtype, 1, 1, 3, 2, 5, 7);  /* more outputs than inputs */
            adaptive_case(dtype, 0, 2, 5, 5, 2, 2);  /* an empty batch */
        }
        TT_GROUP("random %s", tt_dtype_name(dtype)) {
            for (int r = 0; r < 16; ++r) {
                pool_args a = random_args();
                max_case(dtype, a);
                a.dh = a.dw = 1;
                avg_case(dtype, a);
                adaptive_case(dtype, a.n, a.c, a.h, a.w, tt_rand_int(1, a.h + 2), tt_rand_int(1, a.w + 2));
            }
        }
    }
    TT_GROUP("refused") {
        refusals();
    }
    for (int ti = 0; ti < 2; ++ti)
        TT_GROUP("new outputs %s", tt_dtype_name(dtypes[ti])) {
            new_output_case(dtypes[ti], (pool_args){2, 3, 8, 8, 2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0});
            new_output_case(dtypes[ti], (pool_args){1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, 0, 0});
            new_output_case(dtypes[ti], (pool_args){0, 3, 6, 6, 2, 2, 2, 2, 0, 0, 1, 1, 0, 1, 0}); /* empty */
            for (int r = 0; r < 4; ++r)
                new_output_case(dtypes[ti], random_args());
        }
    TT_GROUP("new outputs refused")
        new_output_refusals();
    return tt_summary();
}
