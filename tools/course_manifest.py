"""course_manifest: loads and checks course/tasks.toml, the list of the course's tasks.

    from course_manifest import load_manifest
    manifest = load_manifest("course/tasks.toml")
    for task in manifest.tasks:
        print(task.id, task.points, [t.program for t in task.c_tests])

tools/course.py (handout, grade) and the tests of the course kit read the
manifest only through this module, so a malformed manifest fails in one
place, with a message naming the task and the key.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

ID_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
POLICIES = ("fast", "teaching")


class ManifestError(ValueError):
    """course/tasks.toml is malformed; the message names the task and the key."""


@dataclass(frozen=True)
class CTest:
    """A C test program (tests/c/<program>.c) and an optional case-name filter (MT_TEST_FILTER)."""

    program: str
    filter: Optional[str] = None


@dataclass(frozen=True)
class PyTest:
    """A pytest selection: a path, and optionally the expression of -k."""

    path: str
    k: Optional[str] = None

    def args(self) -> list[str]:
        """The pytest command-line arguments of this selection."""
        return [self.path] + (["-k", self.k] if self.k else [])


@dataclass(frozen=True)
class Task:
    """One task of the course: what a student writes, and the tests that grade it."""

    id: str
    title: str
    points: int
    files: list[str]
    c_tests: list[CTest]
    pytest: list[PyTest]
    policy: str
    requires: list[str]
    sheet: str
    # Notebook sources (notebooks/src/*.py) that show the task's code: a handout
    # stubs their regions too, but they are neither graded nor taken from a submission.
    notebooks: list[str] = field(default_factory=list)
    # Words that name the task's code in test ids (its id is one too): isolation_problems().
    names: list[str] = field(default_factory=list)

    def words(self) -> list[str]:
        """The task's id and its names: what a test id that runs its code would mention."""
        return [self.id, *self.names]

    def region_files(self) -> list[str]:
        """Every file that may hold a region of this task."""
        return self.files + self.notebooks


@dataclass
class Manifest:
    """The whole course: its name, version and tasks, in the manifest's order."""

    name: str
    version: str
    tasks: list[Task]
    handout_exclude: list[str] = field(default_factory=list)
    path: Optional[Path] = None

    def task(self, id: str) -> Task:  # noqa: A002 - the manifest's own key
        """The task with this id; KeyError naming the known ids otherwise."""
        for t in self.tasks:
            if t.id == id:
                return t
        raise KeyError(f"no task {id!r} in the course (tasks: {', '.join(self.ids())})")

    def ids(self) -> list[str]:
        """The task ids, in the manifest's order."""
        return [t.id for t in self.tasks]


