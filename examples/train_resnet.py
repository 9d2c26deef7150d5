"""Train a small ResNet on generated colour images of shapes (make demo-resnet).

The data: RGB images (12x12 by default, --size), drawn here from a fixed
seed, of six classes of shape: a disc, a square, a ring, a cross,
horizontal stripes and vertical stripes, each at a random place and size,
in a random colour on a random background (lighter or darker), with noise.
Generated rather than shipped: nothing is downloaded (CI has no network),
nothing large is committed, the same seed draws the same images on every
machine, and --size scales the task to a GPU (32x32, as CIFAR's). The class
is in the shape, not in the colours, the place or the brightness: a linear
softmax classifier on the pixels stays at chance (16% held out at 16x16,
chance 17%). The defaults, sized for the emulator, stop where the network
has just begun to learn the shapes (training loss 1.89 -> 1.29, 33% held
out after 100 steps of 16 images); the target, 25%, checks that much.

The model, as He et al.'s ResNets for CIFAR arrange one: a 3x3 convolution
stem, then three stages of residual blocks (two 3x3 convolutions, each
followed by nn.BatchNorm2d, ReLU, and the block's input added back); the
second and third stages halve the resolution with a stride-2 convolution and
double the width, their shortcut a stride-2 1x1 convolution with batch norm;
global average pooling (the mean over H and W) and a linear classifier.
AdamW, cross-entropy. It reports the training loss, the held-out accuracy
and images per second, and fails unless the held-out accuracy reaches
--target (given, or 25% for a run of at least 100 steps: a shorter run, a
benchmark's, is too short to be held to it). --tf32 lets both libraries
multiply float32 on tensor cores (TF32: minitensor's matmuls, and its
convolutions where a TF32 rung exists; torch's matmuls and cuDNN's
convolutions); --profile adds a breakdown of the step's time by kind of
layer (bench/resnet_step.py). The defaults are sized for the CPU emulator (about 40 s of CPU
time); a GPU wants more, e.g. --batch 256 --width 64 --size 32 --steps 50.
With --torch (PyTorch installed; a GPU if there is one) the same model
starts from the same weights (the state_dict, names and all) on the same
batches in PyTorch, and both report images per second of the training step.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from anywhere without installing the package

import minitensor as mt  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from minitensor import nn  # noqa: E402

CLASSES = ("disc", "square", "ring", "cross", "horizontal stripes", "vertical stripes")


# ---- the data ------------------------------------------------------------------------


def shape_masks(labels: np.ndarray, cy: np.ndarray, cx: np.ndarray, half: np.ndarray, period: np.ndarray,
                size: int) -> np.ndarray:
    """(count, size, size) bool: where each image's shape is, given its class, its
    centre (cy, cx), its half-width and its stripes' period, all in pixels."""
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float32) + 0.5
    dy = ys[None] - cy[:, None, None]  # count, size, size
    dx = xs[None] - cx[:, None, None]
    r, p = half[:, None, None], period[:, None, None]
    radius = np.sqrt(dy ** 2 + dx ** 2)
    inside = (np.abs(dy) < r) & (np.abs(dx) < r)  # the shape's square box
    arm = np.maximum(r / 3, 1.0)  # the cross's half-thickness and the ring's thickness
    masks = np.stack([
        radius < r,                                            # disc
        (np.abs(dy) < 0.8 * r) & (np.abs(dx) < 0.8 * r),       # square
        (radius < r) & (radius > r - arm),                     # ring
        inside & ((np.abs(dy) < arm) | (np.abs(dx) < arm)),    # cross
        inside & (np.mod(dy, p) < p / 2),                      # horizontal stripes
        inside & (np.mod(dx, p) < p / 2),                      # vertical stripes
    ])
    return masks[labels, np.arange(len(labels))]  # each image's own class


