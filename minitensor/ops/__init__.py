"""ops: the raw tensor operations of minitensor, on Arrays, without autograd.

Every function of this package takes Arrays (minitensor/_array.py; a Tensor is an
Array, so Tensors are accepted) and Python numbers where noted, checks its
arguments, allocates its output Array and calls one or more engine kernels
through minitensor/_lib/. It returns Arrays: it knows nothing of Tensor or
of gradients. The gradient rules (minitensor/autograd/) call these functions
in their forward and backward, and the Tensor layer (minitensor/tensor.py)
wraps the Arrays they return as Tensors.

Argument checks happen here, before any kernel runs, so a bad call raises a
Python exception naming the offending shapes or dim and never leaves an
output half-written. The C library checks again.

Conventions, as in torch and NumPy:

- shapes broadcast from the right; a mismatch raises ShapeError (a
  ValueError) naming both shapes;
- a dim may be negative; out of range raises DimError (an IndexError)
  naming the dim and the rank;
- dtypes promote as torch's do (minitensor/_dtype.py, the table in
  docs/api.md): bool < int64 < float32 < float64 by category, the operand
  of the lower dtype cast first; a Python number takes the dtype of the
  tensor it meets unless it is of a higher category (2.5 with an int64
  tensor gives float32). Comparisons give bool; argmax/argmin give int64;
  ops that only make sense for floats (exp, true division, mean, ...) take
  int64 and bool tensors as float32, as torch does; matmul, softmax and
  the other float kernels refuse them with a DTypeError.

Views (view, permute, expand, indexing, ...) are computed here too: they
only change shape, strides and offset (with the rules of _shape.py), and
share the storage.

Ops never hand a tensor with no elements to the engine: such outputs need
no kernel, and an empty input is handled in Python (e.g. the sum over a dim
of length 0 is filled with 0).

The package is sliced by kernel family, each module beside its
src/<family>.cu, and the family modules come in a fixed order: each imports
only from the modules before it (tests/test_layers.py checks it):

    core           checks, scalars, promotion, copies, fills, casts, joining
    reduce         sum, prod, max, min, argmax, argmin, mean  (src/reduce*.cu)
    elementwise    map_, zip_, the operators, in-place ops    (src/map.cu, src/zip.cu)
    gather         gather, scatter_add                        (src/gather.cu)
    where          where                                      (src/where.cu)
    softmax        softmax, log_softmax, their gradient       (src/softmax.cu)
    logsumexp      logsumexp and its gradient                 (src/logsumexp.cu)
    cross_entropy  cross_entropy_rows and its gradient        (src/cross_entropy.cu)
    norm           layer_norm and its gradient                (src/layernorm.cu)
    attention      attention, masked_softmax                  (src/attention.cu, src/masked_softmax.cu)
    matmul         matmul, with autotune.py's configuration   (src/matmul*.cu)
    conv           im2col, col2im, conv2d_tiled, conv2d_igemm, the depthwise gradients (src/conv*.cu)
    pool           max, average and adaptive pooling          (src/pool.cu)
    optim          the optimizers' fused updates              (src/optim.cu)

This module re-exports every op, so callers write ops.add, ops.matmul, ...
"""

from __future__ import annotations

