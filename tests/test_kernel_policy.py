"""The kernel policy: minitensor.kernels.set_policy / get_policy / policy, and
MINITENSOR_KERNELS.

Under the "teaching" policy every default op must run the kernel students
write. What shows it:

- launch counts (``_lib.launch_count``; the emulator counts each kernel's
  launches, the CUDA build does not): the op launched the teaching kernel and
  no fast one, and the same op under "fast" launches the fast one, so the
  counts do tell the two apart;
- bits, on every backend, where the two kernels add in different orders: a
  sum over dim 0 has the bits of the ``first_add`` rung, ``a @ b`` those of the
  ``tiled`` rung.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest

import minitensor as mt
from minitensor import _lib
from minitensor.ops import autotune

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def restore_policy() -> Iterator[None]:
    """Whatever a test sets, the next test starts with the policy it had."""
    before = mt.kernels.get_policy()
    yield
    mt.kernels.set_policy(before)


def test_set_and_get_round_trip(restore_policy: None) -> None:
    assert mt.kernels.policies() == ("fast", "teaching")
    for name in ("teaching", "fast", "teaching"):
        mt.kernels.set_policy(name)
        assert mt.kernels.get_policy() == name


def test_the_context_manager_restores_the_previous_policy(restore_policy: None) -> None:
    mt.kernels.set_policy("fast")
    with mt.kernels.policy("teaching"):
        assert mt.kernels.get_policy() == "teaching"
        with mt.kernels.policy("fast"):
            assert mt.kernels.get_policy() == "fast"
        assert mt.kernels.get_policy() == "teaching"
    assert mt.kernels.get_policy() == "fast"
    with pytest.raises(KeyError):
        with mt.kernels.policy("teaching"):
            raise KeyError("inside the block")
    assert mt.kernels.get_policy() == "fast"


@pytest.mark.parametrize("bad", ["Teaching", "slow", "", None, 1])
def test_unknown_policies_are_rejected_with_the_allowed_names(bad: Any, restore_policy: None) -> None:
    before = mt.kernels.get_policy()
    for call in (mt.kernels.set_policy, lambda name: mt.kernels.policy(name).__enter__()):
        with pytest.raises(ValueError, match=r"'fast', 'teaching'"):
            call(bad)
    assert mt.kernels.get_policy() == before


# ---- which kernels run -------------------------------------------------------------------

rng = np.random.default_rng(7)
A = rng.standard_normal((64, 64)).astype(np.float32)
B = rng.standard_normal((64, 64)).astype(np.float32)
ROW = rng.standard_normal(64).astype(np.float32)

# (what, the op, its NumPy reference, the kernel under teaching (and a piece of
# its signature, or None), the fast kernel it replaces (and a piece))
OPS: list[tuple[str, Callable[[], Any], Callable[[], np.ndarray], tuple[str, Any], tuple[str, Any]]] = [
    ("exp", lambda: mt.tensor(A).exp(), lambda: np.exp(A), ("map_contiguous", None), ("map_contiguous_vec", None)),
    ("A.T.contiguous()", lambda: mt.tensor(A).T.contiguous(), lambda: A.T, ("map_strided", None),
     ("copy_transposed", None)),
    ("a + b", lambda: mt.tensor(A) + mt.tensor(B), lambda: A + B, ("zip_contiguous", None),
     ("zip_contiguous_vec", None)),
    ("a + row", lambda: mt.tensor(A) + mt.tensor(ROW), lambda: A + ROW, ("zip_strided", None),
     ("zip_row_broadcast", None)),
    ("a + b.T", lambda: mt.tensor(A) + mt.tensor(B).T, lambda: A + B.T, ("zip_strided", None),
     ("zip_transposed", None)),
    ("sum(dim=1)", lambda: mt.tensor(A).sum(dim=1), lambda: A.sum(axis=1), ("reduce_rows_first_add", None),
     ("reduce_rows_warp", None)),
    ("sum(dim=0)", lambda: mt.tensor(A).sum(dim=0), lambda: A.sum(axis=0), ("reduce_rows_first_add", None),
     ("reduce_columns", None)),
    ("sum()", lambda: mt.tensor(A).sum(), lambda: A.sum(), ("reduce_all_partials", "TreeFinish"),
     ("reduce_all_partials", "LastWarpFinish")),
    ("softmax", lambda: mt.tensor(A).softmax(dim=1),
     lambda: np.exp(A - A.max(axis=1, keepdims=True)) / np.exp(A - A.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True),
     ("softmax_rows", None), ("softmax_rows_registers", None)),
    ("a @ b", lambda: mt.tensor(A) @ mt.tensor(B), lambda: A.astype(np.float64) @ B, ("matmul_tiled", None),
     ("matmul_warptile", None)),
]

needs_counts = pytest.mark.skipif(
    os.environ.get("MINITENSOR_BACKEND", "") == "cuda", reason="launch counts: the emulator counts, the CUDA build does not"
)


def _counts_available() -> bool:
    return _lib.launch_count("map_contiguous") >= 0


@needs_counts
@pytest.mark.parametrize("policy", ["teaching", "fast"])
@pytest.mark.parametrize("case", OPS, ids=[op[0] for op in OPS])
def test_each_default_op_runs_the_kernel_of_the_policy(case: tuple, policy: str, restore_policy: None) -> None:
    what, op, reference, teaching, fast = case
    if not _counts_available():
        pytest.skip("this build does not count launches (CUDA)")
    want, never = (teaching, fast) if policy == "teaching" else (fast, teaching)
    with mt.kernels.policy(policy):
        _lib.reset_launch_counts()
        result = op().numpy()
        assert _lib.launch_count(*want) >= 1, f"{what} under {policy}: {want[0]} never launched"
        assert _lib.launch_count(*never) == 0, f"{what} under {policy}: {never[0]} launched"
    np.testing.assert_allclose(result, reference(), rtol=1e-4, atol=1e-4)


@needs_counts
def test_a_small_product_that_warptile_would_copy_runs_no_task_kernel_under_fast(restore_policy: None) -> None:
    # Rows that start one float past a 16-byte boundary: warptile would copy
    # the operand first, which a small product does not repay. The fast
    # policy then takes blocktile_2d, not tiled (a course task), so that a
    # student's broken tiled kernel costs points in its own task only.
    a = mt.randn(6, 9)[:, 1:]
    b = mt.randn(8, 5)
    mt.kernels.set_policy("fast")
    _lib.reset_launch_counts()
    out = a @ b
    assert _lib.launch_count("matmul_tiled") == 0
    assert _lib.launch_count("matmul_blocktile_2d") == 1
    np.testing.assert_allclose(out.numpy(), a.numpy().astype(np.float64) @ b.numpy(), rtol=1e-5, atol=1e-5)


@needs_counts
def test_the_ladders_reach_the_fast_rungs_by_name_under_teaching(restore_policy: None) -> None:
    if not _counts_available():
        pytest.skip("this build does not count launches (CUDA)")
    a, b = mt.tensor(A), mt.tensor(B)
    with mt.kernels.policy("teaching"):
        for call, kernel in [
            (lambda: mt.kernels.matmul(a, b, algo="warptile"), "matmul_warptile"),
            (lambda: mt.kernels.reduce(a, "sum", dim=1, algo="warp_shuffle"), "reduce_rows_warp"),
            (lambda: mt.kernels.copy(a.T, algo="tiled_padded"), "copy_transposed"),
        ]:
            _lib.reset_launch_counts()
            call()
            assert _lib.launch_count(kernel) >= 1, kernel


def test_under_teaching_the_defaults_have_the_bits_of_the_teaching_rungs(restore_policy: None) -> None:
    x = mt.tensor(rng.standard_normal((1025, 33)).astype(np.float32))
    a = mt.tensor(rng.standard_normal((65, 129)).astype(np.float32))
    b = mt.tensor(rng.standard_normal((129, 33)).astype(np.float32))
    with mt.kernels.policy("teaching"):
        assert np.array_equal(x.sum(dim=0).numpy(), mt.kernels.reduce(x, "sum", dim=0, algo="first_add").numpy())
        assert np.array_equal((a @ b).numpy(), mt.kernels.matmul(a, b, algo="tiled").numpy())


def test_a_warptile_config_for_the_default_product_is_refused_under_teaching(restore_policy: None) -> None:
    a = mt.tensor(A)
    with mt.kernels.policy("teaching"):
        with pytest.raises(ValueError, match="teaching kernel policy"):
            mt.kernels.matmul(a, a, algo="default", config=0)
        np.testing.assert_allclose(mt.kernels.matmul(a, a, algo="warptile", config=0).numpy(), A.astype(np.float64) @ A,
                                   rtol=1e-4, atol=1e-3)


def test_the_autotuner_picks_nothing_under_teaching(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    restore_policy: None) -> None:
    monkeypatch.setenv("MINITENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MINITENSOR_AUTOTUNE", "force")
    autotune.reset()
    used: list[tuple[str, int]] = []
    real_matmul = _lib.matmul

    def spy(out: Any, a: Any, b: Any, algo: str = "default", config: int = -1) -> None:
        used.append((algo, config))
        real_matmul(out, a, b, algo, config)

    monkeypatch.setattr(_lib, "matmul", spy)
    try:
        with mt.kernels.policy("teaching"):
            c = (mt.tensor(A) @ mt.tensor(B)).numpy()
        assert autotune.stats()["sweeps"] == 0
        assert used == [("default", -1)]
        assert not (tmp_path / "autotune.json").exists()
        np.testing.assert_allclose(c, A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)
    finally:
        autotune.reset()


# ---- MINITENSOR_KERNELS ----------------------------------------------------------------


def _run(value: str, code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, MINITENSOR_KERNELS=value)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("value", ["fast", "teaching"])
def test_the_environment_sets_the_policy(value: str) -> None:
    done = _run(value, """
        import minitensor as mt
        print(mt.kernels.get_policy(), (mt.ones(3) + 1).sum().item())
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [value, "6.0"]


def test_a_wrong_environment_value_fails_the_first_call_with_the_allowed_values() -> None:
    done = _run("teching", """
        import minitensor as mt
        for attempt in range(2):
            try:
                mt.ones(3)
            except ValueError as e:
                print("refused:", e)
    """)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout
    for line in lines:
        assert "MINITENSOR_KERNELS='teching'" in line and "'fast'" in line and "'teaching'" in line, line
