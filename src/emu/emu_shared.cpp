/*
 * emu_shared.cpp: shared memory of the running block, and the checks of
 * MINITENSOR_EMU_CHECK=full on it (see emu.h and docs/emulator.md).
 *
 * Static __shared__ declarations are keyed by their source line, so every
 * thread of the block gets the same array; shared memory is poisoned (0xFF
 * bytes) when a block starts. In full mode each access of an element also
 * goes through access(), which keeps a shadow of the last accesses to every
 * 4-byte word and reports a race between two threads that no barrier (or
 * warp meeting) orders. Elements narrower than a word (a bool tile, a bool
 * reduction's scratch) are shadowed byte by byte instead: on the GPU, threads
 * that write neighbouring bytes of one word do not race.
 *
 * Accesses that do not go through a checked view (a pointer kept from
 * &tile[i], a __shared__ struct such as BlockScratch) are seen by the MMU
 * (x86-64 Linux): in full mode all blocks' shared memory lies in one arena,
 * a memfd mapped twice. Views use the readable mapping (the alias); any
 * other address is in the inaccessible one (raw; emu.h's to_raw), so its
 * access faults, and the fault handler (emu_faults.cpp) records it here
 * (raw_shared_fault) before it opens the page for one instruction.
 *
 * The shadow also knows which words a thread of the running block has
 * written (written_in), so a read of a word nothing wrote is reported,
 * as compute-sanitizer's initcheck reports one of global memory.
 */
#include "emu_block.h"

#include <cstring>
#include <mutex>

#include <sys/mman.h>
#include <unistd.h>

