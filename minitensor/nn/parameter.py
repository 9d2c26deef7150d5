"""Parameter: a Tensor that a Module registers as one of its learnable weights."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor


class Parameter(Tensor):
    """A leaf Tensor with requires_grad=True (by default) that Modules collect.

    ``Parameter(t)`` shares t's storage (no copy), as torch's does. Assigning a
    Parameter to an attribute of a Module registers it, so it appears in
    ``parameters()`` and ``state_dict()``. Results of ops on a Parameter are
    plain Tensors.
    """

    def __init__(self, data: Tensor, requires_grad: bool = True) -> None:
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): data must be a Tensor, got {type(data).__name__}")
        super().__init__(data._storage, data.shape, data.strides, data._offset, data.dtype, requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("Parameters cannot be pickled; save a module with module.save(path)")
