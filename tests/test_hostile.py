"""The red team's findings: sizes, strides and offsets that overflow an
int64, and argument errors that named the wrong thing. Each used to crash
the interpreter, corrupt memory or report a misleading message; each must
now raise a clean exception naming the offending shape, size or argument,
before anything is allocated or cast."""

from __future__ import annotations

import numpy as np
import pytest

import minitensor as mt

BIG = 2**62 + 1  # numel * 4 bytes wraps a 64-bit byte count


@pytest.mark.parametrize(
    "make",
    [
        lambda: mt.zeros(BIG),
        lambda: mt.ones(BIG),
        lambda: mt.empty(2**62 + 2),
        lambda: mt.full((BIG,), 1.0),
        lambda: mt.empty(2**64),
        lambda: mt.zeros(2**63),
        lambda: mt.zeros(2**31, 2**31, 2**2),
        lambda: mt.ones(3).new_empty((BIG,)),
        lambda: mt.empty(2**62, 2**62, 2**62, 0),
    ],
)
def test_sizes_beyond_int64_raise_shape_error(make):
    with pytest.raises(mt.ShapeError, match=r"int64"):
        make()


def test_expanded_view_of_too_many_elements_cannot_be_computed_on():
    x = mt.ones(1).expand(BIG)  # a view: no memory needed
    assert x.shape == (BIG,)
    for op in (lambda: x + 1, lambda: x.exp(), lambda: x * x, lambda: x.double(), lambda: x.contiguous()):
        with pytest.raises(mt.ShapeError, match=str(BIG)):
            op()


def test_matmul_checks_shapes_before_casting():
    x = mt.ones(1).expand(BIG)  # float32: the cast to float64 would need 2**65 bytes
    with pytest.raises(mt.ShapeError, match=r"cannot be multiplied"):
        x @ mt.ones(3, 1, dtype=mt.float64)
    with pytest.raises(mt.ShapeError, match=r"int64"):
        mt.ones(1, 1).expand(BIG, 1) @ mt.ones(1, 1, dtype=mt.float64)


def test_slice_steps_and_views_that_overflow():
    x = mt.ones(4)
    with pytest.raises(ValueError, match=r"slice step"):
        x[:: 2**63]
    with pytest.raises(mt.ShapeError, match=r"stride"):
        mt.ones(3, 4)[:: 2**62]  # stride 4 * 2**62
    with pytest.raises(TypeError, match=r"slice start"):
        x[1.5:]


def test_expand_names_the_bad_size():
    with pytest.raises(mt.ShapeError, match=r"-3"):
        mt.ones(1).expand(2, -3)


def test_as_strided_stays_inside_its_storage():
    x = mt.arange(6.0)
    assert mt.ops.to_numpy(mt.ops.as_strided(x, (2, 3), (3, 1), 0)).tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(mt.ShapeError, match=r"storage holds"):
        mt.ops.as_strided(x, (3,), (3,), 0)
    with pytest.raises(mt.ShapeError, match=r"negative strides"):
        mt.ops.as_strided(x, (2,), (-1,), 1)
    with pytest.raises(mt.ShapeError, match=r"int64"):
        mt.ops.as_strided(x, (2,), (2**63,), 0)


def test_an_allocation_too_big_for_the_device_is_out_of_memory():
    # 2**45 bytes (32 TiB) is below the int64 limit: the engine's malloc fails cleanly.
    with pytest.raises(mt.OutOfMemoryError):
        mt.empty(2**43)
    assert mt.ones(2).sum().item() == 2.0  # and the library still works


def test_layer_sizes_are_named():
    with pytest.raises(ValueError, match=r"num_embeddings"):
        mt.nn.Embedding(-1, 0)
    with pytest.raises(ValueError, match=r"embedding_dim"):
        mt.nn.Embedding(3, -2)
    with pytest.raises(ValueError, match=r"out_features"):
        mt.nn.Linear(3, -1)
    with pytest.raises(TypeError, match=r"in_features"):
        mt.nn.Linear(2.5, 3)


