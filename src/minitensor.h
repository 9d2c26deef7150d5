/*
 * minitensor.h: the public C API of the minitensor engine.
 *
 * Everything Python (or a C test) may call is declared here, with plain C
 * types only, so that ctypes can bind each function exactly (the streams,
 * events and graphs in minitensor_streams.h, which this file includes: one
 * header to include). The op ids (in
 * minitensor_ops.h, which this file includes), the maximum rank and the ABI
 * version are defined once, in these two files; the
 * library exports them so the Python side can check at load time that it was
 * written against the same header.
 *
 * Conventions
 *   - Every function returns an mt_status. On failure mt_last_error() returns
 *     a message naming the function and the bad argument, or the CUDA error
 *     with the file and line of the failing call. The library never exits,
 *     aborts or prints: the caller decides what to do with the failure.
 *   - A tensor is described by mt_tensor, passed by value: a device pointer to
 *     the start of its storage, an offset, and a shape and strides counted in
 *     elements (not bytes). Strides may be 0 (broadcast) but not negative;
 *     a negative stride or offset is MT_ERR_INVALID_ARGUMENT, a rank outside
 *     0..MT_MAX_DIMS or a negative size MT_ERR_SHAPE. Rank 0 is a scalar with
 *     one element. An empty tensor (a size 0) may have a NULL data pointer.
 *   - Extents: a tensor addresses the bytes from element position `offset`
 *     to position offset + sum_k (shape[k] - 1) * strides[k], inclusive,
 *     times the item size; an empty tensor addresses nothing. That whole
 *     range must lie inside ONE buffer the library knows: a live allocation
 *     of mt_malloc (data need not be its start: a view into the middle is
 *     fine) or a buffer registered with mt_register_buffer. A data pointer
 *     in no known buffer, an extent past the end of its buffer, or one whose
 *     arithmetic overflows 64 bits is MT_ERR_INVALID_ARGUMENT, with a message
 *     naming the argument and the numbers. The device side of mt_memcpy_*
 *     (dst of h2d, src of d2h, both of d2d) is checked the same way. These
 *     checks cost a lookup in an ordered table under a reader lock.
 *   - Outputs are never broadcast: an output must not have a stride 0 over a
 *     dimension longer than 1, because several threads would write the same
 *     element (MT_ERR_INVALID_ARGUMENT). Every kernel checks its arguments
 *     before it allocates, casts or launches anything, so a rejected call
 *     leaves its output untouched.
 *   - Dimension arguments count from 0; negative dims are MT_ERR_DIM (the
 *     Python layer turns -1 into ndim - 1 before calling).
 *   - Aliasing: map, zip, copy_variant, softmax and reduce may write into an
 *     input only when out is exactly that tensor: the same first byte
 *     (data + offset), dtype and shape, and the same strides over every dim
 *     longer than 1. Otherwise out must share no memory with any input: if
 *     the byte ranges of out's extent and an input's extent (above) meet, the
 *     call is MT_ERR_INVALID_ARGUMENT naming the two operands. The check is
 *     conservative: two interleaved views that never touch the same element
 *     (x[0::2] and x[1::2]) still overlap by their ranges and are rejected.
 *     matmul, gather and scatter_add reject any overlap, even exact aliasing.
 *     mt_memcpy_d2d rejects partially overlapping dst and src.
 *   - NaN: max, min, maximum and minimum let NaN win, and argmax/argmin
 *     return the index of the first NaN, as NumPy and PyTorch do.
 *   - Index tensors (gather, scatter_add, cross_entropy's targets) are
 *     int64, or hold whole numbers in float32 or float64, whatever the data's
 *     dtype; a negative, out-of-range, fractional or NaN index is
 *     MT_ERR_INVALID_ARGUMENT. scatter_add adds with atomics, so the order of
 *     additions (and the last bits of a float result) may differ between runs.
 *
 * Dtypes
 *   float32, float64, int64 (int64_t) and bool (one byte holding 0 or 1;
 *   every bool the library writes is 0 or 1, and it assumes the same of the
 *   bools it reads). What each entry point takes:
 *
 *     mt_map, mt_fill          all four; which op takes which dtype: the
 *                              dtype rule of each op in MT_MAP_OPS. COPY
 *                              casts between any two.
 *     mt_zip                   all four; see MT_ZIP_OPS. Comparisons write
 *                              a bool out, the other ops out of a's dtype.
 *     mt_reduce, _all, _variant all four; see MT_REDUCE_OPS. argmax/argmin
 *                              write an int64 out.
 *     mt_where                 a, b, out: any one dtype; cond: any dtype
 *                              (non-zero, NaN included, is true).
 *     mt_gather                in, out: any one dtype; index: int64 or float.
 *     mt_scatter_add           out, src: float32, float64 or int64; index:
 *                              int64 or float.
 *     mt_copy_variant          all four (a copy; out's dtype may differ: a cast).
 *     mt_cross_entropy (+ backward)  float32 or float64; targets int64 or
 *                              the logits' dtype.
 *     mt_matmul (all forms), mt_softmax, mt_logsumexp (+ backward), mt_layer_norm (+
 *     backward), mt_sgd_step, mt_adam_step, mt_attention, mt_conv2d (+ igemm, depthwise), the
 *     pooling entry points (their indices: int64):
 *     float32 or float64 only.
 *   A dtype an entry point (or an op) does not take is MT_ERR_DTYPE, before
 *   anything is launched: "mt_matmul: a has dtype int64; this op takes
 *   float32 or float64", "mt_map: exp is not defined for int64".
 *
 *   Integer arithmetic wraps modulo 2^64 (as in torch): INT64_MAX + 1 is
 *   INT64_MIN, and so are -INT64_MIN and abs(INT64_MIN). Casts (COPY, and
 *   the double scalar of mt_map/mt_fill to an int64 or bool tensor):
 *     float -> int64   truncates toward zero; NaN gives 0; beyond the int64
 *                      range it saturates to INT64_MIN / INT64_MAX;
 *     any -> bool      x != 0 (NaN is true);
 *     bool -> any      0 or 1;
 *     int64 -> float   rounds to nearest (above 2^24 / 2^53 not exact).
 */
