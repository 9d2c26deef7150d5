/*
 * emu_group.cpp: launch groups, one kernel over several emulated devices
 * (declared in emu.h; the multi-GPU all-reduce of src/dist/p2p_*.cu is the
 * user).
 *
 * On a GPU machine, one host thread launches a kernel on device 0, then on
 * device 1, ...; the launches are asynchronous, so all of them run at once,
 * and a kernel on device 0 may wait (spinning on a flag in its memory) for
 * the kernel on device 1 to reach the same point. Two things make that work
 * on GPUs, and the emulator has to provide both:
 *
 *   1. the launches of all devices run concurrently. The emulator's
 *      ordinary launch runs to its end before it returns, so the first
 *      launch would wait forever for the second. Here the launches between
 *      begin_launch_group() and end_launch_group() are held, and run
 *      together when the group ends;
 *   2. every block that a barrier waits for is running. A GPU runs a grid's
 *      blocks as SMs free up; a block that spins on a flag which only a
 *      not-yet-started block will set would deadlock, so cross-device
 *      kernels launch at most one block per SM (all co-resident). The
 *      emulator's ordinary launch runs a few blocks at a time, to their end;
 *      here every block of every launch gets an OS thread of its own, for
 *      the whole group (at most kMaxGroupBlocks of them).
 *
 * A kernel in a group waits with wait_flag_at_least, which yields the CPU
 * between looks (the machine may have fewer cores than the group has
 * blocks), gives up with an error after MINITENSOR_EMU_WAIT seconds instead
 * of hanging, and gives up at once when another block of the group failed.
 */
#include "emu_block.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mt_emu {

namespace {

/* OS threads a group may start: every block of every launch at once. */
constexpr uint64_t kMaxGroupBlocks = 256;

struct HeldLaunch {
    LaunchConfig cfg;
    void (*body)(void *);
    std::shared_ptr<void> ctx;
    int device;
};

struct Group {
    std::vector<HeldLaunch> launches;
    bool accepted = true; /* false once a launch was refused */
};

thread_local std::unique_ptr<Group> t_group;

/* The running group's failure flag, seen by wait_flag_at_least in every
 * block's OS thread (and by the block runners, as their stop flag). */
thread_local const std::atomic<bool> *t_group_failed = nullptr;

double wait_limit_s()
{
    static const double limit = [] {
        const char *v = std::getenv("MINITENSOR_EMU_WAIT");
        double s = v && *v ? std::atof(v) : 0.0;
        return s > 0.0 ? s : 30.0;
    }();
    return limit;
}

} /* namespace */

void begin_launch_group() { t_group = std::make_unique<Group>(); }

bool in_launch_group() { return t_group != nullptr; }

void abandon_launch_group() { t_group.reset(); }

void add_to_launch_group(const LaunchConfig &cfg, void (*body)(void *), std::shared_ptr<void> ctx)
{
    /* Checked now, as a GPU checks a launch when it is made. */
    if (!accept_launch(cfg)) {
        t_group->accepted = false;
        return;
    }
    t_group->launches.push_back(HeldLaunch{cfg, body, std::move(ctx), current_device()});
}

