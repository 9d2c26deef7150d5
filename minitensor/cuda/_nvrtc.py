"""NVRTC and the CUDA driver API through ctypes: compile a kernel at run time
and launch it, with no nvcc or host compiler.

- NVRTC (libnvrtc) turns CUDA C++ source into a CUBIN for the device's own
  architecture, or into PTX for the newest one it knows when it does not know
  the device's (the driver then finishes the job).
- The driver (libcuda) loads the image into the context the library's
  runtime already uses (the device's primary context) and launches it with
  cuLaunchKernel on any stream: a runtime cudaStream_t is a driver CUstream.

The libraries are found in this order: $MINITENSOR_NVRTC (a path), the CUDA
toolkit ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda), NVIDIA's pip wheels
(nvidia-cuda-nvrtc), then the dynamic loader's search path.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading
from ctypes import POINTER, byref, c_char_p, c_int, c_size_t, c_uint, c_void_p
from pathlib import Path
from typing import Any, Optional

from .. import _lib
from .._errors import CompileError, CudaError, NoDeviceError

# Driver API constants (cuda.h).
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

_lock = threading.Lock()
_nvrtc: Optional[ctypes.CDLL] = None
_driver: Optional[ctypes.CDLL] = None
_local = threading.local()


def _candidates() -> list[str]:
    found: list[str] = []
    if os.environ.get("MINITENSOR_NVRTC"):
        found.append(os.environ["MINITENSOR_NVRTC"])
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in roots:
        if root:
            found += sorted(glob.glob(os.path.join(root, "lib64", "libnvrtc.so*")), key=len)
    for site in sys.path:
        found += sorted(glob.glob(os.path.join(site, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*")), key=len)
        found += sorted(glob.glob(os.path.join(site, "nvidia", "cu*", "lib", "libnvrtc.so*")), key=len)
    found += ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"]
    return [f for f in found if "builtins" not in f and "alt" not in os.path.basename(f)]


def nvrtc() -> ctypes.CDLL:
    """libnvrtc, loaded once."""
    global _nvrtc
    with _lock:
        if _nvrtc is None:
            errors = []
            for path in _candidates():
                try:
                    lib = ctypes.CDLL(path)
                    break
                except OSError as e:
                    errors.append(f"{path}: {e}")
            else:
                raise CompileError(
                    "minitensor.cuda.compile: NVRTC (libnvrtc.so) was not found; install the CUDA toolkit "
                    "or `pip install nvidia-cuda-nvrtc-cu12`, or set MINITENSOR_NVRTC to the library's path")
            lib.nvrtcGetErrorString.restype = c_char_p
            lib.nvrtcGetErrorString.argtypes = [c_int]
            _nvrtc = lib
        return _nvrtc


def driver() -> ctypes.CDLL:
    """libcuda, loaded once."""
    global _driver
    with _lock:
        if _driver is None:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                raise NoDeviceError(f"minitensor.cuda: the CUDA driver (libcuda.so.1) cannot be loaded: {e}") from None
            lib.cuGetErrorName.argtypes = [c_int, POINTER(c_char_p)]
            lib.cuGetErrorString.argtypes = [c_int, POINTER(c_char_p)]
            lib.cuLaunchKernel.argtypes = [c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint,
                                           c_void_p, POINTER(c_void_p), POINTER(c_void_p)]
            lib.cuModuleLoadData.argtypes = [POINTER(c_void_p), c_char_p]
            lib.cuModuleGetFunction.argtypes = [POINTER(c_void_p), c_void_p, c_char_p]
            lib.cuModuleUnload.argtypes = [c_void_p]
            lib.cuFuncSetAttribute.argtypes = [c_void_p, c_int, c_int]
            lib.cuFuncGetAttribute.argtypes = [POINTER(c_int), c_int, c_void_p]
            lib.cuCtxGetCurrent.argtypes = [POINTER(c_void_p)]
            lib.cuCtxSetCurrent.argtypes = [c_void_p]
            lib.cuDevicePrimaryCtxRetain.argtypes = [POINTER(c_void_p), c_int]
            lib.cuDeviceGetAttribute.argtypes = [POINTER(c_int), c_int, c_int]
            _check_driver(lib, lib.cuInit(0), "cuInit")
            _driver = lib
        return _driver


def _check_driver(lib: ctypes.CDLL, code: int, call: str) -> None:
    if code != 0:
        name, text = c_char_p(), c_char_p()
        lib.cuGetErrorName(code, byref(name))
        lib.cuGetErrorString(code, byref(text))
        n = (name.value or b"CUDA_ERROR_UNKNOWN").decode()
        t = (text.value or b"").decode()
        raise CudaError(f"minitensor.cuda: {call} failed: {t} ({n}, code {code})")


def check(code: int, call: str) -> None:
    """Raises CudaError naming the driver call when code is not CUDA_SUCCESS."""
    if code != 0:
        _check_driver(driver(), code, call)


def ensure_context() -> int:
    """Makes the device's primary context (the one the library's runtime uses)
    current on this thread; returns the device ordinal. Cheap after the first
    call on a thread."""
    device = getattr(_local, "device", None)
    if device is not None:
        return device
    device = _lib.get_device()  # loads and initialises the library's runtime first
    drv = driver()
    ctx = c_void_p()
    check(drv.cuDevicePrimaryCtxRetain(byref(ctx), device), "cuDevicePrimaryCtxRetain")
    check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    _local.device = device
    return device


def device_arch() -> tuple[int, int]:
    """The device's compute capability, e.g. (9, 0)."""
    device = ensure_context()
    drv = driver()
    major, minor = c_int(), c_int()
    check(drv.cuDeviceGetAttribute(byref(major), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), "cuDeviceGetAttribute")
    check(drv.cuDeviceGetAttribute(byref(minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), "cuDeviceGetAttribute")
    return major.value, minor.value


def max_shared_optin() -> int:
    """The most dynamic shared memory a block may ask for after opting in."""
    device = ensure_context()
    value = c_int()
    check(driver().cuDeviceGetAttribute(byref(value), CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device),
          "cuDeviceGetAttribute")
    return value.value


def version() -> str:
    """NVRTC's version, "13.0"."""
    major, minor = c_int(), c_int()
    nvrtc().nvrtcVersion(byref(major), byref(minor))
    return f"{major.value}.{minor.value}"


def _supported_archs() -> list[int]:
    lib = nvrtc()
    count = c_int()
    if lib.nvrtcGetNumSupportedArchs(byref(count)) != 0:
        return []
    archs = (c_int * count.value)()
    lib.nvrtcGetSupportedArchs(archs)
    return list(archs)


def target(arch: tuple[int, int]) -> tuple[str, str]:
    """The NVRTC architecture option and the image kind for a device:
    ("--gpu-architecture=sm_90", "cubin") when NVRTC knows the device, else
    PTX for the newest architecture it knows below it."""
    cc = arch[0] * 10 + arch[1]
    supported = _supported_archs()
    if not supported or cc in supported:
        return f"--gpu-architecture=sm_{cc}", "cubin"
    lower = [a for a in supported if a <= cc]
    if not lower:
        raise CompileError(f"minitensor.cuda.compile: NVRTC {version()} cannot compile for sm_{cc} "
                           f"(it knows {supported[0]} to {supported[-1]})")
    return f"--gpu-architecture=compute_{max(lower)}", "ptx"


def compile_source(source: str, filename: str, name_expression: str, options: list[str],
                   kind: str) -> tuple[bytes, str, str]:
    """NVRTC-compiles source; returns (image, lowered kernel name, log).
    Raises CompileError with the log (line numbers of `source`, in `filename`)."""
    lib = nvrtc()
    prog = c_void_p()
    code = lib.nvrtcCreateProgram(byref(prog), source.encode(), filename.encode(), 0, None, None)
    if code != 0:
        raise CompileError(f"minitensor.cuda.compile: nvrtcCreateProgram failed: {lib.nvrtcGetErrorString(code).decode()}")
    try:
        lib.nvrtcAddNameExpression(prog, name_expression.encode())
        encoded = [o.encode() for o in options]
        argv = (c_char_p * len(encoded))(*encoded)
        code = lib.nvrtcCompileProgram(prog, len(encoded), argv)
        size = c_size_t()
        lib.nvrtcGetProgramLogSize(prog, byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace").strip()
        if code != 0:
            raise CompileError(
                f"minitensor.cuda.compile: {filename} did not compile (NVRTC {version()}, "
                f"{lib.nvrtcGetErrorString(code).decode()}):\n{log}", log)
        lowered = c_char_p()
        code = lib.nvrtcGetLoweredName(prog, name_expression.encode(), byref(lowered))
        if code != 0 or not lowered.value:
            raise CompileError(
                f"minitensor.cuda.compile: no __global__ function '{name_expression}' in {filename} "
                f"(NVRTC: {lib.nvrtcGetErrorString(code).decode()})", log)
        mangled = lowered.value.decode()
        if kind == "cubin":
            lib.nvrtcGetCUBINSize(prog, byref(size))
            image = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetCUBIN(prog, image)
        else:
            lib.nvrtcGetPTXSize(prog, byref(size))
            image = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetPTX(prog, image)
        return image.raw, mangled, log
    finally:
        lib.nvrtcDestroyProgram(byref(prog))


class LoadedKernel:
    """A kernel loaded into the device's context: its module and function."""

    def __init__(self, image: bytes, mangled: str) -> None:
        ensure_context()
        drv = driver()
        self._module = c_void_p()
        check(drv.cuModuleLoadData(byref(self._module), image), "cuModuleLoadData")
        self.function = c_void_p()
        check(drv.cuModuleGetFunction(byref(self.function), self._module, mangled.encode()), "cuModuleGetFunction")
        value = c_int()
        check(drv.cuFuncGetAttribute(byref(value), CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, self.function),
              "cuFuncGetAttribute")
        self.max_threads = value.value
        self._shared_optin = 48 * 1024  # what a block gets without asking
        self._launch = drv.cuLaunchKernel

    def launch(self, dims: tuple[int, ...], shared: int, stream: int, params: Any) -> None:
        ensure_context()
        if shared > self._shared_optin:
            # Above 48 KB a kernel must opt in to dynamic shared memory.
            check(driver().cuFuncSetAttribute(self.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared),
                  "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
            self._shared_optin = shared
        code = self._launch(self.function, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], shared,
                            stream or None, params, None)
        check(code, "cuLaunchKernel")

    def __del__(self) -> None:
        module = getattr(self, "_module", None)
        if module and module.value and _driver is not None:
            try:
                _driver.cuModuleUnload(module)
            except Exception:  # noqa: BLE001 - a finalizer must never raise
                pass


def rtc_include_dir() -> Path:
    """The standard headers NVRTC lacks (stdint.h, stddef.h), for the library's headers."""
    return _lib.REPO_ROOT / "src" / "rtc"


# ---- RawKernel's CUDA side (minitensor/cuda/compiler.py) ---------------------------------------

_memo: dict[str, "CudaKernel"] = {}  # loaded kernels of this process, by cache key

# Line numbers for profilers and the sanitizer; functions without __host__ or
# __device__ compiled for the device (the library's headers declare host
# functions, which NVRTC would otherwise refuse; on the emulator every
# function is host code anyway).
BASE_OPTIONS = ["--generate-line-info", "-default-device"]


class CudaKernel:
    """A RawKernel's compiled, loaded function and how to launch it."""

    def __init__(self, image: bytes, mangled: str) -> None:
        self._loaded = LoadedKernel(image, mangled)
        self.max_threads = self._loaded.max_threads
        self.max_shared = max_shared_optin()

    def launch(self, dims: tuple[int, ...], shared: int, stream: int, packed: list[Any]) -> None:
        # cuLaunchKernel takes the address of each argument; it copies them
        # before returning, so the ctypes objects need only live until then.
        params = (c_void_p * max(len(packed), 1))(*[ctypes.addressof(a) for a in packed])
        self._loaded.launch(dims, shared, stream, params)

    def launch_prepared(self, dims: tuple[int, ...], shared: int, stream: int, params: Any) -> None:
        """A launch with a ready array of argument addresses (compiler.PreparedArgs)."""
        self._loaded.launch(dims, shared, stream, params)


def build(kernel: Any) -> tuple[CudaKernel, bool]:
    """Compiles (or finds in the caches) a RawKernel's source; returns the
    launchable kernel and whether it came from a cache."""
    from ._cache import cache_dir, cache_key, write_atomically

    arch_option, kind = target(device_arch())
    src = _lib.REPO_ROOT / "src"
    options = [arch_option, *BASE_OPTIONS, f"-I{src}", f"-I{rtc_include_dir()}", *kernel.options]
    key = cache_key("cuda", kernel.source, kernel.name, "\0".join(options), kind, version())
    loaded = _memo.get(key)
    if loaded is not None:
        return loaded, True
    path = cache_dir() / f"{key}.{kind}"
    cached = path.is_file()
    if cached:
        mangled_bytes, _, image = path.read_bytes().partition(b"\n")
        mangled = mangled_bytes.decode()
    else:
        image, mangled, _log = compile_source(kernel.source, kernel.filename, kernel.name, options, kind)
        try:
            write_atomically(path, mangled.encode() + b"\n" + image)
        except OSError:
            pass  # a read-only home: the kernel still works, uncached
    loaded = _memo[key] = CudaKernel(image, mangled)
    return loaded, cached
