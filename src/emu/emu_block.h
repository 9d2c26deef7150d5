/*
 * emu_block.h: the block scheduler of the CPU emulator, shared by its files
 * (the interface the translated .cu files see is emu.h):
 *
 *   emu_fibers.cpp   worker fibers and their stacks; handing the CPU from one
 *                    CUDA thread to the next; the calls that make a thread
 *                    wait (__syncthreads, shuffles, ballots)
 *   emu_switch.cpp   the switch from one stack to another
 *   emu_block.cpp    running a block: rounds, releasing barriers, reporting
 *                    divergence
 *   emu_shared.cpp   shared memory, and its bounds and race checks (full mode)
 *   emu_faults.cpp   faults (SIGSEGV, SIGBUS) inside kernels
 *   emu_async.cpp    asynchronous copies into shared memory (cp.async)
 *   emu_launch.cpp   launching a kernel, Ctrl-C, and the __shared__ calls
 *                    kernels make
 *
 * Within a block every CUDA thread runs on a *worker*: a fiber (a stack of
 * its own, and a saved stack pointer while it waits; a coroutine that can
 * stop in the middle of the kernel, at a barrier, and be resumed later). A
 * worker whose CUDA thread returns takes the next thread that has not
 * started yet and runs it on the same stack, so a kernel without barriers
 * costs one function call per thread, not a fiber. A thread that waits at a
 * barrier keeps its worker (its stack holds the kernel's frame) and hands
 * the CPU straight to the next thread of the round; only at the end of a
 * round does control go back to the block's scheduler,
 * which releases the barrier the threads wait at.
 */
#ifndef MT_EMU_BLOCK_H
#define MT_EMU_BLOCK_H

#include "emu_internal.h"

#include <atomic>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

