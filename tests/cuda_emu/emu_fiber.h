// Stackful fibers for the CUDA emulator's threads (tests/cuda_emu): on x86-64 a switch is a few
// instructions (callee-saved registers and the stack pointer; the floating-point control words are
// not saved, kernels do not change them), elsewhere it is ucontext's swapcontext. Each fiber has a
// 256 KiB stack with a guard page below it. Under AddressSanitizer every switch is annotated so
// ASan knows which stack is live. Not thread-safe: one host thread drives all fibers.
#ifndef CUDA_EMU_FIBER_H
#define CUDA_EMU_FIBER_H

struct EmuFiber;

EmuFiber *emu_fiber_host(void);               // the host thread's own context
EmuFiber *emu_fiber_new(void (*entry)(void)); // entry starts on the first switch to it; never returns
void emu_fiber_switch(EmuFiber *from, EmuFiber *to);  // from must be the running context

#endif
