"""Writes the zip that Gradescope takes as an autograder (`make autograder`).

    python course/gradescope/make_autograder.py --out build/autograder.zip [--tasks a,b] [--hidden DIR]

The zip holds, at its top (Gradescope unpacks it into /autograder/source/):

    setup.sh         run once when Gradescope builds the image (course/gradescope/setup.sh)
    run_autograder   run once per submission (course/gradescope/run_autograder)
    minitensor/      the student repository, as `make handout TASKS=...` writes it
    hidden/          the instructor's hidden tests (--hidden), if any

The hidden tests stay out of the handout: the zip is refused if a file of
--hidden is also in minitensor/ (the same bytes under any name), which
happens when the hidden folder lives inside the repository and git lists it.
Nothing else of this folder goes into the zip.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from course_handout import HandoutError, write_handout  # noqa: E402 - tools/ is not a package
from course_manifest import ManifestError  # noqa: E402
from course_regions import RegionError  # noqa: E402

SCRIPTS = ("setup.sh", "run_autograder")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def leaked_hidden(handout: Path, hidden: Path) -> list[str]:
    """The handout's files whose bytes are those of a hidden file (empty files aside)."""
    secret = {digest(p): p.relative_to(hidden) for p in files_under(hidden) if p.stat().st_size}
    return [f"{p.relative_to(handout)} (= hidden/{secret[d]})"
            for p in files_under(handout) if (d := digest(p)) in secret]


def write_zip(stage: Path, out: Path) -> int:
    """Zips stage's contents (file modes kept: run_autograder stays executable); returns the count."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    files = files_under(stage)
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for path in files:
            z.write(path, path.relative_to(stage).as_posix())
    tmp.replace(out)
    return len(files)


def make_autograder(out: Path, tasks: str = "", hidden: Path | None = None) -> list[str]:
    """Writes the zip; returns the tasks handed out. Raises HandoutError and friends on a problem."""
    if hidden is not None and not hidden.is_dir():
        raise HandoutError(f"--hidden {hidden}: not a directory")
    with tempfile.TemporaryDirectory(prefix="mt-autograder-") as tmp:
        stage = Path(tmp)
        chosen = write_handout(ROOT, stage / "minitensor", tasks or None)
        if hidden is not None:
            leaks = leaked_hidden(stage / "minitensor", hidden)
            if leaks:
                raise HandoutError("hidden tests would reach the students: the handout holds "
                                   + ", ".join(leaks[:10]) + " (keep the hidden folder out of the repository)")
            shutil.copytree(hidden, stage / "hidden", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in SCRIPTS:
            shutil.copy2(HERE / name, stage / name)
            (stage / name).chmod(0o755)
        count = write_zip(stage, out)
    print(f"autograder: {out}: {count} files; tasks {', '.join(chosen)}"
          + (f"; hidden tests from {hidden}" if hidden else "; no hidden tests"))
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the zip to write")
    parser.add_argument("--tasks", default="", help="comma-separated task ids (default: every task)")
    parser.add_argument("--hidden", help="the folder of hidden tests (docs/coursework.md)")
    args = parser.parse_args(argv)
    try:
        make_autograder(Path(args.out).resolve(), args.tasks, Path(args.hidden).resolve() if args.hidden else None)
    except (HandoutError, ManifestError, RegionError, KeyError) as e:
        print(f"autograder: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
