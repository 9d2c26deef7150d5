"""pytest configuration of the Python suite.

- Hypothesis: few examples and no deadline, so the whole suite runs on the
  CPU emulator of a 2-core machine in a few minutes; under CI (CI=true) the
  examples are derandomized, so a run is repeatable. MINITENSOR_HYPOTHESIS=
  thorough runs 500 examples per test, to hunt for bugs by hand;
  MINITENSOR_HYPOTHESIS=grading (set by the course grader) is derandomized
  and does not shrink a failing example, so a failing file is as fast as a
  passing one.
- Tests marked ``@pytest.mark.gpu`` are skipped, with the reason, unless the
  engine in use is the CUDA build on a usable GPU.
- Under ``MINITENSOR_KERNELS=teaching`` (``make test-py-teaching``, the
  suite's second run in ``make test``) the files of ``SKIP_UNDER_TEACHING``
  are skipped, each with its reason: they run no kernel whose choice depends
  on the kernel policy, or only what the kept files run already, so a second
  run would cost minutes and test nothing new.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings

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
# The course grader's (tools/course_grade.py sets MINITENSOR_HYPOTHESIS=grading): the same examples
# on every run, and a failing test reports its first failing example instead of shrinking it, which
# made a file with a planted bug take minutes instead of seconds; no example database is written.
settings.register_profile(
    "grading", parent=settings.get_profile("minitensor"), derandomize=True, database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate], print_blob=False,
)
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


# File -> why it does not run again under the teaching kernel policy.
SKIP_UNDER_TEACHING: dict[str, str] = {
    "test_binding.py": "checks signatures and tables against the header; runs no kernel",
    "test_layers.py": "reads the imports of minitensor/; runs no kernel",
    "test_cu2emu.py": "tests the CUDA-to-C++ translator; runs no library kernel",
    "test_backend.py": "tests loading the library and choosing a backend, not kernels",
    "test_errors.py": "bad arguments are rejected before any kernel is chosen",
    "test_fuzz.py": "hostile arguments are rejected before any kernel is chosen",
    "test_hostile.py": "descriptors that lie about memory are rejected before any kernel is chosen",
    "test_interrupt.py": "tests Ctrl-C in the emulator's scheduler, whatever the kernel",
    "test_autotune.py": "tunes the fast policy's warptile kernel (its fixture sets fast); "
    "test_kernel_policy.py checks that nothing is tuned under teaching",
    "test_distributed.py": "the collectives have no kernel policy; its models' ops are those test_nn.py runs",
    "test_docs.py": "the docs' examples run ops that the op test files cover, and check prose, not kernels",
    "test_course_kit.py": "it sets each task's kernel policy (course/tasks.toml) in the processes it starts",
    "test_course_grade.py": "the grader sets each task's kernel policy in the processes it starts",
    "test_api_edges_install.py": "installs the package with pip and imports it; the one op it runs is covered",
    "test_notebooks.py": "the notebooks run ops that the op test files cover (20 s); "
    "MINITENSOR_KERNELS=teaching make notebooks renders them on the teaching kernels",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("MINITENSOR_KERNELS", "") == "teaching":
        for item in items:
            reason = SKIP_UNDER_TEACHING.get(item.path.name)
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=f"kernel policy teaching: {reason}"))
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = _gpu_skip_reason()
    if reason is None:
        return
    for item in gpu_items:
        item.add_marker(pytest.mark.skip(reason=reason))
