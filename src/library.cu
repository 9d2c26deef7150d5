/*
 * library.cu: what the library says about itself, and device start-up.
 *
 *   - the ABI version, the maximum rank, and the name and dtype rule of
 *     every op id, from which the Python binding builds its tables at load
 *     time (so that no table of the binding can drift from this build's);
 *   - mt_init / mt_ensure_init: the device is probed lazily, at the first
 *     call that needs it, never when the library is loaded, so that importing
 *     the package on a machine without a GPU works and a GPU-less CUDA build
 *     fails with a message that says so;
 *   - mt_device_info: name, compute capability, driver and runtime versions;
 *     mt_device_key: a short cached key for caches per device;
 *   - mt_sm_count: the number of SMs, which launch sizes depend on;
 *   - mt_set_device / mt_get_device.
 * (The kernel policy, which the first initialisation reads from the
 * environment, is in src/policy.cu.)
 */
#include <stdio.h>
#include <string.h>

#include <atomic>
#include <mutex>
#include <string>

#include "check.h"
#include "launch.h"
#include "policy.h"

/* ---- op names, generated from the op lists of minitensor.h ---------------- */

#define MT_OP_NAME_(id, name, dtypes) #name,
#define MT_OP_DTYPES_(id, name, dtypes) dtypes,
#define MT_ALGO_NAME_(id, name) #name,
static const char *const kMapNames[] = {MT_MAP_OPS(MT_OP_NAME_)};
static const char *const kZipNames[] = {MT_ZIP_OPS(MT_OP_NAME_)};
static const char *const kReduceNames[] = {MT_REDUCE_OPS(MT_OP_NAME_)};
static const char *const kMatmulNames[] = {MT_MATMUL_ALGOS(MT_ALGO_NAME_)};
static const char *const kReduceAlgoNames[] = {MT_REDUCE_ALGOS(MT_ALGO_NAME_)};
static const char *const kCopyAlgoNames[] = {MT_COPY_ALGOS(MT_ALGO_NAME_)};
static const char *const kEpilogueActNames[] = {MT_EPILOGUE_ACTS(MT_ALGO_NAME_)};
static const char *const kMapDtypes[] = {MT_MAP_OPS(MT_OP_DTYPES_)};
static const char *const kZipDtypes[] = {MT_ZIP_OPS(MT_OP_DTYPES_)};
static const char *const kReduceDtypes[] = {MT_REDUCE_OPS(MT_OP_DTYPES_)};
#undef MT_ALGO_NAME_
#undef MT_OP_DTYPES_
#undef MT_OP_NAME_

#define MT_COUNT_OF(table) ((int)(sizeof(table) / sizeof((table)[0])))

struct OpFamily {
    const char *family;
    const char *const *names;
    const char *const *dtypes; /* the dtype rules; nullptr for a ladder */
    int count;
};

static const OpFamily kFamilies[] = {
    {"map", kMapNames, kMapDtypes, MT_COUNT_OF(kMapNames)},
    {"zip", kZipNames, kZipDtypes, MT_COUNT_OF(kZipNames)},
    {"reduce", kReduceNames, kReduceDtypes, MT_COUNT_OF(kReduceNames)},
    {"matmul", kMatmulNames, nullptr, MT_COUNT_OF(kMatmulNames)},
    {"reduce_algo", kReduceAlgoNames, nullptr, MT_COUNT_OF(kReduceAlgoNames)},
    {"copy_algo", kCopyAlgoNames, nullptr, MT_COUNT_OF(kCopyAlgoNames)},
    {"epilogue_act", kEpilogueActNames, nullptr, MT_COUNT_OF(kEpilogueActNames)},
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

const char *mt_op_dtypes(const char *family, int op)
{
    const OpFamily *f = find_family(family);
    if (f == nullptr || f->dtypes == nullptr || op < 0 || op >= f->count)
        return nullptr;
    return f->dtypes[op];
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

/* Makes `device` current for this thread and sets up its memory pool: the
 * stream-ordered pool that mt_malloc draws from gives memory back to the
 * driver at every synchronization by default, so a training loop that
 * synchronizes each step would pay for fresh device allocations every step.
 * Keeping freed memory in the pool (as PyTorch's caching allocator does)
 * makes mt_malloc cheap after the first step. (The emulator has no pool:
 * there these calls do nothing.) Called with g_init_mutex held. */
static mt_status use_device(int device)
{
    CUDA_CHECK(cudaSetDevice(device));
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t keep_everything = UINT64_MAX;
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    g_device.store(device);
    t_device = device;
    return MT_OK;
}

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

    MT_TRY(mt_kernel_policy_from_env(func));
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        /* cudaGetDeviceCount fails (rather than returning 0) when there is no
         * driver or no GPU, and the runtime also records that as its "last
         * error"; clear it so that no later mt_launch_status reports it. */
        (void)cudaGetLastError();
        char versions[64];
        mt_cuda_versions(versions, sizeof versions);
        /* Not cached: a later call retries, which costs little and gives a
         * GPU that appears later (a driver reload) a chance. */
        return mt_fail(MT_ERR_NO_DEVICE, func,
                       "no usable CUDA device (%s; %s). This is the "
                       "CUDA build of minitensor; on a machine without a GPU use the emulator "
                       "build (build/libminitensor_emu.so)",
                       err != cudaSuccess ? cudaGetErrorString(err) : "0 devices found", versions);
    }
    MT_TRY(use_device(g_device.load()));
    g_initialised.store(true);
    return MT_OK;
}