#ifndef MINITENSOR_H
#define MINITENSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped only when something that exists changes: a struct, a signature, or
 * an existing number (an op id, an enum value, a constant). Appending an op
 * to the end of an op list, or adding a function, needs no bump. */
#define MT_ABI_VERSION 22

/* Largest rank a tensor may have. */
#define MT_MAX_DIMS 8

typedef enum {
    MT_OK = 0,
    MT_ERR_INVALID_ARGUMENT = 1, /* null pointer, unknown op id, bad value  */
    MT_ERR_SHAPE = 2,            /* shapes that do not broadcast/multiply    */
    MT_ERR_DIM = 3,              /* a dimension index out of range           */
    MT_ERR_DTYPE = 4,            /* dtype unknown or mismatched              */
    MT_ERR_OUT_OF_MEMORY = 5,    /* device allocation failed                 */
    MT_ERR_CUDA = 6,             /* a CUDA (or emulated CUDA) call failed    */
    MT_ERR_NO_DEVICE = 7,        /* no usable GPU for the CUDA build         */
    MT_ERR_INTERRUPTED = 8,      /* Ctrl-C stopped a running (emulated) op   */
    MT_ERR_NOT_IMPLEMENTED = 9   /* a course task left as a stub (task.h)    */
} mt_status;

typedef enum {
    MT_FLOAT32 = 0,
    MT_FLOAT64 = 1,
    MT_INT64 = 2, /* int64_t                                  */
    MT_BOOL = 3,  /* one byte, always 0 (false) or 1 (true)   */
    MT_DTYPE_COUNT
} mt_dtype;

/* A strided view of device memory. Element (i0, ..., i{n-1}) lives at
 * data + (offset + sum_k i_k * strides[k]) * itemsize(dtype). */
typedef struct {
    void *data;
    int64_t offset;
    int32_t dtype;
    int32_t ndim;
    int64_t shape[MT_MAX_DIMS];
    int64_t strides[MT_MAX_DIMS];
} mt_tensor;

/* The op lists (X-macros: each op once, with its id, name and dtype rule),
 * the ladders' rung lists and their enums: src/minitensor_ops.h. */
#include "minitensor_ops.h"

/* ---- library information ----------------------------------------------- */
int mt_abi_version(void);
int mt_max_dims(void);
/* How many ids an op family has, each id's name ("add", "exp", ...) and, for
 * the op families "map", "zip" and "reduce", its dtype rule ("fi", "fib>b":
 * see the op lists above), from which the binding builds its tables. family
 * is one of "map", "zip", "reduce", "matmul", "reduce_algo", "copy_algo",
 * "epilogue_act".
 * Returns -1 / NULL when unknown (mt_op_dtypes: also for the ladders). */
int mt_op_count(const char *family);
const char *mt_op_name(const char *family, int op);
const char *mt_op_dtypes(const char *family, int op);
/* "cuda" or "emulator": which build this library is. */
const char *mt_backend_name(void);
/* The message of the last failure in this thread ("" if none). */
const char *mt_last_error(void);

/* Probe and initialise the device. Called lazily by everything else; calling
 * it first gives a clear MT_ERR_NO_DEVICE when the CUDA build has no GPU. */
mt_status mt_init(void);
/* Fills `buf` with the device name, compute capability and driver/runtime
 * versions, for error messages and benchmark reports. */
mt_status mt_device_info(char *buf, size_t bufsize);
/* Fills `buf` with a short key naming the device, for caches keyed by
 * device (the autotuner's): "<name>|sm_<major><minor>|<SMs>sm", e.g.
 * "NVIDIA H100 80GB HBM3|sm_90|132sm". Built from a few device attributes,
 * once per process and device; later calls copy the cached key. */
mt_status mt_device_key(char *buf, size_t bufsize);
/* When on, every launch is followed by a device synchronize, so a fault in a
 * kernel is reported by the call that launched it. Off by default; the
 * environment variable MINITENSOR_SYNC=1 turns it on at load. */
mt_status mt_set_sync_debug(int on);
mt_status mt_synchronize(void);
/* ---- streams, events and graphs: src/minitensor_streams.h ------------- */
#include "minitensor_streams.h"

