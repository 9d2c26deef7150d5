/*
 * library.cu: what the library says about itself, and device start-up.
 *
 *   - the ABI version, the maximum rank and the name of every op id, so the
 *     Python binding can check at load time that its tables match this
 *     build's (a drifted id table silently runs the wrong op);
 *   - mt_init / mt_ensure_init: the device is probed lazily, at the first
 *     call that needs it, never when the library is loaded, so that importing
 *     the package on a machine without a GPU works and a GPU-less CUDA build
 *     fails with a message that says so;
 *   - mt_device_info: name, compute capability, driver and runtime versions.
 */
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "ops_common.h"

/* ---- op names, in the order of the enums of minitensor.h ------------------ */

static const char *const kMapNames[] = {
    "copy", "neg", "exp", "log", "relu", "sigmoid", "tanh", "abs", "sqrt", "reciprocal",
    "sign", "add_scalar", "mul_scalar", "pow_scalar", "rpow_scalar", "fill",
};
static const char *const kZipNames[] = {
    "add", "sub", "mul", "div", "pow", "maximum", "minimum",
    "eq", "ne", "lt", "le", "gt", "ge", "relu_backward",
};
static const char *const kReduceNames[] = {
    "sum", "prod", "max", "min", "argmax", "argmin",
};
static const char *const kMatmulNames[] = {
    "default", "naive", "coalesced", "tiled", "blocktile_1d", "blocktile_2d", "vectorized", "warptile",
};
static const char *const kReduceAlgoNames[] = {
    "default", "interleaved", "sequential", "first_add", "warp_shuffle", "vectorized",
};
static const char *const kCopyAlgoNames[] = {
    "default", "naive", "tiled", "tiled_padded",
};

/* A new enum value without a name here (or the reverse) fails the build. */
#define MT_COUNT_OF(table) ((int)(sizeof(table) / sizeof((table)[0])))
static_assert(MT_COUNT_OF(kMapNames) == MT_MAP_OP_COUNT, "kMapNames out of step with mt_map_op");
static_assert(MT_COUNT_OF(kZipNames) == MT_ZIP_OP_COUNT, "kZipNames out of step with mt_zip_op");
static_assert(MT_COUNT_OF(kReduceNames) == MT_REDUCE_OP_COUNT,
              "kReduceNames out of step with mt_reduce_op");
static_assert(MT_COUNT_OF(kMatmulNames) == MT_MATMUL_ALGO_COUNT,
              "kMatmulNames out of step with mt_matmul_algo");
static_assert(MT_COUNT_OF(kReduceAlgoNames) == MT_REDUCE_ALGO_COUNT,
              "kReduceAlgoNames out of step with mt_reduce_algo");
static_assert(MT_COUNT_OF(kCopyAlgoNames) == MT_COPY_ALGO_COUNT,
              "kCopyAlgoNames out of step with mt_copy_algo");

struct OpFamily {
    const char *family;
    const char *const *names;
    int count;
};

static const OpFamily kFamilies[] = {
    {"map", kMapNames, MT_COUNT_OF(kMapNames)},
    {"zip", kZipNames, MT_COUNT_OF(kZipNames)},
    {"reduce", kReduceNames, MT_COUNT_OF(kReduceNames)},
    {"matmul", kMatmulNames, MT_COUNT_OF(kMatmulNames)},
    {"reduce_algo", kReduceAlgoNames, MT_COUNT_OF(kReduceAlgoNames)},
    {"copy_algo", kCopyAlgoNames, MT_COUNT_OF(kCopyAlgoNames)},
};

static const OpFamily *find_family(const char *family)
{
    if (family == nullptr)
        return nullptr;
    for (const OpFamily &f : kFamilies) {
        if (strcmp(f.family, family) == 0)
            return &f;
    }
    return nullptr;
}

int mt_abi_version(void)
{
    return MT_ABI_VERSION;
}

int mt_max_dims(void)
{
    return MT_MAX_DIMS;
}

int mt_op_count(const char *family)
{
    const OpFamily *f = find_family(family);
    return f ? f->count : -1;
}

const char *mt_op_name(const char *family, int op)
{
    const OpFamily *f = find_family(family);
    if (f == nullptr || op < 0 || op >= f->count)
        return nullptr;
    return f->names[op];
}

