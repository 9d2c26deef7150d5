/*
 * broken_kernels.cu: deliberately wrong launches, for test_memory_errors.c.
 *
 * Plain CUDA, built twice like the library: through minitensor/cuda/_cu2emu.py for the
 * emulator test binary, and by nvcc for the CUDA one (see tests/c/tests.mk).
 * Each host function returns the cudaError_t of its launch (as an int) and
 * copies cudaGetErrorString of it into `msg` at once, before anything else
 * can touch the runtime's error state.
 */
#include <string.h>

#include "async_copy.h"
#include "block_reduce.h"
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

/* The read-modify-write race of scratch_rmw_race_kernel (below), written
 * through slot[i], which the emulator's MINITENSOR_EMU_INTERLEAVE follows
 * even with the checks off: every thread adds t + 1 to slot 0. */
__global__ void scratch_rmw_sum_kernel(float *out)
{
    __shared__ BlockScratch<float> scratch;
    const unsigned t = threadIdx.x;
    if (t == 0)
        scratch.slot[0] = 0.0f;
    __syncthreads();
    scratch.slot[0] = scratch.slot[0] + (float)(t + 1);
    __syncthreads();
    if (t == 0)
        out[0] = scratch.slot[0];
}

/* Runs it on one block of 64 threads: 2080 when the updates happen one
 * after another; less when some are lost. Negative: the launch failed (its
 * message in msg). */
extern "C" float mt_test_rmw_sum(char *msg, size_t msgsize)
{
    float *buf = NULL, sum = -1.0f;
    cudaError_t err = cudaMalloc((void **)&buf, sizeof(float));
    if (err == cudaSuccess) {
        scratch_rmw_sum_kernel<<<1, 64>>>(buf);
        err = cudaDeviceSynchronize();
    }
    if (err == cudaSuccess)
        err = cudaMemcpy(&sum, buf, sizeof sum, cudaMemcpyDeviceToHost);
    copy_message(err, msg, msgsize);
    cudaFree(buf);
    return err == cudaSuccess ? sum : -1.0f;
}

extern "C" int mt_test_cuda_launch_failure(void) { return (int)cudaErrorLaunchFailure; }
extern "C" int mt_test_cuda_stack_error(void) { return (int)cudaErrorHardwareStackError; }
extern "C" int mt_test_cuda_illegal_address(void) { return (int)cudaErrorIllegalAddress; }

#endif /* MT_EMULATOR */

/* ======================================================================== */
/* One kernel per bug class (test_emu_checks.c on the emulator;               */
/* tools/sanitizer_compare.sh runs the same kernels under compute-sanitizer)  */
/* ======================================================================== */
/* Each kernel marks the line of its bug with BUG_LINE(k), on the same source
 * line as the bug: the emulator build stores __LINE__ in bug_line[k], so the
 * test can check the line in the message; the CUDA build stores nothing
 * (the comparison script reads compute-sanitizer's line instead). */
#ifdef MT_EMULATOR
static int bug_line[2];
#define BUG_LINE(k) bug_line[k] = __LINE__;
#else
#define BUG_LINE(k)
#endif

/* Even and odd threads wait at different __syncthreads() statements. */
__global__ void split_barrier_kernel(float *out)
{
    if (threadIdx.x % 2 == 0) {
        out[threadIdx.x] = 1.0f;
        BUG_LINE(0) __syncthreads();
    } else {
        out[threadIdx.x] = 2.0f;
        BUG_LINE(1) __syncthreads();
    }
}

/* The classic missing barrier: each thread writes its slot, then reads its
 * neighbour's, with no __syncthreads() between (MINITENSOR_EMU_CHECK=full). */
__global__ void missing_barrier_kernel(float *out)
{
    __shared__ float tile[64];
    BUG_LINE(0) tile[threadIdx.x] = (float)threadIdx.x;
    BUG_LINE(1) out[threadIdx.x] = tile[(threadIdx.x + 1) % 64];
}

/* Two threads write one shared slot between the same two barriers. */
__global__ void two_writers_kernel(float *out)
{
    __shared__ float slot[32];
    BUG_LINE(0) slot[threadIdx.x / 2] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = slot[threadIdx.x / 2];
}

/* A write one past the end of a row of a __shared__ array. */
__global__ void shared_overflow_kernel(float *out)
{
    __shared__ float buf[4][16];
    BUG_LINE(0) buf[threadIdx.x / 16][threadIdx.x % 16 + 1] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = buf[0][0];
}

/* A write one past the end of a whole __shared__ array (thread 63 writes
 * row[64]). */
