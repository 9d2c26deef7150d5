/*
 * ops_common.h: what the kernel files share, kept in one place.
 *
 *   - launch geometry: the block size and the capped grid of the grid-stride
 *     loops that every elementwise kernel uses, and for_each_grid_chunk for
 *     2-D/3-D grids whose y and z exceed 65535;
 *   - Pack<T>: 16 bytes of T, the unit of the vectorised (LDG.128) kernels;
 *   - small host helpers: dtype names and sizes, "same shape?", "is this
 *     tensor contiguous?", "is it a transposed view?", "do these two tensors
 *     overlap?", the dim check, CUDA version strings, and a scratch buffer
 *     that frees itself;
 *   - copy_tensor: the library's own out = in (map.cu);
 *   - device math overloads (mt_exp(float) -> expf, mt_exp(double) -> exp),
 *     so that a kernel templated on T calls the right precision;
 *   - block_reduce: the shared-memory tree reduction that reduce.cu and
 *     softmax.cu are built on, and its warp-shuffle variants
 *     (warp_reduce, block_reduce_last_warp, block_reduce_warps).
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

/* `MT_UNROLL for (...)`: asks nvcc to unroll a loop with a compile-time trip
 * count. Kernels that keep arrays in registers need it: a register array
 * indexed by a loop counter that is not a constant after unrolling is moved
 * to (slow) local memory. The emulator's host compiler needs no hint. */
#if defined(__CUDACC__)
#define MT_UNROLL _Pragma("unroll")
#define MT_UNROLL4 _Pragma("unroll 4")
#else
#define MT_UNROLL
#define MT_UNROLL4
#endif

/* Names the entry point in the messages of mt_fail_cuda (src/errors.cu);
 * mt_ensure_init sets it, as the first thing every entry point does. */
void mt_set_current_call(const char *func);

/* out = in for validated tensors of the same shape and dtype (either may
 * have any strides): the library's own copies, such as matmul's operand
 * preparation, go through it (src/map.cu), so they get the tiled transpose
 * when in is a transposed view. */
mt_status copy_tensor(const mt_tensor &out, const mt_tensor &in);

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

/* The limit of gridDim.y and gridDim.z. */
constexpr int64_t kMaxGridYZ = 65535;

/* 16 bytes of T (4 floats or 2 doubles), aligned so that one load or store
 * of a Pack is a single 16-byte memory instruction (LDG.128 / LDS.128). The
 * vectorised kernels read and write through it. */
template <typename T>
struct __align__(16) Pack {
    static constexpr int kWidth = 16 / (int)sizeof(T);
    T v[16 / sizeof(T)];
};

/* A grid of x_tiles x y_tiles x batches blocks, cut into launches that keep
 * gridDim.y and gridDim.z within 65535. launch(grid, y_start, batch_start)
 * is called once per piece; it returns an mt_status. */
template <typename Launch>
mt_status for_each_grid_chunk(int64_t x_tiles, int64_t y_tiles, int64_t batches, Launch launch)
{
    for (int64_t batch0 = 0; batch0 < batches; batch0 += kMaxGridYZ) {
        const int64_t batch_count = batches - batch0 < kMaxGridYZ ? batches - batch0 : kMaxGridYZ;
        for (int64_t y0 = 0; y0 < y_tiles; y0 += kMaxGridYZ) {
            const int64_t y_count = y_tiles - y0 < kMaxGridYZ ? y_tiles - y0 : kMaxGridYZ;
            const dim3 grid((unsigned int)x_tiles, (unsigned int)y_count, (unsigned int)batch_count);
            mt_status status = launch(grid, y0, batch0);
            if (status != MT_OK)
                return status;
        }
    }
    return MT_OK;
}

/* ---- host helpers on descriptors ----------------------------------------- */

/* Is p aligned for Pack loads and stores? */
inline bool aligned16(const void *p)
{
    return (uintptr_t)p % 16 == 0;
}

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
/* "CUDA driver 13.0, runtime 13.0" (or "none" for a missing one): most
 * failures to load or launch come from the two disagreeing, so messages say
 * which met. */
