/*
 * p2p_group.cu: the group of GPUs one process drives (minitensor_p2p.h):
 * peer access, the buffers every rank reduces in, launching a rung on every
 * device at once, and the entry points (all-reduce of tensors, benchmark).
 *
 * Launching on every device: the host sets device r current and launches
 * rank r's kernel on rank r's stream, for r = 0, 1, ...; the launches are
 * asynchronous, so all ranks' kernels run together and meet at their
 * barriers. Two consequences:
 *   - a launch's error is read with cudaGetLastError, not mt_launch_status:
 *     in sync-debug mode that waits for the device, and rank 0's kernel
 *     would wait at its first barrier for rank 1's, not launched yet;
 *   - on the emulator, whose launches run to their end, the launches are
 *     made inside a launch group (src/emu/emu_group.cpp), which runs every
 *     block of every rank at once when it ends;
 *   - a launch refused after earlier ranks' launches were accepted leaves
 *     those waiting at their first barrier for a rank that never comes: on
 *     a GPU they trap after 10 s (p2p_flag_wait), on the emulator nothing
 *     of the group runs. Every rank's launch has the same configuration,
 *     so in practice the first is refused when any is.
 * The barrier count (mtp_group::epoch) goes up by what each launch uses, so
 * the flags only grow and are never reset (p2p_internal.h).
 */
#include "p2p_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "descriptor.h"

