"""Train an MLP on the 8x8 handwritten digits with minitensor (the job `make demo` runs).

    make demo                                  # from a fresh clone: builds, installs, runs this
    .venv/bin/python examples/train_digits.py  # once built; see --help for the options

Data: data/digits.csv.gz, 1797 images of 8x8 pixels (values 0..16) and their
labels (see data/README.md for its origin and licence). The script

1. splits the images into 1437 for training and 360 held out (a fixed seed),
2. standardizes each pixel with the training set's mean and std (the
   statistics are buffers of the model's first layer, so they are saved with
   the weights),
3. trains Standardize -> Linear(64, 128) -> ReLU -> Linear(128, 10) with Adam
   on minibatches of cross-entropy, drawn by a DataLoader over the training
   tensors (shuffled every epoch), showing a progress bar per epoch,
   (``--graph``: each full batch's whole step, forward, backward and Adam's
   update, runs as one replayed CUDA graph, captured once after two eager
   steps; Adam keeps its step count on the device, capturable=True; on the
   emulator the same code replays the recorded launches),
4. reports the held-out accuracy (it must reach 95%), saves the model to
   build/digits_mlp.npz, loads it into a fresh model and checks that the
   fresh model gives the same accuracy.

Every tensor operation, forward and backward, runs on minitensor's kernels:
the GPU with the CUDA build, the CPU emulator otherwise (mt.backend() says
which). NumPy reads the file and splits it; the training set is uploaded once
and each batch is gathered on the device (minitensor.utils.data). The labels
are int64, as in torch.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from anywhere without installing the package

import minitensor as mt  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from minitensor import nn  # noqa: E402
from minitensor.utils.data import DataLoader, TensorDataset  # noqa: E402

DATA = REPO / "data" / "digits.csv.gz"
WEIGHTS = REPO / "build" / "digits_mlp.npz"
N_TEST = 360


class Standardize(nn.Module):
    """(x - mean) / std per feature, with the statistics kept as buffers (saved, not trained)."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.register_buffer("mean", mt.zeros(features))
        self.register_buffer("std", mt.ones(features))

    def forward(self, x: mt.Tensor) -> mt.Tensor:
        return (x - self.mean) / self.std


