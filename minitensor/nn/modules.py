"""nn.modules: Module, the container of parameters, and the layers built on it.

A Module registers every Parameter and every sub-Module assigned to one of
its attributes (``self.fc = Linear(4, 2)``), as torch's does, so that
``parameters()``, ``state_dict()``, ``train()``/``eval()`` and ``zero_grad()``
reach them all. Subclasses write ``__init__`` (calling ``super().__init__()``
first) and ``forward``; calling the module calls forward.

Saving: ``model.save(path)`` writes the state_dict with ``minitensor.save``
(minitensor/serialization.py: a zip of NumPy ``.npy`` files, one per
parameter and buffer, named as in ``named_parameters()``: "0.weight", ...,
and the structure in JSON), and ``model.load(path)`` reads one back into a
model of the same architecture (a plain NumPy ``.npz`` of arrays too).
``numpy.load(path)`` opens the file.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import Any, Iterator, Optional, Sequence, Union

import numpy as np

from .. import _interop, autograd, serialization
from .._dtype import DType, default_dtype, float32, float64, to_dtype
from .._creation import ones, rand, randn, tensor, zeros
from ..tensor import Tensor
from . import functional as F
from .parameter import Parameter

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Module:
    """Base class of every layer and model."""

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)

    # ---- registration ----

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() has run: call "
                f"super().__init__() first in {type(self).__name__}.__init__"
            )
        params, modules = self._parameters, self._modules
        if isinstance(value, Parameter):
            modules.pop(name, None)
            self.__dict__.pop(name, None)
            params[name] = value
        elif isinstance(value, Module):
            params.pop(name, None)
            self.__dict__.pop(name, None)
            modules[name] = value
        elif name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign a {type(value).__name__} to parameter {name!r} of "
                    f"{type(self).__name__}: wrap it in nn.Parameter(...) (or assign None)"
                )
            params[name] = None
        elif name in modules:
            if value is not None:
                raise TypeError(f"cannot assign a {type(value).__name__} to submodule {name!r}")
            modules[name] = None
        elif name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign a {type(value).__name__} to buffer {name!r}: use a Tensor")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # Called only when normal lookup fails: parameters and submodules live in dicts.
        d = self.__dict__
        if "_parameters" in d and name in d["_parameters"]:
            return d["_parameters"][name]
        if "_buffers" in d and name in d["_buffers"]:
            return d["_buffers"][name]
        if "_modules" in d and name in d["_modules"]:
            return d["_modules"][name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Optional[Parameter]) -> None:
        """Adds a parameter (or None, for an absent optional one like a bias)."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter(): expected a Parameter or None, got {type(param).__name__}")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Optional[Tensor]) -> None:
        """Adds a tensor that is part of the state (saved, loaded, converted by to())
        but is not a parameter: optimizers do not see it (e.g. input statistics)."""
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer(): expected a Tensor or None, got {type(tensor).__name__}")
        if name in self._parameters or name in self._modules:
            raise KeyError(f"register_buffer(): {name!r} is already a parameter or a submodule")
        self._buffers[name] = None if tensor is None else tensor.detach()

    def add_module(self, name: str, module: Optional[Module]) -> None:
        """Adds a submodule under name."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module(): expected a Module, got {type(module).__name__}")
        self._modules[name] = module

    # ---- traversal ----

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """This module and every submodule, depth first, each once, with dotted names."""
        seen: set[int] = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            # module._modules read directly (named_children's filter): a generator resumes per child
            children = [(f"{name}.{n}" if name else n, m) for n, m in module._modules.items() if m is not None]
            stack.extend(reversed(children))

    def modules(self) -> Iterator[Module]:
        """This module and every submodule."""
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """The direct submodules with their names."""
        for name, module in self._modules.items():
            if module is not None:
                yield name, module

    def children(self) -> Iterator[Module]:
        """The direct submodules."""
        for _, module in self.named_children():
            yield module

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """Every parameter (each once, even if shared) with its dotted name, e.g. "0.weight"."""
        seen: set[int] = set()
        modules = self.named_modules(prefix) if recurse else iter([(prefix, self)])
        for module_name, module in modules:
            for name, param in module._parameters.items():
                if param is None or id(param) in seen:
                    continue
                seen.add(id(param))
                yield (f"{module_name}.{name}" if module_name else name), param

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every parameter, each once (what an optimizer takes)."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """Every buffer with its dotted name."""
        for module_name, module in self.named_modules(prefix):
            for name, buf in module._buffers.items():
                if buf is not None:
                    yield (f"{module_name}.{name}" if module_name else name), buf

    def buffers(self) -> Iterator[Tensor]:
        """Every buffer."""
        for _, buf in self.named_buffers():
            yield buf

    # ---- modes and gradients ----

    def train(self, mode: bool = True) -> Module:
        """Sets training mode (mode=False: evaluation mode) here and in every submodule."""
        for module in self.modules():
            object.__setattr__(module, "training", bool(mode))
        return self

    def eval(self) -> Module:
        """Sets evaluation mode: Dropout becomes the identity."""
        return self.train(False)

    def zero_grad(self) -> None:
        """Sets .grad of every parameter to None (torch's default, set_to_none=True)."""
        for param in self.parameters():
            param.grad = None

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Sets requires_grad of every parameter (False freezes the module)."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """As torch's ``Module.to``: ``to(dtype)``, ``to(device)``, ``to(device,
        dtype)``, ``to(tensor)`` (its dtype and device), or the keywords
        ``device=``, ``dtype=`` (and ``non_blocking=``, ignored); returns self.

        Every float parameter and buffer becomes a new tensor of dtype (a
        float dtype; int64 and bool buffers keep theirs, as torch's). A process
        keeps every tensor on its one device (``Tensor.device``): naming it is
        accepted, naming another raises a RuntimeError with the reason.
        """
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"Module.to(): unexpected keyword arguments {sorted(kwargs)}")
        if len(args) > 2:
            raise TypeError(f"Module.to(): expected at most a device and a dtype, got {len(args)} arguments")
        for arg in args:
            if isinstance(arg, Tensor):
                device, dtype = arg.device, arg.dtype
            elif _is_device(arg):
                device = arg
            else:
                dtype = arg
        if device is not None:
            _interop.check_device(_interop.device_name(), device, "Module.to()")
        if dtype is not None:
            self._cast(to_dtype(dtype))
        return self

    def _cast(self, dtype: Any) -> None:
        """Every float parameter and buffer converted to dtype (new tensors)."""
        if not dtype.is_floating_point:
            raise TypeError(f"Module.to(): dtype must be a float dtype, got {dtype.name}")
        for module in self.modules():
            for name, param in list(module._parameters.items()):
                if param is not None and param.dtype is not dtype:
                    with autograd.no_grad():
                        module._parameters[name] = Parameter(param.to(dtype), param.requires_grad)
            for name, buf in list(module._buffers.items()):
                if buf is not None and buf.is_floating_point():
                    module._buffers[name] = buf.to(dtype)

    def cuda(self, device: Any = None) -> Module:
        """to("cuda") (or "cuda:N" for an int device): itself on the GPU build,
        refused with the reason on the CPU emulator."""
        return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)

    def cpu(self) -> Module:
        """to("cpu"): itself on the CPU emulator, refused with the reason on a GPU."""
        return self.to("cpu")

    def double(self) -> Module:
        """to(float64)."""
        return self.to(float64)

    def float(self) -> Module:
        """to(float32)."""
        return self.to(float32)

    # ---- calling ----

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # ---- state ----

    def state_dict(self) -> dict[str, Tensor]:
        """Every parameter and buffer by dotted name, detached (sharing storage, no copy)."""
        state = {name: param.detach() for name, param in self.named_parameters()}
        state.update((name, buf.detach()) for name, buf in self.named_buffers())
        return state

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copies the values of state_dict (Tensors or NumPy arrays) into the parameters
        and buffers.

        strict=True: a missing or unexpected name is an error. A shape that
        differs is always an error. Nothing is copied unless every check passes.
        """
        own = dict(self.named_parameters())
        own.update(self.named_buffers())
        missing = [name for name in own if name not in state_dict]
        unexpected = [name for name in state_dict if name not in own]
        if strict and (missing or unexpected):
            raise RuntimeError(
                f"load_state_dict() for {type(self).__name__}: missing keys {missing}, "
                f"unexpected keys {unexpected}"
            )
        values = {}
        for name, param in own.items():
            if name not in state_dict:
                continue
            value = state_dict[name]
            value = value if isinstance(value, Tensor) else tensor(np.asarray(value), dtype=param.dtype)
            if value.shape != param.shape:
                raise RuntimeError(
                    f"load_state_dict(): size mismatch for {name}: the value has shape {value.shape}, "
                    f"the model's has shape {param.shape}"
                )
            values[name] = value
        with autograd.no_grad():
            for name, value in values.items():
                own[name].copy_(value)
        return IncompatibleKeys(missing, unexpected)

    def save(self, path: Union[str, Any]) -> str:
        """Writes the state_dict with minitensor.save (".npz" is appended if
        missing: numpy.load opens it too, one array per name); returns the path
        written. Read it back with load(path)."""
        path = str(path)
        if not path.endswith(".npz"):
            path += ".npz"
        serialization.save(self.state_dict(), path)
        return path

    def load(self, path: Union[str, Any], strict: bool = True) -> Module:
        """Loads a state dict saved by save(path) or minitensor.save (or a NumPy
        .npz of arrays named as in state_dict()) into this model; returns self."""
        self.load_state_dict(serialization.load_state(path, "Module.load()"), strict=strict)
        return self

    # ---- printing ----

    def extra_repr(self) -> str:
        """The arguments shown between the parentheses of repr()."""
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): " + repr(module).replace("\n", "\n  ") for name, module in self.named_children()]
        if not lines:
            return f"{type(self).__name__}({self.extra_repr()})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"


