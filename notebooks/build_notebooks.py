"""Builds notebooks/*.ipynb from their sources in notebooks/src/ and runs them.

Each notebook is written as a plain Python file in "percent" format, so that
it reads and diffs as text:

    # %% [markdown]
    # # A title
    # Some prose.

    # %%
    x = mt.arange(12)

This tool turns each source into a notebook, executes it top to bottom in a
fresh kernel (nbclient, working directory notebooks/), and writes the
notebook with its outputs next to this file, so that a reader sees the
figures without running anything. Edit the sources, never the .ipynb files.

    .venv/bin/python notebooks/build_notebooks.py              # all notebooks
    .venv/bin/python notebooks/build_notebooks.py 02           # those whose name contains 02
    .venv/bin/python notebooks/build_notebooks.py --figures /tmp/figs
                                             # also save every figure as a PNG

`make notebooks` runs the first form. The backend is whatever minitensor
picks (MINITENSOR_BACKEND=emulator forces the emulator); the committed
notebooks were executed on the emulator.
"""

from __future__ import annotations

import argparse
import base64
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from ipykernel.kernelspec import write_kernel_spec
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
sys.path.insert(0, str(HERE.parent / "tools"))
from notebook_cells import notebook_code, percent_cells  # noqa: E402  (tools/ is no package)

CELL_TIMEOUT_S = 300


def parse_percent(text: str, path: str = "<source>") -> list[nbformat.NotebookNode]:
    """Cells of a percent-format source (tools/notebook_cells.py reads them)."""
    return [nbformat.v4.new_markdown_cell(body) if kind == "markdown" else nbformat.v4.new_code_cell(body)
            for kind, body in percent_cells(notebook_code(text, path))]


def notebook_from_source(source: Path) -> nbformat.NotebookNode:
    """The (unexecuted) notebook of one percent-format source."""
    nb = nbformat.v4.new_notebook()
    nb.cells = parse_percent(source.read_text(), f"notebooks/src/{source.name}")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def execute(nb: nbformat.NotebookNode, timeout: int = CELL_TIMEOUT_S) -> None:
    """Runs every cell of nb in place, in a fresh kernel started with this
    interpreter (whatever "python3" kernel the machine has installed
    elsewhere may lack minitensor's requirements), working directory
    notebooks/. Raises nbclient's CellExecutionError on the first failing
    cell, with its traceback."""
    with tempfile.TemporaryDirectory() as kernels:
        write_kernel_spec(str(Path(kernels) / "python3"))  # argv: sys.executable -m ipykernel_launcher
        manager = KernelManager(kernel_name="python3",
                                kernel_spec_manager=KernelSpecManager(kernel_dirs=[kernels]))
        client = NotebookClient(nb, km=manager, timeout=timeout,
                                resources={"metadata": {"path": str(HERE)}})
        client.execute()


def build(source: Path) -> tuple[Path, float]:
    """Writes and executes the notebook of one source; returns (path, seconds)."""
    nb = notebook_from_source(source)
    start = time.perf_counter()
    execute(nb)
    seconds = time.perf_counter() - start
    target = HERE / (source.stem + ".ipynb")
    nbformat.validate(nb)
    nbformat.write(nb, target)
    return target, seconds


def export_figures(notebook: Path, folder: Path) -> list[Path]:
    """Saves every PNG output of an executed notebook as folder/<name>_<k>.png."""
    nb = nbformat.read(notebook, as_version=4)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                path = folder / f"{notebook.stem}_{len(written) + 1}.png"
                path.write_bytes(base64.b64decode(data["image/png"]))
                written.append(path)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="build only sources whose name contains one of these")
    parser.add_argument("--figures", type=Path, help="save every figure as a PNG in this folder")
    args = parser.parse_args()
    sources = sorted(SOURCES.glob("[0-9]*.py"))
    if args.names:
        sources = [s for s in sources if any(n in s.stem for n in args.names)]
    if not sources:
        print("no notebook source matches", file=sys.stderr)
        return 1
    for source in sources:
        target, seconds = build(source)
        print(f"{target.relative_to(HERE.parent)}: executed in {seconds:.1f} s")
        if args.figures:
            for path in export_figures(target, args.figures):
                print(f"  figure {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
