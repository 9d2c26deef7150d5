"""The autograder: runs each task's tests, each in its own process, and scores them.

    python tools/course.py grade [--tasks a,b] [--hidden DIR] [--out DIR] [--backend B]

For every task of course/tasks.toml (or those of ``--tasks``), each test item
(one C program with its filter, or one pytest selection) runs in a process of
its own, under the task's kernel policy (``MINITENSOR_KERNELS``) and a time
limit, so that a student kernel that crashes or hangs costs its own task
only. A C program is read through the ``N passed, M failed`` line it prints
last; a pytest selection through tools/course_pytest_plugin.py's log, which
survives a crash: after one, the grader names the test that was running and
the signal, and reruns the rest of the selection without it.

Scoring: each test item of a task is worth an equal share of the task's
points, and earns the fraction of its cases that passed (skipped cases do not
count). An item that ran no case, crashed before its summary, or did not
build, earns 0, and so does one whose output says that a task is not done
(a stub still in its path, its own task's or a required one's: the few cases
a stub passes, such as the rejection of bad arguments, earn nothing). The report (tools/course_report.py) is a table on stdout,
``results.json`` in Gradescope's format and ``junit.xml``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from course_manifest import CTest, Manifest, ManifestError, PyTest, Task, load_manifest, parse_task

SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.MULTILINE)
MAX_OUTPUT = 6000        # characters of a test item's output kept in the report
PYTEST_RESTARTS = 4      # reruns of a pytest selection after crashes, before the rest counts as failed
PYTEST_STOPPED = {2: "interrupted: errors during collection", 3: "internal error", 4: "usage error"}


@dataclass
class ItemResult:
    """The outcome of one test item: counts of cases, and what a student should read."""

    task: str
    name: str
    passed: int = 0
    failed: int = 0
    error: str | None = None  # a crash, a timeout, a build failure: why the item is not fully counted
    output: str = ""
    seconds: float = 0.0

    @property
    def stubbed(self) -> bool:
        """Whether a case stopped at a stub ("task <id> is not done"): this task's, or that of a
        task it requires (in a handout of every task, each op first stops at indexing's)."""
        return re.search(r"\btask [a-z][a-z0-9_]* is not done\b", self.output) is not None

    @property
    def fraction(self) -> float:
        """The share of the item's points it earns: none while the task's stub is in place."""
        cases = self.passed + self.failed
        return self.passed / cases if cases and not self.stubbed else 0.0


@dataclass
class TaskResult:
    task: Task
    items: list[ItemResult] = field(default_factory=list)

    @property
    def score(self) -> float:
        if not self.items:
            return 0.0
        return self.task.points * sum(item.fraction for item in self.items) / len(self.items)


@dataclass
class Run:
    """What every item of one grading run shares."""

    root: Path
    backend: str     # "emulator" or "cuda"
    timeout: float   # seconds per process
    built: dict[str, bool] = field(default_factory=dict)  # make target -> up to date after the build
    build_log: str = ""

    @property
    def lib(self) -> str:
        return "build/libminitensor_emu.so" if self.backend == "emulator" else "build/libminitensor_cuda.so"

    def program(self, name: str) -> str:
        return f"build/tests/{'emu' if self.backend == 'emulator' else 'cuda'}/{name}"


def signal_name(returncode: int) -> str:
    """'SIGSEGV (segmentation fault)' for a process killed by a signal (returncode -11)."""
    try:
        sig = signal.Signals(-returncode)
        return f"{sig.name} ({signal.strsignal(sig).lower()})"
    except ValueError:
        return f"signal {-returncode}"


def run_process(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float) -> tuple[int | None, str, float]:
    """Runs cmd in a session of its own; (returncode or None on timeout, stdout+stderr, seconds).
    On timeout the whole process group is killed, so nothing it started outlives it."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        code = None
    return code, out.decode("utf-8", "replace"), time.monotonic() - start


def clip(text: str, limit: int = MAX_OUTPUT) -> str:
    """The start and the end of a long output, with the cut said."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... ({len(text) - limit} characters cut) ...\n{text[-half:]}"


def base_env(run: Run, policy: str) -> dict[str, str]:
    """The environment of every test process: the task's kernel policy and the backend.
    make's variables are dropped, so that no test inherits the grader's make."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["MINITENSOR_KERNELS"] = policy
    env["MINITENSOR_BACKEND"] = run.backend
    env["CI"] = "true"  # hypothesis derandomized: the same grade on every run
    return env


# ---- building ------------------------------------------------------------------------------------

def build(run: Run, targets: list[str]) -> None:
    """make -k every target; then asks make which of them are up to date, so that a library whose
    new source failed to compile is not graded in its old, stale form."""
    env = base_env(run, "fast")
    for key in ("MINITENSOR_KERNELS", "MINITENSOR_BACKEND", "CI"):
        env.pop(key)
    code, out, _ = run_process(["make", "--no-print-directory", "-k", *targets], env, run.root, 3600)
    run.build_log = out
    for target in targets:
        if code == 0:
            run.built[target] = True
        else:
            check, _, _ = run_process(["make", "-q", target], env, run.root, 600)
            run.built[target] = check == 0 and (run.root / target).exists()


def build_failure(run: Run, target: str) -> str | None:
    """Why a target cannot be used, with the compiler's messages; None when it built."""
    if run.built.get(target, False):
        return None
    errors = [line for line in run.build_log.splitlines() if "error" in line.lower()]
    return (f"build failed: `make {target}` did not succeed, so these tests could not run.\n"
            + clip("\n".join(errors[:40]) or run.build_log, 3000))


# ---- C programs ----------------------------------------------------------------------------------

def c_item_name(test: CTest) -> str:
    return f"{test.program}" + (f" [{test.filter}]" if test.filter else "")


def run_c(run: Run, task: Task, test: CTest) -> ItemResult:
    """One C test program under the task's policy; the counts come from its last summary line."""
    result = ItemResult(task.id, c_item_name(test))
    program = run.program(test.program)
    failure = build_failure(run, program) or build_failure(run, run.lib)
    if not failure and not (run.root / program).exists():
        failure = f"build failed: {program} was not built, so these tests could not run.\n" + clip(run.build_log, 3000)
    if failure:
        result.failed, result.error, result.output = 1, "build failed", failure
        return result
    env = base_env(run, task.policy)
    if test.filter:
        env["MT_TEST_FILTER"] = test.filter
    if run.backend == "emulator":
        env["MINITENSOR_EMU_CHECK"] = "full"  # as make test-c: shared-memory races and bounds
    code, out, result.seconds = run_process([str(run.root / program)], env, run.root, run.timeout)
    counts = SUMMARY.findall(out)
    if counts:
        result.passed, result.failed = int(counts[-1][0]), int(counts[-1][1])
    if code is None:
        result.error = f"timed out after {run.timeout:.0f} s (an endless loop, or a barrier that never opens?)"
    elif code < 0:
        result.error = f"crashed: {signal_name(code)}"
    elif not counts:
        result.error = f"exit status {code} without a summary line"
    elif code != 0 and result.failed == 0:
        result.error = f"exit status {code}"
    elif result.passed + result.failed == 0:
        result.error = "no case ran (does the filter match any case?)"
    if result.error and result.failed == 0:
        result.failed = 1
    failures = [line for line in out.splitlines() if not SUMMARY.match(line)]
    head = f"{test.program}: {result.passed} passed, {result.failed} failed" + (
        f"; {result.error}" if result.error else "")
    result.output = head + ("\n" + clip("\n".join(failures)) if result.error or result.failed else "")
    return result


# ---- pytest selections ---------------------------------------------------------------------------

def py_item_name(test: PyTest) -> str:
    return f"{test.path}" + (f" -k '{test.k}'" if test.k else "")


def read_log(path: Path) -> tuple[list[str] | None, list[str], dict[str, tuple[str, str]]]:
    """(collected node ids or None, started node ids, node id -> (outcome, text)) of a plugin log.
    A test's outcome is its worst report: failed over skipped over passed."""
    collected, started, outcomes = None, [], {}
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    if not path.exists():
        return collected, started, outcomes
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by the crash
        if "collected" in record:
            collected = (collected or []) + record["collected"]
        elif "start" in record:
            started.append(record["start"])
        elif "nodeid" in record:
            old = outcomes.get(record["nodeid"])
            if old is None or rank[record["outcome"]] > rank[old[0]]:
                outcomes[record["nodeid"]] = (record["outcome"], record["text"])
    return collected, started, outcomes


def crash_report(out: str) -> str:
    """What a crashed pytest printed last, without the frames of pytest itself (faulthandler's
    traceback lists them all): the library's message and the test's own lines."""
    keep = [line for line in out.splitlines()
            if "site-packages" not in line and "<frozen" not in line and not line.startswith("Extension modules")]
    return clip("\n".join(keep[-40:]), 2500)


def pytest_command(run: Run, test: PyTest, hidden: bool) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "--tb=short", "-p", "course_pytest_plugin", "-p", "no:cacheprovider",
           "--rootdir", str(run.root), "-c", str(run.root / "pytest.ini")]
    if hidden:
        cmd += ["-p", "conftest"]  # tests/conftest.py (hypothesis profile, gpu marks) for files outside tests/
    cmd.append(test.path)
    if test.k:
        cmd += ["-k", test.k]
    return cmd


