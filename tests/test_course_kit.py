"""The course kit itself: task regions, course/tasks.toml, `make handout`, the grader on broken
solutions, and the Gradescope autograder (`make autograder`, course/gradescope/).

Fast checks first (the manifest against the sources, each stub declaring its task, no
solution text in a handout, solutions put back giving the solved files byte for byte), then
those that build:

- a handout of every task, built on the emulator: each task's C tests and pytest selections
  fail, with the message of the task or of a task it requires (course/tasks.toml's
  `requires`), and nothing crashes;
- one scratch copy of the solved sources, broken by exact text replacements one test at a
  time and put back after each (its build too): two tasks broken at once cost their own
  points only, in one pass over every task; bugs students write (a read-modify-write race,
  an out-of-bounds write) planted and graded by the grader: each costs its own task, whose
  report quotes what the emulator caught, and a task that does not require it keeps full
  marks;
- the Gradescope path: `make autograder`'s zip unpacked into Gradescope's layout, its handout
  built as setup.sh builds it, and run_autograder grading a submission whose tasks crash
  (the planted stack overflow), hang (an endless loop, cut at the item's limit: the grade
  still ends, with its report) and race.

The handouts' builds recompile the whole emulator library (every kernel includes a file of
regions); the scratch copy starts from this repository's build and recompiles only what a
test changes. `make test` runs these tests in a pytest of their own, beside the C tests and
the rest of the suite. docs/testing.md has the times.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import NamedTuple

import pytest

from helpers import emulator_buildable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from course_grade import DEFAULT_BUDGET, run_process  # noqa: E402
from course_handout import repository_files, write_handout  # noqa: E402
from course_manifest import ManifestError, Task, load_manifest, parse_manifest  # noqa: E402
from course_regions import RegionError, distinctive_lines, find_regions, handout_spans, render, restore  # noqa: E402

MANIFEST = load_manifest(ROOT / "course" / "tasks.toml")
TASK_IDS = MANIFEST.ids()
C_TASKS = [t.id for t in MANIFEST.tasks if any(f.startswith("src/") for f in t.files)]


def regions_of(task: Task) -> list[tuple[str, object]]:
    """(file, region) of every region of a task, in its files."""
    return [(f, r) for f in task.region_files() for r in find_regions((ROOT / f).read_text(), f) if r.task == task.id]


def shown_as(f: str) -> str:
    """The file a stub names: a notebook source's stub names the notebook the student opens."""
    return f"notebooks/{Path(f).stem}.ipynb" if f.startswith("notebooks/src/") else f


def message(task_id: str) -> str:
    return f"task {task_id} is not done"


def requirements(task: Task) -> set[str]:
    """The task and every task it requires, transitively."""
    seen, todo = set(), [task.id]
    while todo:
        t = todo.pop()
        if t not in seen:
            seen.add(t)
            todo += MANIFEST.task(t).requires
    return seen


# ---- the manifest against the sources ---------------------------------------------------


def test_the_course_has_the_tasks_of_the_coursework() -> None:
    assert TASK_IDS == ["indexing", "map_zip", "reductions", "matmul_tiled", "softmax",
                        "autograd_rules", "layers_optim", "ladder_rung"]
    assert {t.policy for t in MANIFEST.tasks if t.id in ("autograd_rules", "layers_optim")} == {"fast"}
    assert {MANIFEST.task(t).policy for t in C_TASKS} == {"teaching"}


def test_every_task_has_regions_tests_and_points() -> None:
    c_programs = re.search(r"TEST_C_NAMES\s*:=\s*(.*)", (ROOT / "tests/c/tests.mk").read_text()).group(1).split()
    for task in MANIFEST.tasks:
        assert task.points > 0, task.id
        assert task.c_tests or task.pytest, f"{task.id}: no tests grade it"
        for f in task.files:
            assert (ROOT / f).is_file(), f"{task.id}: {f} does not exist"
            assert any(r.task == task.id for r in find_regions((ROOT / f).read_text(), f)), \
                f"{task.id}: {f} has no TASK({task.id}) region"
        for c in task.c_tests:
            assert c.program in c_programs, f"{task.id}: {c.program} is not a C test program of tests.mk"
        for p in task.pytest:
            assert (ROOT / p.path).is_file(), f"{task.id}: {p.path} does not exist"
        assert task.sheet == f"docs/tasks/{task.id}.md"


def test_every_region_belongs_to_a_task_that_lists_its_file() -> None:
    for name in repository_files(ROOT):
        if Path(name).suffix not in (".cu", ".h", ".cpp", ".c", ".py"):
            continue
        for r in find_regions((ROOT / name).read_text(), name):
            assert r.task in TASK_IDS, f"{name}:{r.begin + 1}: TASK({r.task}) is not in course/tasks.toml"
            assert name in MANIFEST.task(r.task).region_files(), f"{name} is not among the files of {r.task}"


