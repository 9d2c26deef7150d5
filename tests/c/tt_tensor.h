/*
 * tt_tensor.h: random shapes, and strided test tensors (tt_tensor): random
 * layouts in a larger device buffer, mirrored on the host.
 * Part of tests/c/test_util.h, which every test program includes.
 */
#ifndef MT_TT_TENSOR_H
#define MT_TT_TENSOR_H

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "indexing.h"
#include "minitensor.h"

#include "tt_harness.h"

/* ======================================================================== */
/* Random shapes                                                             */
/* ======================================================================== */

/* A shape of rank in [rmin, rmax] with at most `max_numel` elements. Sizes
 * favour 1 and odd numbers; with probability p_empty one dim is 0. */
static inline int tt_random_shape(int64_t *shape, int rmin, int rmax, int64_t max_numel, double p_empty)
{
    static const int64_t sizes[] = {1, 1, 2, 3, 3, 4, 5, 7, 8, 9, 13};
    int ndim = (int)tt_rand_int(rmin, rmax);
    int64_t numel = 1;
    for (int d = 0; d < ndim; ++d) {
        int64_t s = TT_PICK(sizes);
        while (s > 1 && numel * s > max_numel)
            s = s / 2;
        shape[d] = s;
        numel *= s;
    }
    if (ndim > 0 && tt_chance(p_empty))
        shape[tt_rand_int(0, ndim - 1)] = 0;
    return ndim;
}

/* A shape that broadcasts (NumPy rules) to `big`: possibly fewer leading
 * dims, and some dims 1 where big has another size. */
static inline int tt_broadcastable_shape(const int64_t *big, int big_ndim, int64_t *shape)
{
    int ndim = tt_chance(0.3) ? (int)tt_rand_int(0, big_ndim) : big_ndim;
    int lead = big_ndim - ndim;
    for (int d = 0; d < ndim; ++d)
        shape[d] = tt_chance(0.3) ? 1 : big[d + lead];
    return ndim;
}

static inline int64_t tt_numel(const mt_tensor *t)
{
    return shape_numel(t->shape, t->ndim);
}

/* Row-major ordinal of a multi-index (the inverse of to_index). */
static inline int64_t tt_ordinal(const int64_t *index, const int64_t *shape, int ndim)
{
    int64_t o = 0;
    for (int d = 0; d < ndim; ++d)
        o = o * shape[d] + index[d];
    return o;
}

/* ======================================================================== */
/* Strided test tensors                                                      */
/* ======================================================================== */

typedef struct {
    mt_tensor t;  /* the view the library sees                          */
    double *host; /* what the whole device buffer holds, as doubles     */
    int64_t cap;  /* elements in the device buffer                      */
} tt_tensor;

enum {
    TT_INPUT = 0,       /* random layout, may broadcast with stride 0       */
    TT_OUTPUT = 1,      /* random layout, every element written once        */
    TT_CONTIGUOUS = 2,  /* plain row-major, offset 0                        */
};

/* Any value the library would never compute: fills outputs before a call.
 * An int64 buffer holds it as -1234; a bool buffer as the byte 0x5A, which
 * no bool the library writes can be (tt_upload, tt_download). */
#define TT_POISON (-1234.5)
#define TT_BOOL_POISON_BYTE 0x5A

/* A random layout for a view of `shape`:
 *   - the storage is row-major over the dims taken in a random order
 *     (permuted, e.g. a transpose);
 *   - each dim may be stepped (a slice x[::2]) and padded;
 *   - the view may start at a non-zero offset;
 *   - an input may repeat a dim with stride 0 (an expanded view);
 *   - a size-1 dim may carry any stride, since it is never stepped.
 * Sets strides and offset, returns the buffer length in elements. */
