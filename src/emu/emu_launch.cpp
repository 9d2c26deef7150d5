/*
 * emu_launch.cpp: launching a kernel in the CPU emulator, and the __shared__
 * calls a running kernel makes (barriers and shuffles: emu_fibers.cpp).
 *
 * A launch runs its blocks one after another on each of a few OS threads
 * (one per core, MINITENSOR_EMU_THREADS); each OS thread has a BlockRunner
 * (emu_block.h) that runs a block's CUDA threads as coroutines. While a
 * launch runs on the process's main thread, Ctrl-C only sets a flag, which
 * the runners check between threads; the launch is then abandoned and the
 * signal handed on to the program's handler.
 */
#include "emu_block.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace mt_emu {

thread_local const uint3 *tls_thread_idx = nullptr;
thread_local BlockCoords tls_block;
thread_local BlockRunner *tls_runner = nullptr;

const std::atomic<bool> never_interrupted{false};

namespace {

/* ---- Ctrl-C ---------------------------------------------------------------
 * While a launch runs on the process's main thread, SIGINT only sets this
 * flag; the scheduler checks it between blocks and between the threads of a
 * round, abandons the launch, and then hands the signal to the handler that
 * was there before (Python's, which raises KeyboardInterrupt). */
std::atomic<bool> interrupt_flag{false};

extern "C" void on_sigint(int) { interrupt_flag.store(true, std::memory_order_relaxed); }

/* Whether this is the process's main thread (whose signal handlers Python
 * runs); asked once per OS thread, as it never changes. */
bool on_main_thread()
{
    static thread_local const bool main = syscall(SYS_gettid) == getpid();
    return main;
}

/* On the heap: a thread-local object of this size would make the library's
 * block of thread-local storage too large for the space the C library keeps
 * for libraries loaded later, and every threadIdx slower. */
BlockRunner &runner_of_this_thread()
{
    static thread_local std::unique_ptr<BlockRunner> runner;
    if (!runner)
        runner = std::make_unique<BlockRunner>();
    return *runner;
}

std::mutex attribute_mutex;
std::unordered_map<const void *, size_t> max_dynamic_shared;

size_t dynamic_shared_limit(const void *kernel)
{
    std::lock_guard<std::mutex> lock(attribute_mutex);
    auto it = max_dynamic_shared.find(kernel);
    return it == max_dynamic_shared.end() ? kStaticSharedLimit : it->second;
}

} /* namespace */

/* ---- launching ------------------------------------------------------------ */

bool accept_launch(const LaunchConfig &cfg)
{
    const dim3 g = cfg.grid, b = cfg.block;
    uint64_t per_block = (uint64_t)b.x * b.y * b.z;
    if (per_block == 0 || per_block > 1024 || b.x > 1024 || b.y > 1024 || b.z > 64 || g.x == 0 ||
        g.y == 0 || g.z == 0 || g.x > INT_MAX || g.y > 65535 || g.z > 65535) {
        /* CUDA 13 answers every bad configuration with cudaErrorInvalidValue
         * (older runtimes said cudaErrorInvalidConfiguration); so does the
         * emulator, to match the toolchain the project builds with. */
        record_error(cudaErrorInvalidValue,
                     format("bad launch configuration: kernel '%s' launched with grid (%u, %u, %u) and block (%u, %u, %u); a block "
                            "has 1 to 1024 threads (z at most 64), and no grid or block dimension may be 0",
                            cfg.name, g.x, g.y, g.z, b.x, b.y, b.z));
        return false;
    }
    size_t limit = dynamic_shared_limit(cfg.kernel);
    if (cfg.shared_bytes > limit) {
        record_error(cudaErrorInvalidValue,
                     format("kernel '%s' launched with %zu bytes of dynamic shared memory; its limit is %zu "
                            "(raise it with cudaFuncSetAttribute)", cfg.name, cfg.shared_bytes, limit));
        return false;
    }
    /* An accepted launch: tests ask which kernels an entry point ran. */
    count_launch(cfg.kernel);
    return true;
}

