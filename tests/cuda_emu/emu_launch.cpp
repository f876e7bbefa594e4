// The CUDA emulator's block scheduler: emu_launch runs a kernel's blocks one after another; the
// threads of a block run on fibers (emu_fiber.h), one at a time, each until it exits or waits at
// a __syncthreads or a warp shuffle. A fiber whose thread exits takes the block's next unstarted
// thread, so a kernel without barriers runs all its threads on one fiber. Once every thread waits
// or has exited, complete warps exchange their shuffle values and a barrier that every thread
// reached opens; waiting threads resume in thread order. Misuse aborts with the launch site (see
// emu.h).
#include <cstdarg>
#include <vector>

#include "emu.h"
#include "emu_fiber.h"

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

// Every __shared__ variable (emu.h puts them in this section; the linker defines the bounds).
extern "C" char __start_emu_shared[] __attribute__((weak));
extern "C" char __stop_emu_shared[] __attribute__((weak));

namespace {

enum State { NEW, READY, RUNNING, AT_SYNC, AT_SHFL, DONE };

struct Thread {
    State state;
    EmuFiber *fiber;
    const char *file;  // where it waits
    int line;
    int src;           // shuffle: source lane, value sent and received
    uint64_t in, out;
};

struct Launch {
    const char *kernel, *file;
    int line;
    dim3 grid, block;
    const std::function<void()> *body;
};

Launch g_launch;           // the launch in progress (kernel == nullptr: none)
bool g_in_block;           // a block is running (blockIdx is valid)
std::vector<Thread> g_th;  // the threads of the running block
int g_nt, g_next, g_done;  // threads per block, next unstarted thread, exited threads
int g_cur = -1;            // the running thread (-1: the scheduler)
std::vector<EmuFiber *> g_idle;

uint3 thread_index(int t) {
    const dim3 b = g_launch.block;
    return uint3(t % b.x, t / b.x % b.y, t / (b.x * b.y));
}

void run_threads(void) {
    EmuFiber *self = g_th[g_cur].fiber;
    for (;;) {
        while (g_next < g_nt) {
            const int t = g_next++;
            g_cur = t;
            g_th[t].state = RUNNING;
            g_th[t].fiber = self;
            threadIdx = thread_index(t);
            (*g_launch.body)();
            g_th[t].state = DONE;
            g_done++;
        }
        g_idle.push_back(self);
        g_cur = -1;
        emu_fiber_switch(self, emu_fiber_host());
    }
}

// Switches to fiber f to run thread t: a waiting thread, or the next unstarted one (f then goes on
// with the unstarted threads after it).
void resume(int t, EmuFiber *f) {
    g_cur = t;
    g_th[t].fiber = f;
    threadIdx = thread_index(t);
    emu_fiber_switch(emu_fiber_host(), f);
}

void park(State s, const char *file, int line) {
    Thread &th = g_th[g_cur];
    th.state = s;
    th.file = file;
    th.line = line;
    g_cur = -1;
    emu_fiber_switch(th.fiber, emu_fiber_host());
}

bool same_site(const Thread &a, const Thread &b) {
    return a.line == b.line && (a.file == b.file || !strcmp(a.file, b.file));
}

// emu_fail on behalf of thread t.
[[noreturn]] void fail_at(int t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fail_at(int t, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    g_cur = t;
    emu_fail("%s", msg);
}

// Complete warps exchange their shuffle values; returns whether any warp was released.
bool release_warps(void) {
    bool any = false;
    for (int w = 0; w * 32 < g_nt; w++) {
        const int lo = w * 32, lanes = g_nt - lo < 32 ? g_nt - lo : 32;
        int at = -1, nshfl = 0, ndone = 0;
        for (int l = 0; l < lanes; l++) {
            const State s = g_th[lo + l].state;
            if (s == AT_SHFL) { nshfl++; if (at < 0) at = lo + l; }
            ndone += s == DONE;
        }
        if (!nshfl) continue;
        if (nshfl + ndone == lanes && ndone)
            fail_at(at, "warp shuffle at %s:%d: %d lane(s) of the warp have exited", g_th[at].file,
                    g_th[at].line, ndone);
        if (nshfl < lanes) continue;
        if (lanes < 32)
            fail_at(at, "full-mask warp shuffle at %s:%d in a partial warp of %d lanes", g_th[at].file,
                    g_th[at].line, lanes);
        for (int l = 0; l < lanes; l++)
            if (!same_site(g_th[lo + l], g_th[at]))
                fail_at(lo + l, "lanes of one warp at different shuffles: %s:%d and %s:%d (lane %d)",
                        g_th[lo + l].file, g_th[lo + l].line, g_th[at].file, g_th[at].line, at % 32);
        for (int l = 0; l < lanes; l++) {
            Thread &th = g_th[lo + l];
            th.out = th.src >= 0 && th.src < lanes ? g_th[lo + th.src].in : th.in;
        }
        for (int l = 0; l < lanes; l++) g_th[lo + l].state = READY;
        any = true;
    }
    return any;
}

// Opens the barrier when every thread waits at it; returns whether it did.
bool release_barrier(void) {
    int first = -1, nsync = 0;
    for (int t = 0; t < g_nt; t++)
        if (g_th[t].state == AT_SYNC) { nsync++; if (first < 0) first = t; }
    if (!nsync || nsync + g_done < g_nt) return false;
    if (g_done)
        fail_at(first, "__syncthreads at %s:%d reached by %d of %d threads; the others have exited",
                g_th[first].file, g_th[first].line, nsync, g_nt);
    for (int t = 0; t < g_nt; t++)
        if (!same_site(g_th[t], g_th[first]))
            fail_at(t, "threads wait at different __syncthreads: %s:%d and %s:%d (thread %d)", g_th[t].file,
                    g_th[t].line, g_th[first].file, g_th[first].line, first);
    for (int t = 0; t < g_nt; t++) g_th[t].state = READY;
    return true;
}

[[noreturn]] void deadlock(void) {
    int nsync = 0, nshfl = 0, some = 0;
    for (int t = 0; t < g_nt; t++) {
        nsync += g_th[t].state == AT_SYNC;
        nshfl += g_th[t].state == AT_SHFL;
        if (g_th[t].state != DONE) some = t;
    }
    fail_at(some, "deadlock: %d thread(s) at __syncthreads, %d at warp shuffles (never completing their warp), "
            "%d exited; this thread waits at %s:%d", nsync, nshfl, g_done, g_th[some].file, g_th[some].line);
}

void run_block(void) {
    char *const shared = __start_emu_shared, *const shared_end = __stop_emu_shared;
    if (shared != shared_end) memset(shared, 0xff, (size_t)(shared_end - shared));
    for (int t = 0; t < g_nt; t++) g_th[t].state = NEW;
    g_next = g_done = 0;
    for (;;) {
        for (int t = 0; t < g_nt; t++)
            if (g_th[t].state == READY) resume(t, g_th[t].fiber);
        while (g_next < g_nt) {
            EmuFiber *f;
            if (g_idle.empty()) f = emu_fiber_new(run_threads);
            else { f = g_idle.back(); g_idle.pop_back(); }
            resume(g_next, f);
        }
        if (g_done == g_nt) return;
        const bool warps = release_warps();
        if (!release_barrier() && !warps) deadlock();
    }
}

}  // namespace

int emu_lane(void) { return g_cur % 32; }

void emu_syncthreads(const char *file, int line) {
    if (g_cur < 0) emu_fail("__syncthreads at %s:%d outside a kernel", file, line);
    park(AT_SYNC, file, line);
}

uint64_t emu_shfl_bits(const char *file, int line, unsigned mask, uint64_t bits, int src) {
    if (g_cur < 0) emu_fail("warp shuffle at %s:%d outside a kernel", file, line);
    if (mask != 0xffffffffu)
        emu_fail("warp shuffle at %s:%d: mask 0x%08x (only full masks are emulated)", file, line, mask);
    Thread &th = g_th[g_cur];
    th.in = bits;
    th.src = src;
    park(AT_SHFL, file, line);
    return g_th[g_cur].out;
}

void emu_launch(const char *kernel, const char *file, int line, dim3 grid, dim3 block,
                const std::function<void()> &body) {
    if (g_cur >= 0) emu_fail("kernel %s launched from device code at %s:%d (not emulated)", kernel, file, line);
    g_launch = {kernel, file, line, grid, block, &body};
    const unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    const char *why = !block.x || !block.y || !block.z || !grid.x || !grid.y || !grid.z ? "a zero dimension"
                      : block.x > 1024 || block.y > 1024 || block.z > 64 ? "block dimension over (1024, 1024, 64)"
                      : nt > 1024 ? "more than 1024 threads per block"
                      : grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535
                          ? "grid dimension over (2^31 - 1, 65535, 65535)"
                          : nullptr;
    if (why) emu_fail("invalid launch configuration grid (%u, %u, %u) block (%u, %u, %u): %s", grid.x, grid.y, grid.z,
                      block.x, block.y, block.z, why);
    g_nt = (int)nt;
    if ((int)g_th.size() < g_nt) g_th.resize(g_nt);
    gridDim = grid;
    blockDim = block;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx = uint3(x, y, z);
                g_in_block = true;
                run_block();
                g_in_block = false;
            }
    g_launch.kernel = nullptr;
}

void emu_fail(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g_launch.kernel) {
        fprintf(stderr, "cuda_emu: kernel %s launched at %s:%d", g_launch.kernel, g_launch.file, g_launch.line);
        if (g_in_block) fprintf(stderr, ", block (%u, %u, %u)", blockIdx.x, blockIdx.y, blockIdx.z);
        if (g_cur >= 0) {
            const uint3 t = thread_index(g_cur);
            fprintf(stderr, ", thread (%u, %u, %u)", t.x, t.y, t.z);
        }
        fprintf(stderr, ":\n  ");
    } else {
        fprintf(stderr, "cuda_emu: ");
    }
    fprintf(stderr, "%s\n", msg);
    abort();
}