static inline int64_t tt_random_layout(int ndim, const int64_t *shape, int role,
                                       int64_t *strides, int64_t *offset)
{
    int perm[MT_MAX_DIMS], step[MT_MAX_DIMS], start[MT_MAX_DIMS];
    int64_t base[MT_MAX_DIMS], storage_stride[MT_MAX_DIMS];
    int plain = role == TT_CONTIGUOUS || tt_chance(0.25);
    for (int d = 0; d < ndim; ++d)
        perm[d] = d;
    if (!plain && tt_chance(0.5)) /* permuted / transposed */
        for (int d = ndim - 1; d > 0; --d) {
            int j = (int)tt_rand_int(0, d), tmp = perm[d];
            perm[d] = perm[j];
            perm[j] = tmp;
        }
    for (int d = 0; d < ndim; ++d) {
        step[d] = !plain && tt_chance(0.3) ? (int)tt_rand_int(2, 3) : 1; /* sliced */
        int pad = !plain && tt_chance(0.3) ? (int)tt_rand_int(1, 2) : 0;
        start[d] = pad ? (int)tt_rand_int(0, pad) : 0;
        int64_t span = shape[d] > 0 ? (shape[d] - 1) * step[d] + 1 : 1;
        base[d] = span + pad;
    }
    int64_t size = 1;
    for (int k = ndim - 1; k >= 0; --k) {
        storage_stride[perm[k]] = size;
        size *= base[perm[k]];
    }
    int64_t lead = role != TT_CONTIGUOUS && tt_chance(0.5) ? tt_rand_int(1, 5) : 0;
    *offset = lead;
    for (int d = 0; d < ndim; ++d) {
        strides[d] = storage_stride[d] * step[d];
        *offset += start[d] * storage_stride[d];
    }
    if (role == TT_CONTIGUOUS)
        return size;
    for (int d = 0; d < ndim; ++d) {
        if (shape[d] == 1 && tt_chance(0.3))
            strides[d] = tt_chance(0.5) ? 0 : 1000003; /* never used: any stride is fine */
        else if (role == TT_INPUT && shape[d] > 1 && tt_chance(0.15))
            strides[d] = 0; /* expanded: every index reads the same element */
    }
    return lead + size + (tt_chance(0.3) ? tt_rand_int(1, 3) : 0);
}

/* The position of a multi-index of x's own shape in x's buffer. */
static inline int64_t tt_pos(const tt_tensor *x, const int64_t *index)
{
    return x->t.offset + index_to_position(index, x->t.strides, x->t.ndim);
}

/* The value of x at a multi-index of its own shape. */
static inline double tt_at(const tt_tensor *x, const int64_t *index)
{
    return x->host[tt_pos(x, index)];
}

/* The value of x (which broadcasts to a bigger shape) at an index of the big
 * shape: what an elementwise kernel reads for that output element. */
static inline double tt_at_bcast(const tt_tensor *x, const int64_t *big_index, int big_ndim)
{
    int64_t index[MT_MAX_DIMS];
    broadcast_index(big_index, big_ndim, x->t.shape, x->t.ndim, index);
    return tt_at(x, index);
}

/* The value of x at ordinal i of its own shape (row-major). */
static inline double tt_at_ordinal(const tt_tensor *x, int64_t i)
{
    return x->host[ordinal_to_position(i, &x->t)];
}

/* Writes host[] into the device buffer, each value cast to the dtype
 * (tt_round), and keeps the cast value in host[] so that it mirrors the
 * device exactly. */
static inline int tt_upload(tt_tensor *x)
{
    size_t item = tt_itemsize(x->t.dtype), bytes = (size_t)x->cap * item;
    char *buf = malloc(bytes ? bytes : 1);
    for (int64_t i = 0; i < x->cap; ++i) {
        const double v = x->host[i];
        switch (x->t.dtype) {
        case MT_FLOAT32: ((float *)buf)[i] = (float)v; break;
        case MT_INT64: ((int64_t *)buf)[i] = tt_to_int64(v); break;
        case MT_BOOL:
            ((uint8_t *)buf)[i] = v == TT_POISON ? TT_BOOL_POISON_BYTE : (uint8_t)(v != 0.0);
            break;
        default: ((double *)buf)[i] = v; break;
        }
        if (!(x->t.dtype == MT_BOOL && v == TT_POISON))
            x->host[i] = tt_round(v, x->t.dtype);
    }
    mt_status st = mt_memcpy_h2d(x->t.data, buf, bytes);
    free(buf);
    return tt_expect_ok(st, "mt_memcpy_h2d");
}