cudaError_t end_launch_group()
{
    if (!t_group)
        return record_error(cudaErrorInvalidValue, "end_launch_group: no launch group is open");
    std::unique_ptr<Group> group = std::move(t_group);
    if (!group->accepted)
        return cudaErrorInvalidValue; /* the refused launch recorded why */

    struct Block {
        const HeldLaunch *launch;
        uint3 idx;
    };
    std::vector<Block> blocks;
    for (const HeldLaunch &l : group->launches) {
        const dim3 g = l.cfg.grid;
        if ((uint64_t)g.x * g.y * g.z > kMaxGroupBlocks)
            return record_error(cudaErrorInvalidValue,
                                format("launch group: kernel '%s' on device %d has %llu blocks; a group runs every "
                                       "block at once, each on an OS thread, so it takes at most %llu in all",
                                       l.cfg.name, l.device, (unsigned long long)g.x * g.y * g.z,
                                       (unsigned long long)kMaxGroupBlocks));
        for (unsigned z = 0; z < g.z; ++z)
            for (unsigned y = 0; y < g.y; ++y)
                for (unsigned x = 0; x < g.x; ++x)
                    blocks.push_back(Block{&l, uint3{x, y, z}});
    }
    if (blocks.size() > kMaxGroupBlocks)
        return record_error(cudaErrorInvalidValue,
                            format("launch group: %zu blocks in all; a group runs every block at once, each on "
                                   "an OS thread, so it takes at most %llu",
                                   blocks.size(), (unsigned long long)kMaxGroupBlocks));

    install_fault_handler();
    std::atomic<bool> failed{false};
    std::mutex error_mutex;
    std::string first_error;
    cudaError_t first_code = cudaErrorLaunchFailure;
    auto fail = [&](cudaError_t code, const std::string &text) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (first_error.empty()) {
            first_error = text;
            first_code = code;
        }
        failed.store(true);
    };

    auto run = [&](const Block &b) {
        auto runner = std::make_unique<BlockRunner>();
        BlockRunner *outer = tls_runner;
        tls_runner = runner.get();
        t_group_failed = &failed;
        try {
            /* The group's failure flag is the runner's stop flag: the other
             * blocks are abandoned between their threads. */
            runner->begin_launch(b.launch->cfg, b.launch->body, b.launch->ctx.get(), &failed);
            if (!runner->run_block(b.idx) && !failed.load())
                fail(runner->error_code(),
                     format("device %d: %s", b.launch->device, runner->error().c_str()));
        } catch (const std::exception &e) {
            fail(cudaErrorLaunchFailure,
                 format("kernel '%s' on device %d could not run: %s", b.launch->cfg.name, b.launch->device, e.what()));
        }
        t_group_failed = nullptr;
        tls_runner = outer;
    };
    std::vector<std::thread> threads;
    threads.reserve(blocks.size());
    try {
        for (size_t i = 1; i < blocks.size(); ++i)
            threads.emplace_back(run, std::cref(blocks[i]));
    } catch (const std::exception &e) {
        fail(cudaErrorLaunchFailure, format("launch group: could not start an OS thread per block: %s", e.what()));
    }
    if (!blocks.empty() && !failed.load())
        run(blocks[0]);
    for (std::thread &t : threads)
        t.join();
    if (failed.load())
        return record_kernel_error(first_code, first_error);
    return cudaSuccess;
}

void wait_flag_at_least(const unsigned *flag, unsigned value, const char *what)
{
    using Clock = std::chrono::steady_clock;
    const unsigned *p = from_raw(flag);
    if (__atomic_load_n(p, __ATOMIC_ACQUIRE) >= value)
        return;
    if (!t_group_failed)
        throw KernelError(format("%s: a kernel waits for a flag that another device's kernel sets, but it was "
                                 "not launched in a launch group (begin_launch_group), so nothing runs beside it",
                                 what));
    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_limit_s()));
    for (unsigned spins = 0;; ++spins) {
        if (__atomic_load_n(p, __ATOMIC_ACQUIRE) >= value)
            return;
        if (t_group_failed->load(std::memory_order_relaxed))
            throw KernelAbort{}; /* another block failed: its error is the one reported */
        if (spins % 1024 == 1023 && Clock::now() > deadline)
            throw KernelError(format("%s: waited %.0f s for a flag to reach %u (it holds %u): a device never "
                                     "arrived at the barrier (MINITENSOR_EMU_WAIT sets the limit)",
                                     what, wait_limit_s(), value, __atomic_load_n(p, __ATOMIC_ACQUIRE)));
        /* Fewer cores than blocks: let the thread that will set the flag run. */
        if (spins < 64)
            std::this_thread::yield();
        else
            std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
}

} /* namespace mt_emu */