void run_kernel(const LaunchConfig &cfg, void (*body)(void *), void *kctx)
{
    if (!accept_launch(cfg))
        return;
    const dim3 g = cfg.grid, b = cfg.block;
    uint64_t per_block = (uint64_t)b.x * b.y * b.z;

    /* Ctrl-C: a handler of our own while the launch runs (see on_sigint);
     * only on the main thread, whose signal handlers Python runs, and only
     * over a handler that a program installed (with SIG_DFL, Ctrl-C ends
     * the process at once anyway; with SIG_IGN it is ignored). */
    struct sigaction previous;
    bool handling = false;
    if (on_main_thread() && sigaction(SIGINT, nullptr, &previous) == 0 &&
        !(previous.sa_flags & SA_SIGINFO) && previous.sa_handler != SIG_DFL &&
        previous.sa_handler != SIG_IGN && previous.sa_handler != on_sigint) {
        struct sigaction mine;
        std::memset(&mine, 0, sizeof mine);
        mine.sa_handler = on_sigint;
        sigemptyset(&mine.sa_mask);
        mine.sa_flags = SA_RESTART;
        interrupt_flag.store(false);
        handling = sigaction(SIGINT, &mine, nullptr) == 0;
    }

    const std::atomic<bool> *stop = handling ? &interrupt_flag : &never_interrupted;

    uint64_t blocks = (uint64_t)g.x * g.y * g.z;
    /* Small launches stay on the calling thread: starting an OS thread costs
     * more than emulating a few thousand CUDA threads. */
    uint64_t workers = blocks * per_block < 32768 ? 1 : std::min<uint64_t>(blocks, settings().os_threads);

    install_fault_handler();
    std::atomic<uint64_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex error_mutex;
    std::string first_error;
    cudaError_t first_code = cudaErrorLaunchFailure;

    auto work = [&] {
        BlockRunner &runner = runner_of_this_thread();
        BlockRunner *outer = tls_runner;
        tls_runner = &runner;
        try {
            runner.begin_launch(cfg, body, kctx, stop);
            while (!failed.load()) {
                if (stop->load(std::memory_order_relaxed)) {
                    std::lock_guard<std::mutex> lock(error_mutex);
                    if (!failed.exchange(true))
                        first_error = format("kernel '%s' interrupted (Ctrl-C)", cfg.name);
                    break;
                }
                uint64_t i = next.fetch_add(1);
                if (i >= blocks)
                    break;
                uint3 bi{(unsigned)(i % g.x), (unsigned)(i / g.x % g.y), (unsigned)(i / ((uint64_t)g.x * g.y))};
                if (!runner.run_block(bi)) {
                    std::lock_guard<std::mutex> lock(error_mutex);
                    if (!failed.exchange(true)) {
                        first_error = runner.error();
                        first_code = runner.error_code();
                    }
                }
            }
        } catch (const std::exception &e) {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (!failed.exchange(true))
                first_error = format("kernel '%s' could not run: %s", cfg.name, e.what());
        }
        tls_runner = outer;
    };

    std::vector<std::thread> helpers;
    for (uint64_t w = 1; w < workers; ++w)
        helpers.emplace_back(work);
    work();
    for (std::thread &t : helpers)
        t.join();

    bool was_interrupted = false;
    if (handling) {
        sigaction(SIGINT, &previous, nullptr);
        was_interrupted = interrupt_flag.exchange(false);
    }
    if (was_interrupted) {
        record_kernel_error(cudaErrorInterrupted,
                            format("kernel '%s' interrupted (Ctrl-C); the launch was abandoned and "
                                   "its output is incomplete", cfg.name));
        /* Hand the Ctrl-C on to the handler that was there (Python raises
         * KeyboardInterrupt when the call returns). */
        raise(SIGINT);
    } else if (failed.load()) {
        record_kernel_error(first_code, first_error);
    }
}

cudaError_t set_function_max_dynamic_shared(const void *kernel, int bytes)
{
    if (bytes < 0 || (size_t)bytes > kSharedOptinLimit)
        return record_error(cudaErrorInvalidValue,
                            format("cudaFuncSetAttribute: %d bytes of dynamic shared memory asked for; "
                                   "at most %zu", bytes, kSharedOptinLimit));
    std::lock_guard<std::mutex> lock(attribute_mutex);
    max_dynamic_shared[kernel] = (size_t)bytes;
    return cudaSuccess;
}

/* ---- inside kernels -------------------------------------------------------- */

int lane_id(void) { return running().current().linear & 31; }

void *block_shared_alloc(const char *name, const char *type, const char *file, int line, size_t bytes)
{
    return running().shared_alloc(name, type, file, line, bytes);
}

void *dynamic_shared_ptr(void) { return running().dynamic_shared(); }

size_t dynamic_shared_bytes(void) { return running().dynamic_bytes(); }

const SharedArrayInfo *shared_array_info(const char *name, const char *file, int line, int rank,
                                         const size_t *dims, size_t elem_size, bool dynamic)
{
    return running().array_info(name, file, line, rank, dims, elem_size, dynamic);
}

void shared_index_error(const SharedArrayInfo *info, const void *sub, int sub_rank, long long index,
                        size_t extent, int line)
{
    running().index_error(info, sub, sub_rank, index, extent, line);
}

void shared_access(const SharedArrayInfo *info, const void *elem, bool write, int line, const void *pc)
{
    running().access(info, elem, write, line, pc);
}

void shared_vector_access(const SharedArrayInfo *info, const void *p, size_t bytes, bool write, int line)
{
    running().vector_access(info, p, bytes, write, line);
}

void shared_struct_access(const SharedArrayInfo *info, const void *p, size_t bytes, bool write, int line,
                          const void *pc)
{
    running().words_access(info, p, bytes, write, line, pc);
}

const SharedArrayInfo *shared_member_info(const void *p, const char *member, size_t n, size_t elem_size)
{
    return running().member_info(p, member, n, elem_size);
}

void shared_read_done(void) { running().yield_after_read(); }

void shared_initialised(const void *p, size_t bytes)
{
    running().mark_initialised(p, bytes);
}

void shared_emulated_read(const void *p, const void *pc)
{
    running().emulated_read(p, pc);
}


} /* namespace mt_emu */