def run_pytest(run: Run, task: Task, test: PyTest, hidden: bool = False) -> ItemResult:
    """One pytest selection under the task's policy; reruns the rest of it after a crash.
    A hidden file is named by its file name only (its folder is the instructor's)."""
    result = ItemResult(task.id, f"hidden: {Path(test.path).name}" if hidden else py_item_name(test))
    failure = build_failure(run, run.lib)
    if failure:
        result.failed, result.error, result.output = 1, "build failed", failure
        return result
    env = base_env(run, task.policy)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(run.root / "tools"), str(run.root / "tests"), str(run.root), env.get("PYTHONPATH", "")])
    notes, tail = [], ""
    with tempfile.TemporaryDirectory(prefix="mt-grade-") as tmp:
        log, skip = Path(tmp) / "log.jsonl", Path(tmp) / "done.txt"
        env["MT_GRADE_LOG"], env["MT_GRADE_SKIP"] = str(log), str(skip)
        collected: list[str] | None = None
        outcomes: dict[str, tuple[str, str]] = {}
        for _ in range(PYTEST_RESTARTS + 1):
            log.unlink(missing_ok=True)
            code, out, seconds = run_process(pytest_command(run, test, hidden), env, run.root, run.timeout)
            result.seconds += seconds
            tail = out
            got, started, new = read_log(log)
            if collected is None:
                collected = got
            outcomes.update(new)
            if code is not None and code >= 0:
                if code in PYTEST_STOPPED:  # ended by itself, but not after running the selection
                    notes.append(f"pytest ended with exit status {code} ({PYTEST_STOPPED[code]})")
                break
            why = f"timed out after {run.timeout:.0f} s" if code is None else f"crashed: {signal_name(code)}"
            running = [n for n in started if n not in new]
            if running:
                outcomes[running[-1]] = ("failed", f"{why} while this test ran\n{crash_report(out)}")
                notes.append(f"{running[-1]}: {why}")
            else:
                notes.append(f"the pytest process {why} outside any test")
            remaining = [n for n in (collected or []) if n not in outcomes]
            if not remaining or not running:
                break
            skip.write_text("\n".join(outcomes) + "\n", encoding="utf-8")
        for node in collected or []:
            if node not in outcomes:
                outcomes[node] = ("failed", "not run: the pytest process ended before it (see the notes)")
    if hidden:  # node ids of a file outside the repository start with '::'; name the file
        outcomes = {(Path(test.path).name + n if n.startswith("::") else n): v for n, v in outcomes.items()}
        notes = [Path(test.path).name + n if n.startswith("::") else n for n in notes]
    result.passed = sum(1 for o, _ in outcomes.values() if o == "passed")
    result.failed = sum(1 for o, _ in outcomes.values() if o == "failed")
    result.error = "; ".join(notes) or None
    if result.passed + result.failed == 0:  # nothing ran: that is a failure, never a vacuous pass
        result.error = result.error or "no test ran: the selection matched nothing, or collection failed"
        result.failed = 1
    lines = [f"{result.name}: {result.passed} passed, {result.failed} failed"] + notes
    lines += [f"FAILED {node}\n{text}" for node, (o, text) in outcomes.items() if o == "failed"]
    if result.error and (not notes or any(n.startswith("pytest ended") for n in notes)):
        lines.append(clip(tail, 3000))  # what pytest said about a collection or usage error
    result.output = clip("\n".join(lines))
    return result


