// The CUDA emulator's runtime API (declared in cuda_runtime.h): memory, device queries, events,
// errors.
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <map>

#include "cuda_runtime.h"

static std::map<const char *, size_t> g_allocs;  // live allocations: start -> bytes
static cudaError_t g_last = cudaSuccess;         // for cudaGetLastError
static char g_msg[512];                          // what the last failing call found

static cudaError_t failed(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static cudaError_t failed(cudaError_t e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    g_last = e;
    return e;
}

bool emu_is_device(const void *p, size_t bytes) {
    const char *c = (const char *)p;
    auto it = g_allocs.upper_bound(c);
    if (!c || it == g_allocs.begin()) return false;
    --it;
    return bytes <= it->second && (size_t)(c - it->first) <= it->second - bytes;
}

cudaError_t cudaMalloc(void **p, size_t bytes) {
    void *m = nullptr;
    if (posix_memalign(&m, 256, bytes ? bytes : 1))
        return failed(cudaErrorMemoryAllocation, "out of memory (cudaMalloc of %zu bytes)", bytes);
    memset(m, 0xff, bytes);
    g_allocs[(const char *)m] = bytes;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    auto it = g_allocs.find((const char *)p);
    if (it == g_allocs.end())
        return failed(cudaErrorInvalidValue, "invalid argument (cudaFree of %p: not the start of a live allocation)",
                      p);
    g_allocs.erase(it);
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t bytes) {
    if (bytes && !emu_is_device(p, bytes))
        return failed(cudaErrorInvalidValue, "invalid argument (cudaMemset of %zu bytes at %p: not device memory)",
                      bytes, p);
    memset(p, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t) {
    return cudaMemset(p, value, bytes);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    static const char *const names[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice", "Default"};
    if ((unsigned)kind > cudaMemcpyDefault)
        return failed(cudaErrorInvalidValue, "invalid argument (cudaMemcpyKind %d)", (int)kind);
    const bool dst_dev = emu_is_device(dst, bytes), src_dev = emu_is_device(src, bytes);
    const bool want_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool want_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind != cudaMemcpyDefault && bytes && (dst_dev != want_dst || src_dev != want_src))
        return failed(cudaErrorInvalidValue,
                      "invalid argument (cudaMemcpy%s of %zu bytes: dst %p is %s, src %p is %s)", names[kind], bytes,
                      dst, dst_dev ? "device memory" : "not device memory", src,
                      src_dev ? "device memory" : "not device memory");
    if (bytes) memcpy(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = *total_bytes = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaGetDevice(int *device) { *device = 0; return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

struct EmuEvent {
    bool recorded;
    std::chrono::steady_clock::time_point when;
};

cudaError_t cudaEventCreate(cudaEvent_t *event) {
    *event = new EmuEvent();
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
    delete event;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
    *event = {true, std::chrono::steady_clock::now()};
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
    if (!start->recorded || !end->recorded)
        return failed(cudaErrorInvalidResourceHandle, "invalid resource handle (cudaEventElapsedTime of an event "
                      "that was never recorded)");
    *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
    const cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}

const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    }
    return "cudaErrorUnknown";
}
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : g_msg; }
