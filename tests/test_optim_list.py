"""The multi-tensor forms (src/optim_multi.cu): Adam's and AdamW's update of a
whole list of parameters (foreach=), and clip_grad_norm_'s norm and scaling
(foreach=), against the per-parameter path they replace, step for step, on
lists of mixed sizes (empty, one element, across a block's chunk), dtypes
and layouts (a parameter the kernel cannot take is updated alone)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import minitensor as mt
from minitensor import _lib, nn, optim

from helpers import assert_close

SHAPES = [(33, 17), (5,), (1, 1), (0, 3), (300,), (32769,), (2, 3)]


def parameters(seed: int, mixed: bool = True) -> list[nn.Parameter]:
    """Parameters of SHAPES, float32 (the last float64 when mixed)."""
    rng = np.random.default_rng(seed)
    params = [nn.Parameter(mt.tensor(rng.standard_normal(s).astype(np.float32))) for s in SHAPES]
    if mixed:
        params[-1] = nn.Parameter(mt.tensor(rng.standard_normal(SHAPES[-1])))  # float64
    return params


def gradients(seed: int, steps: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(s) for s in SHAPES] for _ in range(steps)]


def train(make: Any, params: list[nn.Parameter], grads: list[list[np.ndarray]], skip: int = -1) -> list[np.ndarray]:
    """The parameters after one step per entry of grads; parameter `skip` has no
    gradient at the first step (its step count then lags the others')."""
    opt = make(params)
    for step, values in enumerate(grads):
        for i, (p, g) in enumerate(zip(params, values)):
            p.grad = None if (step == 0 and i == skip) else mt.tensor(g.astype(p.numpy().dtype))
        opt.step()
    return [p.numpy() for p in params]


CASES = [
    (optim.Adam, {"lr": 1e-2}),
    (optim.Adam, {"lr": 1e-2, "betas": (0.8, 0.95), "weight_decay": 0.1}),
    (optim.AdamW, {"lr": 1e-2, "weight_decay": 0.1}),
]


@pytest.mark.parametrize("capturable", [False, True])
@pytest.mark.parametrize("cls, kwargs", CASES, ids=["adam", "adam_weight_decay", "adamw"])
def test_the_list_update_is_the_per_parameter_update(cls: Any, kwargs: dict[str, Any], capturable: bool) -> None:
    grads = gradients(1, 3)
    want = train(lambda ps: cls(ps, fused=True, foreach=False, capturable=capturable, **kwargs), parameters(0), grads,
                 skip=2)
    got = train(lambda ps: cls(ps, foreach=True, capturable=capturable, **kwargs), parameters(0), grads, skip=2)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        assert_close(g, w, mt.float32 if g.dtype == np.float32 else mt.float64, n=8)


def test_a_parameter_the_kernel_cannot_take_is_updated_alone() -> None:
    view = nn.Parameter(mt.randn(6, 4).T)  # not contiguous: with fused=None, the chain of ops updates it
    dense = nn.Parameter(mt.randn(5))
    grads = [np.ones((4, 6), np.float32), np.ones(5, np.float32)]
    before = view.numpy().copy(), dense.numpy().copy()
    with mt.kernels.policy("fast"):
        opt = optim.Adam([view, dense], lr=0.1, foreach=True)
        for p, g in zip((view, dense), grads):
            p.grad = mt.tensor(g)
        _lib.reset_launch_counts()
        opt.step()
    # Adam's first step moves every element by lr (m / sqrt(v) = 1 for a constant gradient).
    assert_close(view.numpy(), before[0] - 0.1, mt.float32, n=8)
    assert_close(dense.numpy(), before[1] - 0.1, mt.float32, n=8)
    if _lib.launch_count("adam_step_list") >= 0:  # the emulator counts launches
        assert _lib.launch_count("adam_step_list") == 1


def test_foreach_follows_the_kernel_policy_and_torch_s_rules() -> None:
    params = parameters(3, mixed=False)
    if _lib.launch_count("adam_step_list") < 0:
        pytest.skip("the CUDA build counts no launches")
    counts = {}
    for policy in ("fast", "teaching"):
        for foreach in (None, True, False):
            for fused in (None, True):
                if foreach and fused:
                    continue
                opt = optim.AdamW(params, foreach=foreach, fused=fused)
                for p in params:
                    p.grad = mt.ones(*p.shape)
                with mt.kernels.policy(policy):
                    _lib.reset_launch_counts()
                    opt.step()
                counts[policy, foreach, fused] = (_lib.launch_count("adam_step_list"), _lib.launch_count("adam_step"))
    kernel_tensors = sum(1 for p in params if p.numel() > 0)
    assert counts["fast", None, None] == (1, 0)  # the whole list in one launch
    assert counts["fast", None, True] == (1, 0)
    assert counts["fast", False, True] == (0, kernel_tensors)  # one launch per non-empty parameter
    assert counts["fast", False, None] == (0, kernel_tensors)
    assert counts["teaching", None, None] == (0, 0)  # the chain of ops, the students' kernels
    assert counts["teaching", None, True] == (0, kernel_tensors)  # the per-parameter kernel a course reads
    assert counts["teaching", True, None] == (1, 0)
    with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together"):
        optim.Adam(params, fused=True, foreach=True)
    with pytest.raises(ValueError, match="foreach=True.*fused=False"):
        optim.AdamW(params, fused=False, foreach=True)
    with pytest.raises(TypeError, match="foreach must be None, True or False"):
        optim.Adam(params, foreach="yes")


@pytest.mark.parametrize("norm_type", [2.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_grad_norm_list_is_the_ops_path(norm_type: float, max_norm: float) -> None:
    grads = gradients(5, 1)[0]
    results = []
    for foreach in (False, True):
        params = parameters(4)
        for p, g in zip(params, grads):
            p.grad = mt.tensor(g.astype(p.numpy().dtype))
        total = nn.utils.clip_grad_norm_(params, max_norm, norm_type, foreach=foreach)
        assert total.dtype == mt.float32 and total.shape == ()
        results.append((total.item(), [p.grad.numpy() for p in params]))
    (want_total, want), (got_total, got) = results
    flat = np.concatenate([g.astype(p.dtype).ravel().astype(np.float64) for g, p in zip(grads, want)])
    ref = np.abs(flat).max() if norm_type != 2.0 else np.sqrt((flat * flat).sum())
    assert_close(np.float32(got_total), ref, mt.float32, n=flat.size)
    assert_close(np.float32(got_total), np.float32(want_total), mt.float32, n=flat.size)
    for g, w in zip(got, want):
        assert_close(g, w, mt.float32, n=2)


def test_clip_grad_norm_list_launches_and_refusals() -> None:
    params = parameters(6, mixed=False)
    for p in params:
        p.grad = mt.ones(*p.shape) * 3.0
    if _lib.launch_count("scale_list") >= 0:
        with mt.kernels.policy("fast"):
            _lib.reset_launch_counts()
            nn.utils.clip_grad_norm_(params, 1.0)
            # A norm launch, its finish and one scaling launch: not a cast and a multiply per gradient.
            assert [_lib.launch_count(k) for k in ("norm_partials_list", "norm_finish", "scale_list")] == [1, 1, 1]
            assert _lib.launch_count("zip_one_value") == 0
    view = nn.Parameter(mt.randn(4, 6))
    view.grad = mt.ones(6, 4).T  # not contiguous
    with pytest.raises(ValueError, match=r"foreach=True.*float32 \(4, 6\) \(not contiguous\)"):
        nn.utils.clip_grad_norm_([view], 1.0, foreach=True)
    total = nn.utils.clip_grad_norm_([view], 1.0)  # foreach=None: the ops path takes it
    assert_close(np.float32(total.item()), np.sqrt(24.0), mt.float32)
    with pytest.raises(TypeError, match="foreach must be None, True or False"):
        nn.utils.clip_grad_norm_(params, 1.0, foreach="yes")
