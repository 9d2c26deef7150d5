"""The short road of a small op (issue 27, item 4): Python calls counted by
bench/host_path.py, which anyone can run (`python bench/host_path.py
--counts-only`), held to their targets here. A count does not depend on the
machine; it grows when a layer adds work to every call, which this test then
names, with the road call by call (`--list CASE`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "host_path.py"

# case -> (most Python calls, most files they live in). Measured: `a + b` 10
# calls in 6 files (59 in 14 before the short road, 16 in 10 before the
# operators' no-gradient road and the cached result layouts), the tiny
# backward 93 (366, then 141, then 89; the check that lets a leaf's first
# gradient be the backward's own result costs 3 a leaf), the MLP step 622
# (3543, then 772: the target, 800, is met), the GPT demo's step 5834
# (11144 when first counted; docs/performance.md says what is left).
# The files count one or two more since Tensor's arithmetic and reductions
# moved out of tensor.py into _arithmetic.py and _reductions.py (the same
# calls, in more files).
TARGETS = {
    "a + b": (10, 7),
    "a + b (requires_grad)": (12, 9),
    "a * 2.0": (11, 7),
    "tiny backward": (93, 18),
    "MLP Adam step": (622, 31),
    "GPT step": (5850, 53),
    # issue 29 item 4: 48, 33 and 27 calls before the one-int-dim road of the reductions
    "max(dim=1)": (28, 12),
    "argmax(dim=1)": (17, 10),
    "max_pool2d": (10, 5),  # 20 before the cached pooling arguments and mt_max_pool2d_new (issue 29 item 2)
}


@pytest.fixture(scope="module")
def host_path() -> ModuleType:
    spec = importlib.util.spec_from_file_location("host_path", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("case", sorted(TARGETS))
def test_python_calls_per_case_stay_within_the_target(host_path: ModuleType, case: str) -> None:
    fn = host_path.count_cases()[case]
    calls, files = host_path.count(fn)
    most_calls, most_files = TARGETS[case]
    road = "\n".join(f"  {f} {name}" for f, name in host_path.python_calls(fn)[:200])
    assert calls <= most_calls and files <= most_files, (
        f"{case}: {calls} Python calls in {files} files, the target is at most {most_calls} in "
        f"{most_files}; the road (python bench/host_path.py --list {case!r}):\n{road}")


def test_the_count_sees_every_call(host_path: ModuleType) -> None:
    """The counter itself: a function of three calls counts three."""
    def leaf() -> int:
        return 1

    def two() -> int:
        return leaf() + leaf()

    assert [name for _, name in host_path.python_calls(lambda: two())] == ["two", "leaf", "leaf"]