/* ---- memory ------------------------------------------------------------- */
/* Device allocations come from the runtime's stream-ordered pool. */
mt_status mt_malloc(void **ptr, size_t bytes);
mt_status mt_free(void *ptr);
/* Bytes currently allocated through mt_malloc and not yet freed. */
mt_status mt_memory_in_use(int64_t *bytes);
/* Makes a buffer the library did not allocate (another library's device
 * memory, e.g. a torch tensor's storage) known to it, so that descriptors and
 * copies may use [ptr, ptr + bytes) until mt_unregister_buffer(ptr). The
 * library never frees it, and mt_memory_in_use does not count it. Rejected:
 * NULL, 0 bytes, a range that wraps or meets a known buffer, and memory that
 * is not the device's (CUDA: both ends must be device or managed memory of
 * this process's device, by cudaPointerGetAttributes; emulator: both ends
 * must be mapped in this process). The hook for zero-copy import. */
mt_status mt_register_buffer(void *ptr, size_t bytes);
/* Registers [ptr, ptr + bytes) in place of every registered buffer it
 * meets, in one step: each of those must lie inside it, and it may meet no
 * mt_malloc allocation (checked like mt_register_buffer otherwise; with no
 * buffer to replace, it is mt_register_buffer). For lending overlapping
 * views of one foreign allocation (minitensor/_foreign.py counts them): a
 * descriptor valid in a replaced buffer stays valid throughout. */
mt_status mt_grow_buffer(void *ptr, size_t bytes);
/* Forgets a buffer registered at exactly ptr. */
mt_status mt_unregister_buffer(void *ptr);
/* The known buffer (mt_malloc allocation or registered buffer) holding ptr:
 * its start and size. MT_ERR_INVALID_ARGUMENT when ptr is in none. */
mt_status mt_find_allocation(const void *ptr, void **base, size_t *bytes);
/* Copies; the device side must lie inside one known buffer (see Extents). */
mt_status mt_memcpy_h2d(void *dst, const void *src, size_t bytes);
mt_status mt_memcpy_d2h(void *dst, const void *src, size_t bytes);
mt_status mt_memcpy_d2d(void *dst, const void *src, size_t bytes);

/* ---- kernels ------------------------------------------------------------- */
/* out = op(in, scalar). Same shape; same dtype except for MT_MAP_COPY. An op
 * the dtype does not take (MT_MAP_OPS) is MT_ERR_DTYPE. */
mt_status mt_map(int op, mt_tensor out, mt_tensor in, double scalar);
/* out = value everywhere, cast to out's dtype as COPY casts a float64. */
mt_status mt_fill(mt_tensor out, double value);
/* out = op(a, b); a and b broadcast (NumPy rules) to out's shape exactly.
 * a and b share a dtype; out has it too, or is bool for a comparison. */
mt_status mt_zip(int op, mt_tensor out, mt_tensor a, mt_tensor b);
/* mt_map and mt_zip into a new result, in one call (src/new_output.cu): the
 * result's memory comes from the pool, as mt_malloc's. *out gives the
 * result's dtype, shape and row-major strides; on success out->data is the
 * new memory and out->offset 0 (the caller frees it with mt_free; NULL when
 * out has no element). On failure nothing stays allocated and out->data is
 * NULL. The descriptors come by pointer (the short road of a small op). */
mt_status mt_map_new(int op, mt_tensor *out, const mt_tensor *in, double scalar);
mt_status mt_zip_new(int op, mt_tensor *out, const mt_tensor *a, const mt_tensor *b);
/* mt_map and mt_zip with two scalars, s and t, cast to the op's dtype: the
 * parameters of the ops that take them (MT_MAP_OPS, MT_ZIP_OPS: elu's alpha,
 * hardtanh's min and max, ...); the other ops ignore them. mt_map(op, out,
 * in, s) is mt_map_scalars(op, out, in, s, 0), and mt_zip(op, out, a, b)
 * mt_zip_scalars(op, out, a, b, 0, 0). */
mt_status mt_map_scalars(int op, mt_tensor out, mt_tensor in, double s, double t);
mt_status mt_zip_scalars(int op, mt_tensor out, mt_tensor a, mt_tensor b, double s, double t);
/* Reduce `in` along `dim`: out has in's shape with shape[dim] == 1 (the
 * keepdim form), and in's dtype (int64 for ARGMAX/ARGMIN). A dim of length
 * 0 gives the identity; ARGMAX/ARGMIN of an empty dim is an error. */
mt_status mt_reduce(int op, mt_tensor out, mt_tensor in, int dim);
/* Reduce every element of `in` into the one element of `out`. */
mt_status mt_reduce_all(int op, mt_tensor out, mt_tensor in);
/* torch's max(dim) and min(dim) in one pass: op MT_REDUCE_MAX or
 * MT_REDUCE_MIN (or ARGMAX / ARGMIN, the same pass) writes each row's
 * maximum (minimum) to `values` (in's dtype) and its index to `indices`
 * (int64), both of the keepdim shape and of the same strides. Between equal
 * values the first index wins; a NaN beats every number (the first NaN's
 * index). An empty dim is an error. */
