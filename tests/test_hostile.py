"""The red team's findings: sizes, strides and offsets that overflow an
int64, and argument errors that named the wrong thing. Each used to crash
the interpreter, corrupt memory or report a misleading message; each must
now raise a clean exception naming the offending shape, size or argument,
before anything is allocated or cast."""

from __future__ import annotations

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