inline void cuda_versions(char *buf, size_t size)
{
    int driver = 0;
    int runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    char d[16] = "none";
    char r[16] = "none";
    if (driver > 0)
        snprintf(d, sizeof d, "%d.%d", driver / 1000, (driver % 1000) / 10);
    if (runtime > 0)
        snprintf(r, sizeof r, "%d.%d", runtime / 1000, (runtime % 1000) / 10);
    snprintf(buf, size, "CUDA driver %s, runtime %s", d, r);
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

/* A "transposed view": dim -2 has stride 1 and dim -1 does not (A.T of a
 * row-major A, or a batch of such matrices). Walking such a tensor in
 * row-major order jumps through memory; the tiled transposes (map.cu,
 * zip.cu) read it 32 x 32 elements at a time, coalesced along dim -2. */
inline bool is_transposed_view(const mt_tensor &x)
{
    if (x.ndim < 2)
        return false;
    const int64_t rows = x.shape[x.ndim - 2];
    const int64_t cols = x.shape[x.ndim - 1];
    return rows > 1 && cols > 1 && x.strides[x.ndim - 2] == 1 && x.strides[x.ndim - 1] != 1;
}

/* Each row of x (dim -1) is contiguous in memory; the batch dims and the row
 * stride may be anything. */
inline bool rows_contiguous(const mt_tensor &x)
{
    return x.ndim >= 2 && (x.strides[x.ndim - 1] == 1 || x.shape[x.ndim - 1] == 1);
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

/* ---- warp_reduce and block_reduce_warps: the shuffle finish ---------------
 *
 * A warp shuffle moves a register value from one lane of a warp to another
 * without shared memory or a barrier. warp_reduce halves the distance each
 * step (16, 8, 4, 2, 1): after five steps lane 0 holds the combination of
 * all 32 lanes' values (the other lanes hold partial results).
 *
 * Contract: every lane of the warp calls it (the full mask 0xffffffff names
 * all 32), with a combine that is associative and commutative. shfl_down
 * has an overload for every accumulator type a caller uses (float, double
 * here; reduce.cu adds the argmax candidate, a struct of two fields). */
template <typename T>
MT_DEVICE T shfl_down(T value, int delta)
{
    return __shfl_down_sync(0xffffffffu, value, delta);
}

template <typename Acc, typename Combine>
MT_DEVICE Acc warp_reduce(Acc value, Combine combine)
{
    MT_UNROLL for (int delta = 16; delta > 0; delta /= 2)
        value = combine(value, shfl_down(value, delta));
    return value;
}

/* block_reduce's contract and result (every thread gets the combination of
 * the whole block), with blockDim.x a multiple of 32 and at most 1024:
 * each warp reduces its 32 values with shuffles, lane 0 of each warp parks
 * the result in scratch[warp] (scratch: at least 32 elements), and warp 0
 * reduces those. Two barriers in all, instead of one per tree level. */
template <typename Acc, typename Combine>
MT_DEVICE Acc block_reduce_warps(Acc *scratch, Acc value, Acc identity, Combine combine)
{
    const unsigned int lane = threadIdx.x % 32;
    const unsigned int warp = threadIdx.x / 32;
    const unsigned int warps = blockDim.x / 32;
    value = warp_reduce(value, combine);
    if (lane == 0)
        scratch[warp] = value;
    /* Every warp's partial is parked before warp 0 reads them. */
    __syncthreads();
    if (warp == 0) {
        value = lane < warps ? scratch[lane] : identity;
        value = warp_reduce(value, combine);
        if (lane == 0)
            scratch[0] = value;
    }
    /* scratch[0] is written before anyone reads it. */
    __syncthreads();
    Acc result = scratch[0];
    /* Everyone has read scratch[0] before a caller may write scratch again. */
    __syncthreads();
    return result;
}

/* The sequential-addressing tree of block_reduce, with its last five levels
 * (stride 16, 8, 4, 2, 1: the 32 values left all live in warp 0) done with
 * warp shuffles instead of shared memory and barriers, Harris's "unroll the
 * last warp". It adds in exactly the order of block_reduce, so it gives the
 * same bits; it only saves five barriers. Same contract as block_reduce
 * (blockDim.x a power of two, at least 32; every thread calls it), but the
 * result is valid in thread 0 only. */
template <typename Acc, typename Combine>
MT_DEVICE Acc block_reduce_last_warp(Acc *scratch, Acc value, Combine combine)
{
    const unsigned int tid = threadIdx.x;
    if (blockDim.x > 32) {
        scratch[tid] = value;
        /* Every partial is in shared memory before the first level reads. */
        __syncthreads();
        for (unsigned int stride = blockDim.x / 2; stride >= 32; stride /= 2) {
            if (tid < stride)
                scratch[tid] = combine(scratch[tid], scratch[tid + stride]);
            /* One level is finished before the next reads its results. */
            __syncthreads();
        }
        if (tid < 32)
            value = scratch[tid];
    }
    if (tid < 32)
        value = warp_reduce(value, combine);
    /* Everyone is done with scratch before the caller may write it again. */
    __syncthreads();
    return value;
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
