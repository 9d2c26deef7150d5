/*
 * cuda_compat.h: include this instead of <cuda_runtime.h>.
 *
 * The CUDA build gets the real runtime. The emulator build (MT_EMULATOR
 * defined, sources passed through minitensor/cuda/_cu2emu.py) gets emu/emu.h, which
 * gives the same names (threadIdx, __syncthreads, cudaMalloc, ...) with
 * CUDA's semantics on the CPU. Kernel and host code are written once.
 */
#ifndef MT_CUDA_COMPAT_H
#define MT_CUDA_COMPAT_H

#ifdef MT_EMULATOR
#include "emu/emu.h"
#else
#include <cuda_runtime.h>
#endif

#endif /* MT_CUDA_COMPAT_H */
