"""What the emulator's full checks report, as the grader reads it (tools/course_grade.py).

An item of a grade in which a memory error or a race is reported earns nothing
(docs/coursework.md, "Scoring"), so the grader ends the item at the first such
report: a C program at the first line of its output that reports one
(tools/course_process.py), a pytest selection after the first test that fails
with one (tools/course_pytest_plugin.py, asked by STOP_ENV). The cases after it
would only fail the same way until the item's time limit.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from course_grade import ItemResult

# What the emulator's full checks report (docs/emulator.md, "What it checks"): a memory error or
# a race in a kernel. The cases whose numbers came out right do not make such a kernel correct (on
# a GPU the stray write may land in another tensor, the race go the other way), so an item in
# which one is reported earns nothing, as a CI job under compute-sanitizer fails as a whole.
MEMORY_ERROR = re.compile(r"illegal memory access in |shared-memory race in |read of uninitialised (?:device|shared) "
                          r"memory in |shared-memory (?:access|vector)[^\n]*out of bounds|misaligned shared-memory")


# Set by the grader for a pytest selection: the plugin ends the session after the first test whose
# failure reports a memory error or a race.
STOP_ENV = "MT_GRADE_STOP_AT_MEMORY_ERROR"


def is_memory_error(line: str) -> bool:
    """Whether one line of output reports a memory error or a race."""
    return MEMORY_ERROR.search(line) is not None


def first_memory_error(output: str) -> str | None:
    """The first line of `output` in which the emulator reports a memory error or a race."""
    return next((line.strip() for line in output.splitlines() if is_memory_error(line)), None)


def memory_error_note(result: "ItemResult") -> str:
    """What the report says of an item zeroed by a memory error: why, and the error itself."""
    if not result.memory_error:
        return ""
    return ("; scores 0: the emulator's checks found a memory error or a race, which no number "
            f"that came out right excuses:\n  {result.memory_error[:600]}")
