// A stand-in for NVIDIA's driver library (libcuda.so.1) that lets Ember's CUDA build run
// every step of a generation on a machine without an NVIDIA GPU, so that every kernel it
// launches is compiled by the real NVRTC and assembled by the real ptxas for a chosen GPU.
//
// Why: the CUDA path can only be timed on a lent GPU (15 minutes a session, rarely lent);
// a kernel that NVRTC or ptxas refuses would spend that time. This catches such kernels
// here, for the architectures artists own (sm_86, sm_89, sm_120) as well as the lent H100.
//
// What it does: device memory is zeroed host memory, copies are memcpy, a kernel launch
// does nothing (so its results read as zeros or stale values) and advances a virtual clock
// that events read. cuModuleLoadData writes the PTX to a file and runs ptxas on it for the
// PTX's own target; ptxas refusing it makes the load fail with CUDA_ERROR_INVALID_PTX and
// its log on stderr, as the driver would. Launches over the driver's limits (units and
// dimensions of a block, grid, shared memory) are refused. The GPU's name starts with
// "Fake CUDA device": Ember, seeing it with EMBER_CUDA_DRY_RUN set, lets its checks of
// values (the first operation's 1 + 1, no NaN in weights or results) pass.
//
// Memory is counted as a driver counts it: every cuMemAlloc's bytes until cuMemFree. A
// card's size can be chosen (an H100's 80 GiB by default): allocations past it fail with
// CUDA_ERROR_OUT_OF_MEMORY, and the peak is logged at exit. That measures what Ember and
// Burn's memory pools ask of the driver for a whole generation (a real driver adds its
// context, some hundreds of MiB), and lets a small card's paths run. The GPU can also be
// lost mid-job: after a chosen count of launches (or once a file exists), every launch, copy
// and wait fails with
// CUDA_ERROR_LAUNCH_FAILED, which CUDA makes sticky (as after an Xid 79, "GPU has fallen
// off the bus", or a kernel's fault).
//
// Environment:
//   FAKE_CUDA_ARCH        compute capability as major*10+minor (default 90: H100/H200)
//   FAKE_CUDA_PTXAS       the ptxas to run on each module (unset: modules are not assembled)
//   FAKE_CUDA_LOG         a file that gets one line per module loaded (its target and
//                         kernel), and at exit the launch count and peak memory
//   FAKE_CUDA_MEMORY_MIB  the card's memory in MiB (default 81920)
//   FAKE_CUDA_LOSE_AFTER  the GPU is lost after this many kernel launches (default never)
//   FAKE_CUDA_LOSE_WHEN   the GPU is lost from the first call after this file exists
//   FAKE_CUDA_LOG_MEMORY  set: the log also gets every allocation and free, with the total
//   FAKE_CUDA_DEVICES     how many GPUs the driver sees (default 1); each is named by its number
//
// Build: cc -shared -fPIC -O2 -o libcuda.so fake_libcuda.c, linked as libcuda.so.1 too:
// cudarc tries libcuda.so first, so a real driver's must not come before it.
// Not a test of results: a kernel launch computes nothing.

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;

#define OK 0
#define INVALID_VALUE 1
#define OUT_OF_MEMORY 2
#define LAUNCH_FAILED 719
#define NOT_SUPPORTED 801
#define INVALID_PTX 218

static int arch(void) {
    const char *value = getenv("FAKE_CUDA_ARCH");
    return value ? atoi(value) : 90;
}

// The shared memory a block may opt into: H100 228 KiB - 1 KiB, A100 164 - 1, others 100 - 1.
static int shared_memory_opt_in(void) {
    return arch() >= 90 ? 232448 : arch() == 80 ? 166912 : 101376;
}

static double seconds_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

static void note(const char *format, ...) {
    const char *path = getenv("FAKE_CUDA_LOG");
    if (!path) return;
    FILE *log = fopen(path, "a");
    if (!log) return;
    va_list args;
    va_start(args, format);
    vfprintf(log, format, args);
    va_end(args);
    fclose(log);
}

// --- Initialisation and the device -------------------------------------------------------

CUresult cuInit(unsigned flags) {
    (void)flags;
    if (arch() < 50) {
        fprintf(stderr, "fake libcuda: FAKE_CUDA_ARCH is a compute capability such as 90\n");
        return INVALID_VALUE;
    }
    return OK;
}
CUresult cuDriverGetVersion(int *version) { *version = 13000; return OK; }
static int device_count(void) {
    const char *value = getenv("FAKE_CUDA_DEVICES");
    int count = value ? atoi(value) : 1;
    return count > 0 ? count : 1;
}
CUresult cuDeviceGetCount(int *count) { *count = device_count(); return OK; }
CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    if (ordinal < 0 || ordinal >= device_count()) return INVALID_VALUE;
    *device = ordinal;
    return OK;
}

