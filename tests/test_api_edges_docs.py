"""Docs that must agree with the code (issue 28): the bug corpus's line numbers
quoted in docs/emulator.md, the corpus that tools/sanitizer_compare.sh runs,
and what docs/api.md says of max(dim)'s indices and of the API's edges.

These read text only: the corpus's lines are where each kernel of
tests/c/broken_kernels.cu marks its bug with BUG_LINE(k).
"""

from __future__ import annotations

import re
from pathlib import Path

import minitensor as mt

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "c" / "broken_kernels.cu"
SCRIPT = ROOT / "tools" / "sanitizer_compare.sh"
EMULATOR_MD = ROOT / "docs" / "emulator.md"
API_MD = ROOT / "docs" / "api.md"


def kernel_spans() -> dict[str, tuple[int, int]]:
    """kernel name -> (first line, last line) of its definition in the corpus."""
    lines = CORPUS.read_text().splitlines()
    starts = [(i + 1, m.group(1)) for i, line in enumerate(lines)
              if (m := re.match(r"__global__ void (\w+)\(", line))]
    spans = {}
    for (start, name), (following, _) in zip(starts, starts[1:] + [(len(lines) + 1, "")]):
        spans[name] = (start, following - 1)
    return spans


def bug_lines(kernel: str) -> list[int]:
    """The lines that kernel marks with BUG_LINE(k), in k's order."""
    first, last = kernel_spans()[kernel]
    lines = CORPUS.read_text().splitlines()
    marked = [(int(m.group(1)), n) for n in range(first, last + 1)
              if (m := re.search(r"BUG_LINE\((\d)\)", lines[n - 1]))]
    return [n for _, n in sorted(marked)]


def corpus_names() -> list[str]:
    """The bug names of the corpus (bug_names in broken_kernels.cu, which the driver runs by name)."""
    body = re.search(r"bug_names\[\] = \{(.*?)\};", CORPUS.read_text(), re.S).group(1)
    return re.findall(r'"(\w+)"', body)


def script_bugs() -> dict[str, str]:
    """name -> description of every bug the comparison script runs."""
    return dict(re.findall(r'^\s+"(\w+)\|([^|]+)\|\w+"$', SCRIPT.read_text(), re.M))


def test_the_comparison_script_runs_every_bug_of_the_corpus():
    assert sorted(script_bugs()) == sorted(corpus_names())
    assert "async_copy_early_read" in script_bugs()


def test_the_comparison_table_names_each_bug_at_its_line():
    rows = {}
    for line in EMULATOR_MD.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3:
            rows[cells[0]] = cells[1]
    for name, what in script_bugs().items():
        assert what in rows, f"docs/emulator.md's comparison table has no row for {name} ({what})"
        expected = ", ".join(str(n) for n in bug_lines(name + "_kernel")) or "-"
        assert rows[what] == expected, f"{name}: the table says line {rows[what]}, the corpus marks {expected}"


def test_quoted_messages_name_lines_inside_their_kernel():
    spans = kernel_spans()
    quoted = 0
    for number, line in enumerate(EMULATOR_MD.read_text().splitlines(), start=1):
        # A quoted message: "... kernel 'name' ... broken_kernels.cu:N ... line M ..." up to the next kernel.
        for part in re.split(r"(?=kernel '\w+')", line):
            kernel = re.match(r"kernel '(\w+)'", part)
            if not kernel or kernel.group(1) not in spans:
                continue
            first, last = spans[kernel.group(1)]
            for n in re.findall(r"broken_kernels\.cu:(\d+)|at line (\d+)", part):
                quoted += 1
                at = int(n[0] or n[1])
                assert first <= at <= last, (
                    f"docs/emulator.md:{number} quotes {kernel.group(1)} at line {at}, "
                    f"outside its lines {first}-{last} in tests/c/broken_kernels.cu")
    assert quoted >= 20


def test_api_md_says_max_dims_indices_are_int64():
    text = " ".join(API_MD.read_text().split())
    assert "indices as whole numbers in floats" not in text
    assert mt.ones(2, 3).max(dim=1).indices.dtype is mt.int64
    assert re.search(r"`v, i = t\.max\(dim=1\)`; the indices int64", text)


def test_api_md_documents_the_edges():
    text = API_MD.read_text()
    for name in ("mt.save(obj, f)", "mt.load(f)", "mt.from_numpy(array)", "device=", "Module.to(device)",
                 "axis=", "pip install -e ."):
        assert name in text, f"docs/api.md does not mention {name}"
    assert "pip install -e ." in (ROOT / "README.md").read_text()
