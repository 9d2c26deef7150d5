"""shaping: the gradient rules of views, copies, casts, overwrites and
cat/stack. A view's gradient is the incoming gradient viewed back (or
written into the same view of zeros)."""

from __future__ import annotations

from .. import ops
from .._shape import as_shape, normalize_dim
from .engine import Function
from .helpers import unbroadcast, zeros


# ---- views and copies ------------------------------------------------------------------------


class View(Function):
    """A view with a new shape; the shape-only views below share its backward."""

    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        return ops.view(x, shape)

    @staticmethod
    def backward(ctx, grad):
        return (ops.reshape(grad, ctx.in_shape),) + (None,) * (len(ctx.inputs) - 1)


class Reshape(View):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        return ops.reshape(x, shape)


class Squeeze(View):
    @staticmethod
    def forward(ctx, x, dim=None):
        ctx.in_shape = x.shape
        return ops.squeeze(x, dim)


class Unsqueeze(View):
    @staticmethod
    def forward(ctx, x, dim):
        ctx.in_shape = x.shape
        return ops.unsqueeze(x, dim)


class Flatten(View):
    @staticmethod
    def forward(ctx, x, start_dim=0, end_dim=-1):
        ctx.in_shape = x.shape
        return ops.flatten(x, start_dim, end_dim)


class Permute(Function):
    @staticmethod
    def forward(ctx, x, dims):
        out = ops.permute(x, dims)  # which checked dims
        ctx.dims = dims
        return out

    @staticmethod
    def backward(ctx, grad):
        dims = ctx.dims if type(ctx.dims) is tuple else as_shape(ctx.dims, "permute()")
        inverse = [0] * len(dims)
        for i, d in enumerate(dims):
            inverse[d % len(dims)] = i  # forward's ops.permute checked each d in [-ndim, ndim)
        return ops.permute(grad, tuple(inverse)), None


class Transpose(Function):
    @staticmethod
    def forward(ctx, x, dim0, dim1):
        ctx.dims = (dim0, dim1)
        return ops.transpose(x, dim0, dim1)

    @staticmethod
    def backward(ctx, grad):
        return ops.transpose(grad, *ctx.dims), None, None


class Expand(Function):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.in_shape = x.shape
        return ops.expand(x, shape)

    @staticmethod
    def backward(ctx, grad):
        return unbroadcast(grad, ctx.in_shape), None


class Index(Function):
    """Basic indexing x[key]; backward writes grad into the same view of zeros."""

    @staticmethod
    def forward(ctx, x, key):
        ctx.key = key
        ctx.in_shape = x.shape
        return ops.index(x, key)

    @staticmethod
    def backward(ctx, grad):
        out = zeros(ctx.in_shape, grad)
        ops.copy_(ops.index(out, ctx.key), grad)  # basic indices never repeat an element
        return out, None


class Narrow(Function):
    @staticmethod
    def forward(ctx, x, dim, start, length):
        ctx.args = (dim, start, length)
        ctx.in_shape = x.shape
        return ops.narrow(x, dim, start, length)

    @staticmethod
    def backward(ctx, grad):
        out = zeros(ctx.in_shape, grad)
        ops.copy_(ops.narrow(out, *ctx.args), grad)
        return out, None, None, None


class Contiguous(Function):
    @staticmethod
    def forward(ctx, x):
        return ops.contiguous(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Clone(Function):
    @staticmethod
    def forward(ctx, x):
        return ops.clone(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Cast(Function):
    @staticmethod
    def forward(ctx, x, dtype):
        ctx.in_dtype = x.dtype
        return ops.cast(x, dtype)

    @staticmethod
    def backward(ctx, grad):
        return ops.cast(grad, ctx.in_dtype), None


# ---- overwrites and joining --------------------------------------------------------------


class Overwrite(Function):
    """old with old[key] = value (a number or a tensor broadcast to old[key]): how
    copy_, fill_, zero_ and setitem are recorded on a tensor in a graph. The
    gradient of old is grad with the overwritten elements zeroed; value's is
    grad[key] summed down to value's shape."""

    @staticmethod
    def forward(ctx, old, key, value):
        out = ops.clone(old)
        ops.setitem(out, key, value)
        ctx.key = key
        ctx.value_shape = value.shape if ops.is_array(value) else None
        return out

    @staticmethod
    def backward(ctx, grad):
        g_old = ops.clone(grad)
        ops.fill_(ops.index(g_old, ctx.key), 0.0)
        g_value = None
        if ctx.value_shape is not None and ctx.needs_input_grad[2]:
            g_value = unbroadcast(ops.index(grad, ctx.key), ctx.value_shape)
        return g_old, None, g_value


class Cat(Function):
    """cat along dim; called as Cat.apply(dim, *tensors)."""

    @staticmethod
    def forward(ctx, dim, *tensors):
        out = ops.cat(list(tensors), dim)
        ctx.dim = normalize_dim(dim, out.ndim, "cat()")
        ctx.sizes = [t.shape[ctx.dim] for t in tensors]
        return out

    @staticmethod
    def backward(ctx, grad):
        grads, start = [], 0
        for size in ctx.sizes:
            grads.append(ops.narrow(grad, ctx.dim, start, size))
            start += size
        return (None, *grads)


class Stack(Function):
    """stack along a new dim; called as Stack.apply(dim, *tensors)."""

    @staticmethod
    def forward(ctx, dim, *tensors):
        out = ops.stack(list(tensors), dim)
        ctx.dim = normalize_dim(dim, out.ndim, "stack()")
        return out

    @staticmethod
    def backward(ctx, grad):
        before = (slice(None),) * ctx.dim
        return (None, *(ops.index(grad, before + (i,)) for i in range(len(ctx.inputs) - 1)))