CUresult cuDeviceGetName(char *name, int length, CUdevice device) {
    if (device == 0)
        snprintf(name, (size_t)length, "Fake CUDA device sm_%d (no GPU; kernels do nothing)",
                 arch());
    else
        snprintf(name, (size_t)length,
                 "Fake CUDA device %d sm_%d (no GPU; kernels do nothing)", device, arch());
    return OK;
}

static size_t card_memory(void) {
    const char *value = getenv("FAKE_CUDA_MEMORY_MIB");
    return (size_t)(value ? strtoull(value, NULL, 10) : 81920) << 20;
}

// What cuMemAlloc has handed out and not taken back, its most, and the launches so far.
static size_t allocated, peak_allocated;
static unsigned long long launches;

// The GPU is lost once FAKE_CUDA_LOSE_AFTER launches have run, or FAKE_CUDA_LOSE_WHEN's
// file exists; for good, as CUDA's faults are sticky.
static int gone;
static int lost(void) {
    if (gone) return 1;
    const char *after = getenv("FAKE_CUDA_LOSE_AFTER");
    const char *when = getenv("FAKE_CUDA_LOSE_WHEN");
    gone = (after && launches >= strtoull(after, NULL, 10)) || (when && access(when, F_OK) == 0);
    return gone;
}
#define FAIL_IF_LOST() do { if (lost()) return LAUNCH_FAILED; } while (0)

// At exit, or when a presence check unloads the library again (then with nothing to say).
__attribute__((destructor)) static void report(void) {
    if (!launches && !peak_allocated) return;
    note("exit of process %d: %llu launches, peak device memory %zu bytes (%.1f MiB)%s\n",
         (int)getpid(), launches,
         peak_allocated, (double)peak_allocated / (1 << 20), lost() ? ", GPU lost" : "");
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice device) {
    (void)device;
    *bytes = card_memory();
    return OK;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
    *total_bytes = card_memory();
    *free_bytes = *total_bytes - allocated;
    return OK;
}

CUresult cuGetErrorName(CUresult error, const char **name) {
    *name = error == OUT_OF_MEMORY   ? "CUDA_ERROR_OUT_OF_MEMORY"
            : error == LAUNCH_FAILED ? "CUDA_ERROR_LAUNCH_FAILED"
                                     : "CUDA_ERROR_STAND_IN";
    return OK;
}
CUresult cuGetErrorString(CUresult error, const char **text) {
    *text = error == OUT_OF_MEMORY   ? "out of memory"
            : error == LAUNCH_FAILED ? "unspecified launch failure"
                                     : "an error of the stand-in driver";
    return OK;
}

// Values of an H100 SXM, with the compute capability (and what follows from it) chosen.
CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice device) {
    (void)device;
    int cc = arch();
    switch (attribute) {
    case 1: *value = 1024; break;                        // max threads per block
    case 2: case 3: *value = 1024; break;                // max block dim x, y
    case 4: *value = 64; break;                          // max block dim z
    case 5: *value = 2147483647; break;                  // max grid dim x
    case 6: case 7: *value = 65535; break;               // max grid dim y, z
    case 8: *value = 49152; break;                       // shared memory per block
    case 10: *value = 32; break;                         // warp size
    case 12: *value = 65536; break;                      // registers per block
    case 16: *value = 132; break;                        // multiprocessors
    case 39: *value = cc == 86 || cc == 89 || cc >= 120 ? 1536 : 2048; break;
    case 75: *value = cc / 10; break;                    // compute capability major
    case 76: *value = cc % 10; break;                    // compute capability minor
    case 81: *value = cc >= 90 ? 233472 : cc == 80 ? 167936 : 102400; break;
    case 97: *value = shared_memory_opt_in(); break;
    default: *value = 0; note("attribute %d asked: 0\n", attribute);
    }
    return OK;
}

CUresult cuDeviceGetPCIBusId(char *id, int length, CUdevice device) {
    (void)device;
    snprintf(id, (size_t)length, "0000:00:00.0");
    return OK;
}

// NVRTC asks a loaded driver for its private tables; a real driver's are not here.
CUresult cuGetExportTable(const void **table, const void *id) {
    (void)id;
    *table = NULL;
    return 500; // CUDA_ERROR_NOT_FOUND
}

CUresult cuDeviceGetLuid(char *luid, unsigned *mask, CUdevice device) {
    (void)luid; (void)mask; (void)device;
    return NOT_SUPPORTED;
}

