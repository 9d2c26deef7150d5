/*
 * emu_fibers.cpp: the workers that CUDA threads run on, and how the CPU
 * passes from one CUDA thread to the next (see emu_block.h).
 *
 * A round of a block is a list of threads in a shuffled order. Whoever
 * holds the CPU walks that list: a worker whose thread returned runs the
 * next thread itself if it has not started yet (same stack, no switch), and
 * a thread that stops at a barrier switches straight to the next one. Only
 * when the list is used up does the CPU go back to run_block, once a round.
 * A fiber switch costs nanoseconds; creating a fiber costs more, so workers
 * live as long as their OS thread, from block to block and launch to launch.
 */
#include "emu_block.h"

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>
#include <unistd.h>

namespace mt_emu {

namespace {

/* The top of a waiting thread's stack, where its registers and the frames
 * of its barrier call lie. */
void prefetch_stack(const EmuThread &t)
{
    const char *sp = static_cast<const char *>(t.cont);
    if (sp)
        for (int line = 0; line < 6; ++line)
            __builtin_prefetch(sp + 64 * line);
}

} /* namespace */

/* Below each stack, an inaccessible guard region: a kernel whose frames
 * outgrow the stack faults there, and the fault handler reports a stack
 * overflow. 1 MiB of address space (no memory), so that a big local array,
 * whose frame jumps past the stack's end, still lands in it. */
constexpr size_t kStackGuard = (size_t)1 << 20;

BlockRunner::BlockRunner()
{
    acquire_shared_memory();
    /* A fault on an overflowed stack can only be handled on another stack:
     * the signal stack of this OS thread (unless it has one, as Python's
     * main thread may). */
    stack_t old;
    if (sigaltstack(nullptr, &old) == 0 && (old.ss_flags & SS_DISABLE)) {
        const size_t bytes = 64 * 1024;
        alt_stack_ = std::malloc(bytes);
        stack_t ss;
        ss.ss_sp = alt_stack_;
        ss.ss_flags = 0;
        ss.ss_size = bytes;
        if (alt_stack_ && sigaltstack(&ss, nullptr) != 0) {
            std::free(alt_stack_);
            alt_stack_ = nullptr;
        }
    }
}

/* Parked workers wait inside worker_loop, which holds nothing to release:
 * their stacks are simply unmapped. */
BlockRunner::~BlockRunner()
{
    for (const auto &s : stacks_)
        munmap(s.first, s.second);
    if (alt_stack_) {
        stack_t ss;
        ss.ss_sp = nullptr;
        ss.ss_flags = SS_DISABLE;
        ss.ss_size = 0;
        sigaltstack(&ss, nullptr);
        std::free(alt_stack_);
    }
    release_shared_memory();
}

/* A worker that has not started: the first switch to it runs worker_loop
 * for the thread it is entered for. Stack tops are staggered by a few cache
 * lines ("colouring"): tops exactly 64 KiB apart all fall into the same L1
 * cache set, and every switch would then miss the cache. */
void *BlockRunner::new_worker()
{
    constexpr size_t kColours = 61, kLine = 64;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t colour = (stack_colour_++ % kColours) * kLine;
    const size_t usable = (settings().stack_bytes + colour + page - 1) & ~(page - 1);
    stacks_.reserve(stacks_.size() + 1);
    void *m = mmap(nullptr, kStackGuard + usable, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        throw std::bad_alloc();
    unsigned char *map = static_cast<unsigned char *>(m);
    if (mprotect(map + kStackGuard, usable, PROT_READ | PROT_WRITE) != 0) {
        munmap(m, kStackGuard + usable);
        throw std::bad_alloc();
    }
    stacks_.push_back({map, kStackGuard + usable});
    return make_context(map + kStackGuard + usable - colour, usable - colour);
}

void *BlockRunner::stack_of_guard(const void *addr) const
{
    const unsigned char *a = static_cast<const unsigned char *>(addr);
    for (const auto &s : stacks_)
        if (a >= s.first && a < s.first + kStackGuard)
            return s.first + s.second - 64;
    return nullptr;
}

extern "C" void mt_emu_worker_start() { tls_runner->worker_loop(); }

/* Leaves the running context (saved in *save) for `to`, which is used up. */
void BlockRunner::switch_to(void *&to, void **save)
{
    void *target = to;
    to = nullptr;
    switch_context(save, target);
}

/* Runs thread t from where it is (at a barrier, or not started: then on a
 * parked or new worker); `save` is the slot of the context that gives up
 * the CPU. */
void BlockRunner::enter(EmuThread &t, void **save)
{
    if (t.started) {
        current_ = &t;
        current_idx_ = t.idx;
        switch_to(t.cont, save);
        return;
    }
    if (parked_.empty())
        parked_.push_back(new_worker());
    void *worker = parked_.back();
    parked_.pop_back();
    t.started = true;
    current_ = &t;
    current_idx_ = t.idx;
    switch_to(worker, save);
}

/* Out of line, so that next_thread stays small enough to inline. */
EmuThread *BlockRunner::interrupted()
{
    error_ = format("kernel '%s' interrupted (Ctrl-C)", cfg_->name);
    return nullptr;
}

/* The next thread of the round, or none when the round is over: used up,
 * the block failed, or Ctrl-C was pressed (checked between threads, so a
 * long launch stops soon). */
EmuThread *BlockRunner::next_thread()
{
    if (round_pos_ == round_.size() || aborting_ || !error_.empty())
        return nullptr;
    if (__builtin_expect(stop_->load(std::memory_order_relaxed), 0))
        return interrupted();
    EmuThread *t = &threads_[(size_t)round_[round_pos_++]];
    /* The round's order is known: fetch the line of the thread after next,
     * and the stack of the next one, while this one runs. A shuffled order
     * would otherwise miss the cache at nearly every switch. */
    if (round_pos_ + 1 < round_.size())
        __builtin_prefetch(&threads_[(size_t)round_[round_pos_ + 1]]);
    if (round_pos_ < round_.size())
        prefetch_stack(threads_[(size_t)round_[round_pos_]]);
    return t;
}

/* The life of a worker: run the thread it was entered for (current_), then
 * the next ones of the round on the same stack while they have not started;
 * then park, and wait to be entered again. */
void BlockRunner::worker_loop()
{
    for (;;) {
        run_thread(*current_);
        EmuThread *next = next_thread();
        if (next && !next->started) {
            next->started = true;
            current_ = next;
            current_idx_ = next->idx;
            continue;
        }
        parked_.push_back(nullptr);
        void **slot = &parked_.back();
        if (next) {
            enter(*next, slot);
        } else {
            current_ = nullptr;
            switch_to(scheduler_, slot);
        }
    }
}

void BlockRunner::run_thread(EmuThread &t)
{
    try {
        body_(kctx_);
    } catch (const KernelAbort &) {
        /* the block failed elsewhere; this thread just unwinds */
    } catch (const std::exception &e) {
        if (error_.empty())
            error_ = e.what();
    }
    finish(t);
}

void BlockRunner::finish(EmuThread &t)
{
    t.state = State::Done;
    ++done_;
    warps_[(size_t)t.linear / 32].done |= 1u << (t.linear % 32);
    current_ = nullptr;
}

/* The current thread goes to the end of its round and the next thread
 * runs (MINITENSOR_EMU_INTERLEAVE, after a read of shared memory): every
 * other thread of the round reads before this one writes what it read. */
void BlockRunner::yield_after_read()
{
    EmuThread &me = *current_;
    if (round_pos_ >= round_.size() || aborting_ || !error_.empty())
        return; /* the last of its round: nobody to yield to */
    if (round_pos_ > 4096 && round_pos_ * 2 > round_.size()) {
        round_.erase(round_.begin(), round_.begin() + (ptrdiff_t)round_pos_);
        round_pos_ = 0;
    }
    round_.push_back(me.linear);
    EmuThread *next = next_thread();
    if (!next || next == &me)
        return;
    enter(*next, &me.cont);
    if (aborting_)
        throw KernelAbort{};
}

void BlockRunner::yield_to_next_round()
{
    if (aborting_ || !error_.empty())
        throw KernelAbort{};
    next_round_.push_back(current_->linear);
    wait();
}

void BlockRunner::wait()
{
    EmuThread &me = *current_;
    EmuThread *next = next_thread();
    if (next) {
        enter(*next, &me.cont);
    } else {
        current_ = nullptr;
        switch_to(scheduler_, &me.cont);
    }
    /* Resumed by whoever released the barrier and reached this thread in a
     * later round; current_ is this thread again. */
    if (aborting_)
        throw KernelAbort{};
}

/* ---- a CUDA thread stops: __syncthreads() and warp-level meetings --------
 * Each call records where its thread arrives (the counts release_barrier
 * reads) and waits; in one file with wait() so the compiler can inline the
 * whole path from the kernel's call to the switch. */

void BlockRunner::arrive_at_sync(const char *file, int line)
{
    EmuThread &me = *current_;
    me.state = State::AtBlockBarrier;
    me.sync_file = file;
    me.sync_line = line;
    /* Every thread must wait at the same __syncthreads() statement
     * (compute-sanitizer's synccheck says the same); the first to arrive
     * sets the statement. */
    if (at_block_++ == 0) {
        sync_file_ = file;
        sync_line_ = line;
    } else if (line != sync_line_ || (file != sync_file_ && std::strcmp(file, sync_file_) != 0)) {
        sync_mismatch_ = true;
    }
}

void BlockRunner::arrive_at_warp(unsigned mask, Meeting kind, int src_lane, size_t bytes)
{
    EmuThread &me = *current_;
    me.state = State::AtWarpBarrier;
    me.warp_mask = mask;
    me.meeting = kind;
    me.src_lane = (signed char)src_lane;
    me.bytes = (unsigned char)bytes;
    size_t w = (size_t)me.linear / 32;
    WarpState &warp = warps_[w];
    warp.waiting |= 1u << (me.linear % 32);
    warp.wanted |= mask;
    if (!warp.pending) {
        warp.pending = true;
        pending_warps_.push_back((int)w);
    }
}

void sync_block(const char *file, int line)
{
    BlockRunner &r = running();
    r.arrive_at_sync(file, line);
    r.wait();
}

void warp_exchange(unsigned mask, const void *value, void *out, size_t bytes, int src_lane)
{
    BlockRunner &r = running();
    EmuThread &me = r.current();
    if (bytes > sizeof me.exchange)
        throw KernelError(format("a warp shuffle of a %zu-byte value; the emulator exchanges at most %zu bytes",
                                 bytes, sizeof me.exchange));
    /* Publish the value; the release of the meeting hands every lane its
     * source lane's value in the same buffer. */
    std::memcpy(me.exchange, value, bytes);
    r.arrive_at_warp(mask, src_lane >= 0 ? Meeting::Shuffle : Meeting::Sync, src_lane, bytes);
    r.wait();
    if (src_lane >= 0)
        std::memcpy(out, me.exchange, bytes);
}

unsigned warp_ballot(unsigned mask, int predicate)
{
    BlockRunner &r = running();
    EmuThread &me = r.current();
    int held = predicate != 0;
    std::memcpy(me.exchange, &held, sizeof held);
    r.arrive_at_warp(mask, Meeting::Ballot);
    r.wait();
    unsigned bits;
    std::memcpy(&bits, me.exchange, sizeof bits);
    return bits;
}

} /* namespace mt_emu */