def test_task_h_lists_the_c_tasks() -> None:
    text = (ROOT / "src/task.h").read_text()
    listed = re.findall(r"^\s+X\((\w+)\)", text.split("#define MT_COURSE_TASKS(X)")[1].split("#ifdef")[0], re.M)
    assert listed == C_TASKS


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_each_stub_names_its_task_function_and_file(task_id: str) -> None:
    """A C stub declares MT_TASK_MISSING(id, functions, its file) once per file, and the
    launchers check the task; a Python stub raises NotImplementedError with the message."""
    task = MANIFEST.task(task_id)
    for f, r in regions_of(task):
        stub = "".join(r.stub)
        if r.lang == "c":
            missing = re.findall(r'MT_TASK_MISSING\((\w+), "([^"]+)", "([^"]+)"\)', stub)
            assert all(m[0] == task_id and m[2] == f for m in missing), f"{f}: {missing}"
            assert "TODO (task " + task_id in stub, f"{f}: the stub says what to do"
        else:
            raises = re.findall(r'raise NotImplementedError\("task (\w+) is not done: (\S+) in (\S+)"\)', stub)
            assert raises and all(m[0] == task_id and m[2] == shown_as(f) for m in raises), f"{f}: {stub}"
    c_files = [f for f in task.files if f.startswith("src/")]
    if c_files:
        declared = sum("MT_TASK_MISSING(" in "".join(r.stub) for f, r in regions_of(task) if r.lang == "c")
        assert declared >= 1
        checks = sum(p.read_text().count(f"MT_TASK_CHECK({task_id})") for p in (ROOT / "src").glob("*.c[uh]*"))
        checks += sum(p.read_text().count(f"MT_TASK_CHECK({task_id})") for p in (ROOT / "src").glob("*.h"))
        assert checks >= 1, f"no launcher checks task {task_id}"


@pytest.mark.parametrize("task_id", [t.id for t in MANIFEST.tasks if any(f.endswith(".py") for f in t.region_files())])
def test_python_stubs_parse(task_id: str) -> None:
    for f in MANIFEST.task(task_id).region_files():
        if f.endswith(".py"):
            ast.parse(render((ROOT / f).read_text(), f, {task_id}), f)


def test_a_malformed_manifest_names_the_task_and_key() -> None:
    good = {"id": "t", "title": "T", "points": 1, "files": [], "c_tests": [], "pytest": [],
            "policy": "fast", "requires": [], "sheet": "docs/tasks/t.md"}
    cases = [({**good, "points": "3"}, "'points' must be int"),
             ({**good, "policy": "slow"}, "policy must be one of"),
             ({**good, "requires": ["nope"]}, "requires unknown task 'nope'"),
             ({**good, "c_tests": [{"program": "test_map", "filtre": "x"}]}, "unknown keys"),
             ({k: v for k, v in good.items() if k != "sheet"}, "missing key 'sheet'")]
    for table, expected in cases:
        with pytest.raises(ManifestError, match=re.escape(expected)):
            parse_manifest({"name": "c", "version": "1", "task": [table]})
    with pytest.raises(KeyError, match="no task 'nope'"):
        MANIFEST.task("nope")


def test_broken_markers_name_the_file_and_line() -> None:
    text = "a\n/* TASK(x) BEGIN */\nb\n/* TASK(x) END */\n"
    with pytest.raises(RegionError, match=r"f.c:4: the region of TASK\(x\) has no STUB"):
        find_regions(text, "f.c")
    with pytest.raises(RegionError, match=r"f.c:2: TASK\(x\) BEGIN is never closed"):
        find_regions("a\n/* TASK(x) BEGIN */\n", "f.c")
    with pytest.raises(RegionError, match=r"f.py:3: a stub line must start with '#\|'"):
        find_regions("# TASK(x) BEGIN\n# TASK(x) STUB\nraise X\n# TASK(x) END\n", "f.py")


# ---- handouts, without building them -----------------------------------------------------


