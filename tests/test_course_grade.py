"""The course kit's grader (tools/course.py grade) and its manifest (course/tasks.toml).

- the manifest: every key checked, every file, sheet, C program and pytest
  file it names exists; a malformed manifest fails with the task named;
- a real grading run of the solved repository (one cheap task) gives full
  marks, and writes a valid Gradescope results.json and JUnit XML;
- a test that crashes (a pytest that kills itself with SIGSEGV, a C program
  that does, one that hangs) costs its own cases only, with the signal or
  the timeout named, while the other tests keep their points; a C group
  that crashes or hangs costs all its planned cases; a hung pytest item is
  not rerun; items the grade's budget does not reach score 0, saying why;
- a stub is found before anything runs and its task's report starts with its
  own message; a "not done" message zeroes an item only for its own task or
  one it requires; each task's pytest selections reach no test of a task it
  does not require;
- the scores of results.json add up to its total.
"""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers import emulator_buildable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import course_grade  # noqa: E402 - tools/ is not a package
import course_memory_errors  # noqa: E402
from course_manifest import ManifestError, PyTest, isolation_problems, load_manifest, mentions  # noqa: E402
from course_report import gradescope, junit, table  # noqa: E402

CONTRACT_IDS = {"indexing", "map_zip", "reductions", "matmul_tiled", "softmax", "autograd_rules",
                "layers_optim", "ladder_rung"}


def c_test_programs() -> set[str]:
    """The C test programs the Makefile builds (tests/c/tests.mk)."""
    return {p.stem for p in (ROOT / "tests" / "c").glob("test_*.c")}


# ---- the manifest ------------------------------------------------------------------------------

def test_the_manifest_names_things_that_exist() -> None:
    manifest = load_manifest(ROOT / "course" / "tasks.toml")
    assert set(manifest.ids()) == CONTRACT_IDS
    programs = c_test_programs()
    for task in manifest.tasks:
        assert task.points > 0, task.id
        for path in [*task.files, task.sheet, *(t.path for t in task.pytest)]:
            assert (ROOT / path).is_file(), f"task {task.id}: {path} does not exist"
        for test in task.c_tests:
            assert test.program in programs, f"task {task.id}: no C program {test.program}"
        assert task.sheet == f"docs/tasks/{task.id}.md"
        assert task.policy == ("fast" if task.files[0].startswith("minitensor/") else "teaching"), task.id


@pytest.mark.parametrize("key, value, message", [
    ("policy", '"sometimes"', "policy must be one of"),
    ("points", '"ten"', "task 'one': 'points' must be int"),
    ("requires", '["nothing"]', "requires unknown task 'nothing'"),
    ("id", '"Bad-Id"', "snake_case"),
    ("colour", '"red"', "unknown keys ['colour']"),
    ("pytest", "[]", "task 'one' has no test"),
])
def test_a_malformed_manifest_is_refused_with_the_task_named(tmp_path: Path, key: str, value: str,
                                                             message: str) -> None:
    table = {"id": '"one"', "title": '"One"', "points": "5", "files": "[]", "policy": '"fast"',
             "requires": "[]", "sheet": '"docs/tasks/one.md"', "pytest": '[{ path = "tests/test_nn.py" }]'}
    table[key] = value
    body = "\n".join(f"{k} = {v}" for k, v in table.items())
    path = tmp_path / "tasks.toml"
    path.write_text(f'name = "c"\nversion = "1"\n[[task]]\n{body}\n')
    with pytest.raises(ManifestError, match=re.escape(message)):
        load_manifest(path)


def test_a_duplicate_task_id_is_refused(tmp_path: Path) -> None:
    task = ('[[task]]\nid = "one"\ntitle = "One"\npoints = 1\nfiles = []\npolicy = "fast"\nrequires = []\n'
            'sheet = "s"\npytest = [{ path = "p" }]\n')
    path = tmp_path / "tasks.toml"
    path.write_text('name = "c"\nversion = "1"\n' + task + task)
    with pytest.raises(ManifestError, match=r"task ids appear twice: \['one'\]"):
        load_manifest(path)


