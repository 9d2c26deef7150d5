/*
 * emu_memory.cpp: "device" memory of the CPU emulator (see emu_internal.h).
 *
 * Every allocation is a mapping of its own (mmap), apart from the heap the
 * emulator itself uses, with a PROT_NONE guard page after it:
 *
 *   [ data pages ... | guard page ]
 *
 * Without the full checks the allocation starts at the mapping's start; in
 * full mode (MINITENSOR_EMU_CHECK=full) its last byte sits against the guard
 * page, so a read or write even one byte past the end faults. Its start is
 * then aligned only to the largest power of two that divides its size (a
 * buffer of n floats to 4 bytes, of a multiple of 16 bytes to 16), which
 * keeps every element aligned; the library's 16-byte vector paths test the
 * pointer's alignment and take their scalar path otherwise.
 *
 * cudaFree makes the mapping PROT_NONE and keeps it in quarantine (the last
 * kQuarantineBytes' worth, at most kQuarantineCount mappings), so a use after
 * free faults instead of reaching memory that was handed out again. A mapping
 * that leaves quarantine is unmapped, or, if it is small, kept in a cache by
 * its number of pages for the next allocation of that size: a small op then
 * costs one mprotect to allocate and one to free, instead of an mmap, an
 * mprotect, a page fault, a madvise, an mprotect and an munmap.
 *
 * Full mode also checks reads of memory nothing wrote (compute-sanitizer's
 * initcheck), per page, on Linux on x86-64 and arm64 (where the fault
 * handler can tell a write): an allocation's data pages start PROT_NONE. The
 * first write to a page (by a kernel, or by cudaMemcpy/cudaMemset, which
 * call initialise_device_range) marks it written and makes it readable and
 * writable; a kernel's read of a page that is still unwritten faults, and
 * the fault handler (emu_faults.cpp, through device_first_touch) reports
 * it as a read of uninitialised memory.
 */
#include "emu_internal.h"

#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