# ---- what only the engine can check: memory the descriptors point at ---------------------------
# Python's checks stop wrong shapes and sizes; whether an output overlaps an
# input, and whether an address is memory at all, is checked in C (src/memory.cu,
# src/validate.cu). These reach those checks through the public API.

K = mt.kernels


def test_kernel_outputs_that_partially_overlap_an_input_are_rejected():
    x = mt.arange(8.0)
    before = x.tolist()
    with pytest.raises(mt.InvalidArgumentError, match=r"mt_zip: out .* partially overlaps a"):
        K.add(x[:-1], mt.ones(7), out=x[1:])
    with pytest.raises(mt.InvalidArgumentError, match=r"mt_zip: out .* partially overlaps b"):
        K.add(mt.ones(7), x[1:], out=x[:-1])
    with pytest.raises(mt.InvalidArgumentError, match=r"mt_softmax: out .* partially overlaps in"):
        K.softmax(x[:4], out=x[2:6])
    with pytest.raises(mt.InvalidArgumentError, match=r"interleave|partially overlaps"):
        K.add(x[0::2], x[0::2], out=x[1::2])  # no shared element, but the ranges meet
    assert x.tolist() == before  # nothing was written
    # Exact aliasing is fine: out is the input itself.
    K.add(x, x, out=x)
    assert x.tolist() == [2 * v for v in before]


def test_inplace_arithmetic_on_overlapping_views_reads_before_writing():
    x = mt.arange(6.0)
    x[1:] += x[:-1]  # torch: the right side is read whole first
    assert x.tolist() == [0.0, 1.0, 3.0, 5.0, 7.0, 9.0]
    y = mt.arange(6.0)
    y[:-1] *= y[1:]
    assert y.tolist() == [0.0, 2.0, 6.0, 12.0, 20.0, 5.0]


@pytest.mark.parametrize("ptr", [8, 0x1000, 2**40, 2**62, 2**63 + 8])
def test_from_and_to_device_pointer_reject_an_address_that_is_not_device_memory(ptr):
    with pytest.raises(mt.InvalidArgumentError, match=r"mt_register_buffer: ptr 0x[0-9a-f]+ \(16 bytes\)"):
        K.from_device_pointer(ptr, (4,), mt.float32)
    with pytest.raises(mt.InvalidArgumentError, match=r"mt_register_buffer"):
        K.to_device_pointer(mt.ones(4), ptr)


def test_device_pointers_into_a_tensor_are_checked_against_its_allocation():
    t = mt.arange(12.0)
    inner = K.from_device_pointer(t.data_ptr() + 16, (8,), mt.float32)  # the last 8 elements
    assert inner.tolist() == list(range(4, 12))
    with pytest.raises(mt.InvalidArgumentError, match=r"mt_memcpy_d2d: src .* runs past the end of its allocation"):
        K.from_device_pointer(t.data_ptr() + 16, (9,), mt.float32)
    with pytest.raises(mt.InvalidArgumentError, match=r"mt_memcpy_d2d: dst .* runs past the end"):
        K.to_device_pointer(mt.ones(4, dtype=mt.float64), t.data_ptr() + 32)
    assert t.tolist() == list(range(12))


@pytest.mark.skipif(mt.backend() != "emulator", reason="host memory is device memory only on the emulator")
def test_a_foreign_buffer_is_registered_for_the_copy_only():
    from minitensor import _lib

    src = np.arange(6, dtype=np.float32)
    assert K.from_device_pointer(src.ctypes.data, (6,)).tolist() == list(range(6))
    assert _lib.find_allocation(src.ctypes.data) is None  # unregistered again
    with pytest.raises(mt.InvalidArgumentError, match=r"no live mt_malloc allocation"):
        _lib.memcpy_d2h(np.empty(6, np.float32), src.ctypes.data)
