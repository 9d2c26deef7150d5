"""course_regions: the task regions of the sources, and what a handout makes of them.

A region marks the code a student writes for one task, in C/CUDA

    /* TASK(<id>) BEGIN */
    ... the solution ...
    /* TASK(<id>) STUB */
    //| ... the stub, each line behind "//| " ...
    /* TASK(<id>) END */

and in Python (markers and stub lines indented like the code)

    # TASK(<id>) BEGIN
    ... the solution ...
    # TASK(<id>) STUB
    #| ... the stub, each line behind "#| " ...
    # TASK(<id>) END

<id> is a task id of course/tasks.toml. Each marker is a line of its own. render() turns a file into its handout
form: a region of a chosen task keeps its BEGIN and END lines around the
stub (so the student sees where the code goes); a region of any other task
becomes its solution alone. src/task.h says what a C stub must declare so
that it fails before any kernel runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MARKER = re.compile(r"^(?P<indent>[ \t]*)(?:/\* TASK\((?P<cid>[a-z][a-z0-9_]*)\) (?P<cword>BEGIN|STUB|END) \*/"
                    r"|# TASK\((?P<pid>[a-z][a-z0-9_]*)\) (?P<pword>BEGIN|STUB|END))[ \t]*$")
STUB_PREFIX = {"c": "//|", "py": "#|"}
# What a stub left in place says, on a line of its own (src/task.h; the Python stubs' raise).
C_STUB = re.compile(r'^\s*MT_TASK_MISSING\(\s*([a-z][a-z0-9_]*)\s*,\s*"([^"]*)"\s*,\s*"([^"]*)"\s*\)', re.MULTILINE)
PY_STUB = re.compile(r'^\s*raise NotImplementedError\(\s*"(task ([a-z][a-z0-9_]*) is not done: [^"]*)"', re.MULTILINE)


class RegionError(ValueError):
    """Markers that do not form BEGIN, STUB, END triples; the message names the file and line."""


@dataclass(frozen=True)
class Region:
    """One task region of a file: line numbers count from 0, lines keep their newlines."""

    task: str
    lang: str  # "c" or "py"
    begin: int  # the BEGIN marker's line
    stub_marker: int  # the STUB marker's line
    end: int  # the END marker's line
    solution: tuple[str, ...]
    stub: tuple[str, ...]  # the stub's lines, prefix removed


def _unprefix(line: str, indent: str, prefix: str, where: str) -> str:
    """A stub line without its comment prefix: '<indent>//| code' -> '<indent>code'."""
    body = line.rstrip("\n")
    stripped = body.lstrip(" \t")
    if not stripped.startswith(prefix):
        raise RegionError(f"{where}: a stub line must start with {prefix!r}, got {body!r}")
    lead = body[: len(body) - len(stripped)]
    rest = stripped[len(prefix):]
    if rest and not rest.startswith(" "):
        raise RegionError(f"{where}: put one space after {prefix!r}: {body!r}")
    rest = rest[1:]
    if not rest:
        return "\n"
    return (lead if lead else indent) + rest + "\n"


def find_regions(text: str, path: str) -> list[Region]:
    """The regions of a file's text, in order; RegionError for broken or nested markers."""
    lines = text.splitlines(keepends=True)
    regions: list[Region] = []
    open_: dict = {}
    for number, line in enumerate(lines):
        m = MARKER.match(line.rstrip("\n"))
        if not m:
            continue
        lang = "c" if m.group("cid") else "py"
        task = m.group("cid") or m.group("pid")
        word = m.group("cword") or m.group("pword")
        where = f"{path}:{number + 1}"
        if word == "BEGIN":
            if open_:
                raise RegionError(f"{where}: TASK({task}) BEGIN inside the region of "
                                  f"TASK({open_['task']}) that began on line {open_['begin'] + 1}")
            open_ = {"task": task, "lang": lang, "begin": number, "indent": m.group("indent")}
            continue
        if not open_ or open_["task"] != task or open_["lang"] != lang:
            raise RegionError(f"{where}: TASK({task}) {word} without a matching TASK({task}) BEGIN")
        if word == "STUB":
            if "stub" in open_:
                raise RegionError(f"{where}: a second STUB in the region of TASK({task})")
            open_["stub"] = number
            continue
        if "stub" not in open_:
            raise RegionError(f"{where}: the region of TASK({task}) has no STUB section")
        prefix = STUB_PREFIX[lang]
        stub = tuple(_unprefix(l, open_["indent"], prefix, f"{path}:{open_['stub'] + 2 + i}")
                     for i, l in enumerate(lines[open_["stub"] + 1:number]))
        solution = tuple(lines[open_["begin"] + 1:open_["stub"]])
        if not any(s.strip() for s in stub):
            raise RegionError(f"{where}: the stub of TASK({task}) is empty")
        regions.append(Region(task, lang, open_["begin"], open_["stub"], number, solution, stub))
        open_ = {}
    if open_:
        raise RegionError(f"{path}:{open_['begin'] + 1}: TASK({open_['task']}) BEGIN is never closed by END")
    return regions


