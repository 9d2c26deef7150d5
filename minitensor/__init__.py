"""minitensor: a small tensor library with a hand-written CUDA engine.

    import minitensor as mt
    x = mt.randn(4, 3)
    w = mt.ones(3, 2, dtype=mt.float64)
    y = (x @ w).relu().sum(dim=0)      # float32 @ float64 -> float64
    print(y, mt.backend())

The API follows PyTorch's names and semantics; docs/api.md lists where it
differs. The engine is src/*.cu, built twice by `make`: for the GPU
(build/libminitensor_cuda.so) and for the CPU emulator
(build/libminitensor_emu.so). Importing this package only checks that a
library is built; the backend is chosen and initialised on first use
(MINITENSOR_BACKEND=cuda|emulator forces one).

Layers, each importing only the ones below it (tests/test_layers.py checks
this; docs/architecture.md draws them):

    distributed/   data-parallel training over MPI / NCCL
    nn/, optim.py  layers, losses and optimizers (kernels.py: the kernel ladders);
                   cuda/: streams, events, kernels compiled at run time;
                   serialization.py: save and load
    tensor.py      the Tensor class; _creation.py (zeros, randn, ...),
                   _functions.py (mt.exp, mt.cat, ...)
    autograd/      engine.py: Function, the graph, backward(), no_grad;
                   the gradient rules, one module per kernel family, shaping.py
    ops/           raw ops over Arrays: checks, output allocation, kernel calls;
                   core.py, then one module per kernel family (autotune.py:
                   the matmul tile configuration)
    _array.py      Array: storage, shape, strides, offset, dtype; views, the
                   C descriptor; _shape.py (shape arithmetic), _storage.py;
                   _interop.py, _foreign.py: zero-copy exchange (DLPack,
                   the array interfaces)
    _lib/          ctypes: loading, op tables, error mapping (loader.py),
                   memory, runtime, one module per kernel family, each with its
                   signatures (_errors.py, _dtype.py); _dlpack.py: DLPack's structs
"""

from . import _lib

_lib.check_built()

from ._dtype import DType, float32, float64, int64  # noqa: E402
from ._dtype import bool_ as _bool_dtype  # noqa: E402  (exported as `bool` at the end)
from ._errors import (  # noqa: E402
    CompileError,
    CudaError,
    DimError,
    DTypeError,
    InvalidArgumentError,
    MinitensorError,
    NoDeviceError,
    OutOfMemoryError,
    ShapeError,
    TaskNotDoneError,
)
from .tensor import (  # noqa: E402
    Tensor,
    is_tensor,
    return_types,
)
from ._creation import (  # noqa: E402
    arange,
    asarray,
    empty,
    empty_like,
    eye,
    full,
    from_dlpack,
    from_numpy,
    full_like,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from ._functions import (  # noqa: E402
    abs,
    all,
    allclose,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    count_nonzero,
    erf,
    floor_divide,
    is_floating_point,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    masked_fill,
    nonzero,
    remainder,
    amax,
    any,
    amin,
    argmax,
    argmin,
    broadcast_shapes,
    broadcast_tensors,
    cat,
    clamp,
    clip,
    concatenate,
    exp,
    flatten,
    gather,
    isclose,
    log,
    log_softmax,
    logsumexp,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    permute,
    prod,
    relu,
    reshape,
    sigmoid,
    softmax,
    sqrt,
    squeeze,
    stack,
    std,
    sum,
    tanh,
    transpose,
    unsqueeze,
    var,
    where,
)

from .autograd import enable_grad, is_grad_enabled, no_grad  # noqa: E402

from . import autograd, backends, cuda, kernels, nn, ops, optim, utils  # noqa: E402  (after Tensor: they build on it)
from .backends import get_float32_matmul_precision, set_float32_matmul_precision  # noqa: E402
from .serialization import load, save  # noqa: E402

# torch spells the default dtype float, float64 double and int64 long.
float = float32  # noqa: A001
double = float64
long = int64


def backend() -> str:
    """'cuda' or 'emulator': the engine in use (chosen on the first call)."""
    return _lib.backend_name()


def memory_in_use() -> int:
    """Bytes of device memory currently allocated by minitensor."""
    return _lib.memory_in_use()


def device_info() -> str:
    """The device name, compute capability and driver/runtime versions."""
    return _lib.device_info()


def synchronize() -> None:
    """Waits for every launched kernel to finish."""
    _lib.synchronize()


def set_sync_debug(on: bool) -> None:
    """When on, every kernel launch is followed by a synchronize, so a fault
    is reported by the op that caused it (also MINITENSOR_SYNC=1)."""
    _lib.set_sync_debug(on)


__all__ = [
    "abs",
    "all",
    "allclose",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "bool",
    "count_nonzero",
    "erf",
    "floor_divide",
    "int64",
    "is_floating_point",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "long",
    "masked_fill",
    "nonzero",
    "remainder",
    "any",
    "isclose",
    "randint",
    "randperm",
    "amax",
    "amin",
    "arange",
    "argmax",
    "argmin",
    "asarray",
    "autograd",
    "backends",
    "cuda",
    "backend",
    "broadcast_shapes",
    "broadcast_tensors",
    "cat",
    "clamp",
    "clip",
    "concatenate",
    "CudaError",
    "device_info",
    "DimError",
    "double",
    "DType",
    "DTypeError",
    "empty",
    "empty_like",
    "enable_grad",
    "exp",
    "eye",
    "flatten",
    "float",
    "float32",
    "float64",
    "from_dlpack",
    "from_numpy",
    "get_float32_matmul_precision",
    "full",
    "full_like",
    "gather",
    "InvalidArgumentError",
    "is_grad_enabled",
    "is_tensor",
    "load",
    "log",
    "log_softmax",
    "logsumexp",
    "manual_seed",
    "set_float32_matmul_precision",
    "matmul",
    "max",
    "maximum",
    "mean",
    "memory_in_use",
    "min",
    "minimum",
    "MinitensorError",
    "nn",
    "no_grad",
    "NoDeviceError",
    "ones",
    "ones_like",
    "optim",
    "OutOfMemoryError",
    "permute",
    "prod",
    "rand",
    "rand_like",
    "randn",
    "randn_like",
    "relu",
    "reshape",
    "return_types",
    "save",
    "set_sync_debug",
    "ShapeError",
    "sigmoid",
    "softmax",
    "sqrt",
    "squeeze",
    "stack",
    "std",
    "sum",
    "synchronize",
    "tanh",
    "TaskNotDoneError",
    "CompileError",
    "Tensor",
    "tensor",
    "transpose",
    "unsqueeze",
    "var",
    "where",
    "zeros",
    "zeros_like",
]

# torch.bool: bound last, since it hides Python's bool in this module.
bool = _bool_dtype  # noqa: A001
