"""course_handout: writes a student repository with the chosen tasks' regions stubbed.

    python tools/course.py handout [--tasks map_zip,softmax] --out ../handout
    python tools/course.py handout --upto softmax [--from ../alice] --out ../hw5

A staged release (``--upto <task>``): the chosen tasks (``--tasks``, default
that task alone) are stubbed and graded; the tasks after it in the
manifest's order are stubbed too but not graded (left out of the handout's
course/tasks.toml); the tasks before it are solved, with the instructor's
solutions or, with ``--from DIR``, with a student's own code from their
earlier submission (DIR as ``course.py take`` reads it: the code between
BEGIN and END of each region of those tasks in their files).

Every file of the repository (git's list: tracked and untracked files that
.gitignore does not exclude) is copied, except the manifest's
[handout] exclude patterns; in the files of the chosen tasks each region
becomes its stub (course_regions.render). Files left unchanged keep their
modification time, so a build copied next to them stays valid. Then:

- course/tasks.toml keeps the chosen tasks only (so `make grade` in the
  handout grades those);
- README.md is the student README, from course/README.student.md, and the
  library's own README moves to docs/overview.md;
- a notebook whose source (notebooks/src/) has a chosen region is written
  from the handout's source, without outputs;
- a code block of the docs or notebooks that quotes a chosen region's
  solution is replaced by a note naming the task;
- every chosen region's distinctive solution lines are then searched for in
  every file written (notebooks included): a hit stops the handout with the
  file named, so that no solution leaves by a quote;
- the handout is made a git repository with one commit (where git is
  installed), so that a student's ``git diff`` shows their work and
  ``git archive HEAD`` zips a submission.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Iterable, Optional

from course_manifest import Manifest, load_manifest
from course_regions import (Region, RegionError, distinctive_lines, find_regions, handout_bodies, handout_spans,
                            render, stub_messages)
from course_submission import located
from notebook_cells import unexecuted_notebook

# Files that may hold regions (others are copied as bytes).
REGION_SUFFIXES = (".cu", ".h", ".cpp", ".c", ".py")
# Code whose lines outside regions are "generic": a solution line that also
# appears there gives nothing away.
CODE_SUFFIXES = (".cu", ".h", ".cpp", ".c", ".py", ".mk", ".sh")
SKIP_DIRS = {".git", "build", ".venv", "__pycache__", ".pytest_cache", ".hypothesis"}


class HandoutError(RuntimeError):
    """The handout could not be written; the message says why and where."""


def repository_files(root: Path) -> list[str]:
    """The repository's files, relative to root: git's list where root is a git checkout,
    else every file outside build folders and caches. Symbolic links are left out."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                cwd=root, capture_output=True, check=True).stdout.decode()
        names = sorted({n for n in listed.split("\0") if n})
    except (OSError, subprocess.CalledProcessError):
        names = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            names += [str((Path(dirpath) / f).relative_to(root)) for f in filenames]
        names.sort()
    return [n for n in names if (root / n).is_file() and not (root / n).is_symlink()]


def excluded(name: str, patterns: Iterable[str]) -> bool:
    """Whether a repository path matches one of the manifest's [handout] exclude patterns."""
    return any(fnmatch.fnmatch(name, p) or name.startswith(p.rstrip("/") + "/") for p in patterns)


def choose_tasks(manifest: Manifest, tasks: Optional[str]) -> list[str]:
    """The task ids of a TASKS=a,b argument (all tasks when empty), in the manifest's order."""
    if not tasks or tasks.strip() in ("", "all"):
        return manifest.ids()
    wanted = [t.strip() for t in tasks.split(",") if t.strip()]
    unknown = [t for t in wanted if t not in manifest.ids()]
    if unknown:
        raise HandoutError(f"unknown task(s) {', '.join(unknown)}; the course has: {', '.join(manifest.ids())}")
    return [t for t in manifest.ids() if t in wanted]


