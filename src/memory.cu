/*
 * memory.cu: device allocations, copies, and the table of known buffers.
 *
 * Allocations come from the runtime's stream-ordered pool (cudaMallocAsync on
 * the current stream, mt_stream()): freeing and re-allocating a tensor of the
 * same size, as every training step does, reuses pool memory instead of
 * asking the driver. An allocation is ready for every kernel queued after it
 * on its stream. A buffer is freed on the stream it was allocated on
 * (cudaFreeAsync), so the pool reuses it only after the work queued there
 * before the free. Work on another stream is not ordered with that free:
 * mt_record_stream names such a stream, and mt_free then makes the
 * allocation stream wait for it first (torch's Tensor.record_stream).
 *
 * The library keeps a table of the buffers it may touch: every live mt_malloc
 * allocation, and every foreign buffer registered with mt_register_buffer
 * (another library's memory). It answers mt_memory_in_use, which tests use
 * to catch leaks; it lets mt_free reject a pointer it never handed out, or
 * one already freed, instead of corrupting the pool; and every entry point
 * checks that each descriptor it gets, and the device side of each copy,
 * lies inside one buffer of the table (mt_check_extent, mt_check_range in
 * validate.cu), so that a wrong offset, stride or size is an error message
 * instead of a wild read or write.
 *
 * The table is an ordered map from base address to size: the buffer holding
 * an address is found with one upper_bound (O(log n)). Every kernel call
 * looks up one to three addresses and allocations are rarer, so the map is
 * guarded by a shared_mutex: lookups take the reader side and run in
 * parallel, mt_malloc/mt_free/register take the writer side. In front of it,
 * each thread remembers the last few buffers it found (mt_find_buffer).
 */
#include <errno.h>

#include <atomic>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <vector>

#ifdef MT_EMULATOR
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "check.h"
#include "descriptor.h"
#include "launch.h"

namespace {

struct Entry {
    size_t bytes;
    bool foreign;                     /* registered with mt_register_buffer, not from mt_malloc */
    cudaStream_t stream = nullptr;    /* allocated on it; freed on it */
    unsigned long long capture = 0;   /* the graph capture that allocated it (mt_capture_id), or 0 */
    std::vector<cudaStream_t> users;  /* other streams it was used on (mt_record_stream) */
    bool unbacked = false;            /* a graph's buffer whose graph never ran: nothing to free */
};

/* Buffers freed during a graph capture that the capture did not allocate:
 * freed when it ends (a free recorded into the graph would run again at
 * every replay). Per thread, as captures are. */
thread_local std::vector<void *> t_deferred;

/* Host data, shared by every thread that calls the library. */
std::shared_mutex g_table_mutex;
std::map<uintptr_t, Entry> g_buffers; /* base address -> entry; never empty ranges */
int64_t g_bytes_in_use = 0;           /* mt_malloc allocations only */

/* Bumped, under the writer lock, whenever an entry leaves the table. */
std::atomic<uint64_t> g_generation{0};

/* Each thread remembers the last few buffers it found (a kernel call looks
 * up each of its operands, usually the same few buffers call after call).
 * A remembered buffer is still valid while g_generation has not moved:
 * entries are only ever added meanwhile, and an added entry cannot overlap
 * one that is there. The hit costs an atomic load and a few compares
 * instead of the lock and the tree walk. */
struct Remembered {
    uint64_t generation = UINT64_MAX; /* never a generation: empty slot */
    uintptr_t base = 0;
    size_t bytes = 0;
    bool foreign = false;
};
constexpr int kRemembered = 4;
/* The default TLS model: this library is loaded with dlopen, and a library
 * that asks for initial-exec TLS fails to load ("cannot allocate memory in
 * static TLS block") in a process whose static TLS space other libraries
 * already took, as a pytest run with NumPy does. */
thread_local Remembered t_remembered[kRemembered];
thread_local int t_next_slot = 0;

/* The entry whose [base, base + bytes) holds p, or end(); the caller holds
 * the lock. */
std::map<uintptr_t, Entry>::const_iterator find_locked(uintptr_t p)
{
    auto it = g_buffers.upper_bound(p); /* the first base above p */
    if (it == g_buffers.begin())
        return g_buffers.end();
    --it;
    if (p - it->first < it->second.bytes)
        return it;
    return g_buffers.end();
}

/* Does [p, p + bytes) meet any entry? The caller holds the lock. */
std::map<uintptr_t, Entry>::const_iterator overlapping_locked(uintptr_t p, size_t bytes)
{
    auto it = find_locked(p);
    if (it != g_buffers.end())
        return it;
    it = g_buffers.upper_bound(p);
    if (it != g_buffers.end() && it->first - p < bytes)
        return it;
    return g_buffers.end();
}

} /* namespace */

