"""matmul: the kernel ladder (src/matmul.cu, one src/matmul_<rung>.cu per
rung), the TF32 rungs, and the autotuner's tile configuration (autotune.py)."""

from __future__ import annotations

from typing import Any

from .. import _lib, backends
from . import autotune
from .._array import Array, empty
from .._views import expand, unsqueeze, view
from .._dtype import float32, promote
from .._errors import DTypeError, ShapeError
from .._shape import broadcast_shapes, check_new_shape
from .core import check_out, _require_array, fill_, cast


# ---- matmul ----------------------------------------------------------------------------


def matmul(a: Array, b: Array, algo: str = "default", config: int = -1, out: Any = None) -> Array:
    """a @ b as in torch.matmul: 2-D, batched N-D with broadcast batch dims, 1-D operands.

    A 1-D a is a row vector (1, K) and a 1-D b a column (K, 1); the added dim
    is removed from the result. algo picks a kernel of the ladder (one of
    _lib.op_names("matmul"): "default", "naive", "coalesced", "tiled",
    "blocktile_1d", "blocktile_2d", "vectorized", "warptile", "pipelined"), or
    "tf32", the tensor-core rung (float32 only; "default" takes it for float32
    operands while mt.backends.cuda.matmul.allow_tf32 is set), or
    "tf32_simple", the first TF32 rung, for comparison. config is a
    tile configuration of warptile or pipelined (an index below
    _lib.matmul_config_count()); -1 lets "default" ask the autotuner and the
    rungs choose from the shape.
    out, if given, is an Array of the result's shape and dtype to write into.
    """
    # The checks below skip, without a call, whatever the common product (two
    # float tensors of one dtype, no batch to broadcast) does not need: each
    # skipped function is one Python call less on every matmul.
    if not (isinstance(a, Array) and isinstance(b, Array)):
        _require_array(a, "matmul()", "a")
        _require_array(b, "matmul()", "b")
    if a._ndim == 0 or b._ndim == 0:
        raise ShapeError(
            f"matmul(): both arguments need at least 1 dim, got shapes {a.shape} and {b.shape}"
        )
    if algo != "default" and (not isinstance(algo, str) or (algo not in _lib.TF32_RUNGS
                                                           and algo not in _lib.op_names("matmul"))):
        raise ValueError(f"matmul(): unknown algo {algo!r}; one of {_lib.op_names('matmul') + tuple(_lib.TF32_RUNGS)}")
    # Every shape check comes before the casts, which allocate.
    a_shape = (1,) + a._shape if a._ndim == 1 else a._shape
    b_shape = b._shape + (1,) if b._ndim == 1 else b._shape
    m, k = a_shape[-2:]
    k2, n = b_shape[-2:]
    if k != k2:
        raise ShapeError(
            f"matmul(): shapes {a.shape} and {b.shape} cannot be multiplied ({k} != {k2})"
        )
    batch = a_shape[:-2]
    if batch != b_shape[:-2]:
        try:
            batch = broadcast_shapes(batch, b_shape[:-2], "matmul()")
        except ShapeError:
            raise ShapeError(
                f"matmul(): the batch dims of shapes {a.shape} and {b.shape} cannot be broadcast together"
            ) from None
    dtype = a._dtype if a._dtype is b._dtype else promote(a._dtype, b._dtype)
    if not dtype.is_floating_point:
        raise DTypeError(f"matmul(): both operands are {a.dtype.name if a.dtype is b.dtype else 'integer or bool'}"
                         f" tensors (shapes {a.shape} and {b.shape}); the matmul kernels take float32 or float64, "
                         f"as torch's CUDA matmul does (convert with .float())")
    if out is not None or a._dtype is not dtype or b._dtype is not dtype:
        # Before a cast allocates, or an out= is checked; otherwise empty() checks it below.
        check_new_shape(batch + (m, n), "matmul()", dtype.itemsize)
    a2 = a if a._dtype is dtype else cast(a, dtype)
    b2 = b if b._dtype is dtype else cast(b, dtype)
    if a._ndim == 1:
        a2 = unsqueeze(a2, 0)
    if b._ndim == 1:
        b2 = unsqueeze(b2, 1)
    shape = batch + ((m,) if a._ndim > 1 else ()) + ((n,) if b._ndim > 1 else ())
    if out is None:
        out = empty(shape, dtype, "matmul()")
    else:
        check_out(out, shape, dtype, "matmul()")
    # The (M, N) dims that a 1-D operand dropped, back; the operands' batch
    # dims broadcast (views: no copy, and none at all where nothing changes).
    target = out if a._ndim > 1 and b._ndim > 1 else view(out, batch + (m, n))
    if a2._shape != batch + (m, k):
        a2 = expand(a2, batch + (m, k))
    if b2._shape != batch + (k, n):
        b2 = expand(b2, batch + (k, n))
    if 0 not in target._shape:
        if k == 0:
            fill_(target, 0.0)
        else:
            if algo == "default" and config == -1 and dtype is float32 and backends.cuda.matmul.allow_tf32:
                algo = "tf32"
            if algo in _lib.TF32_RUNGS:
                _lib.matmul_tf32(target, a2, b2, algo)
                return out
            # "default": the tile configuration comes from the autotuner
            # (measured once per device and shape class, then cached).
            if config == -1 and algo == "default":
                config = autotune.matmul_config(target, a2, b2)
            _lib.matmul(target, a2, b2, algo, config)
    return out


# The TF32 rungs by name ("tf32_simple", "tf32"), for minitensor.kernels.
TF32_RUNGS: tuple[str, ...] = tuple(_lib.TF32_RUNGS)


def matmul_configs() -> tuple[str, ...]:
    """The names of the tile configurations of the tunable rungs, by index
    (warptile's first, then pipelined's)."""
    return tuple(_lib.matmul_config_name(i) for i in range(_lib.matmul_config_count()))