# ---- scoring and reports -----------------------------------------------------------------------

def fake_results() -> list[course_grade.TaskResult]:
    manifest = load_manifest(ROOT / "course" / "tasks.toml")
    good = course_grade.TaskResult(manifest.task("softmax"), [
        course_grade.ItemResult("softmax", "test_softmax", passed=200),
        course_grade.ItemResult("softmax", "tests/test_reduce.py", passed=4)])
    bad = course_grade.TaskResult(manifest.task("matmul_tiled"), [
        course_grade.ItemResult("matmul_tiled", "test_matmul [tiled]", passed=30, failed=10),
        course_grade.ItemResult("matmul_tiled", "tests/test_matmul.py", failed=1, error="crashed: SIGSEGV")])
    return [good, bad]


def test_each_item_is_an_equal_share_earned_in_proportion_to_its_cases() -> None:
    good, bad = fake_results()
    assert good.score == pytest.approx(10.0)
    assert bad.score == pytest.approx(15.0 * (0.75 + 0.0) / 2)
    report = gradescope([good, bad], seconds=3.0)
    assert report["score"] == pytest.approx(round(10.0 + 15.0 * 0.375, 2))
    assert [t["max_score"] for t in report["tests"]] == [5.0, 5.0, 7.5, 7.5]
    assert [t["score"] for t in report["tests"]] == [5.0, 5.0, 5.62, 0.0]
    text = table([good, bad])
    assert "matmul_tiled: tests/test_matmul.py: 0 passed, 1 failed (crashed: SIGSEGV)" in text
    suites = junit([good, bad]).getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == ["softmax", "matmul_tiled"]
    assert suites[1].get("failures") == "1" and suites[1].get("errors") == "1"


def test_the_item_scores_add_up_to_the_total() -> None:
    """Three items of a 10-point task at 1/3 each: 3.33 + 3.33 + 3.33 is 9.99, the total says so."""
    task = load_manifest(ROOT / "course" / "tasks.toml").task("softmax")
    third = course_grade.TaskResult(task, [course_grade.ItemResult("softmax", f"item {i}", passed=1)
                                           for i in range(3)])
    report = gradescope([third], seconds=1.0)
    assert [t["score"] for t in report["tests"]] == [3.33, 3.33, 3.33]
    assert report["score"] == pytest.approx(9.99)
    assert re.search(r"^total\s+10\s+9\.99$", table([third]), re.MULTILINE)


def test_a_not_done_message_zeroes_an_item_only_for_the_tasks_it_depends_on() -> None:
    own = course_grade.ItemResult("softmax", "x", passed=9, failed=1, depends=frozenset({"softmax", "reductions"}),
                                  output="FAILED t\ntask reductions is not done: block_reduce in src/block_reduce.h")
    assert own.stubbed and own.fraction == 0.0
    other = replace_output(own, "FAILED t\ntask ladder_rung is not done: matmul_blocktile_1d in src/x.cu")
    assert not other.stubbed and other.fraction == pytest.approx(0.9)


def replace_output(item: course_grade.ItemResult, output: str) -> course_grade.ItemResult:
    from dataclasses import replace

    return replace(item, output=output)


# ---- C programs that crash or hang -------------------------------------------------------------

def fake_program(root: Path, name: str, script: str) -> course_grade.Run:
    """A 'C test program' that is a shell script, in a fake repository, marked as built."""
    program = root / "build" / "tests" / "emu" / name
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text("#!/bin/sh\n" + script)
    program.chmod(program.stat().st_mode | stat.S_IEXEC)
    run = course_grade.Run(root=root, backend="emulator", timeout=2.0)
    run.built = {run.lib: True, run.program(name): True}
    return run