const char *mt_backend_name(void)
{
#ifdef MT_EMULATOR
    return "emulator";
#else
    return "cuda";
#endif
}

/* ---- lazy device initialisation ------------------------------------------ */

/* Checked without the lock on every call (the common case: already done);
 * the lock makes the first initialisation happen once when several threads
 * arrive together. */
static std::mutex g_init_mutex;
static std::atomic<bool> g_initialised{false};
/* The GPU of this process (mt_set_device). The runtime's current device is
 * per host thread, so each thread selects it at its first call. */
static std::atomic<int> g_device{0};
static thread_local int t_device = -1;

mt_status mt_ensure_init(const char *func)
{
    mt_set_current_call(func);
    if (g_initialised.load()) {
        int device = g_device.load();
        if (t_device != device) {
            CUDA_CHECK(cudaSetDevice(device));
            t_device = device;
        }
        return MT_OK;
    }
    std::lock_guard<std::mutex> lock(g_init_mutex);
    if (g_initialised.load())
        return MT_OK;

    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        /* cudaGetDeviceCount fails (rather than returning 0) when there is no
         * driver or no GPU, and the runtime also records that as its "last
         * error"; clear it so that no later mt_launch_status reports it. */
        (void)cudaGetLastError();
        char versions[64];
        cuda_versions(versions, sizeof versions);
        /* Not cached: a later call retries, which costs little and gives a
         * GPU that appears later (a driver reload) a chance. */
        return mt_fail(MT_ERR_NO_DEVICE, func,
                       "no usable CUDA device (%s; %s). This is the "
                       "CUDA build of minitensor; on a machine without a GPU use the emulator "
                       "build (build/libminitensor_emu.so)",
                       err != cudaSuccess ? cudaGetErrorString(err) : "0 devices found", versions);
    }
    CUDA_CHECK(cudaSetDevice(g_device.load()));

    /* The stream-ordered pool that mt_malloc draws from gives memory back to
     * the driver at every synchronization by default, so a training loop
     * that synchronizes each step would pay for fresh device allocations
     * every step. Keeping freed memory in the pool (as PyTorch's caching
     * allocator does) makes mt_malloc cheap after the first step. (The
     * emulator has no pool: there these calls do nothing.) */
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, g_device.load()));
    uint64_t keep_everything = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));

    g_initialised.store(true);
    return MT_OK;
}

mt_status mt_init(void)
{
    return mt_ensure_init("mt_init");
}

mt_status mt_device_info(char *buf, size_t bufsize)
{
    if (buf == nullptr || bufsize == 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_device_info", "buf is null or bufsize is 0");
    buf[0] = '\0';
    mt_status status = mt_ensure_init("mt_device_info");
    if (status != MT_OK)
        return status;

    int device = 0;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    char versions[64];
    cuda_versions(versions, sizeof versions);
    snprintf(buf, bufsize,
             "%s (compute capability %d.%d, %d SMs, %.1f GiB), %s, "
             "backend %s",
             prop.name, prop.major, prop.minor, prop.multiProcessorCount,
             (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), versions,
             mt_backend_name());
    return MT_OK;
}

/* ---- device placement ------------------------------------------------------ */

mt_status mt_set_device(int device)
{
    if (device < 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_set_device", "device %d is negative", device);
    mt_status status = mt_ensure_init("mt_set_device");
    if (status != MT_OK)
        return status;
    if (device == g_device.load())
        return MT_OK;
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    if (device >= count)
        return mt_fail(MT_ERR_NO_DEVICE, "mt_set_device", "device %d does not exist (%d device%s: 0..%d)",
                       device, count, count == 1 ? "" : "s", count - 1);
    int64_t in_use = 0;
    (void)mt_memory_in_use(&in_use);
    if (in_use != 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_set_device",
                       "%lld bytes are allocated on device %d; choose the device (%d) before the "
                       "first tensor is created",
                       (long long)in_use, g_device.load(), device);
    /* Same set-up as mt_ensure_init's, for the new device. */
    std::lock_guard<std::mutex> lock(g_init_mutex);
    CUDA_CHECK(cudaSetDevice(device));
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t keep_everything = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    g_device.store(device);
    t_device = device;
    return MT_OK;
}

mt_status mt_get_device(int *device)
{
    if (device == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_get_device", "device is null");
    *device = g_device.load();
    return MT_OK;
}
