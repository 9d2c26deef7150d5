"""Where the ResNet example's training step spends its time, by kind of layer.

    python3 examples/train_resnet.py --torch --batch 256 --width 64 --size 32 --steps 30 --profile

(examples/train_resnet.py --profile calls profile() below after training.)
Each layer of the model is timed alone, forward + backward, on the input
shape it sees in the step (captured by one forward), as CUDA-event medians
(bench/event_timing.py); the times of the layers of one kind are added up:

    conv       every Conv2d (the 3x3 ones and the 1x1 shortcuts)
    batchnorm  every BatchNorm2d in training mode (batch statistics, the
               running ones updated)
    relu       every ReLU: the stem's, and two per residual block
    add        the residual adds, one per block
    head       global average pooling, the linear classifier, cross-entropy
    optimizer  AdamW's step over every parameter
    step       the whole training step (zero_grad, forward, backward, step)

The kinds add up to about the step: what is left over is the host's time
between kernels and what the isolated timings miss (the caches warm from
the layer before). With torch_too the same layers run in PyTorch beside
them (its own modules from the same state_dict, same shapes).
"""

from __future__ import annotations

import argparse
from typing import Any, Callable

import numpy as np

from event_timing import median_ms

import minitensor as mt
import minitensor.nn.functional as F
from minitensor import nn

KINDS = ("conv", "batchnorm", "relu", "add", "head", "optimizer", "step")


def layer_inputs(model: Any, x: Any, kinds: tuple[type, ...], hook: Callable) -> dict[str, tuple[int, ...]]:
    """The input shape of each module of `kinds` in one forward of model on x, by
    its dotted name; `hook(module, record)` installs the recorder and returns
    its remover (the two libraries differ only there)."""
    shapes: dict[str, tuple[int, ...]] = {}
    removers = []
    for name, module in model.named_modules():
        if isinstance(module, kinds):
            removers.append(hook(module, lambda s, name=name: shapes.setdefault(name, tuple(s))))
    model(x)
    for remove in removers:
        remove()
    return shapes


def _mt_hook(module: Any, record: Callable) -> Callable:
    forward = module.forward

    def recording(x: Any) -> Any:
        record(x.shape)
        return forward(x)

    module.forward = recording
    return lambda: delattr(module, "forward")


def _torch_hook(module: Any, record: Callable) -> Callable:
    def pre_hook(_module: Any, inputs: tuple[Any, ...]) -> None:
        record(inputs[0].shape)  # None: a pre-hook that returns a value replaces the module's inputs

    return module.register_forward_pre_hook(pre_hook).remove


def relu_and_add_shapes(bn_shapes: dict[str, tuple[int, ...]]) -> tuple[list, list]:
    """The shapes of the ReLUs and of the residual adds, from the batch norms'
    (each ReLU and add acts on a batch norm's output, of its input's shape):
    the stem's batch norm and each block's bn1 feed a ReLU; each bn2 feeds an
    add and a ReLU."""
    relus, adds = [], []
    for name, shape in bn_shapes.items():
        if name.startswith("stem.") or name.endswith(".bn1"):
            relus.append(shape)
        elif name.endswith(".bn2"):
            relus.append(shape)
            adds.append(shape)
    return relus, adds


