"""Takes a student's submission into a grading copy: the files of the tasks, nothing else.

    python tools/course.py take --from DIR [--tasks a,b]

A submission is a folder: the student's repository (possibly inside one
top-level folder, as a zip of it unpacks) or the task files uploaded one by
one. For every file of every chosen task (``files`` in course/tasks.toml)
the first of these is copied over the grading copy's file:

1. DIR/<path> (the repository, unpacked at the top);
2. DIR/<folder>/<path> (the repository inside one folder);
3. DIR/<file name> (files uploaded on their own), if only one file of the
   tasks has that name.

Everything else of the submission (tests, the Makefile, other kernels) is
ignored, so the grading copy's tests are the instructor's. A task file the
submission lacks keeps the copy's version (in a handout: the stub, which
scores 0 with the task's message).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from course_manifest import Manifest


def find(submission: Path, path: str, unique_name: bool) -> Path | None:
    """Where the submission holds the task file `path`, or None."""
    candidates = [submission / path]
    candidates += [folder / path for folder in sorted(submission.iterdir()) if folder.is_dir()]
    if unique_name:
        candidates.append(submission / Path(path).name)
    return next((c for c in candidates if c.is_file()), None)


def located(submission: Path, manifest: Manifest, task_ids: list[str] | None = None) -> list[tuple[str, Path | None]]:
    """Each file of the chosen tasks (all when None), sorted, with where the submission holds it
    (find), or None."""
    if not submission.is_dir():
        raise FileNotFoundError(f"the submission {submission} is not a folder")
    tasks = manifest.tasks if not task_ids else [manifest.task(t) for t in task_ids]
    files = sorted({f for task in tasks for f in task.files})
    names = [Path(f).name for f in files]
    return [(path, find(submission, path, names.count(Path(path).name) == 1)) for path in files]


def take(root: Path, submission: Path, manifest: Manifest, task_ids: list[str] | None = None) -> list[str]:
    """Copies the chosen tasks' files from the submission into root; returns one line per file."""
    lines = []
    for path, source in located(submission, manifest, task_ids):
        if source is None:
            lines.append(f"missing  {path} (kept as it is here)")
            continue
        shutil.copyfile(source, root / path)
        lines.append(f"taken    {path} <- {source.relative_to(submission)}")
    return lines
