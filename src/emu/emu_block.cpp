/*
 * emu_block.cpp: running one block of a launch (see emu_block.h).
 *
 * The block works in rounds:
 *
 *   1. run every runnable thread, in a shuffled order, until it reaches a
 *      barrier or returns from the kernel (emu_fibers.cpp passes the CPU
 *      from thread to thread);
 *   2. when none is runnable, release the barrier the threads wait at:
 *      first warp-level meetings whose lanes have all arrived, else the
 *      block-wide __syncthreads() once every thread of the block is there;
 *   3. if nothing can be released, the threads wait at different barriers
 *      (or some exited while others wait): report the divergence, name the
 *      kernel and unwind the block instead of hanging.
 *
 * Threads count themselves as they arrive (arrive_at_sync, arrive_at_warp,
 * finish), so releasing a barrier looks at the warps that wait, not at
 * every thread; only an error message walks the whole block.
 */
#include "emu_block.h"

#include <algorithm>
#include <cstring>

namespace mt_emu {

void BlockRunner::begin_launch(const LaunchConfig &cfg, void (*body)(void *), void *kctx,
                               const std::atomic<bool> *stop)
{
    cfg_ = &cfg;
    stop_ = stop;
    body_ = body;
    kctx_ = kctx;
    /* The runner outlives the launch: forget the last one's copies, so that
     * blocks of a launch without any pay nothing for them. */
    if (async_used_) {
        for (AsyncQueue &q : async_)
            q = AsyncQueue{};
        async_used_ = false;
    }
    size_t n = (size_t)cfg.block.x * cfg.block.y * cfg.block.z;
    threads_.resize(n);
    warps_.assign((n + 31) / 32, WarpState{});
    for (size_t base = 0; base < n; base += 32) {
        size_t lanes = std::min<size_t>(32, n - base);
        warps_[base / 32].exists = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
    }
    /* Where each thread is in its block: the same for every block, and
     * for every launch with blocks of this shape. */
    const dim3 b = cfg.block;
    bool same_shape = layout_.x == b.x && layout_.y == b.y && layout_.z == b.z;
    layout_ = uint3{b.x, b.y, b.z};
    uint3 idx{0, 0, 0};
    for (size_t i = 0; i < n && !same_shape; ++i) {
        threads_[i].linear = (int)i;
        threads_[i].idx = idx;
        /* x counts fastest, then y, then z */
        if (++idx.x == b.x) {
            idx.x = 0;
            if (++idx.y == b.y) {
                idx.y = 0;
                ++idx.z;
            }
        }
    }
    round_.reserve(n);
    next_round_.reserve(n);
    tls_thread_idx = &current_idx_;
    tls_block.block_dim = uint3{cfg.block.x, cfg.block.y, cfg.block.z};
    tls_block.grid_dim = uint3{cfg.grid.x, cfg.grid.y, cfg.grid.z};
}

bool BlockRunner::run_block(uint3 block_idx)
{
    tls_block.block_idx = block_idx;
    next_epoch();
    error_.clear();
    error_code_ = cudaErrorLaunchFailure;
    aborting_ = false;
    start_shared_memory();
    /* Its low 32 bits mark written words (ShadowWord::written_in): never 0. */
    if ((uint32_t)++block_serial_ == 0)
        ++block_serial_;
    async_pending_ = false;
    if (async_used_) {
        for (AsyncQueue &q : async_) {
            if (q.committed != 0 || !q.pending.empty())
                q = AsyncQueue{};
        }
    }
    rng_ = settings().seed * 0x9E3779B97F4A7C15ull +
           ((uint64_t)block_idx.x << 42 ^ (uint64_t)block_idx.y << 21 ^ block_idx.z) + 1;

    size_t n = threads_.size();
    next_round_.resize(n);
    for (size_t i = 0; i < n; ++i) {
        EmuThread &t = threads_[i];
        t.state = State::Runnable;
        t.started = false;
        t.cont = nullptr;
        next_round_[i] = (int)i;
    }
    for (WarpState &w : warps_) {
        w.waiting = w.wanted = w.done = 0;
        w.pending = false;
    }
    pending_warps_.clear();
    at_block_ = done_ = 0;
    sync_mismatch_ = false;

    for (;;) {
        try {
            run_round();
        } catch (const std::exception &e) { /* no fiber for a thread (out of memory) */
            if (error_.empty())
                error_ = format("kernel '%s' could not run: %s", cfg_->name, e.what());
        }
        /* Everyone waits at __syncthreads() or has returned, and no race
         * was found: now a read of shared memory nothing wrote is the error. */
        if (error_.empty() && at_block_ + done_ == n && report_uninitialised_read()) {
            abort_block();
            return false;
        }
        if (!error_.empty() || !release_barrier()) {
            abort_block();
            return false;
        }
        if (done_ == n)
            return true;
    }
}

void BlockRunner::run_round()
{
    round_.swap(next_round_);
    next_round_.clear();
    /* A new order every round: a missing barrier shows as a wrong answer. */
    if (settings().shuffle)
        for (size_t i = round_.size(); i > 1; --i)
            std::swap(round_[i - 1], round_[below(i)]);
    round_pos_ = 0;
    if (EmuThread *first = next_thread())
        enter(*first, &scheduler_);
    /* Back when the round is over. */
}

/* Called when no thread is runnable. Returns false after recording an
 * error when the waiting threads can never all meet. */
bool BlockRunner::release_barrier()
{
    if (!pending_warps_.empty()) {
        bool released = false;
        if (!release_warps(released))
            return false;
        if (released)
            return true;
    }
    size_t n = threads_.size();
    if (at_block_ == 0)
        return true; /* everybody has returned: the block is finished */
    if (!next_round_.empty())
        return true; /* threads that spin on an mbarrier run on; they may still reach the barrier */
    if (at_block_ < n || sync_mismatch_)
        return report_divergence();
    next_epoch();
    at_block_ = 0;
    next_round_.resize(n);
    for (size_t i = 0; i < n; ++i) {
        threads_[i].state = State::Runnable;
        next_round_[i] = (int)i;
    }
    return true;
}

/* Releases every warp whose waiting lanes are all the lanes their masks
 * name; false (an error) when a lane a mask names has exited. Warps go in
 * index order, so the error names the same warp whatever the arrivals. */
bool BlockRunner::release_warps(bool &released)
{
    std::sort(pending_warps_.begin(), pending_warps_.end());
    size_t kept = 0;
    for (int w : pending_warps_) {
        WarpState &warp = warps_[(size_t)w];
        unsigned wanted = warp.wanted & warp.exists;
        size_t base = (size_t)w * 32;
        if (wanted & warp.done) {
            int lane = __builtin_ctz(wanted & warp.done);
            int waiter = __builtin_ctz(warp.waiting);
            const EmuThread &t = threads_[base + (size_t)waiter];
            error_ = format("warp-level divergence in %s: lane %d of warp %d has exited, but lane "
                            "%d waits for it at a warp shuffle/sync with mask 0x%08x",
                            where(t).c_str(), lane, w, waiter, t.warp_mask);
            return false;
        }
        if ((wanted & warp.waiting) != wanted) {
            pending_warps_[kept++] = w;
            continue;
        }
        ++warp.meetings;
        exchange_values(base, warp.waiting);
        for (unsigned bits = warp.waiting; bits; bits &= bits - 1) {
            size_t i = base + (size_t)__builtin_ctz(bits);
            threads_[i].state = State::Runnable;
            next_round_.push_back((int)i);
        }
        warp.waiting = warp.wanted = 0;
        warp.pending = false;
        released = true;
    }
    pending_warps_.resize(kept);
    return true;
}

/* The exchange of a released warp meeting, done once for all its lanes:
 * each shuffling lane receives its source lane's value, each balloting lane
 * the bits of the lanes of its mask whose predicate held. Every value is
 * read before any is overwritten, so a lane may race ahead to its next
 * shuffle without a second meeting. */
void BlockRunner::exchange_values(size_t base, unsigned waiting)
{
    unsigned char received[32][16];
    size_t n = threads_.size();
    for (unsigned bits = waiting; bits; bits &= bits - 1) {
        int lane = __builtin_ctz(bits);
        EmuThread &t = threads_[base + (size_t)lane];
        if (t.meeting == Meeting::Shuffle) {
            /* no source lane (or one past the block's end): its own value */
            size_t src = t.src_lane >= 0 ? base + (size_t)t.src_lane : n;
            std::memcpy(received[lane], src < n ? threads_[src].exchange : t.exchange, t.bytes);
        } else if (t.meeting == Meeting::Ballot) {
            unsigned ballot = 0;
            for (unsigned m = t.warp_mask; m; m &= m - 1) {
                size_t k = base + (size_t)__builtin_ctz(m);
                int predicate;
                if (k < n) {
                    std::memcpy(&predicate, threads_[k].exchange, sizeof predicate);
                    if (predicate)
                        ballot |= m & -m;
                }
            }
            std::memcpy(received[lane], &ballot, sizeof ballot);
        }
    }
    for (unsigned bits = waiting; bits; bits &= bits - 1) {
        int lane = __builtin_ctz(bits);
        EmuThread &t = threads_[base + (size_t)lane];
        if (t.meeting == Meeting::Shuffle)
            std::memcpy(t.exchange, received[lane], t.bytes);
        else if (t.meeting == Meeting::Ballot)
            std::memcpy(t.exchange, received[lane], sizeof(unsigned));
    }
}

/* The threads can never all meet at a __syncthreads(): say why, naming
 * threads (the only walk over the whole block, on the error path). */
bool BlockRunner::report_divergence()
{
    const EmuThread *first_done = nullptr, *first_block = nullptr, *first_warp = nullptr;
    for (const EmuThread &t : threads_) {
        if (t.state == State::AtBlockBarrier && !first_block)
            first_block = &t;
        else if (t.state == State::Done && !first_done)
            first_done = &t;
        else if (t.state == State::AtWarpBarrier && !first_warp)
            first_warp = &t;
    }
    size_t n = threads_.size();
    if (at_block_ == n) {
        const EmuThread &a = threads_[0];
        for (const EmuThread &t : threads_)
            if (t.sync_line != a.sync_line ||
                (t.sync_file != a.sync_file && std::strcmp(t.sync_file, a.sync_file) != 0)) {
                const uint3 &bi = tls_block.block_idx;
                error_ = format("barrier divergence in kernel '%s' block (%u, %u, %u): thread (%u, %u, %u) "
                                "waits at __syncthreads() at %s:%d, thread (%u, %u, %u) at %s:%d; every "
                                "thread of a block must reach the same __syncthreads()",
                                cfg_->name, bi.x, bi.y, bi.z, a.idx.x, a.idx.y, a.idx.z, a.sync_file,
                                a.sync_line, t.idx.x, t.idx.y, t.idx.z, t.sync_file, t.sync_line);
                return false;
            }
    }
    if (first_done && !first_warp) {
        error_ = format("barrier divergence in %s: %zu of %zu threads wait at __syncthreads(), but "
                        "%zu threads of the block have exited (e.g. thread (%u, %u, %u)); every "
                        "thread of a block must reach each __syncthreads()",
                        where(*first_block).c_str(), at_block_, n, done_, first_done->idx.x,
                        first_done->idx.y, first_done->idx.z);
    } else {
        const EmuThread *w = first_warp ? first_warp : first_block;
        error_ = format("barrier divergence in %s: %zu of %zu threads wait at __syncthreads() "
                        "while thread (%u, %u, %u) waits at a warp shuffle/sync; the threads can "
                        "never all meet",
                        where(*first_block).c_str(), at_block_, n, w->idx.x, w->idx.y, w->idx.z);
    }
    return false;
}

/* Resume every suspended thread with aborting_ set: each one throws
 * KernelAbort out of its barrier and unwinds its own stack. Threads that
 * never started just never run. */
void BlockRunner::abort_block()
{
    aborting_ = true;
    for (EmuThread &t : threads_)
        if (t.started && t.state != State::Done)
            enter(t, &scheduler_);
    aborting_ = false;
}

std::string BlockRunner::where(const EmuThread &t) const
{
    const uint3 &bi = tls_block.block_idx;
    return format("kernel '%s', block (%u, %u, %u), thread (%u, %u, %u)", cfg_->name, bi.x, bi.y, bi.z,
                  t.idx.x, t.idx.y, t.idx.z);
}

uint64_t BlockRunner::next_random()
{
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_;
}

/* A uniform pick in [0, n) without a division (Lemire's method). */
size_t BlockRunner::below(size_t n) { return (size_t)(((unsigned __int128)next_random() * n) >> 64); }

} /* namespace mt_emu */
