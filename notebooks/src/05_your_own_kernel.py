# %% [markdown]
# # 5. Your own kernel, compiled at run time
#
# `mt.cuda.compile` takes CUDA C++ as a string and gives back a kernel you
# launch on minitensor tensors. On a GPU, NVRTC compiles it for your card and
# the driver launches it (no nvcc needed); on a laptop, the emulator
# translates the same source and runs every CUDA thread on the CPU, with its
# checks for the mistakes kernels are known for. This notebook writes three
# kernels, compares each with the library's own op, and then breaks one on
# purpose to see what the emulator says.

# %%
# Make the repository's minitensor importable when the notebook runs from notebooks/.
import sys
import time
from pathlib import Path

repo = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "minitensor" / "__init__.py").is_file())
sys.path.insert(0, str(repo))

import matplotlib.pyplot as plt

import minitensor as mt

plt.rcParams.update({"figure.dpi": 100, "font.size": 10})
mt.manual_seed(0)
print("backend:", mt.backend())

# %% [markdown]
# ## A first kernel: one thread per element
# Each thread computes its global index from its block and thread numbers.
# The grid is rounded *up* to whole blocks, so the last block has threads
# past the end of the data: the `if` keeps them from writing there.

# %%
SAXPY = r'''
extern "C" __global__ void saxpy(float *out, const float *x, const float *y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)              // the last block runs past the end: those threads do nothing
        out[i] = a * x[i] + y[i];
}
'''
start = time.perf_counter()
saxpy = mt.cuda.compile(SAXPY, name="saxpy")
print(f"compiled in {time.perf_counter() - start:.2f} s (from the disk cache: {saxpy.cached})")
print(saxpy)  # the parameters, read from the source: they decide how arguments are passed

# %% [markdown]
# A launch names the grid (how many blocks), the block (threads per block)
# and the arguments, in the kernel's order. Tensors are passed as the address
# of their first element; numbers are converted to the parameter's C type.

# %%
n = 1000
x, y = mt.randn(n), mt.randn(n)
out = mt.empty(n)
block = 128
grid = (n + block - 1) // block
saxpy(grid, block, (out, x, y, 2.0, n))

expected = 2.0 * x + y  # the library's own kernels
print("blocks:", grid, "threads:", grid * block, "elements:", n)
print("largest difference from the library:", (out - expected).abs().max().item())

# %% [markdown]
# Arguments are checked against the parameters before anything runs: a
# float where the kernel takes an `int`, a float64 tensor for a `float *`, or
# a strided view where the kernel expects contiguous memory are errors, not
# silent garbage.

# %%
for bad in [(out, x, y, 2.0, 1000.0), (out, x.double(), y, 2.0, n), (out, mt.randn(n, 2)[:, 0], y, 2.0, n)]:
    try:
        saxpy(grid, block, bad)
    except (TypeError, ValueError) as e:
        print(type(e).__name__ + ":", e)

# %% [markdown]
# ## Any strided view: the library's descriptor
# A parameter declared `mt_tensor` receives the same descriptor the library's
# kernels get: the data pointer, offset, shape and strides. With the helpers
# of `src/indexing.h` (notebook 1) a kernel reads any view: here a transposed
# slice, which is not contiguous.

# %%
STRIDED_EXP = r'''
#include "indexing.h"

extern "C" __global__ void exp_any_view(mt_tensor out, const mt_tensor in, long long n)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int64_t index[MT_MAX_DIMS];
    to_index(i, in.shape, in.ndim, index);   // ordinal -> multi-index
    const float *src = (const float *)in.data + in.offset;
    float *dst = (float *)out.data + out.offset;
    dst[index_to_position(index, out.strides, out.ndim)] =
        expf(src[index_to_position(index, in.strides, in.ndim)]);
}
'''
exp_any_view = mt.cuda.compile(STRIDED_EXP, name="exp_any_view")
base = mt.randn(6, 8)
view = base.t()[1::2]  # shape (4, 6), strides (2, 8): not contiguous
result = mt.empty(*view.shape)
exp_any_view(1, 64, (result, view, view.numel()))
print("view shape", view.shape, "strides", view.strides, "contiguous:", view.is_contiguous())
print("largest difference from view.exp():", (result - view.exp()).abs().max().item())

