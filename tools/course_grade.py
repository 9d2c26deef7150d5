"""The autograder: runs each task's tests, each in its own process, and scores them.

    python tools/course.py grade [--tasks a,b] [--hidden DIR] [--out DIR] [--backend B]
                                 [--timeout S] [--budget S]

For every task of course/tasks.toml (or those of ``--tasks``), each test item
(one C program with its filter, or one pytest selection) runs in a process of
its own, under the task's kernel policy (``MINITENSOR_KERNELS``), the
emulator's full checks (``MINITENSOR_EMU_CHECK=full``: bounds and races, for
the C programs and the pytest selections alike) and hypothesis's grading
profile (tests/conftest.py: derandomized, no shrinking), so that a student
kernel that crashes or hangs costs its own task only, and the same
submission gets the same score on every run.

Time: each item has a limit (``--timeout``, default DEFAULT_TIMEOUT) that
covers its reruns too, and the whole grade a budget (``--budget``, default
DEFAULT_BUDGET) counted from the start of the build. Each task in turn may use
an equal share of what is left of the budget (what a fast task leaves goes to
the tasks after it), so that a task that hangs cannot starve the others: an
item its task's share does not reach scores 0 with a message saying so, and
the reports are always written. A timed-out item is not rerun: the cases it
did not run count as failed.

A C program is read through the lines its harness prints per group
(``MT_TEST_GROUP_LINES=1``, tests/c/tt_groups.h) and its last
``N passed, M failed`` line; a group that crashed or hung counts all the
cases it did not finish as failed, the number taken from course/c_cases.json
(the cases each group of each C item has in the solved repository, written
by ``course.py cases``). A pytest selection is read through
tools/course_pytest_plugin.py's log, which survives a crash: after one, the
grader names the test that was running and the signal, and reruns the rest of
the selection without it, while the item's time lasts. An item ends at the
first memory error or race the emulator reports (a line of a C program's
output, a failed test of a pytest selection: tools/course_memory_errors.py),
since it scores 0 from there on.

Scoring: each test item of a task is worth an equal share of the task's
points, and earns the fraction of its cases that passed (skipped cases do not
count). An item that ran no case, crashed, did not build, or met a memory error or a race
(tools/course_memory_errors.py) earns 0, and so does one while a task it depends on is not done: its
own task or one its task ``requires`` (a stub still in place, found in the
task's files before anything runs, or a "task <id> is not done" message in
the item's output). The tests of a task whose regions are all still stubs,
or that requires a task that is a stub, do not run; their report starts with
the stubs' own messages. A "not done" message of any other task does not
zero an item (the manifest's tasks are isolated: tests/test_course_grade.py).
The report (tools/course_report.py) is a table on stdout, ``results.json``
in Gradescope's format and ``junit.xml``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from course_manifest import CTest, Manifest, ManifestError, PyTest, Task, load_manifest, parse_task
from course_memory_errors import STOP_ENV, first_memory_error, is_memory_error, memory_error_note
from course_process import run_process, run_watched, signal_name
from course_regions import handout_spans, stub_messages

SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$", re.MULTILINE)
GROUP_LINE = re.compile(r"^group\t(ok|crashed|timed out|exited)\t(\d+)\t(\d+)\t(.*)$", re.MULTILINE)
NOT_DONE = re.compile(r"\btask ([a-z][a-z0-9_]*) is not done\b")
MAX_OUTPUT = 6000        # characters of a test item's output kept in the report
PYTEST_RESTARTS = 4      # reruns of a pytest selection after crashes, while the item's time lasts
# Chosen from the solved repository's times on 2 cores (docs/coursework.md, "Time limits").
DEFAULT_TIMEOUT = 60.0   # seconds per test item (its reruns included)
DEFAULT_BUDGET = 270.0   # seconds for the whole grade, the build included
CASES_FILE = "course/c_cases.json"
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
    # The tasks whose stub zeroes this item: its own and those its task requires.
    depends: frozenset[str] = frozenset()
    memory_error: str | None = None  # the first memory error or race the emulator reported, if any

    @property
    def stubbed(self) -> bool:
        """Whether a case stopped at the stub ("task <id> is not done") of this item's task or of a
        task it requires; a stub of any other task is an ordinary failure of the cases it reached."""
        return any(m in self.depends for m in NOT_DONE.findall(self.output))

    @property
    def fraction(self) -> float:
        """The share of the item's points it earns: none while the task's stub is in place, nor
        when a case met a memory error or a race (MEMORY_ERROR)."""
        cases = self.passed + self.failed
        return self.passed / cases if cases and not self.stubbed and not self.memory_error else 0.0


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
    timeout: float   # seconds per test item
    # time.monotonic() by which the running task's items must end: its share of the budget (grade())
    deadline: float = float("inf")
    budget: float = float("inf")
    built: dict[str, bool] = field(default_factory=dict)  # make target -> up to date after the build
    build_log: str = ""
    cases: dict[str, dict[str, int]] = field(default_factory=dict)  # C item -> group -> planned cases
    warnings: list[str] = field(default_factory=list)

    def limit(self) -> float:
        """The seconds the next item may run: its limit, or what is left of its task's share of the budget."""
        return max(0.0, min(self.timeout, self.deadline - time.monotonic()))

    def spent(self) -> bool:
        """Whether the task's share of the budget is spent (less than a second left)."""
        return self.deadline - time.monotonic() < 1.0

    @property
    def lib(self) -> str:
        return "build/libminitensor_emu.so" if self.backend == "emulator" else "build/libminitensor_cuda.so"

    def program(self, name: str) -> str:
        return f"build/tests/{'emu' if self.backend == 'emulator' else 'cuda'}/{name}"


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
    env["CI"] = "true"
    env["MINITENSOR_HYPOTHESIS"] = "grading"  # tests/conftest.py: derandomized, no shrinking
    if run.backend == "emulator":
        env["MINITENSOR_EMU_CHECK"] = "full"  # bounds and races, in every item (as make test-c)
    return env


