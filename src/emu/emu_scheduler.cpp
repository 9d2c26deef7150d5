/*
 * emu_scheduler.cpp: the block scheduler of the CPU emulator (see emu.h);
 * the runtime API twins (cudaMalloc, ...) are in emu_runtime.cpp.
 *
 * A launch runs its blocks on one or more OS threads. Within a block, every
 * CUDA thread is a Boost.Context fiber: a coroutine with its own stack that
 * can stop in the middle of the kernel (at a barrier) and be resumed later.
 * The scheduler of a block works in rounds:
 *
 *   1. resume every runnable thread (in a shuffled order) until it reaches a
 *      barrier or returns from the kernel;
 *   2. when none is runnable, release the barrier everyone is waiting at:
 *      first warp-level meetings whose lanes have all arrived, else the
 *      block-wide __syncthreads() once every thread of the block is there;
 *   3. if nothing can be released, the threads wait at different barriers
 *      (or some exited while others wait): report the divergence, name the
 *      kernel and unwind the block instead of hanging.
 *
 * A fiber switch costs a few nanoseconds (docs/emulator.md has the measured
 * cost of a __syncthreads()), so one OS thread per CUDA thread, whose switches
 * cost microseconds, is avoided.
 */
#include "emu_internal.h"

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <deque>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <ucontext.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ctx = boost::context;

namespace mt_emu {

thread_local const uint3 *tls_thread_idx = nullptr;
thread_local BlockCoords tls_block;

namespace {

/* ---- fibers and their stacks ------------------------------------------- */

/* Stacks are reused from block to block: allocating one per CUDA thread per
 * block would cost more than running most kernels. Stack tops are staggered
 * by a few cache lines ("colouring"): tops exactly 64 KiB apart all fall into
 * the same L1 cache set, and every switch would then miss the cache. */
struct StackPool {
    size_t size = 0;
    unsigned colour = 0;
    std::vector<void *> spare;
    ~StackPool()
    {
        for (void *p : spare)
            std::free(p);
    }
};

struct PooledStack {
    StackPool *pool;
    static constexpr size_t kColours = 61, kLine = 64;
    ctx::stack_context allocate()
    {
        ctx::stack_context sc;
        if (!pool->spare.empty()) {
            void *p = pool->spare.back();
            pool->spare.pop_back();
            /* A reused stack keeps its colour: it is stored just below the top. */
            size_t extent = *static_cast<size_t *>(p);
            sc.size = extent - sizeof(size_t) * 2;
            sc.sp = static_cast<char *>(p) + extent;
            return sc;
        }
        size_t extent = pool->size + (pool->colour++ % kColours) * kLine;
        void *p = std::malloc(pool->size + kColours * kLine);
        if (!p)
            throw std::bad_alloc();
        *static_cast<size_t *>(p) = extent;
        sc.size = extent - sizeof(size_t) * 2;
        sc.sp = static_cast<char *>(p) + extent;
        return sc;
    }
    void deallocate(ctx::stack_context &sc) noexcept
    {
        char *top = static_cast<char *>(sc.sp);
        size_t extent = sc.size + sizeof(size_t) * 2;
        pool->spare.push_back(top - extent);
    }
};

enum class State { Runnable, AtBlockBarrier, AtWarpBarrier, Done, Faulted };

struct EmuThread {
    uint3 idx{};
    int linear = 0;
    State state = State::Runnable;
    unsigned warp_mask = 0;
    const char *sync_file = nullptr; /* the __syncthreads() it waits at */
    int sync_line = 0;
    int ballot = 0;
    alignas(16) unsigned char exchange[16];
    ctx::fiber fiber;     /* the CUDA thread, suspended */
    ctx::fiber scheduler; /* the way back, while the thread runs */
};

/* Thrown inside a CUDA thread to unwind it when its block has failed. */
struct KernelAbort {};
/* Thrown inside a CUDA thread by a runtime check (e.g. shared memory use). */
struct KernelError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/* ---- Ctrl-C ---------------------------------------------------------------
 * While a launch runs on the process's main thread, SIGINT only sets this
 * flag; the scheduler checks it between blocks and between the threads of a
 * round, abandons the launch, and then hands the signal to the handler that
 * was there before (Python's, which raises KeyboardInterrupt). */
std::atomic<bool> interrupt_flag{false};

extern "C" void on_sigint(int) { interrupt_flag.store(true, std::memory_order_relaxed); }

/* What a launch that installed no handler watches instead: never set. */
const std::atomic<bool> never_interrupted{false};

struct SharedSlot {
    const char *file;
    int line;
    size_t offset;
    bool has_info;
    SharedArrayInfo info;
};

/* Race detection (MINITENSOR_EMU_CHECK=full): what the last accesses to one
 * 4-byte word of shared memory were. An access is "since the last barrier"
 * when its epoch is the block's current one; lanes of one warp that have met
 * (shuffle, __syncwarp, ballot) since an access are ordered after it. */
struct Access {
    uint64_t epoch = 0;
    int tid = -1;
    int line = 0;
    uint32_t warp_epoch = 0;
    const SharedArrayInfo *info = nullptr;
};
struct ShadowWord {
    Access write;
    Access read;       /* the first reader since the last barrier */
    Access other_read; /* the latest reader other than that one */
};

/* Runs blocks of one launch on the current OS thread. */
class BlockRunner {
public:
    BlockRunner() { shared_.resize(kSharedOptinLimit + 16); }

