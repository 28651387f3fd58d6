// A stand-in for NVIDIA's NVRTC (libnvrtc.so) beside fake_libcuda.c, for the tests CI runs:
// every program "compiles" to a PTX module of one empty kernel for the asked architecture,
// which the stand-in driver loads (and, as it launches nothing real, never runs).
//
// Why: with the real NVRTC (a pip wheel, downloaded) the stand-in driver checks that every
// kernel compiles; with this one, no download is needed and a whole generation runs through
// Burn's CUDA backend in seconds, so CI can test what Ember does when that GPU runs out of
// memory or is lost mid-job (fake_libcuda.c's FAKE_CUDA_MEMORY_MIB, FAKE_CUDA_LOSE_AFTER).
// The PTX is not assembled (run without FAKE_CUDA_PTXAS); kernels it "compiles" are kept
// in the cache folder like real ones, so use a cache folder of its own.
//
// Build: cc -shared -fPIC -O1 -o libnvrtc.so fake_libnvrtc.c

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvrtcResult;
typedef struct {
    char *ptx;
} Program;
typedef Program *nvrtcProgram;

#define SUCCESS 0
#define OUT_OF_MEMORY 1
#define INVALID_PROGRAM 5

nvrtcResult nvrtcVersion(int *major, int *minor) {
    *major = 13;
    *minor = 2;
    return SUCCESS;
}

const char *nvrtcGetErrorString(nvrtcResult result) {
    return result == SUCCESS ? "NVRTC_SUCCESS" : "NVRTC_ERROR (stand-in)";
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *program, const char *source, const char *name,
                               int headers, const char *const *header_sources,
                               const char *const *header_names) {
    (void)source; (void)name; (void)headers; (void)header_sources; (void)header_names;
    *program = calloc(1, sizeof(Program));
    return *program ? SUCCESS : OUT_OF_MEMORY;
}

// The architecture cubecl asks for (--gpu-architecture=sm_90a), else sm_90a.
static const char *architecture(int count, const char *const *options) {
    const char *prefix = "--gpu-architecture=";
    for (int i = 0; i < count; i++) {
        if (!strncmp(options[i], prefix, strlen(prefix))) return options[i] + strlen(prefix);
    }
    return "sm_90a";
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram program, int count, const char *const *options) {
    static const char format[] = ".version 9.2\n.target %s\n.address_size 64\n\n"
                                 ".visible .entry stand_in()\n{\n\tret;\n}\n";
    const char *target = architecture(count, options);
    size_t size = sizeof format + strlen(target);
    free(program->ptx);
    program->ptx = malloc(size);
    if (!program->ptx) return OUT_OF_MEMORY;
    snprintf(program->ptx, size, format, target);
    return SUCCESS;
}

nvrtcResult nvrtcGetPTXSize(nvrtcProgram program, size_t *size) {
    if (!program->ptx) return INVALID_PROGRAM;
    *size = strlen(program->ptx) + 1;
    return SUCCESS;
}

nvrtcResult nvrtcGetPTX(nvrtcProgram program, char *ptx) {
    if (!program->ptx) return INVALID_PROGRAM;
    strcpy(ptx, program->ptx);
    return SUCCESS;
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram program, size_t *size) {
    (void)program;
    *size = 1;
    return SUCCESS;
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram program, char *log) {
    (void)program;
    *log = 0;
    return SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *program) {
    if (*program) free((*program)->ptx);
    free(*program);
    *program = NULL;
    return SUCCESS;
}