def not_reached(task: Task, name: str, run: Run) -> ItemResult:
    """An item the budget did not reach: 0, saying why."""
    why = (f"not run: this task's share of the grade's time budget ({run.budget:.0f} s in all, --budget / "
           f"BUDGET=) was spent before this item")
    return ItemResult(task.id, name, failed=1, error=why, output=f"{name}: {why}",
                      depends=frozenset([task.id, *task.requires]))


# ---- building ------------------------------------------------------------------------------------

def build(run: Run, targets: list[str]) -> None:
    """make -k every target; then asks make which of them are up to date, so that a library whose
    new source failed to compile is not graded in its old, stale form."""
    env = base_env(run, "fast")
    for key in ("MINITENSOR_KERNELS", "MINITENSOR_BACKEND", "CI"):
        env.pop(key)
    code, out, _ = run_process(["make", "--no-print-directory", "-k", *targets], env, run.root,
                               max(1.0, min(run.deadline - time.monotonic(), 3600.0)))
    run.build_log = out if code is not None else out + "\nthe build ran out of the grade's time budget"
    for target in targets:
        if code == 0:
            run.built[target] = True
        else:
            check, _, _ = run_process(["make", "-q", target], env, run.root, 60)
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


def count_groups(out: str, planned: dict[str, int] | None) -> tuple[int, int, list[str]]:
    """(passed, failed, notes) of a C item from its group lines (MT_TEST_GROUP_LINES). A group that
    crashed, hung or exited counts the cases it did not finish as failed (at least one): its
    planned count from course/c_cases.json less those it finished; a planned group with no line
    (the program ended before it, or while it ran) counts all its planned cases as failed."""
    passed = failed = 0
    notes, seen = [], set()
    for status, p, f, name in GROUP_LINE.findall(out):
        p, f = int(p), int(f)
        seen.add(name)
        passed += p
        if status == "ok":
            failed += f
            continue
        plan = (planned or {}).get(name)
        lost = max(plan - p - f, 1) if plan is not None else 1
        failed += f + lost
        notes.append(f"group '{name}' {status}: {p} passed, {f} failed, and {lost} case(s) it did not finish "
                     f"counted as failed" + ("" if plan is not None else " (its planned count is unknown)"))
    for name, plan in (planned or {}).items():
        if name not in seen:
            failed += plan
            notes.append(f"group '{name}' did not finish: its {plan} cases counted as failed")
    return passed, failed, notes