    void begin_launch(const LaunchConfig &cfg, void (*body)(void *), void *kctx,
                      const std::atomic<bool> *stop)
    {
        cfg_ = &cfg;
        stop_ = stop;
        body_ = body;
        kctx_ = kctx;
        pool_.size = settings().stack_bytes;
        size_t n = (size_t)cfg.block.x * cfg.block.y * cfg.block.z;
        threads_.clear();
        threads_.resize(n);
        warp_epoch_.assign((n + 31) / 32, 0);
        order_.resize(n);
        tls_block.block_dim = cfg.block;
        tls_block.grid_dim = cfg.grid;
    }

    /* Runs one block to completion; false (and error()) when it failed. */
    bool run_block(uint3 block_idx)
    {
        tls_block.block_idx = block_idx;
        ++epoch_;
        error_.clear();
        error_code_ = cudaErrorLaunchFailure;
        aborting_ = false;
        start_shared_memory();
        rng_ = settings().seed * 0x9E3779B97F4A7C15ull +
               ((uint64_t)block_idx.x << 42 ^ (uint64_t)block_idx.y << 21 ^ block_idx.z) + 1;

        const dim3 b = cfg_->block;
        for (size_t i = 0; i < threads_.size(); ++i) {
            EmuThread &t = threads_[i];
            t.linear = (int)i;
            t.idx = uint3{(unsigned)(i % b.x), (unsigned)(i / b.x % b.y), (unsigned)(i / (b.x * b.y))};
            t.state = State::Runnable;
            t.fiber = ctx::fiber(std::allocator_arg, PooledStack{&pool_},
                                 [this, &t](ctx::fiber &&sched) { return thread_main(t, std::move(sched)); });
            order_[i] = (int)i;
        }

        for (;;) {
            run_round();
            if (!error_.empty()) {
                abort_block();
                return false;
            }
            if (!release_barrier()) {
                abort_block();
                return false;
            }
            if (all_done())
                return true;
        }
    }

    const std::string &error() const { return error_; }
    cudaError_t error_code() const { return error_code_; }

    bool in_cuda_thread() const { return current_ != nullptr; }

