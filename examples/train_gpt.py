"""Train a tiny character-level GPT on The Devil's Dictionary (make demo-gpt).

A decoder-only transformer, as GPT-2 arranges one: token and position
embeddings, pre-LN transformer layers (nn.TransformerEncoderLayer with
norm_first=True and a causal mask: each position attends only to those
before it), a final layer norm and a linear head over the 83 characters of
data/devils_dictionary.txt.gz (Ambrose Bierce, 1911; public domain, see
data/README.md). AdamW, gradients clipped to norm 1, random windows of the
text as batches. It reports the held-out loss before and after training
(ln 83 = 4.42 is a uniform guess), prints samples, and fails if the loss has
not fallen below --target. With --torch (on a machine with PyTorch and a
GPU), the same model, data and optimizer run in PyTorch too, and both
report tokens per second. With --graph, the whole training step (forward,
backward, clipping and AdamW's update, capturable=True) is captured once
into a CUDA graph (mt.cuda.graph) after two eager steps and replayed for
every later batch, copied into the graph's two input tensors; on the
emulator the same code runs, each replay running the recorded launches.
With --tf32, float32 products run as TF32 on tensor cores in both libraries
(mt.backends.cuda.matmul.allow_tf32 and torch's allow_tf32 flags).
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from anywhere without installing the package

import minitensor as mt  # noqa: E402
import minitensor.distributed as dist  # noqa: E402
import minitensor.nn.functional as F  # noqa: E402
from minitensor import nn  # noqa: E402

DATA = REPO / "data" / "devils_dictionary.txt.gz"


class GPT(nn.Module):
    """Characters (B, T) -> next-character scores (B, T, vocab)."""

    def __init__(self, vocab: int, context: int, width: int, heads: int, layers: int) -> None:
        super().__init__()
        self.context = context
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(context, width)
        self.blocks = nn.Sequential(*[
            nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True) for _ in range(layers)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        # The positions 0..context-1 and the causal mask (True where a position
        # must not look, as torch's src_mask), made once: a step captured into
        # a CUDA graph cannot upload, and both copy from the host.
        self.register_buffer("position_ids", mt.arange(context))
        self.register_buffer("future", ~F.causal_mask(context))

    def forward(self, idx: mt.Tensor) -> mt.Tensor:
        t = idx.shape[1]
        full = t == self.context  # every training window: the buffers as they are, no slice
        x = self.tokens(idx) + self.positions(self.position_ids if full else self.position_ids[:t])
        future = self.future if full else self.future[:t, :t]
        for block in self.blocks:
            x = block(x, src_mask=future, is_causal=True)
        return self.head(self.norm(x))


def load_text() -> tuple[np.ndarray, list[str]]:
    """The text as int64 character codes (0..vocab-1), and the characters."""
    with gzip.open(DATA, "rt", encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    code = {c: i for i, c in enumerate(chars)}
    return np.array([code[c] for c in text], dtype=np.int64), chars


def batch(data: np.ndarray, size: int, context: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """size random windows of the text, and the same shifted by one: the targets."""
    starts = rng.integers(0, len(data) - context - 1, size)
    x = np.stack([data[s:s + context] for s in starts])
    return x, np.stack([data[s + 1:s + context + 1] for s in starts])


def loss_of(model: GPT, x: np.ndarray, y: np.ndarray) -> mt.Tensor:
    return loss_on_device(model, mt.tensor(x), mt.tensor(y))


def loss_on_device(model: GPT, x: mt.Tensor, y: mt.Tensor) -> mt.Tensor:
    """The mean cross-entropy of the next-character scores for windows x (B, T) against y (B, T)."""
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def make_train_step(model: GPT, optimizer: mt.optim.Optimizer) -> Any:
    """One training step on device windows x and targets y: zero_grad, forward,
    backward, gradients clipped to norm 1 (on the device: nothing read
    back), AdamW's update. Returns the loss tensor."""
    params = list(model.parameters())  # listed once: walking the modules at every step costs ~1,000 calls

    def train_step(x: mt.Tensor, y: mt.Tensor) -> mt.Tensor:
        optimizer.zero_grad()
        loss = loss_on_device(model, x, y)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        return loss
    return train_step


