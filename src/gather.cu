/*
 * gather.cu: indexing along one dim with a tensor of indices.
 *
 *   mt_gather       out[i][j] = in[i][index[i][j]]        (torch.gather)
 *   mt_scatter_add  out[i][index[i][j]] += src[i][j]      (torch.scatter_add_)
 * written here for dim 1 of 2-D tensors; any rank and any dim work the same
 * way: every index except the one along dim is shared.
 *
 * Both kernels give one thread per element of index: it turns its ordinal
 * into a multi-index (to_index), replaces the component along dim by the
 * index value it reads, and finds elements through each tensor's strides.
 * scatter_add uses atomicAdd because several elements of src may name the
 * same output element (a class that occurs twice in a batch): without
 * atomics, two threads would read the old value, both add, and one sum would
 * be lost. (The order of float additions then varies from run to run, so
 * results may differ in the last bits.)
 *
 * Indices arrive as int64, or as floats holding whole numbers. A bad one
 * (out of range, negative, fractional, NaN) would read or write outside the
 * tensor, so all
 * of them are checked by a first kernel, find_bad_index, before anything is
 * written: a rejected call leaves out untouched. That kernel records the
 * ordinal of the first bad index in one device word with atomicMin (the
 * smallest ordinal wins whatever order the threads run in), and the host
 * reads that word back to write the message.
 *
 * That read waits for the device, which a CUDA graph capture forbids. The
 * _unchecked entry points skip the first kernel, for indices the caller
 * has checked already (Python checks an index tensor once and again only
 * after a write into it; a capture replays a step whose ids were checked
 * before it). They stay memory-safe whatever they are given: the gather and
 * scatter kernels test each index themselves (index_ok, a compare), and a
 * bad one gathers 0 and adds nothing, in place of reading or writing outside
 * the tensor.
 */
#include <limits.h>
#include <stdio.h>

#include <type_traits>

#include "ops_common.h"

/* ---- kernels ------------------------------------------------------------- */

/* Is index value v a whole number in [0, limit)? An int64 simply compares.
 * A float is compared as a double: exact for every float32 and float64
 * value in question, and no cast to an integer happens before the range is
 * known (casting 1e30 to int64 is undefined). NaN fails v >= 0. */
template <typename TI>
MT_HD bool index_ok(TI v, int64_t limit)
{
    if constexpr (std::is_same<TI, int64_t>::value) {
        return v >= 0 && v < limit;
    } else {
        const double d = (double)v;
        return d >= 0.0 && d < (double)limit && d == floor(d);
    }
}

/* scatter_add's atomic addition, one overload per data type. CUDA has no
 * atomicAdd for int64_t; the one for unsigned long long adds modulo 2^64,
 * which is exactly int64's wrapping addition (two's complement). */
MT_DEVICE void atomic_add(float *p, float v) { atomicAdd(p, v); }
MT_DEVICE void atomic_add(double *p, double v) { atomicAdd(p, v); }
MT_DEVICE void atomic_add(int64_t *p, int64_t v)
{
    static_assert(sizeof(int64_t) == sizeof(unsigned long long), "int64 atomics through unsigned long long");
    atomicAdd(reinterpret_cast<unsigned long long *>(p), (unsigned long long)v);
}

/* *first_bad = the smallest ordinal of index whose value is not a whole
 * number in [0, limit); left untouched when every index is good. */
template <typename TI>
__global__ void find_bad_index(mt_tensor index, int64_t n, int64_t limit, unsigned long long *first_bad)
{
    const TI *index_data = static_cast<const TI *>(index.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        if (!index_ok(index_data[ordinal_to_position(i, &index)], limit))
            atomicMin(first_bad, (unsigned long long)i);
    }
}

