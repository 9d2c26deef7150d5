"""RawKernel on the emulator: the user's CUDA source, translated by
_cu2emu.py, compiled by the host C++ compiler into a shared library
that runs on the emulator's runtime (the one libminitensor_emu.so holds).

The generated file is the translated source, then a launcher:

    extern "C" int mt_user_launch(dims, shared, stream, args, &message)

which launches the kernel with each argument read from args[i] as the
kernel's own parameter type (C++ deduces the types from the function, so a
template instance such as ``k<float>`` works too), and reports the
emulator's error message for a bad launch or a fault. ``mt_user_arity`` and
``mt_user_param_sizes`` let Python check the arguments before a launch.
"""

from __future__ import annotations

import ctypes
import os
import platform
import shlex
import subprocess
import tempfile
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint, c_void_p
from pathlib import Path
from typing import Any

from .. import _lib
from . import _cu2emu
from .._errors import CompileError, CudaError

_LAUNCHER = r'''
#line 1 "<minitensor launcher>"
#include <cstddef>
#include <type_traits>
#include <utility>
namespace mt_user_launcher {
template <typename... P, std::size_t... I>
void call(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t shared, cudaStream_t stream, void **args,
          std::index_sequence<I...>)
{
    ::mt_emu::launch(MT_USER_LABEL, kernel, grid, block, shared, stream)(
        *static_cast<typename std::decay<P>::type *>(args[I])...);
}
template <typename... P>
void run(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t shared, cudaStream_t stream, void **args)
{
    call(kernel, grid, block, shared, stream, args, std::index_sequence_for<P...>{});
}
template <typename... P>
int arity(void (*)(P...)) { return (int)sizeof...(P); }
template <typename... P>
void sizes(void (*)(P...), std::size_t *out)
{
    const std::size_t s[] = {sizeof(typename std::decay<P>::type)..., 0};
    for (std::size_t i = 0; i < sizeof...(P); ++i)
        out[i] = s[i];
}
} /* namespace mt_user_launcher */

extern "C" int mt_user_arity(void) { return mt_user_launcher::arity(&MT_USER_KERNEL); }
extern "C" void mt_user_param_sizes(std::size_t *out) { mt_user_launcher::sizes(&MT_USER_KERNEL, out); }
extern "C" std::size_t mt_user_max_shared(void)
{
    cudaDeviceProp prop;
    return cudaGetDeviceProperties(&prop, 0) == cudaSuccess ? prop.sharedMemPerBlockOptin : 48 * 1024;
}
extern "C" int mt_user_launch(const unsigned *d, std::size_t shared, void *stream, void **args, const char **message)
{
    *message = nullptr;
    /* Above 48 KB of dynamic shared memory a kernel must opt in, as on a GPU. */
    if (shared > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(&MT_USER_KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shared);
        if (e != cudaSuccess) {
            *message = cudaGetErrorString(e);
            return (int)e;
        }
    }
    mt_user_launcher::run(&MT_USER_KERNEL, dim3(d[0], d[1], d[2]), dim3(d[3], d[4], d[5]), shared,
                          (cudaStream_t)stream, args);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        *message = cudaGetErrorString(err);
    return (int)err;
}
'''

_memo: dict[str, "EmulatedKernel"] = {}


def host_options(options: tuple[str, ...]) -> list[str]:
    """The options a host compiler understands (-D, -U, -I); the others
    concern GPU code generation and are dropped."""
    kept: list[str] = []
    it = iter(options)
    for o in it:
        if o in ("-D", "-U", "-I"):
            kept += [o, next(it, "")]
        elif o.startswith(("-D", "-U", "-I", "--define-macro=", "--include-path=")):
            kept.append(o.replace("--define-macro=", "-D").replace("--include-path=", "-I"))
    return kept


def generated_source(kernel: Any) -> str:
    try:
        translated = _cu2emu.translate(kernel.source, kernel.filename)
    except SystemExit as e:  # cu2emu reports what it cannot translate this way
        raise CompileError(f"minitensor.cuda.compile: {kernel.filename} cannot run on the emulator:\n{e}",
                           str(e)) from None
    label = kernel.name.replace("\\", "\\\\").replace('"', '\\"')
    return ('#include "cuda_compat.h"\n'
            f"#define MT_USER_KERNEL {kernel.name}\n"
            f'#define MT_USER_LABEL "{label}"\n'
            f"{translated}\n{_LAUNCHER}")