static int context_token;
CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
    (void)device;
    *context = &context_token;
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) { (void)device; return OK; }
CUresult cuCtxSetCurrent(CUcontext context) { (void)context; return OK; }
CUresult cuCtxGetCurrent(CUcontext *context) { *context = &context_token; return OK; }
CUresult cuCtxGetDevice(CUdevice *device) { *device = 0; return OK; }
CUresult cuCtxSynchronize(void) { FAIL_IF_LOST(); return OK; }
CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    *least = 0;
    *greatest = -5;
    return OK;
}

// --- Memory: device pointers are host pointers -------------------------------------------

// calloc, not malloc: cubecl reserves pages of up to 1 GiB, which stay untouched (no RAM).
// Each allocation starts with its size, just before the pointer handed out.
#define SIZE_PREFIX 64
CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
    FAIL_IF_LOST();
    if (bytes > card_memory() - allocated) return OUT_OF_MEMORY;
    char *memory = calloc(1, SIZE_PREFIX + (bytes ? bytes : 1));
    if (!memory) return OUT_OF_MEMORY;
    *(size_t *)memory = bytes;
    allocated += bytes;
    if (allocated > peak_allocated) peak_allocated = allocated;
    if (getenv("FAKE_CUDA_LOG_MEMORY"))
        note("alloc %zu -> %zu after %llu launches\n", bytes, allocated, launches);
    *pointer = (CUdeviceptr)(uintptr_t)(memory + SIZE_PREFIX);
    return OK;
}
CUresult cuMemAllocAsync(CUdeviceptr *pointer, size_t bytes, CUstream stream) {
    (void)stream;
    return cuMemAlloc_v2(pointer, bytes);
}
CUresult cuMemFree_v2(CUdeviceptr pointer) {
    if (!pointer) return OK;
    char *memory = (char *)(uintptr_t)pointer - SIZE_PREFIX;
    allocated -= *(size_t *)memory;
    if (getenv("FAKE_CUDA_LOG_MEMORY"))
        note("free %zu -> %zu after %llu launches\n", *(size_t *)memory, allocated, launches);
    free(memory);
    return OK;
}
CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
    (void)stream;
    return cuMemFree_v2(pointer);
}
CUresult cuMemAllocHost_v2(void **pointer, size_t bytes) {
    *pointer = calloc(1, bytes ? bytes : 1);
    return *pointer ? OK : 2;
}
CUresult cuMemHostAlloc(void **pointer, size_t bytes, unsigned flags) {
    (void)flags;
    return cuMemAllocHost_v2(pointer, bytes);
}
CUresult cuMemFreeHost(void *pointer) { free(pointer); return OK; }

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
    FAIL_IF_LOST();
    memcpy((void *)(uintptr_t)dst, src, bytes);
    return OK;
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
    FAIL_IF_LOST();
    memcpy(dst, (const void *)(uintptr_t)src, bytes);
    return OK;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    FAIL_IF_LOST();
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, bytes);
    return OK;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t bytes, CUstream s) {
    (void)s;
    return cuMemcpyHtoD_v2(dst, src, bytes);
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t bytes, CUstream s) {
    (void)s;
    return cuMemcpyDtoH_v2(dst, src, bytes);
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s) {
    (void)s;
    return cuMemcpyDtoD_v2(dst, src, bytes);
}

typedef struct {
    size_t srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;

// Memory type 1 is host memory; device (2) and unified (4) memory use the device pointer.
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *copy, CUstream stream) {
    FAIL_IF_LOST();
    (void)stream;
    const char *src = copy->srcMemoryType == 1 ? (const char *)copy->srcHost
                                               : (const char *)(uintptr_t)copy->srcDevice;
    char *dst = copy->dstMemoryType == 1 ? (char *)copy->dstHost
                                         : (char *)(uintptr_t)copy->dstDevice;
    for (size_t row = 0; row < copy->Height; row++) {
        memcpy(dst + (copy->dstY + row) * copy->dstPitch + copy->dstXInBytes,
               src + (copy->srcY + row) * copy->srcPitch + copy->srcXInBytes,
               copy->WidthInBytes);
    }
    return OK;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream s) {
    (void)s;
    FAIL_IF_LOST();
    memset((void *)(uintptr_t)dst, value, n);
    return OK;
}
CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t n, CUstream s) {
    (void)s;
    FAIL_IF_LOST();
    for (size_t i = 0; i < n; i++) ((unsigned *)(uintptr_t)dst)[i] = value;
    return OK;
}

// --- Streams, events and graphs ----------------------------------------------------------