namespace {

/* Bytes up to which "auto" takes oneshot (one barrier, (world-1) x size read
 * per GPU) over twoshot (two barriers, 2 (world-1) / world x size): the
 * crossover bench/p2p_allreduce.py measures. On 4 x H100 (NVLink) oneshot
 * still won at 1 MiB (56.7 against 62.2 us) and lost at 4 MiB (88.2 against
 * 79.4 us): below a few MiB a call is latency, the barrier count decides. */
constexpr int64_t kOneshotMaxBytes = 1024 * 1024;

/* Groups alive (the emulator's device count may not change under them). */
int g_live_groups = 0;

/* Restores the thread's current device on every way out: the core library
 * remembers which device it made current for each thread (src/library.cu)
 * and would not notice that a p2p call changed it. */
struct DeviceGuard {
    int saved = -1;
    DeviceGuard()
    {
        if (cudaGetDevice(&saved) != cudaSuccess) {
            (void)cudaGetLastError();
            saved = -1;
        }
    }
    ~DeviceGuard()
    {
        /* Cannot fail in practice (the device was current a moment ago),
         * and a destructor has nobody to report to. */
        if (saved >= 0)
            (void)cudaSetDevice(saved);
    }
};

/* The emulator's launch group; on a GPU nothing (its launches on several
 * devices run at once anyway). Abandoned when a launch fails half-way. */
struct LaunchGroup {
#ifdef MT_EMULATOR
    bool open = false;
    void begin()
    {
        ::mt_emu::begin_launch_group();
        open = true;
    }
    cudaError_t end()
    {
        open = false;
        return ::mt_emu::end_launch_group();
    }
    ~LaunchGroup()
    {
        if (open)
            ::mt_emu::abandon_launch_group();
    }
#else
    void begin() {}
    cudaError_t end() { return cudaSuccess; }
#endif
};

/* Clean-up paths go on after a failed call (to free the rest), keeping the
 * first failure's status and message: `status` is updated and returned. */
mt_status keep_first(mt_status *status, cudaError_t err, const char *expr, int line)
{
    if (err != cudaSuccess && *status == MT_OK)
        *status = mt_fail_cuda(err, expr, __FILE__, line);
    return *status;
}
#define KEEP_FIRST(status, call) keep_first(&(status), (call), #call, __LINE__)

size_t dtype_bytes(int dtype) { return dtype == MT_FLOAT32 ? 4 : 8; }

/* Bytes of each rank's buffer for count elements: whole packs. */
size_t padded_bytes(int dtype, int64_t count)
{
    const size_t bytes = (size_t)count * dtype_bytes(dtype);
    return (bytes + kP2PPackBytes - 1) / kP2PPackBytes * kP2PPackBytes;
}

mt_status free_buffers(mtp_group *g)
{
    for (int r = 0; r < g->world; ++r) {
        CUDA_CHECK(cudaSetDevice(g->devices[r]));
        CUDA_CHECK(cudaFree(g->in[r]));
        CUDA_CHECK(cudaFree(g->out[r]));
        g->in[r] = g->out[r] = nullptr;
    }
    g->capacity = 0;
    return MT_OK;
}

/* Every rank's in and out buffers hold at least `bytes` (zeroed when made:
 * the padding past the data is read by the pack-wide rungs). */
mt_status ensure_capacity(mtp_group *g, size_t bytes)
{
    if (bytes <= g->capacity)
        return MT_OK;
    for (int r = 0; r < g->world; ++r) {
        CUDA_CHECK(cudaSetDevice(g->devices[r]));
        CUDA_CHECK(cudaStreamSynchronize(g->streams[r]));
    }
    MT_TRY(free_buffers(g));
    const size_t want = (bytes + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1); /* whole MiB */
    for (int r = 0; r < g->world; ++r) {
        CUDA_CHECK(cudaSetDevice(g->devices[r]));
        CUDA_CHECK(cudaMalloc((void **)&g->in[r], want));
        CUDA_CHECK(cudaMalloc((void **)&g->out[r], want));
        CUDA_CHECK(cudaMemset(g->in[r], 0, want));
        CUDA_CHECK(cudaMemset(g->out[r], 0, want));
    }
    g->capacity = want;
    return MT_OK;
}

/* One all-reduce of count elements, in[*] -> out[*], every rank's kernel
 * launched (not waited for). */
mt_status run_rung(mtp_group *g, int rung, int dtype, int64_t count)
{
    if (rung == MTP_RUNG_auto)
        rung = (int64_t)padded_bytes(dtype, count) <= kOneshotMaxBytes ? MTP_RUNG_oneshot : MTP_RUNG_twoshot;
    LaunchGroup group;
    group.begin();
    unsigned barriers = 0;
    const unsigned epoch = g->epoch;
    for (int r = 0; r < g->world; ++r) {
        CUDA_CHECK(cudaSetDevice(g->devices[r]));
        switch (rung) {
        case MTP_RUNG_naive:
            MT_TRY(p2p_launch_naive(g, r, dtype, count, epoch, g->streams[r], &barriers));
            break;
        case MTP_RUNG_ring:
            MT_TRY(p2p_launch_ring(g, r, dtype, count, epoch, g->streams[r], &barriers));
            break;
        default:
            MT_TRY(p2p_launch_shot(g, r, dtype, count, epoch, g->streams[r], rung == MTP_RUNG_twoshot, &barriers));
            break;
        }
        /* Not mt_launch_status(): see the top of this file. */
        CUDA_CHECK(cudaGetLastError());
    }
    /* Counted before the kernels finish (or fail): a barrier some rank
     * passed must never be waited for again. */
    g->epoch += barriers;
    CUDA_CHECK(group.end());
    return MT_OK;
}

mt_status sync_all(const mtp_group *g)
{
    for (int r = 0; r < g->world; ++r) {
        CUDA_CHECK(cudaSetDevice(g->devices[r]));
        CUDA_CHECK(cudaStreamSynchronize(g->streams[r]));
    }
    return MT_OK;
}

mt_status check_rung(const char *func, int rung)
{
    return mt_check_id(func, "p2p rung", rung, MTP_RUNG_COUNT);
}

/* Fills g (allocated, zeroed, world and devices set); the caller destroys
 * it on failure. */
mt_status build_group(const char *func, mtp_group *g)
{
    for (int i = 0; i < g->world; ++i)
        for (int j = 0; j < g->world; ++j) {
            if (i == j)
                continue;
            int can = 0;
            CUDA_CHECK(cudaDeviceCanAccessPeer(&can, g->devices[i], g->devices[j]));
            if (!can)
                return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                               "device %d cannot access device %d's memory (cudaDeviceCanAccessPeer: 0): no "
                               "NVLink or PCIe peer path between them (different PCIe root complexes, a "
                               "virtual machine without P2P, or IOMMU settings); a p2p group needs every pair "
                               "of its devices to reach each other, so use the NCCL path (one process per "
                               "GPU) there", g->devices[i], g->devices[j]);
        }
    int max_blocks = kP2PMaxBlocks;
    for (int r = 0; r < g->world; ++r) {
        CUDA_CHECK(cudaSetDevice(g->devices[r]));
        for (int j = 0; j < g->world; ++j) {
            if (j == r)
                continue;
            cudaError_t err = cudaDeviceEnablePeerAccess(g->devices[j], 0);
            if (err == cudaErrorPeerAccessAlreadyEnabled)
                (void)cudaGetLastError(); /* enabled by an earlier group: peer access stays on */
            else
                CUDA_CHECK(err);
        }
        CUDA_CHECK(cudaStreamCreate(&g->streams[r]));
        const size_t flag_bytes = sizeof(unsigned) * kP2PFlagBlocks * MTP_MAX_DEVICES;
        CUDA_CHECK(cudaMalloc((void **)&g->flags[r], flag_bytes));
        CUDA_CHECK(cudaMemset(g->flags[r], 0, flag_bytes));
        CUDA_CHECK(cudaStreamSynchronize(0)); /* the memset is done before any kernel reads the flags */
        int sms = 0;
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g->devices[r]));
        max_blocks = sms < max_blocks ? sms : max_blocks;
    }
    g->max_blocks = max_blocks < 1 ? 1 : max_blocks;
    return MT_OK;
}

} /* namespace */

