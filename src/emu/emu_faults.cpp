/*
 * emu_faults.cpp: faults inside kernels.
 *
 * A SIGSEGV or SIGBUS while a CUDA thread runs (a guard page, a freed
 * allocation, a wild pointer) is a kernel error, not the end of the process:
 * the handler rewrites the thread's context so that, when it returns, the
 * thread "calls" fault_trampoline from the faulting instruction; that
 * records the error (naming the .cu line, through addr2line) and switches
 * back to the block's scheduler for good. Any other fault goes to the
 * handler that was there before (or the default: the process ends, as it
 * would have). Linux on x86-64 and arm64.
 *
 * Two faults are not errors in themselves. A first write to a page of device
 * memory nothing wrote yet (emu_memory.cpp) is let through. A raw access to
 * shared memory in full mode (emu_shared.cpp; x86-64) is recorded for the
 * checks, then its page is opened and the instruction retried with the
 * trap flag set: after that one instruction the CPU raises SIGTRAP, whose
 * handler closes the page again. A fault in the guard below a CUDA
 * thread's stack is a stack overflow; its report runs on the top of the
 * same stack (the overflowed frames are abandoned), since the faulting
 * stack pointer has no room left.
 */
#include "emu_block.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <dlfcn.h>
#include <signal.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <unistd.h>

namespace mt_emu {

/* "src/file.cu:123" for a code address, through addr2line (empty when
 * it cannot tell). */
std::string source_line(const void *pc)
{
    Dl_info info;
    if (!pc || !dladdr(pc, &info) || !info.dli_fname || !*info.dli_fname)
        return "";
    uintptr_t offset = (uintptr_t)pc - (uintptr_t)info.dli_fbase;
    std::string file = info.dli_fname;
    if (file.find('\'') != std::string::npos)
        return "";
    /* -i: the chain of inlined calls, innermost first; the first place
     * outside the emulator's own headers (a SharedRef's operator, say) is
     * the kernel's line. */
    std::string cmd = format("addr2line -C -i -e '%s' 0x%lx 2>/dev/null", file.c_str(), (unsigned long)offset);
    FILE *p = popen(cmd.c_str(), "r");
    if (!p)
        return "";
    std::string out;
    char buf[512];
    while (fgets(buf, sizeof buf, p)) {
        if (buf[0] == '?')
            continue;
        std::string place = buf;
        size_t cut = place.find_first_of(" \n");
        if (cut != std::string::npos)
            place.resize(cut);
        const bool emulator = place.find("src/emu/") != std::string::npos;
        if (out.empty() || (!emulator && out.find("src/emu/") != std::string::npos))
            out = place;
    }
    pclose(p);
    if (out.empty())
        return "";
    /* Relative to the working directory, like __FILE__ in the messages. */
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) {
        std::string prefix = std::string(cwd) + "/";
        if (out.compare(0, prefix.size(), prefix) == 0)
            out.erase(0, prefix.size());
    }
    return out;
}