def run_c(run: Run, task: Task, test: CTest) -> ItemResult:
    """One C test program under the task's policy, counted group by group (count_groups)."""
    result = ItemResult(task.id, c_item_name(test), depends=frozenset([task.id, *task.requires]))
    program = run.program(test.program)
    failure = build_failure(run, program) or build_failure(run, run.lib)
    if not failure and not (run.root / program).exists():
        failure = f"build failed: {program} was not built, so these tests could not run.\n" + clip(run.build_log, 3000)
    if failure:
        result.failed, result.error, result.output = 1, "build failed", failure
        return result
    if run.spent():
        return not_reached(task, result.name, run)
    limit = run.limit()
    env = base_env(run, task.policy)
    env["MT_TEST_GROUP_LINES"] = "1"
    env["MT_TEST_TIMEOUT"] = str(max(1, int(limit)))  # no group outlives the item
    if test.filter:
        env["MT_TEST_FILTER"] = test.filter
    # Stopped at the first memory error or race reported (the item scores 0 from there on).
    code, out, result.seconds, stopped = run_watched([str(run.root / program)], env, run.root, limit,
                                                     is_memory_error)
    planned = run.cases.get(result.name)
    counts = SUMMARY.findall(out)
    groups = GROUP_LINE.findall(out)
    notes: list[str] = []
    if groups or planned:
        result.passed, result.failed, notes = count_groups(out, planned)
        if counts:  # failures outside any group: a filter that matched nothing, a fork that failed
            in_groups = sum(int(f) + (st != "ok") for st, _, f, _ in groups)
            result.failed += max(int(counts[-1][1]) - in_groups, 0)
        for status, p, f, name in groups:
            if planned and status == "ok" and name in planned and int(p) + int(f) != planned[name]:
                run.warnings.append(f"{result.name}: group '{name}' ran {int(p) + int(f)} cases, "
                                    f"{CASES_FILE} plans {planned[name]} (python tools/course.py cases)")
    elif counts:
        result.passed, result.failed = int(counts[-1][0]), int(counts[-1][1])
    if (code is None or code < 0) and groups and not planned:
        result.failed += 1  # the group that was running when the program ended, its count unknown
    if stopped:
        result.error = (f"stopped after {result.seconds:.0f} s, at the first memory error or race the emulator "
                        "reported (the cases after it would not change the item's 0)")
    elif code is None:
        result.error = (f"timed out after {limit:.0f} s (an endless loop, or a barrier that never opens?)"
                        + ("" if limit >= run.timeout else "; its task's share of the time budget was running out"))
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
    failures = [line for line in out.splitlines() if not SUMMARY.match(line) and not GROUP_LINE.match(line)]
    result.memory_error = first_memory_error(out)
    head = f"{test.program}: {result.passed} passed, {result.failed} failed" + (
        f"; {result.error}" if result.error else "") + memory_error_note(result)
    body = notes + failures
    result.output = head + ("\n" + clip("\n".join(body)) if result.error or result.failed else "")
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
    result = ItemResult(task.id, f"hidden: {Path(test.path).name}" if hidden else py_item_name(test),
                        depends=frozenset([task.id, *task.requires]))
    failure = build_failure(run, run.lib)
    if failure:
        result.failed, result.error, result.output = 1, "build failed", failure
        return result
    if run.spent():
        return not_reached(task, result.name, run)
    start = time.monotonic()
    ends = start + run.limit()  # the item's reruns share its limit
    env = base_env(run, task.policy)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(run.root / "tools"), str(run.root / "tests"), str(run.root), env.get("PYTHONPATH", "")])
    notes, tail = [], ""
    with tempfile.TemporaryDirectory(prefix="mt-grade-") as tmp:
        log, skip = Path(tmp) / "log.jsonl", Path(tmp) / "done.txt"
        env["MT_GRADE_LOG"], env["MT_GRADE_SKIP"] = str(log), str(skip)
        env[STOP_ENV] = "1"  # the plugin ends the selection at the first memory error or race
        collected: list[str] | None = None
        outcomes: dict[str, tuple[str, str]] = {}
        for _ in range(PYTEST_RESTARTS + 1):
            log.unlink(missing_ok=True)
            limit = ends - time.monotonic()
            code, out, seconds = run_process(pytest_command(run, test, hidden), env, run.root, limit)
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
            why = (f"timed out: the item's {ends - start:.0f} s ran out" if code is None
                   else f"crashed: {signal_name(code)}")
            running = [n for n in started if n not in new]
            if running:
                outcomes[running[-1]] = ("failed", f"{why} while this test ran\n{crash_report(out)}")
                notes.append(f"{running[-1]}: {why}")
            else:
                notes.append(f"the pytest process {why} outside any test")
            remaining = [n for n in (collected or []) if n not in outcomes]
            if code is None or not remaining or not running or ends - time.monotonic() < 1.0:
                break  # a timeout ends the item: no rerun
            skip.write_text("\n".join(outcomes) + "\n", encoding="utf-8")
        memory_error = first_memory_error("\n".join(text for o, text in outcomes.values() if o == "failed"))
        unrun = [node for node in collected or [] if node not in outcomes]
        if memory_error and unrun:  # the plugin stopped the selection there (STOP_ENV)
            notes.append(f"stopped at the first memory error or race the emulator reported: {len(unrun)} "
                         "test(s) not run (they would not change the item's 0)")
        why = ("the item stopped at the first memory error or race" if memory_error
               else "the pytest process ended before it (see the notes)")
        for node in unrun:
            outcomes[node] = ("failed", f"not run: {why}")
    if hidden:  # node ids of a file outside the repository start with '::'; name the file
        outcomes = {(Path(test.path).name + n if n.startswith("::") else n): v for n, v in outcomes.items()}
        notes = [Path(test.path).name + n if n.startswith("::") else n for n in notes]
    result.passed = sum(1 for o, _ in outcomes.values() if o == "passed")
    result.failed = sum(1 for o, _ in outcomes.values() if o == "failed")
    result.error = "; ".join(notes) or None
    if result.passed + result.failed == 0:  # nothing ran: that is a failure, never a vacuous pass
        result.error = result.error or "no test ran: the selection matched nothing, or collection failed"
        result.failed = 1
    result.memory_error = first_memory_error("\n".join(text for o, text in outcomes.values() if o == "failed"))
    lines = [f"{result.name}: {result.passed} passed, {result.failed} failed{memory_error_note(result)}"] + notes
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