    /* Runs on the faulting CUDA thread's stack, called (by the fault
     * handler's rewrite of its context) as if from the faulting
     * instruction: records the error and leaves the thread for good. */
    [[noreturn]] void fault_exit(void *addr, void *pc, bool write, bool uninitialised)
    {
        EmuThread &t = *current_;
        if (error_.empty()) {
            std::string line = source_line(pc);
            if (uninitialised)
                error_ = format("read of uninitialised device memory in %s: read at %p, %s, which nothing "
                                "(no kernel, cudaMemset or cudaMemcpy) has written%s%s",
                                where(t).c_str(), addr, describe_address(addr).c_str(),
                                line.empty() ? "" : ", at ", line.c_str());
            else
                error_ = format("illegal memory access in %s: %s at %p, %s%s%s", where(t).c_str(),
                                write ? "write" : "read", addr, describe_address(addr).c_str(),
                                line.empty() ? "" : ", at ", line.c_str());
            error_code_ = uninitialised ? cudaErrorLaunchFailure : cudaErrorIllegalAddress;
        }
        t.state = State::Faulted;
        t.scheduler = std::move(t.scheduler).resume();
        std::abort(); /* a faulted thread is never resumed */
    }

    /* ---- called from inside a CUDA thread -------------------------------- */

    void wait(State why, unsigned mask)
    {
        EmuThread &t = *current_;
        t.state = why;
        t.warp_mask = mask;
        t.scheduler = std::move(t.scheduler).resume();
        if (aborting_)
            throw KernelAbort{};
    }

    EmuThread &current() { return *current_; }
    EmuThread *thread_at(int linear)
    {
        return linear >= 0 && (size_t)linear < threads_.size() ? &threads_[(size_t)linear] : nullptr;
    }

    /* ---- MINITENSOR_EMU_CHECK=full ------------------------------------- */