static CUresult token(void **handle) {
    *handle = malloc(1);
    return *handle ? OK : 2;
}
CUresult cuStreamCreate(CUstream *stream, unsigned flags) { (void)flags; return token(stream); }
CUresult cuStreamCreateWithPriority(CUstream *stream, unsigned flags, int priority) {
    (void)flags; (void)priority;
    return token(stream);
}
CUresult cuStreamDestroy_v2(CUstream stream) { free(stream); return OK; }
CUresult cuStreamSynchronize(CUstream stream) { (void)stream; FAIL_IF_LOST(); return OK; }
CUresult cuStreamQuery(CUstream stream) { (void)stream; FAIL_IF_LOST(); return OK; }
CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned flags) {
    (void)stream; (void)event; (void)flags;
    return OK;
}
// Time is virtual: each launch advances a clock by 5 µs (an H100's launch cost, roughly),
// so that cubecl's probe of launch overhead ends after a realistic count of launches (with
// events that never advanced it launched 13 million). Its throughput probes still find no
// time in a launch however much work they ask of it: they raise the work until a count
// overflows, and cubecl catches that panic (summary.py counts them apart).
static double virtual_ms;
typedef struct { double at_ms; } Event;
CUresult cuEventCreate(CUevent *event, unsigned flags) {
    (void)flags;
    *event = calloc(1, sizeof(Event));
    return *event ? OK : 2;
}
CUresult cuEventDestroy_v2(CUevent event) { free(event); return OK; }
CUresult cuEventRecord(CUevent event, CUstream stream) {
    (void)stream;
    FAIL_IF_LOST();
    ((Event *)event)->at_ms = virtual_ms;
    return OK;
}
CUresult cuEventRecordWithFlags(CUevent event, CUstream stream, unsigned flags) {
    (void)flags;
    return cuEventRecord(event, stream);
}
CUresult cuEventSynchronize(CUevent event) { (void)event; FAIL_IF_LOST(); return OK; }
CUresult cuEventQuery(CUevent event) { (void)event; FAIL_IF_LOST(); return OK; }
CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
    *ms = (float)(((Event *)end)->at_ms - ((Event *)start)->at_ms);
    return OK;
}
CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) {
    return cuEventElapsedTime(ms, start, end);
}

// Capture is declined: cubecl then launches kernels one by one.
CUresult cuStreamBeginCapture_v2(CUstream stream, int mode) {
    (void)stream; (void)mode;
    return NOT_SUPPORTED;
}

// --- Modules: the PTX goes through the real ptxas ----------------------------------------

static unsigned long modules_loaded;

// The PTX's `.target sm_XX[a]` line, or NULL.
static const char *ptx_target(const char *ptx, char *out, size_t length) {
    const char *line = strstr(ptx, ".target ");
    if (!line) return NULL;
    line += strlen(".target ");
    size_t n = strcspn(line, ", \r\n");
    if (n == 0 || n >= length) return NULL;
    memcpy(out, line, n);
    out[n] = 0;
    return out;
}

static CUresult assemble(const char *ptx) {
    const char *ptxas = getenv("FAKE_CUDA_PTXAS");
    if (!ptxas) return OK;
    char target[32];
    if (!ptx_target(ptx, target, sizeof target)) {
        fprintf(stderr, "fake libcuda: module %lu has no .target line\n", modules_loaded);
        return INVALID_PTX;
    }
    char dir[] = "/tmp/fake-cuda-XXXXXX";
    if (!mkdtemp(dir)) return INVALID_PTX;
    char source[64], command[4096];
    snprintf(source, sizeof source, "%s/module.ptx", dir);
    FILE *file = fopen(source, "w");
    if (!file) return INVALID_PTX;
    fputs(ptx, file);
    fclose(file);
    snprintf(command, sizeof command,
             "'%s' -arch=%s -o %s/module.cubin %s > %s/log 2>&1", ptxas, target, dir,
             source, dir);
    int status = system(command);
    if (status != 0) {
        char kept[128];
        snprintf(kept, sizeof kept, "/tmp/fake-cuda-refused-%d-%lu-%s.ptx", (int)getpid(),
                 modules_loaded, target);
        snprintf(command, sizeof command, "cat %s/log >&2; cp %s %s", dir, source, kept);
        if (system(command) != 0) fprintf(stderr, "fake libcuda: could not keep the PTX\n");
        fprintf(stderr, "fake libcuda: ptxas refused module %lu (%s); its PTX: %s\n",
                modules_loaded, target, kept);
    }
    snprintf(command, sizeof command, "rm -rf %s", dir);
    if (system(command) != 0) fprintf(stderr, "fake libcuda: could not remove %s\n", dir);
    return status == 0 ? OK : INVALID_PTX;
}

