/*
 * emu_barrier_cost.cu: what one __syncthreads() costs a thread in the CPU
 * emulator. Build and run with `make bench-emu`.
 *
 * Two kernels do the same arithmetic; one also meets at a barrier after each
 * step. The difference in time, divided by (threads x barriers), is the cost
 * of one barrier per thread: two fiber switches plus the scheduler's
 * bookkeeping. The emulator is for correctness, never for timings of kernels;
 * this number only says how long the test suite takes.
 */
#include "check.h"

#include <cstdio>
#include <ctime>

constexpr int kSteps = 32;

__global__ void steps_without_barriers(float *out)
{
    float acc = threadIdx.x;
    for (int s = 0; s < kSteps; ++s)
        acc = acc * 0.5f + 1.0f;
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

__global__ void steps_with_barriers(float *out)
{
    float acc = threadIdx.x;
    for (int s = 0; s < kSteps; ++s) {
        acc = acc * 0.5f + 1.0f;
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

/* CPU time of this thread, which runs every block with
 * MINITENSOR_EMU_THREADS=1: on a shared machine, wall time would mostly
 * measure the other jobs. */
static double seconds_of(void (*launch)(float *, int, int), float *out, int blocks, int threads)
{
    timespec start, end;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    launch(out, blocks, threads);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
    return (double)(end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) * 1e-9;
}

static void launch_plain(float *out, int blocks, int threads)
{
    steps_without_barriers<<<blocks, threads>>>(out);
}

static void launch_barriers(float *out, int blocks, int threads)
{
    steps_with_barriers<<<blocks, threads>>>(out);
}

int main()
{
    const int blocks = 256;
    std::printf("%-8s %-16s %-16s %s\n", "block", "no barriers (ms)", "32 barriers (ms)",
                "ns per __syncthreads() per thread");
    for (int threads : {32, 128, 256, 1024}) {
        float *out = nullptr;
        if (cudaMalloc(&out, sizeof(float) * blocks * threads) != cudaSuccess)
            return 1;
        seconds_of(launch_barriers, out, blocks, threads); /* warm the stack pools */
        double plain = seconds_of(launch_plain, out, blocks, threads);
        double synced = seconds_of(launch_barriers, out, blocks, threads);
        cudaError_t err = cudaGetLastError();
        if (err != cudaSuccess) {
            std::printf("launch failed: %s\n", cudaGetErrorString(err));
            return 1;
        }
        double per = (synced - plain) / ((double)blocks * threads * kSteps) * 1e9;
        std::printf("%-8d %-16.2f %-16.2f %.1f\n", threads, plain * 1e3, synced * 1e3, per);
        cudaFree(out);
    }
    return 0;
}