def _require(table: dict[str, Any], key: str, kind: Union[type, tuple[type, ...]], where: str) -> Any:
    if key not in table:
        raise ManifestError(f"{where}: missing key {key!r}")
    value = table[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise ManifestError(f"{where}: {key!r} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _str_list(table: dict[str, Any], key: str, where: str) -> list[str]:
    values = _require(table, key, list, where)
    for v in values:
        if not isinstance(v, str):
            raise ManifestError(f"{where}: {key!r} must be a list of strings, got {v!r}")
    return list(values)


def _entries(table: dict[str, Any], key: str, where: str, required: str, optional: str) -> list[tuple[str, Any]]:
    """The (required, optional) string pairs of a list of small tables such as
    c_tests = [{ program = "test_map", filter = "..." }]; the optional one may be absent."""
    out: list[tuple[str, Any]] = []
    if key not in table:  # a task may have only C programs, or only pytest selections
        return out
    for i, entry in enumerate(_require(table, key, list, where)):
        at = f"{where}, {key}[{i}]"
        if not isinstance(entry, dict):
            raise ManifestError(f"{at}: must be a table {{ {required} = ..., {optional} = ... }}, got {entry!r}")
        value = _require(entry, required, str, at)
        extra = entry.get(optional)
        if extra is not None and not isinstance(extra, str):
            raise ManifestError(f"{at}: {optional!r} must be a string, got {extra!r}")
        unknown = set(entry) - {required, optional}
        if unknown:
            raise ManifestError(f"{at}: unknown keys {sorted(unknown)}")
        out.append((value, extra))
    return out


def parse_task(table: Any, where: str) -> Task:
    """One [[task]] table, checked key by key (`where` names it in messages
    until its id is known); ManifestError if anything is malformed."""
    if not isinstance(table, dict):
        raise ManifestError(f"{where}: must be a [[task]] table")
    task_id = _require(table, "id", str, where)
    if not ID_PATTERN.match(task_id):
        raise ManifestError(f"{where}: id {task_id!r} is not snake_case")
    where = f"task {task_id!r}"
    points = _require(table, "points", int, where)
    if points < 0:
        raise ManifestError(f"{where}: points must be >= 0, got {points}")
    policy = _require(table, "policy", str, where)
    if policy not in POLICIES:
        raise ManifestError(f"{where}: policy must be one of {POLICIES}, got {policy!r}")
    known = {"id", "title", "points", "files", "c_tests", "pytest", "policy", "requires", "sheet", "notebooks",
             "names"}
    unknown = set(table) - known
    if unknown:
        raise ManifestError(f"{where}: unknown keys {sorted(unknown)}")
    return Task(
        id=task_id,
        title=_require(table, "title", str, where),
        points=points,
        files=_str_list(table, "files", where),
        c_tests=[CTest(p, f) for p, f in _entries(table, "c_tests", where, "program", "filter")],
        pytest=[PyTest(p, k) for p, k in _entries(table, "pytest", where, "path", "k")],
        policy=policy,
        requires=_str_list(table, "requires", where),
        sheet=_require(table, "sheet", str, where),
        notebooks=_str_list(table, "notebooks", where) if "notebooks" in table else [],
        names=_str_list(table, "names", where) if "names" in table else [],
    )


def parse_manifest(data: dict[str, Any], path: Optional[Path] = None) -> Manifest:
    """A Manifest from the parsed TOML; ManifestError if anything is malformed."""
    where = str(path or "manifest")
    name = _require(data, "name", str, where)
    version = _require(data, "version", str, where)
    tables = _require(data, "task", list, where)
    tasks = [parse_task(t, f"task #{i + 1}") for i, t in enumerate(tables)]
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ManifestError(f"{where}: task ids appear twice: {dupes}")
    for t in tasks:
        for r in t.requires:
            if r not in ids:
                raise ManifestError(f"task {t.id!r}: requires unknown task {r!r}")
            if r == t.id:
                raise ManifestError(f"task {t.id!r}: requires itself")
    for t in tasks:
        if not t.c_tests and not t.pytest:
            raise ManifestError(f"task {t.id!r} has no test: give it c_tests or pytest entries")
    handout = data.get("handout", {})
    if not isinstance(handout, dict):
        raise ManifestError(f"{where}: [handout] must be a table")
    exclude = _str_list(handout, "exclude", f"{where} [handout]") if "exclude" in handout else []
    return Manifest(name=name, version=version, tasks=tasks, handout_exclude=exclude, path=path)


def mentions(node_id: str, word: str) -> bool:
    """Whether a test id mentions a word: the word with no letter or digit on either side
    (test_partial_tiles[tiled-7-33-31] mentions "tiled"; blocktile_1d does not)."""
    return re.search(rf"(?<![a-z0-9]){re.escape(word.lower())}(?![a-z0-9])", node_id.lower()) is not None


def isolation_problems(manifest: Manifest, collect: Callable[[PyTest], list[str]]) -> list[str]:
    """The manifest's breaches of task isolation: a test of a task's pytest selections whose id
    mentions a word of another task (Task.words) that the task does not require, so that the
    task would lose points for another task's code. `collect` gives the test ids a selection
    collects (pytest --collect-only)."""
    problems = []
    for task in manifest.tasks:
        others = [t for t in manifest.tasks if t.id != task.id and t.id not in task.requires]
        for selection in task.pytest:
            for node in collect(selection):
                for other in others:
                    hits = [w for w in other.words() if mentions(node, w)]
                    if hits:
                        problems.append(f"task {task.id}: {node} mentions {', '.join(hits)} of task {other.id}, "
                                        f"which {task.id} does not require")
    return problems


def load_manifest(path: Union[str, Path] = "course/tasks.toml") -> Manifest:
    """Reads and checks the course manifest (by default course/tasks.toml of the current directory)."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ManifestError(f"{path}: no course manifest there") from None
    except tomllib.TOMLDecodeError as e:
        raise ManifestError(f"{path}: not valid TOML: {e}") from None
    return parse_manifest(data, path)
