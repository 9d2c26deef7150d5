"""Train a small convolutional network on the 8x8 handwritten digits (make demo-cnn).

The same data, split, loader and optimizer as examples/train_digits.py (the
MLP, 98.06% held out with the default seed), with a model that sees the
images as images: a 3x3 convolution, a 2x2 max pooling, a second 3x3
convolution (each F.conv2d: the implicit-GEMM rung, or under the teaching
policy im2col, the windows copied, then one matmul) and a linear classifier. It must beat the
MLP's held-out accuracy (98.33%, 354 of 360, with the defaults, in about
100 s on the emulator); the script fails otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from anywhere without installing the package
sys.path.insert(0, str(REPO / "examples"))

import minitensor as mt  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from minitensor import nn  # noqa: E402
from minitensor.utils.data import DataLoader, TensorDataset  # noqa: E402
from train_digits import load_digits, progress, split  # noqa: E402

MLP_ACCURACY = 0.9806  # examples/train_digits.py with its defaults (docs/performance.md)


def build_model() -> nn.Sequential:
    """(N, 1, 8, 8) pixels scaled to [0, 1] -> 10 class scores."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),   # 16 x 8 x 8
        nn.MaxPool2d(2),                             # 16 x 4 x 4
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),  # 32 x 4 x 4
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(32 * 4 * 4, 10),
    )


def images_as_planes(images: np.ndarray) -> mt.Tensor:
    """(N, 64) pixels 0..16 as an (N, 1, 8, 8) float32 tensor in [0, 1]."""
    return mt.tensor((images / 16.0).reshape(-1, 1, 8, 8).astype(np.float32))


def accuracy(model: nn.Module, images: np.ndarray, labels: np.ndarray) -> float:
    model.eval()
    with mt.no_grad():
        predicted = model(images_as_planes(images)).argmax(dim=1).numpy()
    model.train()
    return float((predicted == labels).mean())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=4e-3)
    parser.add_argument("--seed", type=int, default=0, help="the split, the initial weights and the batches")
    args = parser.parse_args()

    start = time.perf_counter()
    print(f"minitensor backend: {mt.backend()} ({mt.device_info()})")
    images, labels = load_digits()
    test, train, rng = split(len(images), args.seed)
    print(f"data: {len(train)} training and {len(test)} held-out images of 8x8 pixels, 10 classes")

    mt.manual_seed(args.seed)
    model = build_model()
    print(model)
    optimizer = mt.optim.Adam(model.parameters(), lr=args.lr)
    loader = DataLoader(TensorDataset(images_as_planes(images[train]), mt.tensor(labels[train].astype(np.int64))),
                        batch_size=args.batch_size, shuffle=True, generator=rng)
    for epoch in range(1, args.epochs + 1):
        epoch_start = time.perf_counter()
        total_loss, seen = 0.0, 0
        for b, (x, y) in enumerate(loader):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * len(y)
            seen += len(y)
            progress(epoch, args.epochs, b + 1, len(loader), total_loss / seen)
        print(f"  {time.perf_counter() - epoch_start:.1f} s")

    test_accuracy = accuracy(model, images[test], labels[test])
    correct = round(test_accuracy * len(test))
    print(f"held-out accuracy: {test_accuracy:.2%} ({correct}/{len(test)} images); the MLP's: {MLP_ACCURACY:.2%}")
    print(f"total time {time.perf_counter() - start:.1f} s on the {mt.backend()} backend")
    if test_accuracy <= MLP_ACCURACY:
        print("error: the CNN does not beat the MLP's held-out accuracy", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