namespace mt_emu {

/* Switching stacks (emu_switch.cpp). A suspended context is its saved stack
 * pointer. make_context prepares the stack below `top` (of `size` bytes) so
 * that the first switch to it calls mt_emu_worker_start(); switch_context
 * saves the running context in *save and resumes `to`, returning when some
 * switch resumes *save. */
void *make_context(void *top, size_t size);
void switch_context(void **save, void *to);
extern "C" [[noreturn]] __attribute__((visibility("hidden"))) void mt_emu_worker_start();

enum class State : unsigned char { Runnable, AtBlockBarrier, AtWarpBarrier, Done };
/* What a lane does at a warp-level meeting. */
enum class Meeting : unsigned char { Sync, Shuffle, Ballot };

/* One CUDA thread of the running block: a cache line of its own, as the
 * scheduler touches one per thread it switches to. */
struct alignas(64) EmuThread {
    /* At a shuffle or ballot: its value (or predicate) going in, and the
     * value it receives coming out (written when the meeting is released). */
    alignas(16) unsigned char exchange[16];
    void *cont = nullptr;            /* where it waits (its stack), while it waits */
    const char *sync_file = nullptr; /* the __syncthreads() it waits at */
    uint3 idx{};
    int linear = 0;
    unsigned warp_mask = 0;
    int sync_line = 0;
    State state = State::Runnable;
    bool started = false; /* has a worker (its stack holds the kernel's frame) */
    Meeting meeting = Meeting::Sync;
    signed char src_lane = -1;  /* the lane whose value a shuffle reads */
    unsigned char bytes = 0;    /* the size of that value */
};

/* What a warp's lanes are doing, kept up to date as they arrive, so that
 * releasing a warp-level meeting looks at that warp only. */
struct WarpState {
    unsigned exists = 0;  /* the lanes the block has */
    unsigned waiting = 0; /* lanes waiting at a shuffle, __syncwarp or ballot */
    unsigned wanted = 0;  /* the lanes their masks name */
    unsigned done = 0;    /* lanes that have returned */
    uint32_t meetings = 0; /* how often its lanes have met (race checks) */
    bool pending = false;  /* listed in BlockRunner::pending_warps_ */
};

/* One asynchronous copy a thread has issued and not yet waited for: it lands
 * (the bytes are copied) when the thread waits for its group. */
struct AsyncCopy {
    void *dst;
    const void *src;
    const SharedArrayInfo *info; /* for the checks; null: unchecked memory */
    unsigned group;              /* the thread's commit count when issued */
    int line;
    unsigned char bytes;     /* 4, 8 or 16 */
    unsigned char src_bytes; /* read from src; the rest are zeros */
};
struct AsyncQueue {
    std::vector<AsyncCopy> pending;
    unsigned committed = 0; /* groups committed so far */
};
/* Full check: a shared word an asynchronous copy will write, until it lands
 * (valid while `block` is the running block's serial number). */
struct PendingWord {
    uint64_t block = 0;
    int tid = -1; /* the issuing thread */
    int line = 0; /* where it issued the copy */
};

/* Thrown inside a CUDA thread to unwind it when its block has failed. */
struct KernelAbort {};
/* Thrown inside a CUDA thread by a runtime check (e.g. shared memory use). */
struct KernelError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct SharedSlot {
    const char *name;
    const char *type; /* a variable that is not an array: its type's text */
    const char *file;
    int line;
    size_t offset;
    size_t bytes;
    bool has_info;
    SharedArrayInfo info;
};

/* Race detection (MINITENSOR_EMU_CHECK=full): what the last accesses to one
 * 4-byte word of shared memory were (to one byte, in an array of elements
 * narrower than a word: bools). An access is "since the last barrier"
 * when its epoch is the block's current one; lanes of one warp that have met
 * (shuffle, __syncwarp, ballot) since an access are ordered after it. */
struct Access {
    uint32_t epoch = 0; /* the block's epoch, low 32 bits (0: never) */
    uint32_t warp_epoch = 0;
    /* > 0: the line of a checked access; < 0: -1 - the index in raw_pcs_
     * of the code address of an access whose line addr2line will name */
    int32_t line = 0;
    int16_t tid = -1;
};
/* One cache line per shadowed word: an access touches one line. */
struct alignas(64) ShadowWord {
    Access write;
    Access read;       /* the first reader since the last barrier */
    Access other_read; /* the latest reader other than that one */
    uint32_t written_in = 0; /* the block (serial, low 32 bits) that last wrote it */
};
/* What an access ran into: a race with `other` ("written", "read"), an
 * asynchronous copy in flight ("in flight"), or a word no thread of the
 * block has written ("uninitialised"); kind null: nothing. */
struct Hazard {
    const char *kind = nullptr;
    Access other;
};
/* The first read of a shared word that nothing wrote (full check). */
struct UninitRead {
    int tid = -1;
    int line = 0;
    const void *pc = nullptr;
    const void *p = nullptr; /* at the alias */
    const char *file = nullptr; /* of a checked access */
};
/* How a faulting CUDA thread ends (fault_exit). */
enum class FaultKind : unsigned char { Illegal, Uninitialised, StackOverflow, SharedHazard };

/* What a launch that installed no Ctrl-C handler watches: never set. */
extern const std::atomic<bool> never_interrupted;

/* Runs blocks of one launch on the current OS thread (one per OS thread).
 * Hidden from the library's symbol table, so that calls between its parts
 * are direct calls (no PLT) that the compiler may inline. */
class __attribute__((visibility("hidden"))) BlockRunner {
public:
    BlockRunner();
    ~BlockRunner();

    void begin_launch(const LaunchConfig &cfg, void (*body)(void *), void *kctx,
                      const std::atomic<bool> *stop);
    /* Runs one block to completion; false (and error()) when it failed. */
    bool run_block(uint3 block_idx);
    const std::string &error() const { return error_; }
    cudaError_t error_code() const { return error_code_; }
    bool in_cuda_thread() const { return current_ != nullptr; }

    /* ---- called from inside a CUDA thread (emu_launch.cpp) --------------- */
    EmuThread &current() { return *current_; }
    EmuThread *thread_at(int linear)
    {
        return linear >= 0 && (size_t)linear < threads_.size() ? &threads_[(size_t)linear] : nullptr;
    }
    void arrive_at_sync(const char *file, int line);
    /* At a warp-level meeting: kind, the lanes of `mask`; for a shuffle the
     * lane to read (-1: none) and the value's size (in exchange). */
    void arrive_at_warp(unsigned mask, Meeting kind, int src_lane = -1, size_t bytes = 0);
    /* Suspends the current thread (which has arrived somewhere) until its
     * barrier is released; throws KernelAbort when its block failed. */
    void wait();
    /* Runs on a faulting CUDA thread's stack (emu_faults.cpp): records the
     * error and leaves the thread for good. */
    [[noreturn]] void fault_exit(void *addr, void *pc, bool write, FaultKind kind);
    /* Full mode, in the fault handler: a fault at addr in this block's raw
     * shared memory is recorded for the checks (true); a hazard it ran into
     * is kept for fault_exit (raw_hazard). False: not raw shared memory. */
    bool raw_shared_fault(void *addr, bool write, void *pc, bool &hazard);
    /* The stack whose guard holds addr: its top; null if none. */
    void *stack_of_guard(const void *addr) const;