# ---- hidden tests --------------------------------------------------------------------------------

def add_hidden(manifest: Manifest, hidden: Path) -> dict[str, list[PyTest]]:
    """The instructor's extra tests. HIDDEN/tasks.toml may add c_tests and pytest entries to a task
    of the manifest (a table with its id and only those keys) or add whole tasks (every key);
    HIDDEN/<task id>/test_*.py are pytest files of that task. Returns those files per task."""
    if not hidden.is_dir():
        raise ManifestError(f"--hidden {hidden}: not a directory")
    extra = hidden / "tasks.toml"
    if extra.exists():
        for number, table in enumerate(tomllib.loads(extra.read_text()).get("task", []), start=1):
            where = f"{extra}: task {number}"
            if table.get("id") in manifest.ids():
                unknown = set(table) - {"id", "c_tests", "pytest"}
                if unknown:
                    raise ManifestError(f"{where}: a hidden table for an existing task may only add "
                                        f"c_tests and pytest, not {sorted(unknown)}")
                task = manifest.task(table["id"])
                merged = parse_task({**task.__dict__, "c_tests": [], "pytest": [], **table}, where)
                task.c_tests += merged.c_tests
                task.pytest += merged.pytest
            else:
                manifest.tasks.append(parse_task(table, where))
    files: dict[str, list[PyTest]] = {}
    for folder in sorted(p for p in hidden.iterdir() if p.is_dir()):
        if folder.name not in manifest.ids():
            raise ManifestError(f"{folder}: no task {folder.name!r} in the manifest "
                                f"(hidden test folders are named by task id: {', '.join(manifest.ids())})")
        files[folder.name] = [PyTest(str(p.resolve())) for p in sorted(folder.glob("test_*.py"))]
    return files


