"""The program each rank runs in tests/test_distributed.py (not collected by pytest).

    python -m minitensor.distributed.run --nproc 2 tests/dist_worker.py collectives
    python -m minitensor.distributed.run --nproc 2 tests/dist_worker.py ddp
    ... fail | exit | timeout

Each check raises on a mismatch; the uncaught exception aborts the whole job
(minitensor.distributed's excepthook), so the test sees a non-zero exit and
the message. On success every rank prints one "rank R: <what> ok" line.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import minitensor as mt  # noqa: E402
import minitensor.distributed as dist  # noqa: E402

SIZES = [(0,), (1,), (7,), (33,), (5, 13), (1025,)]


def rank_data(r: int, shape: tuple, dtype: type) -> np.ndarray:
    """What rank r contributes: distinct per rank, size and dtype, known to every rank."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(1000 * r + n)
    return rng.standard_normal(shape).astype(dtype)


def close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    tol = 1e-5 if got.dtype == np.float32 else 1e-12
    if got.shape != want.shape or not np.allclose(got, want, rtol=tol, atol=tol):
        diff = np.max(np.abs(got - want)) if got.shape == want.shape and got.size else "shape"
        raise AssertionError(f"rank {dist.get_rank()}: {what}: wrong result (max diff {diff})")


def collectives() -> None:
    r, w = dist.get_rank(), dist.get_world_size()
    for np_dtype, dtype in ((np.float32, mt.float32), (np.float64, mt.float64)):
        for shape in SIZES:
            what = f"{np.dtype(np_dtype).name}{shape}"
            all_data = [rank_data(k, shape, np_dtype) for k in range(w)]
            for op, ref in (("sum", np.sum), ("avg", np.mean), ("max", np.max)):
                t = mt.tensor(all_data[r], dtype=dtype)
                dist.all_reduce(t, op=op)
                want = ref(np.stack(all_data), axis=0).astype(np_dtype) if all_data[0].size else all_data[r]
                close(t.numpy(), want, f"all_reduce({op}) {what}")
            src = w - 1
            t = mt.tensor(all_data[r], dtype=dtype)
            dist.broadcast(t, src=src)
            close(t.numpy(), all_data[src], f"broadcast {what}")
            # all_gather, both forms
            t = mt.tensor(all_data[r], dtype=dtype)
            out = mt.zeros(w, *shape, dtype=dtype)
            dist.all_gather(out, t)
            close(out.numpy(), np.stack(all_data), f"all_gather(tensor) {what}")
            outs = [mt.zeros(*shape, dtype=dtype) for _ in range(w)]
            dist.all_gather(outs, t)
            for k in range(w):
                close(outs[k].numpy(), all_data[k], f"all_gather(list)[{k}] {what}")
            # reduce_scatter: every rank contributes w chunks shaped like `shape`
            chunks = [[rank_data(k, shape, np_dtype) * (j + 1) for j in range(w)] for k in range(w)]
            for op, ref in (("sum", np.sum), ("avg", np.mean), ("max", np.max)):
                want = ref(np.stack([chunks[k][r] for k in range(w)]), axis=0).astype(np_dtype)
                out = mt.zeros(*shape, dtype=dtype)
                dist.reduce_scatter(out, mt.tensor(np.stack(chunks[r]), dtype=dtype), op=op)
                close(out.numpy(), want, f"reduce_scatter(tensor, {op}) {what}")
                out = mt.zeros(*shape, dtype=dtype)
                dist.reduce_scatter(out, [mt.tensor(c, dtype=dtype) for c in chunks[r]], op=op)
                close(out.numpy(), want, f"reduce_scatter(list, {op}) {what}")
    # broadcast moves bytes: int64 and bool tensors too (DDP broadcasts every buffer).
    for values, dtype in (([r, -r * 10**12, 7], mt.int64), ([r % 2 == 0, True, r == 0], mt.bool)):
        t = mt.tensor(values, dtype=dtype)
        dist.broadcast(t, src=w - 1)
        want = mt.tensor([w - 1, -(w - 1) * 10**12, 7], dtype=mt.int64).numpy() if dtype is mt.int64 else \
            np.array([(w - 1) % 2 == 0, True, w - 1 == 0])
        if not np.array_equal(t.numpy(), want):
            raise AssertionError(f"rank {r}: broadcast of {dtype}: {t.numpy()} != {want}")
    # async_op=True: a Work to wait on; several in flight at once, waited in any order.
    for np_dtype, dtype in ((np.float32, mt.float32), (np.float64, mt.float64)):
        datas = [[rank_data(k, (n,), np_dtype) for k in range(w)] for n in (0, 1, 33, 1025)]
        ts = [mt.tensor(d[r], dtype=dtype) for d in datas]
        works = [dist.all_reduce(t, op=op, async_op=True) for t, op in zip(ts, ("sum", "avg", "max", "avg"))]
        assert all(isinstance(wk, dist.Work) for wk in works), works
        for wk in reversed(works):
            assert wk.wait() is True and wk.is_completed()
        for t, d, ref in zip(ts, datas, (np.sum, np.mean, np.max, np.mean)):
            want = ref(np.stack(d), axis=0).astype(np_dtype) if d[0].size else d[r]
            close(t.numpy(), want, f"all_reduce(async_op=True) {np.dtype(np_dtype).name}({d[0].size},)")
    view = mt.tensor(rank_data(r, (5, 3), np.float32)).t()
    dist.all_reduce(view, async_op=True).wait()
    close(view.numpy(), sum(rank_data(k, (5, 3), np.float32) for k in range(w)).T, "all_reduce(view, async_op)")
    # A non-contiguous tensor goes through a contiguous copy and back.
    base = mt.tensor(rank_data(r, (6, 4), np.float64), dtype=mt.float64)
    view = base.t()
    dist.all_reduce(view, op="sum")
    close(base.numpy(), sum(rank_data(k, (6, 4), np.float64) for k in range(w)), "all_reduce(transposed view)")
    dist.barrier()
    # Errors are exceptions with the library's message, and leave the group usable.
    try:
        dist.all_reduce(mt.zeros(3), op="mean")
    except ValueError as e:
        assert "unknown reduce op" in str(e), e
    else:
        raise AssertionError("op='mean' was accepted")
    try:
        dist.all_gather(mt.zeros(w * 3 + 1), mt.zeros(3))
    except mt.ShapeError as e:
        assert "mtd_all_gather" in str(e) and f"rank {r} of {w}" in str(e), e
    else:
        raise AssertionError("a wrong all_gather output size was accepted")
    # A descriptor that reaches past its allocation is refused by the core's
    # extent check (src/validate.cu) before this rank sends or receives a byte.
    from minitensor.distributed import _comm_lib

    z = mt.zeros(4)
    d = type(z.descriptor()).from_buffer_copy(z.descriptor())
    d.offset = 2  # 4 elements from element 2: two past the end
    try:
        _comm_lib.check(_comm_lib.load().mtd_all_reduce(d, 0), "mtd_all_reduce")
    except ValueError as e:
        assert "mtd_all_reduce" in str(e) and "t (offset 2" in str(e) and "allocation" in str(e), e
    else:
        raise AssertionError("a descriptor past the end of its allocation was accepted")
    expected_device = f"cuda:{dist.get_local_rank()}" if mt.backend() == "cuda" else "cpu-emulator"
    assert mt.zeros(2).device == expected_device, (mt.zeros(2).device, expected_device)
    dist.barrier()
    print(f"rank {r}: collectives ok ({w} ranks)", flush=True)


