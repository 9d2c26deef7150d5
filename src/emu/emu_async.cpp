/*
 * emu_async.cpp: asynchronous copies from global into shared memory, the
 * emulator's cp.async (src/async_copy.h is what kernels call).
 *
 * On a GPU a thread issues a copy, later commits the copies it issued as a
 * group, and later still waits until all but its newest `prior` groups have
 * landed; until then the bytes may or may not be in shared memory. Here each
 * thread keeps a queue of its copies, and the bytes are written when the
 * thread waits for their group: the latest moment a GPU allows. A kernel that
 * forgets a wait, or waits for the wrong group, reads the poison or the last
 * stage's values. With MINITENSOR_EMU_CHECK=full the words a copy will
 * write are marked as in flight from its issue to its landing, and any
 * access to them meanwhile (by the issuing thread too) is reported as a race.
 * Copies a thread never waits for are dropped when its block ends; only a
 * read of their words would be a bug, and that read is reported.
 */
#include "emu_block.h"

#include <cstring>

namespace mt_emu {

void BlockRunner::async_copy(const SharedArrayInfo *info, void *dst, const void *src, size_t bytes,
                             size_t src_bytes, int line)
{
    if (bytes != 4 && bytes != 8 && bytes != 16)
        throw KernelError(format("%s: asynchronous copy of %zu bytes at line %d: cp.async copies 4, 8 or "
                                 "16 bytes",
                                 where(*current_).c_str(), bytes, line));
    if (src_bytes > bytes)
        throw KernelError(format("%s: asynchronous copy at line %d reads %zu bytes of a %zu-byte copy; it "
                                 "can read at most all of them",
                                 where(*current_).c_str(), line, src_bytes, bytes));
    if ((uintptr_t)dst % bytes != 0 || (uintptr_t)src % bytes != 0)
        throw KernelError(format("%s: misaligned asynchronous copy of %zu bytes at line %d (shared %p, "
                                 "global %p): both addresses must be multiples of %zu",
                                 where(*current_).c_str(), bytes, line, dst, src, bytes));
    if (check_full && info) {
        vector_access(info, dst, bytes, true, line);
        mark_pending(dst, bytes, current_->linear, line);
    }
    /* The runner outlives a launch: a later one may have more threads. */
    async_used_ = true;
    if (async_.size() < threads_.size())
        async_.resize(threads_.size());
    AsyncQueue &q = async_[(size_t)current_->linear];
    q.pending.push_back(AsyncCopy{dst, src, info, q.committed, line, (unsigned char)bytes,
                                  (unsigned char)src_bytes});
}

void BlockRunner::async_commit()
{
    /* A commit before any copy opens an empty group, which counts too. */
    async_used_ = true;
    if (async_.size() < threads_.size())
        async_.resize(threads_.size());
    ++async_[(size_t)current_->linear].committed;
}

void BlockRunner::async_wait(int prior)
{
    if (!async_used_ || async_.size() < threads_.size())
        return; /* nothing issued in this launch yet */
    AsyncQueue &q = async_[(size_t)current_->linear];
    /* Groups 0 .. committed - prior - 1 must have landed. */
    const long long newest_done = (long long)q.committed - (prior > 0 ? prior : 0);
    size_t kept = 0;
    for (size_t i = 0; i < q.pending.size(); ++i) {
        const AsyncCopy &c = q.pending[i];
        if ((long long)c.group < newest_done) {
            unsigned char *to = static_cast<unsigned char *>(c.dst);
            if (c.src_bytes > 0)
                std::memcpy(to, c.src, c.src_bytes);
            std::memset(to + c.src_bytes, 0, (size_t)(c.bytes - c.src_bytes));
            if (check_full && c.info) {
                mark_pending(to, c.bytes, -1, 0);
                vector_access(c.info, to, c.bytes, true, c.line);
            } else if (check_full) {
                mark_initialised(to, c.bytes); /* an unchecked copy: no race check */
            }
        } else {
            q.pending[kept++] = c;
        }
    }
    q.pending.resize(kept);
}

/* Full check: the words [p, p + bytes) are in flight from thread tid's copy
 * issued at `line` (tid -1: landed). */
void BlockRunner::mark_pending(const void *p, size_t bytes, int tid, int line)
{
    if (async_words_.empty())
        async_words_.resize((kSharedOptinLimit + 16) / 4);
    const size_t first = (size_t)(static_cast<const unsigned char *>(p) - shared_) / 4;
    for (size_t w = first; w < first + (bytes + 3) / 4 && w < async_words_.size(); ++w)
        async_words_[w] = PendingWord{block_serial_, tid, line};
    if (tid >= 0)
        async_pending_ = true;
}

void async_copy(const SharedArrayInfo *info, void *dst, const void *src, size_t bytes, size_t src_bytes, int line)
{
    running().async_copy(info, dst, src, bytes, src_bytes, line);
}

void async_commit(void)
{
    running().async_commit();
}

void async_wait(int prior)
{
    running().async_wait(prior);
}

} /* namespace mt_emu */