    /* ---- shared memory (emu_shared.cpp) ---------------------------------- */
    void *shared_alloc(const char *name, const char *type, const char *file, int line, size_t bytes);
    void *dynamic_shared() { return shared_; }
    size_t dynamic_bytes() const { return cfg_->shared_bytes; }
    const SharedArrayInfo *array_info(const char *name, const char *file, int line, int rank,
                                      const size_t *dims, size_t elem_size, bool dynamic);
    [[noreturn]] void index_error(const SharedArrayInfo *info, const void *sub, int sub_rank,
                                  long long index, size_t extent, int line);
    void access(const SharedArrayInfo *info, const void *elem, bool write, int line, const void *pc = nullptr);
    /* A vector load or store through a pointer into the array (&tile[i][j]). */
    void vector_access(const SharedArrayInfo *info, const void *p, size_t bytes, bool write, int line);
    /* Each word of [p, p + bytes) (inside the array), for the race check. */
    void words_access(const SharedArrayInfo *info, const void *p, size_t bytes, bool write, int line,
                      const void *pc = nullptr);
    const SharedArrayInfo *member_info(const void *p, const char *member, size_t n, size_t elem_size);
    /* Written by the emulator for the thread (WMMA, an unchecked copy). */
    void mark_initialised(const void *p, size_t bytes);
    /* Full mode: a read at p (the alias) that the emulator does for the
     * thread, as a wgmma twin reads its operands: recorded as a raw access
     * at p is in the fault handler, without the fault's two signals and two
     * mprotect calls; a hazard is a kernel error naming pc's line. */
    void emulated_read(const void *p, const void *pc);
    /* MINITENSOR_EMU_INTERLEAVE: the current thread lets the others of its
     * round run before it goes on. */
    void yield_after_read();

    /* ---- asynchronous copies (emu_async.cpp) ----------------------------- */
    void async_copy(const SharedArrayInfo *info, void *dst, const void *src, size_t bytes, size_t src_bytes,
                    int line);
    void async_commit();
    void async_wait(int prior);

    /* ---- for the mbarriers and TMA copies (emu_tma.cpp) ------------------ */
    /* The current thread waits for the next round and the others run: a
     * thread that spins on an mbarrier. (Into this round, as
     * yield_after_read does, the round would never end while it spins, and
     * the warp meetings released between rounds would wait forever.) */
    void yield_to_next_round();
    uint64_t block_serial() const { return block_serial_; }
    std::string where_running() const { return where(*current_); }

private:
    void mark_pending(const void *p, size_t bytes, int tid, int line);
    /* emu_fibers.cpp */
    void *new_worker();
    void switch_to(void *&to, void **save);
    void enter(EmuThread &t, void **save);
    EmuThread *next_thread();
    [[gnu::cold, gnu::noinline]] EmuThread *interrupted();
    friend void mt_emu_worker_start();
    [[noreturn]] void worker_loop();
    void run_thread(EmuThread &t);
    void finish(EmuThread &t);

    /* emu_block.cpp */
    void run_round();
    bool release_barrier();
    bool release_warps(bool &released);
    void exchange_values(size_t base, unsigned waiting);
    bool report_divergence();
    void abort_block();
    std::string where(const EmuThread &t) const;
    uint64_t next_random();
    size_t below(size_t n);

    /* emu_shared.cpp */
    void start_shared_memory();
    void acquire_shared_memory();
    void release_shared_memory();
    bool races(const Access &a, int u) const;
    void next_epoch();
    const void *raw_pc(int32_t line) const;
    [[gnu::always_inline]] inline Hazard record(const void *p, size_t unit, bool write, int line, const void *pc,
                                                const char *file);
    std::string describe_shared(const void *p) const;
    size_t unit_at(const void *p) const;
    std::string hazard_message(const Hazard &h, const void *p, bool write, const std::string &at) const;
    /* "file:line" of a checked access; addr2line's answer for one at pc */
    static std::string access_place(const SharedArrayInfo *info, int line, const void *pc);
    bool report_uninitialised_read();

