"""The exceptions minitensor raises.

Every failure reported by the C engine becomes a ``MinitensorError`` (a
``RuntimeError``, as in torch) carrying the engine's message. The statuses
that correspond to a familiar Python error also derive from it, so that both
``except ValueError`` and ``except RuntimeError`` catch a shape mismatch:

=====================  ===============================  =====================
C status               exception                        also a
=====================  ===============================  =====================
MT_ERR_INVALID_ARGUMENT ``InvalidArgumentError``         ``ValueError``
MT_ERR_SHAPE           ``ShapeError``                   ``ValueError``
MT_ERR_DIM             ``DimError``                     ``IndexError``
MT_ERR_DTYPE           ``DTypeError``                   ``TypeError``
MT_ERR_OUT_OF_MEMORY   ``OutOfMemoryError``             (RuntimeError)
MT_ERR_CUDA            ``CudaError``                    (RuntimeError)
MT_ERR_NO_DEVICE       ``NoDeviceError``                (RuntimeError)
MT_ERR_NOT_IMPLEMENTED ``TaskNotDoneError``             ``NotImplementedError``
=====================  ===============================  =====================

The Python layers raise the same classes for the errors they catch before
calling C (a bad shape is reported with both shapes, a bad dim with the dim
and the rank), so a message never depends on which layer noticed.
"""


class MinitensorError(RuntimeError):
    """Base class of every error raised by minitensor or its C engine."""


class InvalidArgumentError(MinitensorError, ValueError):
    """A bad argument value (MT_ERR_INVALID_ARGUMENT)."""


class ShapeError(MinitensorError, ValueError):
    """Shapes that do not broadcast, multiply or fit (MT_ERR_SHAPE)."""


class DimError(MinitensorError, IndexError):
    """A dimension (or index) out of range (MT_ERR_DIM)."""


class DTypeError(MinitensorError, TypeError):
    """An unknown or mismatched dtype (MT_ERR_DTYPE)."""


class OutOfMemoryError(MinitensorError):
    """The device ran out of memory (MT_ERR_OUT_OF_MEMORY)."""


class IntegerOverflowError(InvalidArgumentError, OverflowError):
    """A number that int64 cannot hold, given to a creation function (tensor,
    arange): refused, not wrapped. torch raises a RuntimeError here, or a
    ValueError for a Python integer: this is both, and an OverflowError."""


class CudaError(MinitensorError):
    """A CUDA (or emulated CUDA) call failed (MT_ERR_CUDA)."""


class NoDeviceError(MinitensorError):
    """The CUDA build found no usable GPU (MT_ERR_NO_DEVICE)."""


class TaskNotDoneError(MinitensorError, NotImplementedError):
    """A course task left as a stub in a student handout (MT_ERR_NOT_IMPLEMENTED).

    The message reads "task <id> is not done: <function> in <file>"; the op
    failed before it launched any kernel. Python stubs raise a plain
    ``NotImplementedError`` with the same words.
    """


class CompileError(MinitensorError):
    """A kernel given to ``minitensor.cuda.compile`` did not compile.

    The message holds the compiler's log (NVRTC's, or the host compiler's on
    the emulator), whose line numbers are those of the source as written;
    ``log`` is the log alone.
    """

    def __init__(self, message: str, log: str = "") -> None:
        super().__init__(message)
        self.log = log