__global__ void shared_past_end_kernel(float *out)
{
    __shared__ float row[64];
    BUG_LINE(0) row[threadIdx.x + 1] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = row[threadIdx.x / 2 + 1];
}

/* A write one element past the end of the buffer (64 threads, 64 floats). */
__global__ void global_overflow_kernel(float *out)
{
    BUG_LINE(0) out[threadIdx.x + 1] = 1.0f;
}

/* A read one element past the end of the input (64 threads, 64 floats). */
__global__ void global_overread_kernel(const float *in, float *out)
{
    BUG_LINE(0) out[threadIdx.x] = in[threadIdx.x + 1];
}

/* Launched on a buffer that was freed before the launch. */
__global__ void use_after_free_kernel(float *out)
{
    BUG_LINE(0) out[threadIdx.x] = 1.0f;
}

/* Reads an input that nothing wrote: cudaMalloc'ed, never copied into. */
__global__ void uninitialised_read_kernel(const float *in, float *out)
{
    BUG_LINE(0) out[threadIdx.x] = 2.0f * in[threadIdx.x];
}

/* C = A B, one 16 x 16 tile of C per block, A (16 x K) and B (K x 16)
 * row-major: the barrier between loading a tile pair and using it is
 * missing, so a thread reads slots its neighbours have not loaded yet. */
#define MM_TILE 16
__global__ void matmul_missing_barrier_kernel(const float *A, const float *B, float *C, int K)
{
    __shared__ float a_tile[MM_TILE][MM_TILE];
    __shared__ float b_tile[MM_TILE][MM_TILE];
    const unsigned ty = threadIdx.y, tx = threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += MM_TILE) {
        BUG_LINE(0) a_tile[ty][tx] = A[ty * K + k0 + tx]; b_tile[ty][tx] = B[(k0 + ty) * MM_TILE + tx];
        /* here belongs a __syncthreads(): every slot loaded before any is read */
        for (int k = 0; k < MM_TILE; ++k) {
            BUG_LINE(1) acc += a_tile[ty][k] * b_tile[k][tx];
        }
        __syncthreads(); /* every slot read before the next tile overwrites it */
    }
    C[ty * MM_TILE + tx] = acc;
}

/* A 16-byte vector store through a pointer to an element, the last one
 * past the end of the array (16 threads, 66 floats: thread 15 stores
 * row[64..67]; the index 64 itself is inside the array). */
struct __align__(16) Quad {
    float v[4];
};
__global__ void shared_vector_overflow_kernel(float *out)
{
    __shared__ __align__(16) float row[66];
    const Quad q = {{1.0f, 2.0f, 3.0f, 4.0f}};
    BUG_LINE(0) *reinterpret_cast<Quad *>(&row[4 * threadIdx.x + 4]) = q;
    __syncthreads();
    out[threadIdx.x] = row[threadIdx.x];
}

/* A 16-byte vector store at a float that is not 16-byte aligned (row[2],
 * row[6], ...): inside the array, but vector accesses must be aligned to
 * their size. */
__global__ void shared_vector_misaligned_kernel(float *out)
{
    __shared__ __align__(16) float row[64];
    const Quad q = {{1.0f, 2.0f, 3.0f, 4.0f}};
    BUG_LINE(0) *reinterpret_cast<Quad *>(&row[4 * threadIdx.x + 2]) = q;
    __syncthreads();
    out[threadIdx.x] = row[threadIdx.x];
}

/* An asynchronous copy (cp.async) read before its thread waited for it:
 * each thread copies one float into tile[t] and reads its neighbour's slot
 * after the barrier, but waits for its own copy only after that, so the
 * neighbour's bytes may not have landed when they are read. The barrier
 * orders the issue of the copies, not their landing. */
__global__ void async_copy_early_read_kernel(const float *in, float *out)
{
    __shared__ __align__(16) float tile[64];
    const int t = threadIdx.x;
    BUG_LINE(0) async_copy<4>(&tile[t], in + t, 4);
    async_commit();
    __syncthreads();
    out[t] = tile[(t + 1) % 64];
    async_wait<0>();
}

/* The address of a shared element kept in a variable: each thread writes
 * its slot through `row` and reads its neighbour's with no barrier between
 * (the checks follow the raw pointer, not only tile[i] itself). */
__global__ void shared_pointer_race_kernel(float *out)
{
    __shared__ float tile[64];
    float *row = &tile[0];
    const int t = threadIdx.x;
    BUG_LINE(0) row[t] = (float)t;
    BUG_LINE(1) out[t] = row[(t + 1) % 64];
}