template <typename T, typename TI>
__global__ void gather_kernel(mt_tensor out, mt_tensor in, mt_tensor index, int dim, int64_t n)
{
    T *out_data = static_cast<T *>(out.data);
    const T *in_data = static_cast<const T *>(in.data);
    const TI *index_data = static_cast<const TI *>(index.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        /* index has out's shape: one multi-index addresses both. */
        int64_t idx[MT_MAX_DIMS];
        to_index(i, out.shape, out.ndim, idx);
        const int64_t out_pos = out.offset + index_to_position(idx, out.strides, out.ndim);
        const int64_t index_pos = index.offset + index_to_position(idx, index.strides, index.ndim);
        const TI v = index_data[index_pos];
        /* find_bad_index has checked it, unless the caller said it had: a
         * bad index (only possible then) gathers 0, never an address outside in. */
        if (!index_ok(v, in.shape[dim])) {
            out_data[out_pos] = T(0);
            continue;
        }
        idx[dim] = (int64_t)v;
        out_data[out_pos] = in_data[in.offset + index_to_position(idx, in.strides, in.ndim)];
    }
}

template <typename T, typename TI>
__global__ void scatter_add_kernel(mt_tensor out, mt_tensor index, mt_tensor src, int dim, int64_t n)
{
    T *out_data = static_cast<T *>(out.data);
    const T *src_data = static_cast<const T *>(src.data);
    const TI *index_data = static_cast<const TI *>(index.data);
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        /* index has src's shape: one multi-index addresses both. */
        int64_t idx[MT_MAX_DIMS];
        to_index(i, src.shape, src.ndim, idx);
        const T value = src_data[src.offset + index_to_position(idx, src.strides, src.ndim)];
        const int64_t index_pos = index.offset + index_to_position(idx, index.strides, index.ndim);
        const TI v = index_data[index_pos];
        if (!index_ok(v, out.shape[dim]))
            continue; /* as in gather_kernel: a bad index adds nothing */
        idx[dim] = (int64_t)v;
        atomic_add(&out_data[out.offset + index_to_position(idx, out.strides, out.ndim)], value);
    }
}

/* ---- host side ------------------------------------------------------------ */

/* "(0, 3)": a multi-index, for messages. */
static void format_index(const int64_t *idx, int ndim, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "(");
    for (int d = 0; d < ndim && used < size; ++d)
        used += (size_t)snprintf(buf + used, size - used, d + 1 < ndim ? "%lld, " : "%lld",
                                 (long long)idx[d]);
    if (used < size)
        snprintf(buf + used, size - used, ndim == 1 ? ",)" : ")");
}

/* Runs find_bad_index over a non-empty index tensor; MT_OK if every index
 * is a whole number in [0, limit), else a message naming the first bad one. */
template <typename TI>
static mt_status check_indices(const char *func, const mt_tensor &index, int dim, int64_t limit)
{
    const int64_t n = tensor_numel(index);
    DeviceScratch first_bad_dev;
    CUDA_CHECK(first_bad_dev.allocate(sizeof(unsigned long long)));
    /* All bytes 0xFF is ULLONG_MAX: "no bad index found yet", the identity
     * of atomicMin. */
    CUDA_CHECK(cudaMemsetAsync(first_bad_dev.as<unsigned long long>(), 0xFF, sizeof(unsigned long long), mt_stream()));
    find_bad_index<TI><<<grid_size(n, kBlockSize), kBlockSize, 0, mt_stream()>>>(index, n, limit, first_bad_dev.as<unsigned long long>());
    CUDA_CHECK(mt_launch_status());
    unsigned long long first_bad = ULLONG_MAX;
    /* Synchronous: the host needs the answer before it launches anything. */
    CUDA_CHECK(cudaMemcpyAsync(&first_bad, first_bad_dev.as<unsigned long long>(), sizeof first_bad,
                               cudaMemcpyDeviceToHost, mt_stream()));
    CUDA_CHECK(cudaStreamSynchronize(mt_stream()));
    CUDA_CHECK(first_bad_dev.release());
    if (first_bad == ULLONG_MAX)
        return MT_OK;

    /* Fetch the offending value to say what is wrong with it. */
    const int64_t ordinal = (int64_t)first_bad;
    const TI *where = static_cast<const TI *>(index.data) + ordinal_to_position(ordinal, &index);
    TI value = 0;
    CUDA_CHECK(cudaMemcpyAsync(&value, where, sizeof value, cudaMemcpyDeviceToHost, mt_stream()));
    CUDA_CHECK(cudaStreamSynchronize(mt_stream()));
    int64_t idx[MT_MAX_DIMS];
    to_index(ordinal, index.shape, index.ndim, idx);
    char at[256];
    format_index(idx, index.ndim, at, sizeof at);
    if constexpr (std::is_same<TI, int64_t>::value) {
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "index %lld out of range for dim %d of size %lld (index element %s)", (long long)value,
                       dim, (long long)limit, at);
    } else {
        const double v = (double)value;
        if (v == floor(v))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                           "index %g out of range for dim %d of size %lld (index element %s)", v, dim,
                           (long long)limit, at);
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "index %g is not a whole number (index element %s); indices must be whole "
                       "numbers in [0, %lld)",
                       v, at, (long long)limit);
    }
}

