/*
 * emu_devices.cpp: the emulator's devices: how many (MINITENSOR_EMU_DEVICES,
 * default 1, or mt_emu::set_devices), which one is current (per host
 * thread, as in CUDA), their properties, and peer access between them.
 *
 * Every emulated device is the same CPU and the same address space: memory
 * that cudaMalloc returns while device 1 is current is host memory like any
 * other, so a pointer of one device works in a kernel of another, which is
 * what peer access gives on a GPU (over NVLink or PCIe). The calls are
 * still answered as CUDA answers them (cudaDeviceCanAccessPeer is 0 for a
 * device and itself, enabling twice is cudaErrorPeerAccessAlreadyEnabled),
 * so that host code written for several GPUs runs unchanged here; what the
 * emulator does not check is that a kernel keeps to the peers enabled.
 * (Split from emu_runtime.cpp, which had grown past 600 lines.)
 */
#include "emu_internal.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include <unistd.h>

using mt_emu::record_error;

namespace {

constexpr int kMaxDevices = 64;

int devices_from_env()
{
    const char *v = std::getenv("MINITENSOR_EMU_DEVICES");
    if (!v || !*v)
        return 1;
    char *end = nullptr;
    long n = std::strtol(v, &end, 10);
    return end && *end == '\0' && n >= 1 && n <= kMaxDevices ? (int)n : 1;
}

std::atomic<int> g_device_count{devices_from_env()};
std::atomic<bool> g_peer_possible{true};
std::mutex g_peer_mutex;
std::set<std::pair<int, int>> g_peer_enabled; /* (device, peer) pairs enabled */
thread_local int t_device = 0;

int device_count() { return g_device_count.load(); }
bool valid_device(int device) { return device >= 0 && device < device_count(); }

} /* namespace */

namespace mt_emu {

int current_device() { return t_device; }

cudaError_t set_devices(int count, bool peer_access)
{
    if (count < 1 || count > kMaxDevices)
        return record_error(cudaErrorInvalidValue,
                            format("set_devices: %d devices; the emulator offers 1 to %d", count, kMaxDevices));
    if (in_launch_group())
        return record_error(cudaErrorInvalidValue, "set_devices: a launch group is open on this thread");
    g_device_count.store(count);
    g_peer_possible.store(peer_access);
    std::lock_guard<std::mutex> lock(g_peer_mutex);
    g_peer_enabled.clear(); /* as after a reset of every device */
    if (t_device >= count)
        t_device = 0;
    return cudaSuccess;
}

} /* namespace mt_emu */

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return record_error(cudaErrorInvalidValue, "cudaGetDeviceCount: null pointer");
    *count = device_count();
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return record_error(cudaErrorInvalidValue, "cudaGetDevice: null pointer");
    *device = t_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (!valid_device(device))
        return record_error(cudaErrorInvalidDevice,
                            mt_emu::format("cudaSetDevice: device %d; the emulator has %d device%s "
                                           "(MINITENSOR_EMU_DEVICES)", device, device_count(),
                                           device_count() == 1 ? "" : "s"));
    t_device = device;
    return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int *can_access, int device, int peer)
{
    if (!can_access)
        return record_error(cudaErrorInvalidValue, "cudaDeviceCanAccessPeer: null pointer");
    if (!valid_device(device) || !valid_device(peer))
        return record_error(cudaErrorInvalidDevice,
                            mt_emu::format("cudaDeviceCanAccessPeer: devices %d and %d; the emulator has %d",
                                           device, peer, device_count()));
    /* As CUDA answers: a device is not its own peer. */
    *can_access = device != peer && g_peer_possible.load() ? 1 : 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags)
{
    if (flags != 0)
        return record_error(cudaErrorInvalidValue, "cudaDeviceEnablePeerAccess: flags must be 0");
    if (!valid_device(peer) || peer == t_device)
        return record_error(cudaErrorInvalidDevice,
                            mt_emu::format("cudaDeviceEnablePeerAccess: peer %d from device %d (%d devices)",
                                           peer, t_device, device_count()));
    if (!g_peer_possible.load())
        return record_error(cudaErrorPeerAccessUnsupported,
                            mt_emu::format("cudaDeviceEnablePeerAccess: device %d cannot reach device %d "
                                           "(peer access turned off by set_devices)", t_device, peer));
    std::lock_guard<std::mutex> lock(g_peer_mutex);
    if (!g_peer_enabled.insert({t_device, peer}).second)
        return record_error(cudaErrorPeerAccessAlreadyEnabled,
                            mt_emu::format("cudaDeviceEnablePeerAccess: device %d to %d", t_device, peer));
    return cudaSuccess;
}

cudaError_t cudaDeviceDisablePeerAccess(int peer)
{
    std::lock_guard<std::mutex> lock(g_peer_mutex);
    if (!g_peer_enabled.erase({t_device, peer}))
        return record_error(cudaErrorPeerAccessNotEnabled,
                            mt_emu::format("cudaDeviceDisablePeerAccess: device %d to %d", t_device, peer));
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    if (!prop || !valid_device(device))
        return record_error(cudaErrorInvalidValue, "cudaGetDeviceProperties: bad argument");
    std::memset(prop, 0, sizeof *prop);
    std::snprintf(prop->name, sizeof prop->name, "minitensor CPU emulator");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    prop->totalGlobalMem = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    prop->sharedMemPerBlock = mt_emu::kStaticSharedLimit;
    prop->sharedMemPerBlockOptin = mt_emu::kSharedOptinLimit;
    prop->regsPerBlock = 65536;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = 1024;
    prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = INT_MAX;
    prop->maxGridSize[1] = 65535;
    prop->maxGridSize[2] = 65535;
    prop->multiProcessorCount = mt_emu::settings().os_threads;
    /* The limits above are those of compute capability 9.0. */
    prop->major = 9;
    prop->minor = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    if (!value || !valid_device(device))
        return record_error(cudaErrorInvalidValue, "cudaDeviceGetAttribute: bad argument");
    cudaDeviceProp prop;
    (void)cudaGetDeviceProperties(&prop, device);
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = prop.multiProcessorCount; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = prop.major; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = prop.minor; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)prop.sharedMemPerBlockOptin; return cudaSuccess;
    }
    return record_error(cudaErrorInvalidValue, "cudaDeviceGetAttribute: attribute not emulated");
}

/* No driver or runtime: version 0 says so in messages. */
cudaError_t cudaDriverGetVersion(int *version)
{
    if (!version)
        return record_error(cudaErrorInvalidValue, "cudaDriverGetVersion: null pointer");
    *version = 0;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (!version)
        return record_error(cudaErrorInvalidValue, "cudaRuntimeGetVersion: null pointer");
    *version = 0;
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return record_error(cudaErrorInvalidValue, "cudaMemGetInfo: null pointer");
    long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    *total_bytes = pages > 0 ? (size_t)pages * (size_t)page : 0;
    *free_bytes = avail > 0 ? (size_t)avail * (size_t)page : 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    if (!pool || !valid_device(device))
        return record_error(cudaErrorInvalidValue, "cudaDeviceGetDefaultMemPool: bad argument");
    *pool = nullptr;
    return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void *) { return cudaSuccess; }