def build_model() -> nn.Sequential:
    """The classifier: 64 pixels -> 128 hidden units -> 10 class scores."""
    return nn.Sequential(Standardize(64), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """Images (1797, 64) as float32 and labels (1797,) as int64."""
    with gzip.open(DATA, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)
    return table[:, :-1], table[:, -1].astype(np.int64)


def split(count: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
    """Held-out and training image numbers (N_TEST held out, drawn with seed), and
    the generator that drew them, which then shuffles the batches."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(count)
    return order[:N_TEST], order[N_TEST:], rng


def progress(epoch: int, epochs: int, done: int, total: int, loss: float, width: int = 30) -> None:
    """One line, rewritten in place with \\r: the epoch, a bar of the batches done, the loss."""
    filled = width * done // total
    bar = "#" * filled + "." * (width - filled)
    sys.stdout.write(f"\repoch {epoch:2d}/{epochs} [{bar}] {done:3d}/{total} batches  loss {loss:.4f}")
    sys.stdout.flush()


@mt.no_grad()
def accuracy(model: nn.Module, images: np.ndarray, labels: np.ndarray) -> float:
    """The fraction of images whose highest score is the label (evaluation mode)."""
    model.eval()
    predicted = model(mt.tensor(images)).argmax(dim=1).numpy()
    model.train()
    return float((predicted == labels).mean())


class GraphedStep:
    """A training step run as one CUDA graph (mt.cuda.graph): the step reads
    its batch from two static tensors, into which each batch is copied. The
    first two full batches run eagerly (first-time work, such as the matmul
    autotuner's timing and the check of the targets, must not be captured);
    the third is captured, then replayed, as every later one is. A batch of
    another size (the epoch's last) runs eagerly."""

    def __init__(self, step: Any, batch_size: int, features: int) -> None:
        self.step = step
        self.x = mt.zeros(batch_size, features)
        self.y = mt.zeros(batch_size, dtype=mt.int64)
        self.eager_steps = 0
        self.graph: Any = None
        self.loss: Any = None

    def __call__(self, x: mt.Tensor, y: mt.Tensor) -> mt.Tensor:
        if len(y) != len(self.y):
            return self.step(x, y)
        if self.graph is None and self.eager_steps == 2:
            # Recorded on the batch the last eager step checked, before the new
            # one is copied in: a capture cannot wait for the targets' check.
            self.graph = mt.cuda.CUDAGraph()
            with mt.cuda.graph(self.graph):
                self.loss = self.step(self.x, self.y)
        self.x.copy_(x)
        self.y.copy_(y)
        if self.graph is None:
            self.eager_steps += 1
            return self.step(self.x, self.y)
        self.graph.replay()
        return self.loss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0, help="the split, the initial weights and the batches")
    parser.add_argument("--graph", action="store_true",
                        help="run each full batch's training step as one replayed CUDA graph")
    args = parser.parse_args()

    start = time.perf_counter()
    print(f"minitensor backend: {mt.backend()} ({mt.device_info()})")

    images, labels = load_digits()
    test, train, rng = split(len(images), args.seed)
    x_train, y_train = images[train], labels[train]
    x_test, y_test = images[test], labels[test]
    print(f"data: {len(x_train)} training and {len(x_test)} held-out images of 8x8 pixels, 10 classes")

    mt.manual_seed(args.seed)
    model = build_model()
    std = x_train.std(axis=0)
    model[0].mean.copy_(mt.tensor(x_train.mean(axis=0)))
    model[0].std.copy_(mt.tensor(np.where(std > 0, std, 1.0).astype(np.float32)))
    optimizer = mt.optim.Adam(model.parameters(), lr=args.lr, capturable=args.graph)
    print(model)

    def train_step(x: mt.Tensor, y: mt.Tensor) -> mt.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    step = GraphedStep(train_step, args.batch_size, images.shape[1]) if args.graph else train_step

    # The same generator as the split: each epoch's order is its next permutation.
    loader = DataLoader(TensorDataset(mt.tensor(x_train), mt.tensor(y_train.astype(np.int64))),
                        batch_size=args.batch_size, shuffle=True, generator=rng)
    for epoch in range(1, args.epochs + 1):
        epoch_start = time.perf_counter()
        total_loss, seen = 0.0, 0
        for b, (x, y) in enumerate(loader):  # x: B, 64; y: B
            loss = step(x, y)
            total_loss += loss.item() * len(y)
            seen += len(y)
            progress(epoch, args.epochs, b + 1, len(loader), total_loss / seen)
        seconds = time.perf_counter() - epoch_start
        print(f"  {seconds:.1f} s")

    test_accuracy = accuracy(model, x_test, y_test)
    correct = round(test_accuracy * len(y_test))
    print(f"held-out accuracy: {test_accuracy:.2%} ({correct}/{len(y_test)} images)")

    WEIGHTS.parent.mkdir(exist_ok=True)
    path = model.save(WEIGHTS)
    fresh = build_model().load(path)
    reloaded_accuracy = accuracy(fresh, x_test, y_test)
    print(f"saved the model to {Path(path).relative_to(REPO)}; a fresh model loaded from it scores "
          f"{reloaded_accuracy:.2%}")
    print("to load it yourself (from the repository root):\n"
          "    from examples.train_digits import build_model\n"
          f"    model = build_model().load(\"{Path(path).relative_to(REPO)}\").eval()\n"
          "    scores = model(mt.tensor(images))  # images: (N, 64) pixels 0..16, as in the data file")
    print(f"total time {time.perf_counter() - start:.1f} s on the {mt.backend()} backend")

    if reloaded_accuracy != test_accuracy:
        print("error: the reloaded model does not reproduce the accuracy", file=sys.stderr)
        return 1
    if test_accuracy < 0.95:
        print("error: the held-out accuracy is below 95%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