mt_status mt_reduce_with_indices(int op, mt_tensor values, mt_tensor indices, mt_tensor in, int dim);
/* mt_reduce_with_indices on src/reduce_index_rows.cu with 1, 2, 4 or 8 warps
 * a row (0: the library's), for benchmarks and tests; values or indices may
 * be none (a zeroed mt_tensor), not both. in: float32/64 rows of the last
 * dim, stride 1, whole 16-byte aligned Packs (else MT_ERR_INVALID_ARGUMENT). */
mt_status mt_reduce_index_rows(int op, mt_tensor values, mt_tensor indices, mt_tensor in, int dim, int warps);
/* out = a @ b over the last two dims: a (..., M, K), b (..., K, N),
 * out (..., M, N); the leading (batch) dims broadcast as in NumPy. algo is
 * an mt_matmul_algo. Same as mt_matmul_with_config with config -1. */
mt_status mt_matmul(mt_tensor out, mt_tensor a, mt_tensor b, int algo);
/* Tile configurations of the tunable rungs (and so of the default), numbered
 * together: MT_MATMUL_WARPTILE's first, then MT_MATMUL_PIPELINED's. How many
 * there are, and a name for each ("128x128x16 warp 64x32 (256 threads)",
 * "pipelined 128x128x8 ..."; NULL outside 0..count-1).
 * minitensor/ops/autotune.py times them per device and shape class and passes
 * the fastest to mt_matmul_with_config. */
int mt_matmul_config_count(void);
const char *mt_matmul_config_name(int config);
/* mt_matmul with a chosen configuration: config -1 lets the library choose
 * from the shape; 0..count-1 is allowed with MT_MATMUL_DEFAULT (any of them)
 * and with the rung a configuration belongs to (the other algos have nothing
 * to configure). */
mt_status mt_matmul_with_config(mt_tensor out, mt_tensor a, mt_tensor b, int algo, int config);
/* out = act(a @ b + bias) + residual in one kernel: the warptile (or
 * pipelined) rung with
 * the bias, the activation (an mt_epilogue_act) and the residual applied as
 * each output is stored (src/matmul_epilogue.cu). a, b and out as
 * mt_matmul; bias (N,), residual (out's shape; it may be out itself) and
 * pre (out's shape, its own buffer) of out's dtype, any strides. flags:
 * MT_EPILOGUE_BIAS adds bias, MT_EPILOGUE_RESIDUAL adds residual after the
 * activation, MT_EPILOGUE_PRE writes z = a @ b + bias (before the
 * activation) to pre, what the activation's gradient needs; an absent one
 * is not read or written. Under either kernel policy (Python keeps the
 * unfused chain under teaching). config: -1 (the library's warptile tile
 * for the shape) or any configuration of mt_matmul_with_config (warptile's
 * or pipelined's, below mt_matmul_epilogue_config_count(), which is
 * mt_matmul_config_count()): both rungs take the epilogue, and the
 * autotuner times them for the fused product as it does for the plain one. */
enum { MT_EPILOGUE_BIAS = 1, MT_EPILOGUE_RESIDUAL = 2, MT_EPILOGUE_PRE = 4 };
int mt_matmul_epilogue_config_count(void);
mt_status mt_matmul_epilogue(mt_tensor out, mt_tensor a, mt_tensor b, mt_tensor bias, mt_tensor residual,
                             mt_tensor pre, int act, int flags, int config);
/* mt_reduce with a chosen rung of the reduction ladder (an mt_reduce_algo),
 * for teaching and benchmarks: every algo gives the same result (up to the
 * order of float additions) for every op, dim and layout.
 * MT_REDUCE_ALGO_DEFAULT is exactly mt_reduce. */
mt_status mt_reduce_variant(int op, mt_tensor out, mt_tensor in, int dim, int algo);
/* out = in (same shape; out's dtype may differ: a cast) with a chosen rung of the transpose ladder
 * (an mt_copy_algo). The tiled algos need in to be a transposed view (its
 * second-to-last dim has stride 1) and out to have rows of stride 1;
 * otherwise they fall back to the naive copy. MT_COPY_ALGO_DEFAULT is
 * exactly mt_map(MT_MAP_COPY, ...) for same-dtype tensors. */
mt_status mt_copy_variant(mt_tensor out, mt_tensor in, int algo);
/* Numerically stable softmax (log_softmax when `log` is non-zero) along dim,
 * one fused pass per row. out has in's shape. */
mt_status mt_softmax(mt_tensor out, mt_tensor in, int dim, int log);
/* The gradient of mt_softmax from its output out and grad_out (all of one
 * shape and float dtype, any layout), times scale:
 *   softmax:     grad_in = scale * out * (grad_out - sum(grad_out * out))
 *   log_softmax: grad_in = scale * (grad_out - exp(out) * sum(grad_out))
 * with the sums along dim; one kernel, one block per row. */