# ---- the whole run -------------------------------------------------------------------------------

def default_backend() -> str:
    """cuda where the Makefile builds the CUDA library by default (nvcc is found and a GPU answers
    nvidia-smi -L), else the emulator."""
    nvcc = shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").is_file()
    if not nvcc or shutil.which("nvidia-smi") is None:
        return "emulator"
    ok = subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    return "cuda" if ok else "emulator"


def grade(root: Path, task_ids: list[str] | None = None, hidden: Path | None = None,
          backend: str | None = None, timeout: float = 600.0, policy: str | None = None,
          log: Callable[[str], None] = print) -> list[TaskResult]:
    """Builds what the chosen tasks need, runs their tests, and returns the results, task by task.
    `policy` runs every task under that kernel policy instead of its own (to check a build)."""
    manifest = load_manifest(root / "course" / "tasks.toml")
    hidden_files = add_hidden(manifest, hidden) if hidden else {}
    tasks = manifest.tasks if not task_ids else [manifest.task(t) for t in task_ids]
    if policy:
        tasks = [replace(task, policy=policy) for task in tasks]
    for task in tasks:
        if not task.c_tests and not task.pytest and not hidden_files.get(task.id):
            raise ManifestError(f"task {task.id!r} has no test to run (c_tests, pytest or hidden files)")
    run = Run(root=root, backend=backend or default_backend(), timeout=timeout)
    programs = sorted({run.program(t.program) for task in tasks for t in task.c_tests})
    log(f"grade: {len(tasks)} tasks on the {run.backend} backend"
        f"{f', every one under the {policy} policy' if policy else ''}; building {run.lib} and "
        f"{len(programs)} C test programs")
    build(run, [run.lib, *programs])
    results = []
    for task in tasks:
        result = TaskResult(task)
        for test in task.c_tests:
            result.items.append(run_c(run, task, test))
            log(f"  {task.id}: {result.items[-1].output.splitlines()[0]}")
        for test in task.pytest:
            result.items.append(run_pytest(run, task, test))
            log(f"  {task.id}: {result.items[-1].output.splitlines()[0]}")
        for test in hidden_files.get(task.id, []):
            result.items.append(run_pytest(run, task, test, hidden=True))
            log(f"  {task.id}: {result.items[-1].output.splitlines()[0]}")
        results.append(result)
    return results
