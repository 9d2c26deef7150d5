"""minitensor.backends: the backends' switches, in torch.backends' names.

    mt.backends.cuda.matmul.allow_tf32 = True    # float32 products on tensor cores
    mt.set_float32_matmul_precision("high")      # the same, torch's other spelling
    mt.backends.cuda.conv.allow_tf32 = True      # float32 convolutions on tensor cores

With allow_tf32 set, ``a @ b`` of float32 tensors (and everything built on it:
nn.Linear, the batched products) runs the tensor-core rung
(src/matmul_tf32.cu): each input rounded to TF32, 10 bits of mantissa, so
results differ from float32's by about 1e-3 relative (docs/performance.md
measures it against float64, beside torch's TF32). Off by default, as in
torch, so that results stay float32-exact. float64 products never use it.

With ``mt.backends.cuda.conv.allow_tf32`` set, float32 convolutions that take
the implicit-GEMM rung (F.conv2d, nn.Conv2d, their gradients) run its TF32
twin instead (src/conv_igemm_tf32.cu, minitensor/ops/conv_tf32.py), with the
same rounding, or, for a 3x3 stride-1 product, the Winograd rung with its
products in TF32 or float32, whichever the autotuner timed faster. Off by default: torch's own switch of that name
(torch.backends.cudnn.allow_tf32) defaults to True, minitensor's does not, so
that no result changes unless asked; it has its own name (``cuda.conv``, not
``cudnn``) because the default differs. set_float32_matmul_precision leaves it
alone, as torch's leaves cuDNN's.
"""

from __future__ import annotations

from operator import attrgetter


class _Tf32Switch:
    """An ``allow_tf32`` switch (a bool, default False); each subclass is one,
    with its own class attribute, so that setting one leaves the others."""

    _allow_tf32 = False
    _name = ""

    def _set_allow_tf32(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"allow_tf32 must be True or False, got {value!r}")
        type(self)._allow_tf32 = value

    # Read through a C getter (operator.attrgetter), as Array's fields are:
    # every float32 matmul asks, and reading it then runs no Python function.
    allow_tf32 = property(attrgetter("_allow_tf32"), _set_allow_tf32,
                          doc="Whether these float32 products run on tensor cores, inputs rounded to TF32.")

    def __repr__(self) -> str:
        return f"<minitensor.backends.cuda.{self._name} allow_tf32={self.allow_tf32}>"


class _MatmulFlags(_Tf32Switch):
    """``mt.backends.cuda.matmul``: ``allow_tf32`` for the float32 matmuls."""

    _allow_tf32 = False
    _name = "matmul"


class _ConvFlags(_Tf32Switch):
    """``mt.backends.cuda.conv``: ``allow_tf32`` for the float32 convolutions."""

    _allow_tf32 = False
    _name = "conv"


class _CudaFlags:
    """``mt.backends.cuda``: its ``matmul`` and ``conv`` switches."""

    matmul = _MatmulFlags()
    conv = _ConvFlags()


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