@pytest.fixture(scope="module")
def handout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A handout of every task (written once per test run)."""
    out = tmp_path_factory.mktemp("handout_all")
    write_handout(ROOT, out)
    return out


def _visible_lines(path: Path) -> list[str]:
    text = path.read_text(errors="replace")
    if path.suffix == ".ipynb":
        cells = json.loads(text)["cells"]
        text = "".join("".join(c["source"]) + "".join("".join(o.get("text", "")) for o in c.get("outputs", []))
                       for c in cells)
    return [l.strip() for l in text.splitlines()]


def _generic_lines() -> set[str]:
    """The lines of the code outside the regions a handout of every task keeps: a solution
    line that is also there gives nothing away."""
    generic = set()
    for name in repository_files(ROOT):
        if Path(name).suffix in (".cu", ".h", ".py", ".c", ".cpp"):
            lines = render((ROOT / name).read_text(), name, set(TASK_IDS)).splitlines()
            inside = {i for _, b, e in handout_spans("\n".join(lines)) for i in range(b, e + 1)}
            generic |= {l.strip() for i, l in enumerate(lines) if i not in inside}
    return generic


def test_the_handout_has_no_solution_text(handout: Path) -> None:
    generic = _generic_lines()
    secrets = {line: r.task for t in MANIFEST.tasks for _, r in regions_of(t) for line in distinctive_lines(r, generic)}
    assert len(secrets) > 40, "too few distinctive lines to mean anything"
    hits = []
    for path in handout.rglob("*"):
        if path.is_file() and path.suffix in (".cu", ".h", ".c", ".py", ".md", ".ipynb", ".txt", ".toml", ".cpp"):
            hits += [f"{path.relative_to(handout)}: {secrets[l]}: {l}" for l in _visible_lines(path) if l in secrets]
    assert not hits, "\n".join(hits[:20])


def test_putting_the_solutions_back_gives_the_solved_files(handout: Path) -> None:
    special = {"README.md", "LIBRARY.md", "course/tasks.toml"}
    for name in repository_files(ROOT):
        if name in special or name.endswith((".md", ".ipynb")) or name.startswith("notebooks/src/"):
            continue
        if name in MANIFEST.handout_exclude:
            assert not (handout / name).exists()
            continue
        solved = (ROOT / name).read_bytes()
        got = (handout / name).read_bytes()
        if Path(name).suffix in (".cu", ".h", ".py", ".c") and find_regions(solved.decode(), name):
            text = solved.decode()
            assert handout_spans(got.decode()), f"{name}: the handout keeps the task markers"
            got = restore(got.decode(), text, name).encode()
            solved = render(text, name, set()).encode()
        assert got == solved, f"{name}: the handout differs from the solved file outside the task regions"
    assert (handout / "LIBRARY.md").read_bytes() == (ROOT / "README.md").read_bytes()


def test_the_handout_notebooks_show_the_stubs_without_outputs(handout: Path) -> None:
    """A notebook whose source shows a stubbed task's code is written from the handout's
    source: the stub's cells, no markers, and no outputs (they were the solution's)."""
    shown = {nb for t in MANIFEST.tasks for nb in t.notebooks}
    assert shown, "no task shows its code in a notebook"
    for source in shown:
        notebook = json.loads((handout / shown_as(source)).read_text())
        code = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
        assert any("is not done" in c for c in code), f"{source}: the handout's notebook has no stub"
        assert not any("TASK(" in c for c in code), f"{source}: markers left in the notebook"
        assert all(not c.get("outputs") and c.get("execution_count") is None
                   for c in notebook["cells"] if c["cell_type"] == "code")
        solved = json.loads((ROOT / shown_as(source)).read_text())
        assert len(notebook["cells"]) == len(solved["cells"])


def test_the_handout_readme_and_manifest(handout: Path) -> None:
    readme = (handout / "README.md").read_text()
    for t in TASK_IDS:
        assert f"`{t}`" in readme
    assert not re.search(r"\{(course|tasks_table|first_task)\}", readme)
    assert load_manifest(handout / "course/tasks.toml").ids() == TASK_IDS


def test_a_handout_of_one_task(tmp_path: Path) -> None:
    write_handout(ROOT, tmp_path, "softmax")
    assert load_manifest(tmp_path / "course/tasks.toml").ids() == ["softmax"]
    assert [t for t, _, _ in handout_spans((tmp_path / "src/softmax.cu").read_text())] == ["softmax"]
    for name in ("src/map.cu", "src/block_reduce.h", "minitensor/optim.py"):
        assert (tmp_path / name).read_text() == render((ROOT / name).read_text(), name, set())
    result = subprocess.run([sys.executable, str(ROOT / "tools/course.py"), "handout", "--tasks", "nope",
                             "--out", str(tmp_path / "x")], capture_output=True, text=True)
    assert result.returncode == 1 and "unknown task(s) nope; the course has: indexing" in result.stderr


# ---- built: the stubs fail with their message; a broken solution fails its task only ------


def _make(folder: Path, *targets: str) -> None:
    result = subprocess.run(["make", "--no-print-directory", *targets], cwd=folder, capture_output=True, text=True)
    assert result.returncode == 0, f"make {' '.join(targets)} in {folder} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


def _c_programs() -> list[str]:
    return sorted({c.program for t in MANIFEST.tasks for c in t.c_tests})


def _run_c(folder: Path, task: Task, program: str, filt: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "MINITENSOR_KERNELS": task.policy, "MT_TEST_SEED": "1"}
    if filt:
        env["MT_TEST_FILTER"] = filt
    return subprocess.run([str(folder / "build/tests/emu" / program)], capture_output=True, text=True, env=env,
                          timeout=300)


def _run_pytest(folder: Path, task: Task, args: list[str], first_failure: bool) -> subprocess.CompletedProcess:
    # The emulator build is the one these folders build (on a GPU machine too).
    env = {**os.environ, "MINITENSOR_KERNELS": task.policy, "CI": "true", "PYTHONDONTWRITEBYTECODE": "1",
           "MINITENSOR_BACKEND": "emulator"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(["-x"] if first_failure else []), *args]
    return subprocess.run(cmd, cwd=folder, capture_output=True, text=True, env=env, timeout=600)


# What a copy of this repository's build leaves out: the CUDA builds, reports, zips.
SCRATCH_IGNORE = shutil.ignore_patterns("cuda", "cuda-check*", "dist", "bench", "sanitizer", "grade",
                                        "autograder*", "*cuda*.so")


def _prepare(folder: Path) -> None:
    """A folder made to build and test like this repository: its Python environment, and
    the emulator's system packages taken as installed (this repository's build found them)."""
    venv = folder / ".venv"
    if not venv.exists():
        venv.symlink_to(Path(sys.prefix))
    (folder / "build").mkdir(exist_ok=True)
    if not (folder / "build/.deps-ok").exists():  # a newer one would rebuild every object
        (folder / "build/.deps-ok").touch()


@pytest.fixture(scope="module")
def built_handout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not emulator_buildable():
        pytest.skip("builds a handout's emulator library, which this machine cannot (no Boost.Context)")
    out = tmp_path_factory.mktemp("handout_built")
    write_handout(ROOT, out)
    # The handout keeps the times of the files it does not stub, so the emulator's runtime
    # and the C test objects of this repository's build stay valid there.
    shutil.copytree(ROOT / "build", out / "build", symlinks=True, ignore=SCRATCH_IGNORE)
    _prepare(out)
    # Its kernels never run (each op stops at its stub's check), so build for speed.
    _make(out, "EMU_OPT=-O0", "emu", *[f"build/tests/emu/{p}" for p in _c_programs()])
    return out


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_a_stubbed_task_fails_with_its_message(built_handout: Path, task_id: str) -> None:
    task = MANIFEST.task(task_id)
    accepted = [message(t) for t in requirements(task)]
    for c in task.c_tests:
        result = _run_c(built_handout, task, c.program, c.filter)
        assert result.returncode == 1, f"{c.program}: exit status {result.returncode}\n{result.stdout[-2000:]}"
        assert any(m in result.stdout for m in accepted), f"{c.program}: no task message\n{result.stdout[-2000:]}"
    for p in task.pytest:
        result = _run_pytest(built_handout, task, p.args(), first_failure=True)
        assert result.returncode == 1, f"pytest {p.args()}: exit status {result.returncode}\n{result.stdout[-2000:]}"
        assert "NotImplementedError" in result.stdout or "TaskNotDoneError" in result.stdout, result.stdout[-2000:]
        assert any(m in result.stdout for m in accepted), f"pytest {p.args()}: no task message\n{result.stdout[-3000:]}"


# ---- the solved sources, broken: each break costs its own task only ------------------------
#
# One scratch copy of this repository and its emulator build serves every test below. A
# test breaks some files of it (an exact text replacement: the test fails loudly when the
# text is gone), rebuilds what they touch, runs tests, and puts the files and the build
# back from this repository (times kept), so that the next test rebuilds only its own.


def _replace(name: str, old: str, new: str, text: str | None = None) -> str:
    """The text of a file of this repository with `old` replaced by `new`, exactly once."""
    text = (ROOT / name).read_text() if text is None else text
    count = text.count(old)
    assert count == 1, (f"the planted change no longer applies to {name}: its text is found {count} times "
                        f"(update it with the source):\n{old}")
    return text.replace(old, new)


BREAKS = {
    "barrier": ("src/matmul_tiled.cu",
                "        /* Each thread is about to read a whole row of a_tile and column of\n"
                "         * b_tile, loaded by 2 * 32 other threads: all loads must be done. */\n"
                "        __syncthreads();\n", ""),
    "zero_fill": ("src/matmul_tiled.cu",
                  "        a_tile[ty][tx] = (row < M && a_col < K) ? A.at(row, a_col) : T(0);\n",
                  "        if (row < M && a_col < K)\n            a_tile[ty][tx] = A.at(row, a_col);\n"),
}


def _failed_cases(output: str, program: str) -> list[str]:
    return [l.split(": ", 1)[1] for l in output.splitlines() if l.startswith(f"FAIL {program}: ")]


def _sync_build(copy: Path) -> None:
    """Puts this repository's build back into a copy: every file that differs in size or time."""
    for src in (ROOT / "build").rglob("*"):
        rel = src.relative_to(ROOT / "build")
        if not src.is_file() or src.is_symlink() or any(SCRATCH_IGNORE("", [part]) for part in rel.parts):
            continue
        dst = copy / "build" / rel
        s = src.stat()
        if dst.exists():
            d = dst.stat()
            if (d.st_size, d.st_mtime_ns) == (s.st_size, s.st_mtime_ns):
                continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