def stubs(root: Path, manifest: Manifest) -> dict[str, tuple[list[str], bool]]:
    """Task id -> (the messages of its regions that are still stubs, whether all of them are), read
    from the task's files before anything runs. A region is still a stub while it declares
    MT_TASK_MISSING(<id>, ...) (C) or raises NotImplementedError("task <id> is not done: ...")
    (Python) on a line of its own; tasks with no stub left are not in the result."""
    found: dict[str, tuple[list[str], bool]] = {}
    for task in manifest.tasks:
        messages, regions, stubbed = [], 0, 0
        for name in task.files:
            path = root / name
            text = path.read_text(errors="replace") if path.is_file() else ""
            lines = text.splitlines()
            for region_task, begin, end in handout_spans(text):
                if region_task != task.id:
                    continue
                regions += 1
                body = "\n".join(lines[begin + 1:end])
                found_here = stub_messages(body, task.id)
                stubbed += bool(found_here)
                messages += found_here
        if messages:
            found[task.id] = (list(dict.fromkeys(messages)), stubbed == regions)
    return found


def stub_item(task: Task, name: str, stubbed: dict[str, tuple[list[str], bool]]) -> ItemResult:
    """An item that does not run because its task's regions, or a required task's, are all stubs:
    0, its report starting with the stubs' messages, its own task's first."""
    lines = list(stubbed.get(task.id, ([], False))[0])
    for other in task.requires:
        if other in stubbed:
            lines += [f"{m} (task {task.id} requires {other})" for m in stubbed[other][0]]
    why = "not run: a task it depends on is still a stub"
    return ItemResult(task.id, name, failed=1, error=why, output="\n".join(lines + [f"{name}: {why}"]),
                      depends=frozenset([task.id, *task.requires]))


