"""_lib: the ctypes binding of the C engine (src/minitensor.h).

This is the package that binds the engine through ctypes (_dlpack.py, the
other user of ctypes, binds only DLPack's structs). It

- finds the shared library by a path relative to the package
  (``<repo>/build/libminitensor_cuda.so`` or ``libminitensor_emu.so``); the
  environment variable ``MINITENSOR_LIB`` overrides it with a full path;
- chooses the backend lazily, on the first call that needs the engine, so
  that ``import minitensor`` never initialises CUDA:
  ``MINITENSOR_BACKEND=cuda`` or ``=emulator`` forces one; otherwise the CUDA
  build is used when it exists and ``mt_init`` finds a usable GPU, else the
  emulator build;
- declares argtypes and restype for every function of the header
  (``SIGNATURES``; tests/test_binding.py checks them against the header);
- checks the ABI version and the maximum rank when it loads the library,
  and reads each op's name and dtype rule from it (``mt_op_name``,
  ``mt_op_dtypes``; ``op_names(family)``, ``op_dtypes(family, name)``): the
  op lists of src/minitensor.h are the only place they are written;
- turns a failed mt_status into an exception carrying ``mt_last_error()``.

The wrappers of the family modules take arrays (minitensor/_array.py; a Tensor is
one) and op names; each array hands over its ``mt_tensor`` descriptor
(``descriptor()``) and the wrapper calls the engine. They validate nothing
themselves: minitensor/ops/ checks arguments before calling, and the C
library checks them again.

The package's modules, each importing only from loader:

    loader         finding, loading and checking the library; statuses, op ids,
                   descriptors, check(); SIGNATURES, which every module adds to
    memory         allocation, known buffers, copies            (src/memory.cu)
    runtime        device information, streams, events, graphs, the kernel
                   policy, launch counts, device placement
    elementwise    map, fill, zip, the copy ladder              (src/map.cu, src/zip.cu)
    reduce         reductions and the reduction ladder          (src/reduce*.cu)
    matmul         the matmul ladder and the TF32 rungs         (src/matmul*.cu)
    softmax, attention, norm, where, logsumexp, conv, pool, cross_entropy, optim,
    gather         one module per kernel family, as minitensor/ops/

Each declares the C functions it calls (its SIGNATURES) beside its wrappers.
This module re-exports them all, so callers write _lib.zip_, _lib.malloc, ...
"""

from __future__ import annotations

from .loader import (  # noqa: F401
    ABI_VERSION,
    MAX_DIMS,
    MT_OK,
    STATUS_ERRORS,
    MT_FLOAT32,
    MT_FLOAT64,
    MT_INT64,
    MT_BOOL,
    KERNEL_POLICIES,
    OP_FAMILIES,
    MtTensor,
    make_descriptor,
    SIGNATURES,
    declare,
    REPO_ROOT,
    BUILD_DIR,
    CUDA_LIB_PATH,
    EMU_LIB_PATH,
    BACKENDS,
    check_built,
    load_library,
    check_abi,
    read_names,
    _verify,
    lib,
    C,
    is_loaded,
    raise_status,
    check,
    op_names,
    op_dtypes,
    _op_id,
)
from .memory import (  # noqa: F401
    malloc,
    free,
    memory_in_use,
    register_buffer,
    grow_buffer,
    unregister_buffer,
    find_allocation,
    memcpy_h2d,
    memcpy_d2h,
    memcpy_d2d,
)
from .runtime import (  # noqa: F401
    backend_name,
    device_info,
    device_key,
    set_sync_debug,
    synchronize,
    stream_wait,
    set_stream,
    stream_owner,
    stream_state,
    get_stream,
    stream_create,
    stream_destroy,
    stream_synchronize,
    stream_query,
    event_create,
    event_destroy,
    event_record,
    event_synchronize,
    event_query,
    event_elapsed,
    stream_wait_event,
    graph_capture_begin,
    graph_capture_end,
    graph_capture_abort,
    capturing,
    graph_replay,
    graph_destroy,
    record_stream,
    set_kernel_policy,
    get_kernel_policy,
    launch_count,
    reset_launch_counts,
    set_device,
    get_device,
)
from .elementwise import (  # noqa: F401
    map_,
    fill,
    zip_,
    map_new,
    zip_new,
    copy_variant,
    map_scalars,
    zip_scalars,
)
from .reduce import (  # noqa: F401
    reduce_,
    reduce_all,
    reduce_variant,
    reduce_with_indices,
    reduce_index_rows,
)
from .matmul import (  # noqa: F401
    matmul,
    TF32_RUNGS,
    matmul_tf32,
    matmul_epilogue,
    matmul_config_count,
    matmul_config_name,
    matmul_epilogue_config_count,
    matmul_tf32_tile,
    matmul_tf32_tile_names,
)
from .softmax import (  # noqa: F401
    softmax,
    softmax_backward,
)
from .attention import (  # noqa: F401
    SOFTMAX_MASK,
    SOFTMAX_CAUSAL,
    masked_softmax,
    attention,
    attention_backward,
    attention_mma_supported,
)
from .norm import (  # noqa: F401
    LAYER_NORM_WEIGHT,
    LAYER_NORM_BIAS,
    LAYER_NORM_GRAD_IN,
    layer_norm,
    layer_norm_backward,
    batch_norm,
    batch_norm_backward,
)
from .where import (  # noqa: F401
    where,
)
from .logsumexp import (  # noqa: F401
    logsumexp,
    logsumexp_backward,
)
from .pool import (  # noqa: F401
    max_pool2d,
    max_pool2d_backward,
    avg_pool2d,
    avg_pool2d_backward,
    adaptive_avg_pool2d,
    adaptive_avg_pool2d_backward,
    max_pool2d_new,
    avg_pool2d_new,
)
from .conv import (  # noqa: F401
    conv2d,
    conv2d_igemm,
    conv2d_igemm_input_grad,
    conv2d_igemm_weight_grad,
    conv2d_depthwise_input_grad,
    conv2d_depthwise_weight_grad,
    conv2d_igemm_config_count,
    conv2d_igemm_config_name,
    conv2d_depthwise,
    conv2d_direct,
    conv2d_direct_input_grad,
    conv2d_direct_weight_grad,
    conv2d_winograd_filter,
    conv2d_winograd_input,
    conv2d_winograd_output,
    conv2d_winograd_output_grad,
    conv2d_winograd_filter_grad,
)
from .cross_entropy import (  # noqa: F401
    cross_entropy,
    cross_entropy_backward,
)
from .optim import (  # noqa: F401
    sgd_step,
    adam_step,
    sgd_step_capturable,
    adam_step_capturable,
    descriptors,
    adam_step_list,
    grad_norm_list,
    grad_scale_list,
)
from .gather import (  # noqa: F401
    gather,
    scatter_add,
)
from .conv_tf32 import (  # noqa: F401
    conv2d_tf32,
    conv2d_tf32_input_grad,
    conv2d_tf32_weight_grad,
    conv2d_tf32_config_count,
    conv2d_tf32_config_name,
)


# The tables under the names the package used before they were read from the
# library (_lib.MATMUL_ALGOS, ...): computed on access (PEP 562).
_TABLE_NAMES = {
    "MAP_OPS": "map",
    "ZIP_OPS": "zip",
    "REDUCE_OPS": "reduce",
    "MATMUL_ALGOS": "matmul",
    "REDUCE_ALGOS": "reduce_algo",
    "COPY_ALGOS": "copy_algo",
}


def __getattr__(name: str) -> tuple[str, ...]:
    if name in _TABLE_NAMES:
        return op_names(_TABLE_NAMES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