namespace mt_emu {

namespace {

/* "tile[2][5]": the element at p of the array. */
std::string element_name(const SharedArrayInfo *info, const void *p)
{
    size_t off = (size_t)(static_cast<const unsigned char *>(p) - info->base) / info->elem_size;
    std::string out = info->name;
    size_t stride = 1;
    for (int d = 1; d < info->rank; ++d)
        stride *= info->dims[d];
    for (int d = 0; d < info->rank; ++d) {
        out += format("[%zu]", off / stride);
        off %= stride;
        if (d + 1 < info->rank)
            stride /= info->dims[d + 1];
    }
    return out;
}

std::string declaration(const SharedArrayInfo *info)
{
    std::string out = info->name;
    for (int d = 0; d < info->rank; ++d)
        out += format("[%zu]", info->dims[d]);
    return out;
}

/* ---- the arena: every runner's shared memory, mapped twice (full mode) ---- */

/* Runners (OS threads running blocks) at most with an arena slot; more fall
 * back to memory of their own, whose raw accesses are not seen. */
constexpr size_t kArenaSlots = 128;
constexpr size_t kArenaSlotBytes = (kSharedOptinLimit + 16 + 4095) & ~(size_t)4095;

std::mutex arena_mutex;
bool arena_tried = false;
bool arena_taken[kArenaSlots];

/* Raw accesses fault and are single-stepped (the trap flag): x86-64 Linux. */
bool trap_raw_accesses()
{
#if defined(__linux__) && defined(__x86_64__)
    return check_full;
#else
    return false;
#endif
}

/* Maps the arena once; false if the system refuses (then no raw checks). */
bool map_arena()
{
    if (arena_tried)
        return shared_arena_span != 0;
    arena_tried = true;
    const size_t total = kArenaSlots * kArenaSlotBytes;
    int fd = memfd_create("mt_emu_shared", MFD_CLOEXEC);
    if (fd < 0)
        return false;
    void *alias = MAP_FAILED, *raw = MAP_FAILED;
    if (ftruncate(fd, (off_t)total) == 0) {
        alias = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        raw = mmap(nullptr, total, PROT_NONE, MAP_SHARED, fd, 0);
    }
    close(fd);
    if (alias == MAP_FAILED || raw == MAP_FAILED) {
        if (alias != MAP_FAILED)
            munmap(alias, total);
        if (raw != MAP_FAILED)
            munmap(raw, total);
        return false;
    }
    shared_alias_lo = (uintptr_t)alias;
    shared_raw_lo = (uintptr_t)raw;
    shared_arena_span = total;
    return true;
}

} /* namespace */

uintptr_t shared_alias_lo = 0, shared_raw_lo = 0, shared_arena_span = 0;

void BlockRunner::acquire_shared_memory()
{
    if (trap_raw_accesses()) {
        std::lock_guard<std::mutex> lock(arena_mutex);
        for (size_t i = 0; i < kArenaSlots && map_arena(); ++i)
            if (!arena_taken[i]) {
                arena_taken[i] = true;
                arena_slot_ = (int)i;
                shared_ = reinterpret_cast<unsigned char *>(shared_alias_lo + i * kArenaSlotBytes);
                raw_ = reinterpret_cast<unsigned char *>(shared_raw_lo + i * kArenaSlotBytes);
                return;
            }
    }
    own_shared_.resize(kSharedOptinLimit + 16);
    shared_ = raw_ = own_shared_.data();
}

void BlockRunner::release_shared_memory()
{
    if (arena_slot_ >= 0) {
        std::lock_guard<std::mutex> lock(arena_mutex);
        arena_taken[arena_slot_] = false;
    }
}

void BlockRunner::start_shared_memory()
{
    uninit_ = UninitRead{};
    members_.clear();
    raw_pcs_.clear();
    slots_.clear();
    static_used_ = 0;
    dynamic_bytes_ = (cfg_->shared_bytes + 15) & ~size_t(15);
    /* Poison, because real shared memory holds whatever the last block
     * left there: a kernel that reads before it writes must not pass. */
    if (settings().poison && cfg_->shared_bytes > 0)
        std::memset(shared_, 0xFF, cfg_->shared_bytes);
}

void *BlockRunner::shared_alloc(const char *name, const char *type, const char *file, int line, size_t bytes)
{
    for (const SharedSlot &s : slots_)
        if (s.line == line && (s.file == file || std::strcmp(s.file, file) == 0))
            return shared_ + s.offset;
    size_t offset = (static_used_ + dynamic_bytes_ + 15) & ~size_t(15);
    size_t static_bytes = offset - dynamic_bytes_ + bytes;
    if (static_bytes > kStaticSharedLimit)
        throw KernelError(format("kernel '%s' declares %zu bytes of __shared__ arrays; a block may "
                                 "have at most %zu (%s:%d)",
                                 cfg_->name, static_bytes, kStaticSharedLimit, file, line));
    if (offset + bytes > kSharedOptinLimit)
        throw KernelError(format("kernel '%s' uses %zu bytes of shared memory in all; a block may "
                                 "have at most %zu", cfg_->name, offset + bytes, kSharedOptinLimit));
    if (settings().poison)
        std::memset(shared_ + offset, 0xFF, bytes);
    slots_.push_back(SharedSlot{name, type, file, line, offset, bytes, false, SharedArrayInfo{}});
    static_used_ = offset - dynamic_bytes_ + bytes;
    return shared_ + offset;
}

const SharedArrayInfo *BlockRunner::array_info(const char *name, const char *file, int line, int rank,
                                                    const size_t *dims, size_t elem_size, bool dynamic)
{
    if (dynamic) {
        dyn_info_ = SharedArrayInfo{name, file, line, 1, {dims[0], 0, 0, 0}, elem_size, shared_};
        return &dyn_info_;
    }
    for (SharedSlot &s : slots_)
        if (s.line == line && (s.file == file || std::strcmp(s.file, file) == 0)) {
            if (!s.has_info) {
                s.info = SharedArrayInfo{name, file, line, rank, {dims[0], dims[1], dims[2], dims[3]},
                                         elem_size, shared_ + s.offset};
                s.has_info = true;
            }
            return &s.info;
        }
    throw KernelError(format("emulator: no __shared__ array declared at %s:%d", file, line));
}

void BlockRunner::index_error(const SharedArrayInfo *info, const void *sub, int sub_rank, long long index,
                              size_t extent, int line)
{
    /* The indices before the bad one, from where the sub-array starts. */
    int depth = info->rank - sub_rank;
    size_t off = (size_t)(static_cast<const unsigned char *>(sub) - info->base) / info->elem_size;
    size_t stride = 1;
    for (int d = 1; d < info->rank; ++d)
        stride *= info->dims[d];
    std::string access = info->name;
    for (int d = 0; d < depth; ++d) {
        access += format("[%zu]", off / stride);
        off %= stride;
        stride /= info->dims[d + 1];
    }
    access += format("[%lld]", index);
    throw KernelError(format("%s: shared-memory access %s out of bounds at %s: index %lld is outside "
                             "[0, %zu) in __shared__ %s (declared at %s:%d)",
                             where(*current_).c_str(), access.c_str(), access_place(info, line, nullptr).c_str(),
                             index, extent,
                             declaration(info).c_str(), info->file, info->decl_line));
}

std::string BlockRunner::access_place(const SharedArrayInfo *info, int line, const void *pc)
{
    if (line > 0)
        return format("%s:%d", info->file, line);
    std::string at = source_line(pc);
    return at.empty() ? "an unknown line" : at;
}

void BlockRunner::access(const SharedArrayInfo *info, const void *elem, bool write, int line, const void *pc)
{
    if (!info)
        return;
    const size_t unit = info->elem_size > 0 && info->elem_size < 4 ? 1 : 4;
    if (__builtin_expect(info->elem_size <= 4, 1)) { /* the common case: one word or byte */
        Hazard h = record(elem, unit, write, line, pc, info->file);
        if (h.kind)
            throw KernelError(hazard_message(h, elem, write, access_place(info, line, pc)));
        return;
    }
    /* Each word of an element wider than one (a double), so that a vector
     * access of the same bytes meets it. */
    for (size_t b = 0; b < info->elem_size; b += unit) {
        const unsigned char *at = static_cast<const unsigned char *>(elem) + b;
        Hazard h = record(at, unit, write, line, pc, info->file);
        if (h.kind)
            throw KernelError(hazard_message(h, at, write, access_place(info, line, pc)));
    }
}

void BlockRunner::words_access(const SharedArrayInfo *info, const void *p, size_t bytes, bool write, int line,
                               const void *pc)
{
    if (!info)
        return;
    const size_t step = info->elem_size > 0 && info->elem_size < 4 ? 1 : 4;
    const unsigned char *at = static_cast<const unsigned char *>(p);
    for (size_t b = 0; b < bytes; b += step) {
        Hazard h = record(at + b, step, write, line, pc, info->file);
        if (h.kind)
            throw KernelError(hazard_message(h, at + b, write, access_place(info, line, pc)));
    }
}

const SharedArrayInfo *BlockRunner::member_info(const void *p, const char *member, size_t n, size_t elem_size)
{
    const size_t off = (size_t)(static_cast<const unsigned char *>(p) - shared_);
    for (const MemberInfo &m : members_)
        if (m.offset == off)
            return &m.info;
    for (const SharedSlot &s : slots_)
        if (off >= s.offset && off < s.offset + s.bytes) {
            members_.push_back(MemberInfo{off, format("%s.%s", s.name, member), SharedArrayInfo{}});
            MemberInfo &m = members_.back();
            m.info = SharedArrayInfo{m.name.c_str(), s.file, s.line, 1, {n, 0, 0, 0}, elem_size,
                                     shared_ + off};
            return &m.info;
        }
    throw KernelError(format("emulator: no __shared__ variable holds the member array %s", member));
}

/* Records one access (by the current thread, to the word or byte at p) in
 * the shadow; returns what it ran into. The message is made by the caller:
 * a raw access is recorded inside the fault handler. */
inline Hazard BlockRunner::record(const void *p, size_t unit, bool write, int line, const void *pc, const char *file)
{
    Hazard h;
    const size_t off = (size_t)(static_cast<const unsigned char *>(p) - shared_);
    if (off >= kSharedOptinLimit + 16)
        return h;
    std::vector<ShadowWord> &shadow = unit == 1 ? byte_shadow_ : shadow_;
    if (shadow.empty())
        shadow.resize((kSharedOptinLimit + 16) / unit);
    const size_t word = unit == 1 ? off : off / 4;
    if (async_pending_ && off / 4 < async_words_.size()) {
        const PendingWord &pw = async_words_[off / 4];
        if (pw.block == block_serial_ && pw.tid >= 0) {
            h.kind = "in flight";
            h.other.tid = pw.tid;
            h.other.line = pw.line;
            return h;
        }
    }
    ShadowWord &w = shadow[word];
    const int u = current_->linear;
    if (races(w.write, u)) {
        h.kind = "written";
        h.other = w.write;
    } else if (write && races(w.read, u)) {
        h.kind = "read";
        h.other = w.read;
    } else if (write && races(w.other_read, u)) {
        h.kind = "read";
        h.other = w.other_read;
    }
    if (h.kind)
        return h;
    /* A line, or where addr2line will find it (rarely needed: kept once per
     * run of accesses from one place). */
    int32_t at = line;
    if (line <= 0) {
        if (raw_pcs_.empty() || raw_pcs_.back() != pc)
            raw_pcs_.push_back(pc);
        at = -(int32_t)raw_pcs_.size();
    }
    const Access now{(uint32_t)epoch_, warps_[(size_t)u / 32].meetings, at, (int16_t)u};
    /* A read of a word nothing wrote: reported when the threads next all
     * wait at a barrier (or have returned), unless a race is found first,
     * which says more (a missing barrier reads before the write, too). */
    if (!write && w.written_in != (uint32_t)block_serial_ && uninit_.tid < 0) {
        uninit_ = UninitRead{u, line, pc, p, file};
    }
    if (write) {
        w.write = now;
        w.written_in = (uint32_t)block_serial_;
    } else if (w.read.epoch != (uint32_t)epoch_) {
        w.read = now;
        w.other_read = Access{};
    } else if (w.read.tid != u) {
        w.other_read = now;
    }
    return h;
}

/* "tile[2][5]" for an element of an array; for a struct variable, its byte. */
std::string BlockRunner::describe_shared(const void *p) const
{
    const size_t off = (size_t)(static_cast<const unsigned char *>(p) - shared_);
    for (const SharedSlot &s : slots_)
        if (off >= s.offset && off < s.offset + s.bytes) {
            if (s.has_info)
                return element_name(&s.info, p);
            for (const MemberInfo &m : members_)
                if (off >= m.offset && off < m.offset + m.info.dims[0] * m.info.elem_size)
                    return element_name(&m.info, p);
            return format("byte %zu of __shared__ %s %s", off - s.offset, s.type ? s.type : "", s.name);
        }
    if (off < cfg_->shared_bytes && dyn_info_.name)
        return element_name(&dyn_info_, p);
    return format("byte %zu of the block's shared memory", off);
}

/* The shadow's unit for a raw access at p: that of a checked access to the
 * same array (bytes for elements narrower than a word); bytes for a struct
 * variable, whose members may be narrow (BlockScratch<bool>). */
size_t BlockRunner::unit_at(const void *p) const
{
    const size_t off = (size_t)(static_cast<const unsigned char *>(p) - shared_);
    for (const SharedSlot &s : slots_)
        if (off >= s.offset && off < s.offset + s.bytes)
            return s.has_info && s.info.elem_size >= 4 ? 4 : 1;
    if (off < cfg_->shared_bytes && dyn_info_.name)
        return dyn_info_.elem_size >= 4 ? 4 : 1;
    return 4;
}

/* The first read of a word nothing wrote, once the block's threads have
 * all stopped at a barrier or returned without a race. */
bool BlockRunner::report_uninitialised_read()
{
    if (uninit_.tid < 0)
        return false;
    const UninitRead r = uninit_;
    uninit_ = UninitRead{};
    const std::string at = r.line > 0 ? format("%s:%d", r.file, r.line) : source_line(r.pc);
    error_ = format("read of uninitialised shared memory in %s: read %s at %s, which no thread of the block has "
                    "written before",
                    where(threads_[(size_t)r.tid]).c_str(), describe_shared(r.p).c_str(),
                    at.empty() ? "an unknown line" : at.c_str());
    return true;
}

std::string BlockRunner::hazard_message(const Hazard &h, const void *p, bool write, const std::string &at) const
{
    const EmuThread &me = *current_;
    const std::string what = describe_shared(p);
    const EmuThread &o = threads_[(size_t)h.other.tid];
    if (std::strcmp(h.kind, "in flight") == 0)
        return format("shared-memory race in %s %s %s at %s while the asynchronous copy into it, issued by "
                      "thread (%u, %u, %u) at line %d, has not landed (that thread has not waited for it with "
                      "async_wait)",
                      where(me).c_str(), write ? "wrote" : "read", what.c_str(), at.c_str(), o.idx.x, o.idx.y,
                      o.idx.z, h.other.line);
    std::string other_at = h.other.line > 0 ? format("line %d", h.other.line) : source_line(raw_pc(h.other.line));
    return format("shared-memory race in %s %s %s at %s, %s by thread (%u, %u, %u) at %s with no "
                  "__syncthreads() between",
                  where(me).c_str(), write ? "wrote" : "read", what.c_str(), at.c_str(), h.kind, o.idx.x, o.idx.y,
                  o.idx.z, other_at.empty() ? "an unknown line" : other_at.c_str());
}

/* In the fault handler (full mode, x86-64): a raw access to this block's
 * shared memory. Records it; a hazard is kept for fault_exit. */
bool BlockRunner::raw_shared_fault(void *addr, bool write, void *pc, bool &hazard)
{
    const uintptr_t a = (uintptr_t)addr;
    if (raw_ == shared_ || a - (uintptr_t)raw_ >= kArenaSlotBytes || !current_)
        return false;
    const unsigned char *alias = shared_ + (a - (uintptr_t)raw_);
    raw_hazard_ = record(alias, unit_at(alias), write, 0, pc, nullptr);
    raw_addr_ = alias;
    raw_write_ = write;
    hazard = raw_hazard_.kind != nullptr;
    return true;
}

void BlockRunner::emulated_read(const void *p, const void *pc)
{
    /* A raw access outside the block's shared memory faults for good; so
     * does this read, past what the block declared and asked for. */
    const size_t off = (size_t)(static_cast<const unsigned char *>(p) - shared_);
    if (off >= dynamic_bytes_ + static_used_) {
        const std::string at = source_line(pc);
        throw KernelError(format("%s: shared-memory read out of bounds at %s: byte %zu of the block's shared "
                                 "memory, which has %zu bytes (read by the emulator's twin of a tensor-core "
                                 "instruction for the thread)",
                                 where(*current_).c_str(), at.empty() ? "an unknown line" : at.c_str(), off,
                                 dynamic_bytes_ + static_used_));
    }
    const Hazard h = record(p, unit_at(p), false, 0, pc, nullptr);
    if (h.kind)
        throw KernelError(hazard_message(h, p, false, access_place(nullptr, 0, pc)));
}

void BlockRunner::mark_initialised(const void *p, size_t bytes)
{
    const size_t off = (size_t)(static_cast<const unsigned char *>(p) - shared_);
    if (off >= kSharedOptinLimit + 16)
        return;
    for (size_t unit : {(size_t)1, (size_t)4}) {
        std::vector<ShadowWord> &shadow = unit == 1 ? byte_shadow_ : shadow_;
        if (shadow.empty())
            shadow.resize((kSharedOptinLimit + 16) / unit);
        for (size_t w = off / unit; w < (off + bytes + unit - 1) / unit && w < shadow.size(); ++w)
            shadow[w].written_in = (uint32_t)block_serial_;
    }
}

/* A new epoch (a block starts, a barrier is released). The shadow keeps
 * its low 32 bits: when they wrap, the shadow is cleared, so that no old
 * access looks like one of the new epoch. */
void BlockRunner::next_epoch()
{
    if ((uint32_t)++epoch_ == 0) {
        for (std::vector<ShadowWord> *s : {&shadow_, &byte_shadow_})
            if (!s->empty())
                s->assign(s->size(), ShadowWord{});
        ++epoch_;
    }
}

const void *BlockRunner::raw_pc(int32_t line) const
{
    const size_t i = (size_t)(-(int64_t)line - 1);
    return line < 0 && i < raw_pcs_.size() ? raw_pcs_[i] : nullptr;
}

/* Did access a (by another thread, since the last barrier, not ordered
 * by a warp meeting of both) conflict with one by thread u now? */
bool BlockRunner::races(const Access &a, int u) const
{
    if (a.epoch != (uint32_t)epoch_ || a.tid < 0 || a.tid == u)
        return false;
    if (a.tid / 32 == u / 32 && warps_[(size_t)u / 32].meetings != a.warp_epoch)
        return false;
    return true;
}

/* The whole vector inside the array, aligned to its size, then each word as
 * a scalar access (bounds already checked, so only the race check). */
void BlockRunner::vector_access(const SharedArrayInfo *info, const void *p, size_t bytes, bool write, int line)
{
    if (!info)
        return;
    size_t array_bytes = info->elem_size;
    for (int d = 0; d < info->rank; ++d)
        array_bytes *= info->dims[d];
    const unsigned char *at = static_cast<const unsigned char *>(p);
    long long off = (long long)(at - info->base);
    const char *what = write ? "store" : "load";
    if (off < 0 || (size_t)off + bytes > array_bytes)
        throw KernelError(format("%s: shared-memory vector %s of %zu bytes out of bounds at %s:%d: bytes "
                                 "[%lld, %lld) of __shared__ %s, which has %zu bytes (declared at %s:%d)",
                                 where(*current_).c_str(), what, bytes, info->file, line, off,
                                 off + (long long)bytes, declaration(info).c_str(), array_bytes,
                                 info->file, info->decl_line));
    if ((bytes == 8 || bytes == 16) && (uintptr_t)at % bytes != 0)
        throw KernelError(format("%s: misaligned shared-memory vector %s of %zu bytes at %s (byte %lld) "
                                 "at %s:%d: it must start at a multiple of %zu bytes",
                                 where(*current_).c_str(), what, bytes, element_name(info, at).c_str(), off,
                                 info->file, line, bytes));
    words_access(info, at, bytes, write, line);
}

} /* namespace mt_emu */
