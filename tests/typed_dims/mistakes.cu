/*
 * tests/typed_dims/mistakes.cu: index mistakes that src/typed_dims.h turns
 * into compile errors. tests/test_typed_dims.py compiles this file with the
 * host C++ compiler (and nvcc where there is one) once as it is, which must
 * succeed, and once per -DMISTAKE=n, which must fail with the diagnostic it
 * names. Each mistake compiles, and runs wrongly, in a positional kernel.
 */
#include "typed_dims.h"

TD_DIMENSION(I);
TD_DIMENSION(J);
TD_DIMENSION(K);

/* One output of out = A @ B, as a kernel's thread would compute it. */
TD_HD float dot(const float *a, const float *b, int64_t lda, int64_t ldb, I i, J j, K end_k, I end_i, J end_j)
{
    const auto A = td::view(a, td::Stride<I>{lda}, td::Stride<K>{1});
    const auto B = td::view(b, td::Stride<K>{ldb}, td::Stride<J>{1});
    float acc = 0;
    /* The correct version. */
    if (i < end_i && j < end_j)
        for (K k{0}; k < end_k; ++k)
            acc += A(i, k) * B(k, j);
#if MISTAKE == 1
    /* the row compared with the column count: `row < N` */
    if (i < end_j)
        acc = 0;
#elif MISTAKE == 2
    /* a row index used as a position along K: `k0 + ty` where ty is a row */
    const K wrong = K{0} + i;
    acc += A(i, wrong);
#elif MISTAKE == 3
    /* A subscripted with the output's coordinates: A has no dimension J */
    acc += A(i, j);
#elif MISTAKE == 4
    /* a plain int where a dimension is expected: `A.at(row, 3)` */
    acc += A(i, 3);
#elif MISTAKE == 5
    /* an index silently made from an int */
    const I from_int = 5;
    acc += A(from_int, K{0});
#endif
    return acc;
}
