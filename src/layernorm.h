/*
 * layernorm.h: what src/layernorm.cu (the forward) and
 * src/layernorm_backward.cu share: the argument checks, the row layout of
 * the register kernels, and the block size both are built for.
 *
 * This header declares no __shared__ arrays and launches nothing (it is not
 * passed through minitensor/cuda/_cu2emu.py, only the .cu files are).
 */
#ifndef MT_LAYERNORM_H
#define MT_LAYERNORM_H

#include "ops_common.h"
#include "block_reduce.h" /* after ops_common.h: its stub uses task.h */
#include "combine.h"

/* The most threads a block of the register kernels has. */
constexpr int kMaxRegisterThreads = 512;

/* The first element of t, or null for an absent tensor (no data). */
template <typename T>
static T *first_of(const mt_tensor &t)
{
    return t.data ? static_cast<T *>(t.data) + t.offset : nullptr;
}

/* Element k of the row that slot (p, w) of thread t holds: with 16-byte Packs
 * (vec) Pack c = p * B + t covers elements c * W .. c * W + W - 1; without,
 * neighbouring threads hold neighbouring elements. As in softmax.cu. */
static MT_DEVICE int64_t slot_element(bool vec, int p, int w, int64_t B, int64_t t, int W)
{
    return vec ? (p * B + t) * W + w : (p * W + w) * B + t;
}

/* t is a contiguous tensor of `dtype` and shape (d0, d1), or (d0,) when
 * d1 < 0: the layouts every argument here has (the ops layer makes them). */
mt_status check_layout(const char *func, const char *name, const mt_tensor *t, int dtype, int64_t d0, int64_t d1,
                       bool output);

/* What both entry points ask of `in` first: its rank and dtype fix every
 * other argument's. */
mt_status check_in(const char *func, const mt_tensor &in);

#endif /* MT_LAYERNORM_H */
