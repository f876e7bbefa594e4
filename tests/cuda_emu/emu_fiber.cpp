// Fibers for the CUDA emulator: see emu_fiber.h.
#include "emu_fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifdef EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifndef __x86_64__
#include <ucontext.h>
#endif

static const size_t STACK_BYTES = 256 * 1024;

struct EmuFiber {
#ifdef __x86_64__
    void *sp;  // saved stack pointer; the callee-saved registers sit on that stack
#else
    ucontext_t uc;
#endif
    void (*entry)(void);
    const void *stack_bottom;  // for ASan; learnt on the first switch away for the host context
    size_t stack_size;
    void *fake_stack;
};

// The two ends of the switch in progress (one host thread drives all fibers).
static EmuFiber *g_from, *g_to;

#ifdef __x86_64__
// void emu_ctx_switch(void **save_sp, void *load_sp)
extern "C" void emu_ctx_switch(void **save_sp, void *load_sp);
asm(R"(
    .text
    .p2align 4
    .globl emu_ctx_switch
    .hidden emu_ctx_switch
    .type emu_ctx_switch, @function
emu_ctx_switch:
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
    .size emu_ctx_switch, .-emu_ctx_switch
)");
#endif

// Runs in the context just switched to: tells ASan which stack was left.
static void arrived(void *fake_stack) {
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(fake_stack, &g_from->stack_bottom, &g_from->stack_size);
#else
    (void)fake_stack;
#endif
}

static void fiber_start(void) {
    arrived(nullptr);
    g_to->entry();
    fprintf(stderr, "cuda_emu: a fiber's entry returned\n");
    abort();
}

EmuFiber *emu_fiber_host(void) {
    static EmuFiber host;
    return &host;
}

EmuFiber *emu_fiber_new(void (*entry)(void)) {
    // [guard page | stack | the EmuFiber]: an overflow runs into the guard; the record lives in the
    // mapping, not on the heap, as fibers live until the process ends.
    const size_t page = (size_t)sysconf(_SC_PAGESIZE), record = (sizeof(EmuFiber) + page - 1) / page * page;
    char *base = (char *)mmap(nullptr, page + STACK_BYTES + record, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (base == MAP_FAILED || mprotect(base, page, PROT_NONE) != 0) {
        perror("cuda_emu: fiber stack");
        abort();
    }
    EmuFiber *f = new (base + page + STACK_BYTES) EmuFiber();
    f->entry = entry;
    f->stack_bottom = base + page;
    f->stack_size = STACK_BYTES;
#ifdef __x86_64__
    // emu_ctx_switch pops six registers, then returns into fiber_start with the stack aligned as
    // after a call (rsp = 8 mod 16); fiber_start's own return address is a null word.
    void **sp = (void **)(base + page + STACK_BYTES);
    *--sp = nullptr;
    *--sp = (void *)fiber_start;
    for (int i = 0; i < 6; i++) *--sp = nullptr;
    f->sp = sp;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = base + page;
    f->uc.uc_stack.ss_size = STACK_BYTES;
    f->uc.uc_link = nullptr;
    makecontext(&f->uc, fiber_start, 0);
#endif
    return f;
}

void emu_fiber_switch(EmuFiber *from, EmuFiber *to) {
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(&from->fake_stack, to->stack_bottom, to->stack_size);
#endif
    g_from = from;
    g_to = to;
#ifdef __x86_64__
    emu_ctx_switch(&from->sp, to->sp);
#else
    swapcontext(&from->uc, &to->uc);
#endif
    arrived(from->fake_stack);
}