def _is_device(arg: Any) -> bool:
    """Whether an argument of to() names a device (a string such as "cuda:0" or
    "cpu", or a torch.device) rather than a dtype (which may be a string too)."""
    if isinstance(arg, str):
        return arg.split(":")[0] in ("cpu", "cpu-emulator", "cuda")
    # torch.device has .type and .index (a NumPy dtype has .type only)
    return not isinstance(arg, DType) and hasattr(arg, "type") and hasattr(arg, "index")


def _uniform(shape: Sequence[int], bound: float, dtype: Any) -> Parameter:
    """A Parameter of uniform random values in [-bound, bound) from the package generator."""
    with autograd.no_grad():
        values = rand(tuple(shape), dtype=dtype) * (2.0 * bound) - bound
    return Parameter(values)


class Linear(Module):
    """y = x @ weight.T + bias, with weight (out_features, in_features).

    Initialized as torch's: weight and bias uniform in [-1/sqrt(in_features),
    1/sqrt(in_features)] (torch's kaiming_uniform_ with a = sqrt(5)).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: Any = None) -> None:
        super().__init__()
        _check_size(in_features, "Linear", "in_features")
        _check_size(out_features, "Linear", "out_features")
        self.in_features = in_features
        self.out_features = out_features
        dtype = default_dtype if dtype is None else to_dtype(dtype)
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = _uniform((out_features, in_features), bound, dtype)
        if bias:
            self.bias = _uniform((out_features,), bound, dtype)
        else:
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        bias = self.bias is not None
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={bias}"


class ReLU(Module):
    """max(x, 0), elementwise."""

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


class GELU(Module):
    """x * Phi(x) (F.gelu): exact, or approximate="tanh"."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    """Hyperbolic tangent, elementwise."""

    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Sigmoid(Module):
    """1 / (1 + exp(-x)), elementwise."""

    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class MSELoss(Module):
    """The mean (or sum, or elementwise: reduction) squared error, as F.mse_loss."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return F.mse_loss(input, target, self.reduction)