    const SharedArrayInfo *array_info(const char *name, const char *file, int line, int rank,
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

    /* "tile[2][5]": the element at p of the array. */
    static std::string element_name(const SharedArrayInfo *info, const void *p)
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

    static std::string declaration(const SharedArrayInfo *info)
    {
        std::string out = info->name;
        for (int d = 0; d < info->rank; ++d)
            out += format("[%zu]", info->dims[d]);
        return out;
    }

    [[noreturn]] void index_error(const SharedArrayInfo *info, const void *sub, int sub_rank, long long index,
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

    void access(const SharedArrayInfo *info, const void *elem, bool write, int line)
    {
        if (!info)
            return;
        if (shadow_.empty())
            shadow_.resize((kSharedOptinLimit + 16) / 4);
        size_t word = (size_t)(static_cast<const unsigned char *>(elem) - shared_.data()) / 4;
        if (word >= shadow_.size())
            return;
        ShadowWord &w = shadow_[word];
        const EmuThread &me = *current_;
        int u = me.linear;
        Access now{epoch_, u, line, warp_epoch_[(size_t)u / 32], info};
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

    /* A vector load or store through a pointer into the array: the whole
     * vector inside the array, aligned to its size, then each word as a
     * scalar access. */
    void vector_access(const SharedArrayInfo *info, const void *p, size_t bytes, bool write, int line)
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
        for (size_t w = 0; w < bytes; w += 4)
            access(info, at + w, write, line);
    }

    size_t dynamic_bytes() const { return cfg_->shared_bytes; }

    void *shared_alloc(const char *file, int line, size_t bytes)
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

    void *dynamic_shared() { return shared_.data(); }

private:
    ctx::fiber thread_main(EmuThread &t, ctx::fiber &&sched)
    {
        t.scheduler = std::move(sched);
        if (!aborting_) {
            try {
                body_(kctx_);
            } catch (const KernelAbort &) {
                /* the block failed elsewhere; this thread just unwinds */
            } catch (const std::exception &e) {
                if (error_.empty())
                    error_ = e.what();
            }
        }
        t.state = State::Done;
        return std::move(t.scheduler);
    }

    void resume(EmuThread &t)
    {
        current_ = &t;
        tls_thread_idx = &t.idx;
        t.fiber = std::move(t.fiber).resume();
        current_ = nullptr;
        if (t.state == State::Faulted) {
            /* Its stack stops in the middle of the kernel and cannot be
             * unwound: leave the fiber (and its stack) be, forever. */
            new ctx::fiber(std::move(t.fiber));
            t.state = State::Done;
        }
    }

    /* "src/file.cu:123" for a code address, through addr2line (empty when
     * it cannot tell). */
    static std::string source_line(void *pc)
    {
        Dl_info info;
        if (!pc || !dladdr(pc, &info) || !info.dli_fname || !*info.dli_fname)
            return "";
        uintptr_t offset = (uintptr_t)pc - (uintptr_t)info.dli_fbase;
        std::string file = info.dli_fname;
        if (file.find('\'') != std::string::npos)
            return "";
        std::string cmd = format("addr2line -C -e '%s' 0x%lx 2>/dev/null", file.c_str(), (unsigned long)offset);
        FILE *p = popen(cmd.c_str(), "r");
        if (!p)
            return "";
        char buf[512] = "";
        bool got = fgets(buf, sizeof buf, p) != nullptr;
        pclose(p);
        if (!got || buf[0] == '?')
            return "";
        std::string out = buf;
        size_t cut = out.find_first_of(" \n");
        if (cut != std::string::npos)
            out.resize(cut);
        /* Relative to the working directory, like __FILE__ in the messages. */
        char cwd[4096];
        if (getcwd(cwd, sizeof cwd)) {
            std::string prefix = std::string(cwd) + "/";
            if (out.compare(0, prefix.size(), prefix) == 0)
                out.erase(0, prefix.size());
        }
        return out;
    }

    void start_shared_memory()
    {
        slots_.clear();
        static_used_ = 0;
        dynamic_bytes_ = (cfg_->shared_bytes + 15) & ~size_t(15);
        /* Poison, because real shared memory holds whatever the last block
         * left there: a kernel that reads before it writes must not pass. */
        if (settings().poison && cfg_->shared_bytes > 0)
            std::memset(shared_.data(), 0xFF, cfg_->shared_bytes);
    }

    /* Did access a (by another thread, since the last barrier, not ordered
     * by a warp meeting of both) conflict with one by thread u now? */
    bool races(const Access &a, int u) const
    {
        if (a.epoch != epoch_ || a.tid < 0 || a.tid == u)
            return false;
        if (a.tid / 32 == u / 32 && warp_epoch_[(size_t)u / 32] != a.warp_epoch)
            return false;
        return true;
    }

    uint64_t next_random()
    {
        rng_ ^= rng_ << 13;
        rng_ ^= rng_ >> 7;
        rng_ ^= rng_ << 17;
        return rng_;
    }

    /* A uniform pick in [0, n) without a division (Lemire's method). */
    size_t below(size_t n) { return (size_t)(((unsigned __int128)next_random() * n) >> 64); }

    void run_round()
    {
        if (settings().shuffle)
            for (size_t i = order_.size(); i > 1; --i)
                std::swap(order_[i - 1], order_[below(i)]);
        for (int i : order_) {
            EmuThread &t = threads_[(size_t)i];
            if (t.state == State::Runnable)
                resume(t);
            if (!error_.empty())
                return;
            if (stop_->load(std::memory_order_relaxed)) {
                error_ = format("kernel '%s' interrupted (Ctrl-C)", cfg_->name);
                return;
            }
        }
    }

    bool all_done() const
    {
        for (const EmuThread &t : threads_)
            if (t.state != State::Done)
                return false;
        return true;
    }

    std::string where(const EmuThread &t) const
    {
        const uint3 &bi = tls_block.block_idx;
        return format("kernel '%s', block (%u, %u, %u), thread (%u, %u, %u)", cfg_->name, bi.x, bi.y,
                      bi.z, t.idx.x, t.idx.y, t.idx.z);
    }

    /* Called when no thread is runnable. Returns false after recording an
     * error when the waiting threads can never all meet. */
    bool release_barrier()
    {
        size_t n = threads_.size();
        bool released = false;
        for (size_t base = 0; base < n; base += 32) {
            size_t lanes = std::min<size_t>(32, n - base);
            unsigned exists = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
            unsigned waiting = 0, done = 0, wanted = 0;
            for (size_t l = 0; l < lanes; ++l) {
                const EmuThread &t = threads_[base + l];
                if (t.state == State::AtWarpBarrier) {
                    waiting |= 1u << l;
                    wanted |= t.warp_mask;
                } else if (t.state == State::Done) {
                    done |= 1u << l;
                }
            }
            if (!waiting)
                continue;
            wanted &= exists;
            if (wanted & done) {
                int lane = __builtin_ctz(wanted & done);
                int waiter = __builtin_ctz(waiting);
                error_ = format("warp-level divergence in %s: lane %d of warp %zu has exited, but lane "
                                "%d waits for it at a warp shuffle/sync with mask 0x%08x",
                                where(threads_[base + (size_t)waiter]).c_str(), lane, base / 32, waiter,
                                threads_[base + (size_t)waiter].warp_mask);
                return false;
            }
            if ((wanted & waiting) == wanted) {
                ++warp_epoch_[base / 32];
                for (size_t l = 0; l < lanes; ++l)
                    if (waiting & (1u << l))
                        threads_[base + l].state = State::Runnable;
                released = true;
            }
        }
        if (released)
            return true;

        size_t at_block = 0, done = 0;
        const EmuThread *first_done = nullptr, *first_block = nullptr, *first_warp = nullptr;
        for (const EmuThread &t : threads_) {
            if (t.state == State::AtBlockBarrier) {
                ++at_block;
                if (!first_block)
                    first_block = &t;
            } else if (t.state == State::Done) {
                ++done;
                if (!first_done)
                    first_done = &t;
            } else if (t.state == State::AtWarpBarrier && !first_warp) {
                first_warp = &t;
            }
        }
        if (at_block == 0)
            return true; /* everybody has returned: the block is finished */
        if (at_block == n) {
            /* Every thread must wait at the same __syncthreads() statement
             * (compute-sanitizer's synccheck says the same). */
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
            ++epoch_;
            for (EmuThread &t : threads_)
                t.state = State::Runnable;
            return true;
        }
        if (first_done && !first_warp) {
            error_ = format("barrier divergence in %s: %zu of %zu threads wait at __syncthreads(), but "
                            "%zu threads of the block have exited (e.g. thread (%u, %u, %u)); every "
                            "thread of a block must reach each __syncthreads()",
                            where(*first_block).c_str(), at_block, n, done, first_done->idx.x,
                            first_done->idx.y, first_done->idx.z);
        } else {
            const EmuThread *w = first_warp ? first_warp : first_block;
            error_ = format("barrier divergence in %s: %zu of %zu threads wait at __syncthreads() "
                            "while thread (%u, %u, %u) waits at a warp shuffle/sync; the threads can "
                            "never all meet",
                            where(*first_block).c_str(), at_block, n, w->idx.x, w->idx.y, w->idx.z);
        }
        return false;
    }

    /* Resume every suspended thread with aborting_ set: each one throws
     * KernelAbort out of its barrier and unwinds its own stack. */
    void abort_block()
    {
        aborting_ = true;
        for (EmuThread &t : threads_)
            if (t.state != State::Done && t.fiber)
                resume(t);
        aborting_ = false;
    }

    const LaunchConfig *cfg_ = nullptr;
    const std::atomic<bool> *stop_ = &never_interrupted;
    void (*body_)(void *) = nullptr;
    void *kctx_ = nullptr;
    StackPool pool_;
    std::vector<EmuThread> threads_;
    std::vector<int> order_;
    std::vector<unsigned char> shared_;
    std::deque<SharedSlot> slots_; /* deque: SharedArrayInfo pointers stay valid */
    SharedArrayInfo dyn_info_{};
    std::vector<ShadowWord> shadow_;
    std::vector<uint32_t> warp_epoch_;
    uint64_t epoch_ = 0;
    size_t static_used_ = 0;
    size_t dynamic_bytes_ = 0;
    EmuThread *current_ = nullptr;
    bool aborting_ = false;
    std::string error_;
    cudaError_t error_code_ = cudaErrorLaunchFailure;
    uint64_t rng_ = 1;
};

thread_local BlockRunner *tls_runner = nullptr;

BlockRunner &runner_of_this_thread()
{
    static thread_local BlockRunner runner;
    return runner;
}

BlockRunner &running()
{
    if (!tls_runner)
        throw std::logic_error("a device function (__syncthreads, a shuffle, __shared__) was called "
                               "outside a kernel");
    return *tls_runner;
}

/* ---- faults inside kernels ------------------------------------------------
 * A SIGSEGV or SIGBUS while a CUDA thread runs (a guard page, a freed
 * allocation, a wild pointer) is a kernel error, not the end of the process:
 * the handler rewrites the thread's context so that, when it returns, the
 * thread "calls" fault_trampoline from the faulting instruction; that
 * records the error and switches back to the scheduler for good. Any other
 * fault goes to the handler that was there before (or the default: the
 * process ends, as it would have). Linux on x86-64 and arm64. */
struct sigaction previous_segv, previous_bus;
thread_local void *fault_addr = nullptr;
thread_local void *fault_pc = nullptr;
thread_local bool fault_write = false;
thread_local bool fault_uninitialised = false;

[[noreturn]] void fault_trampoline()
{
    tls_runner->fault_exit(fault_addr, fault_pc, fault_write, fault_uninitialised);
}

extern "C" void on_fault(int sig, siginfo_t *info, void *uctx)
{
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
    /* si_code > 0: a real fault (not a SIGSEGV sent with kill or raise). */
    const bool in_kernel = tls_runner && tls_runner->in_cuda_thread();
    FirstTouch touch = FirstTouch::NotUnwritten;
    if (info->si_code > 0) {
        /* Full mode: the first write to a page of device memory (emu_memory.cpp). */
        touch = device_first_touch(info->si_addr, fault_was_write(uctx), in_kernel);
        if (touch == FirstTouch::Retry)
            return;
    }
    if (info->si_code > 0 && in_kernel) {
        ucontext_t *uc = static_cast<ucontext_t *>(uctx);
        fault_addr = info->si_addr;
        fault_uninitialised = touch == FirstTouch::UninitialisedRead;
#if defined(__x86_64__)
        greg_t pc = uc->uc_mcontext.gregs[REG_RIP];
        fault_pc = (void *)pc;
        fault_write = fault_was_write(uctx);
        greg_t sp = uc->uc_mcontext.gregs[REG_RSP] - 256; /* past the red zone */
        sp &= ~(greg_t)15;
        sp -= 8; /* as after a call: a return address on an aligned stack */
        *reinterpret_cast<greg_t *>(sp) = pc;
        uc->uc_mcontext.gregs[REG_RSP] = sp;
        uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)&fault_trampoline;
#else
        fault_pc = (void *)uc->uc_mcontext.pc;
        fault_write = fault_was_write(uctx);
        uc->uc_mcontext.regs[30] = uc->uc_mcontext.pc;
        uc->uc_mcontext.sp = (uc->uc_mcontext.sp - 256) & ~(uint64_t)15;
        uc->uc_mcontext.pc = (uint64_t)(uintptr_t)&fault_trampoline;
#endif
        return;
    }
#endif
    const struct sigaction &prev = sig == SIGSEGV ? previous_segv : previous_bus;
    if (prev.sa_flags & SA_SIGINFO) {
        prev.sa_sigaction(sig, info, uctx);
    } else if (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN) {
        /* The default: a real fault happens again when the instruction is
         * retried, and ends the process; a sent signal is sent again. */
        signal(sig, SIG_DFL);
        if (info->si_code <= 0)
            raise(sig);
    } else {
        prev.sa_handler(sig);
    }
}

} /* namespace */

void install_fault_handler()
{
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction mine;
        std::memset(&mine, 0, sizeof mine);
        mine.sa_sigaction = on_fault;
        sigemptyset(&mine.sa_mask);
        mine.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
        sigaction(SIGSEGV, &mine, &previous_segv);
        sigaction(SIGBUS, &mine, &previous_bus);
    });
}

