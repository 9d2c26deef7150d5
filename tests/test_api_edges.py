"""The edges of the API (issue 28): mt.save / mt.load, mt.from_numpy, device=
on the creation functions, Module.to(device) / cuda() / cpu(), and the axis=
alias of dim=.

Each behaves as torch's does, or refuses with a message; the tests run on
whichever backend is in use (the device names come from ``Tensor.device``).
"""

from __future__ import annotations

import gc
import io
import json
import pickle
import warnings
import zipfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from helpers import strided_views

import minitensor as mt
from minitensor import nn

OWN = mt.ones(1).device  # "cpu-emulator" or "cuda:N"
OWN_SHORT = "cpu" if OWN == "cpu-emulator" else "cuda"
OTHER = "cuda" if OWN == "cpu-emulator" else "cpu"
EMULATOR = mt.backend() == "emulator"


class FakeTorchDevice:
    """What minitensor reads of a torch.device: .type and .index."""

    def __init__(self, type: str, index: int | None = None) -> None:  # noqa: A002 - torch's name
        self.type, self.index = type, index


# ---- 1. mt.save / mt.load ----------------------------------------------------------


def _views() -> dict[str, mt.Tensor]:
    """Tensors of every dtype, including non-contiguous views, 0-d and empty ones."""
    base = mt.arange(24, dtype=mt.float64).reshape(2, 3, 4)
    return {
        "f32": mt.randn(3, 5),
        "f64_transposed": base.permute(2, 0, 1),
        "f64_sliced": base[:, ::2, 1:],
        "f32_expanded": mt.randn(3, 1).expand(3, 4),
        "i64": mt.tensor([[-(2**62), 5, 2**40]]),
        "i64_column": mt.arange(12).reshape(3, 4)[:, 1],
        "bool": mt.tensor([True, False, True]).reshape(3, 1).expand(3, 2),
        "scalar": mt.tensor(2.5, dtype=mt.float64),
        "empty": mt.zeros(0, 3, dtype=mt.int64),
    }


@pytest.mark.parametrize("to_file", [True, False], ids=["path", "file object"])
def test_save_load_round_trips_dtype_shape_and_values_of_views(tmp_path, to_file):
    obj = _views()
    target = tmp_path / "t.mt" if to_file else io.BytesIO()
    mt.save(obj, target)
    if not to_file:
        target.seek(0)
    back = mt.load(target)
    assert list(back) == list(obj)
    for name, t in obj.items():
        got = back[name]
        assert got.dtype is t.dtype and got.shape == t.shape, name
        assert got.is_contiguous(), name  # views are saved as their contiguous copy
        assert np.array_equal(got.numpy(), t.numpy()), name


ALL_DTYPES = st.sampled_from([mt.float32, mt.float64, mt.int64, mt.bool])


@given(data=st.data())
def test_save_load_round_trips_random_strided_views(data):
    t, _ = data.draw(strided_views(dtype=data.draw(ALL_DTYPES), low=-50, high=50))
    buffer = io.BytesIO()
    mt.save(t, buffer)
    buffer.seek(0)
    back = mt.load(buffer)
    assert back.dtype is t.dtype and back.shape == t.shape and back.is_contiguous()
    assert np.array_equal(back.numpy(), t.numpy())


def test_save_load_nested_structures_and_plain_values(tmp_path):
    w = mt.randn(2, 2)
    obj = {"model": {"w": w, "same": w}, "steps": [1, 2.5, "adam", None, True],
           "pair": (mt.tensor([1, 2]), {"deep": [mt.tensor(False)]}), 3: "int key"}
    path = tmp_path / "nested.mt"
    mt.save(obj, path)
    back = mt.load(str(path))
    assert back["steps"] == [1, 2.5, "adam", None, True] and back[3] == "int key"
    assert isinstance(back["pair"], tuple) and back["pair"][0].tolist() == [1, 2]
    assert back["pair"][1]["deep"][0].dtype is mt.bool and back["pair"][1]["deep"][0].item() is False
    assert np.array_equal(back["model"]["w"].numpy(), w.numpy())
    assert back["model"]["same"] is back["model"]["w"]  # one tensor saved twice loads as one
    with np.load(path) as data:  # NumPy opens the file; entries are named after their keys
        assert {"model/w", "pair/0", "pair/1/deep/0", "minitensor.json"} <= set(data.files)


