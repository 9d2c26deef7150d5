"""minitensor.backends: the backends' switches, in torch.backends' names.

    mt.backends.cuda.matmul.allow_tf32 = True    # float32 products on tensor cores
    mt.set_float32_matmul_precision("high")      # the same, torch's other spelling

With allow_tf32 set, ``a @ b`` of float32 tensors (and everything built on it:
nn.Linear, the batched products) runs the tensor-core rung
(src/matmul_tf32.cu): each input rounded to TF32, 10 bits of mantissa, so
results differ from float32's by about 1e-3 relative (docs/performance.md
measures it against float64, beside torch's TF32). Off by default, as in
torch, so that results stay float32-exact. float64 products never use it.
"""

from __future__ import annotations

from operator import attrgetter


class _MatmulFlags:
    """``mt.backends.cuda.matmul``: ``allow_tf32`` (a bool, default False)."""

    _allow_tf32 = False

    def _set_allow_tf32(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"allow_tf32 must be True or False, got {value!r}")
        type(self)._allow_tf32 = value

    # Read through a C getter (operator.attrgetter), as Array's fields are:
    # every float32 matmul asks, and reading it then runs no Python function.
    allow_tf32 = property(attrgetter("_allow_tf32"), _set_allow_tf32,
                          doc="Whether float32 products run on tensor cores, inputs rounded to TF32.")

    def __repr__(self) -> str:
        return f"<minitensor.backends.cuda.matmul allow_tf32={self.allow_tf32}>"


class _CudaFlags:
    """``mt.backends.cuda``: its ``matmul`` switches."""

    matmul = _MatmulFlags()


cuda = _CudaFlags()

_PRECISIONS = {"highest": False, "high": True, "medium": True}


def set_float32_matmul_precision(precision: str) -> None:
    """torch's spelling: "highest" keeps float32 products exact, "high" and
    "medium" allow TF32 (minitensor has no bfloat16 rung: both mean TF32)."""
    if precision not in _PRECISIONS:
        raise ValueError(f"set_float32_matmul_precision: expected one of {sorted(_PRECISIONS)}, got {precision!r}")
    cuda.matmul.allow_tf32 = _PRECISIONS[precision]


def get_float32_matmul_precision() -> str:
    """"high" when TF32 is allowed, else "highest"."""
    return "high" if cuda.matmul.allow_tf32 else "highest"
