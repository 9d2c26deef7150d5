"""notebook_cells: the cells of a notebook source, with no Jupyter package needed.

The notebooks are written as plain Python files in "percent" format
(notebooks/src/*.py): '# %%' starts a code cell, '# %% [markdown]' a
markdown cell whose lines are comments. A source may hold task regions of
the course kit (course_regions): the solved notebook shows the solution,
a handout's shows the stub, and neither shows the markers.

notebooks/build_notebooks.py wraps these cells for nbformat and executes
them; tools/course_handout.py writes a handout's notebooks from them, with
no outputs, since they would be the solution's.
"""

from __future__ import annotations

import json

from course_regions import MARKER, find_regions, handout_spans, render


def notebook_code(text: str, path: str) -> str:
    """A source as the notebook shows it: a solved source with its solutions, a
    handout's source with its stubs; no region markers either way."""
    if handout_spans(text) and not any(MARKER.match(l) and "STUB" in l for l in text.splitlines()):
        return "".join(l for l in text.splitlines(keepends=True) if not MARKER.match(l.rstrip("\n")))
    return render(text, path, set()) if find_regions(text, path) else text


def percent_cells(text: str) -> list[tuple[str, str]]:
    """(kind, source) of each cell, kind "markdown" or "code"; empty code cells dropped."""
    cells: list[tuple[str, str]] = []
    kind, lines = None, []

    def flush() -> None:
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            cells.append((kind, "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#")
                                          for line in body.splitlines())))
        elif body.strip():
            cells.append((kind, body))

    for line in text.splitlines():
        if line.startswith("# %%"):
            flush()
            kind = "markdown" if "[markdown]" in line else "code"
            lines = []
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


def unexecuted_notebook(text: str, path: str, metadata: dict) -> str:
    """The JSON of a notebook (format 4.5) of a source's cells, never executed."""
    cells = []
    for number, (kind, source) in enumerate(percent_cells(notebook_code(text, path))):
        cell = {"cell_type": kind, "id": f"cell-{number}", "metadata": {},
                "source": source.splitlines(keepends=True)}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        cells.append(cell)
    notebook = {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