class GraphedStep:
    """train_step run as one CUDA graph: the step reads its batch from two
    static tensors, into which each batch is copied. Two eager steps come
    first (first-time work, such as the autotuner's timing, and the device
    check of the ids and targets, must not be captured); the capture is
    recorded on the batch the second one checked, then every call copies its
    batch in and replays.

    The ids and targets a replay reads are not checked on the device (a
    replay runs no Python, and a check would wait for the device): they are
    checked here, on the host, before they are copied in (out of range, the
    gather and the cross-entropy would give zeros, not an error)."""

    def __init__(self, train_step: Any, batch_size: int, context: int, vocab: int) -> None:
        self.train_step = train_step
        self.vocab = vocab
        self.x = mt.zeros(batch_size, context, dtype=mt.int64)
        self.y = mt.zeros(batch_size, context, dtype=mt.int64)
        self.eager_steps = 0
        self.graph: Any = None
        self.loss: Any = None

    def __call__(self, x: np.ndarray, y: np.ndarray) -> mt.Tensor:
        for name, ids in (("ids", x), ("targets", y)):
            if ids.shape != tuple(self.x.shape) or ids.min() < 0 or ids.max() >= self.vocab:
                raise ValueError(f"GraphedStep: {name} of shape {ids.shape} must have shape {tuple(self.x.shape)} "
                                 f"and hold characters in [0, {self.vocab})")
        if self.graph is None and self.eager_steps == 2:
            self.graph = mt.cuda.CUDAGraph()
            with mt.cuda.graph(self.graph):
                self.loss = self.train_step(self.x, self.y)
        self.x.copy_(mt.tensor(x))
        self.y.copy_(mt.tensor(y))
        if self.graph is None:
            self.eager_steps += 1
            return self.train_step(self.x, self.y)
        self.graph.replay()
        return self.loss


@mt.no_grad()
def held_out_loss(model: GPT, data: np.ndarray, args: argparse.Namespace) -> float:
    rng = np.random.default_rng(1)  # the same windows every time
    model.eval()
    losses = [loss_of(model, *batch(data, args.batch_size, args.context, rng)).item() for _ in range(8)]
    model.train()
    return float(np.mean(losses))


@mt.no_grad()
def sample(model: GPT, chars: list[str], prompt: str, length: int, rng: np.random.Generator) -> str:
    """length characters after prompt, each drawn from the model's softmax (temperature 0.8)."""
    model.eval()
    code = {c: i for i, c in enumerate(chars)}
    idx = [code[c] for c in prompt]
    for _ in range(length):
        window = mt.tensor(np.array([idx[-model.context:]], dtype=np.int64))
        scores = model(window)[0, -1].double() / 0.8
        p = scores.softmax(0).numpy()
        idx.append(int(rng.choice(len(chars), p=p / p.sum())))
    model.train()
    return "".join(chars[i] for i in idx)


def progress(step: int, steps: int, loss: float, width: int = 30) -> None:
    filled = width * step // steps
    sys.stdout.write(f"\rstep {step:4d}/{steps} [{'#' * filled}{'.' * (width - filled)}]  loss {loss:.3f}")
    sys.stdout.flush()


def timed_loop(args: argparse.Namespace, train_step: Any, progress_on: bool = False) -> float:
    """Runs args.steps training steps (train_step() makes a batch, steps on
    it and returns the loss tensor); returns the seconds of the steps after
    the first five, which pay for one-time work (autotuning, allocation).
    The loss is read back (a wait for the step's kernels) only every tenth
    step and at the last, as a training loop that reports its progress does:
    between reads the host queues the next step while the GPU runs this one.
    Both libraries are timed by this loop."""
    timed_from = 0.0
    for step in range(1, args.steps + 1):
        loss = train_step()
        if step == min(5, args.steps):
            loss.item()  # the warm-up steps' kernels finished: the clock starts here
            timed_from = time.perf_counter()
        if step % 10 == 0 or step == args.steps:
            value = loss.item()
            if progress_on and dist.get_rank() == 0:
                progress(step, args.steps, value)
    return time.perf_counter() - timed_from if args.steps > 5 else 0.0