def test_save_load_keeps_requires_grad_and_parameters(tmp_path):
    p = nn.Parameter(mt.randn(3))
    frozen = nn.Parameter(mt.randn(3), requires_grad=False)
    leaf = mt.randn(2, requires_grad=True)
    mt.save([p, frozen, leaf, leaf * 2, mt.ones(2)], tmp_path / "g.mt")
    p2, frozen2, leaf2, product2, plain2 = mt.load(tmp_path / "g.mt")
    assert isinstance(p2, nn.Parameter) and p2.requires_grad
    assert isinstance(frozen2, nn.Parameter) and not frozen2.requires_grad
    assert not isinstance(leaf2, nn.Parameter) and leaf2.requires_grad and leaf2.is_leaf
    assert product2.requires_grad and product2.is_leaf  # as torch: the graph is not saved
    assert not plain2.requires_grad


def test_state_dict_round_trip_and_module_save_use_the_same_format(tmp_path):
    mt.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    mt.save(model.state_dict(), tmp_path / "sd.mt")
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    fresh.load_state_dict(mt.load(tmp_path / "sd.mt"))
    x = mt.randn(5, 3)
    assert np.array_equal(fresh(x).numpy(), model(x).numpy())
    path = model.save(tmp_path / "model")  # Module.save writes mt.save's format
    assert sorted(mt.load(path)) == sorted(model.state_dict())
    assert nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).load(tmp_path / "sd.mt")(x).shape == (5, 2)


def test_module_load_still_reads_a_plain_npz(tmp_path):
    model = nn.Linear(2, 1)
    np.savez(tmp_path / "old.npz", weight=np.full((1, 2), 3.0, np.float32), bias=np.zeros(1, np.float32))
    model.load(tmp_path / "old.npz")
    assert model.weight.tolist() == [[3.0, 3.0]]
    with pytest.raises(ValueError, match="a NumPy .npz file: read it with numpy.load"):
        mt.load(tmp_path / "old.npz")  # mt.load wants the structure


def _saved_bytes(obj) -> bytes:
    buf = io.BytesIO()
    mt.save(obj, buf)
    return buf.getvalue()