/* Reads the whole device buffer into `dst` (cap doubles). */
static inline int tt_download(const tt_tensor *x, double *dst)
{
    size_t item = tt_itemsize(x->t.dtype), bytes = (size_t)x->cap * item;
    char *buf = malloc(bytes ? bytes : 1);
    mt_status st = mt_memcpy_d2h(buf, x->t.data, bytes);
    for (int64_t i = 0; i < x->cap; ++i) {
        switch (x->t.dtype) {
        case MT_FLOAT32: dst[i] = (double)((float *)buf)[i]; break;
        case MT_INT64: dst[i] = (double)((int64_t *)buf)[i]; break;
        case MT_BOOL: {
            /* Any byte but 0 and 1 comes back as itself (a bool the library
             * wrote wrong), the poison byte as TT_POISON. */
            const uint8_t byte = ((uint8_t *)buf)[i];
            dst[i] = byte == TT_BOOL_POISON_BYTE ? TT_POISON : (double)byte;
            break;
        }
        default: dst[i] = ((double *)buf)[i]; break;
        }
    }
    free(buf);
    return tt_expect_ok(st, "mt_memcpy_d2h");
}

/* A tensor of `shape` in a fresh device buffer, with a layout for `role`,
 * every buffer element set to TT_POISON (fill it with tt_fill). */
static inline tt_tensor tt_new(int dtype, int ndim, const int64_t *shape, int role)
{
    tt_tensor x;
    memset(&x, 0, sizeof x);
    x.t.dtype = dtype;
    x.t.ndim = ndim;
    for (int d = 0; d < ndim; ++d)
        x.t.shape[d] = shape[d];
    x.cap = tt_random_layout(ndim, shape, role, x.t.strides, &x.t.offset);
    x.host = malloc((size_t)(x.cap ? x.cap : 1) * sizeof(double));
    for (int64_t i = 0; i < x.cap; ++i)
        x.host[i] = TT_POISON;
    mt_status st = mt_malloc(&x.t.data, (size_t)(x.cap ? x.cap : 1) * tt_itemsize(dtype));
    if (tt_expect_ok(st, "mt_malloc"))
        tt_upload(&x);
    return x;
}

/* A row-major view of `shape` that starts `shift` elements into its buffer,
 * with one element after it: with shift not a multiple of a 16-byte Pack's
 * width its first element is not 16-byte aligned (what x[1:] is), and a
 * write just before or just after the view shows in the buffer. */
static inline tt_tensor tt_new_shifted(int dtype, int ndim, const int64_t *shape, int64_t shift)
{
    int64_t numel = 1;
    for (int d = 0; d < ndim; ++d)
        numel *= shape[d];
    int64_t total = shift + numel + 1;
    tt_tensor x = tt_new(dtype, 1, &total, TT_CONTIGUOUS);
    x.t.ndim = ndim;
    int64_t stride = 1;
    for (int d = ndim - 1; d >= 0; --d) {
        x.t.shape[d] = shape[d];
        x.t.strides[d] = stride;
        stride *= shape[d];
    }
    x.t.offset = shift;
    return x;
}

static inline void tt_free(tt_tensor *x)
{
    if (x->t.data)
        tt_expect_ok(mt_free(x->t.data), "mt_free");
    free(x->host);
    memset(x, 0, sizeof *x);
}

/* How tt_fill draws values. */
enum {
    TT_SOME_ZEROS = 1, /* about 1 in 8 values exactly 0                        */
    TT_INTEGERS = 2,   /* whole numbers in [lo, hi]: ties and equalities happen */
    TT_RANDOM_SIGN = 4 /* |value| in [lo, hi], sign random                      */
};

/* Fills the whole buffer (view and padding) with values drawn uniformly from
 * [lo, hi), rounded to the dtype, and uploads it. */