namespace {

struct sigaction previous_segv, previous_bus, previous_trap;
thread_local void *fault_addr = nullptr;
thread_local void *fault_pc = nullptr;
thread_local bool fault_write = false;
thread_local FaultKind fault_kind = FaultKind::Illegal;
/* Raw shared pages opened for the instruction being single-stepped. */
thread_local uintptr_t open_pages[4];
thread_local int open_count = 0;

[[noreturn]] void fault_trampoline()
{
    tls_runner->fault_exit(fault_addr, fault_pc, fault_write, fault_kind);
}

#if defined(__linux__) && defined(__x86_64__)
constexpr greg_t kTrapFlag = 0x100; /* EFLAGS.TF: trap after one instruction */

/* The single step of a raw shared access is over: close its pages. */
extern "C" void on_trap(int sig, siginfo_t *info, void *uctx)
{
    if (open_count > 0) {
        for (int i = 0; i < open_count; ++i)
            mprotect((void *)open_pages[i], 4096, PROT_NONE);
        open_count = 0;
        static_cast<ucontext_t *>(uctx)->uc_mcontext.gregs[REG_EFL] &= ~kTrapFlag;
        return;
    }
    if (previous_trap.sa_flags & SA_SIGINFO) {
        previous_trap.sa_sigaction(sig, info, uctx);
    } else if (previous_trap.sa_handler == SIG_DFL || previous_trap.sa_handler == SIG_IGN) {
        signal(sig, previous_trap.sa_handler);
        raise(sig);
    } else {
        previous_trap.sa_handler(sig);
    }
}
#endif

extern "C" void on_fault(int sig, siginfo_t *info, void *uctx)
{
#if defined(__linux__) && (defined(__x86_64__) || defined(__aarch64__))
    /* si_code > 0: a real fault (not a SIGSEGV sent with kill or raise). */
    const bool in_kernel = tls_runner && tls_runner->in_cuda_thread();
    bool hazard = false;
#if defined(__x86_64__)
    /* Full mode: a raw access to shared memory, recorded; on to the access
     * itself, one instruction with its page open. */
    if (info->si_code > 0 && in_kernel &&
        tls_runner->raw_shared_fault(info->si_addr, fault_was_write(uctx),
                                     (void *)static_cast<ucontext_t *>(uctx)->uc_mcontext.gregs[REG_RIP], hazard) &&
        !hazard) {
        uintptr_t page = (uintptr_t)info->si_addr & ~(uintptr_t)4095;
        if (open_count < 4 && mprotect((void *)page, 4096, PROT_READ | PROT_WRITE) == 0) {
            open_pages[open_count++] = page;
            static_cast<ucontext_t *>(uctx)->uc_mcontext.gregs[REG_EFL] |= kTrapFlag;
            return;
        }
    }
#endif
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
        fault_kind = hazard ? FaultKind::SharedHazard
                     : touch == FirstTouch::UninitialisedRead ? FaultKind::Uninitialised
                                                               : FaultKind::Illegal;
        /* An overflowed stack: the report runs on the top of the same stack. */
        void *stack_top = tls_runner->stack_of_guard(info->si_addr);
        if (stack_top)
            fault_kind = FaultKind::StackOverflow;
#if defined(__x86_64__)
        greg_t pc = uc->uc_mcontext.gregs[REG_RIP];
        fault_pc = (void *)pc;
        fault_write = fault_was_write(uctx);
        greg_t sp = stack_top ? (greg_t)(uintptr_t)stack_top : uc->uc_mcontext.gregs[REG_RSP] - 256; /* past the red zone */
        sp &= ~(greg_t)15;
        sp -= 8; /* as after a call: a return address on an aligned stack */
        *reinterpret_cast<greg_t *>(sp) = pc;
        uc->uc_mcontext.gregs[REG_RSP] = sp;
        uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)&fault_trampoline;
#else
        fault_pc = (void *)uc->uc_mcontext.pc;
        fault_write = fault_was_write(uctx);
        uc->uc_mcontext.regs[30] = uc->uc_mcontext.pc;
        uc->uc_mcontext.sp = ((stack_top ? (uint64_t)(uintptr_t)stack_top : uc->uc_mcontext.sp) - 256) & ~(uint64_t)15;
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

/* Runs on the faulting CUDA thread's stack, called (by the fault handler's
 * rewrite of its context) as if from the faulting instruction: records the
 * error and leaves the thread for good. */
void BlockRunner::fault_exit(void *addr, void *pc, bool write, FaultKind kind)
{
    EmuThread &t = *current_;
    if (error_.empty()) {
        std::string line = source_line(pc);
        const bool uninitialised = kind == FaultKind::Uninitialised;
        if (kind == FaultKind::SharedHazard)
            error_ = hazard_message(raw_hazard_, raw_addr_, raw_write_, line.empty() ? "an unknown line" : line);
        else if (kind == FaultKind::StackOverflow)
            error_ = format("stack overflow in %s: the emulated thread's stack is %zu KiB; the kernel's local "
                            "variables and calls need more%s%s (a GPU thread's stack may be larger); set "
                            "MINITENSOR_EMU_STACK=<KiB> to raise it",
                            where(t).c_str(), settings().stack_bytes / 1024, line.empty() ? "" : ", at ",
                            line.c_str());
        else if (uninitialised)
            error_ = format("read of uninitialised device memory in %s: read at %p, %s, which nothing "
                            "(no kernel, cudaMemset or cudaMemcpy) has written%s%s",
                            where(t).c_str(), addr, describe_address(addr).c_str(),
                            line.empty() ? "" : ", at ", line.c_str());
        else
            error_ = format("illegal memory access in %s: %s at %p, %s%s%s", where(t).c_str(),
                            write ? "write" : "read", addr, describe_address(addr).c_str(),
                            line.empty() ? "" : ", at ", line.c_str());
        error_code_ = kind == FaultKind::Illegal           ? cudaErrorIllegalAddress
                      : kind == FaultKind::StackOverflow ? cudaErrorHardwareStackError
                                                         : cudaErrorLaunchFailure;
    }
    /* Its stack stops in the middle of the kernel and cannot be unwound:
     * the worker is never used again (its stack is freed with the others
     * when the OS thread ends). */
    finish(t);
    void *abandoned = nullptr;
    switch_to(scheduler_, &abandoned);
    std::abort(); /* a faulted thread is never resumed */
}

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
#if defined(__linux__) && defined(__x86_64__)
        if (check_full) {
            mine.sa_sigaction = on_trap;
            sigaction(SIGTRAP, &mine, &previous_trap);
        }
#endif
    });
}


} /* namespace mt_emu */