def train_minitensor(args: argparse.Namespace, data: np.ndarray, chars: list[str]) -> tuple[GPT, float]:
    mt.manual_seed(args.seed)
    model = GPT(len(chars), args.context, args.width, args.heads, args.layers)
    net = model
    if args.ddp:  # rank 0's weights everywhere; gradients averaged during backward
        net = dist.DistributedDataParallel(model)
    optimizer = mt.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=0.01, capturable=args.graph)
    train_step = make_train_step(net, optimizer)
    if args.graph:
        step_of = GraphedStep(train_step, args.batch_size, args.context, len(chars))
    else:
        def step_of(x: np.ndarray, y: np.ndarray) -> mt.Tensor:
            return train_step(mt.tensor(x), mt.tensor(y))
    rng = np.random.default_rng(args.seed + 1000 * dist.get_rank())  # each rank its own windows
    start = time.perf_counter()
    timed = timed_loop(args, lambda: step_of(*batch(data, args.batch_size, args.context, rng)), progress_on=True)
    if dist.get_rank() == 0:
        print(f"  {time.perf_counter() - start:.1f} s")
    if args.ddp and dist.get_world_size() > 1:
        print(f"DDP: {len(net.buckets)} gradient buckets; the last step started {net.last_started_by.count('hook')} "
              f"of them during the backward pass")
    tokens = (args.steps - 5) * args.batch_size * args.context
    return model, tokens / timed if timed else 0.0


def torch_gpt(vocab: int, context: int, width: int, heads: int, layers: int) -> Any:
    """GPT's twin in PyTorch, on the GPU: the same layers, built by torch's
    own modules (nn.TransformerEncoderLayer, pre-LN, causal)."""
    import torch

    class TorchGPT(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = torch.nn.Embedding(vocab, width)
            self.positions = torch.nn.Embedding(context, width)
            self.blocks = torch.nn.ModuleList([
                torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0,
                                                 activation="gelu", batch_first=True, norm_first=True)
                for _ in range(layers)])
            self.norm = torch.nn.LayerNorm(width)
            self.head = torch.nn.Linear(width, vocab)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            t = idx.shape[1]
            x = self.tokens(idx) + self.positions(torch.arange(t, device=idx.device))
            mask = torch.nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
            for block in self.blocks:
                x = block(x, src_mask=mask, is_causal=True)
            return self.head(self.norm(x))

    return TorchGPT().cuda()


def make_torch_train_step(model: Any, optimizer: Any) -> Any:
    """make_train_step's twin for torch_gpt's model: the same five parts."""
    import torch

    params = list(model.parameters())  # listed once, as make_train_step does

    def train_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad()
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        return loss
    return train_step