bool mt_find_buffer(const void *p, mt_buffer *found)
{
    const uintptr_t a = (uintptr_t)p;
    const uint64_t now = g_generation.load(std::memory_order_acquire);
    for (const Remembered &r : t_remembered) {
        if (r.generation == now && a - r.base < r.bytes) {
            *found = mt_buffer{r.base, r.bytes, r.foreign};
            return true;
        }
    }
    std::shared_lock<std::shared_mutex> lock(g_table_mutex);
    auto it = find_locked(a);
    if (it == g_buffers.end())
        return false;
    *found = mt_buffer{it->first, it->second.bytes, it->second.foreign};
    Remembered &slot = t_remembered[t_next_slot];
    t_next_slot = (t_next_slot + 1) % kRemembered;
    slot = Remembered{g_generation.load(std::memory_order_relaxed), it->first, it->second.bytes,
                      it->second.foreign};
    return true;
}

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
    const cudaStream_t stream = mt_stream();
    CUDA_CHECK(cudaMallocAsync(&p, bytes, stream));
    std::unique_lock<std::shared_mutex> lock(g_table_mutex);
    g_buffers[(uintptr_t)p] = Entry{bytes, false, stream, mt_capture_id(), {}};
    g_bytes_in_use += (int64_t)bytes;
    *ptr = p;
    return MT_OK;
}

mt_status mt_free(void *ptr)
{
    if (ptr == nullptr)
        return MT_OK;
    MT_TRY(mt_ensure_init("mt_free"));

    std::unique_lock<std::shared_mutex> lock(g_table_mutex);
    auto it = g_buffers.find((uintptr_t)ptr);
    if (it == g_buffers.end())
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_free",
                       "pointer %p was not allocated by mt_malloc, or was already freed", ptr);
    if (it->second.foreign)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_free",
                       "pointer %p is a foreign buffer registered with mt_register_buffer; "
                       "mt_unregister_buffer forgets it (its owner frees it)",
                       ptr);
    if (mt_capturing() && it->second.capture != mt_capture_id()) {
        /* The capture's kernels may read it at every replay. */
        if (!mt_graph_keep(ptr))
            t_deferred.push_back(ptr);
        return MT_OK;
    }
    if ((it->second.capture != 0 && mt_graph_take_free(it->second.capture, ptr)) || it->second.unbacked) {
        /* The graph's memory: it keeps it (or there is none); forget it here. */
        g_bytes_in_use -= (int64_t)it->second.bytes;
        g_buffers.erase(it);
        g_generation.fetch_add(1, std::memory_order_release);
        return MT_OK;
    }
    /* The allocation stream waits for the work queued so far on every other
     * stream that used the buffer; then the pool may hand it out again. */
    for (cudaStream_t user : it->second.users)
        MT_TRY(mt_stream_wait((void *)it->second.stream, (void *)user));
    CUDA_CHECK(cudaFreeAsync(ptr, it->second.stream));
    g_bytes_in_use -= (int64_t)it->second.bytes;
    g_buffers.erase(it);
    g_generation.fetch_add(1, std::memory_order_release);
    return MT_OK;
}

mt_status mt_release_deferred_frees(const char *func)
{
    std::vector<void *> pending;
    pending.swap(t_deferred);
    mt_status first = MT_OK;
    for (void *ptr : pending) {
        const mt_status status = mt_free(ptr);
        if (status != MT_OK && first == MT_OK)
            first = status;
    }
    (void)func;
    return first;
}

mt_status mt_record_stream(void *ptr, void *stream)
{
    if (ptr == nullptr)
        return MT_OK; /* an empty tensor */
    MT_TRY(mt_ensure_init("mt_record_stream"));
    std::unique_lock<std::shared_mutex> lock(g_table_mutex);
    auto it = g_buffers.find((uintptr_t)ptr);
    if (it == g_buffers.end() || it->second.foreign)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_record_stream",
                       "pointer %p is not the start of a buffer allocated by mt_malloc", ptr);
    Entry &e = it->second;
    const cudaStream_t s = (cudaStream_t)stream;
    if (s == e.stream)
        return MT_OK;
    for (cudaStream_t user : e.users)
        if (user == s)
            return MT_OK;
    e.users.push_back(s);
    return MT_OK;
}