mt_status mt_init(void)
{
    return mt_ensure_init("mt_init");
}

/* ---- what the device is ----------------------------------------------------- */

/* Per-device caches below hold this many devices; a process with a larger
 * device number simply queries every time. */
constexpr int kCachedDevices = 64;

int mt_sm_count(void)
{
    /* Each slot is written once with the value every thread would compute;
     * atomics make the concurrent first calls well defined. */
    static std::atomic<int> cached[kCachedDevices];
    const int device = g_device.load();
    int count = device < kCachedDevices ? cached[device].load() : 0;
    if (count > 0)
        return count;
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || count < 1) {
        (void)cudaGetLastError();
        return 1;
    }
    if (device < kCachedDevices)
        cached[device].store(count);
    return count;
}

mt_status mt_get_device_caps(mt_device_caps *caps)
{
    /* One slot a device, filled under the lock by the first caller; a
     * process with a larger device number queries every time. */
    static std::mutex caps_mutex;
    static mt_device_caps cached[kCachedDevices];
    static bool filled[kCachedDevices];
    const int device = g_device.load();
    std::lock_guard<std::mutex> lock(caps_mutex);
    if (device < kCachedDevices && filled[device]) {
        *caps = cached[device];
        return MT_OK;
    }
    mt_device_caps c{};
    CUDA_CHECK(cudaDeviceGetAttribute(&c.major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&c.minor, cudaDevAttrComputeCapabilityMinor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&c.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (device < kCachedDevices) {
        cached[device] = c;
        filled[device] = true;
    }
    *caps = c;
    return MT_OK;
}

mt_status mt_device_info(char *buf, size_t bufsize)
{
    if (buf == nullptr || bufsize == 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_device_info", "buf is null or bufsize is 0");
    buf[0] = '\0';
    MT_TRY(mt_ensure_init("mt_device_info"));

    int device = 0;
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    char versions[64];
    mt_cuda_versions(versions, sizeof versions);
    snprintf(buf, bufsize,
             "%s (compute capability %d.%d, %d SMs, %.1f GiB), %s, "
             "backend %s",
             prop.name, prop.major, prop.minor, prop.multiProcessorCount,
             (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), versions,
             mt_backend_name());
    return MT_OK;
}

/* "<name>|sm_<major><minor>|<SMs>sm" of `device`. cudaGetDeviceProperties
 * fills a large struct and can take milliseconds (it queries every
 * attribute), which is why the key is built once per device and cached. */
static mt_status build_device_key(int device, std::string *key)
{
    cudaDeviceProp prop;
    mt_device_caps caps;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device)); /* for the name only */
    MT_TRY(mt_get_device_caps(&caps));
    char buf[320];
    snprintf(buf, sizeof buf, "%s|sm_%d%d|%dsm", prop.name, caps.major, caps.minor, mt_sm_count());
    *key = buf;
    return MT_OK;
}

mt_status mt_device_key(char *buf, size_t bufsize)
{
    const char *func = "mt_device_key";
    if (buf == nullptr || bufsize == 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "buf is null or bufsize is 0");
    buf[0] = '\0';
    MT_TRY(mt_ensure_init(func));

    static std::mutex keys_mutex;
    static std::string keys[kCachedDevices]; /* "" until built */
    const int device = g_device.load();
    std::string key;
    {
        std::lock_guard<std::mutex> lock(keys_mutex);
        if (device < kCachedDevices && !keys[device].empty()) {
            key = keys[device];
        } else {
            MT_TRY(build_device_key(device, &key));
            if (device < kCachedDevices)
                keys[device] = key;
        }
    }
    if (key.size() + 1 > bufsize)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "bufsize %zu is too small for the key (%zu bytes)",
                       bufsize, key.size() + 1);
    memcpy(buf, key.c_str(), key.size() + 1);
    return MT_OK;
}

/* ---- device placement ------------------------------------------------------ */

mt_status mt_set_device(int device)
{
    const char *func = "mt_set_device";
    if (device < 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "device %d is negative", device);
    MT_TRY(mt_ensure_init(func));
    if (device == g_device.load())
        return MT_OK;
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    if (device >= count)
        return mt_fail(MT_ERR_NO_DEVICE, func, "device %d does not exist (%d device%s: 0..%d)",
                       device, count, count == 1 ? "" : "s", count - 1);
    int64_t in_use = 0;
    (void)mt_memory_in_use(&in_use);
    if (in_use != 0)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "%lld bytes are allocated on device %d; choose the device (%d) before the "
                       "first tensor is created",
                       (long long)in_use, g_device.load(), device);
    std::lock_guard<std::mutex> lock(g_init_mutex);
    return use_device(device);
}

mt_status mt_get_device(int *device)
{
    if (device == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_get_device", "device is null");
    *device = g_device.load();
    return MT_OK;
}
