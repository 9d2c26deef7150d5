/*
 * ops_common.h: what every kernel file includes.
 *
 *   check.h         the error idiom (MT_TRY, CUDA_CHECK) and argument checks
 *   launch.h        launch geometry, Pack<T>, mt_sm_count
 *   descriptor.h    host predicates on descriptors (contiguous? overlap?)
 *   scratch.h       DeviceScratch, a temporary device buffer
 *   device_math.h   mt_exp & co., one overload per precision; NaN-aware max
 *   indexing.h      ordinal -> position in a strided tensor
 *   policy.h        the kernel policy: may a default path take a fast rung?
 *
 * Not block_reduce.h (block reductions and BlockScratch): only the files
 * that reduce include it (reduce.h, softmax.cu), so that an edit of it (the
 * reductions task of the course) recompiles those three files, not all.
 */
#ifndef MT_OPS_COMMON_H
#define MT_OPS_COMMON_H

#include "check.h"
#include "descriptor.h"
#include "device_math.h"
#include "indexing.h"
#include "launch.h"
#include "policy.h"
#include "scratch.h"

/* out = in for validated tensors of the same shape and dtype (either may
 * have any strides): the library's own copies, such as matmul's operand
 * preparation, go through it (src/map.cu), so they get the tiled transpose
 * when in is a transposed view. */
mt_status copy_tensor(const mt_tensor &out, const mt_tensor &in);

#endif /* MT_OPS_COMMON_H */