def test_a_c_program_killed_by_a_signal_names_it(tmp_path: Path) -> None:
    run = fake_program(tmp_path, "test_boom", 'echo "FAIL test_boom: a case"\nkill -SEGV $$\n')
    task = load_manifest(ROOT / "course" / "tasks.toml").task("matmul_tiled")
    result = course_grade.run_c(run, task, course_grade.CTest("test_boom", "tiled"))
    assert result.error == "crashed: SIGSEGV (segmentation fault)"
    assert (result.passed, result.failed, result.fraction) == (0, 1, 0.0)
    assert "FAIL test_boom: a case" in result.output


def test_a_c_program_summary_is_read_and_a_hang_is_cut(tmp_path: Path) -> None:
    task = load_manifest(ROOT / "course" / "tasks.toml").task("softmax")
    run = fake_program(tmp_path, "test_ok", 'echo "test_ok: seed 1"\necho "7 passed, 1 failed"\nexit 1\n')
    result = course_grade.run_c(run, task, course_grade.CTest("test_ok"))
    assert (result.passed, result.failed, result.error) == (7, 1, None)
    run = fake_program(tmp_path, "test_hang", "sleep 30\n")
    result = course_grade.run_c(run, task, course_grade.CTest("test_hang"))
    assert result.error.startswith("timed out after 2 s") and result.fraction == 0.0
    run = fake_program(tmp_path, "test_none", 'echo "0 passed, 0 failed"\n')
    result = course_grade.run_c(run, task, course_grade.CTest("test_none", "nothing"))
    assert result.error.startswith("no case ran") and result.fraction == 0.0


GROUPS_THEN_CRASH = (
    'printf "group\\tok\\t5\\t0\\tfirst\\n"\n'
    'echo "FAIL test_groups: a case of second"\n'
    'printf "group\\tcrashed\\t3\\t1\\tsecond\\n"\n'
    'echo "FAIL test_groups: crashed: SIGSEGV in group \'second\'"\n'
    'printf "group\\ttimed out\\t0\\t0\\tthird\\n"\n'
    'echo "5 passed, 3 failed"\nexit 1\n')


def test_a_crashed_or_hung_c_group_counts_all_its_planned_cases(tmp_path: Path) -> None:
    """A group that crashed after 3 passed and 1 failed of its 10 planned cases loses the other 6;
    one that hung before any case loses its 4; a planned group that never ran loses its 7."""
    task = load_manifest(ROOT / "course" / "tasks.toml").task("softmax")
    run = fake_program(tmp_path, "test_groups", GROUPS_THEN_CRASH)
    run.cases = {"test_groups": {"first": 5, "second": 10, "third": 4, "fourth": 7}}
    result = course_grade.run_c(run, task, course_grade.CTest("test_groups"))
    assert (result.passed, result.failed) == (5 + 3, 1 + 6 + 4 + 7)
    assert "group 'second' crashed: 3 passed, 1 failed, and 6 case(s) it did not finish" in result.output
    assert "group 'fourth' did not finish: its 7 cases counted as failed" in result.output
    run.cases = {}  # no plan: a crashed group counts one failure, as the harness does
    result = course_grade.run_c(run, task, course_grade.CTest("test_groups"))
    assert (result.passed, result.failed) == (8, 1 + 1 + 1)


def test_a_c_program_cut_by_the_item_limit_loses_the_groups_it_did_not_finish(tmp_path: Path) -> None:
    task = load_manifest(ROOT / "course" / "tasks.toml").task("softmax")
    run = fake_program(tmp_path, "test_slow", 'printf "group\\tok\\t5\\t0\\tfirst\\n"\nsleep 30\n')
    run.cases = {"test_slow": {"first": 5, "second": 12}}
    result = course_grade.run_c(run, task, course_grade.CTest("test_slow"))
    assert result.error.startswith("timed out after 2 s")
    assert (result.passed, result.failed) == (5, 12)


RACE = ("shared-memory race in kernel 'block_reduce', block (0, 0, 0), thread (3, 0, 0) wrote s[0] at "
        "src/block_reduce.h:70, read by thread (2, 0, 0) at line 70")


