/*
 * emu_launch.cu: what a launch costs in the CPU emulator, for kernels with
 * and without barriers. Built by `make bench-emu`; bench/emu_launch.py runs
 * it (against this build and, to compare, an older one) with the Python
 * cases, and prints one table.
 *
 * Each case prints one line, "name microseconds", the median of many
 * launches, in CPU time of the calling thread (which runs every block when
 * MINITENSOR_EMU_THREADS=1): on a shared machine wall time mostly measures
 * the other jobs. The emulator is for correctness, never for timings of kernels:
 * these numbers only say how long the test suites take.
 */
#include "check.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <vector>

/* No barrier: every thread runs from start to end in one go. */
__global__ void write_index(float *out)
{
    out[blockIdx.x * blockDim.x + threadIdx.x] = 2.0f * threadIdx.x;
}

/* A tree reduction in shared memory: log2(256) = 8 barriers per thread. */
__global__ void tree_sum(const float *in, float *out)
{
    __shared__ float partial[256];
    unsigned t = threadIdx.x;
    partial[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    /* Halve the active threads each step; the barrier keeps a step's reads
     * after the previous step's writes. */
    for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride)
            partial[t] += partial[t + stride];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = partial[0];
}

/* A warp reduction: 5 shuffles per thread, each a meeting of its warp. */
__global__ void warp_sum(const float *in, float *out)
{
    float v = in[blockIdx.x * blockDim.x + threadIdx.x];
    for (int delta = 16; delta > 0; delta /= 2)
        v += __shfl_down_sync(0xffffffffu, v, delta);
    if (threadIdx.x % 32 == 0)
        out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = v;
}

static double cpu_us()
{
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

template <typename Launch>
static double median_us(int repeats, Launch launch)
{
    std::vector<double> us;
    launch(); /* warm: the emulator's fibers and stacks */
    for (int r = 0; r < repeats; ++r) {
        double start = cpu_us();
        launch();
        us.push_back(cpu_us() - start);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}

/* Every case, then a check that the reduction added up. */
static mt_status run_cases()
{
    const int n = 256 * 256;
    float *in = nullptr, *out = nullptr;
    CUDA_CHECK(cudaMalloc(&in, sizeof(float) * n));
    CUDA_CHECK(cudaMalloc(&out, sizeof(float) * n));
    std::vector<float> ones(n, 1.0f);
    CUDA_CHECK(cudaMemcpy(in, ones.data(), sizeof(float) * n, cudaMemcpyHostToDevice));

    std::printf("launch_1024_no_barrier %.2f\n", median_us(301, [&] { write_index<<<1, 1024>>>(out); }));
    std::printf("launch_64x1024_no_barrier %.1f\n", median_us(21, [&] { write_index<<<64, 1024>>>(out); }));
    std::printf("tree_sum_256x256 %.1f\n", median_us(21, [&] { tree_sum<<<256, 256>>>(in, out); }));
    std::printf("warp_sum_64x1024 %.1f\n", median_us(21, [&] { warp_sum<<<64, 1024>>>(in, out); }));
    CUDA_CHECK(cudaDeviceSynchronize());

    tree_sum<<<256, 256>>>(in, out);
    CUDA_CHECK(cudaGetLastError());
    std::vector<float> sums(256);
    CUDA_CHECK(cudaMemcpy(sums.data(), out, sizeof(float) * 256, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(in));
    CUDA_CHECK(cudaFree(out));
    for (float s : sums)
        if (s != 256.0f)
            return mt_fail(MT_ERR_CUDA, "emu_launch", "tree_sum added 256 ones up to %g", s);
    return MT_OK;
}

int main()
{
    if (run_cases() != MT_OK) {
        std::printf("emu_launch failed: %s\n", mt_last_error());
        return 1;
    }
    return 0;
}
