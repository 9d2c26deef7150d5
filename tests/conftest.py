"""pytest configuration of the Python suite.

- Hypothesis: few examples and no deadline, so the whole suite runs on the
  CPU emulator of a 2-core machine in a few minutes; under CI (CI=true) the
  examples are derandomized, so a run is repeatable. MINITENSOR_HYPOTHESIS=
  thorough runs 500 examples per test, to hunt for bugs by hand.
- Tests marked ``@pytest.mark.gpu`` are skipped, with the reason, unless the
  engine in use is the CUDA build on a usable GPU.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "minitensor",
    max_examples=30,
    deadline=None,
    derandomize=os.environ.get("CI", "").lower() in ("1", "true", "yes"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
# A longer hunt for bugs, by hand: MINITENSOR_HYPOTHESIS=thorough make test-py
settings.register_profile("thorough", parent=settings.get_profile("minitensor"), max_examples=500)
settings.load_profile(os.environ.get("MINITENSOR_HYPOTHESIS", "minitensor"))


def _gpu_skip_reason() -> str | None:
    """None when the CUDA backend is in use, else why GPU tests are skipped."""
    try:
        import minitensor as mt

        backend = mt.backend()
    except Exception as e:  # noqa: BLE001 - report, never error at collection
        return f"needs a GPU: the engine could not start ({type(e).__name__}: {e})"
    if backend != "cuda":
        return (
            "needs a GPU: the backend is the emulator (no usable GPU, no CUDA build, "
            "or MINITENSOR_BACKEND=emulator)"
        )
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = _gpu_skip_reason()
    if reason is None:
        return
    for item in gpu_items:
        item.add_marker(pytest.mark.skip(reason=reason))