class CrossEntropyLoss(Module):
    """Cross-entropy of logits (N, C) or (N, C, d1, ...) against class indices, as
    F.cross_entropy (weight, ignore_index and label_smoothing as torch's)."""

    def __init__(self, weight: Optional[Tensor] = None, *, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__()
        if weight is not None and not isinstance(weight, Tensor):
            raise TypeError(f"CrossEntropyLoss(): weight must be a Tensor of one weight per class, got "
                            f"{weight!r} (the others are keyword arguments: reduction={weight!r}?)")
        self.register_buffer("weight", weight)  # a buffer, as torch's
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002 - torch's name
        return F.cross_entropy(input, target, self.reduction, weight=self.weight, ignore_index=self.ignore_index,
                               label_smoothing=self.label_smoothing)


class Dropout(Module):
    """In training mode, zeroes each element with probability p and scales the rest by
    1/(1-p); in evaluation mode (model.eval()), the identity."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout(): p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class LayerNorm(Module):
    """Normalizes over the last dims (normalized_shape), then applies weight (ones)
    and bias (zeros) elementwise when elementwise_affine."""

    def __init__(self, normalized_shape: Union[int, Sequence[int]], eps: float = 1e-5,
                 elementwise_affine: bool = True, dtype: Any = None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        dtype = default_dtype if dtype is None else to_dtype(dtype)
        if elementwise_affine:
            self.weight = Parameter(ones(self.normalized_shape, dtype=dtype))
            self.bias = Parameter(zeros(self.normalized_shape, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.weight is not None}"


def _check_size(value: Any, module: str, name: str) -> None:
    """A layer size: a non-negative int (the error names the argument, as torch's do)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{module}(): {name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{module}(): {name} must be non-negative, got {value}")


class Flatten(Module):
    """Merges dims start_dim..end_dim (by default every dim after the batch's)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)


class Embedding(Module):
    """A table of num_embeddings vectors of size embedding_dim (initialized N(0, 1), as
    torch); calling it with indices of any shape gives indices.shape + (embedding_dim,).
    padding_idx, as torch's: that row starts as zeros and gets no gradient."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: Optional[int] = None, *,
                 dtype: Any = None) -> None:
        super().__init__()
        _check_size(num_embeddings, "Embedding", "num_embeddings")
        _check_size(embedding_dim, "Embedding", "embedding_dim")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = F._padding_idx(padding_idx, num_embeddings, "Embedding()")
        dtype = default_dtype if dtype is None else to_dtype(dtype)
        self.weight = Parameter(randn(num_embeddings, embedding_dim, dtype=dtype))
        if self.padding_idx is not None:
            with autograd.no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, indices: Any) -> Tensor:
        return F.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class Sequential(Module):
    """Calls its modules one after another: Sequential(Linear(64, 128), ReLU(), Linear(128, 10))."""

    def __init__(self, *modules: Module) -> None:
        super().__init__()
        for i, module in enumerate(modules):
            self.add_module(str(i), module)

    def append(self, module: Module) -> Sequential:
        """Adds a module at the end."""
        self.add_module(str(len(self._modules)), module)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, i: Union[int, slice]) -> Any:
        modules = list(self._modules.values())
        if isinstance(i, slice):
            return Sequential(*modules[i])
        return modules[i]

    def forward(self, x: Any) -> Any:
        for module in self._modules.values():
            x = module(x)
        return x
