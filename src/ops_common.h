/*
 * ops_common.h: what the kernel files share, kept in one place.
 *
 *   - launch geometry: the block size and the capped grid of the grid-stride
 *     loops that every elementwise kernel uses;
 *   - small host helpers: dtype names and sizes, "same shape?", "is this
 *     tensor contiguous?", "do these two tensors overlap?", the dim check,
 *     CUDA version strings, and a scratch buffer that frees itself;
 *   - device math overloads (mt_exp(float) -> expf, mt_exp(double) -> exp),
 *     so that a kernel templated on T calls the right precision;
 *   - block_reduce: the shared-memory tree reduction that reduce.cu and
 *     softmax.cu are built on.
 *
 * This header is compiled as it is by nvcc and by the emulator build (only
 * the .cu files go through tools/cu2emu.py), so it declares no __shared__
 * arrays and launches no kernels itself.
 */
#ifndef MT_OPS_COMMON_H
#define MT_OPS_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "check.h"
#include "indexing.h"

#define MT_DEVICE __device__ __forceinline__

/* Names the entry point in the messages of mt_fail_cuda (src/errors.cu);
 * mt_ensure_init sets it, as the first thing every entry point does. */
void mt_set_current_call(const char *func);

/* ---- launch geometry ------------------------------------------------------ */

/* Threads per block of the elementwise and reduction kernels. A power of two,
 * which block_reduce below relies on. */
constexpr int kBlockSize = 256;
static_assert((kBlockSize & (kBlockSize - 1)) == 0, "block_reduce needs a power-of-two block");

/* Elementwise kernels walk their elements with a grid-stride loop, so any
 * number of blocks gives the right answer. We cap the grid: 65535 blocks of
 * 256 threads is far more than a GPU runs at once (an H100 holds about 2000
 * threads on each of its 132 SMs), every GPU accepts it, and beyond it each
 * thread simply handles several elements. */
constexpr int64_t kMaxGridBlocks = 65535;

/* Blocks for n work items with `block` threads each, at least 1 (callers
 * launch nothing when n == 0) and at most kMaxGridBlocks. */
inline unsigned int grid_size(int64_t n, int64_t block)
{
    int64_t blocks = (n + block - 1) / block;
    if (blocks < 1)
        blocks = 1;
    if (blocks > kMaxGridBlocks)
        blocks = kMaxGridBlocks;
    return (unsigned int)blocks;
}

/* ---- host helpers on descriptors ----------------------------------------- */

inline int64_t tensor_numel(const mt_tensor &t)
{
    return shape_numel(t.shape, t.ndim);
}

inline size_t dtype_size(int32_t dtype)
{
    return dtype == MT_FLOAT64 ? sizeof(double) : sizeof(float);
}

inline const char *dtype_name(int32_t dtype)
{
    switch (dtype) {
    case MT_FLOAT32:
        return "float32";
    case MT_FLOAT64:
        return "float64";
    default:
        return "unknown dtype";
    }
}

inline bool shapes_equal(const mt_tensor &a, const mt_tensor &b)
{
    if (a.ndim != b.ndim)
        return false;
    for (int d = 0; d < a.ndim; ++d) {
        if (a.shape[d] != b.shape[d])
            return false;
    }
    return true;
}

/* "13.0" for CUDA's encoding 13000 ("12.4" for 12040); "none" for 0, which
 * cudaDriverGetVersion reports when no driver is installed. */
inline void cuda_version_string(int version, char *buf, size_t size)
{
    if (version <= 0)
        snprintf(buf, size, "none");
    else
        snprintf(buf, size, "%d.%d", version / 1000, (version % 1000) / 10);
}

/* Row-major and dense: element i lives at offset + i. A dimension of size 1
 * may have any stride, since its index is always 0. */
inline bool is_contiguous(const mt_tensor &t)
{
    int64_t expected = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
        if (t.shape[d] != 1 && t.strides[d] != expected)
            return false;
        expected *= t.shape[d];
    }
    return true;
}

/* Could a and b share a byte of storage? Compares the address ranges between
 * each tensor's lowest and highest element, so two interleaved views that
 * never touch the same element still count as overlapping: a conservative
 * answer, which is what a "must not alias" check wants. */
inline bool tensors_overlap(const mt_tensor &a, const mt_tensor &b)
{
    if (tensor_numel(a) == 0 || tensor_numel(b) == 0)
        return false;
    uintptr_t lo[2];
    uintptr_t hi[2];
    const mt_tensor *ts[2] = {&a, &b};
    for (int k = 0; k < 2; ++k) {
        const mt_tensor &t = *ts[k];
        int64_t last = t.offset;
        for (int d = 0; d < t.ndim; ++d)
            last += (t.shape[d] - 1) * t.strides[d];
        size_t item = dtype_size(t.dtype);
        lo[k] = (uintptr_t)t.data + (uintptr_t)t.offset * item;
        hi[k] = (uintptr_t)t.data + (uintptr_t)(last + 1) * item;
    }
    return lo[0] < hi[1] && lo[1] < hi[0];
}

/* 0 <= dim < t.ndim, else MT_ERR_DIM with a message naming func and t. */
inline mt_status check_dim(const char *func, const mt_tensor &t, const char *name, int dim)
{
    if (dim >= 0 && dim < t.ndim)
        return MT_OK;
    if (t.ndim == 0)
        return mt_fail(MT_ERR_DIM, func, "dim %d is out of range: %s has shape () and no dims", dim,
                       name);
    char shape[256];
    return mt_fail(MT_ERR_DIM, func, "dim %d is out of range for %s of shape %s (valid dims are 0..%d)",
                   dim, name, mt_shape_str(&t, shape, sizeof shape), t.ndim - 1);
}