    const LaunchConfig *cfg_ = nullptr;
    const std::atomic<bool> *stop_ = &never_interrupted;
    void (*body_)(void *) = nullptr;
    void *kctx_ = nullptr;

    /* Workers: the parked ones, every stack, and the way back to run_block. */
    std::vector<void *> parked_;
    std::vector<std::pair<unsigned char *, size_t>> stacks_; /* mappings, guard first */
    void *alt_stack_ = nullptr; /* the signal stack this runner installed */
    void *scheduler_ = nullptr;
    unsigned stack_colour_ = 0;

    /* The block's threads and their bookkeeping. */
    std::vector<EmuThread> threads_;
    uint3 layout_{0, 0, 0};          /* the block shape their idx are for */
    std::vector<WarpState> warps_;
    std::vector<int> pending_warps_; /* warps with lanes waiting */
    std::vector<int> round_;         /* this round's threads, in their order */
    size_t round_pos_ = 0;           /* the next one to run */
    std::vector<int> next_round_;    /* threads released for the next round */
    size_t at_block_ = 0;            /* threads waiting at __syncthreads() */
    size_t done_ = 0;                /* threads that have returned */
    const char *sync_file_ = nullptr; /* where the first of them waits */
    int sync_line_ = 0;
    bool sync_mismatch_ = false;     /* another waits at another statement */
    EmuThread *current_ = nullptr;
    /* threadIdx of the running thread: tls_thread_idx points here for the
     * whole launch, so a switch writes this, not a thread-local variable
     * (which costs a call in a library loaded with dlopen). */
    uint3 current_idx_{};
    bool aborting_ = false;
    std::string error_;
    cudaError_t error_code_ = cudaErrorLaunchFailure;
    uint64_t rng_ = 1;

    /* Shared memory and its checks. */
    unsigned char *shared_ = nullptr; /* checked accesses go here (the alias) */
    unsigned char *raw_ = nullptr;    /* raw ones here (full mode: faults) */
    int arena_slot_ = -1;             /* its place in the arena; -1: own_shared_ */
    std::vector<unsigned char> own_shared_;
    Hazard raw_hazard_;               /* what a raw access ran into */
    UninitRead uninit_;               /* to report at the next barrier */
    std::vector<const void *> raw_pcs_; /* code addresses of accesses (Access::line < 0) */
    const void *raw_addr_ = nullptr;
    bool raw_write_ = false;
    std::deque<SharedSlot> slots_; /* deque: SharedArrayInfo pointers stay valid */
    struct MemberInfo {
        size_t offset;
        std::string name;
        SharedArrayInfo info;
    };
    std::deque<MemberInfo> members_; /* arrays inside __shared__ structs */
    SharedArrayInfo dyn_info_{};
    std::vector<ShadowWord> shadow_;      /* one entry per 4-byte word               */
    std::vector<ShadowWord> byte_shadow_; /* one per byte, for elements of 1-2 bytes */
    uint64_t epoch_ = 0;
    size_t static_used_ = 0;
    size_t dynamic_bytes_ = 0;

    /* Asynchronous copies in flight, one queue per thread (emu_async.cpp);
     * emptied when a block starts, if any block of the launch used one. */
    std::vector<AsyncQueue> async_;
    bool async_used_ = false;             /* by this launch */
    std::vector<PendingWord> async_words_; /* one per 4-byte shared word (full check) */
    uint64_t block_serial_ = 0;            /* counts the blocks this runner ran */
    bool async_pending_ = false;           /* some word of this block is in flight */
};

/* The runner of the launch running on this OS thread (emu_launch.cpp). */
extern thread_local BlockRunner *tls_runner;

/* The runner of the calling CUDA thread's block. */
inline BlockRunner &running()
{
    if (__builtin_expect(!tls_runner, 0))
        throw std::logic_error("a device function (__syncthreads, a shuffle, __shared__) was called "
                               "outside a kernel");
    return *tls_runner;
}

/* Catches faults inside kernels from the first launch on (emu_faults.cpp). */
void install_fault_handler();
/* "src/file.cu:123" for a code address, through addr2line ("" if unknown). */
std::string source_line(const void *pc);

} /* namespace mt_emu */

#endif /* MT_EMU_BLOCK_H */
