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
 */
#include "emu_block.h"

#include <cstring>

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

} /* namespace */

void BlockRunner::start_shared_memory()
{
    slots_.clear();
    static_used_ = 0;
    dynamic_bytes_ = (cfg_->shared_bytes + 15) & ~size_t(15);
    /* Poison, because real shared memory holds whatever the last block
     * left there: a kernel that reads before it writes must not pass. */
    if (settings().poison && cfg_->shared_bytes > 0)
        std::memset(shared_.data(), 0xFF, cfg_->shared_bytes);
}

void *BlockRunner::shared_alloc(const char *file, int line, size_t bytes)
{
    for (const SharedSlot &s : slots_)
        if (s.line == line && (s.file == file || std::strcmp(s.file, file) == 0))
            return shared_.data() + s.offset;
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
        std::memset(shared_.data() + offset, 0xFF, bytes);
    slots_.push_back(SharedSlot{file, line, offset, false, SharedArrayInfo{}});
    static_used_ = offset - dynamic_bytes_ + bytes;
    return shared_.data() + offset;
}

const SharedArrayInfo *BlockRunner::array_info(const char *name, const char *file, int line, int rank,
                                                    const size_t *dims, size_t elem_size, bool dynamic)
{
    if (dynamic) {
        dyn_info_ = SharedArrayInfo{name, file, line, 1, {dims[0], 0, 0, 0}, elem_size, shared_.data()};
        return &dyn_info_;
    }
    for (SharedSlot &s : slots_)
        if (s.line == line && (s.file == file || std::strcmp(s.file, file) == 0)) {
            if (!s.has_info) {
                s.info = SharedArrayInfo{name, file, line, rank, {dims[0], dims[1], dims[2], dims[3]},
                                         elem_size, shared_.data() + s.offset};
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
    throw KernelError(format("%s: shared-memory access %s out of bounds at %s:%d: index %lld is outside "
                             "[0, %zu) in __shared__ %s (declared at %s:%d)",
                             where(*current_).c_str(), access.c_str(), info->file, line, index, extent,
                             declaration(info).c_str(), info->file, info->decl_line));
}

void BlockRunner::access(const SharedArrayInfo *info, const void *elem, bool write, int line)
{
    if (!info)
        return;
    const size_t unit = info->elem_size > 0 && info->elem_size < 4 ? 1 : 4;
    std::vector<ShadowWord> &shadow = unit == 1 ? byte_shadow_ : shadow_;
    if (shadow.empty())
        shadow.resize((kSharedOptinLimit + 16) / unit);
    size_t word = (size_t)(static_cast<const unsigned char *>(elem) - shared_.data()) / unit;
    if (word >= shadow.size())
        return;
    if (async_pending_ && unit == 4)
        check_not_pending(info, elem, write, line);
    ShadowWord &w = shadow[word];
    const EmuThread &me = *current_;
    int u = me.linear;
    Access now{epoch_, u, line, warps_[(size_t)u / 32].meetings, info};
    const Access *hazard = nullptr;
    const char *kind = nullptr;
    if (races(w.write, u)) {
        hazard = &w.write;
        kind = "written";
    } else if (write && races(w.read, u)) {
        hazard = &w.read;
        kind = "read";
    } else if (write && races(w.other_read, u)) {
        hazard = &w.other_read;
        kind = "read";
    }
    if (hazard) {
        const EmuThread &o = threads_[(size_t)hazard->tid];
        throw KernelError(format("shared-memory race in %s %s %s at %s:%d, %s by thread (%u, %u, %u) at "
                                 "line %d with no __syncthreads() between",
                                 where(me).c_str(), write ? "wrote" : "read", element_name(info, elem).c_str(),
                                 info->file, line, kind, o.idx.x, o.idx.y, o.idx.z, hazard->line));
    }
    if (write) {
        w.write = now;
    } else if (w.read.epoch != epoch_) {
        w.read = now;
        w.other_read = Access{};
    } else if (w.read.tid != u) {
        w.other_read = now;
    }
}

/* Full check: an access to a word an asynchronous copy has not written yet
 * (emu_async.cpp marks them). */
void BlockRunner::check_not_pending(const SharedArrayInfo *info, const void *p, bool write, int line)
{
    const size_t w = (size_t)(static_cast<const unsigned char *>(p) - shared_.data()) / 4;
    if (w >= async_words_.size())
        return;
    const PendingWord &pw = async_words_[w];
    if (pw.block != block_serial_ || pw.tid < 0)
        return;
    const EmuThread &o = threads_[(size_t)pw.tid];
    throw KernelError(format("shared-memory race in %s %s %s at %s:%d while the asynchronous copy into it, "
                             "issued by thread (%u, %u, %u) at line %d, has not landed (that thread has not "
                             "waited for it with async_wait)",
                             where(*current_).c_str(), write ? "wrote" : "read", element_name(info, p).c_str(),
                             info->file, line, o.idx.x, o.idx.y, o.idx.z, pw.line));
}

/* Did access a (by another thread, since the last barrier, not ordered
 * by a warp meeting of both) conflict with one by thread u now? */
bool BlockRunner::races(const Access &a, int u) const
{
    if (a.epoch != epoch_ || a.tid < 0 || a.tid == u)
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
                                 off + (long long)bytes, declaration(info).c_str(), array_bytes, info->file,
                                 info->decl_line));
    if ((bytes == 8 || bytes == 16) && (uintptr_t)at % bytes != 0)
        throw KernelError(format("%s: misaligned shared-memory vector %s of %zu bytes at %s (byte %lld) "
                                 "at %s:%d: it must start at a multiple of %zu bytes",
                                 where(*current_).c_str(), what, bytes, element_name(info, at).c_str(), off,
                                 info->file, line, bytes));
    const size_t step = info->elem_size > 0 && info->elem_size < 4 ? info->elem_size : 4;
    for (size_t w = 0; w < bytes; w += step)
        access(info, at + w, write, line);
}

} /* namespace mt_emu */