/* For every dim except `dim`, `small` may be no longer than `big`: those
 * indices are shared, so they must exist in both. */
static mt_status check_fits(const char *func, const mt_tensor &small, const char *sname, const mt_tensor &big, const char *bname, int dim)
{
    for (int d = 0; d < small.ndim; ++d) {
        if (d != dim && small.shape[d] > big.shape[d]) {
            char sshape[256];
            char bshape[256];
            return mt_fail(MT_ERR_SHAPE, func,
                           "%s has shape %s and %s has shape %s: in dim %d (not the indexed dim "
                           "%d) %s may be no longer than %s",
                           sname, mt_shape_str(&small, sshape, sizeof sshape), bname,
                           mt_shape_str(&big, bshape, sizeof bshape), d, dim, sname, bname);
        }
    }
    return MT_OK;
}

/* a and b have the same number of dims. */
static mt_status check_same_rank(const char *func, const mt_tensor &a, const char *aname, const mt_tensor &b, const char *bname)
{
    if (a.ndim == b.ndim)
        return MT_OK;
    char ashape[256];
    char bshape[256];
    return mt_fail(MT_ERR_SHAPE, func, "%s has shape %s but %s has shape %s: they need the same rank", aname,
                   mt_shape_str(&a, ashape, sizeof ashape), bname, mt_shape_str(&b, bshape, sizeof bshape));
}

static mt_status check_no_overlap(const char *func, const mt_tensor &out, const mt_tensor &t, const char *name)
{
    if (tensors_overlap(out, t))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "out overlaps %s in memory; out must be a separate buffer", name);
    return MT_OK;
}

/* index's dtype is int64, float32 or float64. */
static mt_status check_index_dtype(const char *func, const mt_tensor &index)
{
    if (index.dtype == MT_INT64 || index.dtype == MT_FLOAT32 || index.dtype == MT_FLOAT64)
        return MT_OK;
    return mt_fail(MT_ERR_DTYPE, func, "index has dtype %s; indices are int64 (or whole numbers in float32 or "
                   "float64)", dtype_name(index.dtype));
}

/* index dtype id -> index type: returns f(TI{}) (after check_index_dtype). */
template <typename F>
static mt_status with_index_dtype(const mt_tensor &index, F f)
{
    if (index.dtype == MT_INT64)
        return f(int64_t{});
    if (index.dtype == MT_FLOAT32)
        return f(float{});
    return f(double{});
}