mt_status mt_softmax_backward(mt_tensor grad_in, mt_tensor grad_out, mt_tensor out, int dim, int log, double scale);
/* The attention ladder's fused softmax (src/masked_softmax.cu): out =
 * softmax(in * scale + mask) along the last dim in one kernel, for
 * contiguous in and out of one shape and float dtype. flags:
 * MT_SOFTMAX_MASK adds mask (in's shape and dtype, any strides: 0 for a
 * broadcast dim; -inf hides a key); MT_SOFTMAX_CAUSAL hides key j from query
 * i when j > i, i being the index along the second-to-last dim. Without
 * MT_SOFTMAX_MASK mask is not read. A row with every key hidden (every
 * value -inf) gives zeros, as torch's scaled_dot_product_attention (its "safe
 * softmax"), not the NaN of a plain softmax over nothing. */
enum { MT_SOFTMAX_MASK = 1, MT_SOFTMAX_CAUSAL = 2 };
mt_status mt_masked_softmax(mt_tensor out, mt_tensor in, mt_tensor mask, double scale, int flags);
/* Layer normalization of the rows of in, a contiguous (rows, n) tensor:
 * out = (in - mean) * rstd * weight + bias, with each row's mean and
 * rstd = 1 / sqrt(biased variance + eps) written to the contiguous (rows,)
 * tensors mean and rstd for the backward pass. `affine` says which of
 * weight and bias (contiguous (n,)) there are: MT_LAYER_NORM_WEIGHT |
 * MT_LAYER_NORM_BIAS; an absent one is not read. out may be in. With n == 0
 * nothing is written (rows of nothing have no statistics). */
enum { MT_LAYER_NORM_WEIGHT = 1, MT_LAYER_NORM_BIAS = 2, MT_LAYER_NORM_GRAD_IN = 4 };
mt_status mt_layer_norm(mt_tensor out, mt_tensor mean, mt_tensor rstd, mt_tensor in, mt_tensor weight,
                        mt_tensor bias, int affine, double eps);
/* The gradients of mt_layer_norm from grad_out (rows, n) and the forward's
 * in, mean, rstd and weight: those `want` names (MT_LAYER_NORM_GRAD_IN for
 * grad_in (rows, n), MT_LAYER_NORM_WEIGHT for grad_weight (n,),
 * MT_LAYER_NORM_BIAS for grad_bias (n,)); the others are not touched.
 * `affine` is the forward's. */
mt_status mt_layer_norm_backward(mt_tensor grad_in, mt_tensor grad_weight, mt_tensor grad_bias, mt_tensor grad_out,
                                 mt_tensor in, mt_tensor mean, mt_tensor rstd, mt_tensor weight, int want,
                                 int affine);
/* out = a where cond is non-zero (NaN included), else b: cond, a and b
 * broadcast to out's shape; a, b and out share a dtype (any of the four),
 * cond may have its own (bool, or any other: non-zero is true). */
mt_status mt_where(mt_tensor out, mt_tensor cond, mt_tensor a, mt_tensor b);
/* log(sum(exp(in))) along dim, stably, one block per row reading it once;
 * out has in's shape with dim kept as 1. An empty row gives -inf. */
mt_status mt_logsumexp(mt_tensor out, mt_tensor in, int dim);
/* The gradient of logsumexp over any dims: grad_in = grad_out * exp(in - lse)
 * in one elementwise pass, grad_out and the forward's lse having in's rank
 * with the reduced dims kept as 1 (repeated along them). grad_in has in's
 * shape and dtype (float32 or float64) and may be in itself. */
mt_status mt_logsumexp_backward(mt_tensor grad_in, mt_tensor grad_out, mt_tensor in, mt_tensor lse);
/* Cross-entropy of each row of logits (N, C) against its target class:
 * loss[i] = lse[i] - logits[i][targets[i]], with lse[i] = logsumexp of row i
 * saved for the backward. logits, loss and lse are float32 or float64 (one
 * dtype); targets (N,) holds class indices in [0, C), int64 or whole
 * numbers in the logits' dtype (checked on the device unless
 * targets_checked is non-zero: the caller has checked them); loss and lse
 * are (N,). */
mt_status mt_cross_entropy(mt_tensor loss, mt_tensor lse, mt_tensor logits, mt_tensor targets, int targets_checked);
/* grad_logits = grad[i] * scale * (exp(logits - lse[i]) - onehot(targets[i])),
 * row by row; grad (N,) may be a broadcast scalar (stride 0). */
mt_status mt_cross_entropy_backward(mt_tensor grad_logits, mt_tensor logits, mt_tensor targets, mt_tensor lse,
                                    mt_tensor grad, double scale, int targets_checked);
/* Optimizer updates, in place, one kernel per parameter (src/optim.cu), with
 * torch's formulas: param, grad and the state are contiguous float tensors
 * of one shape and dtype. SGD: momentum_buffer is read and written when
 * momentum != 0 (set to the gradient when first_step), else not read.
 * Adam: step counts from 1; decoupled non-zero is AdamW (weight decay on the
 * parameter, not in the gradient). */
mt_status mt_sgd_step(mt_tensor param, mt_tensor grad, mt_tensor momentum_buffer, double lr, double momentum,
                      double weight_decay, int first_step);
mt_status mt_adam_step(mt_tensor param, mt_tensor grad, mt_tensor exp_avg, mt_tensor exp_avg_sq, double lr,
                       double beta1, double beta2, double eps, double weight_decay, int64_t step, int decoupled);
