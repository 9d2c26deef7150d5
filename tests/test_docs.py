"""Every Python example in the docs runs, and every relative link in docs/ leads somewhere.

The examples are the fenced blocks of docs/**/*.md and README.md whose info
string is ``python``. Each one is executed on its own, in a fresh namespace,
from the repository root, so an example must import what it uses. Blocks
marked ``text``, ``sh``, ``c`` or anything else are shown, never run. An
example that demonstrates an error catches it itself (``try``/``except``),
so that it still runs to the end.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [p for p in [ROOT / "README.md"] if p.is_file()]

# An opening or closing fence: 3+ backticks or tildes, up to 3 spaces of indent.
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")


def _closes(match: re.Match | None, fence: str) -> bool:
    """Whether a fence line closes the block opened by `fence` (same character,
    at least as long, no info string)."""
    return bool(match) and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
        and not match.group(2)


def code_blocks(path: Path) -> list[tuple[int, str, str]]:
    """(line of the opening fence, language, code) of every fenced block of a page."""
    blocks = []
    fence = None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence, lang, start, body = match.group(1), match.group(2).lower(), number, []
        elif _closes(match, fence):
            blocks.append((start, lang, "\n".join(body)))
            fence = None
        else:
            body.append(line)
    assert fence is None, f"{path.name}: the code block opened on line {start} is never closed"
    return blocks


EXAMPLES = [
    pytest.param(path, line, code, id=f"{path.relative_to(ROOT)}:{line}")
    for path in PAGES
    for line, lang, code in code_blocks(path)
    if lang == "python"
]


def test_docs_have_examples() -> None:
    assert EXAMPLES, "no ```python example found in docs/*.md or README.md"


@pytest.mark.parametrize("path, line, code", EXAMPLES)
def test_example_runs(path: Path, line: int, code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    namespace = {"__name__": f"docs_example_{line}"}
    # Padded with blank lines so that a traceback names the line of the page.
    exec(compile("\n" * line + code, str(path), "exec"), namespace)  # noqa: S102 - the docs' own examples


# [text](target) outside code blocks; targets with a scheme or only an anchor are not files.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _prose(path: Path) -> str:
    """The page without its fenced code blocks (and without inline code)."""
    text = path.read_text()
    kept, fence = [], None
    for line in text.splitlines():
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
        elif fence is not None and _closes(match, fence):
            fence = None
        elif fence is None:
            kept.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


@pytest.mark.parametrize("path", sorted((ROOT / "docs").rglob("*.md")), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_exist(path: Path) -> None:
    missing = []
    for target in LINK.findall(_prose(path)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        file_part = target.split("#", 1)[0]
        if not (path.parent / file_part).exists():
            missing.append(target)
    assert not missing, f"{path.relative_to(ROOT)} links to files that do not exist: {missing}"


# ---- docs/kernels.md, "Add an op": the tutorial quotes the code as it is -------------

TUTORIAL = ROOT / "docs" / "kernels.md"
QUOTED_FROM = re.compile(r"In\s+`([^`]+)`:\s*$")


def tutorial_quotes() -> list[tuple[int, str, str]]:
    """(line, file, quoted code) of every c/py block of the "Add an op" section,
    the file being the one its introducing sentence names ("In `src/map.cu`:")."""
    text = TUTORIAL.read_text()
    start = text.index("## Add an op")
    end = text.index("\n## ", start + 1)
    first_line = text[:start].count("\n") + 1
    quotes = []
    for line, lang, code in code_blocks(TUTORIAL):
        if not first_line <= line < first_line + text[start:end].count("\n") or lang not in ("c", "py"):
            continue
        before = "\n".join(text.splitlines()[: line - 1]).rstrip()
        match = QUOTED_FROM.search(before)
        assert match, f"docs/kernels.md:{line}: the block does not follow 'In `file`:'"
        quotes.append((line, match.group(1), code))
    return quotes


def test_the_tutorial_quotes_blocks() -> None:
    assert len(tutorial_quotes()) >= 7


@pytest.mark.parametrize("line, file, code", tutorial_quotes(), ids=lambda v: str(v) if isinstance(v, int) else None)
def test_tutorial_quote_is_in_its_file(line: int, file: str, code: str) -> None:
    """Each quoted line stands in the named file, in the quoted order."""
    source = [l.strip() for l in (ROOT / file).read_text().splitlines()]
    at = 0
    for quoted in (l.strip() for l in code.splitlines()):
        if not quoted:
            continue
        try:
            at = source.index(quoted, at) + 1
        except ValueError:
            pytest.fail(f"docs/kernels.md:{line} quotes a line that {file} does not have (after line {at}): {quoted!r}")