@pytest.fixture(scope="module")
def solved_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of this repository's files and emulator build (times kept, so that make
    recompiles only what a test changes)."""
    if not (ROOT / "build/libminitensor_emu.so").exists() or not emulator_buildable():
        pytest.skip("needs this repository's emulator build (make emu), and Boost.Context to rebuild it")
    copy = tmp_path_factory.mktemp("solved")
    for name in repository_files(ROOT):
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, copy / name)
    shutil.copytree(ROOT / "build", copy / "build", symlinks=True, dirs_exist_ok=True, ignore=SCRATCH_IGNORE)
    _prepare(copy)
    # The C programs the tasks run, built here once, so that the copy's build is complete.
    _make(copy, "emu", *[f"build/tests/emu/{p}" for p in _c_programs()])
    return copy


@pytest.fixture
def solved(solved_copy: Path):
    """The solved copy and a record of the files a test changes in it; afterwards the files
    and the build are put back from this repository (their times too: nothing rebuilds)."""
    edits: dict[str, str] = {}
    yield solved_copy, edits
    for name in edits:
        shutil.copy2(ROOT / name, solved_copy / name)
    _sync_build(solved_copy)


def _apply(copy: Path, edits: dict[str, str], changes: dict[str, str]) -> None:
    """Writes the changed files and rebuilds what a C file among them touches."""
    edits.update(changes)
    for name, text in changes.items():
        (copy / name).write_text(text)
    if any(name.startswith("src/") for name in changes):
        _make(copy, "emu", *[f"build/tests/emu/{p}" for p in _c_programs()])


def _others_pass(copy: Path, broken: set[str]) -> None:
    """Every task outside `broken` keeps full marks, except that a task which requires a broken
    one (course/tasks.toml) may fail cases, each of them naming a broken task it requires."""
    for task in MANIFEST.tasks:
        if task.id in broken:
            continue
        excuses = [message(b) for b in broken & requirements(task)]
        for c in task.c_tests:
            result = _run_c(copy, task, c.program, c.filter)
            failed = _failed_cases(result.stdout, c.program)
            if excuses and result.returncode == 1:
                assert any(m in result.stdout for m in excuses), result.stdout[-1500:]
                continue
            assert result.returncode == 0, (f"{task.id} ({c.program} {c.filter or ''}) loses points to "
                                            f"{sorted(broken)}: {failed[:3] or result.stdout[-1500:]}")
        for p in task.pytest:
            result = _run_pytest(copy, task, p.args(), first_failure=False)
            failed = [l for l in result.stdout.splitlines() if l.startswith("FAILED ")]
            if excuses and result.returncode == 1:
                assert failed and all(any(m in l for m in excuses) for l in failed), "\n".join(failed[:5])
                continue
            assert result.returncode == 0, f"{task.id} loses points to {sorted(broken)}:\n{result.stdout[-2000:]}"


def _matmul_tiled_c_failures(copy: Path) -> list[str]:
    broken = MANIFEST.task("matmul_tiled")
    return [f for c in broken.c_tests for f in _failed_cases(_run_c(copy, broken, c.program, c.filter).stdout,
                                                             c.program)]


def test_two_broken_tasks_cost_their_own_points_only(solved: tuple[Path, dict]) -> None:
    """One pass over every task, with two tasks broken at once: matmul_tiled's barrier after the
    tile loads removed (a CUDA task, broken the way students break it) and autograd_rules
    stubbed as its handout stubs it (a Python task). Neither requires the other, so each
    failure is its own; every other task keeps full marks, except those that require
    autograd_rules (layers_optim), whose every failure must name it."""
    copy, edits = solved
    name, old, new = BREAKS["barrier"]
    autograd = MANIFEST.task("autograd_rules")
    changes = {name: _replace(name, old, new)}
    changes.update({f: render((ROOT / f).read_text(), f, {autograd.id}) for f in autograd.region_files()})
    _apply(copy, edits, changes)

    failed = _matmul_tiled_c_failures(copy)
    assert failed, "the barrier break of matmul_tiled fails none of its C cases"
    for p in MANIFEST.task("matmul_tiled").pytest:
        if p.k:  # the whole-file selection is slow; the tiled rungs suffice
            result = _run_pytest(copy, MANIFEST.task("matmul_tiled"), p.args(), first_failure=True)
            assert result.returncode == 1 and "is not done" not in result.stdout, result.stdout[-2000:]
    for p in autograd.pytest:
        result = _run_pytest(copy, autograd, p.args(), first_failure=True)
        assert result.returncode == 1 and message(autograd.id) in result.stdout, result.stdout[-2000:]
    _others_pass(copy, {"matmul_tiled", autograd.id})


def test_the_zero_fill_break_fails_matmul_tiled(solved: tuple[Path, dict]) -> None:
    """The other way students break matmul_tiled: the zero-fill at a tile edge dropped. That
    such a break costs no other task is shown above, for the same file."""
    copy, edits = solved
    name, old, new = BREAKS["zero_fill"]
    _apply(copy, edits, {name: _replace(name, old, new)})
    assert _matmul_tiled_c_failures(copy), "the zero_fill break of matmul_tiled fails none of its C cases"


def test_a_stubbed_softmax_fails_with_its_own_message(solved: tuple[Path, dict]) -> None:
    """The solved sources with softmax stubbed as `make handout TASKS=softmax` stubs it: its own
    tests fail with its own message (that a broken softmax costs no other task is checked by
    the planted stack overflow below)."""
    copy, edits = solved
    task = MANIFEST.task("softmax")
    _apply(copy, edits, {f: render((ROOT / f).read_text(), f, {task.id}) for f in task.region_files()})
    for c in task.c_tests:
        result = _run_c(copy, task, c.program, c.filter)
        assert result.returncode == 1 and message(task.id) in result.stdout, result.stdout[-2000:]
    for p in task.pytest:
        result = _run_pytest(copy, task, p.args(), first_failure=True)
        assert result.returncode == 1 and message(task.id) in result.stdout, result.stdout[-2000:]


# ---- planted bugs, graded: each costs its own task, and the grade ends ---------------------
#
# Bugs that students write, planted in the solved copy one at a time and graded by the
# grader (tools/course.py grade) on the task they break and one task that does not require
# it. Each plant touches one file; the header plant (block_reduce.h) rebuilds the kernels
# that include it. Two bugs are graded by the Gradescope test below only, so that no bug
# class is graded twice: the stack overflow (its submission plants it in softmax.cu) and the
# endless loop (matmul_tiled's tile loop that never advances), each beside a task that keeps
# full marks.
#
# What these grades change from the defaults of `make grade`, for time (docs/testing.md):
# the kernels of the planted file are compiled at -O0 (the emulator's checks, which catch
# these bugs, work the same at any level). The grader ends an item of the broken task at its
# first memory error or race, which it reports within seconds and which scores the item 0
# (the test checks that the report quotes it and that the items end there, none at its
# time limit), while the task that keeps full marks needs a few seconds per item.


class Plant(NamedTuple):
    file: str
    old: str
    new: str
    task: str        # the task it breaks
    other: str       # a task that does not require it: keeps full marks
    kept: float      # the broken task loses points, and keeps at most this share of them
    caught: str      # what the emulator's checks report for it, quoted in the broken task's report


_LOOP = "    for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {\n"
PLANTS = {
    # Every thread folds its value into slot 0 between two barriers: a read-modify-write
    # race. Run one thread at a time, it even gives the right sum; only a race check sees it.
    "race": Plant("src/block_reduce.h",
                  _LOOP + "        if (tid < stride)\n            s[tid] = combine(s[tid], s[tid + stride]);\n"
                  "        /* One level must be finished before the next level reads its results:\n"
                  "         * s[tid + stride] of the next level was written in this one by\n"
                  "         * another thread. */\n        __syncthreads();\n    }\n",
                  "    if (tid != 0)\n        s[0] = combine(s[0], value);\n    __syncthreads();\n",
                  "reductions", "ladder_rung", 0.5, "shared-memory race in kernel"),
    # i <= n: one element read and written past the end of each tensor.
    "out_of_bounds": Plant("src/map.cu",
                           "    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)\n"
                           "        out[i] = (TOut)op(in[i]);\n",
                           "    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i <= n; i += step)\n"
                           "        out[i] = (TOut)op(in[i]);\n",
                           "map_zip", "indexing", 0.5, "illegal memory access in kernel"),
    # A 128 KiB array on each emulated thread's stack.
    "stack_overflow": Plant("src/softmax.cu",
                            "    __shared__ BlockScratch<T> scratch;\n"
                            "    T *out_data = static_cast<T *>(out_rows.data);\n",
                            "    __shared__ BlockScratch<T> scratch;\n"
                            "    volatile char row_cache[128 * 1024];\n"
                            "    row_cache[threadIdx.x] = 0;\n"
                            "    T *out_data = static_cast<T *>(out_rows.data);\n",
                            "softmax", "ladder_rung", 1.0, "stack"),
}
PLANT_MAKE_VARS = {"EMU_OPT": "-O0"}


def _env_without_make() -> dict[str, str]:
    """This environment without the variables of a make that runs the suite (make test)."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}