/* The same updates with the step count on the device (torch's
 * capturable=True), so that a CUDA graph replay advances it: step is a
 * one-element int64 tensor, incremented on the device before the update,
 * which reads it there (Adam's bias corrections; SGD's first step, when the
 * count reaches 1, sets the momentum buffer to the gradient). */
mt_status mt_sgd_step_capturable(mt_tensor param, mt_tensor grad, mt_tensor momentum_buffer, mt_tensor step,
                                 double lr, double momentum, double weight_decay);
mt_status mt_adam_step_capturable(mt_tensor param, mt_tensor grad, mt_tensor exp_avg, mt_tensor exp_avg_sq,
                                  mt_tensor step, double lr, double beta1, double beta2, double eps,
                                  double weight_decay, int decoupled);
/* Scaled dot-product attention in one kernel (src/attention.cu, the flash
 * rung): out = softmax(q @ k^T * scale) @ v per batch element, for contiguous
 * q (B, L, D), k (B, S, D), v (B, S, Dv) and out (B, L, Dv) of one float
 * dtype, D and Dv at most 64; with causal, key j is masked for query i when
 * j > i. No score is stored; each row's log-sum-exp of the scaled scores
 * goes to the contiguous (B, L) lse, for the backward. A row with no key
 * (S = 0) gives NaN (and lse -inf). */
mt_status mt_attention(mt_tensor out, mt_tensor lse, mt_tensor q, mt_tensor k, mt_tensor v, double scale, int causal);
/* The gradients of mt_attention: dq (B, L, D), dk (B, S, D) and dv (B, S, Dv),
 * contiguous, from dout = dL/dout and the forward's q, k, v, out and lse,
 * recomputing each weight from lse (two kernels: one thread per query row,
 * then one per key row; no atomics). */
mt_status mt_attention_backward(mt_tensor dq, mt_tensor dk, mt_tensor dv, mt_tensor dout, mt_tensor q, mt_tensor k,
                                mt_tensor v, mt_tensor out, mt_tensor lse, double scale, int causal);
/* mt_attention and mt_attention_backward again, as the warp rung
 * (src/attention_warp.cu): a block's queries split over threads in register
 * tiles, K/V tiles staged with cp.async, one fused backward kernel (dQ by
 * atomics). The same operands, with D = Dv and D 32, 64 or 128. */
mt_status mt_attention_warp(mt_tensor out, mt_tensor lse, mt_tensor q, mt_tensor k, mt_tensor v, double scale,
                            int causal);
mt_status mt_attention_warp_backward(mt_tensor dq, mt_tensor dk, mt_tensor dv, mt_tensor dout, mt_tensor q,
                                     mt_tensor k, mt_tensor v, mt_tensor out, mt_tensor lse, double scale, int causal);
/* 2-D convolution in one kernel (src/conv.cu, the tiled rung), a
 * cross-correlation as torch's conv2d: for the C / groups input channels c
 * of out channel co's group g = co / (C_out / groups),
 *   out[n, co, y, x] = bias[co] + sum_{c, i, j} weight[co, c, i, j] *
 *       in[n, g * C / groups + c, y * stride_h - pad_h + i * dilation_h,
 *                                 x * stride_w - pad_w + j * dilation_w],
 * the input being zero outside the image. in (N, C, H, W), weight (C_out,
 * C / groups, KH, KW), bias (C_out,) (read only when has_bias) and out (N,
 * C_out, OH, OW) are contiguous and of one float dtype, with OH = (H +
 * 2 pad_h - dilation_h (KH - 1) - 1) / stride_h + 1 (OW likewise) at least
 * 1. A block stages the input patch of a 16 x 16 tile of outputs and one
 * channel's weights in shared memory; when they need more than 48 KiB
 * (large strides or dilations) the call is MT_ERR_INVALID_ARGUMENT naming
 * the sizes. out shares no byte with an input. */
mt_status mt_conv2d(mt_tensor out, mt_tensor in, mt_tensor weight, mt_tensor bias, int has_bias, int stride_h,
                    int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups);
/* The same convolution as an implicit GEMM (src/conv_implicit_gemm.cu):
 * one matrix product per group, out (C_out / groups) x (N OH OW) = weight x
 * the input's windows, with the windows gathered into shared memory tile by
 * tile and never written to memory; any stride, padding, dilation and
 * groups; the same operands and checks as mt_conv2d, no shared-memory limit;
 * pixel and k counts (N OH OW, N H W, C / groups KH KW, C_out / groups KH
 * KW) and the padded sides (H + 2 pad_h, W + 2 pad_w) below 2^31, else
 * MT_ERR_INVALID_ARGUMENT. config: -1 (the library's tile for the shape)
 * or one of the rung's tile configurations, 0 ..
 * mt_conv2d_igemm_config_count() - 1, each named by
 * mt_conv2d_igemm_config_name (the autotuner, minitensor/ops/autotune.py,
 * times them per shape); every config gives the same result up to the
 * order of the sums. Likewise for both gradients. */
