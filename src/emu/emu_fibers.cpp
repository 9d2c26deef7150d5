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

#include <cstdlib>
#include <cstring>
#include <new>

namespace mt_emu {

namespace {

/* Stacks of workers. Their tops are staggered by a few cache lines
 * ("colouring"): tops exactly 64 KiB apart all fall into the same L1 cache
 * set, and every switch would then miss the cache. */
struct ColouredStack {
    size_t size;
    unsigned colour;
    static constexpr size_t kColours = 61, kLine = 64;
    ctx::stack_context allocate()
    {
        size_t extent = size + (colour % kColours) * kLine;
        void *p = std::malloc(extent);
        if (!p)
            throw std::bad_alloc();
        ctx::stack_context sc;
        sc.size = extent;
        sc.sp = static_cast<char *>(p) + extent;
        return sc;
    }
    void deallocate(ctx::stack_context &sc) noexcept { std::free(static_cast<char *>(sc.sp) - sc.size); }
};

/* The top of a waiting thread's stack, where its registers and the frames
 * of its barrier call lie: Boost.Context's fiber is the saved stack pointer. */
void prefetch_stack(const EmuThread &t)
{
    static_assert(sizeof(ctx::fiber) == sizeof(void *), "a fiber is one stack pointer");
    const char *sp;
    std::memcpy(&sp, &t.cont, sizeof sp);
    if (sp)
        for (int line = 0; line < 6; ++line)
            __builtin_prefetch(sp + 64 * line);
}

} /* namespace */

BlockRunner::BlockRunner() { shared_.resize(kSharedOptinLimit + 16); }

/* Destroying a parked worker's fiber unwinds its stack (Boost.Context throws
 * an exception of its own into it) and frees the stack. */
BlockRunner::~BlockRunner() { parked_.clear(); }

/* A worker that has not started: it takes the thread it is entered for. */
ctx::fiber BlockRunner::new_worker()
{
    return ctx::fiber(std::allocator_arg, ColouredStack{settings().stack_bytes, stack_colour_++},
                      [this](ctx::fiber &&from) -> ctx::fiber {
                          *save_to_ = std::move(from);
                          worker_loop();
                      });
}

/* Leaves the running context for `to`. A switch hands the context that was
 * left to the one resumed; that one stores it in *save (a slot of the left
 * context: its thread's, or a parked worker's), where the next switch to it
 * finds it. */
void BlockRunner::switch_to(ctx::fiber &to, ctx::fiber *save)
{
    save_to_ = save;
    ctx::fiber from = std::move(to).resume();
    *save_to_ = std::move(from);
}

/* Runs thread t from where it is (at a barrier, or not started: then on a
 * parked or new worker); `save` is the slot of the context that gives up
 * the CPU. */
void BlockRunner::enter(EmuThread &t, ctx::fiber *save)
{
    if (t.started) {
        current_ = &t;
        tls_thread_idx = &t.idx;
        switch_to(t.cont, save);
        return;
    }
    if (parked_.empty())
        parked_.push_back(new_worker());
    ctx::fiber worker = std::move(parked_.back());
    parked_.pop_back();
    t.started = true;
    current_ = &t;
    tls_thread_idx = &t.idx;
    switch_to(worker, save);
}

/* The next thread of the round, or none when the round is over: used up,
 * the block failed, or Ctrl-C was pressed (checked between threads, so a
 * long launch stops soon). */
EmuThread *BlockRunner::next_thread()
{
    if (round_pos_ == round_.size() || aborting_ || !error_.empty())
        return nullptr;
    if (__builtin_expect(stop_->load(std::memory_order_relaxed), 0)) {
        error_ = format("kernel '%s' interrupted (Ctrl-C)", cfg_->name);
        return nullptr;
    }
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
            tls_thread_idx = &next->idx;
            continue;
        }
        parked_.emplace_back();
        ctx::fiber *slot = &parked_.back();
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

} /* namespace mt_emu */