static inline void tt_fill(tt_tensor *x, double lo, double hi, int flags)
{
    for (int64_t i = 0; i < x->cap; ++i) {
        double v = (flags & TT_INTEGERS) ? (double)tt_rand_int((int64_t)lo, (int64_t)hi)
                                         : tt_rand_uniform(lo, hi);
        if ((flags & TT_RANDOM_SIGN) && tt_chance(0.5))
            v = -v;
        if ((flags & TT_SOME_ZEROS) && tt_chance(0.125))
            v = 0.0;
        x->host[i] = tt_round(v, x->t.dtype);
    }
    tt_upload(x);
}

/* Replaces about a fraction p of the buffer's values with NaN, uploads (an
 * int64 or bool buffer stores the cast NaN: 0, true). */
static inline void tt_plant_nans(tt_tensor *x, double p)
{
    for (int64_t i = 0; i < x->cap; ++i)
        if (tt_chance(p))
            x->host[i] = NAN;
    tt_upload(x);
}

/* Sets the whole buffer to one value and uploads it. */
static inline void tt_fill_value(tt_tensor *x, double v)
{
    for (int64_t i = 0; i < x->cap; ++i)
        x->host[i] = tt_round(v, x->t.dtype);
    tt_upload(x);
}

/* "f32 (3,4) strides (1,3) offset 2": for case names. Rotates through a few
 * static buffers so that several can appear in one printf. */
static inline const char *tt_str(const tt_tensor *x)
{
    static char bufs[8][256];
    static int next;
    char *b = bufs[next++ % 8];
    int n = snprintf(b, 256, "%s (", tt_dtype_name(x->t.dtype));
    for (int d = 0; d < x->t.ndim; ++d)
        n += snprintf(b + n, 256 - n, "%s%" PRId64, d ? "," : "", x->t.shape[d]);
    n += snprintf(b + n, 256 - n, ") strides (");
    for (int d = 0; d < x->t.ndim; ++d)
        n += snprintf(b + n, 256 - n, "%s%" PRId64, d ? "," : "", x->t.strides[d]);
    snprintf(b + n, 256 - n, ") offset %" PRId64, x->t.offset);
    return b;
}

static inline const char *tt_index_str(const int64_t *index, int ndim)
{
    static char bufs[4][128];
    static int next;
    char *b = bufs[next++ % 4];
    int n = snprintf(b, 128, "(");
    for (int d = 0; d < ndim; ++d)
        n += snprintf(b + n, 128 - n, "%s%" PRId64, d ? "," : "", index[d]);
    snprintf(b + n, 128 - n, ")");
    return b;
}

/* ======================================================================== */
/* Exact values: raw contiguous 1-D tensors                                  */
/* ======================================================================== */
/* For the values a double cannot hold (int64 beyond 2^53: INT64_MIN,
 * wrapping) or that a test wants byte for byte: n elements of `dtype`
 * copied from `vals` into a fresh device buffer. Check them with
 * tt_raw_read and tt_expect_i64. */
static inline mt_tensor tt_raw_1d(int dtype, int64_t n, const void *vals)
{
    mt_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dtype;
    t.ndim = 1;
    t.shape[0] = n;
    t.strides[0] = 1;
    size_t bytes = (size_t)n * tt_itemsize(dtype);
    if (tt_expect_ok(mt_malloc(&t.data, bytes ? bytes : 1), "mt_malloc") && vals && bytes)
        tt_expect_ok(mt_memcpy_h2d(t.data, vals, bytes), "mt_memcpy_h2d");
    return t;
}

/* Copies the n elements of a tt_raw_1d tensor to dst. */
static inline int tt_raw_read(const mt_tensor *t, void *dst)
{
    size_t bytes = (size_t)t->shape[0] * tt_itemsize(t->dtype);
    return bytes == 0 || tt_expect_ok(mt_memcpy_d2h(dst, t->data, bytes), "mt_memcpy_d2h");
}

static inline void tt_raw_free(mt_tensor *t)
{
    if (t->data)
        tt_expect_ok(mt_free(t->data), "mt_free");
    t->data = NULL;
}

#endif /* MT_TT_TENSOR_H */
