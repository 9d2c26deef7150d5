"""The notebooks in notebooks/: each one runs top to bottom, and the committed
file is the executed form of its source.

Each notebook is built from a percent-format source in notebooks/src/ by
notebooks/build_notebooks.py (`make notebooks`), which also executes it so
that the committed .ipynb carries its figures. These tests

- execute every committed notebook again, in a fresh kernel on the backend
  in use (the emulator here, the GPU where there is one), with a time limit
  per cell, so that a change to the library cannot break a notebook
  unnoticed;
- check that each committed notebook has the cells of its source and was
  executed without error, so that nobody edits one and forgets the other.

Skipped, with the reason, where nbformat, nbclient or ipykernel is missing
(requirements.txt installs them).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (see requirements.txt)")
pytest.importorskip("nbclient", reason="nbclient is not installed (see requirements.txt)")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (see requirements.txt)")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
SOURCES = sorted((NOTEBOOK_DIR / "src").glob("[0-9]*.py"))
CELL_TIMEOUT_S = 120


def _build_tool():
    """notebooks/build_notebooks.py, imported by path (notebooks/ is no package)."""
    spec = importlib.util.spec_from_file_location("build_notebooks", NOTEBOOK_DIR / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_tool = _build_tool()


def _committed(source: Path) -> Path:
    return NOTEBOOK_DIR / (source.stem + ".ipynb")


def test_there_are_notebooks() -> None:
    assert len(SOURCES) >= 4, f"expected the four notebooks' sources in {NOTEBOOK_DIR / 'src'}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_committed_notebook_matches_its_source(source: Path) -> None:
    path = _committed(source)
    assert path.is_file(), f"{path.name} is missing: run `make notebooks`"
    committed = nbformat.read(path, as_version=4)
    expected = build_tool.notebook_from_source(source)
    got_cells = [(c.cell_type, c.source) for c in committed.cells]
    want_cells = [(c.cell_type, c.source) for c in expected.cells]
    assert got_cells == want_cells, (
        f"{path.name} does not match notebooks/src/{source.name}: run `make notebooks`"
    )
    for cell in committed.cells:
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is not None, (
            f"{path.name} was committed without its outputs: run `make notebooks`"
        )
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"{path.name} was committed with an error in cell:\n{cell.source[:300]}"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_runs(source: Path) -> None:
    path = _committed(source)
    if not path.is_file():
        pytest.fail(f"{path.name} is missing: run `make notebooks`")
    nb = nbformat.read(path, as_version=4)
    # Raises CellExecutionError naming the cell and its traceback.
    build_tool.execute(nb, timeout=CELL_TIMEOUT_S)
