"""The package installs with pip (pyproject.toml), and a script outside the
repository then imports it and finds the engine library (issue 28).

The install runs offline: into a throwaway virtualenv that sees this
interpreter's packages (numpy, and setuptools and wheel, the build backend:
requirements.txt) through a .pth file, with ``--no-build-isolation
--no-index``, as ``pip install -e .`` does with a network.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from minitensor._lib import loader

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import minitensor as mt
x = mt.arange(6.0).reshape(2, 3)
print(mt.__file__)
print(mt.backend(), x.sum(axis=1, keepdim=False).tolist())
"""


def _clean_env() -> dict[str, str]:
    """The environment without what would find the package or library another way."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MINITENSOR_LIB")}


def test_editable_install_is_importable_from_outside_the_repository(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--disable-pip-version-check",
         "--no-build-isolation", "--no-deps", "--no-index", "-e", str(ROOT)],
        capture_output=True, text=True, env=_clean_env(), cwd=tmp_path)
    assert install.returncode == 0, install.stdout + install.stderr
    (tmp_path / "elsewhere").mkdir()
    script = tmp_path / "elsewhere" / "use_minitensor.py"
    script.write_text(SCRIPT)
    run = subprocess.run([str(python), str(script)], capture_output=True, text=True, env=_clean_env(),
                         cwd=tmp_path / "elsewhere")
    assert run.returncode == 0, run.stdout + run.stderr
    package_file, result = run.stdout.splitlines()
    assert Path(package_file) == ROOT / "minitensor" / "__init__.py"  # the clone's files, not a copy
    backend, sums = result.split(" ", 1)
    assert backend in ("cuda", "emulator") and sums == "[3.0, 12.0]"


def test_a_copy_without_the_library_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.delenv("MINITENSOR_LIB", raising=False)
    monkeypatch.setattr(loader, "REPO_ROOT", tmp_path / "site-packages")
    monkeypatch.setattr(loader, "EMU_LIB_PATH", tmp_path / "build" / "libminitensor_emu.so")
    monkeypatch.setattr(loader, "CUDA_LIB_PATH", tmp_path / "build" / "libminitensor_cuda.so")
    with pytest.raises(ImportError, match=r"a copy without the engine library.*`pip install -e \.`.*MINITENSOR_LIB"):
        loader.check_built()


def test_a_clone_without_the_library_says_run_make(tmp_path, monkeypatch):
    monkeypatch.delenv("MINITENSOR_LIB", raising=False)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "minitensor.h").write_text("/* the engine's header */\n")
    monkeypatch.setattr(loader, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(loader, "EMU_LIB_PATH", tmp_path / "build" / "libminitensor_emu.so")
    monkeypatch.setattr(loader, "CUDA_LIB_PATH", tmp_path / "build" / "libminitensor_cuda.so")
    with pytest.raises(ImportError, match=r"the engine library is not built .*run `make`"):
        loader.check_built()


def test_pyproject_names_the_package_and_its_dependency():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["name"] == "minitensor"
    assert any(dep.startswith("numpy") for dep in project["project"]["dependencies"])
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["minitensor*"]