mt_status mt_forget_capture(unsigned long long id, bool backed)
{
    std::unique_lock<std::shared_mutex> lock(g_table_mutex);
    for (auto &kv : g_buffers)
        if (kv.second.capture == id) {
            kv.second.capture = 0;
            kv.second.unbacked = !backed;
        }
    return MT_OK;
}

mt_status mt_forget_stream(const char *func, cudaStream_t stream)
{
    /* Its work done, nothing queued on it can still touch a buffer: freeing
     * on the legacy default stream is then as safe as freeing on it. */
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::unique_lock<std::shared_mutex> lock(g_table_mutex);
    for (auto &kv : g_buffers) {
        Entry &e = kv.second;
        if (e.stream == stream)
            e.stream = nullptr;
        for (size_t i = 0; i < e.users.size();)
            if (e.users[i] == stream || e.users[i] == e.stream) {
                e.users[i] = e.users.back();
                e.users.pop_back();
            } else {
                ++i;
            }
    }
    (void)func;
    return MT_OK;
}

mt_status mt_memory_in_use(int64_t *bytes)
{
    if (bytes == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_memory_in_use", "bytes is null");
    std::shared_lock<std::shared_mutex> lock(g_table_mutex);
    *bytes = g_bytes_in_use;
    return MT_OK;
}

mt_status mt_find_allocation(const void *ptr, void **base, size_t *bytes)
{
    const char *func = "mt_find_allocation";
    if (base == nullptr || bytes == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s is null", base == nullptr ? "base" : "bytes");
    *base = nullptr;
    *bytes = 0;
    mt_buffer found;
    if (!mt_find_buffer(ptr, &found))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "pointer %p is in no live mt_malloc allocation or registered buffer", ptr);
    *base = (void *)found.base;
    *bytes = found.bytes;
    return MT_OK;
}

/* ---- foreign buffers ------------------------------------------------------- */

/* Is [p, p + bytes) memory the kernels can use? CUDA: both ends are device
 * (or managed) memory of this process's device, by the runtime's pointer
 * attributes. Emulator: kernels run on the host, so both ends must be mapped
 * in this process (msync fails with ENOMEM on an unmapped page); whether the
 * pages are writable is not checked. */
static mt_status check_foreign_memory(const char *func, uintptr_t p, size_t bytes)
{
    const uintptr_t ends[2] = {p, p + bytes - 1};
#ifdef MT_EMULATOR
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t first = ends[0] / page * page;
    const uintptr_t last = ends[1] / page * page;
    if (msync((void *)first, (size_t)(last - first + page), MS_ASYNC) != 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "ptr %p (%zu bytes) is not memory of this process: %s", (void *)p, bytes,
                       errno == ENOMEM ? "some of its pages are not mapped" : "msync failed");
#else
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    for (int k = 0; k < 2; ++k) {
        cudaPointerAttributes attr;
        cudaError_t err = cudaPointerGetAttributes(&attr, (const void *)ends[k]);
        if (err != cudaSuccess)
            (void)cudaGetLastError(); /* not sticky: clear it */
        const bool device_memory =
            err == cudaSuccess && (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged);
        if (!device_memory || attr.device != device)
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                           "ptr %p (%zu bytes) is not device memory of device %d: its %s byte, %p, is not",
                           (void *)p, bytes, device, k == 0 ? "first" : "last", (void *)ends[k]);
    }
#endif
    return MT_OK;
}

/* The checks mt_register_buffer and mt_grow_buffer share: a range that is
 * not empty, does not wrap, and is the device's memory. */
static mt_status check_new_buffer(const char *func, void *ptr, size_t bytes)
{
    const uintptr_t p = (uintptr_t)ptr;
    if (ptr == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "ptr is null");
    if (bytes == 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "bytes is 0: an empty buffer needs no registering");
    if (p + bytes < p || bytes > (size_t)INT64_MAX)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "ptr %p + %zu bytes runs past the end of the address space",
                       ptr, bytes);
    MT_TRY(mt_ensure_init(func));
    return check_foreign_memory(func, p, bytes);
}

mt_status mt_register_buffer(void *ptr, size_t bytes)
{
    const char *func = "mt_register_buffer";
    MT_TRY(check_new_buffer(func, ptr, bytes));
    const uintptr_t p = (uintptr_t)ptr;
    std::unique_lock<std::shared_mutex> lock(g_table_mutex);
    auto it = overlapping_locked(p, bytes);
    if (it != g_buffers.end())
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "ptr %p (%zu bytes) overlaps %s of %zu bytes at %p", ptr, bytes,
                       it->second.foreign ? "a registered buffer" : "an mt_malloc allocation",
                       it->second.bytes, (void *)it->first);
    g_buffers[p] = Entry{bytes, true, nullptr, 0, {}};
    return MT_OK;
}