template <typename T, typename TI>
static mt_status run_gather(const char *func, const mt_tensor &out, const mt_tensor &in, const mt_tensor &index,
                            int dim, bool checked)
{
    if (!checked)
        MT_TRY(check_indices<TI>(func, index, dim, in.shape[dim]));
    const int64_t n = tensor_numel(out);
    gather_kernel<T, TI><<<grid_size(n, kBlockSize), kBlockSize, 0, mt_stream()>>>(out, in, index, dim, n);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

template <typename T, typename TI>
static mt_status run_scatter_add(const char *func, const mt_tensor &out, const mt_tensor &index, const mt_tensor &src,
                                 int dim, bool checked)
{
    if (!checked)
        MT_TRY(check_indices<TI>(func, index, dim, out.shape[dim]));
    const int64_t n = tensor_numel(src);
    scatter_add_kernel<T, TI><<<grid_size(n, kBlockSize), kBlockSize, 0, mt_stream()>>>(out, index, src, dim, n);
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

/* mt_gather and mt_gather_unchecked: the same checks of the arguments; the
 * indices' values checked on the device unless checked is true. */
static mt_status gather(const char *func, mt_tensor out, mt_tensor in, mt_tensor index, int dim, bool checked)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    MT_TRY(mt_check_tensor(func, "in", &in));
    MT_TRY(mt_check_tensor(func, "index", &index));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "in", &in));
    MT_TRY(mt_check_extent(func, "index", &index));
    MT_TRY(mt_check_same_dtype(func, &in, "in", &out, "out"));
    MT_TRY(check_index_dtype(func, index));
    MT_TRY(mt_check_same_shape(func, &index, "index", &out, "out"));
    MT_TRY(mt_check_dim(func, &in, "in", dim));
    MT_TRY(check_same_rank(func, in, "in", index, "index"));
    MT_TRY(check_fits(func, index, "index", in, "in", dim));
    MT_TRY(check_no_overlap(func, out, in, "in"));
    MT_TRY(check_no_overlap(func, out, index, "index"));
    if (tensor_numel(out) == 0)
        return MT_OK;

    /* The data any dtype, the indices int64 or a float dtype. */
    return with_dtype(func, out.dtype, [&](auto tag) {
        return with_index_dtype(index, [&](auto index_tag) {
            return run_gather<decltype(tag), decltype(index_tag)>(func, out, in, index, dim, checked);
        });
    });
}

mt_status mt_gather(mt_tensor out, mt_tensor in, mt_tensor index, int dim)
{
    return gather("mt_gather", out, in, index, dim, false);
}

mt_status mt_gather_unchecked(mt_tensor out, mt_tensor in, mt_tensor index, int dim)
{
    return gather("mt_gather_unchecked", out, in, index, dim, true);
}

/* mt_scatter_add and mt_scatter_add_unchecked, as gather above. */
static mt_status scatter_add(const char *func, mt_tensor out, mt_tensor index, mt_tensor src, int dim, bool checked)
{
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_output(func, "out", &out));
    MT_TRY(mt_check_tensor(func, "index", &index));
    MT_TRY(mt_check_tensor(func, "src", &src));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "index", &index));
    MT_TRY(mt_check_extent(func, "src", &src));
    MT_TRY(mt_check_same_dtype(func, &src, "src", &out, "out"));
    if (out.dtype == MT_BOOL)
        return mt_fail(MT_ERR_DTYPE, func, "out has dtype bool; scatter_add adds float32, float64 or int64");
    MT_TRY(check_index_dtype(func, index));
    MT_TRY(mt_check_same_shape(func, &index, "index", &src, "src"));
    MT_TRY(mt_check_dim(func, &out, "out", dim));
    MT_TRY(check_same_rank(func, out, "out", src, "src"));
    MT_TRY(check_fits(func, src, "src", out, "out", dim));
    MT_TRY(check_no_overlap(func, out, src, "src"));
    MT_TRY(check_no_overlap(func, out, index, "index"));
    if (tensor_numel(src) == 0)
        return MT_OK;

    /* The data float32, float64 or int64, the indices int64 or a float dtype. */
    auto run = [&](auto tag) {
        return with_index_dtype(index, [&](auto index_tag) {
            return run_scatter_add<decltype(tag), decltype(index_tag)>(func, out, index, src, dim, checked);
        });
    };
    if (out.dtype == MT_FLOAT32)
        return run(float{});
    if (out.dtype == MT_FLOAT64)
        return run(double{});
    return run(int64_t{});
}

mt_status mt_scatter_add(mt_tensor out, mt_tensor index, mt_tensor src, int dim)
{
    return scatter_add("mt_scatter_add", out, index, src, dim, false);
}

mt_status mt_scatter_add_unchecked(mt_tensor out, mt_tensor index, mt_tensor src, int dim)
{
    return scatter_add("mt_scatter_add_unchecked", out, index, src, dim, true);
}

mt_status mt_check_class_indices(const char *func, const mt_tensor *index, int64_t classes)
{
    /* The classes are dim 1 of the logits (N, C). */
    if (tensor_numel(*index) == 0)
        return MT_OK;
    MT_TRY(check_index_dtype(func, *index));
    return with_index_dtype(*index, [&](auto index_tag) {
        return check_indices<decltype(index_tag)>(func, *index, 1, classes);
    });
}
