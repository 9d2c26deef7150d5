/*
 * emu_switch.cpp: switching the CPU from one stack to another, the one
 * machine-level idea of the emulator's fibers (see emu_fibers.cpp).
 *
 * A suspended context is nothing but a stack pointer: the registers a
 * function must preserve (the "callee-saved" ones of the platform's ABI) are
 * pushed on its stack, and the stack pointer is kept. Resuming it loads that
 * stack pointer and pops the registers back; the `ret` then returns into the
 * function that switched away, as if its call had just finished.
 *
 * On x86-64 (System V) the switch is eight instructions of our own. It does
 * not save the floating-point control words (MXCSR, the x87 control word)
 * as general-purpose libraries do: no CUDA kernel changes the rounding mode,
 * and those loads cost more than the rest of the switch (a barrier-heavy
 * kernel spent a fifth of its time on them). Elsewhere (or when built with
 * -DMT_EMU_BOOST_SWITCH, to test that path) Boost.Context's fcontext does
 * the same job.
 */
#include "emu_block.h"

#include <cstdint>

#if !(defined(__x86_64__) && defined(__linux__)) || defined(MT_EMU_BOOST_SWITCH)
#include <boost/context/detail/fcontext.hpp>
#endif

namespace mt_emu {

#if defined(__x86_64__) && defined(__linux__) && !defined(MT_EMU_BOOST_SWITCH)

extern "C" {
__attribute__((visibility("hidden"))) void mt_emu_switch(void **save, void *to);
__attribute__((visibility("hidden"))) void mt_emu_context_start();
}

/* mt_emu_switch(save, to): push the six callee-saved registers, store the
 * stack pointer in *save, load `to`, pop its registers, return into it.
 * mt_emu_context_start: where a new context's first `ret` lands; it calls
 * the worker's entry (which never returns). ".cfi_undefined rip" marks it
 * as the outermost frame for debuggers and unwinders. */
asm(R"(
    .pushsection .text
    .p2align 4
    .globl mt_emu_switch
    .hidden mt_emu_switch
    .type mt_emu_switch, @function
mt_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size mt_emu_switch, .-mt_emu_switch

    .p2align 4
    .globl mt_emu_context_start
    .hidden mt_emu_context_start
    .type mt_emu_context_start, @function
mt_emu_context_start:
    .cfi_startproc
    .cfi_undefined rip
    call mt_emu_worker_start
    ud2
    .cfi_endproc
    .size mt_emu_context_start, .-mt_emu_context_start
    .popsection
)");

void *make_context(void *top, size_t size)
{
    (void)size;
    /* The frame mt_emu_switch pops: six registers (zero), then the return
     * address. Placed so that after the `ret` the stack pointer is 16-byte
     * aligned, as a `call` from mt_emu_context_start needs. */
    uintptr_t aligned = reinterpret_cast<uintptr_t>(top) & ~uintptr_t(15);
    void **sp = reinterpret_cast<void **>(aligned - 72);
    for (int r = 0; r < 6; ++r)
        sp[r] = nullptr;
    sp[6] = reinterpret_cast<void *>(&mt_emu_context_start);
    sp[7] = nullptr;
    return sp;
}

void switch_context(void **save, void *to) { mt_emu_switch(save, to); }

#else /* Boost.Context's fcontext */

namespace fc = boost::context::detail;

/* A jump hands over the context it left; the data sent with it is the
 * slot where that context wants to be kept. */
static void context_start(fc::transfer_t from)
{
    *static_cast<void **>(from.data) = from.fctx;
    mt_emu_worker_start();
}

void *make_context(void *top, size_t size) { return fc::make_fcontext(top, size, &context_start); }

void switch_context(void **save, void *to)
{
    fc::transfer_t from = fc::jump_fcontext(to, save);
    *static_cast<void **>(from.data) = from.fctx;
}

#endif

} /* namespace mt_emu */
