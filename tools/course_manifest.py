"""The course manifest, course/tasks.toml: which tasks a course has, and what grades them.

One ``[[task]]`` table per task a student does:

    [[task]]
    id = "matmul_tiled"                      # snake_case, used by TASK(...) markers
    title = "Tiled matrix product"
    points = 20
    files = ["src/matmul_tiled.cu"]          # the files holding its TASK regions
    c_tests = [{ program = "test_matmul", filter = "mt_matmul tiled" }]
    pytest = [{ path = "tests/test_matmul.py", k = "tiled" }]
    policy = "teaching"                      # MINITENSOR_KERNELS while it is graded
    requires = ["indexing"]
    sheet = "docs/tasks/matmul_tiled.md"

and, at the top, ``name`` and ``version`` of the course. ``load_manifest``
reads and checks it and returns plain dataclasses; ``tools/course.py`` (the
handout and the grader) and the tests use nothing else.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

POLICIES = ("fast", "teaching")
TASK_ID = re.compile(r"^[a-z][a-z0-9_]*$")


class ManifestError(ValueError):
    """course/tasks.toml (or a hidden tests' tasks.toml) is malformed; the message names the task and key."""


@dataclass(frozen=True)
class CTest:
    """One C test program, optionally narrowed to the cases whose names contain ``filter``."""

    program: str
    filter: str | None = None


@dataclass(frozen=True)
class PyTest:
    """One pytest selection: a file (or node id) and an optional ``-k`` expression."""

    path: str
    k: str | None = None


@dataclass
class Task:
    """One task of the course (an assignment, or a part of one)."""

    id: str
    title: str
    points: int
    files: list[str]
    c_tests: list[CTest]
    pytest: list[PyTest]
    policy: str
    requires: list[str]
    sheet: str


@dataclass
class Manifest:
    """The whole course: its name, version and tasks, in the order of the file."""

    name: str
    version: str
    tasks: list[Task] = field(default_factory=list)

    def task(self, task_id: str) -> Task:
        """The task named ``task_id``; KeyError naming the known ids otherwise."""
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(f"no task {task_id!r} in the manifest (tasks: {', '.join(t.id for t in self.tasks)})")

    def ids(self) -> list[str]:
        return [task.id for task in self.tasks]


def _typed(table: dict, key: str, kind: type, where: str, default: object = ...) -> object:
    """table[key], checked to be a ``kind``; ``default`` when it is absent (if given)."""
    if key not in table:
        if default is ...:
            raise ManifestError(f"{where}: missing key {key!r}")
        return default
    value = table[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ManifestError(f"{where}: {key!r} must be a {kind.__name__}, not {type(value).__name__} ({value!r})")
    return value


def _list_of(table: dict, key: str, kind: type, where: str) -> list:
    values = _typed(table, key, list, where, default=[])
    for value in values:
        if not isinstance(value, kind):
            raise ManifestError(f"{where}: every entry of {key!r} must be a {kind.__name__}, not {value!r}")
    return values


def _c_test(entry: dict, where: str) -> CTest:
    unknown = set(entry) - {"program", "filter"}
    if unknown:
        raise ManifestError(f"{where}: unknown keys {sorted(unknown)} in a c_tests entry")
    return CTest(_typed(entry, "program", str, where), _typed(entry, "filter", str, where, default=None))


def _py_test(entry: dict, where: str) -> PyTest:
    unknown = set(entry) - {"path", "k"}
    if unknown:
        raise ManifestError(f"{where}: unknown keys {sorted(unknown)} in a pytest entry")
    return PyTest(_typed(entry, "path", str, where), _typed(entry, "k", str, where, default=None))


def parse_task(table: dict, where: str) -> Task:
    """One ``[[task]]`` table, checked key by key."""
    known = {"id", "title", "points", "files", "c_tests", "pytest", "policy", "requires", "sheet"}
    unknown = set(table) - known
    if unknown:
        raise ManifestError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(known)})")
    task_id = _typed(table, "id", str, where)
    where = f"{where} ({task_id})"
    if not TASK_ID.match(task_id):
        raise ManifestError(f"{where}: id must be snake_case (lower-case letters, digits, _)")
    points = _typed(table, "points", int, where)
    if points < 0:
        raise ManifestError(f"{where}: points must be >= 0, not {points}")
    policy = _typed(table, "policy", str, where)
    if policy not in POLICIES:
        raise ManifestError(f"{where}: policy must be one of {POLICIES}, not {policy!r}")
    task = Task(
        id=task_id,
        title=_typed(table, "title", str, where),
        points=points,
        files=_list_of(table, "files", str, where),
        c_tests=[_c_test(e, where) for e in _list_of(table, "c_tests", dict, where)],
        pytest=[_py_test(e, where) for e in _list_of(table, "pytest", dict, where)],
        policy=policy,
        requires=_list_of(table, "requires", str, where),
        sheet=_typed(table, "sheet", str, where),
    )
    return task


def load_manifest(path: str | Path = "course/tasks.toml") -> Manifest:
    """Reads and checks the manifest: every key typed, ids unique, prerequisites known."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ManifestError(f"{path}: not valid TOML: {e}") from None
    where = str(path)
    manifest = Manifest(name=_typed(data, "name", str, where), version=_typed(data, "version", str, where))
    for number, table in enumerate(_list_of(data, "task", dict, where), start=1):
        manifest.tasks.append(parse_task(table, f"{where}: task {number}"))
    ids = manifest.ids()
    for task_id in ids:
        if ids.count(task_id) > 1:
            raise ManifestError(f"{where}: task id {task_id!r} appears {ids.count(task_id)} times")
    for task in manifest.tasks:
        if not task.c_tests and not task.pytest:
            raise ManifestError(f"{where}: task {task.id!r} has no test (c_tests or pytest)")
        for required in task.requires:
            if required not in ids:
                raise ManifestError(f"{where}: task {task.id!r} requires unknown task {required!r}")
    return manifest