// The log line says how long since the previous module was loaded (NVRTC's compile of
// this one, mostly, when kernels are compiled back to back) and how long ptxas took.
static double previous_load = 0;
CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    const char *ptx = image;
    char target[32] = "?";
    ptx_target(ptx, target, sizeof target);
    modules_loaded++;
    const char *entry = strstr(ptx, ".entry ");
    int entry_length = entry ? (int)strcspn(entry + 7, "(\r\n") : 0;
    double start = seconds_now();
    CUresult result = assemble(ptx);
    double end = seconds_now();
    note("module %lu %s since-previous %.2fs ptxas %.2fs %.*s\n", modules_loaded, target,
         previous_load > 0 ? start - previous_load : 0.0, end - start, entry_length,
         entry ? entry + 7 : "");
    previous_load = end;
    if (result != OK) return result;
    return token(module);
}
CUresult cuModuleUnload(CUmodule module) { free(module); return OK; }
CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
    (void)module; (void)name;
    return token(function);
}
CUresult cuFuncSetAttribute(CUfunction function, int attribute, int value) {
    (void)function; (void)attribute; (void)value;
    return OK;
}
CUresult cuFuncGetAttribute(int *value, int attribute, CUfunction function) {
    (void)attribute; (void)function;
    *value = 0;
    return OK;
}

// A launch the driver would refuse (CUDA_ERROR_INVALID_VALUE) is refused, with why.
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, CUstream stream,
                        void **params, void **extra) {
    (void)f; (void)stream; (void)params; (void)extra;
    FAIL_IF_LOST();
    launches++;
    virtual_ms += 0.005;
    const char *why = NULL;
    if (!gx || !gy || !gz || !bx || !by || !bz) why = "a zero dimension";
    else if ((unsigned long)bx * by * bz > 1024) why = "over 1024 units a block";
    else if (bx > 1024 || by > 1024 || bz > 64) why = "a block over 1024×1024×64";
    else if (gy > 65535 || gz > 65535) why = "a grid over 65535 in y or z";
    else if (shared > (unsigned)shared_memory_opt_in()) why = "too much shared memory";
    if (why) {
        fprintf(stderr, "fake libcuda: refused a launch of grid %u×%u×%u, block %u×%u×%u, "
                "%u bytes shared: %s\n", gx, gy, gz, bx, by, bz, shared, why);
        return INVALID_VALUE;
    }
    return OK;
}

// Hopper's tensor maps: accepted as they come (the launch that uses one does nothing).
typedef unsigned int cuuint32_t;
typedef unsigned long long cuuint64_t;
CUresult cuTensorMapEncodeTiled(void *map, int type, cuuint32_t rank, void *address,
                                const cuuint64_t *dims, const cuuint64_t *strides,
                                const cuuint32_t *box, const cuuint32_t *element_strides,
                                int interleave, int swizzle, int l2, int fill) {
    (void)type; (void)rank; (void)address; (void)dims; (void)strides; (void)box;
    (void)element_strides; (void)interleave; (void)swizzle; (void)l2; (void)fill;
    memset(map, 0, 128);
    return OK;
}
CUresult cuTensorMapEncodeIm2col(void *map, int type, cuuint32_t rank, void *address,
                                 const cuuint64_t *dims, const cuuint64_t *strides,
                                 const int *lower, const int *upper, cuuint32_t channels,
                                 cuuint32_t pixels, const cuuint32_t *element_strides,
                                 int interleave, int swizzle, int l2, int fill) {
    (void)type; (void)rank; (void)address; (void)dims; (void)strides; (void)lower;
    (void)upper; (void)channels; (void)pixels; (void)element_strides; (void)interleave;
    (void)swizzle; (void)l2; (void)fill;
    memset(map, 0, 128);
    return OK;
}
CUresult cuTensorMapEncodeIm2colWide(void *map, int type, cuuint32_t rank, void *address,
                                     const cuuint64_t *dims, const cuuint64_t *strides,
                                     int lower, int upper, cuuint32_t channels,
                                     cuuint32_t pixels, const cuuint32_t *element_strides,
                                     int interleave, int mode, int swizzle, int l2, int fill) {
    (void)type; (void)rank; (void)address; (void)dims; (void)strides; (void)lower;
    (void)upper; (void)channels; (void)pixels; (void)element_strides; (void)interleave;
    (void)mode; (void)swizzle; (void)l2; (void)fill;
    memset(map, 0, 128);
    return OK;
}
