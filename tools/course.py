"""The course kit's entry point: ``python tools/course.py <command> ...``.

    handout  a student repository: every file, with the chosen tasks' regions
             replaced by their stubs (tools/course_handout.py; `make handout`)
    grade    run each task's tests in their own processes and score them
             (tools/course_grade.py; `make grade` runs it)
    take     copy the files of the tasks from a student's submission into
             this copy (tools/course_submission.py; for an autograder)
    cases    count the cases of each group of each C item in this (solved)
             repository into course/c_cases.json, which the grader counts as
             failed when a crash or a hang ends a group early

Every command reads the course manifest, course/tasks.toml
(tools/course_manifest.py); docs/coursework.md explains the workflow.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

from course_grade import DEFAULT_BUDGET, DEFAULT_TIMEOUT, count_cases, grade  # noqa: E402 - after the path above
from course_handout import HandoutError, write_handout  # noqa: E402
from course_manifest import ManifestError, load_manifest  # noqa: E402
from course_regions import RegionError  # noqa: E402
from course_report import table, write_reports  # noqa: E402
from course_submission import take  # noqa: E402

ROOT = TOOLS.parent


def task_list(text: str | None) -> list[str] | None:
    """'a,b' -> ['a', 'b']; empty or None -> every task."""
    ids = [t.strip() for t in (text or "").split(",") if t.strip()]
    return ids or None


def cmd_handout(args: argparse.Namespace) -> int:
    """Writes the handout; prints what it stubbed and where it went."""
    notes: list[str] = []
    try:
        chosen = write_handout(ROOT, Path(args.out), args.tasks, force=args.force, upto=args.upto or None,
                               submission=Path(args.source) if args.source else None, notes=notes)
    except (HandoutError, ManifestError, RegionError, KeyError) as e:
        print(f"handout: {e}", file=sys.stderr)
        return 1
    for line in notes:
        print(f"handout: {line}")
    later = f" (and the tasks after {args.upto} stubbed, not graded)" if args.upto else ""
    print(f"handout: {args.out}: tasks {', '.join(chosen)} stubbed and graded{later}")
    print(f"next: cd {args.out} && make && make grade   (the stubbed tasks score 0, with their messages)")
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    start = time.monotonic()
    try:
        results = grade(ROOT, task_list(args.tasks), Path(args.hidden).resolve() if args.hidden else None,
                        backend=args.backend, timeout=args.timeout, policy=args.policy, budget=args.budget)
    except (ManifestError, KeyError) as e:
        print(f"grade: {e}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve() if args.out else ROOT / "build" / "grade"
    results_json, junit_xml = write_reports(results, out, time.monotonic() - start)
    print()
    print(table(results))
    print(f"\nreports: {results_json}, {junit_xml}")
    full = all(r.score >= r.task.points for r in results)
    return 0 if full or not args.strict else 1


def cmd_cases(args: argparse.Namespace) -> int:
    try:
        path = count_cases(ROOT, args.backend)
    except (ManifestError, RuntimeError) as e:
        print(f"cases: {e}", file=sys.stderr)
        return 1
    print(f"cases: wrote {path.relative_to(ROOT)}")
    return 0


def cmd_take(args: argparse.Namespace) -> int:
    try:
        lines = take(ROOT, Path(args.source).resolve(), load_manifest(ROOT / "course" / "tasks.toml"),
                     task_list(args.tasks))
    except (ManifestError, KeyError, FileNotFoundError) as e:
        print(f"take: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    h = commands.add_parser("handout", help="write a student repository with the chosen tasks stubbed")
    h.add_argument("--tasks", default="", help="comma-separated task ids (default: every task)")
    h.add_argument("--out", required=True, help="the folder to write (new, or empty)")
    h.add_argument("--force", action="store_true", help="replace a non-empty --out folder")
    h.add_argument("--upto", default=os.environ.get("UPTO", ""),
                   help="a staged release up to this task: the tasks after it are stubbed and not graded, "
                        "those before it solved; --tasks defaults to it alone (make handout UPTO=)")
    h.add_argument("--from", dest="source", default=os.environ.get("FROM", ""),
                   help="with --upto: a student's earlier submission, whose code fills the tasks before "
                        "the stage instead of the solutions (make handout FROM=)")
    h.set_defaults(func=cmd_handout)
    g = commands.add_parser("grade", help="run each task's tests and score them")
    g.add_argument("--tasks", help="comma-separated task ids (default: every task of course/tasks.toml)")
    g.add_argument("--hidden", help="a folder of the instructor's extra tests (docs/coursework.md)")
    g.add_argument("--out", help="where results.json and junit.xml go (default: build/grade)")
    g.add_argument("--backend", choices=("emulator", "cuda"),
                   help="the build to grade (default: cuda where a GPU answers, else the emulator)")
    g.add_argument("--policy", choices=("fast", "teaching"),
                   help="run every task under this kernel policy instead of its own (to check a build)")
    g.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"seconds per test item, its reruns included (default {DEFAULT_TIMEOUT:.0f})")
    g.add_argument("--budget", type=float, default=DEFAULT_BUDGET,
                   help=f"seconds for the whole grade, the build included; items it does not reach score 0 "
                        f"(default {DEFAULT_BUDGET:.0f})")
    g.add_argument("--strict", action="store_true", help="exit 1 unless every task has full marks")
    g.set_defaults(func=cmd_grade)
    t = commands.add_parser("take", help="copy the tasks' files from a submission folder into this copy")
    t.add_argument("--from", dest="source", required=True, help="the submission folder")
    t.add_argument("--tasks", help="comma-separated task ids (default: every task)")
    t.set_defaults(func=cmd_take)
    c = commands.add_parser("cases", help="count each C item's cases per group into course/c_cases.json")
    c.add_argument("--backend", choices=("emulator", "cuda"), help="the build to run (default as for grade)")
    c.set_defaults(func=cmd_cases)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