mt_status mt_grow_buffer(void *ptr, size_t bytes)
{
    const char *func = "mt_grow_buffer";
    MT_TRY(check_new_buffer(func, ptr, bytes));
    const uintptr_t p = (uintptr_t)ptr;
    std::unique_lock<std::shared_mutex> lock(g_table_mutex);
    /* The entries the range meets: the one holding p, if any, then every one
     * that starts inside the range. All are checked before any is touched. */
    auto first = find_locked(p);
    if (first == g_buffers.end())
        first = g_buffers.lower_bound(p);
    auto last = first;
    for (; last != g_buffers.end() && last->first < p + bytes; ++last) {
        const uintptr_t base = last->first;
        const Entry &e = last->second;
        if (!e.foreign)
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "ptr %p (%zu bytes) overlaps an mt_malloc allocation of %zu bytes at %p",
                           ptr, bytes, e.bytes, (void *)base);
        if (base < p || base + e.bytes > p + bytes)
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                           "ptr %p (%zu bytes) only partly covers the registered buffer of %zu bytes at %p: "
                           "it must contain every buffer it meets",
                           ptr, bytes, e.bytes, (void *)base);
    }
    /* One step under the writer lock: no lookup ever finds the memory unknown. */
    const bool replaced = first != last;
    g_buffers.erase(first, last);
    g_buffers[p] = Entry{bytes, true, nullptr, 0, {}};
    if (replaced)
        g_generation.fetch_add(1, std::memory_order_release); /* entries left the table */
    return MT_OK;
}

mt_status mt_unregister_buffer(void *ptr)
{
    const char *func = "mt_unregister_buffer";
    std::unique_lock<std::shared_mutex> lock(g_table_mutex);
    auto it = g_buffers.find((uintptr_t)ptr);
    if (it == g_buffers.end() || !it->second.foreign)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "pointer %p is not a registered buffer%s", ptr,
                       it == g_buffers.end() ? "" : " (it is an mt_malloc allocation: mt_free it)");
    g_buffers.erase(it);
    g_generation.fetch_add(1, std::memory_order_release);
    return MT_OK;
}

/* ---- copies -------------------------------------------------------------- */

/* The checks the three copies share: a null pointer is an error, and each
 * device side must lie inside one known buffer (dst for h2d, src for d2h,
 * both for d2d). */
static mt_status check_copy(const char *func, void *dst, const void *src, size_t bytes, bool dst_device,
                            bool src_device)
{
    if (dst == nullptr || src == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s is null but %zu bytes were requested",
                       dst == nullptr ? "dst" : "src", bytes);
    MT_TRY(mt_ensure_init(func));
    if (dst_device)
        MT_TRY(mt_check_range(func, "dst", dst, bytes));
    if (src_device)
        MT_TRY(mt_check_range(func, "src", src, bytes));
    return MT_OK;
}

mt_status mt_memcpy_h2d(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return MT_OK;
    MT_TRY(check_copy("mt_memcpy_h2d", dst, src, bytes, true, false));
    /* On the current stream, after the work queued there. From pageable
     * host memory the call returns once the source has been read (staged),
     * so the caller may reuse its host buffer straight away. */
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, mt_stream()));
    return MT_OK;
}

mt_status mt_memcpy_d2h(void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return MT_OK;
    MT_TRY(check_copy("mt_memcpy_d2h", dst, src, bytes, false, true));
    /* After the kernels queued before it on the current stream (they produce
     * src); the host may read dst only once that stream has reached it. */
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, mt_stream()));
    CUDA_CHECK(cudaStreamSynchronize(mt_stream()));
    return MT_OK;
}

mt_status mt_memcpy_d2d(void *dst, const void *src, size_t bytes)
{
    const char *func = "mt_memcpy_d2d";
    if (bytes == 0)
        return MT_OK;
    MT_TRY(check_copy(func, dst, src, bytes, true, true));
    /* Both ranges are inside known buffers, so these sums do not wrap. */
    const uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (d != s && d < s + bytes && s < d + bytes)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "dst %p and src %p overlap (%zu bytes each): copy through a temporary", dst, src,
                       bytes);
    /* Ordered on the current stream with the kernels around it; the host
     * need not wait for it. */
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, mt_stream()));
    return MT_OK;
}