GRADE_BOUND = 300  # seconds: a grade of two tasks ends well within it


def _grade(folder: Path, out: Path, tasks: list[str], bound: float, args: tuple[str, ...] = (),
           make_vars: tuple[tuple[str, str], ...] = ()) -> tuple[dict, float, str]:
    """`tools/course.py grade` on the emulator, as `make grade` runs it with its defaults (or
    `args`, and `make_vars` in the environment of its build); (results.json, seconds, output).
    Fails when the grade runs past `bound` seconds."""
    code, output, seconds = run_process([sys.executable, "tools/course.py", "grade", "--backend", "emulator",
                                         "--tasks", ",".join(tasks), "--out", str(out), *args],
                                        {**_env_without_make(), **dict(make_vars)}, folder, bound + 60)
    assert code is not None, f"the grade of {tasks} did not end within {bound + 60:.0f} s:\n{output[-3000:]}"
    assert (out / "results.json").is_file(), f"no results.json after {seconds:.0f} s:\n{output[-3000:]}"
    return json.loads((out / "results.json").read_text()), seconds, output


def _task_scores(results: dict) -> dict[str, tuple[float, float, str]]:
    """task id -> (score, max score, the outputs of its items) from a results.json."""
    scores: dict[str, tuple[float, float, str]] = {}
    for test in results["tests"]:
        task = test["name"].split(":", 1)[0]
        score, most, text = scores.get(task, (0.0, 0.0, ""))
        scores[task] = (score + test["score"], most + test["max_score"], text + test.get("output", "") + "\n")
    return scores


