"""The course kit itself: task regions, course/tasks.toml, `make handout` and its stubs.

Fast checks first (the manifest against the sources, each stub declaring its
task, no solution text in a handout, solutions put back giving the solved
files byte for byte), then two that build:

- a handout of every task, built on the emulator: each task's C tests and
  pytest selections fail, with the message of the task or of a task it
  requires (course/tasks.toml's `requires`), and nothing crashes;
- the solved sources with one solution broken the way students break it
  (a barrier removed from matmul_tiled, the zero-fill at a tile edge
  dropped): the broken task's tests fail, and the other tasks' C tests and
  pytest selections pass.

The builds reuse what they can (the broken copies start from this
repository's build folder, so one object is recompiled), but the handout's
stubbed headers rebuild its whole library once: about a minute of CPU.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import emulator_buildable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

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


BREAKS = {
    "barrier": ("        /* Each thread is about to read a whole row of a_tile and column of\n"
                "         * b_tile, loaded by 2 * 32 other threads: all loads must be done. */\n"
                "        __syncthreads();\n", ""),
    "zero_fill": ("        a_tile[ty][tx] = (row < M && a_col < K) ? A.at(row, a_col) : T(0);\n",
                  "        if (row < M && a_col < K)\n            a_tile[ty][tx] = A.at(row, a_col);\n"),
}


def _failed_cases(output: str, program: str) -> list[str]:
    return [l.split(": ", 1)[1] for l in output.splitlines() if l.startswith(f"FAIL {program}: ")]


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
    shutil.copytree(ROOT / "build", copy / "build", symlinks=True, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("cuda", "cuda-check", "dist", "bench", "*cuda*.so"))
    _prepare(copy)
    return copy


@pytest.fixture
def solved(solved_copy: Path):
    """The solved copy and a record of the files a test changes in it; they are put back
    after the test (with a new time, so that make rebuilds what they touch)."""
    edits: dict[str, str] = {}
    yield solved_copy, edits
    for name in edits:
        shutil.copyfile(ROOT / name, solved_copy / name)
    if any(name.startswith("src/") for name in edits):
        _make(solved_copy, "emu", *[f"build/tests/emu/{p}" for p in _c_programs()])


def _apply(copy: Path, edits: dict[str, str], changes: dict[str, str]) -> None:
    """Writes the changed files and rebuilds what a C file among them touches."""
    edits.update(changes)
    for name, text in changes.items():
        (copy / name).write_text(text)
    if any(name.startswith("src/") for name in changes):
        _make(copy, "emu", *[f"build/tests/emu/{p}" for p in _c_programs()])


def _others_pass(copy: Path, task_id: str) -> None:
    """Every task but task_id keeps full marks, except that a task which requires task_id
    (course/tasks.toml) may fail cases, each of them naming task_id as not done."""
    for task in MANIFEST.tasks:
        if task.id == task_id:
            continue
        excused = task_id in requirements(task)
        for c in task.c_tests:
            result = _run_c(copy, task, c.program, c.filter)
            failed = _failed_cases(result.stdout, c.program)
            if excused and result.returncode == 1:
                assert message(task_id) in result.stdout, result.stdout[-1500:]
                continue
            assert result.returncode == 0, (f"{task.id} ({c.program} {c.filter or ''}) loses points to "
                                            f"{task_id}: {failed[:3] or result.stdout[-1500:]}")
        for p in task.pytest:
            result = _run_pytest(copy, task, p.args(), first_failure=False)
            failed = [l for l in result.stdout.splitlines() if l.startswith("FAILED ")]
            if excused and result.returncode == 1:
                assert failed and all(message(task_id) in l for l in failed), "\n".join(failed[:5])
                continue
            assert result.returncode == 0, f"{task.id} loses points to {task_id}:\n{result.stdout[-2000:]}"


@pytest.mark.parametrize("kind", sorted(BREAKS))
def test_a_broken_solution_fails_its_task_only(solved: tuple[Path, dict], kind: str) -> None:
    copy, edits = solved
    old, new = BREAKS[kind]
    text = (ROOT / "src/matmul_tiled.cu").read_text()
    assert text.count(old) == 1, f"the {kind} break no longer applies to src/matmul_tiled.cu"
    _apply(copy, edits, {"src/matmul_tiled.cu": text.replace(old, new)})

    broken = MANIFEST.task("matmul_tiled")
    failed = [f for c in broken.c_tests
              for f in _failed_cases(_run_c(copy, broken, c.program, c.filter).stdout, c.program)]
    assert failed, f"the {kind} break of matmul_tiled fails none of its C cases"
    for p in broken.pytest:
        if p.k:  # the whole-file selection is slow; the tiled rungs suffice
            assert _run_pytest(copy, broken, p.args(), first_failure=True).returncode == 1
    _others_pass(copy, broken.id)


# A CUDA task and a Python task; the stub of every task is built and run by
# test_a_stubbed_task_fails_with_its_message above.
@pytest.mark.parametrize("task_id", ["softmax", "autograd_rules"])
def test_a_handout_of_one_task_fails_that_task_only(solved: tuple[Path, dict], task_id: str) -> None:
    """The solved sources with one task stubbed, as `make handout TASKS=<task>` stubs it:
    its tests fail with its own message, and every other task keeps full marks."""
    copy, edits = solved
    task = MANIFEST.task(task_id)
    _apply(copy, edits, {f: render((ROOT / f).read_text(), f, {task_id}) for f in task.region_files()})
    for c in task.c_tests:
        result = _run_c(copy, task, c.program, c.filter)
        assert result.returncode == 1 and message(task_id) in result.stdout, result.stdout[-2000:]
    for p in task.pytest:
        result = _run_pytest(copy, task, p.args(), first_failure=True)
        assert result.returncode == 1 and message(task_id) in result.stdout, result.stdout[-2000:]
    _others_pass(copy, task_id)