/* A student's block reduction that folds every thread's value into one
 * slot of a BlockScratch, between two barriers: a read-modify-write race
 * (on a GPU the updates are lost; run one thread after another, they add
 * up, and the sum comes out right). */
__global__ void scratch_rmw_race_kernel(const float *in, float *out)
{
    __shared__ BlockScratch<float> scratch;
    float *s = scratch.slot;
    const unsigned t = threadIdx.x;
    if (t == 0)
        s[0] = 0.0f;
    __syncthreads();
    BUG_LINE(0) s[0] = s[0] + (float)(t + 1);
    __syncthreads();
    if (t == 0)
        out[0] = s[0];
}

/* Half the tile loaded, all of it read: threads 32..63 read slots nothing
 * wrote (on a GPU, whatever an earlier block left there). */
__global__ void uninitialised_shared_read_kernel(float *out)
{
    __shared__ float tile[64];
    const unsigned t = threadIdx.x;
    if (t < 32)
        tile[t] = (float)t;
    __syncthreads();
    BUG_LINE(0) out[t] = 2.0f * tile[t];
}

/* `i <= n` for `i < n`: one float past the end of a 61-float buffer, whose
 * size (244 bytes) is not a multiple of 16. */
__global__ void global_overrun_bytes_kernel(float *out, int n)
{
    const int i = threadIdx.x;
    if (i <= n) {
        BUG_LINE(0) out[i] = 1.0f;
    }
}

/* A 128 KiB local array: legal on a GPU (local memory), more than the
 * emulated thread's stack holds unless MINITENSOR_EMU_STACK is raised. */
