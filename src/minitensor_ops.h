/*
 * minitensor_ops.h: the op vocabularies of the C API, included by
 * minitensor.h (include that one: it is the one public header). Kept apart
 * so that the list of every op and ladder rung reads as one page; everything
 * here is part of minitensor.h's API and ABI (MT_ABI_VERSION).
 */
#ifndef MINITENSOR_OPS_H
#define MINITENSOR_OPS_H

/* ---- op vocabularies ------------------------------------------------------
 * Each family of op ids is written once, as an "X-macro": a list of
 * X(ID, name, dtypes) entries (the kernel ladders: X(ID, name)), in id order.
 * The enums below, the name and dtype tables that mt_op_name and
 * mt_op_dtypes report (src/library.cu), the id -> functor dispatch of the
 * kernel files and the dtypes each kernel is compiled for are all generated
 * from these lists, and the Python layers read the names and dtype rules
 * from the library: nothing else repeats them.
 *
 * dtypes, the op's dtype rule, is a string: the letters of the dtypes its
 * kernel takes, f (float32 and float64), i (int64), b (bool); any other is
 * MT_ERR_DTYPE. ">b" or ">i" after them names the dtype of the result when
 * it is not the input's (a comparison writes bool, argmax int64). The
 * Python layer follows torch from there: an op that takes f only computes
 * on integer and bool tensors in float32 ("f": exp, div); a zip or a
 * reduction that takes i but not b computes on bools in int64 (pow, sum).
 *
 * Adding an op is one line here, at the end of its list (so that no existing
 * id changes, and so no ABI bump), and its functor in the kernel file:
 * docs/kernels.md, "Add an op", takes softplus through every layer. */

/* Unary maps, out = f(in), elementwise, same shape. The *_scalar ops, elu
 * and leaky_relu use the scalar argument of mt_map (s), hardtanh a second
 * (t, of mt_map_scalars); fill ignores `in`. For int64, s is cast to
 * int64 first (see Dtypes above), + and * wrap, and pow_scalar's s must be
 * a whole number >= 0 (else MT_ERR_INVALID_ARGUMENT): x ** 0 is 1, 0 ** 0
 * included.                                                                */
#define MT_MAP_OPS(X)                                                         \
    X(COPY, copy, "fib")             /* in (out may have another dtype)    */ \
    X(NEG, neg, "fi")                /* -in                                */ \
    X(EXP, exp, "f")                                                          \
    X(LOG, log, "f")                                                          \
    X(RELU, relu, "fi")                                                       \
    X(SIGMOID, sigmoid, "f")                                                  \
    X(TANH, tanh, "f")                                                        \
    X(ABS, abs, "fi")                                                         \
    X(SQRT, sqrt, "f")                                                        \
    X(RECIPROCAL, reciprocal, "f")   /* 1 / in                             */ \
    X(SIGN, sign, "fi")              /* -1, 0 or 1                         */ \
    X(ADD_SCALAR, add_scalar, "fi")  /* in + s                             */ \
    X(MUL_SCALAR, mul_scalar, "fi")  /* in * s                             */ \
    X(POW_SCALAR, pow_scalar, "fi")  /* in ** s                            */ \
    X(RPOW_SCALAR, rpow_scalar, "f") /* s ** in                            */ \
    X(FILL, fill, "fib")             /* s                                  */ \
    X(SOFTPLUS, softplus, "f")       /* log(1 + exp(in)), without overflow */ \
    X(ERF, erf, "f")                 /* the error function                 */ \
    X(GELU, gelu, "f")               /* in * Phi(in), Phi by erf (exact)   */ \
    X(GELU_TANH, gelu_tanh, "f")     /* GELU, Phi by tanh (approximate)    */ \
    X(SILU, silu, "f")               /* in * sigmoid(in)                   */ \
    X(ELU, elu, "f")                 /* in > 0 ? in : s * (exp(in) - 1)    */ \
    X(LEAKY_RELU, leaky_relu, "f")   /* in > 0 ? in : s * in               */ \
    X(HARDTANH, hardtanh, "f")       /* min(max(in, s), t); NaN stays NaN  */

/* Binary zips, out = f(a, b) with NumPy broadcasting. a, b and out share one
 * dtype, except that the comparisons (eq .. ge, ">b") write a bool out for
 * inputs of any dtype (a float out for a comparison is MT_ERR_DTYPE).
 * int64 +, -, * and pow wrap modulo 2^64.                                  */