def stage(manifest: Manifest, tasks: Optional[str], upto: Optional[str]) -> tuple[list[str], list[str]]:
    """(the chosen tasks: stubbed and graded, the later tasks: stubbed, not graded) of a handout.
    Without `upto` there are no later tasks; with it, the chosen tasks (default: `upto` alone) must
    come no later than it, and none of them may require a later task."""
    if not upto:
        return choose_tasks(manifest, tasks), []
    ids = manifest.ids()
    if upto not in ids:
        raise HandoutError(f"--upto {upto}: no such task; the course has: {', '.join(ids)}")
    later = ids[ids.index(upto) + 1:]
    chosen = choose_tasks(manifest, tasks) if tasks and tasks.strip() not in ("", "all") else [upto]
    for t in chosen:
        if t in later:
            raise HandoutError(f"task {t} comes after --upto {upto} in course/tasks.toml")
        needs = [r for r in manifest.task(t).requires if r in later]
        if needs:
            raise HandoutError(f"task {t} requires {', '.join(needs)}, which come after --upto {upto}")
    return chosen, later


def own_code(manifest: Manifest, submission: Path, tasks: list[str]) -> tuple[dict[str, dict[str, list[list[str]]]], list[str]]:
    """A student's code for `tasks` from their earlier submission: file -> task -> the bodies of the
    task's regions in that file, and one line per file saying what was found."""
    try:
        files = located(submission, manifest, tasks)
    except FileNotFoundError as e:
        raise HandoutError(f"--from: {e}") from None
    own: dict[str, dict[str, list[list[str]]]] = {}
    notes = []
    for name, source in files:
        if source is None:
            notes.append(f"missing  {name} in the submission: the solution is kept")
            continue
        text = source.read_text(errors="replace")
        for task in tasks:
            if name in manifest.task(task).files:
                bodies = handout_bodies(text, task)
                if not bodies:
                    raise HandoutError(f"{source}: no TASK({task}) BEGIN/END region (the markers must stay)")
                own.setdefault(name, {})[task] = bodies
                if any(stub_messages("".join(body), task) for body in bodies):
                    notes.append(f"stub     {name}: task {task} is still a stub in the submission")
        notes.append(f"taken    {name} <- {source.relative_to(submission)}")
    return own, notes


def commit_handout(out: Path) -> bool:
    """Makes the handout a git repository with one commit; False where git is not installed."""
    if shutil.which("git") is None:
        return False
    git = ["git", "-c", "user.name=minitensor course kit", "-c", "user.email=course@minitensor.invalid",
           "-c", "commit.gpgsign=false"]
    subprocess.run(git + ["init", "-q"], cwd=out, check=True)
    subprocess.run(git + ["add", "-A"], cwd=out, check=True)
    subprocess.run(git + ["commit", "-q", "-m", "The handout"], cwd=out, check=True)
    return True


def filter_manifest_text(text: str, keep: set[str]) -> str:
    """The manifest's text with only the [[task]] tables of `keep` (comments and order kept)."""
    blocks = text.split("\n[[task]]\n")
    head, tables = blocks[0], blocks[1:]
    out = [head]
    for table in tables:
        ids = [line.split("=", 1)[1].strip().strip('"') for line in table.splitlines()
               if line.startswith("id") and "=" in line]
        if ids and ids[0] in keep:
            # A required task that is not in this handout is solved there already.
            out.append(re.sub(r"^requires = \[(.*)\]$",
                              lambda m: "requires = [" + ", ".join(
                                  r for r in (x.strip() for x in m.group(1).split(",")) if r.strip('"') in keep) + "]",
                              table, flags=re.M))
    return "\n[[task]]\n".join(out)


def student_readme(root: Path, manifest: Manifest, chosen: list[str]) -> str:
    """The handout's README.md: course/README.student.md with {course}, {tasks_table}
    and {first_task} filled in."""
    template = (root / "course" / "README.student.md").read_text()
    rows = ["| task | points | what you write | in | sheet |", "| --- | --- | --- | --- | --- |"]
    for t in manifest.tasks:
        if t.id in chosen:
            files = ", ".join([f"`{f}`" for f in t.files] + [f"`notebooks/{Path(n).stem}.ipynb`" for n in t.notebooks])
            sheet = f"[{t.sheet}]({t.sheet})" if (root / t.sheet).is_file() else "(none yet)"
            rows.append(f"| `{t.id}` | {t.points} | {t.title} | {files} | {sheet} |")
    return (template.replace("{course}", manifest.name)
            .replace("{tasks_table}", "\n".join(rows))
            .replace("{first_task}", chosen[0]))


