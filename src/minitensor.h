/*
 * minitensor.h: the public C API of the minitensor engine.
 *
 * Everything Python (or a C test) may call is declared here, with plain C
 * types only, so that ctypes can bind each function exactly. The op ids, the
 * maximum rank and the ABI version are defined once, in this file; the
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
 *     elements (not bytes). Any stride is allowed, including 0 (broadcast) and
 *     negative strides are rejected. Rank 0 is a scalar with one element.
 *   - Outputs are never broadcast: an output must not have a stride 0 over a
 *     dimension longer than 1, because several threads would write the same
 *     element. Every kernel checks its arguments before it launches anything,
 *     so a rejected call leaves its output untouched.
 */
#ifndef MINITENSOR_H
#define MINITENSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bump whenever a struct, a signature or an enum below changes. */
#define MT_ABI_VERSION 1

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
    MT_ERR_NO_DEVICE = 7         /* no usable GPU for the CUDA build         */
} mt_status;

typedef enum {
    MT_FLOAT32 = 0,
    MT_FLOAT64 = 1,
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

/* ---- unary maps: out = f(in) (elementwise, same shape) ------------------ */
/* The *_SCALAR ops use the scalar argument of mt_map; FILL ignores `in`.    */
typedef enum {
    MT_MAP_COPY = 0,        /* in (out may have another dtype: a cast)    */
    MT_MAP_NEG,             /* -in                                        */
    MT_MAP_EXP,
    MT_MAP_LOG,
    MT_MAP_RELU,
    MT_MAP_SIGMOID,
    MT_MAP_TANH,
    MT_MAP_ABS,
    MT_MAP_SQRT,
    MT_MAP_RECIPROCAL,      /* 1 / in                                     */
    MT_MAP_SIGN,            /* -1, 0 or 1                                 */
    MT_MAP_ADD_SCALAR,      /* in + s                                     */
    MT_MAP_MUL_SCALAR,      /* in * s                                     */
    MT_MAP_POW_SCALAR,      /* in ** s                                    */
    MT_MAP_RPOW_SCALAR,     /* s ** in                                    */
    MT_MAP_FILL,            /* s                                          */
    MT_MAP_OP_COUNT
} mt_map_op;

/* ---- binary zips: out = f(a, b) with NumPy broadcasting ------------------ */
/* Comparisons give 1.0 or 0.0 in the output dtype.                           */
typedef enum {
    MT_ZIP_ADD = 0,
    MT_ZIP_SUB,
    MT_ZIP_MUL,
    MT_ZIP_DIV,
    MT_ZIP_POW,
    MT_ZIP_MAXIMUM,
    MT_ZIP_MINIMUM,
    MT_ZIP_EQ,
    MT_ZIP_NE,
    MT_ZIP_LT,
    MT_ZIP_LE,
    MT_ZIP_GT,
    MT_ZIP_GE,
    MT_ZIP_RELU_BACKWARD,   /* a = incoming gradient, b = input: b > 0 ? a : 0 */
    MT_ZIP_OP_COUNT
} mt_zip_op;

/* ---- reductions along one dimension, or over everything ------------------ */
typedef enum {
    MT_REDUCE_SUM = 0,      /* identity 0                                 */
    MT_REDUCE_PROD,         /* identity 1                                 */
    MT_REDUCE_MAX,          /* identity -inf                              */
    MT_REDUCE_MIN,          /* identity +inf                              */
    MT_REDUCE_ARGMAX,       /* index of the first maximum, as a float     */
    MT_REDUCE_ARGMIN,       /* index of the first minimum, as a float     */
    MT_REDUCE_OP_COUNT
} mt_reduce_op;

/* ---- matrix product algorithms (the kernel ladder) ---------------------- */
typedef enum {
    MT_MATMUL_DEFAULT = 0,  /* the fastest correct kernel for this build  */
    MT_MATMUL_NAIVE,        /* one thread per output, global memory only  */
    MT_MATMUL_TILED,        /* shared-memory tiles of A and B             */
    MT_MATMUL_ALGO_COUNT
} mt_matmul_algo;

/* ---- library information ----------------------------------------------- */
int mt_abi_version(void);
int mt_max_dims(void);
/* How many ids an op family has, and each id's name ("add", "exp", ...), so
 * that the binding can check its own tables against the library's. family is
 * one of "map", "zip", "reduce", "matmul". Returns -1 / NULL when unknown. */
int mt_op_count(const char *family);
const char *mt_op_name(const char *family, int op);
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
/* When on, every launch is followed by a device synchronize, so a fault in a
 * kernel is reported by the call that launched it. Off by default; the
 * environment variable MINITENSOR_SYNC=1 turns it on at load. */
mt_status mt_set_sync_debug(int on);
mt_status mt_synchronize(void);

/* ---- memory ------------------------------------------------------------- */
/* Device allocations come from the runtime's stream-ordered pool. */
mt_status mt_malloc(void **ptr, size_t bytes);
mt_status mt_free(void *ptr);
/* Bytes currently allocated through mt_malloc and not yet freed. */
mt_status mt_memory_in_use(int64_t *bytes);
mt_status mt_memcpy_h2d(void *dst, const void *src, size_t bytes);
mt_status mt_memcpy_d2h(void *dst, const void *src, size_t bytes);
mt_status mt_memcpy_d2d(void *dst, const void *src, size_t bytes);

/* ---- kernels ------------------------------------------------------------- */
/* out = op(in, scalar). Same shape; same dtype except for MT_MAP_COPY. */
mt_status mt_map(int op, mt_tensor out, mt_tensor in, double scalar);
/* out = value everywhere. */
mt_status mt_fill(mt_tensor out, double value);
/* out = op(a, b); a and b broadcast (NumPy rules) to out's shape exactly. */
mt_status mt_zip(int op, mt_tensor out, mt_tensor a, mt_tensor b);
/* Reduce `in` along `dim`: out has in's shape with shape[dim] == 1 (the
 * keepdim form). A dim of length 0 gives the identity; ARGMAX/ARGMIN of an
 * empty dim is an error. */
mt_status mt_reduce(int op, mt_tensor out, mt_tensor in, int dim);
/* Reduce every element of `in` into the one element of `out`. */
mt_status mt_reduce_all(int op, mt_tensor out, mt_tensor in);
/* out = a @ b over the last two dims: a (..., M, K), b (..., K, N),
 * out (..., M, N); the leading (batch) dims broadcast as in NumPy. */
mt_status mt_matmul(mt_tensor out, mt_tensor a, mt_tensor b, int algo);
/* Numerically stable softmax (log_softmax when `log` is non-zero) along dim,
 * one fused pass per row. out has in's shape. */
mt_status mt_softmax(mt_tensor out, mt_tensor in, int dim, int log);
/* out[i][j] = in[i][index[i][j]] along dim (torch.gather). index holds whole
 * numbers in a float dtype and has out's shape; every other dim of index must
 * be no longer than in's. Indices out of range are an error. */
mt_status mt_gather(mt_tensor out, mt_tensor in, mt_tensor index, int dim);
/* out[i][index[i][j]] += src[i][j] along dim (torch.scatter_add_, in place,
 * atomic so repeated indices add up). index has src's shape. */
mt_status mt_scatter_add(mt_tensor out, mt_tensor index, mt_tensor src, int dim);

#ifdef __cplusplus
}
#endif

#endif /* MINITENSOR_H */