def test_every_planted_change_still_applies() -> None:
    """Each break, plant and submission edit finds its text exactly once in today's sources (a
    fast check: the tests that use them build first), inside a solution region of a task that
    the file belongs to (so that a student could have written it)."""
    edits = [(name, old, new) for name, old, new in BREAKS.values()]
    edits += [(p.file, p.old, p.new) for p in PLANTS.values()]
    assert all(p.file in MANIFEST.task(p.task).files for p in PLANTS.values())
    edits += [(name, *change) for name, change in SUBMISSION.items() if change]
    for name, old, new in edits:
        text = (ROOT / name).read_text()
        assert _replace(name, old, new) != text
        first = text[:text.index(old)].count("\n")
        last = first + old.count("\n") - 1
        assert any(r.begin < first and last < r.stub_marker for r in find_regions(text, name)), \
            f"{name}:{first + 1}: the planted change is outside every task's solution"


# The stack overflow and the endless loop: graded by the Gradescope test only (below).
@pytest.mark.parametrize("kind", ["race", "out_of_bounds"])
def test_a_planted_bug_costs_its_own_task_only(solved: tuple[Path, dict], tmp_path: Path, kind: str) -> None:
    copy, edits = solved
    plant = PLANTS[kind]
    assert plant.task not in requirements(MANIFEST.task(plant.other)), f"{plant.other} requires {plant.task}"
    edits[plant.file] = ""
    (copy / plant.file).write_text(_replace(plant.file, plant.old, plant.new))
    results, seconds, output = _grade(copy, tmp_path / "grade", [plant.task, plant.other], GRADE_BOUND,
                                      make_vars=tuple(PLANT_MAKE_VARS.items()))
    scores = _task_scores(results)
    assert set(scores) == {plant.task, plant.other}, output[-3000:]
    score, most, text = scores[plant.task]
    assert score < most and score <= plant.kept * most, (
        f"{kind} in {plant.file}: {plant.task} keeps {score} of {most} (less than {most} and at most "
        f"{plant.kept * most} expected)\n{text[-3000:]}")
    # It is the bug that costs the points: the emulator's checks caught it, and the report says so.
    assert "the emulator's checks found a memory error or a race" in text and plant.caught in text, text[-3000:]
    # ... and its items end there, not at their time limit (course_memory_errors.py).
    assert "at the first memory error or race the emulator reported" in text, text[-3000:]
    assert "timed out" not in text, text[-3000:]
    score, most, text = scores[plant.other]
    assert score == most, f"{kind} in {plant.file} costs {plant.other} points: {score} of {most}\n{text[-3000:]}"
    assert seconds <= GRADE_BOUND, f"the grade took {seconds:.0f} s (bound {GRADE_BOUND} s)"