def searchable_lines(path: Path) -> list[str]:
    """The stripped lines a reader could see in a file: a notebook's cell sources and
    text outputs, else the text's lines (nothing for a binary file)."""
    try:
        text = path.read_text()
    except (UnicodeDecodeError, OSError):
        return []
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(text).get("cells", [])
        except json.JSONDecodeError:
            return [l.strip() for l in text.splitlines()]
        parts = []
        for cell in cells:
            parts += cell.get("source", []) if isinstance(cell.get("source"), list) else [cell.get("source", "")]
            for output in cell.get("outputs", []):
                t = output.get("text", [])
                parts += t if isinstance(t, list) else [t]
        text = "".join(parts)
    return [l.strip() for l in text.splitlines()]


FENCE = re.compile(r"^(?P<prefix>#\s)?\s{0,3}(?P<fence>`{3,}|~{3,})")


def redact_blocks(text: str, secrets: dict[str, str]) -> str:
    """The text with each fenced code block that quotes a stubbed solution replaced by a
    note naming the task. Fences may sit behind "# " (the markdown of notebooks/src/*.py)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    block: list[str] = []
    opener = None
    for line in lines:
        m = FENCE.match(line)
        if opener is None:
            out.append(line)
            if m:
                opener = m
                block = []
            continue
        if m and m.group("fence")[0] == opener.group("fence")[0] and len(m.group("fence")) >= len(opener.group("fence")):
            tasks = sorted({secrets[l.strip().removeprefix("#").strip()] for l in block
                            if l.strip().removeprefix("#").strip() in secrets})
            if tasks:
                prefix = opener.group("prefix") or ""
                out.append(f"{prefix}(left out of the handout: code of task {', '.join(tasks)})\n")
            else:
                out.extend(block)
            out.append(line)
            opener = None
            block = []
            continue
        block.append(line)
    out.extend(block)  # a block never closed stays as it was
    return "".join(out)


def redact_notebook(text: str, secrets: dict[str, str]) -> str:
    """A notebook with redact_blocks applied to the source of each markdown cell."""
    nb = json.loads(text)
    changed = False
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        source = "".join(cell.get("source", []))
        redacted = redact_blocks(source, secrets)
        if redacted != source:
            cell["source"] = redacted.splitlines(keepends=True)
            changed = True
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n" if changed else text


def secret_lines(regions: dict[str, list[Region]], generic: set[str]) -> dict[str, str]:
    """Each distinctive solution line of the stubbed regions -> its task."""
    return {line: r.task for task_regions in regions.values() for r in task_regions
            for line in distinctive_lines(r, generic)}


def redact_quotes(out: Path, secrets: dict[str, str]) -> list[str]:
    """Replaces the docs' and notebooks' code blocks that quote a stubbed solution; returns
    the files changed."""
    changed = []
    for path in sorted(out.rglob("*")):
        if not path.is_file() or set(path.relative_to(out).parts) & SKIP_DIRS:
            continue
        if path.suffix == ".md" or path.suffix == ".py" and path.parent.name == "src" and path.parent.parent.name == "notebooks":
            text = path.read_text()
            new = redact_blocks(text, secrets)
        elif path.suffix == ".ipynb":
            text = path.read_text()
            new = redact_notebook(text, secrets)
        else:
            continue
        if new != text:
            path.write_text(new)
            changed.append(str(path.relative_to(out)))
    return changed


def find_leaks(out: Path, secrets: dict[str, str]) -> list[str]:
    """'file:line: task <id>: <line>' for each distinctive solution line found in the handout."""
    leaks = []
    for path in sorted(p for p in out.rglob("*") if p.is_file() and not set(p.parts) & SKIP_DIRS):
        for number, line in enumerate(searchable_lines(path), start=1):
            if line in secrets:
                leaks.append(f"{path.relative_to(out)}:{number}: task {secrets[line]}: {line}")
    return leaks


def is_notebook_source(name: str) -> bool:
    return name.startswith("notebooks/src/") and name.endswith(".py")


def write_notebook(root: Path, out: Path, source: str, text: str) -> None:
    """Writes the notebook of a source whose regions a handout stubs: its cells from the
    handout's source, and no outputs (they would show what the solution computed)."""
    notebook = f"notebooks/{Path(source).stem}.ipynb"
    try:
        metadata = json.loads((root / notebook).read_text()).get("metadata", {})
    except (OSError, json.JSONDecodeError):
        metadata = {}
    (out / notebook).write_text(unexecuted_notebook(text, source, metadata))