PeerDesc p2p_desc(const mtp_group *g, int rank)
{
    PeerDesc d;
    memset(&d, 0, sizeof d);
    d.rank = rank;
    d.world = g->world;
    for (int r = 0; r < g->world; ++r) {
        d.in[r] = g->in[r];
        d.out[r] = g->out[r];
        d.flags[r] = g->flags[r];
    }
    return d;
}

int p2p_blocks(const mtp_group *g, int64_t units)
{
    const int64_t want = (units + kP2PThreads - 1) / kP2PThreads;
    return want < 1 ? 1 : (want > g->max_blocks ? g->max_blocks : (int)want);
}

/* ---- entry points ---------------------------------------------------------- */

extern "C" {

int mtp_abi_version(void) { return MTP_ABI_VERSION; }

int mtp_rung_count(void) { return MTP_RUNG_COUNT; }

const char *mtp_rung_name(int rung)
{
    switch (rung) {
#define MTP_RUNG_CASE(id, name) \
    case id:                    \
        return #name;
        MTP_RUNGS(MTP_RUNG_CASE)
#undef MTP_RUNG_CASE
    }
    return nullptr;
}

int64_t mtp_oneshot_max_bytes(void) { return kOneshotMaxBytes; }

mt_status mtp_device_count(int *count)
{
    const char *func = "mtp_device_count";
    if (count == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "count is null");
    MT_TRY(mt_ensure_init(func));
    CUDA_CHECK(cudaGetDeviceCount(count));
    return MT_OK;
}

mt_status mtp_emulate_devices(int count, int peer_access)
{
    const char *func = "mtp_emulate_devices";
    MT_TRY(mt_ensure_init(func));
#ifdef MT_EMULATOR
    if (g_live_groups > 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "%d p2p group%s alive; destroy them before changing the emulated devices",
                       g_live_groups, g_live_groups == 1 ? " is" : "s are");
    CUDA_CHECK(::mt_emu::set_devices(count, peer_access != 0));
    return MT_OK;
#else
    (void)count;
    (void)peer_access;
    return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                   "this is the CUDA build: its devices are the GPUs the machine has; only the emulator "
                   "build emulates devices");
#endif
}

mt_status mtp_group_create(const int *devices, int n, mtp_group **out)
{
    const char *func = "mtp_group_create";
    if (out == nullptr || devices == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "devices or out is null");
    *out = nullptr;
    MT_TRY(mt_ensure_init(func));
    if (n < 1 || n > MTP_MAX_DEVICES)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%d devices; a group has 1 to %d", n, MTP_MAX_DEVICES);
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    for (int i = 0; i < n; ++i) {
        if (devices[i] < 0 || devices[i] >= count)
            return mt_fail(MT_ERR_NO_DEVICE, func, "device %d does not exist (%d device%s: 0..%d%s)", devices[i],
                           count, count == 1 ? "" : "s", count - 1,
#ifdef MT_EMULATOR
                           "; MINITENSOR_EMU_DEVICES or emulate_devices() gives the emulator more"
#else
                           ""
#endif
            );
        for (int j = 0; j < i; ++j)
            if (devices[j] == devices[i])
                return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "device %d is listed twice", devices[i]);
    }
    mtp_group *g = (mtp_group *)calloc(1, sizeof *g);
    if (g == nullptr)
        return mt_fail(MT_ERR_OUT_OF_MEMORY, func, "no host memory for the group");
    g->world = n;
    memcpy(g->devices, devices, sizeof(int) * (size_t)n);
    ++g_live_groups;
    mt_status st;
    {
        DeviceGuard guard;
        st = build_group(func, g);
    }
    if (st != MT_OK) {
        (void)mtp_group_destroy(g); /* keeps the message of the failure above */
        return st;
    }
    *out = g;
    return MT_OK;
}