namespace mt_emu {

namespace {

struct Region {
    unsigned char *map;  /* start of the mapping */
    size_t map_bytes;    /* whole mapping, guard page included */
    unsigned char *user; /* what cudaMalloc returned */
    size_t bytes;        /* what it asked for */
    bool freed;
    /* Full mode: one flag per data page, set once something wrote the page
     * (before that the page is PROT_NONE). Empty otherwise. */
    std::vector<unsigned char> written;
};

constexpr size_t kQuarantineBytes = (size_t)256 << 20;
constexpr size_t kQuarantineCount = 4096;
/* Mappings of up to kCachePages data pages are kept for reuse after
 * quarantine, at most kCachePerSize of each size. */
constexpr size_t kCachePages = 16;
constexpr size_t kCachePerSize = 64;

std::mutex regions_mutex;
std::map<uintptr_t, Region> regions; /* by mapping start, live and quarantined */
std::deque<uintptr_t> quarantine;
size_t quarantined_bytes = 0;
std::vector<unsigned char *> cache[kCachePages + 1]; /* by data pages */

/* Pages start unwritten (PROT_NONE) only where the fault handler can tell a
 * first write and let it through: Linux on x86-64 and arm64. */
bool track_unwritten()
{
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
    return check_full;
#else
    return false;
#endif
}

size_t page_size()
{
    static const size_t page = (size_t)sysconf(_SC_PAGE_SIZE);
    return page;
}

/* The region whose mapping holds a (live or quarantined); null if none.
 * Call with regions_mutex held. */
Region *region_at(uintptr_t a)
{
    auto it = regions.upper_bound(a);
    if (it == regions.begin())
        return nullptr;
    --it;
    return a < it->first + it->second.map_bytes ? &it->second : nullptr;
}

/* A mapping of data_pages + 1 pages, the last one PROT_NONE: from the cache
 * when there is one of that size. Data pages are readable and writable,
 * except in full mode, where they start PROT_NONE (unwritten). */
unsigned char *map_pages(size_t data_pages)
{
    size_t page = page_size();
    int data_prot = track_unwritten() ? PROT_NONE : PROT_READ | PROT_WRITE;
    if (data_pages <= kCachePages) {
        std::lock_guard<std::mutex> lock(regions_mutex);
        auto &free_list = cache[data_pages];
        if (!free_list.empty()) {
            unsigned char *map = free_list.back();
            free_list.pop_back();
            /* Freed mappings are PROT_NONE, what unwritten pages need. */
            if (data_prot != PROT_NONE && mprotect(map, data_pages * page, data_prot) != 0) {
                munmap(map, (data_pages + 1) * page);
                return nullptr;
            }
            return map;
        }
    }
    /* Mapped writable first, so that the kernel refuses a size it could
     * never back (a PROT_NONE mapping of any size would succeed), then the
     * guard page (full mode: every page) made inaccessible. */
    size_t map_bytes = (data_pages + 1) * page;
    void *m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return nullptr;
    unsigned char *map = static_cast<unsigned char *>(m);
    unsigned char *first_none = data_prot == PROT_NONE ? map : map + data_pages * page;
    if (mprotect(first_none, (size_t)(map + map_bytes - first_none), PROT_NONE) != 0) {
        munmap(m, map_bytes);
        return nullptr;
    }
    return map;
}

/* A mapping leaves quarantine: into the cache if small, else unmapped.
 * Call with regions_mutex held. */
void retire(Region &r)
{
    size_t data_pages = r.map_bytes / page_size() - 1;
    if (data_pages <= kCachePages && cache[data_pages].size() < kCachePerSize)
        cache[data_pages].push_back(r.map);
    else
        munmap(r.map, r.map_bytes);
}

} /* namespace */

void *device_alloc(size_t bytes)
{
    size_t page = page_size();
    size_t data_pages = bytes / page + (bytes % page != 0); /* bytes + page - 1 overflows near SIZE_MAX */
    if (data_pages > (SIZE_MAX / page) - 1)
        return nullptr;
    if (track_unwritten())
        install_fault_handler(); /* host code may touch an unwritten page before any launch */
    unsigned char *map = map_pages(data_pages);
    if (!map)
        return nullptr;
    unsigned char *guard = map + data_pages * page;
    unsigned char *user = check_full ? guard - bytes : map;
    try {
        Region r{map, (data_pages + 1) * page, user, bytes, false, {}};
        if (track_unwritten())
            r.written.assign(data_pages, 0);
        std::lock_guard<std::mutex> lock(regions_mutex);
        regions[(uintptr_t)map] = std::move(r);
    } catch (const std::bad_alloc &) {
        munmap(map, (data_pages + 1) * page);
        return nullptr;
    }
    return user;
}

bool device_free(void *ptr)
{
    std::lock_guard<std::mutex> lock(regions_mutex);
    Region *r = region_at((uintptr_t)ptr);
    if (!r || r->freed || r->user != ptr)
        return false;
    r->freed = true;
    r->written.clear();
    /* Give the pages back (quarantine holds address space, not memory;
     * one page is kept, the size of a small op's buffer), then make every
     * access fault. */
    size_t data_bytes = r->map_bytes - page_size();
    if (data_bytes > page_size() || check_full)
        madvise(r->map, data_bytes, MADV_DONTNEED);
    mprotect(r->map, data_bytes, PROT_NONE);
    quarantine.push_back((uintptr_t)r->map);
    quarantined_bytes += r->map_bytes;
    while (quarantined_bytes > kQuarantineBytes || quarantine.size() > kQuarantineCount) {
        auto old = regions.find(quarantine.front());
        quarantine.pop_front();
        quarantined_bytes -= old->second.map_bytes;
        retire(old->second);
        regions.erase(old);
    }
    return true;
}

std::string describe_address(const void *addr)
{
    uintptr_t a = (uintptr_t)addr;
    std::lock_guard<std::mutex> lock(regions_mutex);
    const Region *best = region_at(a);
    if (!best)
        return "not inside any device allocation";
    uintptr_t u = (uintptr_t)best->user, end = u + best->bytes;
    if (best->freed && a >= u && a < end)
        return format("byte %zu inside a %zu-byte allocation freed by cudaFree", (size_t)(a - u), best->bytes);
    const char *freed = best->freed ? " (freed by cudaFree)" : "";
    if (a >= u && a < end)
        return format("byte %zu inside a %zu-byte allocation%s", (size_t)(a - u), best->bytes, freed);
    if (a == end)
        return format("just past the end of a %zu-byte allocation%s", best->bytes, freed);
    if (a > end)
        return format("%zu bytes past the end of a %zu-byte allocation%s", (size_t)(a - end), best->bytes, freed);
    return format("%zu bytes before the start of a %zu-byte allocation%s", (size_t)(u - a), best->bytes, freed);
}

/* ---- reads of memory nothing wrote (full mode) ---------------------------- */

namespace {

/* Marks the unwritten data pages of r that [a, a + bytes) touches as
 * written, and makes them readable and writable. Call with the lock held. */
void mark_written(Region &r, uintptr_t a, size_t bytes)
{
    size_t page = page_size();
    uintptr_t map = (uintptr_t)r.map;
    size_t first = (a - map) / page, last = (a + bytes - 1 - map) / page;
    for (size_t p = first; p <= last && p < r.written.size(); ++p) {
        if (!r.written[p]) {
            mprotect(r.map + p * page, page, PROT_READ | PROT_WRITE);
            r.written[p] = 1;
        }
    }
}

/* The live, checked region that holds all of [a, a + bytes); null if none. */
Region *checked_region(uintptr_t a, size_t bytes)
{
    Region *r = region_at(a);
    if (!r || r->freed || r->written.empty() || bytes > (uintptr_t)r->map + r->map_bytes - a)
        return nullptr;
    return r;
}

} /* namespace */

void initialise_device_range(void *ptr, size_t bytes)
{
    if (!track_unwritten() || bytes == 0)
        return;
    std::lock_guard<std::mutex> lock(regions_mutex);
    if (Region *r = checked_region((uintptr_t)ptr, bytes))
        mark_written(*r, (uintptr_t)ptr, bytes);
}

void copy_device_range(void *dst, const void *src, size_t bytes)
{
    uintptr_t s = (uintptr_t)src;
    std::vector<std::pair<size_t, bool>> pieces; /* (bytes, unwritten) in order */
    if (track_unwritten()) {
        std::lock_guard<std::mutex> lock(regions_mutex);
        Region *r = checked_region(s, bytes);
        size_t page = page_size();
        for (uintptr_t at = s; r && at < s + bytes;) {
            size_t p = (at - (uintptr_t)r->map) / page;
            size_t n = std::min(s + bytes - at, (uintptr_t)r->map + (p + 1) * page - at);
            bool unwritten = p < r->written.size() && !r->written[p];
            if (!pieces.empty() && pieces.back().second == unwritten)
                pieces.back().first += n;
            else
                pieces.push_back({n, unwritten});
            at += n;
        }
    }
    if (pieces.size() <= 1 && (pieces.empty() || !pieces[0].second)) {
        std::memmove(dst, src, bytes);
        return;
    }
    /* An unwritten page holds zeros (a fresh mapping): copy those without
     * touching it, so that it stays unwritten for the checks. */
    unsigned char *d = static_cast<unsigned char *>(dst);
    const unsigned char *from = static_cast<const unsigned char *>(src);
    for (const auto &piece : pieces) {
        if (piece.second)
            std::memset(d, 0, piece.first);
        else
            std::memmove(d, from, piece.first);
        d += piece.first;
        from += piece.first;
    }
}

FirstTouch device_first_touch(const void *addr, bool write, bool in_kernel)
{
    if (!track_unwritten())
        return FirstTouch::NotUnwritten;
    uintptr_t a = (uintptr_t)addr;
    std::lock_guard<std::mutex> lock(regions_mutex);
    Region *r = region_at(a);
    if (!r || r->freed || r->written.empty())
        return FirstTouch::NotUnwritten;
    size_t p = (a - (uintptr_t)r->map) / page_size();
    if (p >= r->written.size())
        return FirstTouch::NotUnwritten; /* the guard page */
    if (r->written[p])
        return FirstTouch::Retry; /* another thread wrote it meanwhile */
    /* Host code that touches device memory directly (not through the
     * runtime's twins) initialises it, as far as the checks know. */
    if (write || !in_kernel) {
        mark_written(*r, a, 1);
        return FirstTouch::Retry;
    }
    return FirstTouch::UninitialisedRead;
}

/* Whether the faulting access was a write: x86-64's page-fault error code
 * (bit 1), arm64's syndrome register (WnR, bit 6). If the kernel does not
 * say, a write, so that the checks never report a read that was not one. */
bool fault_was_write(const void *uctx)
{
#if defined(__linux__) && defined(__x86_64__)
    const ucontext_t *uc = static_cast<const ucontext_t *>(uctx);
    return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#elif defined(__linux__) && defined(__aarch64__)
    const ucontext_t *uc = static_cast<const ucontext_t *>(uctx);
    const unsigned char *p = reinterpret_cast<const unsigned char *>(uc->uc_mcontext.__reserved);
    const unsigned char *end = p + sizeof uc->uc_mcontext.__reserved;
    while (p + sizeof(_aarch64_ctx) <= end) {
        const _aarch64_ctx *head = reinterpret_cast<const _aarch64_ctx *>(p);
        if (head->magic == 0 || head->size == 0)
            break;
        if (head->magic == ESR_MAGIC)
            return (reinterpret_cast<const esr_context *>(p)->esr & (1u << 6)) != 0;
        p += head->size;
    }
    return true;
#else
    (void)uctx;
    return true;
#endif
}

} /* namespace mt_emu */