from .._array import to_numpy  # noqa: F401 - part of the ops API (an Array as a NumPy copy)
from .._views import (  # noqa: F401 - the views are ops too (ops.view, ops.permute, ...)
    as_strided,
    expand,
    index,
    narrow,
    permute,
    squeeze,
    transpose,
    unsqueeze,
    view,
)
# Names of the layers below that callers reach through ops (ops.empty, ops.ShapeError, ...).
from .._array import empty  # noqa: F401
from .._errors import DTypeError, ShapeError  # noqa: F401
from .._shape import as_shape, broadcast_shapes, normalize_dim  # noqa: F401
from .core import (  # noqa: F401
    Scalar,
    Shape,
    is_array,
    is_scalar,
    check_writable,
    check_out,
    as_float,
    engine_scalar,
    require_float,
    _promote_pair,
    reshape,
    flatten,
    fill_,
    copy_,
    setitem,
    cast,
    clone,
    contiguous,
    fast_kernels,
    cat,
    stack,
    op_names,
    op_takes,
    op_result_dtype,
    kernel_policies,
    kernel_policy,
    set_kernel_policy,
    copy_rung_,
    copy_device_bytes,
)
from .reduce import (  # noqa: F401
    reduce_,
    reduce_all,
    reduce_with_indices,
    mean,
    reduce_rung_,
    reduce_index_rows,
)
from .elementwise import (  # noqa: F401
    map_,
    zip_,
    check_inplace_shape,
    inplace_,
    check_inplace_dtype,
    add,
    refuse_bool_sub,
    sub,
    mul,
    div,
    pow,
    maximum,
    minimum,
    relu_backward,
    activation,
    activation_backward,
    isinf,
    zip_out_,
)
from .gather import (  # noqa: F401
    gather,
    scatter_add_,
    scatter_add,
)
from .where import (  # noqa: F401
    where,
)
from .softmax import (  # noqa: F401
    softmax,
    softmax_backward,
    softmax_out_,
)
from .logsumexp import (  # noqa: F401
    logsumexp,
    logsumexp_backward,
)
from .cross_entropy import (  # noqa: F401
    cross_entropy_rows,
    cross_entropy_backward,
)
from .norm import (  # noqa: F401
    layer_norm,
    layer_norm_backward,
    batch_norm,
    batch_norm_backward,
)
from .attention import (  # noqa: F401
    ATTENTION_MAX_DIM,
    ATTENTION_WARP_DIMS,
    ATTENTION_TILED_DIMS,
    ATTENTION_TILED_BLOCKS,
    fused_attention_rung,
    check_attention_rung,
    causal_future,
    attention,
    attention_backward,
    masked_softmax,
)
from .matmul import (  # noqa: F401
    matmul,
    linear_fused,
    linear_fusable,
    epilogue_activation_backward,
    epilogue_acts,
    TF32_RUNGS,
    matmul_configs,
)
from .conv import (  # noqa: F401
    window_shape,
    im2col,
    CONV_TILE,
    CONV_SHARED_LIMIT,
    conv2d_tiled_fits,
    conv2d_tiled,
    col2im,
    conv2d_igemm_fits,
    conv2d_igemm,
    conv2d_igemm_input_grad,
    conv2d_igemm_weight_grad,
    conv2d_winograd_fits,
    conv2d_winograd,
    conv2d_winograd_input_grad,
    conv2d_winograd_weight_grad,
    winograd_slices,
    conv2d_depthwise_input_grad,
    conv2d_depthwise_weight_grad,
    IGEMM_INPUT_GRAD_MIN_CHANNELS,
    conv2d_grad_rungs,
    DEPTHWISE_TILE,
    DIRECT_MAX_TAPS,
    conv2d_depthwise_fits,
    conv2d_small_rung,
    conv2d_depthwise,
    conv2d_direct,
    conv2d_direct_input_grad,
    conv2d_direct_weight_grad,
)
from .pool import (  # noqa: F401
    pool_output_size,
    max_pool2d,
    max_pool2d_backward,
    avg_pool2d,
    avg_pool2d_backward,
    adaptive_avg_pool2d,
    adaptive_avg_pool2d_backward,
)
from .optim import (  # noqa: F401
    fused_update_applies,
    sgd_step_,
    adam_step_,
    adam_step_list_,
    clip_grad_norm_list_,
)
from .attention import ATTENTION_TILED_ROWS  # noqa: F401,E402
from .conv_tf32 import (  # noqa: F401
    TF32_CONV_RUNG,
    tf32_conv_allowed,
    conv2d_tf32,
    conv2d_tf32_input_grad,
    conv2d_tf32_weight_grad,
)
