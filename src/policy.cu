/*
 * policy.cu: the kernel policy (fast or teaching), and the launch counts
 * through which tests check that the policy is obeyed.
 *
 * The policy is one process-wide atomic: every launcher that has a fast rung
 * asks mt_fast_kernels() when it chooses a kernel (src/policy.h), so a call
 * sees either policy whole, never a mix within one kernel choice.
 */
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "check.h"
#include "policy.h"

static std::atomic<int> g_policy{MT_KERNELS_FAST};
/* Set by mt_set_kernel_policy: an explicit choice wins over the environment. */
static std::atomic<bool> g_chosen{false};

bool mt_fast_kernels(void)
{
    return g_policy.load(std::memory_order_relaxed) == MT_KERNELS_FAST;
}

mt_status mt_kernel_policy_from_env(const char *func)
{
    const char *value = getenv("MINITENSOR_KERNELS");
    if (value == nullptr || value[0] == '\0')
        return MT_OK;
    int policy;
    if (strcmp(value, "fast") == 0)
        policy = MT_KERNELS_FAST;
    else if (strcmp(value, "teaching") == 0)
        policy = MT_KERNELS_TEACHING;
    else
        /* No fallback: a misspelt "teching" would otherwise grade students
         * against the fast kernels without anyone noticing. */
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "MINITENSOR_KERNELS='%s' is not a kernel policy; the allowed values are "
                       "'fast' and 'teaching' (unset means fast)",
                       value);
    if (!g_chosen.load())
        g_policy.store(policy);
    return MT_OK;
}

mt_status mt_set_kernel_policy(mt_kernel_policy policy)
{
    if (policy != MT_KERNELS_FAST && policy != MT_KERNELS_TEACHING)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_set_kernel_policy",
                       "unknown kernel policy %d (MT_KERNELS_FAST = 0, MT_KERNELS_TEACHING = 1)", (int)policy);
    g_chosen.store(true);
    g_policy.store(policy);
    return MT_OK;
}

mt_kernel_policy mt_get_kernel_policy(void)
{
    return (mt_kernel_policy)g_policy.load();
}

/* ---- launch counts (the emulator counts; src/emu/emu_launch_count.cpp) ---- */

int64_t mt_launch_count(const char *kernel, const char *with)
{
#ifdef MT_EMULATOR
    if (kernel == nullptr)
        return 0;
    return mt_emu::launch_count(kernel, with);
#else
    (void)kernel;
    (void)with;
    return -1;
#endif
}

void mt_reset_launch_counts(void)
{
#ifdef MT_EMULATOR
    mt_emu::reset_launch_counts();
#endif
}