def test_a_c_program_ends_at_the_first_memory_error_it_reports(tmp_path: Path) -> None:
    """A program that reports a race, then would go on failing for a minute: the grader kills it at
    the report (the item scores 0 from there on), and the report quotes the race."""
    task = load_manifest(ROOT / "course" / "tasks.toml").task("reductions")
    run = fake_program(tmp_path, "test_racy", 'printf "group\\tok\\t5\\t0\\tfirst\\n"\n'
                       'echo "FAIL test_racy: sum of 33"\n'
                       f'echo "  mt_reduce returned MT_ERR_CUDA: unspecified launch failure [emulator: {RACE}]"\n'
                       "sleep 60\n")
    run.timeout = 30.0
    run.cases = {"test_racy": {"first": 5, "second": 9}}
    result = course_grade.run_c(run, task, course_grade.CTest("test_racy"))
    assert result.seconds < 10, result.seconds
    assert result.error.startswith("stopped after") and "first memory error or race" in result.error
    assert (result.passed, result.failed, result.fraction) == (5, 9, 0.0)
    assert result.memory_error is not None and RACE in result.memory_error
    assert RACE[:60] in result.output and "FAIL test_racy: sum of 33" in result.output


def test_items_the_budget_does_not_reach_score_0_saying_why(tmp_path: Path) -> None:
    task = load_manifest(ROOT / "course" / "tasks.toml").task("softmax")
    run = fake_program(tmp_path, "test_ok", 'echo "1 passed, 0 failed"\n')
    run.deadline, run.budget = 0.0, 5.0
    for result in (course_grade.run_c(run, task, course_grade.CTest("test_ok")),
                   course_grade.run_pytest(run, task, PyTest("tests/test_reduce.py"))):
        assert result.fraction == 0.0 and result.failed == 1
        assert "share of the grade's time budget (5 s in all, --budget / BUDGET=) was spent before this item" in result.output


def test_what_did_not_build_scores_0_with_the_compiler_message(tmp_path: Path) -> None:
    run = course_grade.Run(root=tmp_path, backend="emulator", timeout=2.0)
    run.built = {run.lib: False, run.program("test_matmul"): False}
    run.build_log = ("g++ ... -c build/emu/matmul_tiled.cpp\n"
                     "src/matmul_tiled.cu:21:5: error: expected ',' or ';' before 'const'\n")
    task = load_manifest(ROOT / "course" / "tasks.toml").task("matmul_tiled")
    for result in (course_grade.run_c(run, task, task.c_tests[0]), course_grade.run_pytest(run, task, task.pytest[0])):
        assert (result.error, result.fraction) == ("build failed", 0.0)
        assert "src/matmul_tiled.cu:21:5: error: expected" in result.output


# ---- stubs ---------------------------------------------------------------------------------------

def test_stubs_are_found_before_anything_runs_and_each_task_names_its_own(tmp_path: Path) -> None:
    """In a copy where indexing and one of autograd_rules' regions are stubs, indexing's report and
    map_zip's (it requires indexing) start with indexing's message; autograd_rules, partly done,
    is a stub with its own message; the solved file of softmax is not."""
    manifest = load_manifest(ROOT / "course" / "tasks.toml")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "indexing.h").write_text(
        "/* TASK(indexing) BEGIN */\n"
        'MT_TASK_MISSING(indexing, "to_index, index_to_position, broadcast_index", "src/indexing.h")\n'
        "/* TASK(indexing) END */\n")
    (tmp_path / "src" / "softmax.cu").write_text("/* TASK(softmax) BEGIN */\nint done = 1;\n/* TASK(softmax) END */\n")
    helpers = tmp_path / "minitensor" / "autograd" / "helpers.py"
    helpers.parent.mkdir(parents=True)
    helpers.write_text(
        "def unbroadcast(grad, shape):\n    # TASK(autograd_rules) BEGIN\n"
        '    raise NotImplementedError("task autograd_rules is not done: unbroadcast in minitensor/autograd/helpers.py")\n'
        "    # TASK(autograd_rules) END\n\n"
        "def other():\n    # TASK(autograd_rules) BEGIN\n    return 1\n    # TASK(autograd_rules) END\n")
    found = course_grade.stubs(tmp_path, manifest)
    assert found == {
        "indexing": (["task indexing is not done: to_index, index_to_position, broadcast_index in src/indexing.h"], True),
        "autograd_rules": (["task autograd_rules is not done: unbroadcast in minitensor/autograd/helpers.py"], False),
    }
    item = course_grade.stub_item(manifest.task("map_zip"), "test_map", found)
    assert item.output.startswith("task indexing is not done: to_index") and "(task map_zip requires indexing)" in item.output
    assert item.fraction == 0.0


