"""serialization: ``mt.save(obj, f)`` and ``mt.load(f)``, as torch.save and
torch.load, without pickle.

What can be saved: tensors (and Parameters), dicts, lists and tuples of
them, nested, and the plain values a state dict holds beside tensors (str,
int, float, bool, None), e.g. ``{"model": model.state_dict(), "step": 10}``.
Anything else is refused with a TypeError naming where it is.

The file is a zip archive (the layout of NumPy's ``.npz``, which
``numpy.load`` opens too) of

- one ``.npy`` file per tensor, written by NumPy without pickle: the values
  in row-major order (a non-contiguous view is saved as its contiguous
  copy), their dtype (float32, float64, int64 or bool) and shape;
- ``minitensor.json``: the format's name and version and the object's
  structure, in which a tensor is ``{"tensor": entry, "dtype", "shape",
  "requires_grad", "parameter"}``, a dict ``{"dict": [[key, value], ...]}``
  (keys in order, any JSON value), a list ``{"list": [...]}``, a tuple
  ``{"tuple": [...]}`` and a plain value ``{"value": v}``.

A tensor's entry is named after where it is (``"0.weight.npy"`` in a state
dict, ``"model/0.weight.npy"`` nested), so ``numpy.load`` shows familiar
names. One tensor object saved twice is stored once, and loads back as one
object (views of one storage are not: each is saved as its own copy).

Loading runs no code from the file: JSON, and ``.npy`` files read with
``allow_pickle=False``. A file that is not a zip archive, has no
``minitensor.json``, or whose arrays disagree with it (dtype, shape, size)
is refused with an InvalidArgumentError that says what is wrong.
"""

from __future__ import annotations

import json
import math
import os
import re
import zipfile
from typing import IO, Any, Union

import numpy as np

from . import _interop
from ._creation import tensor
from ._dtype import to_dtype
from ._errors import InvalidArgumentError
from .nn.parameter import Parameter
from .tensor import Tensor

FORMAT = "minitensor"
VERSION = 1
STRUCTURE = "minitensor.json"
_DTYPES = ("float32", "float64", "int64", "bool")
# The most an .npy header takes beyond the data (NumPy pads it to 64 bytes; version 2 allows 4 GiB,
# but NumPy writes a few hundred bytes for any shape a tensor can have).
_HEADER_BYTES = 65536

File = Union[str, "os.PathLike[str]", IO[bytes]]


# ---- save ----------------------------------------------------------------------------