def compiler_command(source: Path, output: Path, options: list[str]) -> list[str]:
    cxx = shlex.split(os.environ.get("CXX", "g++"))
    flags = ["-std=c++17", "-O2", "-g", "-fPIC", "-shared", "-DMT_EMULATOR", f"-I{_lib.REPO_ROOT / 'src'}",
             "-Wall", "-Wno-unused-parameter", "-Wno-unused-variable"]
    if platform.machine() == "x86_64":
        flags.append("-mtls-dialect=gnu2")  # as the emulator build (Makefile)
    emu_lib = Path(_lib.lib()._name).resolve()
    # Linked by its full path, so that the loader finds the copy already in
    # this process (one emulator runtime: its thread-locals and checks).
    return cxx + flags + options + [str(source), "-o", str(output), str(emu_lib), "-lboost_context", "-pthread"]


class EmulatedKernel:
    """A RawKernel built into a shared library and loaded."""

    max_threads = 1024

    def __init__(self, path: Path, params: Any) -> None:
        self._lib = ctypes.CDLL(str(path))
        self._lib.mt_user_launch.argtypes = [POINTER(c_uint), c_size_t, c_void_p, POINTER(c_void_p),
                                             POINTER(c_char_p)]
        self._lib.mt_user_launch.restype = c_int
        self._lib.mt_user_arity.restype = c_int
        self._lib.mt_user_max_shared.restype = c_size_t
        self.arity = self._lib.mt_user_arity()
        sizes = (c_size_t * max(self.arity, 1))()
        self._lib.mt_user_param_sizes(sizes)
        self.sizes = list(sizes)[: self.arity]
        self.max_shared = self._lib.mt_user_max_shared()

    def launch(self, dims: tuple[int, ...], shared: int, stream: int, packed: list[Any]) -> None:
        if len(packed) != self.arity:
            raise TypeError(f"RawKernel: the kernel takes {self.arity} arguments, got {len(packed)}")
        for i, (arg, size) in enumerate(zip(packed, self.sizes)):
            if ctypes.sizeof(arg) != size:
                raise TypeError(f"RawKernel: argument {i} has {ctypes.sizeof(arg)} bytes but the kernel's "
                                f"parameter has {size}; pass a NumPy scalar of the parameter's type")
        self.launch_prepared(dims, shared, stream,
                             (c_void_p * max(len(packed), 1))(*[ctypes.addressof(a) for a in packed]))

    def launch_prepared(self, dims: tuple[int, ...], shared: int, stream: int, params: Any) -> None:
        """A launch with a ready array of argument addresses (compiler.PreparedArgs)."""
        message = c_char_p()
        code = self._lib.mt_user_launch((c_uint * 6)(*dims), shared, stream or None, params, ctypes.byref(message))
        if code != 0:
            text = (message.value or b"").decode(errors="replace")
            raise CudaError(f"RawKernel: launch of the kernel failed: {text} (cudaError {code})")


def build(kernel: Any) -> tuple[EmulatedKernel, bool]:
    """Translates and compiles a RawKernel's source (or finds it in the
    caches); returns the loaded kernel and whether it came from a cache."""
    from ._cache import cache_dir, cache_key

    options = host_options(kernel.options)
    emu_lib = str(Path(_lib.lib()._name).resolve())
    key = cache_key("emulator", kernel.source, kernel.name, "\0".join(options), emu_lib,
                    os.environ.get("CXX", "g++"))
    if key in _memo:
        return _memo[key], True
    path = cache_dir() / f"{key}.so"
    cached = path.is_file()
    if not cached:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            source = Path(tmp) / "kernel.cpp"
            source.write_text(generated_source(kernel))
            output = Path(tmp) / "kernel.so"
            run = subprocess.run(compiler_command(source, output, options), capture_output=True, text=True)
            if run.returncode != 0:
                log = _user_log(run.stderr)
                raise CompileError(f"minitensor.cuda.compile: {kernel.filename} did not compile for the "
                                   f"emulator:\n{log}", log)
            os.replace(output, path)
    loaded = EmulatedKernel(path, kernel.params)
    if kernel.params is not None and len(kernel.params) != loaded.arity:
        kernel.params = None  # the parser misread the declaration: trust the compiler's count
    _memo[key] = loaded
    return loaded, cached


def _user_log(stderr: str) -> str:
    """The compiler's messages, without the lines about the launcher that the
    user did not write (an error there repeats one in the user's code)."""
    lines = [ln for ln in stderr.splitlines() if "<minitensor launcher>" not in ln]
    return "\n".join(lines).strip() or stderr.strip()
