"""Sliding windows: im2col/col2im (convolution as a matmul, and pooling), the
tiled convolution kernel (src/conv.cu), the implicit-GEMM convolution with its
two gradients (src/conv_implicit_gemm.cu), the Winograd rung with its two
gradients (src/conv_winograd.cu), the depthwise gradients
(src/conv_depthwise_backward.cu) and the rule that picks each gradient's rung."""

from __future__ import annotations

from typing import Any

from .. import _lib
from . import autotune
from .._array import Array, empty
from .._views import as_strided, index, narrow, permute, view
from .._dtype import DType
from .._errors import ShapeError
from .core import fill_, copy_, clone, contiguous
from .elementwise import inplace_
from .matmul import matmul  # the Winograd rung's 16 products, as one batch
from . import conv_tf32  # tf32conv's hook (three marked places below): the opt-in TF32 rung


# ---- sliding windows (convolution and pooling) ------------------------------------------------


def window_shape(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """How many windows of `kernel` taps (`dilation` apart) fit along a dim of `size`
    padded by `padding` on each side, one every `stride` (torch's floor formula)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def im2col(x: Array, kernel: tuple[int, int], stride: tuple[int, int], padding: tuple[int, int],
           dilation: tuple[int, int], pad_value: float = 0.0) -> Array:
    """The sliding windows of x (N, C, H, W) as a new contiguous (N, C, KH, KW, OH, OW)
    tensor: out[n, c, i, j, y, x] = padded[n, c, y*sh + i*dh, x*sw + j*dw].

    Two copies and no arithmetic: the padded input (pad_value around x), then
    one strided copy of a view of it whose strides step through the windows
    (the "strided map" that makes convolution a matmul: the windows overlap,
    so the view reads some elements several times, which a copy may do).
    """
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    oh, ow = window_shape(h, kh, sh, ph, dh), window_shape(w, kw, sw, pw, dw)
    padded = x
    if ph or pw:
        padded = fill_(empty((n, c, h + 2 * ph, w + 2 * pw), x.dtype), pad_value)
        copy_(narrow(narrow(padded, 2, ph, h), 3, pw, w), x)
    padded = contiguous(padded)
    s_n, s_c, s_h, s_w = padded.strides
    windows = as_strided(padded, (n, c, kh, kw, oh, ow),
                         (s_n, s_c, dh * s_h, dw * s_w, sh * s_h, sw * s_w), padded.storage_offset())
    return clone(windows)


CONV_TILE, CONV_SHARED_LIMIT = 16, 48 * 1024  # src/conv.cu's kTile and kConvSharedLimit


def conv2d_tiled_fits(kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
                      dtype: DType) -> bool:
    """Whether mt_conv2d takes these sizes: a block's input patch (a 16 x 16 tile
    of outputs and its halo) and one channel's weights fit in 48 KiB of shared
    memory (the check src/conv.cu makes)."""
    patch = 1
    for k, s, d in zip(kernel, stride, dilation):
        patch *= (CONV_TILE - 1) * s + (k - 1) * d + 1
    return (patch + kernel[0] * kernel[1]) * dtype.itemsize <= CONV_SHARED_LIMIT


def conv2d_tiled(x: Array, weight: Array, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
                 dilation: tuple[int, int], groups: int) -> Array:
    """The convolution of x (N, C, H, W) by weight (C_out, C / groups, KH, KW), plus
    bias (C_out,) or None, in one kernel (mt_conv2d, the tiled rung): each block
    stages the input patch of a 16 x 16 output tile in shared memory; no window
    is copied to memory. The patch must fit in 48 KiB (else InvalidArgumentError
    naming its size)."""
    return _conv2d_by(_lib.conv2d, x, weight, bias, stride, padding, dilation, groups)


def _conv2d_by(kernel: Any, x: Array, weight: Array, bias: Any, stride: tuple[int, int],
               padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> Array:
    """A new (N, C_out, OH, OW) output computed by kernel (_lib.conv2d, or
    conv2d_igemm's tuned launch) from contiguous copies of x, weight and bias."""
    x, weight = contiguous(x), contiguous(weight)
    bias = None if bias is None else contiguous(bias)
    n, _, h, w = x.shape
    c_out, _, kh, kw = weight.shape
    oh = window_shape(h, kh, stride[0], padding[0], dilation[0])
    ow = window_shape(w, kw, stride[1], padding[1], dilation[1])
    out = empty((n, c_out, oh, ow), x.dtype)
    kernel(out, x, weight, bias, stride, padding, dilation, groups)
    return out


def col2im(cols: Array, shape: tuple[int, ...], stride: tuple[int, int], padding: tuple[int, int],
           dilation: tuple[int, int]) -> Array:
    """The gradient of im2col: each window element of cols (N, C, KH, KW, OH, OW) added
    back to the input position it was read from, in a new (N, C, H, W) tensor.

    Windows overlap, so positions receive several additions: one strided
    in-place add per kernel tap (i, j), each a zip kernel over every window
    at once, so that no two threads of one launch write the same element.
    """
    n, c, h, w = shape
    _, _, kh, kw, oh, ow = cols.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    padded = fill_(empty((n, c, h + 2 * ph, w + 2 * pw), cols.dtype), 0.0)
    s_n, s_c, s_h, s_w = padded.strides
    for i in range(kh):
        for j in range(kw):
            # The input positions tap (i, j) read, window by window: a strided view.
            target = as_strided(padded, (n, c, oh, ow), (s_n, s_c, sh * s_h, sw * s_w), i * dh * s_h + j * dw * s_w)
            inplace_("add", target, index(cols, (slice(None), slice(None), i, j)))
    return contiguous(narrow(narrow(padded, 2, ph, h), 3, pw, w))


# ---- the implicit-GEMM rung (src/conv_implicit_gemm.cu) ------------------------------------------

_INT32_LIMIT = 2**31 - 1  # the kernel's int indices


def conv2d_igemm_fits(input_shape: tuple[int, ...], weight_shape: tuple[int, ...], padding: tuple[int, int],
                      out_hw: tuple[int, int], groups: int) -> bool:
    """Whether mt_conv2d_igemm takes these sizes: every pixel and k count of its
    products (N OH OW, N H W, C / groups KH KW, C_out / groups KH KW) and the
    padded input's sides below 2^31 (the check src/conv_implicit_gemm.cu makes)."""
    n, c, h, w = input_shape
    c_out, _, kh, kw = weight_shape
    oh, ow = out_hw
    counts = (h + 2 * padding[0], w + 2 * padding[1], h * w, kh * kw, n * h * w, n * oh * ow, c // groups * kh * kw, c_out // groups * kh * kw, c, c_out,
              groups * 65535)  # the last: gridDim.z holds a group and a split of K
    return max(counts) <= _INT32_LIMIT and max(c_out // groups, c // groups) <= 64 * 65535  # gridDim.y


def conv2d_igemm(x: Array, weight: Array, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
                 dilation: tuple[int, int], groups: int) -> Array:
    """The convolution of x (N, C, H, W) by weight (C_out, C / groups, KH, KW), plus
    bias (C_out,) or None, as an implicit GEMM (mt_conv2d_igemm): per group, one
    matrix product of the weights with the input's windows, gathered tile by
    tile into shared memory and never written to memory. The tile configuration
    is the autotuner's (timed on the first call of the shape, then cached), and
    so is, for 3x3 filters at stride 1, whether the Winograd rung runs instead
    (conv2d_winograd_fits, autotune.conv_algo)."""
    params = (stride, padding, dilation, groups)
    if conv_tf32.tf32_conv_allowed(x.dtype):  # tf32conv's hook: mt.backends.cuda.conv.allow_tf32
        return _igemm_or_winograd("forward tf32", x.shape, weight.shape, x.dtype, params,
                                  lambda: conv_tf32.conv2d_tf32(x, weight, bias, *params),
                                  lambda tf32: conv2d_winograd(x, weight, bias, padding, tf32))

    def kernel(out: Array, x: Array, weight: Array, bias: Any, *args: Any) -> None:
        def run(config: int) -> None:
            _lib.conv2d_igemm(out, x, weight, bias, *args, config)

        run(autotune.conv_config("forward", x.shape, weight.shape, x.dtype, args, run))

    return _igemm_or_winograd("forward", x.shape, weight.shape, x.dtype, params,
                              lambda: _conv2d_by(kernel, x, weight, bias, *params),
                              lambda tf32: conv2d_winograd(x, weight, bias, padding, tf32))


def _igemm_or_winograd(product: str, x_shape: tuple[int, ...], weight_shape: tuple[int, ...], dtype: DType,
                       params: tuple[Any, ...], igemm: Any, winograd: Any) -> Array:
    """igemm() or, where the Winograd rung computes this product (conv2d_winograd_fits),
    winograd(tf32) if the autotuner timed it faster for the shape (autotune.conv_algo: once
    per shape, then cached). product: "forward", "input_grad" or "weight_grad", with " tf32"
    under conv.allow_tf32: then igemm() is the TF32 implicit GEMM, and the Winograd rung
    races with its products in float32 and on the TF32 rung."""
    if conv2d_winograd_fits(tuple(x_shape), tuple(weight_shape), *params):
        by = (igemm, lambda: winograd(False), lambda: winograd(True))
        algo = autotune.conv_algo(product, tuple(x_shape), tuple(weight_shape), dtype, params,
                                  lambda i: by[max(i, 0)]())
        if algo > 0:
            return by[algo]()
    return igemm()


def conv2d_igemm_input_grad(grad: Array, weight: Array, input_shape: tuple[int, ...], stride: tuple[int, int],
                            padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> Array:
    """The gradient of conv2d_igemm's input (of input_shape, (N, C, H, W)) for the
    output's gradient grad (N, C_out, OH, OW): another implicit GEMM, of the
    weights with grad's elements that each input pixel fed (no col2im)."""
    params = (stride, padding, dilation, groups)
    if conv_tf32.tf32_conv_allowed(grad.dtype):  # tf32conv's hook: mt.backends.cuda.conv.allow_tf32
        return _igemm_or_winograd("input_grad tf32", input_shape, weight.shape, grad.dtype, params,
                                  lambda: conv_tf32.conv2d_tf32_input_grad(grad, weight, input_shape, *params),
                                  lambda tf32: conv2d_winograd_input_grad(grad, weight, input_shape, padding, tf32))
    out = empty(tuple(input_shape), grad.dtype)
    grad, weight = contiguous(grad), contiguous(weight)

    def run(config: int) -> None:
        _lib.conv2d_igemm_input_grad(out, grad, weight, stride, padding, dilation, groups, config)

    def igemm() -> Array:
        run(autotune.conv_config("input_grad", tuple(input_shape), weight.shape, grad.dtype, params, run))
        return out

    return _igemm_or_winograd("input_grad", input_shape, weight.shape, grad.dtype, params, igemm,
                              lambda tf32: conv2d_winograd_input_grad(grad, weight, input_shape, padding, tf32))


def conv2d_igemm_weight_grad(grad: Array, x: Array, weight_shape: tuple[int, ...], stride: tuple[int, int],
                             padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> Array:
    """The gradient of conv2d_igemm's weight (of weight_shape, (C_out, C / groups, KH,
    KW)) for the output's gradient grad and the input x, summed over the batch: an
    implicit GEMM over the output pixels of grad with x's windows, or for 3x3 filters
    at stride 1 the Winograd rung where the autotuner timed it faster."""
    params = (stride, padding, dilation, groups)
    if conv_tf32.tf32_conv_allowed(grad.dtype):  # tf32conv's hook: mt.backends.cuda.conv.allow_tf32
        return _igemm_or_winograd("weight_grad tf32", x.shape, weight_shape, grad.dtype, params,
                                  lambda: conv_tf32.conv2d_tf32_weight_grad(grad, x, weight_shape, *params),
                                  lambda tf32: conv2d_winograd_weight_grad(grad, x, weight_shape, padding, tf32))
    out = empty(tuple(weight_shape), grad.dtype)
    grad, x = contiguous(grad), contiguous(x)

    def run(config: int) -> None:
        _lib.conv2d_igemm_weight_grad(out, grad, x, stride, padding, dilation, groups, config)

    def igemm() -> Array:
        run(autotune.conv_config("weight_grad", x.shape, tuple(weight_shape), grad.dtype, params, run))
        return out

    return _igemm_or_winograd("weight_grad", x.shape, weight_shape, grad.dtype, params, igemm,
                              lambda tf32: conv2d_winograd_weight_grad(grad, x, weight_shape, padding, tf32))


# ---- the Winograd rung (src/conv_winograd.cu) -------------------------------------------------------


def conv2d_winograd_fits(input_shape: tuple[int, ...], weight_shape: tuple[int, ...], stride: tuple[int, int],
                         padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> bool:
    """Whether the Winograd rung computes this convolution and its two gradients: 3x3
    filters at stride 1, no dilation, one group, padding at most 2 (the gradient pads by
    2 - padding), every size non-zero, and its buffers (16 x channels x 2x2 tiles) under
    2^31 elements a transform."""
    n, c, h, w = input_shape
    c_out = weight_shape[0]
    if tuple(weight_shape[2:]) != (3, 3) or tuple(stride) != (1, 1) or tuple(dilation) != (1, 1) or groups != 1:
        return False
    if min(padding) < 0 or max(padding) > 2 or min(n, c, c_out) < 1:
        return False
    oh, ow = h + 2 * padding[0] - 2, w + 2 * padding[1] - 2
    tiles = n * ((max(oh, h) + 1) // 2) * ((max(ow, w) + 1) // 2)
    return oh >= 1 and ow >= 1 and 16 * max(c, c_out) * tiles <= _INT32_LIMIT


def _tiles_per_image(out_h: int, out_w: int) -> int:
    """The 2x2 output tiles of one image, an odd side's last one half outside: P / N in
    src/conv_winograd.h."""
    return ((out_h + 1) // 2) * ((out_w + 1) // 2)


def _winograd(x: Array, weight: Array, bias: Any, padding: tuple[int, int], flip: bool,
              out_shape: tuple[int, ...], tf32: bool) -> Array:
    """The three steps around the 16 products (src/conv_winograd.cu says why); tf32: the
    products on the TF32 rung (the transforms stay float32)."""
    n, c, h, w = x.shape
    k = out_shape[1]
    tiles = n * _tiles_per_image(out_shape[2], out_shape[3])
    u = empty((16, k, c), x.dtype)
    _lib.conv2d_winograd_filter(u, weight, flip)
    v = empty((16, c, tiles), x.dtype)
    _lib.conv2d_winograd_input(v, x, padding)
    out = empty(out_shape, x.dtype)
    _lib.conv2d_winograd_output(out, matmul(u, v, tf32=tf32), bias)  # the matmul ladder's best rung
    return out


def conv2d_winograd(x: Array, weight: Array, bias: Any, padding: tuple[int, int], tf32: bool = False) -> Array:
    """The convolution of x (N, C, H, W) by 3x3 filters weight (K, C, 3, 3) at stride 1,
    plus bias (K,) or None, by Winograd's F(2x2, 3x3): each 2x2 block of outputs from its
    4x4 input tile with 16 products instead of 36 (conv2d_winograd_fits says where).
    tf32: the 16 products on the matmul ladder's TF32 rung (float32 only)."""
    x, weight = contiguous(x), contiguous(weight)
    bias = None if bias is None else contiguous(bias)
    n, _, h, w = x.shape
    out_shape = (n, weight.shape[0], h + 2 * padding[0] - 2, w + 2 * padding[1] - 2)
    return _winograd(x, weight, bias, padding, False, out_shape, tf32)


def conv2d_winograd_input_grad(grad: Array, weight: Array, input_shape: tuple[int, ...],
                               padding: tuple[int, int], tf32: bool = False) -> Array:
    """The gradient of conv2d_winograd's input for the output's gradient grad: the same
    rung on grad padded by 2 - padding, each filter turned by 180 degrees and the
    channels swapped (weight (K, C, 3, 3) read as (C, K, 3, 3)). tf32 as conv2d_winograd."""
    grad, weight = contiguous(grad), contiguous(weight)
    return _winograd(grad, weight, None, (2 - padding[0], 2 - padding[1]), True, tuple(input_shape), tf32)


def winograd_slices(n: int, tiles_per_image: int, channels: tuple[int, int], itemsize: int) -> int:
    """The slices conv2d_winograd_weight_grad cuts its n x tiles_per_image tiles into: the
    16 products alone, K x C outputs each (channels), are too few blocks to fill a GPU, so
    each is cut along its long sum into slices of whole images: as many as leave every
    slice at least 256 tiles (a product's sum long enough to pay for its tile's loads and
    stores), with at most 64 slices and partial sums (16 x slices x K x C) no larger than
    the transforms (16 x max(K, C) x tiles), whose size conv2d_winograd_fits bounds, and a
    slice's length a multiple of 16 bytes, so that the batched matmul reads the views in
    place. 1 (no cut) where no count of images meets all of that."""
    width = 16 // itemsize
    for images in range(1, n + 1):
        slices = n // images
        if (n % images == 0 and images * tiles_per_image >= 256 and slices <= 64
                and slices * min(channels) <= n * tiles_per_image and images * tiles_per_image % width == 0):
            return slices
    return 1


def conv2d_winograd_weight_grad(grad: Array, x: Array, weight_shape: tuple[int, ...],
                                padding: tuple[int, int], tf32: bool = False) -> Array:
    """The gradient of conv2d_winograd's weight (K, C, 3, 3) for the output's gradient grad
    (N, K, OH, OW) and the input x: the filter and output steps run backwards. Per tile,
    dU = (A dY A^T) (*) (B^T d B); summed over the tiles that is 16 products dM @ V^T, each
    cut into slices of whole images (winograd_slices) to fill the GPU; then G^T dU G, which
    also adds the slices in order. tf32 as conv2d_winograd."""
    grad, x = contiguous(grad), contiguous(x)
    n, c, h, w = x.shape
    k = weight_shape[0]
    want = (n, k, h + 2 * padding[0] - 2, w + 2 * padding[1] - 2)
    if tuple(grad.shape) != want:  # an odd side one short would give the same tiles
        raise ShapeError(f"conv2d_winograd_weight_grad(): grad has shape {tuple(grad.shape)}; the output of input "
                         f"{tuple(x.shape)} by filters {tuple(weight_shape)} with padding {tuple(padding)} is {want}")
    per_image = _tiles_per_image(grad.shape[2], grad.shape[3])
    tiles = n * per_image
    v = empty((16, c, tiles), x.dtype)
    _lib.conv2d_winograd_input(v, x, padding)
    dm = empty((16, k, tiles), x.dtype)
    _lib.conv2d_winograd_output_grad(dm, grad)
    s = winograd_slices(n, per_image, (k, c), x.dtype.itemsize)
    # Views, no copies: dm as (16, S, K, P / S) and v as (16, S, P / S, C), a transposed operand.
    dm_slices = permute(view(dm, (16, k, s, tiles // s)), (0, 2, 1, 3))
    v_slices = permute(view(v, (16, c, s, tiles // s)), (0, 2, 3, 1))
    out = empty(tuple(weight_shape), x.dtype)
    _lib.conv2d_winograd_filter_grad(out, matmul(dm_slices, v_slices, tf32=tf32))  # the ladder's best rung
    return out


# ---- the depthwise gradients (src/conv_depthwise_backward.cu) -------------------------------------


def conv2d_depthwise_input_grad(grad: Array, weight: Array, input_shape: tuple[int, ...], stride: tuple[int, int],
                                padding: tuple[int, int], dilation: tuple[int, int]) -> Array:
    """The gradient of a depthwise convolution's input (groups = C = C_out, weight (C, 1,
    KH, KW)), of input_shape (N, C, H, W), for the output's gradient grad (any strides:
    an expanded gradient is read in place): at stride 1 grad convolved with the
    flipped taps by the forward's tiled kernel, else each input pixel gathers the
    elements of grad its value fed (no atomics either way)."""
    out = empty(tuple(input_shape), grad.dtype)
    _lib.conv2d_depthwise_input_grad(out, grad, contiguous(weight), stride, padding, dilation)  # grad: any strides
    return out


def conv2d_depthwise_weight_grad(grad: Array, x: Array, weight_shape: tuple[int, ...], stride: tuple[int, int],
                                 padding: tuple[int, int], dilation: tuple[int, int]) -> Array:
    """The gradient of a depthwise convolution's weight (of weight_shape, (C, 1, KH, KW))
    for grad (any strides) and the input x: per channel and tap, the sum over (N, OH,
    OW) of grad times the input that tap read: blocks of partial sums over slices of
    the pixels, then the slices added in a fixed order (deterministic)."""
    out = empty(tuple(weight_shape), grad.dtype)
    _lib.conv2d_depthwise_weight_grad(out, grad, contiguous(x), stride, padding, dilation)  # grad: any strides
    return out


# Below this many input channels a group, the implicit GEMM's input gradient is left to im2col.
IGEMM_INPUT_GRAD_MIN_CHANNELS = 16


def conv2d_grad_rungs(input_shape: tuple[int, ...], weight_shape: tuple[int, ...], groups: int,
                      forward: str) -> tuple[str, str]:
    """The rungs (input gradient, weight gradient) of a convolution whose forward ran
    on `forward` ("tiled", "implicit_gemm", "depthwise" or "direct"); each is
    "depthwise", "direct" (a gather; a reduction over the pixels), "im2col" (the
    window gradients W^T G, then col2im; G im2col(x)^T) or "implicit_gemm".

    - depthwise (groups = C = C_out, one weight channel a group): "depthwise" for
      both, whichever forward: as a GEMM each group's product has one row (M = 1)
      in a tile of 64, so 63/64 of the multiply-adds would be on zeros;
    - the implicit GEMM with fewer than 16 input channels a group (the 7 x 7
      stem's C = 3): its input gradient's product has M = C / groups rows, 3 of
      the narrow tile's 64 (the block still runs all K = C_out KH KW of them,
      and at stride 2 three taps in four are gathered as zeros): the lead
      measured the stem's forward + backward at 33 ms against im2col's 5.9 on
      an H200 (bench/conv.py). im2col's backward is a dense batched matmul
      (K = C_out) and col2im; the weight gradient stays "implicit_gemm"
      (M = C_out, its K split over blocks; for 3x3 filters at stride 1 that
      name also covers the Winograd rung, conv2d_igemm_weight_grad's race);
    - the direct forward's (few products per output): "direct" for both;
    - else the forward's own: the tiled rung's backward is im2col's."""
    c, c_out, c_group = input_shape[1], weight_shape[0], weight_shape[1]
    if c_group == 1 and groups == c == c_out:
        return "depthwise", "depthwise"
    if forward == "direct":
        return "direct", "direct"
    if forward == "tiled":
        return "im2col", "im2col"
    if c_group < IGEMM_INPUT_GRAD_MIN_CHANNELS:
        return "im2col", "implicit_gemm"
    return "implicit_gemm", "implicit_gemm"


# ---- the depthwise rung's forward and the direct rung (src/conv_depthwise.cu, src/conv_direct.cu) ----

DEPTHWISE_TILE = (32, 32)  # src/conv_depthwise.cu's kTileH x kTileW outputs a block
DIRECT_MAX_TAPS = 27  # C / groups * KH * KW up to which F.conv2d takes the direct rung
# ... and without an input gradient (a network's first layer): above, the implicit GEMM.
DIRECT_MAX_TAPS_NO_INPUT_GRAD = 9


def conv2d_depthwise_fits(kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
                          dtype: DType) -> bool:
    """Whether mt_conv2d_depthwise takes these sizes: a 32 x 32 output tile's input
    patch and a channel's taps fit in 48 KiB of shared memory."""
    patch = 1
    for t, k, s, d in zip(DEPTHWISE_TILE, kernel, stride, dilation):
        patch *= (t - 1) * s + (k - 1) * d + 1
    return (patch + kernel[0] * kernel[1]) * dtype.itemsize <= CONV_SHARED_LIMIT


def conv2d_small_rung(input_shape: tuple[int, ...], weight_shape: tuple[int, ...], stride: tuple[int, int],
                      dilation: tuple[int, int], groups: int, dtype: DType, input_grad: bool = True) -> str | None:
    """The rung of F.conv2d's fast policy for the convolutions a matrix product
    serves badly, or None for the others (the caller's choice then stands):

    - "depthwise" (groups = C = C_out, weight (C, 1, KH, KW)) when its tile's
      patch fits: a GEMM per group would have one row;
    - "direct" when groups = 1 and each output sums at most DIRECT_MAX_TAPS
      products (C KH KW: the digits CNN's 1 -> 32 channel 3 x 3 layer has 9):
      the GEMM's K would be a sliver of its tile, im2col's backward a window
      tensor and a col2im of KH KW adds. Its win is the input gradient (a
      gather, where the implicit GEMM's would run im2col for so few channels):
      with input_grad False (a first layer, whose input is the data) it is
      kept only up to DIRECT_MAX_TAPS_NO_INPUT_GRAD taps, the digits layer's 9.
      The H100 timed the ResNet example's stem (3 -> 64, 3 x 3, 32 x 32, N256,
      27 taps) at 0.296 ms forward and 0.753 forward + weight gradient on the
      direct rung, 0.173 and 0.296 on the implicit GEMM."""
    c, c_out, c_group, kh, kw = input_shape[1], weight_shape[0], weight_shape[1], weight_shape[2], weight_shape[3]
    if c_group == 1 and groups == c == c_out:
        return "depthwise" if conv2d_depthwise_fits((kh, kw), stride, dilation, dtype) else None
    if groups == 1 and c_group * kh * kw <= (DIRECT_MAX_TAPS if input_grad else DIRECT_MAX_TAPS_NO_INPUT_GRAD):
        return "direct"
    return None


def conv2d_depthwise(x: Array, weight: Array, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
                     dilation: tuple[int, int]) -> Array:
    """The depthwise convolution of x (N, C, H, W) by weight (C, 1, KH, KW), plus bias
    (C,) or None (mt_conv2d_depthwise): each block stages a 32 x 32 output tile's
    input patch of one channel in shared memory, each thread computes 4 outputs."""
    def kernel(out: Array, x: Array, weight: Array, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
               dilation: tuple[int, int], groups: int) -> None:
        _lib.conv2d_depthwise(out, x, weight, bias, stride, padding, dilation)

    return _conv2d_by(kernel, x, weight, bias, stride, padding, dilation, x.shape[1])


def conv2d_direct(x: Array, weight: Array, bias: Any, stride: tuple[int, int], padding: tuple[int, int],
                  dilation: tuple[int, int], groups: int) -> Array:
    """The convolution of x by weight (+ bias or None) by the direct kernel
    (mt_conv2d_direct): a thread per output pixel, its window read once for 8
    output channels at a time."""
    return _conv2d_by(_lib.conv2d_direct, x, weight, bias, stride, padding, dilation, groups)


def conv2d_direct_input_grad(grad: Array, weight: Array, input_shape: tuple[int, ...], stride: tuple[int, int],
                             padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> Array:
    """The gradient of a convolution's input (of input_shape) for grad (any strides):
    each input element gathers the elements of grad its value fed, times their taps
    (mt_conv2d_direct_input_grad; no im2col, no col2im)."""
    out = empty(tuple(input_shape), grad.dtype)
    _lib.conv2d_direct_input_grad(out, grad, contiguous(weight), stride, padding, dilation, groups)
    return out


def conv2d_direct_weight_grad(grad: Array, x: Array, weight_shape: tuple[int, ...], stride: tuple[int, int],
                              padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> Array:
    """The gradient of a convolution's weight (of weight_shape) for grad (any strides)
    and x: a reduction over (N, OH, OW) per weight, block partials added in a fixed
    order (mt_conv2d_direct_weight_grad)."""
    out = empty(tuple(weight_shape), grad.dtype)
    _lib.conv2d_direct_weight_grad(out, grad, contiguous(x), stride, padding, dilation, groups)
    return out