# ---- task isolation ------------------------------------------------------------------------------

# One process collects every selection, one pytest.main() each: the package and the test
# modules are imported once, not once per selection (a few seconds each on the emulator).
COLLECT_ALL = """
import json, sys
import pytest
for args in json.loads(sys.argv[1]):
    print("== selection", flush=True)
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *args])
    print(f"== exit status {int(code)}", flush=True)
"""


def collect_all(selections: list[PyTest]) -> dict[tuple[str, ...], list[str]]:
    """The test ids each pytest selection collects (pytest --collect-only), by its arguments."""
    argv = [selection.args() for selection in selections]
    proc = subprocess.run([sys.executable, "-c", COLLECT_ALL, json.dumps(argv)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    parts = proc.stdout.split("== selection\n")[1:]
    assert len(parts) == len(argv), proc.stdout[-3000:]
    found = {}
    for args, part in zip(argv, parts):
        assert part.rstrip().endswith("== exit status 0"), f"pytest --collect-only {args}:\n{part[-3000:]}"
        found[tuple(args)] = [line for line in part.splitlines() if "::" in line]
    return found


def test_an_item_with_a_memory_error_or_a_race_earns_nothing() -> None:
    """The cases that passed do not excuse a kernel the emulator caught writing out of bounds or
    racing: such an item scores 0 and its report quotes the error; other failures keep the
    passed share."""
    reports = {
        "illegal memory access in kernel 'map_contiguous<float>', block (0, 0, 0), thread (36, 0, 0): "
        "write at 0x7f0000001000, just past the end of a 144-byte allocation, at src/map.cu:58": True,
        "shared-memory race in kernel 'softmax_rows', block (3, 0, 0), thread (9, 0, 0) wrote "
        "scratch.slot[0] at src/block_reduce.h:70, read by thread (8, 0, 0) at line 70": True,
        "read of uninitialised shared memory in kernel 'k', block (0, 0, 0), thread (1, 0, 0)": True,
        "kernel 'k', block (0, 0, 0), thread (47, 0, 0): shared-memory access buf[2][16] out of bounds at "
        "a.cu:244: index 16 is outside [0, 16)": True,
        "mismatch at [3]: got 1.0, expected 2.0 (atol 1e-06, rtol 1e-05)": False,
    }
    for text, zeroed in reports.items():
        item = course_grade.ItemResult("map_zip", "test_map", passed=9, failed=1, output="FAILED case\n" + text)
        item.memory_error = course_memory_errors.first_memory_error(item.output)
        assert (item.fraction == 0.0) == zeroed, text
        assert (item.memory_error == text) == zeroed
        if zeroed:
            assert text[:60] in course_memory_errors.memory_error_note(item)
        else:
            assert item.fraction == 0.9 and course_memory_errors.memory_error_note(item) == ""


def test_mentions_is_a_whole_word() -> None:
    assert mentions("tests/test_matmul.py::test_partial_tiles[tiled-7-33-31]", "tiled")
    assert not mentions("tests/test_ladders.py::test_matmul_rungs[blocktile_1d-64-64-64]", "tiled")
    assert mentions("tests/test_ladders.py::test_matmul_rungs[blocktile_1d-64-64-64]", "blocktile_1d")


def test_each_tasks_selections_reach_only_the_tasks_it_requires() -> None:
    if not emulator_buildable():
        pytest.skip("collecting the tests imports the library, which this machine cannot build")
    manifest = load_manifest(ROOT / "course" / "tasks.toml")
    whole = PyTest("tests/test_matmul.py")
    ids = collect_all([selection for task in manifest.tasks for selection in task.pytest] + [whole])
    assert all(ids.values()), {args: len(found) for args, found in ids.items()}
    assert isolation_problems(manifest, lambda s: ids[tuple(s.args())]) == []
    # and the check does see a breach: matmul_tiled graded by the whole of tests/test_matmul.py
    problems = isolation_problems(manifest, lambda s: ids[tuple(whole.args())] if s.path == whole.path else [])
    assert any("blocktile_1d of task ladder_rung" in p for p in problems), problems


# ---- real grading runs of the solved repository ------------------------------------------------

def grade_cli(tmp_path: Path, *args: str) -> tuple[dict, ET.Element, str]:
    if not emulator_buildable():
        pytest.skip("grades the emulator build, which this machine cannot build (no Boost.Context)")
    out = tmp_path / "reports"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "course.py"), "grade", "--backend", "emulator",
                           "--timeout", "120", "--out", str(out), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((out / "results.json").read_text())
    return results, ET.parse(out / "junit.xml").getroot(), proc.stdout


def check_gradescope_format(results: dict) -> None:
    assert isinstance(results["score"], (int, float)) and results["tests"]
    for test in results["tests"]:
        assert set(test) >= {"name", "score", "max_score", "output"}
        assert 0 <= test["score"] <= test["max_score"]
    assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]), abs=0.05)