def _rewrite(raw: bytes, replace: dict[str, bytes]) -> bytes:
    """raw's zip archive with some entries' contents replaced."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, replace.get(name, src.read(name)))
    return out.getvalue()


class _Boom:
    """Unpickling this runs code; mt.load must never do it."""

    def __reduce__(self):
        return (exec, ("import builtins; builtins.MT_PICKLE_RAN = True",))


def _pickled_npy() -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([_Boom()], dtype=object), allow_pickle=True)
    return buf.getvalue()


def _bad_files() -> dict[str, tuple[bytes, str]]:
    raw = _saved_bytes({"w": mt.arange(64, dtype=mt.float32)})
    structure = json.loads(zipfile.ZipFile(io.BytesIO(raw)).read("minitensor.json"))
    def lying(shape: list[int]) -> bytes:
        node = dict(structure["object"]["dict"][0][1], shape=shape)
        return json.dumps(dict(structure, object={"dict": [["w", node]]})).encode()

    torch_like = io.BytesIO()
    with zipfile.ZipFile(torch_like, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"w": 1}))
    flipped = bytearray(raw)
    flipped[raw.index(np.arange(64, dtype=np.float32)[40:48].tobytes())] ^= 0xFF  # a byte of the values
    return {
        "not a zip": (b"minitensor? no", "not a zip archive"),
        "truncated": (raw[: len(raw) // 2], "not a zip archive, or a truncated one"),
        "bit flip": (bytes(flipped), "cannot be read"),
        "torch.save": (torch_like.getvalue(), "torch.save's, whose tensors are pickles"),
        "other zip": (_rewrite(_saved_bytes([]), {"minitensor.json": b"{}"}), "does not name the format"),
        "bad json": (_rewrite(raw, {"minitensor.json": b"{not json"}), "cannot be read"),
        "newer version": (_rewrite(raw, {"minitensor.json": json.dumps(dict(structure, version=99)).encode()}),
                          "version 99"),
        "shape lies": (_rewrite(raw, {"minitensor.json": lying([8, 9])}), "holds float32 of shape (64,)"),
        "size lies": (_rewrite(raw, {"minitensor.json": lying([1000, 1000])}), "takes 4000000"),
        "pickled array": (_rewrite(raw, {"w.npy": _pickled_npy()}), "w.npy"),
    }


@pytest.mark.parametrize("case", sorted(_bad_files()))
def test_load_refuses_corrupt_and_foreign_files_and_never_unpickles(case):
    raw, message = _bad_files()[case]
    with pytest.raises(mt.InvalidArgumentError, match="is not a file that minitensor.save wrote") as info:
        mt.load(io.BytesIO(raw))
    assert message in str(info.value)
    import builtins

    assert not getattr(builtins, "MT_PICKLE_RAN", False)


def test_load_takes_torchs_map_location_for_this_device(tmp_path):
    mt.save(mt.ones(2), tmp_path / "t.mt")
    assert mt.load(tmp_path / "t.mt", map_location=OWN_SHORT, weights_only=True).tolist() == [1.0, 1.0]
    assert mt.load(tmp_path / "t.mt", FakeTorchDevice(OWN_SHORT)).device == OWN
    with pytest.raises(RuntimeError, match=rf"load\(\): this process keeps every tensor on {OWN}"):
        mt.load(tmp_path / "t.mt", map_location=OTHER)
    with pytest.raises(TypeError, match="map_location must name a device"):
        mt.load(tmp_path / "t.mt", map_location={"cuda:0": "cpu"})


def test_save_refuses_what_it_cannot_store():
    with pytest.raises(TypeError, match=r"cannot save a ndarray \(at obj\['a'\]\[1\]\)"):
        mt.save({"a": [mt.ones(1), np.ones(2)]}, io.BytesIO())
    with pytest.raises(TypeError, match="keys must be str"):
        mt.save({(1, 2): mt.ones(1)}, io.BytesIO())
    loop: list = [mt.ones(1)]
    loop.append(loop)
    with pytest.raises(ValueError, match="contains itself"):
        mt.save(loop, io.BytesIO())
    with pytest.raises(TypeError, match="a path or a binary file object"):
        mt.load(42)


# ---- 2. mt.from_numpy ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_from_numpy_keeps_dtype_shape_and_values(dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 3).astype(dtype)
    for view in (a, a[:, ::2, 1:], a.transpose(2, 0, 1), a[1, 2, 3, ...], a[:0]):  # a[..., ...]: 0-d
        t = mt.from_numpy(view)
        assert t.dtype is mt.tensor(np.asarray(view)).dtype and t.shape == np.shape(view)
        assert np.array_equal(t.numpy(), view)


@given(data=st.data())
def test_from_numpy_of_random_numpy_views(data):
    _, view = data.draw(strided_views(low=-50, high=50))  # a NumPy view (permuted, sliced, expanded)
    view = np.asarray(view).astype(data.draw(st.sampled_from([np.float32, np.float64, np.int64, np.bool_])))
    view = view[::2] if view.ndim else view  # astype copies: slice again, for strides that are not C order
    t = mt.from_numpy(view)
    assert t.shape == view.shape and np.array_equal(t.numpy(), view)
    if EMULATOR and view.size:
        assert t.data_ptr() == view.ctypes.data
        for n, got, stride in zip(view.shape, t.strides, view.strides):  # a size-1 dim's stride is never used
            assert n == 1 or got * view.itemsize == stride


def test_from_numpy_shares_memory_on_the_emulator_and_copies_on_a_gpu():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    view = a[:, 1::2]
    t = mt.from_numpy(view)
    if EMULATOR:  # host memory: the array's own bytes, strides kept
        assert t.data_ptr() == view.ctypes.data and t.strides == (4, 2)
        t.mul_(10.0)  # a kernel writes, NumPy sees it
        assert a[0].tolist() == [0.0, 10.0, 2.0, 30.0]
        a[2, 3] = -1.0  # NumPy writes, the tensor sees it
        assert t[2, 1].item() == -1.0
        del a, view
        gc.collect()
        assert t[2, 1].item() == -1.0  # the tensor keeps the array alive
    else:  # GPU memory cannot be NumPy's: a copy (docs/api.md)
        t.mul_(10.0)
        assert a[0].tolist() == [0.0, 1.0, 2.0, 3.0]
        assert t[0].tolist() == [10.0, 30.0]


@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.uint8, np.complex64, object])
def test_from_numpy_refuses_unsupported_dtypes_naming_them(dtype):
    with pytest.raises(mt.DTypeError, match=f"type numpy.{np.dtype(dtype)}.*float32, float64, int64 and bool"):
        mt.from_numpy(np.zeros(3, dtype=dtype))


def test_from_numpy_refuses_what_torch_refuses():
    with pytest.raises(TypeError, match=r"expected np.ndarray \(got list\)"):
        mt.from_numpy([1.0, 2.0])
    with pytest.raises(ValueError, match="negative stride"):
        mt.from_numpy(np.arange(4.0)[::-1])
    with pytest.raises(ValueError, match="byte order"):
        mt.from_numpy(np.arange(4.0).astype(">f8"))


def test_from_numpy_of_a_read_only_array_warns_and_copies():
    a = np.arange(4.0)
    a.flags.writeable = False
    with pytest.warns(UserWarning, match="not writable.*the tensor is a copy"):
        t = mt.from_numpy(a)
    assert t.data_ptr() != a.ctypes.data and t.tolist() == [0.0, 1.0, 2.0, 3.0]
    t.add_(1.0)
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a writable array: no warning
        mt.from_numpy(np.arange(4.0))


# ---- 3. device= on the creation functions --------------------------------------------

CREATION = {
    "tensor": lambda **kw: mt.tensor([1.0, 2.0], **kw),
    "zeros": lambda **kw: mt.zeros(2, 3, **kw),
    "ones": lambda **kw: mt.ones(2, **kw),
    "empty": lambda **kw: mt.empty(2, **kw),
    "full": lambda **kw: mt.full((2,), 7, **kw),
    "arange": lambda **kw: mt.arange(0, 6, 2, **kw),
    "eye": lambda **kw: mt.eye(3, **kw),
    "rand": lambda **kw: mt.rand(2, **kw),
    "randn": lambda **kw: mt.randn(2, **kw),
    "randint": lambda **kw: mt.randint(0, 5, (3,), **kw),
    "randperm": lambda **kw: mt.randperm(4, **kw),
    "zeros_like": lambda **kw: mt.zeros_like(mt.ones(2), **kw),
    "ones_like": lambda **kw: mt.ones_like(mt.ones(2), **kw),
    "full_like": lambda **kw: mt.full_like(mt.ones(2), 3.0, **kw),
    "empty_like": lambda **kw: mt.empty_like(mt.ones(2), **kw),
    "rand_like": lambda **kw: mt.rand_like(mt.ones(2), **kw),
    "randn_like": lambda **kw: mt.randn_like(mt.ones(2), **kw),
    "asarray": lambda **kw: mt.asarray(mt.ones(2), **kw),
}


@pytest.mark.parametrize("func", sorted(CREATION))
def test_creation_accepts_the_process_device(func):
    plain = CREATION[func]()
    for device in (None, OWN, OWN_SHORT, FakeTorchDevice(OWN_SHORT)):
        t = CREATION[func](device=device)
        assert t.shape == plain.shape and t.dtype is plain.dtype and t.device == OWN


@pytest.mark.parametrize("func", sorted(CREATION))
def test_creation_refuses_another_device_with_the_reason(func):
    with pytest.raises(RuntimeError, match=rf"{func}\(\): this process keeps every tensor on {OWN}; "
                                           rf"it cannot put one on {OTHER}"):
        CREATION[func](device=OTHER)
    with pytest.raises(RuntimeError, match=rf"{func}\(\): unknown device 'tpu'"):
        CREATION[func](device="tpu")


# ---- 4. Module.to(device), cuda(), cpu() -----------------------------------------------


def test_module_to_takes_torchs_forms_and_returns_self():
    model = nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2))
    assert model.to(OWN) is model and model.to(OWN_SHORT) is model
    assert model.to(FakeTorchDevice(OWN_SHORT)) is model
    assert model.to(OWN_SHORT, mt.float64) is model and model[0].weight.dtype is mt.float64
    assert model.to(device=OWN, dtype="float32") is model and model[1].weight.dtype is mt.float32
    assert model.to(np.dtype("float64")) is model and model[0].bias.dtype is mt.float64
    assert model.to(mt.ones(1)) is model and model[0].weight.dtype is mt.float32  # a tensor's dtype and device
    assert model.to(dtype=mt.float64, non_blocking=True)[0].weight.dtype is mt.float64
    assert (model.cpu() if EMULATOR else model.cuda()) is model
    with pytest.raises(TypeError, match="float dtype, got int64"):
        model.to(mt.int64)
    with pytest.raises(TypeError, match="unexpected keyword"):
        model.to(memory_format="channels_last")


def test_module_to_refuses_another_device_with_the_reason():
    model = nn.Linear(2, 2)
    for call in (lambda: model.to(OTHER), lambda: model.to(OTHER, mt.float64),
                 lambda: model.cuda() if EMULATOR else model.cpu()):
        with pytest.raises(RuntimeError, match=rf"Module.to\(\): this process keeps every tensor on {OWN}"):
            call()
    assert model.weight.dtype is mt.float32  # nothing converted when the device is refused


# ---- 5. axis=, NumPy's name for dim ----------------------------------------------------

X = np.random.default_rng(5).standard_normal((3, 4, 5)).astype(np.float32)
# name -> (call with the dim as dim=, as axis=); each as a method and as a function.
AXIS_CASES = {
    "sum": lambda x, **kw: (x.sum(**kw), mt.sum(x, **kw)),
    "mean": lambda x, **kw: (x.mean(**kw), mt.mean(x, **kw)),
    "prod": lambda x, **kw: (x.prod(**kw), mt.prod(x, **kw)),
    "amax": lambda x, **kw: (x.amax(**kw), mt.amax(x, **kw)),
    "amin": lambda x, **kw: (x.amin(**kw), mt.amin(x, **kw)),
    "max": lambda x, **kw: (*x.max(**kw), *mt.max(x, **kw)),
    "min": lambda x, **kw: (*x.min(**kw), *mt.min(x, **kw)),
    "argmax": lambda x, **kw: (x.argmax(**kw), mt.argmax(x, **kw)),
    "argmin": lambda x, **kw: (x.argmin(**kw), mt.argmin(x, **kw)),
    "all": lambda x, **kw: (x.all(**kw), mt.all(x, **kw)),
    "any": lambda x, **kw: (x.any(**kw), mt.any(x, **kw)),
    "count_nonzero": lambda x, **kw: (x.count_nonzero(**kw), mt.count_nonzero(x, **kw)),
    "var": lambda x, **kw: (x.var(**kw), mt.var(x, **kw)),
    "std": lambda x, **kw: (x.std(**kw), mt.std(x, **kw)),
    "logsumexp": lambda x, **kw: (x.logsumexp(**kw), mt.logsumexp(x, **kw)),
    "softmax": lambda x, **kw: (x.softmax(**kw), mt.softmax(x, **kw)),
    "log_softmax": lambda x, **kw: (x.log_softmax(**kw), mt.log_softmax(x, **kw)),
    "cat": lambda x, **kw: (mt.cat([x, x], **kw), mt.concatenate([x, x], **kw)),
    "stack": lambda x, **kw: (mt.stack([x, x], **kw),),
}


@pytest.mark.parametrize("name", sorted(AXIS_CASES))
def test_axis_is_another_name_for_dim(name):
    x = mt.tensor(X)
    for d in (1, -1):
        by_dim = AXIS_CASES[name](x, dim=d)
        by_axis = AXIS_CASES[name](x, axis=d)
        for a, b in zip(by_dim, by_axis):
            assert a.shape == b.shape and a.dtype is b.dtype
            assert np.array_equal(a.numpy(), b.numpy(), equal_nan=True)
        assert by_dim[0].shape != x.shape or name in ("softmax", "log_softmax")


@pytest.mark.parametrize("name", sorted(AXIS_CASES))
def test_dim_and_axis_together_is_a_type_error(name):
    with pytest.raises(TypeError, match="got both dim=1 and axis=0"):
        AXIS_CASES[name](mt.tensor(X), dim=1, axis=0)


def test_softmax_without_dim_or_axis_is_a_type_error():
    for call in (lambda x: x.softmax(), lambda x: mt.log_softmax(x), lambda x: mt.logsumexp(x)):
        with pytest.raises(TypeError, match="missing the argument dim"):
            call(mt.tensor(X))


def test_tuple_axes_and_the_defaults_are_unchanged():
    x = mt.tensor(X)
    assert x.sum(axis=(0, 2), keepdim=True).shape == (1, 4, 1)
    assert mt.cat([x, x]).shape == (6, 4, 5) and mt.stack([x, x]).shape == (2, 3, 4, 5)
    assert x.max(axis=0).indices.dtype is mt.int64