__global__ void stack_overflow_kernel(float *out, int n)
{
    float big[32768];
    BUG_LINE(0) for (int i = 0; i < 32768; ++i) big[i] = (float)(i ^ n); /* (one line: it faults at once) */
    out[threadIdx.x] = big[(threadIdx.x * 517u + (unsigned)n) % 32768u];
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

/* The bug corpus, by name (tests/c/broken_driver.c runs one by name). */
static const char *const bug_names[] = {
    "split_barrier", "missing_barrier", "two_writers", "shared_overflow", "global_overflow",
    "use_after_free", "warp_ordered", "global_overread", "uninitialised_read", "matmul_missing_barrier",
    "shared_past_end", "shared_vector_overflow", "shared_vector_misaligned", "async_copy_early_read",
    "shared_pointer_race", "scratch_rmw_race", "uninitialised_shared_read", "global_overrun_bytes",
    "stack_overflow"};
#define BUG_COUNT ((int)(sizeof bug_names / sizeof bug_names[0]))

extern "C" int mt_test_bug_count(void) { return BUG_COUNT; }
extern "C" const char *mt_test_bug_name(int which)
{
    return which >= 0 && which < BUG_COUNT ? bug_names[which] : NULL;
}

/* Runs broken kernel `which` (an index into bug_names; 6, warp_ordered, is
 * the correct one) on 64-float buffers, one block; returns the error of the
 * synchronize after it, its message, and the bug's lines (emulator build;
 * 0 in the CUDA build). */
extern "C" int mt_test_launch_bug(int which, char *msg, size_t msgsize, int *line0, int *line1)
{
    float *buf = NULL, *in = NULL, *b = NULL;
    cudaError_t err = cudaMalloc((void **)&buf, 64 * sizeof(float));
    if (err == cudaSuccess)
        err = cudaMalloc((void **)&in, 64 * 16 * sizeof(float));
    if (err == cudaSuccess)
        err = cudaMalloc((void **)&b, 64 * 16 * sizeof(float));
    if (err != cudaSuccess) {
        copy_message(err, msg, msgsize);
        cudaFree(buf);
        cudaFree(in);
        return (int)err;
    }
#ifdef MT_EMULATOR
    bug_line[0] = bug_line[1] = 0;
#endif
    switch (which) {
    case 0: split_barrier_kernel<<<1, 64>>>(buf); break;
    case 1: missing_barrier_kernel<<<1, 64>>>(buf); break;
    case 2: two_writers_kernel<<<1, 64>>>(buf); break;
    case 3: shared_overflow_kernel<<<1, 64>>>(buf); break;
    case 4: global_overflow_kernel<<<1, 64>>>(buf); break;
    case 5:
        cudaFree(buf);
        use_after_free_kernel<<<1, 64>>>(buf);
        buf = NULL;
        break;
    case 6: warp_ordered_kernel<<<1, 32>>>(buf); break;
    case 7:
        /* A 64-float input, every element written, read one past its end. */
        cudaFree(in);
        err = cudaMalloc((void **)&in, 64 * sizeof(float));
        if (err == cudaSuccess)
            err = cudaMemset(in, 0, 64 * sizeof(float));
        if (err == cudaSuccess)
            global_overread_kernel<<<1, 64>>>(in, buf);
        break;
    case 8: uninitialised_read_kernel<<<1, 64>>>(in, buf); break;
    case 9:
        /* A (16 x 64) and B (64 x 16), both written: four tiles along K. */
        err = cudaMemset(in, 0, 64 * 16 * sizeof(float));
        if (err == cudaSuccess)
            err = cudaMemset(b, 0, 64 * 16 * sizeof(float));
        if (err == cudaSuccess) {
            cudaFree(buf);
            err = cudaMalloc((void **)&buf, 16 * 16 * sizeof(float));
        }
        if (err == cudaSuccess)
            matmul_missing_barrier_kernel<<<1, dim3(16, 16)>>>(in, b, buf, 64);
        break;
    case 10: shared_past_end_kernel<<<1, 64>>>(buf); break;
    case 11: shared_vector_overflow_kernel<<<1, 16>>>(buf); break;
    case 12: shared_vector_misaligned_kernel<<<1, 8>>>(buf); break;
    case 13:
        err = cudaMemset(in, 0, 64 * sizeof(float));
        if (err == cudaSuccess)
            async_copy_early_read_kernel<<<1, 64>>>(in, buf);
        break;
    case 14: shared_pointer_race_kernel<<<1, 64>>>(buf); break;
    case 15:
        err = cudaMemset(in, 0, 64 * sizeof(float));
        if (err == cudaSuccess)
            scratch_rmw_race_kernel<<<1, 64>>>(in, buf);
        break;
    case 16: uninitialised_shared_read_kernel<<<1, 64>>>(buf); break;
    case 17:
        /* A 61-float output (244 bytes), 64 threads, the bound n = 61. */
        cudaFree(buf);
        err = cudaMalloc((void **)&buf, 61 * sizeof(float));
        if (err == cudaSuccess)
            global_overrun_bytes_kernel<<<1, 64>>>(buf, 61);
        break;
    case 18: stack_overflow_kernel<<<1, 64>>>(buf, 7); break;
    default: break;
    }
    if (err == cudaSuccess)
        err = cudaDeviceSynchronize();
    copy_message(err, msg, msgsize);
    cudaFree(buf);
    cudaFree(in);
    cudaFree(b);
#ifdef MT_EMULATOR
    *line0 = bug_line[0];
    *line1 = bug_line[1];
#else
    *line0 = *line1 = 0;
#endif
    return (int)err;
}

/* ======================================================================== */
/* The mbarrier twins' own checks (tests/c/test_emu_checks.c, "mbarriers")   */
/* ======================================================================== */
/* At the end of the file, so that the lines of the kernels above, which
 * docs/emulator.md quotes, stay where they are. */
#ifdef MT_EMULATOR
#include "tma.h"

/* mbarriers (src/tma.h) used wrongly; on a GPU the first would hang, so
 * only the emulator runs them. which 0: thread 0 arrives on a barrier that
 * counts 2 arrivals, and every thread waits for the phase (a deadlock);
 * 1: thread 0 arrives on a barrier that counts 1 and announces 64 bytes of
 * copies, then thread 1 arrives in the same phase, which still waits for
 * the bytes (more arrivals than its count); 2: a wait on a barrier nobody
 * initialised. */
__global__ void mbarrier_bug_kernel(float *out, int which)
{
    extern __shared__ __align__(16) unsigned char bytes[];
    uint64_t *bar = reinterpret_cast<uint64_t *>(&bytes[0]);
    if (threadIdx.x == 0 && which != 2)
        mbar_init(bar, which == 0 ? 2 : 1);
    __syncthreads();
    if (threadIdx.x == 0 && which == 1)
        mbar_arrive_expect(bar, 64);
    else if (threadIdx.x == 0 || (which == 1 && threadIdx.x == 1))
        mbar_arrive(bar);
    mbar_wait(bar, 0);
    out[threadIdx.x] = 1.0f;
}

extern "C" int mt_test_launch_mbarrier_bug(int which, char *msg, size_t msgsize)
{
    float *buf = NULL;
    cudaError_t err = cudaMalloc((void **)&buf, 64 * sizeof(float));
    if (err == cudaSuccess) {
        mbarrier_bug_kernel<<<1, 64, 16>>>(buf, which);
        err = launch_result();
    }
    copy_message(err, msg, msgsize);
    cudaFree(buf);
    return (int)err;
}

#endif /* MT_EMULATOR */