@pytest.fixture(scope="module")
def softmax_and_crasher(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, ET.Element, str]:
    """One real grade of the solved repository's softmax and of a hidden task whose test crashes
    (hidden_task below): both tests below read it, so that softmax is graded once."""
    tmp_path = tmp_path_factory.mktemp("grade")
    hidden = hidden_task(tmp_path, "crasher", 5, "def test_segfault():\n    os.kill(os.getpid(), signal.SIGSEGV)")
    return grade_cli(tmp_path, "--tasks", "softmax,crasher", "--hidden", str(hidden))


def test_the_solved_repository_gets_full_marks(softmax_and_crasher: tuple[dict, ET.Element, str]) -> None:
    results, xml, stdout = softmax_and_crasher
    check_gradescope_format(results)
    softmax = [t for t in results["tests"] if t["name"].startswith("softmax: ")]
    assert softmax and sum(t["max_score"] for t in softmax) == 10
    assert all(t["score"] == t["max_score"] for t in softmax)
    suite = xml.find("testsuite[@name='softmax']")
    assert suite is not None and suite.get("failures") == "0" and suite.get("errors") == "0"
    assert re.search(r"^softmax\s+10\s+\d+\s+0\s+10\.00$", stdout, re.MULTILINE), stdout
    assert "grade: warning" not in stdout, stdout  # course/c_cases.json counts softmax's groups right


def hidden_task(tmp_path: Path, task_id: str, points: int, middle: str) -> Path:
    """A hidden folder with one whole task of `points`, its one file test_<id>.py holding a test
    that passes, the test `middle` (source), and a test after it that passes."""
    hidden = tmp_path / "hidden"
    (hidden / task_id).mkdir(parents=True)
    (hidden / "tasks.toml").write_text(
        f'[[task]]\nid = "{task_id}"\ntitle = "A task of the grader\'s tests"\npoints = {points}\nfiles = []\n'
        f'policy = "fast"\nrequires = []\nsheet = "docs/tasks/{task_id}.md"\n')
    (hidden / task_id / f"test_{task_id}.py").write_text(
        "import os, signal, time\n\n"
        "def test_before():\n    assert sum([1, 2]) == 3\n\n"
        f"{middle}\n\n"
        "def test_after():\n    assert 'a'.upper() == 'A'\n")
    return hidden