int mt_conv2d_igemm_config_count(void);
const char *mt_conv2d_igemm_config_name(int config);
mt_status mt_conv2d_igemm(mt_tensor out, mt_tensor in, mt_tensor weight, mt_tensor bias, int has_bias, int stride_h,
                          int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups, int config);
/* Its gradients, each another implicit GEMM. grad_in (N, C, H, W) = the
 * gradient of mt_conv2d_igemm's input for grad_out (N, C_out, OH, OW) and
 * weight; grad_weight (C_out, C / groups, KH, KW) = the gradient of the weight
 * for grad_out and the input in (summed over the batch; the products over
 * N OH OW are split over blocks and their partial sums added in a fixed
 * order). Contiguous, one float dtype, the output sharing no byte with the
 * others; grad_out's shape must be the forward's output shape. */
mt_status mt_conv2d_igemm_input_grad(mt_tensor grad_in, mt_tensor grad_out, mt_tensor weight, int stride_h,
                                     int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups,
                                     int config);
mt_status mt_conv2d_igemm_weight_grad(mt_tensor grad_weight, mt_tensor grad_out, mt_tensor in, int stride_h,
                                      int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups,
                                      int config);
/* The depthwise rung (groups = C = C_out, weight (C, 1, KH, KW); a channel
 * multiplier is refused): mt_conv2d_depthwise (src/conv_depthwise.cu), a
 * 32 x 32 output tile of one plane a block, 4 outputs a thread; grad_in
 * (N, C, H, W) by the same kernel with the taps flipped at stride 1, else
 * gathered; grad_weight (C, 1, KH, KW) as a deterministic reduction over N
 * OH OW (src/conv_depthwise_backward.cu). The direct rung
 * (src/conv_direct.cu), for few input channels a group: a thread per output
 * pixel computing 8 output channels at a time, a thread per input element
 * gathering its gradient, the weight gradient as the same reduction. in,
 * weight, bias and the written tensor contiguous, grad_out any strides (an
 * expanded gradient is read in place), one float dtype, sizes below 2^31. */
mt_status mt_conv2d_depthwise(mt_tensor out, mt_tensor in, mt_tensor weight, mt_tensor bias, int has_bias,
                              int stride_h, int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w);
mt_status mt_conv2d_direct(mt_tensor out, mt_tensor in, mt_tensor weight, mt_tensor bias, int has_bias, int stride_h,
                           int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups);
mt_status mt_conv2d_direct_input_grad(mt_tensor grad_in, mt_tensor grad_out, mt_tensor weight, int stride_h,
                                      int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups);
mt_status mt_conv2d_direct_weight_grad(mt_tensor grad_weight, mt_tensor grad_out, mt_tensor in, int stride_h,
                                       int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w, int groups);
mt_status mt_conv2d_depthwise_input_grad(mt_tensor grad_in, mt_tensor grad_out, mt_tensor weight, int stride_h,
                                         int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w);
mt_status mt_conv2d_depthwise_weight_grad(mt_tensor grad_weight, mt_tensor grad_out, mt_tensor in, int stride_h,
                                          int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w);
/* 2-D pooling (src/pool.cu), one kernel each way. in (N, C, H, W) and out
 * (N, C, OH, OW), any strides, one float dtype; OH is torch's output size,
 * floor((H + 2 pad_h - dilation_h (kernel_h - 1) - 1) / stride_h) + 1, or
 * with ceil_mode the ceiling (less one where that window would start past
 * the input and its left padding); OW likewise. Padding is at most half the
 * kernel, as torch's. Max pooling skips the padding, writes each window's
 * maximum (NaN wins, the first of equal maxima) and its position y * W + x
 * in its input plane to indices (int64, out's shape; or none, a zeroed
 * descriptor: data NULL, ndim 0, for a forward without backward); its backward adds
 * each grad_out element into grad_in at that position (indices as the
 * forward wrote them: a position outside its window is never reached). Average pooling
 * divides each window's sum by divisor when it is non-zero, else by its
 * taps inside the input and padding (count_include_pad) or inside the
 * input only. Adaptive average pooling averages, for output row o, input
 * rows [floor(o H / OH), ceil((o + 1) H / OH)) (columns alike), H, W >= 1.
 * The backward kernels write every element of grad_in, each by one thread
 * (no atomics: deterministic). */
mt_status mt_max_pool2d(mt_tensor out, mt_tensor indices, mt_tensor in, int kernel_h, int kernel_w, int stride_h,
                        int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w);
mt_status mt_max_pool2d_backward(mt_tensor grad_in, mt_tensor grad_out, mt_tensor indices, int kernel_h, int kernel_w,
                                 int stride_h, int stride_w, int pad_h, int pad_w, int dilation_h, int dilation_w);
mt_status mt_avg_pool2d(mt_tensor out, mt_tensor in, int kernel_h, int kernel_w, int stride_h, int stride_w,
                        int pad_h, int pad_w, int count_include_pad, int64_t divisor);
mt_status mt_avg_pool2d_backward(mt_tensor grad_in, mt_tensor grad_out, int kernel_h, int kernel_w, int stride_h,
                                 int stride_w, int pad_h, int pad_w, int count_include_pad, int64_t divisor);