def write_handout(root: Path, out: Path, tasks: Optional[str] = None, force: bool = False,
                  upto: Optional[str] = None, submission: Optional[Path] = None, git: bool = True,
                  notes: Optional[list[str]] = None) -> list[str]:
    """Writes the handout of `tasks` (comma-separated ids; all when None) from the repository
    at root into out; returns the chosen task ids. HandoutError on any problem. `upto` makes a
    staged release (stage()), `submission` a student's earlier submission whose code replaces the
    solutions of the tasks before the stage; `notes` receives what was taken from it."""
    root, out = root.resolve(), out.resolve()
    manifest = load_manifest(root / "course" / "tasks.toml")
    chosen, later = stage(manifest, tasks, upto)
    stubbed = set(chosen) | set(later)
    own: dict[str, dict[str, list[list[str]]]] = {}
    if submission is not None:
        if not upto:
            raise HandoutError("--from needs --upto: the submission's code fills the tasks before the stage")
        before = [t for t in manifest.ids() if t not in stubbed]
        if before:
            own, taken = own_code(manifest, submission.resolve(), before)
            if notes is not None:
                notes += taken
    if out == root or root in out.parents and not str(out.relative_to(root)).startswith("build"):
        raise HandoutError(f"{out}: write the handout outside the repository (or under build/)")
    if out.exists() and any(out.iterdir()):
        if not force:
            raise HandoutError(f"{out} is not empty; choose another OUT or remove it first")
        shutil.rmtree(out)
    names = [n for n in repository_files(root) if not excluded(n, manifest.handout_exclude)]

    stubbed_regions: dict[str, list[Region]] = {}
    stubbed_notebooks: dict[str, str] = {}  # notebook source -> its handout text
    generic: set[str] = set()
    for name in names:
        src = root / name
        dst = out / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        text = None
        if src.suffix in REGION_SUFFIXES:
            text = src.read_text()
            regions = find_regions(text, name)
            for r in regions:
                if r.task not in manifest.ids():
                    raise HandoutError(f"{name}:{r.begin + 1}: TASK({r.task}) is not a task of course/tasks.toml")
                if r.task in stubbed:
                    if name not in manifest.task(r.task).region_files():
                        raise HandoutError(f"{name}: holds a region of {r.task}, but the task's files "
                                           f"and notebooks in course/tasks.toml do not list it")
                    stubbed_regions.setdefault(r.task, []).append(r)
            if regions:
                try:
                    rendered = render(text, name, stubbed, own.get(name))
                except RegionError as e:
                    raise HandoutError(str(e)) from None
                dst.write_text(rendered)
                shutil.copymode(src, dst)
                text = rendered
                if any(r.task in stubbed for r in regions) and is_notebook_source(name):
                    stubbed_notebooks[name] = rendered
            else:
                shutil.copy2(src, dst)
        else:
            shutil.copy2(src, dst)
        if text is not None and src.suffix in CODE_SUFFIXES:
            lines = text.splitlines()
            inside = set()
            for _, begin, end in handout_spans(text):  # the chosen regions left in the handout
                inside.update(range(begin, end + 1))
            generic.update(l.strip() for i, l in enumerate(lines) if i not in inside)
    for t in [*chosen, *later]:
        if t not in stubbed_regions:
            raise HandoutError(f"task {t}: no TASK({t}) region in its files {manifest.task(t).files}")
        missing = set(manifest.task(t).region_files()) - set(names)
        if missing:
            raise HandoutError(f"task {t}: files {sorted(missing)} are not in the repository")

    for name, text in stubbed_notebooks.items():
        write_notebook(root, out, name, text)

    manifest_text = (root / "course" / "tasks.toml").read_text()
    (out / "course" / "tasks.toml").write_text(filter_manifest_text(manifest_text, set(chosen)))
    if (out / "README.md").exists():
        shutil.move(out / "README.md", out / "LIBRARY.md")
    (out / "README.md").write_text(student_readme(root, manifest, chosen))

    secrets = secret_lines(stubbed_regions, generic)
    redact_quotes(out, secrets)
    leaks = find_leaks(out, secrets)
    if leaks:
        raise HandoutError("solution text of a stubbed task is still in the handout (exclude the file "
                           "in course/tasks.toml's [handout] or reword it):\n  " + "\n  ".join(leaks[:20]))
    if git:
        commit_handout(out)
    return chosen