mt_status mtp_group_destroy(mtp_group *g)
{
    if (g == nullptr)
        return MT_OK;
    mt_status first = MT_OK;
    {
        DeviceGuard guard;
        for (int r = 0; r < g->world; ++r) {
            if (g->streams[r] == nullptr)
                continue;
            KEEP_FIRST(first, cudaSetDevice(g->devices[r]));
            KEEP_FIRST(first, cudaStreamSynchronize(g->streams[r]));
        }
        mt_status freed = free_buffers(g);
        first = first == MT_OK ? freed : first;
        for (int r = 0; r < g->world; ++r) {
            KEEP_FIRST(first, cudaSetDevice(g->devices[r]));
            if (g->flags[r] != nullptr)
                KEEP_FIRST(first, cudaFree(g->flags[r]));
            if (g->streams[r] != nullptr)
                KEEP_FIRST(first, cudaStreamDestroy(g->streams[r]));
        }
        /* Peer access stays enabled: it belongs to the device, and another
         * group may use it. */
    }
    --g_live_groups;
    free(g);
    return first;
}

mt_status mtp_all_reduce(mtp_group *g, const mt_tensor *tensors, int n, int rung)
{
    const char *func = "mtp_all_reduce";
    if (g == nullptr || tensors == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "group or tensors is null");
    MT_TRY(mt_ensure_init(func));
    MT_TRY(check_rung(func, rung));
    if (n != g->world)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%d tensors for a group of %d devices (one per device)", n,
                       g->world);
    char name[32];
    for (int r = 0; r < n; ++r) {
        snprintf(name, sizeof name, "tensors[%d]", r);
        MT_TRY(mt_check_tensor(func, name, &tensors[r]));
        MT_TRY(mt_check_float(func, name, &tensors[r]));
        MT_TRY(mt_check_extent(func, name, &tensors[r]));
        if (!is_contiguous(tensors[r]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "%s is not contiguous", name);
        if (tensors[r].dtype != tensors[0].dtype)
            return mt_fail(MT_ERR_DTYPE, func, "%s is %s, tensors[0] is %s", name,
                           tensors[r].dtype == MT_FLOAT32 ? "float32" : "float64",
                           tensors[0].dtype == MT_FLOAT32 ? "float32" : "float64");
        if (tensor_numel(tensors[r]) != tensor_numel(tensors[0]))
            return mt_fail(MT_ERR_SHAPE, func, "%s has %lld elements, tensors[0] %lld", name,
                           (long long)tensor_numel(tensors[r]), (long long)tensor_numel(tensors[0]));
    }
    const int dtype = tensors[0].dtype;
    const int64_t count = tensor_numel(tensors[0]);
    if (count == 0)
        return MT_OK;
    const size_t bytes = (size_t)count * dtype_bytes(dtype);
    /* The tensors may still be being written by work on the library's
     * stream, which the copies below (on the default stream) would not wait for. */
    MT_TRY(mt_synchronize());
    mt_set_current_call(func);
    DeviceGuard guard;
    if (guard.saved < 0)
        return mt_fail(MT_ERR_CUDA, func, "cudaGetDevice failed: the tensors' device is unknown");
    MT_TRY(ensure_capacity(g, padded_bytes(dtype, count)));
    for (int r = 0; r < n; ++r) {
        const char *src = (const char *)tensors[r].data + tensors[r].offset * (int64_t)dtype_bytes(dtype);
        /* With the tensors' device current: their memory comes from its
         * stream-ordered pool, which that device can always read. */
        CUDA_CHECK(cudaSetDevice(guard.saved));
        CUDA_CHECK(cudaMemcpy(g->in[r], src, bytes, cudaMemcpyDefault));
    }
    /* A device-to-device cudaMemcpy does not wait for its copy: the copies
     * are queued on the tensors' device, which may not be in the group, so
     * nothing would order the group's kernels after them. */
    CUDA_CHECK(cudaStreamSynchronize(0));
    MT_TRY(run_rung(g, rung, dtype, count));
    MT_TRY(sync_all(g));
    for (int r = 0; r < n; ++r) {
        char *dst = (char *)tensors[r].data + tensors[r].offset * (int64_t)dtype_bytes(dtype);
        CUDA_CHECK(cudaSetDevice(guard.saved));
        CUDA_CHECK(cudaMemcpy(dst, g->out[r], bytes, cudaMemcpyDefault));
    }
    CUDA_CHECK(cudaStreamSynchronize(0)); /* the results are in place on return */
    return MT_OK;
}