# ---- the Gradescope path, end to end -------------------------------------------------------
#
# `make autograder` writes the zip; it is unpacked into Gradescope's layout in a temporary
# folder, its handout built as setup.sh builds it (without setup.sh's apt-get), and
# run_autograder grades a submission in which one task crashes, one hangs and one races.

AG_TASKS = ["map_zip", "matmul_tiled", "softmax", "ladder_rung"]
# Per item, whole grade; the test's bound on the run. The item limit is as short as the solved
# items' times allow on a busy 2-core machine (map_zip's tests/test_elementwise.py: about 25 s
# there under the full checks). The budget counts the grade's build of the submission's five
# kernels too: 240 s ran out during that build at a load of 12 to 19 (docs/testing.md).
AG_TIMEOUT, AG_BUDGET, AG_BOUND = 30, 300, 420
HIDDEN_TEST = ("import minitensor as mt\n\n\n"
               "def test_a_hidden_map_of_a_strided_view():\n"
               "    x = mt.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]).T\n"
               "    assert (x * 2.0).tolist() == [[2.0, 8.0], [4.0, 10.0], [6.0, 12.0]]\n")
SUBMISSION = {  # task file -> (old, new), planted in the solved file; map_zip's files are solved
    # hangs: the tile loop never advances
    "src/matmul_tiled.cu": ("    for (int64_t k0 = 0; k0 < K; k0 += C::BK) {\n",
                            "    for (int64_t k0 = 0; k0 < K; k0 += 0) {\n"),
    "src/softmax.cu": PLANTS["stack_overflow"][1:3],  # crashes: 128 KiB on each thread's stack
    # races: the tiles are read before every thread has loaded its part
    "src/matmul_blocktile_1d.cu": ("        __syncthreads(); /* the tiles are complete */\n", ""),
    "src/map.cu": None, "src/zip.cu": None,
}
# Not the other way round: matmul_tiled's whole-file item, tests/test_matmul.py, runs every
# rung of the matmul ladder, blocktile_1d included, so a hang there would cost matmul_tiled's
# points too and stop its item before its own cases.


def _venv_ready() -> None:
    """make must find the suite's environment made (.venv/.ok newer than requirements.txt),
    so that it never tries to make one in a copy whose .venv is a link to it."""
    ok = Path(sys.prefix) / ".ok"
    if not ok.exists() or ok.stat().st_mtime < (ROOT / "requirements.txt").stat().st_mtime:
        pytest.skip(f"the suite's Python environment {sys.prefix} was not made by make (.venv/.ok)")