mt_status mt_adaptive_avg_pool2d(mt_tensor out, mt_tensor in);
mt_status mt_adaptive_avg_pool2d_backward(mt_tensor grad_in, mt_tensor grad_out);
/* out[i][j] = in[i][index[i][j]] along dim (torch.gather). in and out share
 * any one dtype. index is int64 (or holds whole numbers in a float dtype)
 * and has out's shape; every other dim of index must be no longer than
 * in's. Indices out of range are an error. */
mt_status mt_gather(mt_tensor out, mt_tensor in, mt_tensor index, int dim);
/* out[i][index[i][j]] += src[i][j] along dim (torch.scatter_add_, in place,
 * atomic so repeated indices add up). out and src: float32, float64 or int64
 * (wrapping), one dtype; index as for gather, of src's shape. */
mt_status mt_scatter_add(mt_tensor out, mt_tensor index, mt_tensor src, int dim);
/* mt_gather and mt_scatter_add for indices the caller has checked: no
 * device check, so no wait for it (a CUDA graph capture forbids one). Still
 * memory-safe: a bad index gathers 0 and adds nothing. */
mt_status mt_gather_unchecked(mt_tensor out, mt_tensor in, mt_tensor index, int dim);
mt_status mt_scatter_add_unchecked(mt_tensor out, mt_tensor index, mt_tensor src, int dim);

/* ---- kernel policy ---------------------------------------------------------
 * Which kernels the default paths run (mt_map, mt_zip, mt_reduce,
 * mt_reduce_all, mt_matmul with MT_MATMUL_DEFAULT, mt_softmax, copies):
 *   MT_KERNELS_FAST      the fastest kernel for each layout: the top rungs
 *                        of the ladders (16-byte loads, warp shuffles,
 *                        warptile, the register softmax). The default.
 *   MT_KERNELS_TEACHING  only the kernels of the course's assignments:
 *                        map/zip_contiguous and map/zip_strided,
 *                        reduce_rows_first_add for every mt_reduce,
 *                        mt_reduce_all's two passes finishing with
 *                        block_reduce, matmul_tiled, softmax_rows. A stubbed
 *                        or broken student kernel then fails every test
 *                        that uses the op.
 * The ladder entry points that name a rung (mt_reduce_variant,
 * mt_copy_variant and mt_matmul_with_config with any algo but DEFAULT) run
 * that rung under both policies. Under teaching, MT_MATMUL_DEFAULT with a
 * warptile config (>= 0) is MT_ERR_INVALID_ARGUMENT: the default is tiled.
 * The environment variable MINITENSOR_KERNELS=fast|teaching sets the policy
 * when the library initialises (unless mt_set_kernel_policy was called
 * before); any other value makes every call that initialises fail with
 * MT_ERR_INVALID_ARGUMENT naming the variable. Process-wide; a launch
 * already under way keeps the kernels it chose. */
typedef enum { MT_KERNELS_FAST = 0, MT_KERNELS_TEACHING = 1 } mt_kernel_policy;
/* MT_ERR_INVALID_ARGUMENT for a value that is not a policy. */
mt_status mt_set_kernel_policy(mt_kernel_policy policy);
mt_kernel_policy mt_get_kernel_policy(void);

/* How many launches of the kernel named `kernel` (a function name such as
 * "reduce_rows_first_add", without template arguments) this process made
 * since the last mt_reset_launch_counts, counting only instantiations whose
 * demangled signature contains `with` (NULL or "" for all). For tests that
 * check which kernel an entry point ran. The emulator build counts; the
 * CUDA build returns -1 (not counted). */
int64_t mt_launch_count(const char *kernel, const char *with);
void mt_reset_launch_counts(void);

/* ---- device placement (one process per GPU, docs/distributed.md) -------- */
/* Chooses the GPU this process uses; call it before anything else touches the
 * device (a different device after the first use is an error). The emulator
 * has one device, 0. */
mt_status mt_set_device(int device);
/* The device this process uses (0 until mt_set_device chose another). */
mt_status mt_get_device(int *device);

/* ---- families declared in headers of their own ---------------------------- */
#include "batchnorm.h" /* mt_batch_norm, mt_batch_norm_backward (src/batchnorm.cu) */
#include "attention_tiled.h" /* mt_attention_tiled and its backward (src/attention_tiled.cu) */
#include "pool.h" /* mt_max_pool2d_new, mt_avg_pool2d_new (src/pool_new.cu) */
#include "conv_igemm_tf32.h" /* mt_conv2d_tf32 and its gradients (src/conv_igemm_tf32.cu) */
#include "conv_winograd.h" /* mt_conv2d_winograd_filter, _input, _output (src/conv_winograd.cu) */
#include "attention_mma.h" /* mt_attention_mma, the 3xTF32 tensor-core forward (src/attention_mma.cu) */
#include "optim_list.h" /* mt_adam_step_list, mt_grad_norm_list, mt_grad_scale_list (src/optim_multi.cu) */
#include "matmul_tf32.h" /* mt_matmul_tf32, its rungs and its fused epilogue (src/matmul_tf32*.cu) */

#ifdef __cplusplus
}
#endif

#endif /* MINITENSOR_H */