def make_shapes(count: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """count images (count, 3, size, size) float32 in about [0, 1], and their int64
    classes (indices into CLASSES), drawn from seed alone."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, len(CLASSES), count)
    # Per image: the shape's centre and half-width (in pixels), the stripes' period.
    half = rng.uniform(0.25, 0.4, count).astype(np.float32) * size
    cy, cx = (rng.uniform(half, size - half).astype(np.float32) for _ in range(2))
    # stripes at least 3 pixels apart: finer ones would alias at 12 pixels
    period = np.maximum(rng.uniform(0.2, 0.3, count).astype(np.float32) * size, 3.0)
    # Colours: the shape's and the background's differ by at least 0.35 in
    # brightness, either way round, so that brightness alone says nothing.
    background = rng.uniform(0.0, 1.0, (count, 3, 1, 1)).astype(np.float32)
    shift = rng.uniform(0.35, 0.6, (count, 1, 1, 1)) * rng.choice([-1.0, 1.0], (count, 1, 1, 1))
    foreground = np.clip(background + shift + rng.normal(0, 0.15, (count, 3, 1, 1)), 0, 1).astype(np.float32)
    images = rng.standard_normal((count, 3, size, size), dtype=np.float32) * np.float32(0.05)  # the noise
    for i in range(0, count, 1024):  # in chunks: the six masks of every image at once would be large
        part = slice(i, i + 1024)
        masks = shape_masks(labels[part], cy[part], cx[part], half[part], period[part], size)
        images[part] += np.where(masks[:, None], foreground[part], background[part])
    return images, labels.astype(np.int64)


# ---- the model -----------------------------------------------------------------------


class Block(nn.Module):
    """Two 3x3 convolutions with batch norm, and the input added back (the
    residual); stride 2 halves H and W, and then (or when the width changes)
    the shortcut is a 1x1 convolution with batch norm."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = None
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(c_out))

    def forward(self, x: mt.Tensor) -> mt.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))  # N, c_out, H/stride, W/stride
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.shortcut is None else self.shortcut(x)))


class ResNet(nn.Module):
    """Images (N, 3, H, W) -> class scores (N, classes)."""

    def __init__(self, width: int, classes: int, blocks: int = 1) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        layers = []
        for stage, c_out in enumerate((width, 2 * width, 4 * width)):
            c_in = width if stage == 0 else c_out // 2
            layers.append(Block(c_in, c_out, stride=1 if stage == 0 else 2))
            layers.extend(Block(c_out, c_out) for _ in range(blocks - 1))
        self.blocks = nn.Sequential(*layers)
        self.head = nn.Linear(4 * width, classes)

    def forward(self, x: mt.Tensor) -> mt.Tensor:
        x = self.blocks(self.stem(x))  # N, 4 * width, H / 4, W / 4
        return self.head(x.mean((2, 3)))  # global average pooling: N, 4 * width


def torch_resnet(width: int, classes: int, blocks: int):  # -> torch.nn.Module
    """The same architecture in PyTorch, its parameters and buffers named as ResNet's."""
    import torch

    class TorchBlock(torch.nn.Module):
        def __init__(self, c_in: int, c_out: int, stride: int = 1) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
            self.bn1 = torch.nn.BatchNorm2d(c_out)
            self.conv2 = torch.nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
            self.bn2 = torch.nn.BatchNorm2d(c_out)
            self.shortcut = None
            if stride != 1 or c_in != c_out:
                self.shortcut = torch.nn.Sequential(torch.nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                                                    torch.nn.BatchNorm2d(c_out))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = torch.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return torch.relu(out + (x if self.shortcut is None else self.shortcut(x)))

    class TorchResNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, width, 3, padding=1, bias=False),
                                            torch.nn.BatchNorm2d(width), torch.nn.ReLU())
            layers = []
            for stage, c_out in enumerate((width, 2 * width, 4 * width)):
                c_in = width if stage == 0 else c_out // 2
                layers.append(TorchBlock(c_in, c_out, stride=1 if stage == 0 else 2))
                layers.extend(TorchBlock(c_out, c_out) for _ in range(blocks - 1))
            self.blocks = torch.nn.Sequential(*layers)
            self.head = torch.nn.Linear(4 * width, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.blocks(self.stem(x)).mean((2, 3)))

    return TorchResNet()


# ---- training ------------------------------------------------------------------------


def batches(count: int, batch: int, steps: int, seed: int) -> list[np.ndarray]:
    """The indices of each step's batch: shuffled epochs, the same for both libraries."""
    rng = np.random.default_rng(seed)
    order: list[np.ndarray] = []
    while len(order) < steps:
        perm = rng.permutation(count)
        order.extend(perm[i:i + batch] for i in range(0, count - batch + 1, batch))
    return order[:steps]


