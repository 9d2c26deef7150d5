/*
 * group_kernels.cu: kernels of several emulated devices that wait for each
 * other, for test_emu_group.c (the emulator's launch groups,
 * src/emu/emu_group.cpp). Emulator only: the launch group is the
 * emulator's answer to launches that run to their end one at a time.
 *
 * Each host function returns the cudaError_t of the group (as an int) and
 * copies its message into `msg`.
 */
#include <string.h>

#include "check.h"

/* Thread 0 of block b on `rank` tells every rank's slot [b][rank] that it is
 * here, then waits until every rank told its own slots the same (the p2p
 * barrier's shape, src/dist/p2p_internal.h); every thread then records that
 * its block passed. A rank whose divergent flag is set breaks its block's
 * __syncthreads() instead (the emulator's error). */
__global__ void exchange_kernel(unsigned *const *flags, int rank, int world, int *passed, int diverge)
{
    if (diverge && threadIdx.x < blockDim.x / 2)
        return;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int peer = 0; peer < world; ++peer)
            __atomic_store_n(flags[peer] + blockIdx.x * 8 + rank, 1u, __ATOMIC_RELEASE);
        for (int peer = 0; peer < world; ++peer)
            ::mt_emu::wait_flag_at_least(flags[rank] + blockIdx.x * 8 + peer, 1u, "exchange_kernel");
    }
    __syncthreads();
    atomicAdd(passed, 1);
}

static int finish(cudaError_t err, char *msg, size_t msgsize)
{
    const char *s = err == cudaSuccess ? "" : cudaGetErrorString(err);
    strncpy(msg, s ? s : "(null)", msgsize - 1);
    msg[msgsize - 1] = '\0';
    (void)cudaGetLastError();
    return (int)err;
}

/* `world` devices, `blocks` blocks of 32 threads each; rank `missing` is not
 * launched (-1: all are); rank `broken` diverges at its barrier (-1: none);
 * in_group 0 launches without a group. *passed: threads past the exchange. */
extern "C" int mt_test_group_exchange(int world, int blocks, int missing, int broken, int in_group, int *passed,
                                      char *msg, size_t msgsize)
{
    if (::mt_emu::set_devices(world, true) != cudaSuccess)
        return finish(cudaErrorInvalidValue, msg, msgsize);
    unsigned *flags[8] = {};
    unsigned **table = nullptr;
    int *count = nullptr;
    for (int r = 0; r < world; ++r) {
        cudaSetDevice(r);
        cudaMalloc(&flags[r], sizeof(unsigned) * 8 * 300);
        cudaMemset(flags[r], 0, sizeof(unsigned) * 8 * 300);
    }
    cudaSetDevice(0);
    cudaMalloc(&table, sizeof flags);
    cudaMemcpy(table, flags, sizeof flags, cudaMemcpyHostToDevice);
    cudaMalloc(&count, sizeof(int));
    cudaMemset(count, 0, sizeof(int));
    if (in_group)
        ::mt_emu::begin_launch_group();
    cudaError_t err = cudaSuccess;
    for (int r = 0; r < world && err == cudaSuccess; ++r) {
        if (r == missing)
            continue;
        cudaSetDevice(r);
        exchange_kernel<<<blocks, 32>>>(table, r, world, count, r == broken);
        err = cudaGetLastError();
    }
    if (in_group) {
        cudaError_t end = ::mt_emu::end_launch_group();
        err = err == cudaSuccess ? end : err;
    }
    cudaSetDevice(0);
    *passed = 0;
    cudaMemcpy(passed, count, sizeof(int), cudaMemcpyDeviceToHost);
    for (int r = 0; r < world; ++r)
        cudaFree(flags[r]);
    cudaFree(table);
    cudaFree(count);
    ::mt_emu::set_devices(1, true);
    return finish(err, msg, msgsize);
}