#define MT_ZIP_OPS(X)                                                         \
    X(ADD, add, "fib")                  /* bool: logical or                */ \
    X(SUB, sub, "fi")                                                         \
    X(MUL, mul, "fib")                  /* bool: logical and               */ \
    X(DIV, div, "f")                    /* true division                   */ \
    X(POW, pow, "fi")                   /* int64: a negative exponent gives   \
                                           the truncated real result: 1 for   \
                                           a = 1, +-1 for a = -1, else 0   */ \
    X(MAXIMUM, maximum, "fib")          /* NaN wins; bool: logical or      */ \
    X(MINIMUM, minimum, "fib")          /* NaN wins; bool: logical and     */ \
    X(EQ, eq, "fib>b")                                                        \
    X(NE, ne, "fib>b")                                                        \
    X(LT, lt, "fib>b")                  /* false < true                    */ \
    X(LE, le, "fib>b")                                                        \
    X(GT, gt, "fib>b")                                                        \
    X(GE, ge, "fib>b")                                                        \
    X(RELU_BACKWARD, relu_backward, "f") /* a = incoming gradient, b =        \
                                           input: b > 0 ? a : 0            */ \
    X(BITWISE_AND, bitwise_and, "ib")                                         \
    X(BITWISE_OR, bitwise_or, "ib")                                           \
    X(BITWISE_XOR, bitwise_xor, "ib")                                         \
    X(FLOOR_DIVIDE, floor_divide, "fi") /* floor(a / b), rounding toward -inf \
                                           (Python's //). int64: a // 0 is 0  \
                                           (no trap; the Python layer         \
                                           refuses it), INT64_MIN // -1       \
                                           wraps to INT64_MIN              */ \
    X(REMAINDER, remainder, "fi")       /* a - floor(a / b) * b, the sign of  \
                                           b (Python's %, torch.remainder).   \
                                           float: b == 0 gives NaN; int64:    \
                                           a % 0 is 0, INT64_MIN % -1 is 0 */ \
    /* The activations' gradients: a = incoming gradient, b = the input of the  \
       forward map of the same name; s and t are its scalars.              */ \
    X(GELU_BACKWARD, gelu_backward, "f")                                      \
    X(GELU_TANH_BACKWARD, gelu_tanh_backward, "f")                            \
    X(SILU_BACKWARD, silu_backward, "f")                                      \
    X(ELU_BACKWARD, elu_backward, "f")               /* s = alpha          */ \
    X(LEAKY_RELU_BACKWARD, leaky_relu_backward, "f") /* s = negative_slope */ \
    X(HARDTANH_BACKWARD, hardtanh_backward, "f")     /* 0 where b <= s or     \
                                                        b >= t             */

/* Reductions along one dimension, or over everything. int64 sums and
 * products wrap; max and min of bools are any and all; argmax and argmin
 * write an int64 out (">i"; any other out dtype is MT_ERR_DTYPE). The
 * other reductions write out of in's dtype.                                */
#define MT_REDUCE_OPS(X)                                                      \
    X(SUM, sum, "fi")          /* identity 0                               */ \
    X(PROD, prod, "fi")        /* identity 1                               */ \
    X(MAX, max, "fib")         /* identity -inf (int64: INT64_MIN; bool: 0) */ \
    X(MIN, min, "fib")         /* identity +inf (int64: INT64_MAX; bool: 1) */ \
    X(ARGMAX, argmax, "fib>i") /* index of the first maximum (or first NaN) */ \
    X(ARGMIN, argmin, "fib>i") /* index of the first minimum (or first NaN) */

/* Matrix product algorithms (the kernel ladder). Each rung is one kernel in
 * a file of its own (src/matmul_<name>.cu) that says what it changes and why
 * it is faster. All take any shapes and strides (vectorized and warptile
 * copy an operand they cannot read with 16-byte loads to a contiguous buffer
 * first).                                                                   */
