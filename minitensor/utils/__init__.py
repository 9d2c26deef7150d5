"""minitensor.utils: helpers around the library, as torch.utils (data loading)."""

from . import data

__all__ = ["data"]
