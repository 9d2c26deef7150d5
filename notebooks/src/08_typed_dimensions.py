# %% [markdown]
# # 8. Typed dimensions: index mistakes the compiler refuses
#
# A kernel's index arithmetic is usually positional: `a[row * K + k]`,
# `row < M`. Swap `row` and `k`, or compare a row with the column count, and
# the kernel still compiles and runs, and is wrong only for some shapes.
# `src/typed_dims.h` gives every dimension a type of its own (`I` for rows,
# `J` for columns, `K` for the dimension a product sums over), so that those
# mistakes are compile errors. This notebook makes the mistake in a plain
# kernel, watches it pass unnoticed on a square product, then makes it in a
# typed kernel and reads the compiler's refusal. Then the pieces of the
# header (coordinate sets, folds with carries, compound indices), and the
# library's matmul rung written with them beside the original.

# %%
# Make the repository's minitensor importable when the notebook runs from notebooks/.
import sys
from pathlib import Path

repo = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "minitensor" / "__init__.py").is_file())
sys.path.insert(0, str(repo))

import numpy as np

import minitensor as mt

mt.manual_seed(0)
print("backend:", mt.backend())

# %% [markdown]
# ## The mistake in a positional kernel
# One thread per output, `out = a @ b` for an M x K matrix `a` and a K x N
# matrix `b`. The bounds check should read `row < M && col < N`; it reads
# `row < N`.

# %%
POSITIONAL = r'''
extern "C" __global__ void matmul_positional(float *out, const float *a, const float *b,
                                             long long M, long long N, long long K)
{
    const long long row = (long long)blockIdx.y * blockDim.y + threadIdx.y;
    const long long col = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row < N && col < N) {  // the mistake: row against N, the number of columns
        float acc = 0.0f;
        for (long long k = 0; k < K; ++k)
            acc += a[row * K + k] * b[k * N + col];
        out[row * N + col] = acc;
    }
}
'''
positional = mt.cuda.compile(POSITIONAL, name="matmul_positional")