class _Writer:
    """Writes the tensors of one object into a zip archive and builds its structure."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self.entries: set[str] = set()
        self.saved: dict[int, dict[str, Any]] = {}  # id(tensor) -> its node, to store a tensor once
        self.open: set[int] = set()  # the containers being written (a container inside itself is refused)

    def node(self, obj: Any, path: list[str], where: str) -> dict[str, Any]:
        """The structure of obj, found at where (for messages); its tensors written."""
        if isinstance(obj, Tensor):
            return self.tensor(obj, path)
        if _plain(obj):
            return {"value": obj}
        if not isinstance(obj, (dict, list, tuple)):
            raise TypeError(
                f"save(): cannot save a {type(obj).__name__} (at {where}): minitensor saves tensors, dicts, lists "
                f"and tuples of them, and str, int, float, bool and None (convert an array with mt.tensor)")
        if id(obj) in self.open:
            raise ValueError(f"save(): {where} contains itself; a structure with a cycle cannot be saved")
        self.open.add(id(obj))
        if isinstance(obj, dict):
            items = []
            for key, value in obj.items():
                if not _plain(key):
                    raise TypeError(f"save(): the key {key!r} in {where} is a {type(key).__name__}; "
                                    f"keys must be str, int, float, bool or None")
                items.append([key, self.node(value, path + [str(key)], f"{where}[{key!r}]")])
            result: dict[str, Any] = {"dict": items}
        else:
            kind = "list" if isinstance(obj, list) else "tuple"
            result = {kind: [self.node(v, path + [str(i)], f"{where}[{i}]") for i, v in enumerate(obj)]}
        self.open.discard(id(obj))
        return result

    def tensor(self, t: Tensor, path: list[str]) -> dict[str, Any]:
        if id(t) in self.saved:
            return self.saved[id(t)]
        entry = self.entry_name(path)
        values = t.detach().numpy()  # a contiguous copy, whatever t's strides
        with self.archive.open(entry + ".npy", "w", force_zip64=True) as out:
            np.lib.format.write_array(out, values, allow_pickle=False)
        node = {"tensor": entry, "dtype": t.dtype.name, "shape": list(t.shape),
                "requires_grad": bool(t.requires_grad), "parameter": isinstance(t, Parameter)}
        self.saved[id(t)] = node
        return node

    def entry_name(self, path: list[str]) -> str:
        """A file name for the tensor at path: its keys joined by "/", other
        characters than letters, digits, "._-" replaced, unique in the archive."""
        parts = [re.sub(r"[^A-Za-z0-9._-]", "_", p) for p in path] or ["tensor"]
        parts = ["_" if p in ("", ".", "..") else p for p in parts]
        name, n = "/".join(parts), 1
        while name in self.entries:
            n += 1
            name = f"{'/'.join(parts)}~{n}"
        self.entries.add(name)
        return name


def save(obj: Any, f: File) -> None:
    """Saves obj (a tensor, or dicts, lists and tuples of tensors and plain
    values, e.g. a state dict) to f: a path or a binary file object opened
    for writing. As torch.save, without pickle (see the module docstring)."""
    if not isinstance(f, (str, os.PathLike)) and not hasattr(f, "write"):
        raise TypeError(f"save(): f must be a path or a binary file object, got {type(f).__name__}")
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as archive:
        root = _Writer(archive).node(obj, [], "obj")
        document = {"format": FORMAT, "version": VERSION, "object": root}
        archive.writestr(STRUCTURE, json.dumps(document))


# ---- load ----------------------------------------------------------------------------


def _plain(value: Any) -> bool:
    """Whether value is one of the plain values a structure may hold (and a dict key may be)."""
    return value is None or isinstance(value, (str, bool, int, float))


class _Corrupt(Exception):
    """What is wrong with the file (turned into an InvalidArgumentError naming it)."""


def _describe(f: Any) -> str:
    return repr(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else f"the {type(f).__name__}"


def _refusal(f: Any, reason: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"load(): {_describe(f)} is not a file that minitensor.save wrote: {reason}")


def _open(f: File) -> zipfile.ZipFile:
    if not isinstance(f, (str, os.PathLike)) and not hasattr(f, "read"):
        raise TypeError(f"load(): f must be a path or a binary file object, got {type(f).__name__}")
    try:
        return zipfile.ZipFile(f, "r")
    except zipfile.BadZipFile as e:
        raise _refusal(f, f"it is not a zip archive, or a truncated one ({e})") from None


class _Reader:
    """Rebuilds an object from an archive's structure, reading its tensors."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self.loaded: dict[str, Tensor] = {}

    def node(self, node: Any) -> Any:
        if isinstance(node, dict) and "tensor" in node:
            return self.tensor(node)
        if not isinstance(node, dict) or len(node) != 1:
            raise _Corrupt(f"{STRUCTURE} holds {str(node)[:80]!r}, which is no node of the format")
        (kind, body), = node.items()
        if kind == "value":
            if not _plain(body):
                raise _Corrupt(f"{STRUCTURE} holds a value of type {type(body).__name__}")
            return body
        if kind == "dict" and isinstance(body, list):
            if not all(isinstance(item, list) and len(item) == 2 and _plain(item[0]) for item in body):
                raise _Corrupt(f"{STRUCTURE}: a dict's items are not [key, value] pairs with plain keys")
            return {key: self.node(value) for key, value in body}
        if kind in ("list", "tuple") and isinstance(body, list):
            values = [self.node(v) for v in body]
            return values if kind == "list" else tuple(values)
        raise _Corrupt(f"{STRUCTURE} holds an unknown node {kind!r}")

    def tensor(self, node: dict[str, Any]) -> Tensor:
        entry, dtype, shape = node.get("tensor"), node.get("dtype"), node.get("shape")
        if not isinstance(entry, str) or dtype not in _DTYPES or not isinstance(shape, list) \
                or not all(isinstance(n, int) and n >= 0 for n in shape):
            raise _Corrupt(f"{STRUCTURE} describes a tensor as {str(node)[:120]}")
        if entry in self.loaded:
            return self.loaded[entry]
        try:
            info = self.archive.getinfo(entry + ".npy")
        except KeyError:
            raise _Corrupt(f"the archive has no {entry}.npy, which {STRUCTURE} names") from None
        nbytes = math.prod(shape) * np.dtype(dtype).itemsize
        if not nbytes <= info.file_size <= nbytes + _HEADER_BYTES:
            raise _Corrupt(f"{entry}.npy has {info.file_size} bytes, but a {dtype} tensor of shape "
                           f"{tuple(shape)} takes {nbytes}")
        try:
            with self.archive.open(info) as data:
                values = np.lib.format.read_array(data, allow_pickle=False)
        except (ValueError, EOFError, OSError, zipfile.BadZipFile) as e:
            raise _Corrupt(f"{entry}.npy cannot be read ({e})") from None
        if values.dtype != np.dtype(dtype) or list(values.shape) != shape:
            raise _Corrupt(f"{entry}.npy holds {values.dtype} of shape {values.shape}, but {STRUCTURE} "
                           f"says {dtype} of shape {tuple(shape)}")
        t = tensor(values, dtype=to_dtype(dtype))
        requires_grad = bool(node.get("requires_grad")) and t.is_floating_point()
        t = Parameter(t, requires_grad) if node.get("parameter") else t.requires_grad_(requires_grad)
        self.loaded[entry] = t
        return t