def progress(step: int, steps: int, loss: float, width: int = 30) -> None:
    filled = width * step // steps
    sys.stdout.write(f"\rstep {step:4d}/{steps} [{'#' * filled}{'.' * (width - filled)}]  loss {loss:.3f}")
    sys.stdout.flush()


DEFAULT_TARGET, GATED_STEPS = 0.25, 100  # the demo's target, held to runs at least as long as the demo's
WARMUP = 5  # steps not timed: the first ones pay for one-time work (autotuning, allocation)


def train_minitensor(model: ResNet, args: argparse.Namespace, images: np.ndarray,
                     labels: np.ndarray) -> tuple[list[float], float]:
    """Trains model in place: the loss of every step, and images per second."""
    optimizer = mt.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    losses, timed = [], 0.0
    for step, idx in enumerate(batches(len(images), args.batch, args.steps, args.seed), 1):
        x, y = mt.tensor(images[idx]), mt.tensor(labels[idx])
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())  # waits for the step's kernels
        if step > WARMUP:
            timed += time.perf_counter() - t0
        if step % 5 == 0 or step == args.steps:
            progress(step, args.steps, float(np.mean(losses[-5:])))
    print()
    return losses, (args.steps - WARMUP) * args.batch / timed if timed else 0.0


def train_torch(state: dict[str, np.ndarray], args: argparse.Namespace, images: np.ndarray,
                labels: np.ndarray, held_out: tuple[np.ndarray, np.ndarray]) -> float:
    """The same model from the same weights (state: ResNet's initial state_dict),
    batches and optimizer in PyTorch: prints its loss and accuracy, returns images/s."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    # minitensor computes true float32 products unless --tf32: so must torch, or
    # the comparison measures TF32 against float32 (torch allows TF32 in its
    # convolutions by default).
    set_tf32(args.tf32, torch_too=True)
    model = torch_resnet(args.width, len(CLASSES), args.blocks)
    model.load_state_dict({name: torch.from_numpy(value) for name, value in state.items()})
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    losses, timed = [], 0.0
    for step, idx in enumerate(batches(len(images), args.batch, args.steps, args.seed), 1):
        x, y = torch.from_numpy(images[idx]).to(device), torch.from_numpy(labels[idx]).to(device)
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step > WARMUP:
            timed += time.perf_counter() - t0
    model.eval()
    with torch.no_grad():
        scores = model(torch.from_numpy(held_out[0]).to(device)).cpu().numpy()
    accuracy = float((scores.argmax(1) == held_out[1]).mean())
    print(f"torch ({device}): training loss {np.mean(losses[:5]):.3f} -> {np.mean(losses[-5:]):.3f}; "
          f"held-out accuracy {accuracy:.2%}")
    return (args.steps - WARMUP) * args.batch / timed if timed else 0.0


def set_tf32(on: bool, torch_too: bool) -> None:
    """TF32 products on (or off) in minitensor and, with torch_too, in torch's
    matmuls and cuDNN's convolutions alike."""
    mt.backends.cuda.matmul.allow_tf32 = on
    mt.backends.cuda.conv.allow_tf32 = on  # the TF32 convolution rung (minitensor/ops/conv_tf32.py)
    if torch_too:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on


def tf32_conv_rung() -> str:
    """Which rung minitensor's float32 convolutions take while allow_tf32 is set:
    the ops layer names it (TF32_CONV_RUNG) when it has one."""
    import importlib

    for name in ("minitensor.ops.conv_tf32", "minitensor.ops.conv"):
        try:
            rung = getattr(importlib.import_module(name), "TF32_CONV_RUNG", None)
        except ImportError:
            continue
        if rung:
            return f"the TF32 rung ({rung})"
    return "their float32 rungs (no TF32 convolution rung: only the linear head's matmul uses TF32)"