def render(text: str, path: str, stubbed: set[str],
           own: dict[str, list[list[str]]] | None = None) -> str:
    """The handout form of a file: regions of `stubbed` tasks become BEGIN, stub, END; others their
    solution, or, for a task of `own` (task -> the bodies of its regions, in order: a student's
    earlier code, for a staged release), the next of those bodies."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    at = 0
    taken: dict[str, int] = {}
    for r in find_regions(text, path):
        out.extend(lines[at:r.begin])
        if r.task in stubbed:
            out.append(lines[r.begin])
            out.extend(r.stub)
            out.append(lines[r.end])
        elif own and r.task in own:
            bodies = own[r.task]
            n = taken.get(r.task, 0)
            if n >= len(bodies):
                raise RegionError(f"{path}:{r.begin + 1}: the submission has fewer TASK({r.task}) regions "
                                  f"in this file than the course ({len(bodies)})")
            out.extend(bodies[n])
            taken[r.task] = n + 1
        else:
            out.extend(r.solution)
        at = r.end + 1
    out.extend(lines[at:])
    return "".join(out)


def restore(handout_text: str, solved_text: str, path: str) -> str:
    """A handout file with the solutions put back: each BEGIN..END region of the handout
    is replaced by the solution of the same region (in order) of the solved file."""
    solved = find_regions(solved_text, path)
    lines = handout_text.splitlines(keepends=True)
    out: list[str] = []
    at = 0
    for task, begin, end in handout_spans(handout_text):
        match = next((r for r in solved if r.task == task), None)
        if match is None:
            raise RegionError(f"{path}:{begin + 1}: TASK({task}) has no region left in the solved file")
        solved.remove(match)
        out.extend(lines[at:begin])
        out.extend(match.solution)
        at = end + 1
    out.extend(lines[at:])
    return "".join(out)


def stub_messages(body: str, task: str) -> list[str]:
    """The "task <id> is not done: ..." messages of `task`'s stubs still in a region's body: a line
    MT_TASK_MISSING(<id>, "<functions>", "<file>") in C, raise NotImplementedError("task <id> is not
    done: ...") in Python. Empty when the region holds no stub (a student replaced it)."""
    found = [f"task {tid} is not done: {function} in {file}"
             for tid, function, file in C_STUB.findall(body) if tid == task]
    return found + [m for m, tid in PY_STUB.findall(body) if tid == task]


def handout_bodies(text: str, task: str) -> list[list[str]]:
    """The lines (with their newlines) between BEGIN and END of each region of `task` left in a
    handout file, such as a student's submitted file, in order."""
    lines = text.splitlines(keepends=True)
    return [lines[begin + 1:end] for t, begin, end in handout_spans(text) if t == task]


def handout_spans(text: str) -> list[tuple[str, int, int]]:
    """(task, BEGIN line, END line) of each region left in a handout file (no STUB section there)."""
    spans = []
    begun: tuple[str, int] | None = None
    for number, line in enumerate(text.splitlines()):
        m = MARKER.match(line)
        if not m:
            continue
        task = m.group("cid") or m.group("pid")
        word = m.group("cword") or m.group("pword")
        if word == "BEGIN":
            begun = (task, number)
        elif word == "END" and begun and begun[0] == task:
            spans.append((task, begun[1], number))
            begun = None
    return spans


def distinctive_lines(region: Region, generic: set[str], min_length: int = 20) -> set[str]:
    """Lines of a region's solution that would give it away: long enough to be specific,
    not in its stub, and not lines that the code outside any region also has (`generic`)."""
    stub = {s.strip() for s in region.stub}
    found = set()
    for line in region.solution:
        s = line.strip()
        if len(s) < min_length or s in stub or s in generic:
            continue
        if s.startswith(("/*", "*", "//", "#")) and len(s) < 40:
            continue  # a short comment ("/* out is M x N */") is not a solution
        found.add(s)
    return found
