"""Loading the engine: lazy start, backend choice, environment overrides.

Each case runs in a fresh interpreter (subprocess), because the backend is
chosen once per process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import minitensor as mt
from minitensor import _lib

REPO = Path(__file__).resolve().parent.parent
needs_emulator_build = pytest.mark.skipif(
    not _lib.EMU_LIB_PATH.is_file(), reason=f"{_lib.EMU_LIB_PATH} is not built"
)


def run_python(code: str, cwd: Path = REPO, **env: str) -> subprocess.CompletedProcess:
    """Runs code in a new interpreter with PYTHONPATH=<repo> and extra env."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MINITENSOR_")}
    full_env["PYTHONPATH"] = str(REPO)
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120
    )


def test_import_does_not_load_or_initialise_the_engine() -> None:
    r = run_python("import minitensor, minitensor._lib as L; print(L.is_loaded())")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_works_from_another_directory(tmp_path: Path) -> None:
    r = run_python("import minitensor as mt; print((mt.ones(3) * 2).tolist())", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[2.0, 2.0, 2.0]"


def test_backend_is_cuda_or_emulator() -> None:
    assert mt.backend() in ("cuda", "emulator")
    assert isinstance(mt.device_info(), str)


@needs_emulator_build
def test_forced_emulator() -> None:
    r = run_python("import minitensor as mt; print(mt.backend(), mt.zeros(2).sum().item())",
                   MINITENSOR_BACKEND="emulator")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["emulator", "0.0"]


def test_forced_cuda_without_gpu_is_a_clear_error() -> None:
    if mt.backend() == "cuda":
        pytest.skip("a GPU is present: forcing cuda works here")
    r = run_python(
        "import minitensor as mt\n"
        "try:\n"
        "    mt.zeros(2)\n"
        "except mt.NoDeviceError as e:\n"
        "    print('NoDeviceError', e)\n",
        MINITENSOR_BACKEND="cuda",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("NoDeviceError")
    assert "MINITENSOR_BACKEND" in r.stdout


def test_unknown_backend_name() -> None:
    r = run_python("import minitensor as mt; mt.zeros(2)", MINITENSOR_BACKEND="tpu")
    assert r.returncode != 0
    assert "ValueError" in r.stderr and "MINITENSOR_BACKEND" in r.stderr


@needs_emulator_build
def test_minitensor_lib_override() -> None:
    path = _lib.EMU_LIB_PATH
    r = run_python("import minitensor as mt; print(mt.backend())", MINITENSOR_LIB=str(path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "emulator"


def test_minitensor_lib_missing_file() -> None:
    r = run_python("import minitensor", MINITENSOR_LIB="/nonexistent/libminitensor.so")
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "MINITENSOR_LIB" in r.stderr


def test_unbuilt_library_says_run_make(tmp_path: Path) -> None:
    shutil.copytree(REPO / "minitensor", tmp_path / "minitensor",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINITENSOR_")}
    env["PYTHONPATH"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-c", "import minitensor"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "ImportError" in r.stderr and "run `make`" in r.stderr