@mt.no_grad()
def accuracy(model: nn.Module, images: np.ndarray, labels: np.ndarray, batch: int = 256) -> float:
    """The fraction of images whose highest score is their class (evaluation mode:
    batch norm by its running statistics)."""
    model.eval()
    predicted = np.concatenate([model(mt.tensor(images[i:i + batch])).argmax(dim=1).numpy()
                                for i in range(0, len(images), batch)])
    model.train()
    return float((predicted == labels).mean())


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=16, help="images per step")
    parser.add_argument("--width", type=int, default=6, help="channels of the first stage (then x2, x4)")
    parser.add_argument("--blocks", type=int, default=1, help="residual blocks per stage")
    parser.add_argument("--size", type=int, default=12, help="image height and width in pixels")
    parser.add_argument("--train", type=int, default=2000, help="training images generated")
    parser.add_argument("--test", type=int, default=300, help="held-out images generated")
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--seed", type=int, default=0, help="the data, the initial weights and the batches")
    parser.add_argument("--target", type=float, default=None,
                        help=f"the held-out accuracy training must reach (default: {DEFAULT_TARGET:.0%} "
                             f"when --steps is at least {GATED_STEPS}, else none)")
    parser.add_argument("--torch", action="store_true", help="also train the same model in PyTorch")
    parser.add_argument("--tf32", action="store_true",
                        help="TF32 products (tensor cores) in both libraries' matmuls and convolutions")
    parser.add_argument("--profile", action="store_true",
                        help="also time each kind of layer of the step, forward + backward (bench/resnet_step.py)")
    args = parser.parse_args(argv)
    if args.target is None and args.steps >= GATED_STEPS:
        args.target = DEFAULT_TARGET
    if args.steps <= WARMUP or args.size < 4 or args.batch < 2:
        parser.error(f"--steps must be above {WARMUP}, --size at least 4 and --batch at least 2")

    start = time.perf_counter()
    set_tf32(args.tf32, torch_too=False)  # torch's flags: in train_torch, which imports it
    print(f"minitensor backend: {mt.backend()} ({mt.device_info()})")
    if args.tf32:
        print(f"TF32: on in both libraries; minitensor's convolutions run {tf32_conv_rung()}")
    images, labels = make_shapes(args.train, args.size, args.seed)
    test_images, test_labels = make_shapes(args.test, args.size, args.seed + 1)
    print(f"data: {args.train} training and {args.test} held-out {args.size}x{args.size} RGB images of "
          f"{len(CLASSES)} shapes ({', '.join(CLASSES)}), generated from seed {args.seed}")
    mt.manual_seed(args.seed)
    model = ResNet(args.width, len(CLASSES), args.blocks)
    initial = {name: value.numpy().copy() for name, value in model.state_dict().items()}
    parameters = sum(p.numel() for p in model.parameters())
    print(f"model: ResNet, width {args.width}, {args.blocks} block(s) per stage, {parameters} parameters; "
          f"batch {args.batch}")
    losses, speed = train_minitensor(model, args, images, labels)
    first, last = float(np.mean(losses[:5])), float(np.mean(losses[-5:]))
    held_out = accuracy(model, test_images, test_labels)
    print(f"minitensor: training loss {first:.3f} -> {last:.3f} (ln {len(CLASSES)} = "
          f"{np.log(len(CLASSES)):.2f} is a uniform guess); held-out accuracy {held_out:.2%} "
          f"(chance: {1 / len(CLASSES):.0%})")
    print(f"minitensor: {speed:,.0f} images/s (training step, after {WARMUP} warm-up steps)")
    if args.torch:
        torch_speed = train_torch(initial, args, images, labels, (test_images, test_labels))
        print(f"torch: {torch_speed:,.0f} images/s; minitensor / torch = {speed / torch_speed:.2f}")
    if args.profile:
        sys.path.insert(0, str(REPO / "bench"))
        from resnet_step import profile  # noqa: E402  (bench/resnet_step.py)

        profile(model, args, images[:args.batch], labels[:args.batch], torch_too=args.torch)
    print(f"total time {time.perf_counter() - start:.1f} s on the {mt.backend()} backend")
    if args.target is None:
        print(f"(no accuracy target: a run of {args.steps} steps, under the demo's {GATED_STEPS}; --target sets one)")
    elif held_out < args.target:
        print(f"error: the held-out accuracy {held_out:.2%} is below the target {args.target:.0%}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