def test_a_crashing_hidden_test_costs_its_own_task_only(softmax_and_crasher: tuple[dict, ET.Element, str]) -> None:
    results, xml, stdout = softmax_and_crasher
    check_gradescope_format(results)
    by_name = {t["name"]: t for t in results["tests"]}
    crash = by_name["crasher: hidden: test_crasher.py"]
    assert crash["max_score"] == 5 and crash["score"] == pytest.approx(round(5 * 2 / 3, 2))
    assert "test_crasher.py::test_segfault: crashed: SIGSEGV" in crash["output"]
    assert all(t["score"] == t["max_score"] for n, t in by_name.items() if n.startswith("softmax"))
    assert results["score"] == pytest.approx(10 + round(5 * 2 / 3, 2), abs=0.01)
    error = xml.find("testsuite[@name='crasher']/testcase/error")
    assert error is not None and "SIGSEGV" in error.get("message")


def test_a_hung_pytest_item_ends_at_its_limit_and_is_not_rerun(tmp_path: Path) -> None:
    """A hidden test that sleeps past the item's 5 s: the test before it keeps its pass, the hung
    test and the one after it fail, and the grade does not wait for reruns."""
    hidden = hidden_task(tmp_path, "sleeper", 3, "def test_hangs():\n    time.sleep(60)")
    results, _, _ = grade_cli(tmp_path, "--tasks", "sleeper", "--hidden", str(hidden), "--timeout", "5")
    (item,) = results["tests"]
    assert item["score"] == pytest.approx(1.0)  # 1 of 3 cases of 3 points
    assert "test_sleeper.py::test_hangs: timed out: the item's 5 s ran out" in item["output"]
    assert results["execution_time"] < 40


def test_a_pytest_item_ends_at_the_first_memory_error_it_reports(tmp_path: Path) -> None:
    """A hidden test fails with a race; the test after it would hang past the item's 60 s: the
    selection ends at the race (the item scores 0 from there on), its report quotes it, and the
    tests not run are named."""
    middle = (f"def test_races():\n    raise RuntimeError({RACE!r})\n\n\n"
              "def test_hangs():\n    time.sleep(120)")
    hidden = hidden_task(tmp_path, "racer", 4, middle)
    results, _, _ = grade_cli(tmp_path, "--tasks", "racer", "--hidden", str(hidden), "--timeout", "60")
    (item,) = results["tests"]
    assert item["score"] == 0, item["output"]
    assert "the emulator's checks found a memory error or a race" in item["output"] and RACE[:60] in item["output"]
    assert "stopped at the first memory error or race the emulator reported: 2 test(s) not run" in item["output"]
    assert "not run: the item stopped at the first memory error or race" in item["output"]
    assert results["execution_time"] < 40


def test_a_task_that_hangs_leaves_the_tasks_after_it_their_share_of_the_budget(tmp_path: Path) -> None:
    """Budget 30 s, no item limit to speak of: the hanging task may use half of what is left after
    the build, so the task after it still runs and keeps its full marks."""
    hidden = hidden_task(tmp_path, "sleeper", 3, "def test_hangs():\n    time.sleep(120)")
    quick = hidden_task(tmp_path / "quick", "quick", 2, "def test_middle():\n    assert [1] * 2 == [1, 1]")
    (hidden / "quick").mkdir()
    (quick / "quick" / "test_quick.py").rename(hidden / "quick" / "test_quick.py")
    with (hidden / "tasks.toml").open("a") as f:
        f.write((quick / "tasks.toml").read_text())
    results, _, stdout = grade_cli(tmp_path, "--tasks", "sleeper,quick", "--hidden", str(hidden),
                                   "--timeout", "600", "--budget", "30")
    by_name = {t["name"]: t for t in results["tests"]}
    assert by_name["quick: hidden: test_quick.py"]["score"] == 2, stdout
    assert "timed out" in by_name["sleeper: hidden: test_sleeper.py"]["output"]
    assert results["execution_time"] <= 32


