"""The grader's reports: a table for people, results.json for Gradescope, junit.xml for CI.

results.json follows Gradescope's autograder format: a top-level ``score``,
``execution_time`` and ``output`` (the table), and a ``tests`` list with one
entry per test item (``name``, ``score``, ``max_score``, ``status``,
``output``). junit.xml has one ``testsuite`` per task and one ``testcase``
per test item; an item that lost points has a ``failure`` (an ``error`` when
it crashed, timed out or did not build) carrying the same output.

Each item's score is rounded to hundredths once (item_score), and every
total (a task's, the grade's) is the sum of those rounded scores, so that the
scores a student reads in results.json add up to the score it gives.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from course_grade import ItemResult, TaskResult


def rounded(x: float) -> float:
    return round(x, 2)


def item_max(result: TaskResult) -> float:
    """The points one test item of the task is worth (an equal share)."""
    return result.task.points / len(result.items) if result.items else 0.0


def item_score(result: TaskResult, item: ItemResult) -> float:
    """The item's points, rounded to hundredths: the number every report shows and adds up."""
    return rounded(item_max(result) * item.fraction)


def task_score(result: TaskResult) -> float:
    """The task's points: the sum of its items' rounded points."""
    return rounded(sum(item_score(result, i) for i in result.items))


def table(results: list[TaskResult]) -> str:
    """The summary: one line per task, then the reason of every item that lost points."""
    lines = [f"{'task':<16} {'points':>6} {'passed':>7} {'failed':>7} {'score':>7}"]
    total = possible = 0.0
    for r in results:
        passed = sum(i.passed for i in r.items)
        failed = sum(i.failed for i in r.items)
        lines.append(f"{r.task.id:<16} {r.task.points:>6} {passed:>7} {failed:>7} {task_score(r):>7.2f}")
        total += task_score(r)
        possible += r.task.points
    lines.append(f"{'total':<16} {possible:>6.0f} {'':>7} {'':>7} {total:>7.2f}")
    lost = [(r, i) for r in results for i in r.items if i.fraction < 1.0]
    if lost:
        lines.append("")
        lines.append("lost points:")
        for r, i in lost:
            why = f" ({i.error})" if i.error else ""
            lines.append(f"  {r.task.id}: {i.name}: {i.passed} passed, {i.failed} failed{why}")
    return "\n".join(lines)


def gradescope(results: list[TaskResult], seconds: float) -> dict:
    """The dictionary of Gradescope's results.json."""
    tests = []
    for r in results:
        share = item_max(r)
        for i in r.items:
            tests.append({
                "name": f"{r.task.id}: {i.name}",
                "score": item_score(r, i),
                "max_score": rounded(share),
                "status": "passed" if i.fraction == 1.0 else "failed",
                "output": i.output,
            })
    return {
        "score": rounded(sum(t["score"] for t in tests)),
        "execution_time": round(seconds),
        "output": table(results),
        "tests": tests,
    }


def _case(r: TaskResult, i: ItemResult) -> ET.Element:
    case = ET.Element("testcase", classname=f"course.{r.task.id}", name=i.name, time=f"{i.seconds:.3f}")
    if i.fraction < 1.0:
        kind = "error" if i.error else "failure"
        message = i.error or f"{i.failed} of {i.passed + i.failed} cases failed"
        ET.SubElement(case, kind, message=message).text = i.output
    ET.SubElement(case, "system-out").text = i.output
    return case


def junit(results: list[TaskResult]) -> ET.ElementTree:
    """One testsuite per task, one testcase per test item."""
    root = ET.Element("testsuites", name="course grade")
    for r in results:
        suite = ET.SubElement(root, "testsuite", name=r.task.id,
                              tests=str(len(r.items)),
                              failures=str(sum(1 for i in r.items if i.fraction < 1.0 and not i.error)),
                              errors=str(sum(1 for i in r.items if i.error and i.fraction < 1.0)),
                              time=f"{sum(i.seconds for i in r.items):.3f}")
        ET.SubElement(ET.SubElement(suite, "properties"), "property", name="score",
                      value=f"{task_score(r):.2f} of {r.task.points}")
        for i in r.items:
            suite.append(_case(r, i))
    root.set("tests", str(sum(len(r.items) for r in results)))
    return ET.ElementTree(root)


def write_reports(results: list[TaskResult], out_dir: Path, seconds: float) -> tuple[Path, Path]:
    """Writes results.json and junit.xml into out_dir; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    results_json = out_dir / "results.json"
    results_json.write_text(json.dumps(gradescope(results, seconds), indent=2) + "\n", encoding="utf-8")
    junit_xml = out_dir / "junit.xml"
    tree = junit(results)
    ET.indent(tree)
    tree.write(junit_xml, encoding="utf-8", xml_declaration=True)
    return results_json, junit_xml
