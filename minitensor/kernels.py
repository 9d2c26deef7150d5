"""minitensor.kernels: run one rung of a kernel ladder yourself.

The engine has several kernels for the same operation, each one step (a
*rung*) up a ladder of optimisations (docs/kernels.md explains each rung):

- ``matmul``: naive, coalesced, tiled, blocktile_1d, blocktile_2d,
  vectorized, warptile, pipelined (the last two in several tile
  configurations), blocktile_2d_typed (rung 5 with typed dimensions);
- ``reduce``: the reduction ladder (interleaved, sequential, first_add,
  warp_shuffle, vectorized), for every reduction op along one dim;
- ``copy``: the transpose-copy ladder (naive, tiled, tiled_padded), for
  ``A.T.contiguous()``;
- ``conv2d``: the convolution ladder (im2col: the windows copied, then one
  matmul; tiled: one kernel with each output tile's input patch in shared
  memory, src/conv.cu; implicit_gemm: src/conv_implicit_gemm.cu), and
  ``conv2d_grad_rungs``, the rungs its backward runs for a layer;

plus the fused softmax kernel, which has one rung, and ``attention``: naive
(each step one op), fused (the masked softmax, src/masked_softmax.cu), flash,
warp, tiled and mma (one kernel, no score stored; src/attention*.cu). ``"default"`` is
always what the library runs (``a @ b``, ``x.sum(dim)``, ``F.conv2d``).

These functions are for studying and timing the kernels: each takes
minitensor Tensors, checks its arguments, and runs exactly the kernel you
name into a new tensor, or into ``out=`` (an existing tensor of the result's
shape and dtype, so that a timing loop measures the kernel, not the
allocation). They record no gradients. ::

    import minitensor as mt
    a, b = mt.randn(70, 50), mt.randn(50, 30)
    for algo in mt.kernels.algorithms("matmul"):
        c = mt.kernels.matmul(a, b, algo=algo)   # the same product, another kernel
    s = mt.kernels.reduce(a, "sum", dim=1, algo="warp_shuffle")
    t = mt.kernels.copy(a.T, algo="tiled_padded")   # a.T.contiguous(), one rung

Which kernels the library's own paths run is the *kernel policy*:
``"fast"`` (the default: the top rungs) or ``"teaching"`` (only the kernels
of the course's assignments: map/zip contiguous and strided, the first_add
reduction, the tiled matmul, the three-pass softmax), set with
``set_policy``, for a block with ``policy``, or for a whole run with the
environment variable ``MINITENSOR_KERNELS=fast|teaching``. The rungs named
here run under either policy. ::

    with mt.kernels.policy("teaching"):
        c = a @ b                                 # the tiled kernel
    mt.kernels.get_policy()                       # 'fast' again

Beside the ladders: the tile configurations the autotuner chooses from
(``matmul_configs``, ``matmul_config_rung``, ``autotune_stats``,
``autotune_reset``), the elementwise ``add`` for measuring what one kernel call costs on the host, and raw
device-to-device copies for exchanging data with another GPU library in the
same process (``from_device_pointer``, ``to_device_pointer``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional, Sequence, Union

from . import autograd, ops
from .ops import autotune
from ._creation import empty
from ._dtype import DType, int64
from ._errors import DimError
from .nn import functional_conv
from .ops.conv import conv2d_grad_rungs  # noqa: F401 - public: the rungs of a layer's backward
from .tensor import Tensor

__all__ = [
    "LADDERS",
    "add",
    "algorithms",
    "autotune_reset",
    "autotune_stats",
    "conv2d",
    "copy",
    "from_device_pointer",
    "get_policy",
    "matmul",
    "matmul_configs",
    "matmul_config_rung",
    "policies",
    "policy",
    "reduce",
    "reduce_ops",
    "set_policy",
    "softmax",
    "to_device_pointer",
]

# The ladders, by the name algorithms() takes, and the engine's name table of each
# (conv2d's rungs are not all engine kernels: the im2col rung is ops; CONV2D_ALGOS).
LADDERS: tuple[str, ...] = ("matmul", "reduce", "copy", "conv2d")
_LADDER_FAMILY = {"matmul": "matmul", "reduce": "reduce_algo", "copy": "copy_algo"}
CONV2D_ALGOS: tuple[str, ...] = ("default", "im2col", "tiled", "implicit_gemm", "depthwise", "direct")


# ---- what there is ---------------------------------------------------------------


def algorithms(ladder: str) -> tuple[str, ...]:
    """The rungs of a kernel ladder, in the order of the ladder.

    ladder is one of ``LADDERS``: ``"matmul"``, ``"reduce"``, ``"copy"`` or
    ``"conv2d"``. The first name is always ``"default"`` (what the library
    itself runs)::

        >>> mt.kernels.algorithms("copy")
        ('default', 'naive', 'tiled', 'tiled_padded')
        >>> mt.kernels.algorithms("conv2d")
        ('default', 'im2col', 'tiled', 'implicit_gemm', 'depthwise', 'direct')
    """
    if ladder == "conv2d":
        return CONV2D_ALGOS
    family = _LADDER_FAMILY.get(ladder) if isinstance(ladder, str) else None
    if family is None:
        raise ValueError(
            f"kernels.algorithms(): unknown ladder {ladder!r}; the ladders are {LADDERS} "
            f"(softmax has a single fused kernel)"
        )
    return ops.op_names(family)


def reduce_ops() -> tuple[str, ...]:
    """The ops every rung of the reduction ladder runs:
    ``("sum", "prod", "max", "min", "argmax", "argmin")``."""
    return ops.op_names("reduce")


def matmul_configs() -> tuple[str, ...]:
    """The tile configurations of the tunable matmul rungs, by index:
    warptile's first, then pipelined's (whose names start with "pipelined").

    ``matmul(a, b, algo=matmul_config_rung(i), config=i)`` runs configuration
    i (its name, e.g. ``"128x128x16 warp 64x32 (256 threads)"``, may be
    passed instead); so does algo ``"default"``. The autotuner times them per
    GPU and shape and picks one for the default product.
    """
    return ops.matmul_configs()


def matmul_config_rung(config: int) -> str:
    """The rung a configuration of ``matmul_configs()`` belongs to:
    ``"warptile"`` or ``"pipelined"``."""
    names = matmul_configs()
    if isinstance(config, bool) or not isinstance(config, int) or not 0 <= config < len(names):
        raise ValueError(f"matmul_config_rung(): config must be an index in 0..{len(names) - 1}, got {config!r}")
    return "pipelined" if names[config].startswith("pipelined") else "warptile"


def autotune_stats() -> dict[str, Any]:
    """What the matmul autotuner did in this process:
    ``{"sweeps": <configurations sweeps run>, "cache_file": <path of its JSON cache>}``."""
    return autotune.stats()


def autotune_reset() -> None:
    """Forgets the autotuner's choices held in memory and its sweep count (the
    cache file stays; it is read again by the next default product)."""
    autotune.reset()


# ---- the kernel policy ---------------------------------------------------------------


def policies() -> tuple[str, ...]:
    """The kernel policies: ``("fast", "teaching")``."""
    return ops.kernel_policies()


def set_policy(name: str) -> None:
    """Chooses which kernels the default paths (``a + b``, ``x.sum()``,
    ``a @ b``, ``softmax``, ``.contiguous()``, ...) run, for the whole process.

    Args:
        name: ``"fast"`` (the fastest kernel for each layout: 16-byte loads,
            warp shuffles, warptile, the register softmax) or ``"teaching"``
            (only the kernels students write: ``map_contiguous`` /
            ``map_strided``, ``zip_contiguous`` / ``zip_strided``,
            ``reduce_rows_first_add``, ``reduce_all`` finishing with
            ``block_reduce``, ``matmul_tiled``, ``softmax_rows``).

    Raises:
        ValueError: name is not one of ``policies()``.
    """
    if not isinstance(name, str) or name not in ops.kernel_policies():
        raise ValueError(f"kernels.set_policy(): unknown kernel policy {name!r}; the policies are {policies()}")
    ops.set_kernel_policy(name)


def get_policy() -> str:
    """The kernel policy in force: ``"fast"`` or ``"teaching"`` (at first the
    value of ``MINITENSOR_KERNELS``, ``"fast"`` when it is unset)."""
    return ops.kernel_policy()


@contextlib.contextmanager
def policy(name: str) -> Iterator[None]:
    """Runs a block under kernel policy ``name`` and restores the previous
    one afterwards, even if the block raises::

        with mt.kernels.policy("teaching"):
            loss = model(x).sum()    # every kernel a teaching kernel
    """
    if not isinstance(name, str) or name not in ops.kernel_policies():
        raise ValueError(f"kernels.policy(): unknown kernel policy {name!r}; the policies are {policies()}")
    previous = get_policy()
    ops.set_kernel_policy(name)
    try:
        yield
    finally:
        ops.set_kernel_policy(previous)


# ---- argument checks -----------------------------------------------------------------


def _check_algo(algo: Any, ladder: str, func: str) -> None:
    names = algorithms(ladder)
    if not isinstance(algo, str) or algo not in names:
        raise ValueError(f"{func}: unknown algo {algo!r}; the {ladder} ladder is {names}")


def _check_tensor(x: Any, func: str, name: str) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{func}: {name} must be a minitensor Tensor, got {type(x).__name__}")


def _check_out(out: Any, shape: tuple[int, ...], dtype: Optional[DType], func: str) -> None:
    """out must be a Tensor of the result's shape (and dtype, unless None)
    that can be written (no expanded dims)."""
    _check_tensor(out, func, "out")
    ops.check_out(out, shape, dtype, func)


# ---- the ladders ---------------------------------------------------------------------


def matmul(
    a: Tensor,
    b: Tensor,
    algo: str = "default",
    config: Union[int, str, None] = None,
    *,
    out: Optional[Tensor] = None,
) -> Tensor:
    """``a @ b`` (as ``torch.matmul``) with a chosen rung of the matmul ladder.

    Args:
        a, b: tensors of at least 1 dim; the last two dims multiply
            ((..., M, K) @ (..., K, N)), the leading (batch) dims broadcast,
            a 1-D operand is a vector, float32 with float64 gives float64.
        algo: one of ``algorithms("matmul")``, or a TF32 rung (float32 only,
            about 1e-3 relative error): ``"tf32"`` (the library's choice of
            ``"tf32_tma"``, ``"tf32_wgmma"``, ``"tf32_mma"``) or a ``TF32_RUNGS``.
        config: a tile configuration, an index into ``matmul_configs()``
            or its name; only with algo ``"default"`` or the configuration's
            own rung (``matmul_config_rung``). None: the autotuner's choice
            for ``"default"`` (as ``a @ b``), the library's choice from the
            shape for ``"warptile"`` and ``"pipelined"``.
        out: a tensor of the result's shape and dtype to write into (it must
            not overlap a or b); None allocates a new one.

    Returns:
        out, or a new tensor.
    """
    func = "kernels.matmul()"
    _check_tensor(a, func, "a")
    _check_tensor(b, func, "b")
    if not (isinstance(algo, str) and algo in ops.TF32_RUNGS):
        names = algorithms("matmul")
        if not isinstance(algo, str) or algo not in names:
            raise ValueError(f"{func}: unknown algo {algo!r}; the matmul ladder is {names}, "
                             f"the TF32 rungs {ops.TF32_RUNGS}")
    index = -1 if config is None else _config_index(config, algo, func)
    if out is None:
        return Tensor._from_array(ops.matmul(a, b, algo, index))
    _check_tensor(out, func, "out")
    return ops.matmul(a, b, algo, index, out=out)


def _config_index(config: Any, algo: str, func: str) -> int:
    """The index of a configuration given by index or name (checked against algo)."""
    if algo not in ("default", "warptile", "pipelined"):
        raise ValueError(
            f"{func}: config applies to the tunable rungs only (algo 'default', 'warptile' or "
            f"'pipelined'), not to algo {algo!r}"
        )
    if isinstance(config, str):
        names = matmul_configs()
        if config not in names:
            raise ValueError(f"{func}: unknown config {config!r}; the configurations are {names}")
        index = names.index(config)
    else:
        count = len(matmul_configs())
        if isinstance(config, bool) or not isinstance(config, int) or not 0 <= config < count:
            raise ValueError(
                f"{func}: config must be an index in 0..{count - 1} or a name from "
                f"matmul_configs(), got {config!r}"
            )
        index = config
    rung = matmul_config_rung(index)
    if algo not in ("default", rung):
        raise ValueError(
            f"{func}: config {index} ({matmul_configs()[index]!r}) belongs to the {rung} rung, "
            f"not to algo {algo!r}"
        )
    return index


def reduce(
    x: Tensor,
    op: str = "sum",
    dim: int = -1,
    algo: str = "default",
    *,
    keepdim: bool = False,
    out: Optional[Tensor] = None,
) -> Tensor:
    """Reduces x along one dim with a chosen rung of the reduction ladder.

    Args:
        x: the input (any strides).
        op: one of ``reduce_ops()``: ``"sum"``, ``"prod"``, ``"max"``,
            ``"min"``, ``"argmax"``, ``"argmin"`` (indices come back as
            int64).
        dim: the dim to reduce, negative counting from the end.
        algo: one of ``algorithms("reduce")``.
        keepdim: keep the reduced dim with size 1, as torch does.
        out: a tensor of the result's shape and dtype (x's; int64 for
            argmax/argmin) to write into; None allocates a new one.

    Returns:
        out, or a new tensor: x's shape without dim (with dim of size 1 when
        keepdim).
    """
    func = "kernels.reduce()"
    _check_tensor(x, func, "x")
    names = reduce_ops()
    if not isinstance(op, str) or op not in names:
        raise ValueError(f"{func}: unknown op {op!r}; the reduction ops are {names}")
    _check_algo(algo, "reduce", func)
    d = ops.normalize_dim(dim, x.ndim, func)
    src = x if x.ndim > 0 else ops.view(x, (1,))
    kept = tuple(1 if i == d else size for i, size in enumerate(src.shape))
    if x.ndim == 0:
        shape: tuple[int, ...] = ()
    else:
        shape = kept if keepdim else kept[:d] + kept[d + 1 :]
    out_dtype = int64 if op in ("argmax", "argmin") else x.dtype
    if out is None:
        out = empty(*shape, dtype=out_dtype)
    else:
        _check_out(out, shape, out_dtype, func)
    if x.ndim == 0:
        target = ops.unsqueeze(out, 0)
    else:
        target = out if keepdim else ops.unsqueeze(out, d)
    if target.numel() == 0:
        return out
    if src.shape[d] == 0:
        if op not in ("sum", "prod"):
            raise DimError(f"{func}: cannot {op} over dim {d} of length 0 (shape {x.shape}): {op} has no identity")
        ops.fill_(target, 0 if op == "sum" else 1)
        return out
    ops.reduce_rung_(op, target, src, d, algo)
    return out


def copy(x: Tensor, algo: str = "default", *, out: Optional[Tensor] = None) -> Tensor:
    """A copy of x with a chosen rung of the transpose-copy ladder.

    The ladder is about ``A.T.contiguous()``: reading a transposed view and
    writing rows. The tiled rungs stage 32 x 32 tiles in shared memory; they
    apply when x is a transposed view (its second-to-last dim has stride 1)
    and out's rows are contiguous, and fall back to the naive copy otherwise.

    Args:
        x: the input (any strides).
        algo: one of ``algorithms("copy")``.
        out: a tensor of x's shape (either dtype: the copy converts) that does
            not share memory with x; None allocates a contiguous one of x's
            dtype.

    Returns:
        out, or a new contiguous tensor.
    """
    func = "kernels.copy()"
    _check_tensor(x, func, "x")
    _check_algo(algo, "copy", func)
    if out is None:
        out = empty(*x.shape, dtype=x.dtype)
    else:
        _check_out(out, x.shape, None, func)
        if out._storage is x._storage and out.numel() > 0:
            raise ValueError(f"{func}: out shares memory with x; copy into a separate tensor")
    if out.numel() > 0:
        ops.copy_rung_(out, x, algo)
    return out


def softmax(x: Tensor, dim: int = -1, log: bool = False, *, out: Optional[Tensor] = None) -> Tensor:
    """softmax (log_softmax when log) along dim: the fused kernel, one pass per row.

    Args:
        x: the input.
        dim: the dim along which the result sums to 1, negative counting
            from the end.
        log: compute log_softmax.
        out: a tensor of x's shape and dtype to write into; it may be x
            itself (in place), but must not overlap it otherwise.

    Returns:
        out, or a new tensor.
    """
    func = "kernels.log_softmax()" if log else "kernels.softmax()"
    _check_tensor(x, func, "x")
    if out is None:
        return Tensor._from_array(ops.softmax(x, dim, bool(log)))
    d = ops.normalize_dim(dim, x.ndim, func)
    _check_out(out, x.shape, x.dtype, func)
    if out.numel() > 0:
        if x.ndim == 0:
            ops.softmax_out_(ops.unsqueeze(out, 0), ops.unsqueeze(x, 0), 0, bool(log))
        else:
            ops.softmax_out_(out, x, d, bool(log))
    return out


ATTENTION_ALGOS = ("naive", "masked_softmax", "flash", "warp", "tiled", "mma")


def attention(q: Tensor, k: Tensor, v: Tensor, algo: str = "flash", *, causal: bool = False,
              scale: Optional[float] = None, block_queries: int = 0, thread_rows: int = 0,
              block_keys: int = 0) -> Tensor:
    """softmax(q @ k^T * scale) @ v with a chosen rung of the attention ladder.

    Args:
        q, k, v: (..., L, D), (..., S, D) and (..., S, Dv) float tensors of one
            dtype with the same leading dims.
        algo: ``"naive"`` (each step one op through memory), ``"masked_softmax"``
            (the scale, mask and softmax in one kernel between two matmuls),
            ``"flash"`` (one kernel, K/V tiles in shared memory, online
            softmax, no score stored; D, Dv <= 64), ``"warp"`` (flash in
            register tiles; src/attention_warp.cu), ``"tiled"`` (flash
            block-tiled as a matmul, a deterministic two-kernel backward;
            src/attention_tiled.cu; both D = Dv of 32, 64, 128) or ``"mma"``
            (the forward on the tensor cores, 3xTF32 at float32's accuracy,
            float32, D = Dv of 64, 128, its backward on the tensor cores too;
            src/attention_mma*.cu). bench/attention.py times each.
        causal: mask every key after its query.
        scale: 1/sqrt(D) by default.
        block_queries: the tiled and mma rungs' queries a block, 64 or 128
            (float32 only); 0 (any rung) the default.
        thread_rows: the tiled rung's forward rows a thread, 4 or 2 (twice
            the threads a block, float32 only); 0 (any rung) the default.
        block_keys: the mma rung's keys a tile, 16, 32 or 64; 0 the default.

    The result is differentiable (the one-kernel rungs recompute P from lse)."""
    func = "kernels.attention()"
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_tensor(t, func, name)
    if algo not in ATTENTION_ALGOS:
        raise ValueError(f"{func}: unknown algo {algo!r}; one of {ATTENTION_ALGOS}")
    if not (q.dtype is k.dtype is v.dtype and q.dtype.is_floating_point):
        raise ops.DTypeError(f"{func}: q, k and v must share one float dtype, got {q.dtype.name}, "
                             f"{k.dtype.name}, {v.dtype.name}")
    if q.ndim < 2 or not q.shape[:-2] == k.shape[:-2] == v.shape[:-2] or q.shape[-1] != k.shape[-1] \
            or k.shape[-2] != v.shape[-2]:
        raise ops.ShapeError(f"{func}: q {q.shape}, k {k.shape} and v {v.shape} do not agree: (..., L, D), "
                             f"(..., S, D) and (..., S, Dv) with the same leading dims")
    ops.check_attention_rung(func, algo, q.shape[-1], v.shape[-1], q.dtype.name, block_queries, thread_rows,
                             block_keys)
    # A head dim of 0 makes every score an empty sum, 0, whatever the scale (torch
    # scales q and k, not the scores): a softmax of zeros; 1/sqrt(0) never taken.
    scale = 1.0 if q.shape[-1] == 0 else 1.0 / q.shape[-1] ** 0.5 if scale is None else float(scale)
    if algo in ("flash", "warp", "tiled", "mma") and 0 in q.shape + k.shape + v.shape:
        algo = "masked_softmax"  # no query, key or feature: the empty matmuls give torch's result (zeros)
    if algo == "naive":  # every step its own op: the scores go through memory four times
        scores = (q @ k.transpose(-2, -1)) * scale
        if causal:
            scores = scores.masked_fill(Tensor._from_array(ops.causal_future(q.shape[-2], k.shape[-2])),
                                        float("-inf"))
        return scores.softmax(-1) @ v
    if algo == "masked_softmax":
        return autograd.MaskedSoftmax.apply(q @ k.transpose(-2, -1), None, scale, causal) @ v
    return autograd.Attention.apply(q, k, v, scale, causal, algo, block_queries, thread_rows, block_keys)


def conv2d(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1, algo: str = "default") -> Tensor:
    """A 2-D convolution (``F.conv2d``'s arguments and result) with a chosen rung
    of the convolution ladder.

    Args:
        algo: ``"im2col"`` (the windows copied into a (N, C, KH, KW, OH, OW)
            tensor, then one batched matmul), ``"tiled"`` (one kernel,
            src/conv.cu: a block computes a 16 x 16 tile of one output
            channel with the input patch the tile reads, halo included, in
            shared memory; no window is copied to memory),
            ``"implicit_gemm"`` (a matmul of the weights with the windows,
            gathered into shared memory tile by tile, never written),
            ``"depthwise"`` (groups = C = C_out) and ``"direct"`` (few input
            channels; src/conv_depthwise.cu, conv_direct.cu) or ``"default"``
            (F.conv2d's: those, else implicit_gemm; im2col when teaching).

    The tiled rung's patch grows with the stride and the dilation: when the
    patch and one channel's weights need more than 48 KiB of shared memory
    (float32 strides above 7, say), it raises InvalidArgumentError (a
    ValueError) naming the sizes; use ``algo="im2col"``, which has no such
    limit. It does not fall back by itself: these functions run the kernel
    you name.

    Unlike matmul, reduce and copy here, the result is differentiable: the
    tiled rung's backward reuses the im2col rung's pieces (col2im for the
    input's gradient, a matmul with the windows for the weight's).
    """
    func = "kernels.conv2d()"
    if algo not in CONV2D_ALGOS:
        raise ValueError(f"{func}: unknown algo {algo!r}; one of {CONV2D_ALGOS}")
    return functional_conv._conv2d(input, weight, bias, stride, padding, dilation, groups, algo, func)


# ---- host cost, data exchange ----------------------------------------------------------


def add(a: Tensor, b: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """``a + b`` through the elementwise kernel (mt_zip), without autograd.

    Meant for measuring where the host time of a small op goes: ``add(a, b)``
    is the op without the Tensor and autograd layers (shape and dtype logic,
    allocation, the kernel call); ``add(a, b, out=out)`` writes into an
    existing tensor, so that it costs little more than the binding and the
    launch. a and b broadcast and promote as in ``a + b``; out must have the
    result's shape and dtype.
    """
    func = "kernels.add()"
    _check_tensor(a, func, "a")
    _check_tensor(b, func, "b")
    if out is None:
        return Tensor._from_array(ops.add(a, b))
    if not (a.shape == b.shape == out.shape and a.dtype is b.dtype is out.dtype):
        a, b = ops._promote_pair(a, b, func)
        _check_out(out, ops.broadcast_shapes(a.shape, b.shape, func), a.dtype, func)
    if out.numel() > 0:
        ops.zip_out_("add", out, a, b)
    return out


def from_device_pointer(ptr: int, shape: Sequence[int], dtype: Any = None) -> Tensor:
    """A new tensor holding a copy of the elements at a device address.

    For taking in data from another GPU library in the same process, e.g. a
    contiguous float32 torch tensor t on the same GPU::

        x = mt.kernels.from_device_pointer(t.data_ptr(), tuple(t.shape), mt.float32)

    The elements are read in row-major order, ``numel * itemsize`` bytes from
    ptr, with one device-to-device copy (mt_memcpy_d2d); nothing is shared
    afterwards. The range is registered with the library for the copy
    (mt_register_buffer), which checks that it is memory of the device
    minitensor uses (on the emulator, mapped host memory) and raises
    ValueError otherwise; beyond that the address is trusted: the other
    library's work on it must be finished (or queued on the same stream).

    Args:
        ptr: the device address of the first element.
        shape: the shape of the result.
        dtype: float32 (the default), float64, int64 or bool.
    """
    func = "kernels.from_device_pointer()"
    x = empty(*ops.as_shape(tuple(shape), func), dtype=dtype)
    nbytes = x.numel() * x.element_size()
    if nbytes:
        ptr = _check_ptr(ptr, func)
        ops.copy_device_bytes(x.data_ptr(), ptr, nbytes, foreign=ptr)
    return x


def to_device_pointer(x: Tensor, ptr: int) -> None:
    """Copies the elements of x, in row-major order, to a device address.

    The counterpart of ``from_device_pointer``: ptr must point to at least
    ``x.numel() * x.element_size()`` writable bytes of the device's memory,
    e.g. ``torch.empty(x.shape, device="cuda").data_ptr()`` for a float32 x.
    One device-to-device copy (after making x contiguous, if it is not).
    """
    func = "kernels.to_device_pointer()"
    _check_tensor(x, func, "x")
    nbytes = x.numel() * x.element_size()
    if nbytes:
        src = ops.contiguous(x)  # held until the copy is done: its memory must stay allocated
        ptr = _check_ptr(ptr, func)
        ops.copy_device_bytes(ptr, src.data_ptr(), nbytes, foreign=ptr)


def _check_ptr(ptr: Any, func: str) -> int:
    if isinstance(ptr, bool) or not isinstance(ptr, int) or ptr <= 0:
        raise ValueError(f"{func}: ptr must be a non-null device address (an int), got {ptr!r}")
    return ptr