/* A temporary device buffer (reduction partials, an error flag). CUDA_CHECK
 * returns early on failure; the destructor then frees the buffer so that the
 * early return cannot leak it. On success the caller frees it with
 * CUDA_CHECK(buf.release()), so that a failing free is reported too. */
class DeviceScratch {
public:
    DeviceScratch() = default;
    DeviceScratch(const DeviceScratch &) = delete;
    DeviceScratch &operator=(const DeviceScratch &) = delete;

    cudaError_t allocate(size_t bytes) { return cudaMallocAsync(&ptr_, bytes, 0); }

    cudaError_t release()
    {
        void *p = ptr_;
        ptr_ = nullptr;
        return p ? cudaFreeAsync(p, 0) : cudaSuccess;
    }

    ~DeviceScratch()
    {
        /* Only reached with ptr_ set on an error path: the error being
         * returned is the one worth reporting, so this free's status is
         * dropped on purpose. */
        if (ptr_)
            (void)cudaFreeAsync(ptr_, 0);
    }

    template <typename T>
    T *as() const
    {
        return static_cast<T *>(ptr_);
    }

private:
    void *ptr_ = nullptr;
};

/* ---- device math: one overload per precision ------------------------------ */
/* Kernels are templates on T (float or double). Calling exp() on a float
 * would quietly compute in double on the GPU, which is many times slower;
 * these overloads pick the single-precision function for float. */

MT_DEVICE float mt_exp(float x) { return expf(x); }
MT_DEVICE double mt_exp(double x) { return exp(x); }
MT_DEVICE float mt_log(float x) { return logf(x); }
MT_DEVICE double mt_log(double x) { return log(x); }
MT_DEVICE float mt_tanh(float x) { return tanhf(x); }
MT_DEVICE double mt_tanh(double x) { return tanh(x); }
MT_DEVICE float mt_sqrt(float x) { return sqrtf(x); }
MT_DEVICE double mt_sqrt(double x) { return sqrt(x); }
MT_DEVICE float mt_fabs(float x) { return fabsf(x); }
MT_DEVICE double mt_fabs(double x) { return fabs(x); }
MT_DEVICE float mt_pow(float x, float y) { return powf(x, y); }
MT_DEVICE double mt_pow(double x, double y) { return pow(x, y); }

/* x != x holds only for NaN. Used where NaN must win (max, min, argmax), as
 * in NumPy and PyTorch, so that a NaN in the data is never silently hidden. */
template <typename T>
MT_DEVICE bool mt_isnan(T x)
{
    return x != x;
}

template <typename T>
MT_DEVICE T mt_infinity()
{
    return (T)INFINITY;
}

/* NaN-propagating maximum and minimum of two values: a NaN in either
 * argument comes out (if a is NaN it is returned; if b is NaN, a > b is false
 * and b is returned). */
template <typename T>
MT_DEVICE T mt_max(T a, T b)
{
    return (mt_isnan(a) || a > b) ? a : b;
}

template <typename T>
MT_DEVICE T mt_min(T a, T b)
{
    return (mt_isnan(a) || a < b) ? a : b;
}

/* ---- block_reduce: the shared-memory tree ---------------------------------
 *
 * Every thread of the block calls it with its own partial value; every thread
 * gets back the combination of all of them. `scratch` is a __shared__ array
 * of at least blockDim.x elements, declared by the calling kernel (the
 * kernels declare kBlockSize elements and launch at most kBlockSize threads).
 *
 * Contract (the callers' launch sizes guarantee the first point: kBlockSize
 * and row_block_size are powers of two):
 *   - blockDim.x is a power of two. Each level of the tree halves the number
 *     of active threads: thread t adds in element t + stride. With a power of
 *     two every level pairs all the remaining elements exactly; with, say,
 *     6 threads the level with stride 3 would leave element 2 unpaired and
 *     drop it from the result.
 *   - every thread of the block calls it, the same number of times, because
 *     it contains __syncthreads(): a thread that skipped the call (an early
 *     `return`) would leave the others waiting at a barrier it never reaches.
 *   - `combine` is associative and commutative: the tree adds in a different
 *     order than a sequential loop would.
 *   - when it returns, scratch may be reused at once.
 *
 * "Sequential addressing": at every level the active threads are 0..stride-1
 * and they read a contiguous range, so the active threads of a warp stay
 * together (no divergence inside a warp until stride < 32) and consecutive
 * threads touch consecutive shared-memory banks (no bank conflicts).
 */
template <typename Acc, typename Combine>
MT_DEVICE Acc block_reduce(Acc *scratch, Acc value, Combine combine)
{
    const unsigned int tid = threadIdx.x;
    scratch[tid] = value;
    /* Every partial must be in shared memory before any thread reads another
     * thread's slot in the first level. */
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (tid < stride)
            scratch[tid] = combine(scratch[tid], scratch[tid + stride]);
        /* One level must be finished before the next level reads its results:
         * scratch[tid + stride] of the next level was written in this one by
         * another thread. */
        __syncthreads();
    }
    Acc result = scratch[0];
    /* Every thread must have read scratch[0] before the caller may write
     * scratch again (the next row, or the next reduction of the same row). */
    __syncthreads();
    return result;
}

/* Threads per block for one block per row of length `len`: the smallest power
 * of two that covers the row, at least one warp (32) and at most kBlockSize.
 * A row of 5 elements then gets 32 threads rather than 256, 251 of them idle. */
inline int row_block_size(int64_t len)
{
    int block = 32;
    while (block < kBlockSize && block < len)
        block *= 2;
    return block;
}

#endif /* MT_OPS_COMMON_H */
