"""A pytest plugin for the grader (tools/course_grade.py): a log that survives a crash.

pytest writes its JUnit report when the session ends, so a student kernel
that kills the process (a segfault on the emulator, a CUDA fault on a GPU)
takes every result of the run with it. This plugin writes one JSON line per
event, flushed as it happens, to the file named by ``MT_GRADE_LOG``:

    {"collected": [node ids]}                      once, after collection
    {"start": node id}                             as each test starts
    {"nodeid": ..., "when": ..., "outcome": ..., "text": ...}   each report

so that the grader knows which tests passed before the crash and which one
was running when it came. ``MT_GRADE_SKIP`` names a file of node ids (one a
line) to deselect: the grader reruns the rest of a selection after a crash
without the tests already done. With ``MT_GRADE_STOP_AT_MEMORY_ERROR=1``
(tools/course_memory_errors.py: STOP_ENV) the session ends after the first
test whose failure reports a memory error or a race: the item scores 0 from
that report on, and the tests after it would only spend its time limit.

Loaded with ``-p course_pytest_plugin`` (tools/ on PYTHONPATH); it does
nothing when ``MT_GRADE_LOG`` is unset.
"""

from __future__ import annotations

import json
import os

import pytest

from course_memory_errors import STOP_ENV, first_memory_error

MAX_TEXT = 4000  # characters of a failure's report kept per test


class _Log:
    """Appends one JSON object per line and flushes each, so a crash loses nothing written."""

    def __init__(self, path: str) -> None:
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed at session end

    def write(self, record: dict) -> None:
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()


_log: _Log | None = None
_session: pytest.Session | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _log
    path = os.environ.get("MT_GRADE_LOG")
    if path:
        _log = _Log(path)


def pytest_sessionstart(session: pytest.Session) -> None:
    global _session
    _session = session


def pytest_unconfigure(config: pytest.Config) -> None:
    if _log is not None:
        _log.file.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_path = os.environ.get("MT_GRADE_SKIP")
    if not skip_path or not os.path.exists(skip_path):
        return
    with open(skip_path, encoding="utf-8") as f:
        done = {line.rstrip("\n") for line in f if line.strip()}
    kept = [item for item in items if item.nodeid not in done]
    dropped = [item for item in items if item.nodeid in done]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_collection_finish(session: pytest.Session) -> None:
    if _log is not None:
        _log.write({"collected": [item.nodeid for item in session.items]})


def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    if _log is not None:
        _log.write({"start": nodeid})


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _log is None:
        return
    # A test's outcome is its call, or a setup/teardown that failed or skipped it.
    if report.when != "call" and report.passed:
        return
    outcome = report.outcome  # "passed", "failed" or "skipped" (an expected failure reads as skipped)
    text = report.longreprtext[-MAX_TEXT:] if report.failed else ""
    _log.write({"nodeid": report.nodeid, "when": report.when, "outcome": outcome, "text": text})
    # The grader reads the memory error in this same text (course_grade.run_pytest); pytest ends the
    # session once this test's teardown is done, as -x does.
    error = first_memory_error(text) if report.failed and os.environ.get(STOP_ENV) == "1" else None
    if error and _session is not None:
        _session.shouldfail = f"stopped at the first memory error or race the emulator reported: {error[:200]}"