#define MT_MATMUL_ALGOS(X)                                                    \
    X(DEFAULT, default)           /* warptile, or the tuned rung and tile  */ \
    X(NAIVE, naive)               /* 1 thread per output, warps walk rows  */ \
    X(COALESCED, coalesced)       /* ... warps walk columns                */ \
    X(TILED, tiled)               /* shared-memory tiles of A and B        */ \
    X(BLOCKTILE_1D, blocktile_1d) /* 8 outputs per thread (a column strip) */ \
    X(BLOCKTILE_2D, blocktile_2d) /* 8 x 8 outputs per thread              */ \
    X(VECTORIZED, vectorized)     /* + 16-byte loads and stores            */ \
    X(WARPTILE, warptile)         /* + warp tiles, double buffering, tunable */ \
    X(PIPELINED, pipelined)       /* + cp.async stages, fragments a step ahead */ \
    X(BLOCKTILE_2D_TYPED, blocktile_2d_typed) /* 5 with typed dimensions */

/* The activations of mt_matmul_epilogue (src/matmul_epilogue.h), applied
 * to the product plus bias as it is stored.                                */
#define MT_EPILOGUE_ACTS(X)                                                   \
    X(NONE, none)                 /* z                                     */ \
    X(RELU, relu)                 /* max(z, 0)                             */ \
    X(GELU, gelu)                 /* z * (1 + erf(z / sqrt 2)) / 2         */ \
    X(GELU_TANH, gelu_tanh)       /* torch's approximate="tanh" form       */

/* Reduction algorithms (the reduction ladder, for mt_reduce_variant): how
 * one block combines the values of a row; see src/reduce_ladder.cu.        */
#define MT_REDUCE_ALGOS(X)                                                    \
    X(DEFAULT, default)           /* the fastest for the layout            */ \
    X(INTERLEAVED, interleaved)   /* tree, thread t active if t % 2s == 0  */ \
    X(SEQUENTIAL, sequential)     /* tree, threads 0..s-1 active           */ \
    X(FIRST_ADD, first_add)       /* + accumulate many values during load  */ \
    X(WARP_SHUFFLE, warp_shuffle) /* + the last 32 by warp shuffles        */ \
    X(VECTORIZED, vectorized)     /* + 16-byte loads, shuffle-only finish  */ \
    X(WARP_ROWS, warp_rows)       /* one warp per row, no barrier at all   */

/* Copy algorithms (the transpose ladder, for mt_copy_variant).             */
#define MT_COPY_ALGOS(X)                                                      \
    X(DEFAULT, default)           /* what mt_map(MT_MAP_COPY) does         */ \
    X(NAIVE, naive)               /* one thread per element, any strides   */ \
    X(TILED, tiled)               /* 32 x 32 shared tile, bank conflicts   */ \
    X(TILED_PADDED, tiled_padded) /* 32 x 33 shared tile, no conflicts     */

/* The enums: MT_MAP_COPY = 0, MT_MAP_NEG = 1, ..., then the count. */
#define MT_MAP_ID_(id, name, dtypes) MT_MAP_##id,
#define MT_ZIP_ID_(id, name, dtypes) MT_ZIP_##id,
#define MT_REDUCE_ID_(id, name, dtypes) MT_REDUCE_##id,
#define MT_MATMUL_ID_(id, name) MT_MATMUL_##id,
#define MT_REDUCE_ALGO_ID_(id, name) MT_REDUCE_ALGO_##id,
#define MT_COPY_ALGO_ID_(id, name) MT_COPY_ALGO_##id,
#define MT_EPILOGUE_ID_(id, name) MT_EPILOGUE_##id,

typedef enum { MT_MAP_OPS(MT_MAP_ID_) MT_MAP_OP_COUNT } mt_map_op;
typedef enum { MT_ZIP_OPS(MT_ZIP_ID_) MT_ZIP_OP_COUNT } mt_zip_op;
typedef enum { MT_REDUCE_OPS(MT_REDUCE_ID_) MT_REDUCE_OP_COUNT } mt_reduce_op;
typedef enum { MT_MATMUL_ALGOS(MT_MATMUL_ID_) MT_MATMUL_ALGO_COUNT } mt_matmul_algo;
typedef enum { MT_REDUCE_ALGOS(MT_REDUCE_ALGO_ID_) MT_REDUCE_ALGO_COUNT } mt_reduce_algo;
typedef enum { MT_COPY_ALGOS(MT_COPY_ALGO_ID_) MT_COPY_ALGO_COUNT } mt_copy_algo;
typedef enum { MT_EPILOGUE_ACTS(MT_EPILOGUE_ID_) MT_EPILOGUE_ACT_COUNT } mt_epilogue_act;

#endif /* MINITENSOR_OPS_H */