# ---- taking a submission -----------------------------------------------------------------------

def test_take_copies_the_task_files_and_nothing_else(tmp_path: Path) -> None:
    from course_submission import take

    copy, submission = tmp_path / "copy", tmp_path / "submission"
    for path in ("src/matmul_tiled.cu", "src/softmax.cu", "tests/test_matmul.py"):
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        (copy / path).write_text("the handout's\n")
    (submission / "repo" / "src").mkdir(parents=True)
    (submission / "repo" / "src" / "matmul_tiled.cu").write_text("the student's tiles\n")
    (submission / "repo" / "tests").mkdir()
    (submission / "repo" / "tests" / "test_matmul.py").write_text("def test_nothing(): pass\n")
    (submission / "softmax.cu").write_text("the student's softmax\n")
    manifest = load_manifest(ROOT / "course" / "tasks.toml")
    lines = take(copy, submission, manifest, ["matmul_tiled", "softmax"])
    assert lines == ["taken    src/matmul_tiled.cu <- repo/src/matmul_tiled.cu",
                     "taken    src/softmax.cu <- softmax.cu"]
    assert (copy / "src" / "matmul_tiled.cu").read_text() == "the student's tiles\n"
    assert (copy / "src" / "softmax.cu").read_text() == "the student's softmax\n"
    assert (copy / "tests" / "test_matmul.py").read_text() == "the handout's\n"
    assert take(copy, submission, manifest, ["ladder_rung"]) == [
        "missing  src/matmul_blocktile_1d.cu (kept as it is here)"]


# ---- staged release ----------------------------------------------------------------------------

def test_a_staged_handout_grades_its_stage_and_carries_the_earlier_code(tmp_path: Path) -> None:
    """--upto softmax: softmax stubbed and graded, the later tasks stubbed and not graded, the
    earlier ones solved; --from puts a student's own earlier code in their regions; the handout
    is a git repository with one commit."""
    from course_handout import write_handout

    first = write_handout(ROOT, tmp_path / "hw5", upto="softmax")
    assert first == ["softmax"]
    hw5 = tmp_path / "hw5"
    assert load_manifest(hw5 / "course" / "tasks.toml").ids() == ["softmax"]
    stubs = course_grade.stubs(hw5, load_manifest(ROOT / "course" / "tasks.toml"))
    assert sorted(stubs) == ["autograd_rules", "ladder_rung", "layers_optim", "softmax"]
    assert "TASK(reductions)" not in (hw5 / "src" / "block_reduce.h").read_text()
    log = subprocess.run(["git", "log", "--oneline"], cwd=hw5, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 1

    submission = tmp_path / "alice"
    (submission / "src").mkdir(parents=True)
    handout = (tmp_path / "full")
    write_handout(ROOT, handout, tasks="reductions", git=False)
    mine = (handout / "src" / "block_reduce.h").read_text().replace(
        "/* TASK(reductions) BEGIN */\n", "/* TASK(reductions) BEGIN */\n/* alice's tree */\n", 1)
    (submission / "src" / "block_reduce.h").write_text(mine)
    notes: list[str] = []
    write_handout(ROOT, tmp_path / "alice-hw5", upto="softmax", submission=submission, git=False, notes=notes)
    text = (tmp_path / "alice-hw5" / "src" / "block_reduce.h").read_text()
    assert "/* alice's tree */" in text and "TASK(reductions)" not in text
    assert "stub     src/block_reduce.h: task reductions is still a stub in the submission" in notes
    assert "taken    src/block_reduce.h <- src/block_reduce.h" in notes
    assert "missing  src/map.cu in the submission: the solution is kept" in notes