def test_a_hidden_test_inside_the_handout_is_refused(tmp_path: Path) -> None:
    """A hidden folder whose file the handout also holds (as when it lives in the repository)."""
    hidden = tmp_path / "hidden" / "indexing"
    hidden.mkdir(parents=True)
    shutil.copy(ROOT / "tests/test_views.py", hidden / "test_views_again.py")
    proc = subprocess.run(["make", "--no-print-directory", "autograder", f"HIDDEN={tmp_path / 'hidden'}",
                           f"OUT={tmp_path / 'a.zip'}"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode != 0 and not (tmp_path / "a.zip").exists(), proc.stdout + proc.stderr
    assert "hidden tests would reach the students: the handout holds tests/test_views.py" in proc.stderr


def test_the_gradescope_autograder_end_to_end(tmp_path: Path) -> None:
    if not (ROOT / "build/libminitensor_emu.so").exists() or not emulator_buildable():
        pytest.skip("needs this repository's emulator build (make emu), and Boost.Context to rebuild it")
    _venv_ready()
    hidden = tmp_path / "hidden"
    (hidden / "map_zip").mkdir(parents=True)
    (hidden / "map_zip" / "test_hidden_map.py").write_text(HIDDEN_TEST)
    zipped = tmp_path / "autograder.zip"
    _make(ROOT, "autograder", f"TASKS={','.join(AG_TASKS)}", f"HIDDEN={hidden}", f"OUT={zipped}")

    # Gradescope's layout: the zip in source/, the submission, the results.
    ag = tmp_path / "ag"
    with zipfile.ZipFile(zipped) as z:
        names = z.namelist()
        z.extractall(ag / "source")
    assert {"setup.sh", "run_autograder", "hidden/map_zip/test_hidden_map.py"} <= set(names)
    assert {n.split("/")[0] for n in names} == {"setup.sh", "run_autograder", "minitensor", "hidden"}
    assert not [n for n in names if n.startswith("minitensor/") and "test_hidden_map" in n]
    source = ag / "source" / "minitensor"
    assert load_manifest(source / "course/tasks.toml").ids() == AG_TASKS
    assert not [p for p in source.rglob("*") if p.is_file() and "test_a_hidden_map" in p.read_text(errors="replace")]
    assert "TODO (task softmax" in (source / "src/softmax.cu").read_text()

    # setup.sh's build step, on the build of this repository (a shortcut of this test: Gradescope
    # builds the whole handout once). A file of the handout that is this repository's, or differs
    # from it only by the task markers the handout takes out (comments), gets the repository's
    # time, so that make finds its objects up to date. So do the stubbed task files: their stubs
    # never run here, since the submission gives every one of them (checked below, and the grade
    # recompiles each file it takes), and that stubs compile and fail with their message is the
    # test of the handout of every task above.
    assert set(SUBMISSION) == {f for t in AG_TASKS for f in MANIFEST.task(t).files if f.startswith("src/")}
    for path in source.rglob("*"):
        name = path.relative_to(source).as_posix()
        if path.is_file() and (ROOT / name).is_file():
            solved = (ROOT / name).read_bytes()
            if path.suffix in (".cu", ".h", ".c", ".py") and find_regions(solved.decode(), name):
                solved = render(solved.decode(), name, set()).encode()
            if path.read_bytes() == solved or name in SUBMISSION:
                stamp = (ROOT / name).stat().st_mtime_ns
                os.utime(path, ns=(stamp, stamp))
    shutil.copytree(ROOT / "build", source / "build", symlinks=True, ignore=SCRATCH_IGNORE)
    _prepare(source)
    setup = (ag / "source" / "setup.sh").read_text()
    assert "\nmake autograder-build\n" in setup
    _make(source, "autograder-build")

    submission = ag / "submission" / "my-minitensor"
    for name, change in SUBMISSION.items():
        (submission / name).parent.mkdir(parents=True, exist_ok=True)
        (submission / name).write_text(_replace(name, *change) if change else (ROOT / name).read_text())

    env = {**_env_without_make(), "AUTOGRADER": str(ag), "TIMEOUT": str(AG_TIMEOUT), "BUDGET": str(AG_BUDGET)}
    code, log, seconds = run_process(["bash", str(ag / "source" / "run_autograder")], env, ag, AG_BOUND + 120)
    assert code is not None, f"run_autograder did not end within {AG_BOUND + 120} s:\n{log[-3000:]}"
    assert code == 0, log[-3000:]
    assert f"--timeout {AG_TIMEOUT}" in log and f"--budget {AG_BUDGET}" in log, log[-3000:]
    for name in SUBMISSION:  # every task file: none of the handout's objects is graded as it was built
        assert f"taken    {name} <- my-minitensor/{name}" in log, log[-3000:]
    results = json.loads((ag / "results" / "results.json").read_text())
    scores = _task_scores(results)
    assert set(scores) == set(AG_TASKS), log[-3000:]
    assert any(t["name"] == "map_zip: hidden: test_hidden_map.py" and t["score"] == t["max_score"]
               for t in results["tests"]), results["tests"]
    score, most, text = scores["map_zip"]
    assert score == most, f"map_zip, solved, loses points: {score} of {most}\n{text[-3000:]}"
    for task, what in (("ladder_rung", "race"), ("softmax", "stack"), ("matmul_tiled", "timed out")):
        score, most, text = scores[task]
        assert score <= most / 2, f"{task} keeps {score} of {most}\n{text[-3000:]}"
        assert what in text.lower(), f"{task}: its report does not say '{what}'\n{text[-3000:]}"
    # The endless loop: each hung item is cut at the item's limit (or sooner, where its task's share of
    # the budget runs out), and the grade goes on to the tasks after it and ends with its report.
    cuts = [int(n) for n in re.findall(r"timed out after (\d+) s", scores["matmul_tiled"][2])]
    assert cuts and max(cuts) <= AG_TIMEOUT, scores["matmul_tiled"][2][-3000:]
    assert seconds <= AG_BOUND, f"run_autograder took {seconds:.0f} s (bound {AG_BOUND} s)"
    # With the defaults of `make grade` such a grade ends too: no item outlives its task's share of
    # the budget, counted from the start of the build (tests/test_course_grade.py checks it).
    assert DEFAULT_BUDGET < AG_BOUND