def _structure(archive: zipfile.ZipFile, f: Any) -> dict[str, Any]:
    """The document of minitensor.json, checked to be of this format and version."""
    names = archive.namelist()
    if STRUCTURE not in names:
        if any(name.endswith("data.pkl") for name in names):
            hint = ("it looks like torch.save's, whose tensors are pickles: minitensor never unpickles; "
                    "save the state dict's tensors as NumPy arrays (np.savez) and load them with model.load(path)")
        elif names and all(name.endswith(".npy") for name in names):
            hint = "it is a NumPy .npz file: read it with numpy.load(path), or into a model with model.load(path)"
        else:
            hint = f"the zip archive has no {STRUCTURE}"
        raise _refusal(f, hint)
    try:
        document = json.loads(archive.read(STRUCTURE).decode("utf-8"))
    except (ValueError, RecursionError, zipfile.BadZipFile) as e:
        raise _refusal(f, f"its {STRUCTURE} cannot be read ({type(e).__name__}: {e})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT or "object" not in document:
        raise _refusal(f, f"its {STRUCTURE} does not name the format {FORMAT!r}")
    if document.get("version") != VERSION:
        raise _refusal(f, f"it is version {document.get('version')!r} of the format; this minitensor "
                          f"reads version {VERSION} (a newer minitensor wrote it?)")
    return document


def load(f: File, map_location: Any = None, *, weights_only: bool = True) -> Any:
    """The object that save() wrote to f (a path or a binary file object open
    for reading): its tensors as new tensors on this process's device, with
    their dtype, shape and requires_grad; Parameters as Parameters. No code
    from the file runs (see the module docstring); a file that save() did not
    write is refused with an InvalidArgumentError saying why.

    map_location, as torch's, may name this process's device ("cpu" on the
    emulator, "cuda" on the GPU; another is refused with the reason, as by
    Tensor.to). weights_only is accepted for torch's sake: loading is always
    weights-only here, whatever it says.
    """
    if map_location is not None:
        if not isinstance(map_location, str) and not hasattr(map_location, "type"):
            raise TypeError(f"load(): map_location must name a device (a str or a torch.device), got "
                            f"{type(map_location).__name__}; every tensor loads onto this process's device")
        _interop.check_device(_interop.device_name(), map_location, "load()")
    with _open(f) as archive:
        document = _structure(archive, f)
        try:
            return _Reader(archive).node(document["object"])
        except _Corrupt as e:
            raise _refusal(f, str(e)) from None
        except RecursionError:
            raise _refusal(f, f"its {STRUCTURE} nests too deeply") from None


def load_state(f: File, func: str) -> dict[str, Any]:
    """The name -> values of a state dict file, for Module.load: one that
    save() wrote (a dict of str keys to tensors), or a plain NumPy .npz of
    arrays (the files Module.save wrote before minitensor.save existed, or
    np.savez's), read without pickle."""
    with _open(f) as archive:
        names = archive.namelist()
        if STRUCTURE not in names:
            if not names or not all(name.endswith(".npy") for name in names):
                _structure(archive, f)  # raises, naming what the file is
            state = {}
            for name in names:
                try:
                    with archive.open(name) as data:
                        state[name[:-len(".npy")]] = np.lib.format.read_array(data, allow_pickle=False)
                except (ValueError, EOFError, OSError, zipfile.BadZipFile) as e:
                    raise _refusal(f, f"{name} cannot be read ({e})") from None
            return state
    state = load(f)
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, Tensor) for k, v in state.items()):
        raise InvalidArgumentError(f"{func}: {_describe(f)} holds a {type(state).__name__}, not a state dict "
                                   f"(names to tensors); read it with mt.load(path)")
    return state