def load_cases(root: Path) -> dict[str, dict[str, int]]:
    """course/c_cases.json: C item name -> group -> the cases it has in the solved repository."""
    path = root / CASES_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def grade(root: Path, task_ids: list[str] | None = None, hidden: Path | None = None,
          backend: str | None = None, timeout: float = DEFAULT_TIMEOUT, policy: str | None = None,
          log: Callable[[str], None] = print, budget: float = DEFAULT_BUDGET) -> list[TaskResult]:
    """Builds what the chosen tasks need, runs their tests, and returns the results, task by task.
    `policy` runs every task under that kernel policy instead of its own (to check a build);
    `timeout` limits each item, `budget` the whole grade (the build included)."""
    start = time.monotonic()
    manifest = load_manifest(root / "course" / "tasks.toml")
    hidden_files = add_hidden(manifest, hidden) if hidden else {}
    tasks = manifest.tasks if not task_ids else [manifest.task(t) for t in task_ids]
    if policy:
        tasks = [replace(task, policy=policy) for task in tasks]
    for task in tasks:
        if not task.c_tests and not task.pytest and not hidden_files.get(task.id):
            raise ManifestError(f"task {task.id!r} has no test to run (c_tests, pytest or hidden files)")
    end = start + budget
    run = Run(root=root, backend=backend or default_backend(), timeout=timeout,
              deadline=end, budget=budget, cases=load_cases(root))
    stubbed = stubs(root, manifest)
    programs = sorted({run.program(t.program) for task in tasks for t in task.c_tests})
    log(f"grade: {len(tasks)} tasks on the {run.backend} backend"
        f"{f', every one under the {policy} policy' if policy else ''}; {timeout:.0f} s per item, "
        f"{budget:.0f} s in all; building {run.lib} and {len(programs)} C test programs")
    build(run, [run.lib, *programs])
    results = []
    for number, task in enumerate(tasks):
        now = time.monotonic()
        run.deadline = now + max(end - now, 0.0) / (len(tasks) - number)  # its share of what is left
        result = TaskResult(task)
        items: list[tuple[str, Callable[[], ItemResult]]] = []
        for c in task.c_tests:
            items.append((c_item_name(c), lambda c=c: run_c(run, task, c)))
        for t in task.pytest:
            items.append((py_item_name(t), lambda t=t: run_pytest(run, task, t)))
        for t in hidden_files.get(task.id, []):
            items.append((f"hidden: {Path(t.path).name}", lambda t=t: run_pytest(run, task, t, hidden=True)))
        own = stubbed.get(task.id)
        blocked = (own is not None and own[1]) or any(r in stubbed for r in task.requires)
        for name, run_item in items:
            item = stub_item(task, name, stubbed) if blocked else run_item()
            if own and not blocked:  # some regions done: the tests ran; the stubs' messages first
                item.output = "\n".join(own[0]) + "\n" + item.output
            result.items.append(item)
            log(f"  {task.id}: {item.output.splitlines()[0]}")
        results.append(result)
    for warning in run.warnings:
        log(f"grade: warning: {warning}")
    return results


def count_cases(root: Path, backend: str | None = None, log: Callable[[str], None] = print) -> Path:
    """Runs every C item of the manifest in this (solved) repository and writes CASES_FILE: the
    cases of each group of each item, which the grader counts as failed when a student's crash or
    hang ends the group early. Raises RuntimeError if an item fails or crashes here."""
    manifest = load_manifest(root / "course" / "tasks.toml")
    run = Run(root=root, backend=backend or default_backend(), timeout=3600.0)
    tests = {c_item_name(c): (task, c) for task in manifest.tasks for c in task.c_tests}
    build(run, [run.lib, *sorted({run.program(c.program) for _, c in tests.values()})])
    cases: dict[str, dict[str, int]] = {}
    for name, (task, test) in sorted(tests.items()):
        env = base_env(run, task.policy)
        env["MT_TEST_GROUP_LINES"] = "1"
        if test.filter:
            env["MT_TEST_FILTER"] = test.filter
        code, out, seconds = run_process([str(root / run.program(test.program))], env, root, run.timeout)
        groups = GROUP_LINE.findall(out)
        if code != 0 or not groups or any(status != "ok" or int(f) for status, _, f, _ in groups):
            raise RuntimeError(f"{name}: did not pass in this repository (exit status {code}):\n{clip(out, 3000)}")
        cases[name] = {group: int(p) for _, p, _, group in groups}
        log(f"cases: {name}: {len(groups)} groups, {sum(cases[name].values())} cases, {seconds:.1f} s")
    path = root / CASES_FILE
    path.write_text(json.dumps(cases, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path