class _Lib:
    """What the timing below needs from one library: tensors, events, a step."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name == "torch":
            import torch

            self.torch = torch
            self.device = "cuda" if torch.cuda.is_available() else "cpu"

    def randn(self, shape: tuple[int, ...], grad: bool = False) -> Any:
        data = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        if self.name == "torch":
            return self.torch.from_numpy(data).to(self.device).requires_grad_(grad)
        return mt.tensor(data, requires_grad=grad)

    def ms(self, fn: Callable[[], Any]) -> float:
        if self.name == "torch":
            if self.device != "cuda":
                return float("nan")
            event = self.torch.cuda.Event
        else:
            event = mt.cuda.Event
        return median_ms(fn, event(enable_timing=True), event(enable_timing=True), repeats=10, warmup=2)


def _fwd_bwd(run: Callable[[], Any], grad: Any) -> Callable[[], None]:
    return lambda: run().backward(grad)


def time_kinds(lib: _Lib, model: Any, x: Any, y: Any, optimizer: Any) -> dict[str, float]:
    """Milliseconds per kind (KINDS) of one step of model on batch (x, y)."""
    is_torch = lib.name == "torch"
    nn_ = lib.torch.nn if is_torch else nn
    functional = lib.torch.nn.functional if is_torch else F
    hook = _torch_hook if is_torch else _mt_hook
    convs = layer_inputs(model, x, (nn_.Conv2d,), hook)
    norms = layer_inputs(model, x, (nn_.BatchNorm2d,), hook)
    modules = dict(model.named_modules())
    times = dict.fromkeys(KINDS, 0.0)
    for name, shape in convs.items():
        inp = lib.randn(shape, grad=not name.startswith("stem."))  # the images need no gradient
        out_grad = lib.randn(tuple(modules[name](inp).shape))
        times["conv"] += lib.ms(_fwd_bwd(lambda m=modules[name], i=inp: m(i), out_grad))
    for name, shape in norms.items():
        inp, out_grad = lib.randn(shape, grad=True), lib.randn(shape)
        times["batchnorm"] += lib.ms(_fwd_bwd(lambda m=modules[name], i=inp: m(i), out_grad))
    relus, adds = relu_and_add_shapes(norms)
    for shape in relus:
        inp, out_grad = lib.randn(shape, grad=True), lib.randn(shape)
        times["relu"] += lib.ms(_fwd_bwd(lambda i=inp: functional.relu(i), out_grad))
    for shape in adds:
        a, b, out_grad = lib.randn(shape, grad=True), lib.randn(shape, grad=True), lib.randn(shape)
        times["add"] += lib.ms(_fwd_bwd(lambda a=a, b=b: a + b, out_grad))
    pooled = lib.randn(list(norms.values())[-1], grad=True)  # the last block's output: N, C, H, W
    head = modules["head"]
    times["head"] = lib.ms(lambda: functional.cross_entropy(head(pooled.mean((2, 3))), y).backward())

    def step() -> None:
        optimizer.zero_grad()
        functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    step()  # every parameter has a gradient for the optimizer's timing
    times["optimizer"] = lib.ms(optimizer.step)
    times["step"] = lib.ms(step)
    return times


def profile(model: Any, args: argparse.Namespace, images: np.ndarray, labels: np.ndarray,
            torch_too: bool = False) -> dict[str, dict[str, float]]:
    """Prints (and returns) the step's milliseconds by kind of layer for
    minitensor's model (trained or not) on one batch, and with torch_too for
    the same model in PyTorch (examples/train_resnet.py's torch_resnet)."""
    state = {name: value.numpy().copy() for name, value in model.state_dict().items()}
    results = {"minitensor": time_kinds(_Lib("minitensor"), model, mt.tensor(images), mt.tensor(labels),
                                        mt.optim.AdamW(model.parameters(), lr=args.lr,
                                                       weight_decay=args.weight_decay))}
    if torch_too:
        import torch
        from train_resnet import CLASSES, torch_resnet  # examples/, on sys.path when run from there

        lib = _Lib("torch")
        twin = torch_resnet(args.width, len(CLASSES), args.blocks)
        twin.load_state_dict({name: torch.from_numpy(value) for name, value in state.items()})
        twin.to(lib.device)
        x = torch.from_numpy(images).to(lib.device)
        y = torch.from_numpy(labels).to(lib.device)
        results["torch"] = time_kinds(lib, twin, x, y,
                                      torch.optim.AdamW(twin.parameters(), lr=args.lr,
                                                        weight_decay=args.weight_decay))
    print(f"the step by kind of layer (batch {len(images)}, forward + backward, CUDA-event medians, ms):")
    header = f"  {'kind':<10} {'minitensor':>11}"
    if torch_too:
        header += f" {'torch':>9} {'torch/mt':>9}"
    print(header)
    for kind in KINDS:
        ours = results["minitensor"][kind]
        line = f"  {kind:<10} {ours:11.3f}"
        if torch_too:
            theirs = results["torch"][kind]
            line += f" {theirs:9.3f} {theirs / ours if ours else float('nan'):9.2f}"
        print(line)
    return results