def run(kernel, m: int, n: int, k: int) -> float:
    """The largest error of kernel's product of an m x k and a k x n matrix against NumPy's."""
    a = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal((k, n)).astype(np.float32)
    out = mt.zeros(m, n)
    kernel(grid=((n + 15) // 16, (m + 15) // 16), block=(16, 16), args=(out, mt.tensor(a), mt.tensor(b), m, n, k))
    return float(np.abs(out.numpy() - a @ b).max())


print("square, 40 x 40:        max error", run(positional, 40, 40, 24))
print("more rows, 56 x 40:     max error", run(positional, 56, 40, 24))

# %% [markdown]
# The square product is right, so a test on square matrices passes. With
# more rows than columns, rows 40 to 55 are never written. (With more columns
# than rows it is worse: threads past the last row read and write outside the
# matrices.)
#
# ## The same kernel with typed dimensions
# The typed kernel declares its three dimensions, views `a`, `b` and `out`
# by dimension (a stride per dimension, not per position), and bounds each
# dimension with an index *of that dimension*: `end_i` is an `I`, `end_j` a
# `J`. With `-DMISTAKE` it makes the same mistake.

# %%
TYPED = r'''
#include "typed_dims.h"

TD_DIMENSION(I);  // rows of a and out
TD_DIMENSION(J);  // columns of b and out
TD_DIMENSION(K);  // the dimension the product sums over

extern "C" __global__ void matmul_typed(float *out, const float *a, const float *b,
                                        long long M, long long N, long long Kn)
{
    const I end_i(M);
    const J end_j(N);
    const K end_k(Kn);
    const auto A = td::view(a, td::Stride<I>{Kn}, td::Stride<K>{1});
    const auto B = td::view(b, td::Stride<K>{N}, td::Stride<J>{1});
    const auto Out = td::view(out, td::Stride<I>{N}, td::Stride<J>{1});
    // The compound index: block blockIdx.y of 16 rows, row threadIdx.y in it.
    const auto i = td::compound<td::Fold<I, 16>>(blockIdx.y, threadIdx.y);
    const auto j = td::compound<td::Fold<J, 16>>(blockIdx.x, threadIdx.x);
#ifdef MISTAKE
    if (i < end_j && j < end_j) {
#else
    if (i < end_i && j < end_j) {
#endif
        float acc = 0.0f;
        for (K k{0}; k < end_k; ++k) {
            const auto at = td::coords(i, j, k);
            acc += A[at] * B[at];  // A takes (i, k) from the set, B takes (k, j)
        }
        Out(i, j) = acc;
    }
}
'''
try:
    mt.cuda.compile(TYPED, name="matmul_typed", options=("-DMISTAKE",))
    print("compiled?!")
except mt.CompileError as e:
    errors = [line.strip() for line in str(e).splitlines() if "error" in line]
    print("refused:\n" + "\n".join(errors[:2]))

# %% [markdown]
# The compiler (the host's C++ compiler on the emulator, NVRTC on a GPU)
# finds no `<` between a row (a folded `I`) and a `J`. Without the mistake the kernel
# compiles, and is right on every shape:

# %%
typed = mt.cuda.compile(TYPED, name="matmul_typed")
for m, n in [(40, 40), (56, 40), (40, 56)]:
    print(f"{m} x {n}: max error {run(typed, m, n, 24):.2e}")

# %% [markdown]
# Three more things happened there.
#
# - **Subscripts by dimension.** `A(i, k)` and `A(k, i)` are the same
#   element: the view finds each coordinate by its type. `A(i, j)` does not
#   compile (A has no `J`), nor does `A(i, 3)` (a plain int is no coordinate).
# - **A coordinate set projects.** `at = td::coords(i, j, k)` holds one point
#   of the product's three-dimensional loop; `A[at]` takes the `I` and the
#   `K` of it, `B[at]` the `K` and the `J`, and ignores the rest.
# - **A compound index.** `td::compound<td::Fold<I, 16>>(blockIdx.y, threadIdx.y)`
#   is the typed form of `blockIdx.y * 16 + threadIdx.y`: the row as the pair
#   (block, row within the block), the tile size in its type.
#
# ## Folds, with carries
# `td::Fold<K, 8>` is K split into (outer, inner) with k = 8 * outer + inner:
# a row is (tile, row within the tile), a float4 layout is (vector, lane), an
# interleaved layout stores an M x K matrix as K/8 x M x 8 ("K8 x K"). Adding
# an offset to a folded coordinate carries across the fold, and a view whose
# layout is folded takes plain `K` coordinates, folding them itself. This
# kernel writes, for each k, the parts of `fold<8>(k) + 3`, and copies a
# matrix into the interleaved layout through a folded view:

# %%
FOLDS = r'''
#include "typed_dims.h"

TD_DIMENSION(I);
TD_DIMENSION(K);

extern "C" __global__ void carries(long long *outer, long long *inner, long long n)
{
    const K k(threadIdx.x);
    if (k < K(n)) {
        const td::Fold<K, 8> f = td::fold<8>(k) + 3;  // (k + 3) as (outer, inner)
        outer[k.v] = f.outer;
        inner[k.v] = f.inner;
    }
}

extern "C" __global__ void interleave(float *out, const float *x, long long rows, long long cols)
{
    const auto X = td::view(x, td::Stride<I>{cols}, td::Stride<K>{1});
    const auto Out = td::view(out, td::Stride<td::Fold<K, 8>>{8 * rows, 1}, td::Stride<I>{8});
    const I i(blockIdx.x);
    for (K k(threadIdx.x); k < K(cols); k += blockDim.x)
        Out(i, k) = X(i, k);  // k folded by Out's layout: (k / 8) * 8 * rows + i * 8 + k % 8
}
'''
n = 12
outer, inner = mt.zeros(n, dtype=mt.int64), mt.zeros(n, dtype=mt.int64)
mt.cuda.compile(FOLDS, name="carries")(grid=1, block=32, args=(outer, inner, n))
print("k          ", list(range(n)))
print("k + 3 outer", outer.tolist())
print("k + 3 inner", inner.tolist())

x = np.arange(3 * 16, dtype=np.float32).reshape(3, 16)
out = mt.zeros(2, 3, 8)
mt.cuda.compile(FOLDS, name="interleave")(grid=3, block=32, args=(out, mt.tensor(x), 3, 16))
print("interleaved (K/8, M, 8):\n", out.numpy())
assert (out.numpy() == x.reshape(3, 2, 8).transpose(1, 0, 2)).all()

# %% [markdown]
# ## A rung of the library's ladder, typed
# `src/matmul_blocktile_2d_typed.cu` is rung 5 of the matmul ladder
# (`src/matmul_blocktile_2d.cu`, 8 x 8 outputs per thread, 128 x 128 block
# tiles) with its index arithmetic typed and nothing else changed. The load
# of the A tile, side by side:

# %%
def lines_with(path: str, needle: str, after: int = 0) -> str:
    text = (repo / path).read_text().splitlines()
    at = next(n for n, line in enumerate(text) if needle in line)
    return "\n".join(text[at:at + after + 1])


print("src/matmul_blocktile_2d.cu:")
print(lines_with("src/matmul_blocktile_2d.cu", "for (int e = tid; e < BM * BK", 4))
print("\nsrc/matmul_blocktile_2d_typed.cu:")
print(lines_with("src/matmul_blocktile_2d_typed.cu", "for (int e = tid; e < BM * BK", 4))

# %% [markdown]
# The typed rows are `Fold<I, 128>`: (row tile of the block, row within the
# tile). The global view `A` uses the whole row; the shared-memory tile keeps
# the block's current tile only, so its outer stride is 0 and it reads the
# inner part: one set of coordinates for both memories. Every output is the
# same sum in the same order, so the two rungs agree bit for bit:

# %%
a, b = mt.randn(130, 70), mt.randn(70, 200)
original = mt.kernels.matmul(a, b, "blocktile_2d")
typed_rung = mt.kernels.matmul(a, b, "blocktile_2d_typed")
print("bit-equal:", bool((original.numpy() == typed_rung.numpy()).all()))
print("max error against NumPy:", float(np.abs(typed_rung.numpy() - a.numpy() @ b.numpy()).max()))

# %% [markdown]
# The types cost nothing at run time: they are structs of integers and
# inline functions, and after inlining the compiler sees the integer
# arithmetic the original writes by hand. docs/kernels.md ("Typed
# dimensions") gives the H100's timings of the two rungs and the instruction
# counts of their machine code; `bench/typed_dims.py` measures both. The
# emulator runs every CUDA thread on the CPU, so its times say nothing about
# a GPU's; on a GPU this cell times them:

# %%
if mt.backend() == "cuda":
    a, b = mt.randn(2048, 2048), mt.randn(2048, 2048)
    start, end = mt.cuda.Event(enable_timing=True), mt.cuda.Event(enable_timing=True)
    for algo in ["blocktile_2d", "blocktile_2d_typed"] * 2:
        mt.kernels.matmul(a, b, algo)
        start.record()
        mt.kernels.matmul(a, b, algo)
        end.record()
        end.synchronize()
        print(f"{algo:20s} {start.elapsed_time(end):.3f} ms")
else:
    print("emulator: see docs/kernels.md for the GPU's numbers")

# %% [markdown]
# `tests/test_typed_dims.py` keeps the refusals honest: it compiles five
# mistakes (a row against the column count, a row used along K, a view
# subscripted by a dimension it lacks, a plain int as a subscript, an index
# made silently from an int) with the host compiler and nvcc, and checks that
# each one fails with the diagnostic that names it.
