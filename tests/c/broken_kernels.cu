/*
 * broken_kernels.cu: deliberately wrong launches, for test_memory_errors.c.
 *
 * Plain CUDA, built twice like the library: through tools/cu2emu.py for the
 * emulator test binary, and by nvcc for the CUDA one (see tests/c/tests.mk).
 * Each host function returns the cudaError_t of its launch (as an int) and
 * copies cudaGetErrorString of it into `msg` at once, before anything else
 * can touch the runtime's error state.
 */
#include <string.h>

#include "check.h"

/* Half of every block returns before the barrier that the other half waits
 * at. On a GPU this is undefined behaviour (it may hang or seem to work), so
 * the test runs it on the emulator only, which must report it as an error
 * that names this kernel. */
__global__ void divergent_barrier_kernel(float *out)
{
    if (threadIdx.x < blockDim.x / 2)
        return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

/* A correct kernel, launched with a block too large for any GPU. */
__global__ void too_big_block_kernel(float *out)
{
    out[threadIdx.x] = 2.0f;
}

static void copy_message(cudaError_t err, char *msg, size_t msgsize)
{
    if (!msg || msgsize == 0)
        return;
    const char *s = cudaGetErrorString(err);
    strncpy(msg, s ? s : "(null)", msgsize - 1);
    msg[msgsize - 1] = '\0';
}

/* The status of a launch: the launch error if any, else the error of the
 * kernel's execution. */
static cudaError_t launch_result(void)
{
    cudaError_t err = cudaGetLastError();
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize();
    return err;
}

extern "C" int mt_test_launch_divergent_barrier(char *msg, size_t msgsize)
{
    float *buf = NULL;
    cudaError_t err = cudaMalloc((void **)&buf, 64 * sizeof(float));
    if (err != cudaSuccess) {
        copy_message(err, msg, msgsize);
        return (int)err;
    }
    divergent_barrier_kernel<<<2, 64>>>(buf);
    err = launch_result();
    copy_message(err, msg, msgsize);
    cudaFree(buf);
    return (int)err;
}

extern "C" int mt_test_launch_2048_threads(char *msg, size_t msgsize)
{
    float *buf = NULL;
    cudaError_t err = cudaMalloc((void **)&buf, 2048 * sizeof(float));
    if (err != cudaSuccess) {
        copy_message(err, msg, msgsize);
        return (int)err;
    }
    too_big_block_kernel<<<1, 2048>>>(buf);
    err = launch_result();
    copy_message(err, msg, msgsize);
    cudaFree(buf);
    return (int)err;
}

/* The errors a bad launch configuration may give, for comparison: CUDA up
 * to 12 says cudaErrorInvalidConfiguration ("invalid configuration
 * argument"); CUDA 13.0 says cudaErrorInvalidValue ("invalid argument") for
 * every bad configuration (seen on an H100, driver 580.159.04). */
extern "C" int mt_test_cuda_invalid_configuration(void)
{
    return (int)cudaErrorInvalidConfiguration;
}

extern "C" int mt_test_cuda_invalid_value(void)
{
    return (int)cudaErrorInvalidValue;
}

/* ======================================================================== */
/* The emulator's own checks (tests/c/test_emu_checks.c)                      */
/* ======================================================================== */
#ifdef MT_EMULATOR
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

/* Legal, but hours of work for the emulator: it must give way to Ctrl-C. */
__global__ void endless_kernel(float *out)
{
    float acc = 0.0f;
    for (int i = 0; i < 64; ++i) {
        acc += (float)threadIdx.x;
        __syncthreads();
    }
    if (acc < 0.0f)
        out[0] = acc;
}

static volatile sig_atomic_t sigint_calls = 0;
static void count_sigint(int) { sigint_calls = sigint_calls + 1; }

static void *send_sigint_later(void *)
{
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    kill(getpid(), SIGINT);
    return NULL;
}

/* Launches endless_kernel with a SIGINT handler of the program's own in
 * place, sends SIGINT 0.2 s later; returns the launch's error, the seconds
 * the launch took, and how often the program's handler ran. */
extern "C" int mt_test_launch_interrupted(char *msg, size_t msgsize, double *seconds, int *handler_calls)
{
    struct sigaction mine, previous;
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = count_sigint;
    sigemptyset(&mine.sa_mask);
    sigaction(SIGINT, &mine, &previous);
    sigint_calls = 0;

    float *buf = NULL;
    cudaError_t err = cudaMalloc((void **)&buf, sizeof(float));
    pthread_t sender;
    pthread_create(&sender, NULL, send_sigint_later, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    endless_kernel<<<1 << 30, 256>>>(buf);
    err = launch_result();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(sender, NULL);
    copy_message(err, msg, msgsize);
    cudaFree(buf);
    sigaction(SIGINT, &previous, NULL);
    *seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    *handler_calls = (int)sigint_calls;
    return (int)err;
}

extern "C" int mt_test_cuda_interrupted(void) { return (int)cudaErrorInterrupted; }

/* Launches divergent_barrier_kernel and asks for its error only through
 * `how`: 0 cudaDeviceSynchronize, 1 cudaStreamSynchronize, 2
 * cudaEventSynchronize (of an event recorded after the launch), 3
 * cudaGetLastError, 4 cudaPeekAtLastError. Returns that call's error (its
 * message in msg); *then is what a cudaDeviceSynchronize says afterwards. */
extern "C" int mt_test_kernel_error_reported_by(int how, char *msg, size_t msgsize, int *then)
{
    float *buf = NULL;
    cudaError_t err = cudaMalloc((void **)&buf, 64 * sizeof(float));
    if (err != cudaSuccess) {
        copy_message(err, msg, msgsize);
        return (int)err;
    }
    cudaEvent_t done = NULL;
    cudaEventCreate(&done);
    divergent_barrier_kernel<<<2, 64>>>(buf);
    cudaEventRecord(done, 0);
    switch (how) {
    case 0: err = cudaDeviceSynchronize(); break;
    case 1: err = cudaStreamSynchronize(0); break;
    case 2: err = cudaEventSynchronize(done); break;
    case 3: err = cudaGetLastError(); break;
    default: err = cudaPeekAtLastError(); break;
    }
    copy_message(err, msg, msgsize);
    *then = (int)cudaDeviceSynchronize();
    cudaEventDestroy(done);
    cudaFree(buf);
    return (int)err;
}

extern "C" int mt_test_cuda_launch_failure(void) { return (int)cudaErrorLaunchFailure; }
extern "C" int mt_test_cuda_illegal_address(void) { return (int)cudaErrorIllegalAddress; }

/* ---- one kernel per bug class, each reported at its .cu line --------------
 * Each kernel stores the __LINE__ of its bug in bug_line (on the same source
 * line as the bug), so the test can check the line in the message. */
static int bug_line[2];

/* Even and odd threads wait at different __syncthreads() statements. */
__global__ void split_barrier_kernel(float *out)
{
    if (threadIdx.x % 2 == 0) {
        out[threadIdx.x] = 1.0f;
        bug_line[0] = __LINE__; __syncthreads();
    } else {
        out[threadIdx.x] = 2.0f;
        bug_line[1] = __LINE__; __syncthreads();
    }
}

/* The classic missing barrier: each thread writes its slot, then reads its
 * neighbour's, with no __syncthreads() between (MINITENSOR_EMU_CHECK=full). */
__global__ void missing_barrier_kernel(float *out)
{
    __shared__ float tile[64];
    bug_line[0] = __LINE__; tile[threadIdx.x] = (float)threadIdx.x;
    bug_line[1] = __LINE__; out[threadIdx.x] = tile[(threadIdx.x + 1) % 64];
}

/* Two threads write one shared slot between the same two barriers. */
__global__ void two_writers_kernel(float *out)
{
    __shared__ float slot[32];
    bug_line[0] = __LINE__; slot[threadIdx.x / 2] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = slot[threadIdx.x / 2];
}

/* A write one past the end of a __shared__ array. */
__global__ void shared_overflow_kernel(float *out)
{
    __shared__ float buf[4][16];
    bug_line[0] = __LINE__; buf[threadIdx.x / 16][threadIdx.x % 16 + 1] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = buf[0][0];
}

/* A write one element past the end of the buffer (64 threads, 64 floats). */
__global__ void global_overflow_kernel(float *out)
{
    bug_line[0] = __LINE__; out[threadIdx.x + 1] = 1.0f;
}

/* Launched on a buffer that was freed before the launch. */
__global__ void use_after_free_kernel(float *out)
{
    bug_line[0] = __LINE__; out[threadIdx.x] = 1.0f;
}

/* Not broken: lanes of one warp ordered by __syncwarp(), and atomics on
 * shared memory, are no races (the full checks must stay quiet). */
__global__ void warp_ordered_kernel(float *out)
{
    __shared__ float lane_value[32];
    __shared__ int count[1];
    if (threadIdx.x == 0)
        count[0] = 0;
    __syncthreads();
    lane_value[threadIdx.x] = (float)threadIdx.x;
    __syncwarp();
    out[threadIdx.x] = lane_value[(threadIdx.x + 1) % 32];
    atomicAdd(&count[0], 1);
    __syncthreads();
    if (threadIdx.x == 0)
        out[0] = (float)count[0];
}

/* Runs one broken kernel (which: 0 split_barrier_kernel, 1
 * missing_barrier_kernel, 2 two_writers_kernel, 3 shared_overflow_kernel,
 * 4 global_overflow_kernel, 5 use_after_free_kernel; 6 the correct
 * warp_ordered_kernel) on a 64-float buffer;
 * returns the launch's error, its message, and the bug's lines. */
extern "C" int mt_test_launch_bug(int which, char *msg, size_t msgsize, int *line0, int *line1)
{
    float *buf = NULL;
    cudaError_t err = cudaMalloc((void **)&buf, 64 * sizeof(float));
    if (err != cudaSuccess) {
        copy_message(err, msg, msgsize);
        return (int)err;
    }
    bug_line[0] = bug_line[1] = 0;
    switch (which) {
    case 0: split_barrier_kernel<<<1, 64>>>(buf); break;
    case 1: missing_barrier_kernel<<<1, 64>>>(buf); break;
    case 2: two_writers_kernel<<<1, 64>>>(buf); break;
    case 3: shared_overflow_kernel<<<1, 64>>>(buf); break;
    case 4: global_overflow_kernel<<<1, 64>>>(buf); break;
    case 6: warp_ordered_kernel<<<1, 32>>>(buf); break;
    case 5:
        cudaFree(buf);
        use_after_free_kernel<<<1, 64>>>(buf);
        buf = NULL;
        break;
    default: break;
    }
    err = cudaDeviceSynchronize();
    copy_message(err, msg, msgsize);
    cudaFree(buf);
    *line0 = bug_line[0];
    *line1 = bug_line[1];
    return (int)err;
}
#endif /* MT_EMULATOR */
