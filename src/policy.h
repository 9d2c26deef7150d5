/*
 * policy.h: the kernel policy, in one place (src/policy.cu), that every
 * launcher with a choice of kernels asks (minitensor.h, "kernel policy").
 *
 * A launcher reads it once per call, where it would pick a fast rung:
 *
 *     if (mt_fast_kernels() && aligned16(out_first) && aligned16(in_first))
 *         ... the 16-byte-load kernel ...
 *     ... the teaching kernel ...
 *
 * so that under MT_KERNELS_TEACHING every default path ends in the kernels
 * students write, with no edit of the launch code.
 */
#ifndef MT_POLICY_H
#define MT_POLICY_H

#include "minitensor.h"

/* True under MT_KERNELS_FAST (the default): the default paths may take the
 * fast rungs. One relaxed atomic load. */
bool mt_fast_kernels(void);

/* Applies MINITENSOR_KERNELS (unless mt_set_kernel_policy was called
 * first); MT_ERR_INVALID_ARGUMENT, naming the variable and the allowed
 * values, for any value but fast and teaching. mt_ensure_init calls it at
 * the first initialisation, which fails (and is retried by the next call)
 * while the value is wrong. */
mt_status mt_kernel_policy_from_env(const char *func);

#endif /* MT_POLICY_H */
