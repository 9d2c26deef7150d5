"""The Winograd rung of the convolution ladder (src/conv_winograd.cu, ops.conv2d_winograd):
F(2x2, 3x3) for 3x3 convolutions at stride 1, forward and input gradient, against the
definition (test_conv.ref_conv2d) and the implicit GEMM's input gradient, in float32 and
float64, odd and even sides, padding 0-2, bias or none; where it applies
(ops.conv2d_winograd_fits); and the autotuner's choice between it and the implicit GEMM
(autotune.conv_algo), which F.conv2d and its backward then run, gradients checked."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

import minitensor as mt
import minitensor.nn.functional as F
from gradcheck import gradcheck
from helpers import assert_close
from minitensor import _lib, ops
from minitensor.ops import autotune
from test_autotune import fake_timer
from test_conv import ref_conv2d

CASES = [  # n, c, h, w, k, padding
    (2, 5, 8, 8, 7, 1),    # even sides, padding 1 (a ResNet's 3x3)
    (1, 3, 7, 9, 4, 1),    # odd sides: the last tiles half outside the image
    (1, 4, 6, 5, 3, 0),    # no padding
    (2, 2, 5, 6, 3, 2),    # padding 2
    (1, 1, 1, 1, 2, 1),    # one pixel
    (2, 17, 9, 4, 19, 1),  # channels off every block
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n, c, h, w, k, pad", CASES)
def test_forward_is_the_convolution(dtype: str, n: int, c: int, h: int, w: int, k: int, pad: int) -> None:
    rng = np.random.default_rng(c * 31 + h)
    x, wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((k, c, 3, 3))
    b = rng.standard_normal(k)
    for bias in (b, None):
        got = ops.conv2d_winograd(mt.tensor(x, dtype=dtype), mt.tensor(wt, dtype=dtype),
                                  None if bias is None else mt.tensor(bias, dtype=dtype), (pad, pad))
        want = ref_conv2d(x, wt, bias, padding=(pad, pad))
        assert got.shape == want.shape
        assert_close(got.numpy(), want, dtype=dtype, n=9 * c)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n, c, h, w, k, pad", CASES)
def test_input_gradient_matches_the_implicit_gemm(dtype: str, n: int, c: int, h: int, w: int, k: int,
                                                  pad: int) -> None:
    rng = np.random.default_rng(k * 17 + w)
    wt = mt.tensor(rng.standard_normal((k, c, 3, 3)), dtype=dtype)
    grad = mt.tensor(rng.standard_normal((n, k, h + 2 * pad - 2, w + 2 * pad - 2)), dtype=dtype)
    got = ops.conv2d_winograd_input_grad(grad, wt, (n, c, h, w), (pad, pad))
    want = ops.conv2d_igemm_input_grad(grad, wt, (n, c, h, w), (1, 1), (pad, pad), (1, 1), 1)
    assert got.shape == (n, c, h, w)
    assert_close(got.numpy(), want.numpy(), dtype=dtype, n=9 * k)


def test_where_the_rung_applies() -> None:
    fits = ops.conv2d_winograd_fits
    assert fits((32, 128, 28, 28), (128, 128, 3, 3), (1, 1), (1, 1), (1, 1), 1)
    assert fits((1, 3, 3, 3), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1)
    assert not fits((32, 128, 28, 28), (128, 128, 3, 3), (2, 2), (1, 1), (1, 1), 1)  # stride 2
    assert not fits((32, 128, 28, 28), (128, 64, 3, 3), (1, 1), (1, 1), (1, 1), 2)   # groups
    assert not fits((32, 128, 28, 28), (128, 128, 3, 3), (1, 1), (2, 2), (2, 2), 1)  # dilation
    assert not fits((32, 128, 28, 28), (128, 128, 5, 5), (1, 1), (2, 2), (1, 1), 1)  # 5x5
    assert not fits((32, 128, 28, 28), (128, 128, 3, 3), (1, 1), (3, 3), (1, 1), 1)  # the gradient's padding < 0
    assert not fits((0, 128, 28, 28), (128, 128, 3, 3), (1, 1), (1, 1), (1, 1), 1)   # an empty batch
    assert not fits((1, 3, 2, 2), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1)          # no window fits


def test_a_bad_operand_is_refused_with_the_shapes() -> None:
    u = mt.zeros(16, 4, 4)
    with pytest.raises(mt.ShapeError, match=r"weight must be \(K, C, 3, 3\)"):
        _lib.conv2d_winograd_filter(u, mt.zeros(4, 4, 5, 5), False)
    with pytest.raises(mt.ShapeError, match=r"v must be \(16, 3, 9\)"):
        _lib.conv2d_winograd_input(mt.zeros(16, 3, 8), mt.zeros(1, 3, 6, 6), (1, 1))


@pytest.fixture
def tuning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tuning forced on (the emulator times nothing by itself) in a private cache, fast policy."""
    monkeypatch.setenv("MINITENSOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MINITENSOR_AUTOTUNE", "force")
    autotune.reset()
    with mt.kernels.policy("fast"):
        yield
    autotune.set_timer(None)
    autotune.reset()


@pytest.mark.parametrize("winner", [0, 1])
def test_f_conv2d_runs_the_rung_the_autotuner_picks(tuning: None, monkeypatch: pytest.MonkeyPatch,
                                                    winner: int) -> None:
    calls: list[bool] = []
    original = _lib.conv2d_winograd_output
    monkeypatch.setattr(_lib, "conv2d_winograd_output", lambda *a: (calls.append(True), original(*a))[1])
    autotune.set_timer(fake_timer(winner))
    rng = np.random.default_rng(winner)
    # 16 input channels: fewer take im2col for the input gradient (ops.conv2d_grad_rungs).
    x = rng.standard_normal((2, 16, 7, 8))
    w, b = rng.standard_normal((5, 16, 3, 3)), rng.standard_normal(5)
    mx, mw, mb = (mt.tensor(a, dtype="float64", requires_grad=True) for a in (x, w, b))
    out = F.conv2d(mx, mw, mb, padding=1)
    assert_close(out.detach(), ref_conv2d(x, w, b, padding=(1, 1)), dtype="float64", n=144)
    out.sum().backward()  # the first calls time both rungs (the fake timer runs each once) ...
    first_grad = mw.grad.numpy().copy()
    calls.clear()
    mw.grad = None
    F.conv2d(mx, mw, mb, padding=1).sum().backward()  # ... the next run the choice, forward and backward
    assert len(calls) == (2 if winner == 1 else 0)  # winograd is 1 in autotune.CONV_ALGOS
    assert_close(mw.grad.numpy(), first_grad, dtype="float64", n=144)
    if winner == 1:
        gradcheck(lambda m, x, w, b: m.nn.functional.conv2d(x, w, b, padding=1),
                  [x[:1, :2, :4, :5], w[:3, :2], b[:3]], directions=3)
