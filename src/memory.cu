/*
 * memory.cu: device allocations and copies.
 *
 * Allocations come from the runtime's stream-ordered pool (cudaMallocAsync on
 * stream 0): freeing and re-allocating a tensor of the same size, as every
 * training step does, reuses pool memory instead of asking the driver. All
 * the library's work runs on stream 0, so an allocation is ready for every
 * kernel launched after it, and a buffer freed with cudaFreeAsync is only
 * reused after the kernels queued before the free have finished with it.
 *
 * The library keeps a table of its live allocations (pointer -> size). It
 * answers mt_memory_in_use, which tests use to catch leaks, and it lets
 * mt_free reject a pointer it never handed out, or one already freed,
 * instead of corrupting the pool.
 */
#include <mutex>
#include <unordered_map>

#include "check.h"
#include "descriptor.h"

/* Host data, shared by every thread that calls the library: guarded by a
 * mutex. */
static std::mutex g_alloc_mutex;
static std::unordered_map<void *, size_t> g_alloc_sizes;
static int64_t g_bytes_in_use = 0;

mt_status mt_malloc(void **ptr, size_t bytes)
{
    if (ptr == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_malloc", "ptr is null");
    *ptr = nullptr;
    /* An empty tensor needs no storage; a null pointer stands for it. */
    if (bytes == 0)
        return MT_OK;
    MT_TRY(mt_ensure_init("mt_malloc"));

    void *p = nullptr;
    CUDA_CHECK(cudaMallocAsync(&p, bytes, 0));
    std::lock_guard<std::mutex> lock(g_alloc_mutex);
    g_alloc_sizes[p] = bytes;
    g_bytes_in_use += (int64_t)bytes;
    *ptr = p;
    return MT_OK;
}

mt_status mt_free(void *ptr)
{
    if (ptr == nullptr)
        return MT_OK;
    MT_TRY(mt_ensure_init("mt_free"));

    std::lock_guard<std::mutex> lock(g_alloc_mutex);
    auto it = g_alloc_sizes.find(ptr);
    if (it == g_alloc_sizes.end())
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_free",
                       "pointer %p was not allocated by mt_malloc, or was already freed", ptr);
    CUDA_CHECK(cudaFreeAsync(ptr, 0));
    g_bytes_in_use -= (int64_t)it->second;
    g_alloc_sizes.erase(it);
    return MT_OK;
}

mt_status mt_memory_in_use(int64_t *bytes)
{
    if (bytes == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_memory_in_use", "bytes is null");
    std::lock_guard<std::mutex> lock(g_alloc_mutex);
    *bytes = g_bytes_in_use;
    return MT_OK;
}

/* The checks the three copies share: nothing to do for 0 bytes, a null
 * pointer is an error otherwise. */
static mt_status check_copy(const char *func, void *dst, const void *src, size_t bytes)
{
    if (bytes > 0 && (dst == nullptr || src == nullptr))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s is null but %zu bytes were requested",
                       dst == nullptr ? "dst" : "src", bytes);
    return mt_ensure_init(func);
}

mt_status mt_memcpy_h2d(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return MT_OK;
    MT_TRY(check_copy("mt_memcpy_h2d", dst, src, bytes));
    /* cudaMemcpy from pageable host memory returns once the source has been
     * read, so the caller may reuse its host buffer straight away. */
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return MT_OK;
}

mt_status mt_memcpy_d2h(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return MT_OK;
    MT_TRY(check_copy("mt_memcpy_d2h", dst, src, bytes));
    /* Synchronous: it waits for the kernels queued before it that produce
     * src, and returns only when the host may read dst. */
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return MT_OK;
}

mt_status mt_memcpy_d2d(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return MT_OK;
    MT_TRY(check_copy("mt_memcpy_d2d", dst, src, bytes));
    /* Ordered on stream 0 with the kernels around it; the host need not
     * wait for it. */
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
    return MT_OK;
}