mt_status mtp_bench(mtp_group *g, int rung, int dtype, int64_t count, int warmup, int iters, float *ms)
{
    const char *func = "mtp_bench";
    if (g == nullptr || (ms == nullptr && iters > 0))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "group or ms is null");
    MT_TRY(mt_ensure_init(func));
    MT_TRY(check_rung(func, rung));
    if (dtype != MT_FLOAT32 && dtype != MT_FLOAT64)
        return mt_fail(MT_ERR_DTYPE, func, "dtype %d; the p2p all-reduce takes float32 (0) or float64 (1)", dtype);
    if (count < 1 || warmup < 0 || iters < 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "count %lld, warmup %d, iters %d", (long long)count, warmup,
                       iters);
    DeviceGuard guard;
    MT_TRY(ensure_capacity(g, padded_bytes(dtype, count)));
    for (int i = 0; i < warmup; ++i)
        /* A device-to-device cudaMemcpy does not wait for its copy: the copies
     * are queued on the tensors' device, which may not be in the group, so
     * nothing would order the group's kernels after them. */
    CUDA_CHECK(cudaStreamSynchronize(0));
    MT_TRY(run_rung(g, rung, dtype, count));
    MT_TRY(sync_all(g));
    cudaEvent_t start[MTP_MAX_DEVICES] = {}, stop[MTP_MAX_DEVICES] = {};
    mt_status st = MT_OK;
    for (int r = 0; r < g->world && st == MT_OK; ++r) {
        if (cudaSetDevice(g->devices[r]) != cudaSuccess || cudaEventCreate(&start[r]) != cudaSuccess ||
            cudaEventCreate(&stop[r]) != cudaSuccess)
            st = mt_fail_cuda(cudaGetLastError(), "cudaEventCreate", __FILE__, __LINE__);
    }
    /* One call at a time, each timed on every device from its start event
     * to its stop event; the call's time is the longest (the ranks finish
     * together, at the last barrier, give or take the copies after it). */
    for (int i = 0; i < iters && st == MT_OK; ++i) {
        for (int r = 0; r < g->world && st == MT_OK; ++r) {
            cudaError_t err = cudaSetDevice(g->devices[r]);
            if (err == cudaSuccess)
                err = cudaEventRecord(start[r], g->streams[r]);
            if (err != cudaSuccess)
                st = mt_fail_cuda(err, "cudaEventRecord(start)", __FILE__, __LINE__);
        }
        if (st == MT_OK)
            st = run_rung(g, rung, dtype, count);
        float longest = 0.0f;
        for (int r = 0; r < g->world && st == MT_OK; ++r) {
            float t = 0.0f;
            cudaError_t err = cudaSetDevice(g->devices[r]);
            if (err == cudaSuccess)
                err = cudaEventRecord(stop[r], g->streams[r]);
            if (err == cudaSuccess)
                err = cudaEventSynchronize(stop[r]);
            if (err == cudaSuccess)
                err = cudaEventElapsedTime(&t, start[r], stop[r]);
            if (err != cudaSuccess)
                st = mt_fail_cuda(err, "cudaEvent (stop)", __FILE__, __LINE__);
            longest = t > longest ? t : longest;
        }
        if (st == MT_OK)
            ms[i] = longest;
    }
    for (int r = 0; r < g->world; ++r) {
        KEEP_FIRST(st, cudaSetDevice(g->devices[r]));
        if (start[r] != nullptr)
            KEEP_FIRST(st, cudaEventDestroy(start[r]));
        if (stop[r] != nullptr)
            KEEP_FIRST(st, cudaEventDestroy(stop[r]));
    }
    return st;
}

} /* extern "C" */
