"""course: the course kit's one entry point.

    python tools/course.py handout [--tasks a,b] --out DIR [--force]
        a student repository: every file, with the chosen tasks' regions
        replaced by their stubs (tools/course_handout.py)

The tasks, their files and their tests are listed in course/tasks.toml
(tools/course_manifest.py reads it). `make handout TASKS=... OUT=...` runs
the handout command.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from course_handout import HandoutError, write_handout  # noqa: E402
from course_manifest import ManifestError  # noqa: E402
from course_regions import RegionError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def cmd_handout(args: argparse.Namespace) -> int:
    """Writes the handout; prints what it stubbed and where it went."""
    chosen = write_handout(ROOT, Path(args.out), args.tasks, force=args.force)
    print(f"handout: {args.out}: tasks {', '.join(chosen)} stubbed")
    print(f"next: cd {args.out} && make && make test   (the stubbed tasks' tests fail with their messages)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course.py", description="the course kit: handouts (and grading)")
    sub = parser.add_subparsers(dest="command", required=True)
    handout = sub.add_parser("handout", help="write a student repository with the chosen tasks stubbed")
    handout.add_argument("--tasks", default="", help="comma-separated task ids (default: every task)")
    handout.add_argument("--out", required=True, help="the folder to write (new, or empty)")
    handout.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    handout.set_defaults(run=cmd_handout)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (HandoutError, ManifestError, RegionError) as e:
        print(f"course.py {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