def train_torch(args: argparse.Namespace, data: np.ndarray, chars: list[str]) -> float:
    """The same model, batches and optimizer in PyTorch on the GPU: tokens per second."""
    import torch

    torch.manual_seed(args.seed)
    model = torch_gpt(len(chars), args.context, args.width, args.heads, args.layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    train_step = make_torch_train_step(model, optimizer)
    rng = np.random.default_rng(args.seed)
    last = [None]  # the last step's loss

    def one_step() -> Any:
        x, y = (torch.from_numpy(a).cuda() for a in batch(data, args.batch_size, args.context, rng))
        last[0] = train_step(x, y)
        return last[0]
    timed = timed_loop(args, one_step)
    print(f"torch: final training loss {last[0].item():.3f}")
    return (args.steps - 5) * args.batch_size * args.context / timed if timed else 0.0


def setup_data_parallel(args: argparse.Namespace) -> None:
    """Data-parallel training, under the launcher (or with --ddp):

        python -m minitensor.distributed.run --nproc 4 examples/train_gpt.py

    every rank trains the same model (DistributedDataParallel: gradients
    averaged in buckets while the backward pass runs) on its own random
    windows, --batch-size of them per rank; rank 0 reports, with every
    rank's tokens per second and their total."""
    args.ddp = args.ddp or any(os.environ.get(v) for v in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"))
    if not args.ddp:
        return
    if args.graph:
        raise SystemExit("train_gpt.py: --graph with data-parallel training is not supported (the captured "
                         "step would hold the collectives)")
    dist.init_process_group()  # first: it picks this rank's GPU before any tensor exists
    if dist.get_rank() != 0:
        sys.stdout = open(os.devnull, "w")  # one rank reports (the others' tokens/s are gathered)


def set_tf32(on: bool, torch_too: bool) -> None:
    """TF32 float32 products on (or off) in minitensor's matmuls and, with
    torch_too, in torch's (cuBLAS's; off by default there, as here)."""
    mt.backends.cuda.matmul.allow_tf32 = on
    if torch_too:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--context", type=int, default=32)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=6e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ddp", action="store_true",
                        help="data-parallel over the ranks of minitensor.distributed.run (on by default under it)")
    parser.add_argument("--target", type=float, default=2.6, help="the held-out loss training must reach")
    parser.add_argument("--torch", action="store_true", help="also train the same model in PyTorch (GPU)")
    parser.add_argument("--graph", action="store_true",
                        help="run the whole training step as one replayed CUDA graph (captured after two steps)")
    parser.add_argument("--tf32", action="store_true",
                        help="TF32 products (tensor cores) in both libraries' float32 matmuls")
    args = parser.parse_args()
    set_tf32(args.tf32, torch_too=args.torch)

    start = time.perf_counter()
    setup_data_parallel(args)
    print(f"minitensor backend: {mt.backend()} ({mt.device_info()})")
    codes, chars = load_text()
    split = int(0.9 * len(codes))
    train, held_out = codes[:split], codes[split:]
    print(f"data: {len(codes)} characters of The Devil's Dictionary, {len(chars)} distinct; "
          f"{len(held_out)} held out")
    model, tokens_per_second = None, 0.0
    mt.manual_seed(args.seed)
    untrained = held_out_loss(GPT(len(chars), args.context, args.width, args.heads, args.layers), held_out, args)
    model, tokens_per_second = train_minitensor(args, train, chars)
    print(model.blocks[0])
    parameters = sum(p.numel() for p in model.parameters())
    final = held_out_loss(model, held_out, args)
    print(f"held-out loss: {untrained:.3f} untrained (ln {len(chars)} = {math.log(len(chars)):.2f} is a uniform "
          f"guess) -> {final:.3f} after {args.steps} steps; {parameters} parameters")
    rng = np.random.default_rng(args.seed)
    for prompt in ("CYNIC, n.  ", "WAR, n.  "):
        print("sample:", sample(model, chars, prompt, 80, rng).replace("\n", " / "))
    print(f"minitensor: {tokens_per_second:,.0f} tokens/s (training, after 5 warm-up steps)")
    if args.ddp:
        each = mt.zeros(dist.get_world_size(), dtype=mt.float64)
        dist.all_gather(each, mt.tensor([tokens_per_second], dtype=mt.float64))
        speeds = each.numpy()
        print(f"data-parallel over {len(speeds)} rank(s) ({dist.get_backend()}), --batch-size {args.batch_size} "
              f"per rank: per-rank tokens/s {', '.join(f'{v:,.0f}' for v in speeds)}; total {speeds.sum():,.0f} "
              f"tokens/s")
    if args.torch:
        torch_speed = train_torch(args, train, chars)
        print(f"torch: {torch_speed:,.0f} tokens/s; minitensor / torch = {tokens_per_second / torch_speed:.2f}")
    print(f"total time {time.perf_counter() - start:.1f} s on the {mt.backend()} backend")
    if final > args.target:
        print(f"error: the held-out loss {final:.3f} is above the target {args.target}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