def ddp() -> None:
    """2 ranks with half the batch each end with the weights of 1 process on the whole batch."""
    from examples.train_digits import build_model, load_digits
    import minitensor.nn.functional as F

    r, w = dist.get_rank(), dist.get_world_size()
    images, labels = load_digits()
    steps, batch = 4, 32 * w
    x_all, y_all = images[: steps * batch], labels[: steps * batch]
    mean, std = x_all.mean(axis=0), x_all.std(axis=0)
    std = np.where(std > 0, std, 1.0).astype(np.float32)

    def make(seed: int):
        mt.manual_seed(seed)
        model = build_model()
        model[0].mean.copy_(mt.tensor(mean))
        model[0].std.copy_(mt.tensor(std))
        return model

    # Different seeds per rank: DDP must broadcast rank 0's initial weights.
    model = dist.DistributedDataParallel(make(100 + r), bucket_cap_mb=0.02)  # 20 KB: several buckets
    assert len(model.buckets) > 1, model.buckets
    opt = mt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    shard = batch // w
    for s in range(steps):
        lo = s * batch + r * shard
        opt.zero_grad()
        loss = F.cross_entropy(model(mt.tensor(x_all[lo : lo + shard])), y_all[lo : lo + shard])
        loss.backward()
        # The overlap: every bucket started from the gradient hooks, during
        # the backward pass, in order, none left for its end.
        if model.last_started_by != ["hook"] * len(model.buckets):
            raise AssertionError(f"rank {r}: buckets started by {model.last_started_by}")
        opt.step()
    mine = {k: v.numpy() for k, v in model.module.state_dict().items()}

    # Every rank holds the same weights.
    for k, v in mine.items():
        gathered = mt.zeros(w, *v.shape)
        dist.all_gather(gathered, mt.tensor(v))
        for j in range(w):
            if not np.array_equal(gathered.numpy()[j], v):
                raise AssertionError(f"rank {r}: {k} differs from rank {j}'s")

    if r == 0:
        ref = make(100)
        ref_opt = mt.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
        for s in range(steps):
            lo = s * batch
            ref_opt.zero_grad()
            F.cross_entropy(ref(mt.tensor(x_all[lo : lo + batch])), y_all[lo : lo + batch]).backward()
            ref_opt.step()
        worst = 0.0
        for k, v in ref.state_dict().items():
            want = v.numpy()
            if not np.allclose(mine[k], want, rtol=1e-4, atol=1e-5):
                raise AssertionError(f"DDP weights {k} differ from one process's: "
                                     f"max diff {np.max(np.abs(mine[k] - want)):.3g}")
            worst = max(worst, float(np.max(np.abs(mine[k] - want))))
        print(f"rank 0: ddp ok ({w} ranks x {shard} samples == 1 x {batch}; max weight diff {worst:.2g})",
              flush=True)
    dist.barrier()


def fail() -> None:
    """Rank 1 raises before a collective that the others enter."""
    if dist.get_rank() == 1:
        raise ValueError("rank 1 fails on purpose")
    dist.all_reduce(mt.ones(3))
    time.sleep(60)  # never reached: the failure must end this rank too


def exit_early() -> None:
    """Rank 1 dies without a word (os._exit) while the others wait in a collective."""
    if dist.get_rank() == 1:
        import os

        os._exit(3)
    dist.all_reduce(mt.ones(3))
    time.sleep(60)


def timeout() -> None:
    """Rank 1 never calls the collective: the others time out (2 s) and the job fails."""
    dist.set_timeout(2.0)
    if dist.get_rank() == 1:
        time.sleep(60)
    dist.all_reduce(mt.ones(3))


if __name__ == "__main__":
    what = sys.argv[1]
    dist.init_process_group(timeout=60.0)
    {"collectives": collectives, "ddp": ddp, "fail": fail, "exit": exit_early, "timeout": timeout}[what]()
    dist.destroy_process_group()