namespace {

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

void run_kernel(const LaunchConfig &cfg, void (*body)(void *), void *kctx)
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
        return;
    }
    size_t limit = dynamic_shared_limit(cfg.kernel);
    if (cfg.shared_bytes > limit) {
        record_error(cudaErrorInvalidValue,
                     format("kernel '%s' launched with %zu bytes of dynamic shared memory; its limit is %zu "
                            "(raise it with cudaFuncSetAttribute)", cfg.name, cfg.shared_bytes, limit));
        return;
    }
    /* An accepted launch: tests ask which kernels an entry point ran. */
    count_launch(cfg.kernel);

    /* Ctrl-C: a handler of our own while the launch runs (see on_sigint);
     * only on the main thread, whose signal handlers Python runs, and only
     * over a handler that a program installed (with SIG_DFL, Ctrl-C ends
     * the process at once anyway; with SIG_IGN it is ignored). */
    struct sigaction previous;
    bool handling = false;
    if (syscall(SYS_gettid) == getpid() && sigaction(SIGINT, nullptr, &previous) == 0 &&
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

void sync_block(const char *file, int line)
{
    BlockRunner &r = running();
    EmuThread &me = r.current();
    me.sync_file = file;
    me.sync_line = line;
    r.wait(State::AtBlockBarrier, 0);
}

void warp_exchange(unsigned mask, const void *value, void *out, size_t bytes, int src_lane)
{
    BlockRunner &r = running();
    EmuThread &me = r.current();
    std::memcpy(me.exchange, value, bytes);
    /* First meeting: every lane has published its value. */
    r.wait(State::AtWarpBarrier, mask);
    if (src_lane >= 0) {
        EmuThread *src = r.thread_at((me.linear & ~31) + src_lane);
        if (src)
            std::memcpy(out, src->exchange, bytes);
    }
    /* Second meeting: nobody overwrites its slot before everyone has read. */
    r.wait(State::AtWarpBarrier, mask);
}

unsigned warp_ballot(unsigned mask, int predicate)
{
    BlockRunner &r = running();
    EmuThread &me = r.current();
    me.ballot = predicate != 0;
    r.wait(State::AtWarpBarrier, mask);
    unsigned bits = 0;
    int base = me.linear & ~31;
    for (int l = 0; l < 32; ++l) {
        EmuThread *t = r.thread_at(base + l);
        if (t && (mask & (1u << l)) && t->ballot)
            bits |= 1u << l;
    }
    r.wait(State::AtWarpBarrier, mask);
    return bits;
}

int lane_id(void) { return running().current().linear & 31; }

void *block_shared_alloc(const char *file, int line, size_t bytes)
{
    return running().shared_alloc(file, line, bytes);
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

void shared_access(const SharedArrayInfo *info, const void *elem, bool write, int line)
{
    running().access(info, elem, write, line);
}

void shared_vector_access(const SharedArrayInfo *info, const void *p, size_t bytes, bool write, int line)
{
    running().vector_access(info, p, bytes, write, line);
}

} /* namespace mt_emu */