# %% [markdown]
# ## Shared memory: a block sums its part
# A reduction gives each block a slice of the input. Its threads copy the
# slice into shared memory, then add pairs in a tree, halving the active
# threads at each level. The shared array is *dynamic* (`extern __shared__`):
# its size is given at launch with `shared_mem`. Two barriers matter: one
# after the copy (no thread may read a neighbour's element before it is
# written) and one after each level of the tree.

# %%
BLOCK_SUM = r'''
extern "C" __global__ void block_sum(float *sums, const float *x, int n)
{
    extern __shared__ float partial[];
    const int t = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + t;
    partial[t] = i < n ? x[i] : 0.0f;   // zero-fill past the end: adding 0 changes nothing
    __syncthreads();                     // the whole slice is in shared memory
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (t < stride)
            partial[t] += partial[t + stride];
        __syncthreads();                 // this level is done before the next one reads it
    }
    if (t == 0)
        sums[blockIdx.x] = partial[0];
}
'''
block_sum = mt.cuda.compile(BLOCK_SUM, name="block_sum")
n, block = 10_000, 256
data = mt.rand(n)
blocks = (n + block - 1) // block
sums = mt.empty(blocks)
block_sum(blocks, block, (sums, data, n), shared_mem=block * 4)  # 4 bytes per float
print("sum of the block sums:", sums.sum().item(), " library's data.sum():", data.sum().item())

fig, ax = plt.subplots(figsize=(8, 2.5))
ax.bar(range(blocks), sums.numpy(), color="tab:blue")
ax.set_xlabel("block")
ax.set_ylabel("its partial sum")
ax.set_title(f"{blocks} blocks of {block} threads: one partial sum each (the last block is partly zero-filled)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## Breaking it on purpose: the missing barrier
# Remove the barriers and the tree reads partial sums other threads have not
# written yet. On a GPU such a race may give the right answer today and a
# wrong one tomorrow. The emulator runs each thread until it reaches a
# barrier, so without barriers thread 0 reads elements no thread has written
# yet. Fresh shared memory is filled with NaN ("poisoned"), so the result
# cannot look right by chance; with `MINITENSOR_EMU_CHECK=full` the emulator
# also names the two threads and the lines of the race.

# %%
racy = BLOCK_SUM.replace("__syncthreads();", "/* no barrier */")
racy_sum = mt.cuda.compile(racy, name="block_sum")
try:
    racy_sum(blocks, block, (sums, data, n), shared_mem=block * 4)
    print("without barriers, the block sums are:", sums.numpy()[:4], "...")
    print("their total:", sums.sum().item(), "(the right total is", data.sum().item(), ")")
except mt.CudaError as e:  # on the emulator with MINITENSOR_EMU_CHECK=full
    print("the emulator stopped the kernel:", e)

# %% [markdown]
# ## Mistakes at compile time
# A syntax error is reported with the compiler's own message and the line
# numbers of *your* source, whichever compiler ran: g++ (the emulator) points
# at line 3, where the `;` is missing; NVRTC (a GPU) at line 4, where it
# found the `}` instead.

# %%
try:
    mt.cuda.compile('extern "C" __global__ void oops(float *out)\n{\n    out[0] = 1.0f\n}\n', name="oops")
except mt.CompileError as e:
    print(e)

# %% [markdown]
# ## A kernel with a gradient
# `mt.autograd.Function` turns a pair of kernels (forward and backward) into
# an op that autograd differentiates. Here `y = x**3` by one kernel, and
# `dx = 3 x**2 * dy` by another.

# %%
CUBE = r'''
extern "C" __global__ void cube(float *y, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = x[i] * x[i] * x[i];
}

extern "C" __global__ void cube_backward(float *dx, const float *dy, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        dx[i] = 3.0f * x[i] * x[i] * dy[i];
}
'''
cube_kernel = mt.cuda.compile(CUBE, name="cube")
cube_backward_kernel = mt.cuda.compile(CUBE, name="cube_backward")


class Cube(mt.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        y = mt.empty(*x.shape)
        cube_kernel((x.numel() + 255) // 256, 256, (y, x, x.numel()))
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        dx = mt.empty(*x.shape)
        cube_backward_kernel((x.numel() + 255) // 256, 256, (dx, grad.contiguous(), x, x.numel()))
        return dx


x = mt.tensor([-2.0, -1.0, 0.5, 3.0], requires_grad=True)
Cube.apply(x).sum().backward()
print("x       ", x.detach().numpy())
print("x.grad  ", x.grad.numpy(), " expected 3 x^2:", 3 * x.detach().numpy() ** 2)
