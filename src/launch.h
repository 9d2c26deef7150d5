/*
 * launch.h: launch geometry, shared by the kernel files.
 *
 *   - the block size and the capped grid of the grid-stride loops that every
 *     elementwise kernel uses (grid_size), the block of a one-block-per-row
 *     kernel (row_block_size), and for_each_grid_chunk for 2-D/3-D grids
 *     whose y and z exceed 65535;
 *   - Pack<T>: 16 bytes of T, the unit of the vectorised (LDG.128) kernels;
 *   - mt_sm_count: how many SMs the device has, for launch sizes that must
 *     fill the GPU; mt_get_device_caps: its compute capability and opt-in
 *     shared memory, for rungs that need a newer GPU or a large block;
 *   - MT_DEVICE and MT_UNROLL, the spellings of device helpers and unrolled
 *     loops.
 *
 * Compiled as it is by nvcc and by the emulator build (only the .cu files go
 * through minitensor/cuda/_cu2emu.py), so it declares no __shared__ arrays and launches
 * no kernels itself.
 */
#ifndef MT_LAUNCH_H
#define MT_LAUNCH_H

#include <stdint.h>

#include "check.h"

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

/* ---- launch geometry ------------------------------------------------------ */

/* Threads per block of the elementwise and reduction kernels. A power of two,
 * which block_reduce (block_reduce.h) relies on. */
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

/* 16 bytes of T (4 floats, 2 doubles or int64s, 16 bools), aligned so that
 * one load or store of a Pack is a single 16-byte memory instruction
 * (LDG.128 / LDS.128). The vectorised kernels read and write through it;
 * they take kWidth from it, so they serve every element size that divides
 * 16. */
template <typename T>
struct __align__(16) Pack {
    static_assert(16 % sizeof(T) == 0, "a Pack holds whole elements");
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

/* The number of SMs (streaming multiprocessors) of the device this process
 * uses, queried once per device and cached (src/library.cu); 1 if the query
 * fails. Call it after mt_ensure_init. */
int mt_sm_count(void);

/* What the device this process uses can run: its compute capability and the
 * shared memory one block may opt in to (cudaFuncSetAttribute's limit: 227
 * KiB on an H100, 163 on an A100, 99 on sm_86/89). Queried once per device
 * and cached (src/library.cu); every rung that needs a newer GPU or a large
 * block asks here. The emulator answers as a 9.0 GPU. */
struct mt_device_caps {
    int major;
    int minor;
    int smem_optin; /* bytes */
};
mt_status mt_get_device_caps(mt_device_caps *caps);

/* ---- streams (src/stream.cu) ---------------------------------------------- */

/* The calling thread's current stream (NULL: the legacy default stream).
 * Every launch, copy, memset and allocation of the library is queued on it:
 *
 *     kernel<<<grid, block, 0, mt_stream()>>>(...);
 */
cudaStream_t mt_stream(void);

/* Before a stream is destroyed: waits for its work and moves the buffers
 * allocated or used on it to the legacy default stream, so that freeing them
 * later does not name a stream that no longer exists (src/memory.cu). */
mt_status mt_forget_stream(const char *func, cudaStream_t stream);

/* ---- graph capture (src/graph.cu) ----------------------------------------- */

/* Whether this thread is capturing a graph now, and on which stream, and a
 * number that names the capture (0 when none). */
bool mt_capturing(void);
cudaStream_t mt_capture_stream(void);
unsigned long long mt_capture_id(void);
/* Frees the buffers mt_free kept back during the capture (src/memory.cu),
 * and destroys the streams mt_stream_destroy kept back (src/stream.cu). */
mt_status mt_release_deferred_frees(const char *func);
mt_status mt_release_deferred_streams(void);
/* mt_free of a buffer that capture `id` allocated: true when the graph keeps
 * it (it has not been replayed yet, so the buffer holds no memory of its own
 * to free), src/graph.cu. */
bool mt_graph_take_free(unsigned long long id, void *ptr);
/* mt_free, during a capture, of a buffer allocated before it: the graph
 * being captured keeps it until the graph is destroyed (false: no graph). */
bool mt_graph_keep(void *ptr);
/* A graph is gone: its buffers the program still has become ordinary ones,
 * or, where the graph never ran (backed false), ones with no memory to free
 * (src/memory.cu). */
mt_status mt_forget_capture(unsigned long long id, bool backed);

#endif /* MT_LAUNCH_H */
