"""matmul: the kernel ladder (src/matmul.cu, one src/matmul_<rung>.cu per
rung), the TF32 rungs, and the autotuner's tile configuration (autotune.py)."""

from __future__ import annotations

import math
from typing import Any

from .. import _lib, backends
from . import autotune
from .._array import Array, empty
from .._views import expand, transpose, unsqueeze, view
from .._dtype import float32, promote
from .._errors import DTypeError, ShapeError
from .._shape import broadcast_shapes, check_new_shape
from .core import check_out, _require_array, fill_, cast, fast_kernels, reshape
from .elementwise import activation_backward, relu_backward


# ---- matmul ----------------------------------------------------------------------------


def matmul(a: Array, b: Array, algo: str = "default", config: int = -1, out: Any = None,
           tf32: Any = None) -> Array:
    """a @ b as in torch.matmul: 2-D, batched N-D with broadcast batch dims, 1-D operands.

    A 1-D a is a row vector (1, K) and a 1-D b a column (K, 1); the added dim
    is removed from the result. algo picks a kernel of the ladder (one of
    _lib.op_names("matmul"): "default", "naive", "coalesced", "tiled",
    "blocktile_1d", "blocktile_2d", "vectorized", "warptile", "pipelined"), or
    "tf32", the fastest tensor-core rung (mma.sync; float32 only; "default"
    takes it for float32 operands while mt.backends.cuda.matmul.allow_tf32 is
    set), or an earlier TF32 rung by name for comparison ("tf32_simple",
    "tf32_pipelined"; "tf32_mma" is "tf32"'s own name). config is a
    tile configuration of warptile or pipelined (an index below
    _lib.matmul_config_count()); -1 lets "default" ask the autotuner and the
    rungs choose from the shape.
    out, if given, is an Array of the result's shape and dtype to write into.
    tf32 decides instead of the matmul flag whether "default" takes the TF32
    rung for float32 (None: the flag decides): a caller with a flag of its own
    passes it, as the Winograd convolution does with conv.allow_tf32.
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
            if algo == "default" and config == -1 and dtype is float32 and (
                    backends.cuda.matmul.allow_tf32 if tf32 is None else tf32):
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


# ---- linear with a fused epilogue -----------------------------------------------------------

# The activations linear_fused applies (mt_epilogue_act, in id order): "none",
# "relu", "gelu" (torch's exact form) and "gelu_tanh" (approximate="tanh").
def epilogue_acts() -> tuple[str, ...]:
    """The activation names of linear_fused, as the library lists them."""
    return _lib.op_names("epilogue_act")


def linear_fusable(dtype: Any) -> bool:
    """Whether linear_fused runs for this dtype: under the fast kernel policy
    (teaching keeps the unfused chain of the kernels students write). For float32
    while mt.backends.cuda.matmul.allow_tf32 is set, linear_fused's product runs on
    the TF32 tensor-core rung, with the same epilogue in its stores."""
    return fast_kernels()


def _as_rows(x: Array) -> Array:
    """x (..., C) as a (R, C) matrix: a view when x is contiguous, else x with its
    leading dims as batch dims (at least 2 dims; the kernel reads any strides)."""
    if x.ndim >= 2 and x.is_contiguous():
        return view(x, (math.prod(x.shape[:-1]), x.shape[-1])) if x.ndim > 2 else x
    return unsqueeze(x, 0) if x.ndim == 1 else x


def linear_fused(x: Array, weight: Array, bias: Any = None, residual: Any = None, act: str = "none",
                 save_pre: bool = False) -> tuple[Array, Any]:
    """act(x @ weight.T + bias) + residual as one kernel (mt_matmul_epilogue), the
    fused form of torch's F.linear followed by an activation and a residual add.

    x is (..., in_features) (1-D allowed, as F.linear), weight (out_features,
    in_features), bias (out_features,) or None, residual None or broadcastable
    to the result (..., out_features). act is one of epilogue_acts(). With
    save_pre, also returns z = x @ weight.T + bias (what the activation's
    gradient needs), else None in its place. All operands of one float dtype.
    Float32 under mt.backends.cuda.matmul.allow_tf32 runs the product on the TF32
    rung (as matmul does), the epilogue in float32.
    """
    _require_array(x, "linear()", "input")
    _require_array(weight, "linear()", "weight")
    if act not in epilogue_acts():
        raise ValueError(f"linear(): unknown activation {act!r}; one of {epilogue_acts()}")
    if x.ndim == 0 or weight.ndim != 2:
        raise ShapeError(f"linear(): input must have at least 1 dim and weight 2 (out_features, in_features), "
                         f"got shapes {x.shape} and {weight.shape}")
    n, k = weight.shape
    if x.shape[-1] != k:
        raise ShapeError(f"linear(): input of shape {x.shape} and weight of shape {weight.shape}: the input's "
                         f"last dim ({x.shape[-1]}) must be in_features ({k})")
    if bias is not None:
        _require_array(bias, "linear()", "bias")
        if bias.shape != (n,):
            raise ShapeError(f"linear(): bias has shape {bias.shape}; weight of shape {weight.shape} needs ({n},)")
    shape = x.shape[:-1] + (n,)
    if residual is not None:
        _require_array(residual, "linear()", "residual")
        try:
            fits = broadcast_shapes(residual.shape, shape, "linear()") == shape
        except ShapeError:
            fits = False
        if not fits:
            raise ShapeError(f"linear(): the residual of shape {residual.shape} does not broadcast to the "
                             f"result's shape {shape}")
    dtype = x.dtype
    if (weight.dtype is not dtype or (bias is not None and bias.dtype is not dtype)
            or (residual is not None and residual.dtype is not dtype) or not dtype.is_floating_point):
        operands = [t for t in (x, weight, bias, residual) if t is not None]
        raise DTypeError(f"linear(): input, weight, bias and residual must share a float dtype, got "
                         f"{', '.join(t.dtype.name for t in operands)}")
    check_new_shape(shape, "linear()", dtype.itemsize)
    out = empty(shape, dtype)
    pre = empty(shape, dtype) if save_pre else None
    if out.numel() == 0:
        return out, pre
    a = _as_rows(x)  # (R, K), or (..., M, K) when x is not contiguous
    target_shape = a.shape[:-1] + (n,)
    target = view(out, target_shape)
    res = None
    if residual is not None:
        res = expand(residual, shape)
        # The kernel wants the residual in the target's shape: a view when it
        # can be one, else a copy (a broadcast or non-contiguous residual of a
        # flattened product).
        res = reshape(res, target_shape)
    b = transpose(weight, 0, 1)
    pre_target = None if pre is None else view(pre, target_shape)

    if dtype is float32 and backends.cuda.matmul.allow_tf32:
        # The TF32 rung, as matmul() takes it under the flag: its own tile choice.
        _lib.matmul_epilogue(target, a, b, bias, res, pre_target, act, tf32=True)
        return out, pre

    def run(config: int) -> None:
        _lib.matmul_epilogue(target, a, b, bias, res, pre_target, act, config)

    # The tile configuration: the autotuner's, timed on the fused kernel
    # itself (measured once per device and shape class, then cached).
    run(autotune.epilogue_config(target, a, b, run))
    return out, pre


def epilogue_activation_backward(grad: Array, pre: Array, act: str) -> Array:
    """grad * act'(pre): the gradient through linear_fused's activation, from the
    saved pre-activation z, in one zip kernel (relu_backward, or the
    activation family's gelu_backward / gelu_tanh_backward)."""
    if act == "none":
        return grad
    if act == "relu":
        return relu_backward(grad, pre)
    if act in ("gelu", "gelu_tanh"):
        return activation_backward(act, grad, pre)
    raise ValueError(f"epilogue_activation_backward(): unknown activation {act!r}; one of {epilogue_acts()}")


# The TF32 rungs by name ("tf32_simple", "tf32_pipelined", "tf32_mma", and "tf32":
# the fastest), for minitensor.kernels.
TF32_RUNGS: tuple[str, ...] = tuple(_lib.TF32_RUNGS)


def matmul_configs() -> tuple[str, ...]:
    """The names of the tile configurations of the tunable rungs, by index
    (warptile's first, then pipelined's)."""
    return tuple(_lib.matmul_config_name(i) for i in range(_lib.matmul_config_count()))
