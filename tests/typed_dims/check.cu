/*
 * tests/typed_dims/check.cu: what src/typed_dims.h computes, checked on the
 * host (tests/test_typed_dims.py compiles it with the host C++ compiler and
 * runs it; its output is one line per failed check, then "ok N checks").
 */
#include <stdio.h>

#include "typed_dims.h"

TD_DIMENSION(I);
TD_DIMENSION(J);
TD_DIMENSION(K);

static int checks = 0, failures = 0;
#define CHECK(cond)                                                                                                   \
    do {                                                                                                              \
        ++checks;                                                                                                     \
        if (!(cond)) {                                                                                                \
            ++failures;                                                                                               \
            printf("FAILED line %d: %s\n", __LINE__, #cond);                                                          \
        }                                                                                                             \
    } while (0)

int main()
{
    /* Arithmetic within one dimension, and with plain offsets. */
    I i{3};
    CHECK((i + 2).v == 5 && (2 + i).v == 5 && (i - 1).v == 2 && (i + i).v == 6 && (i - i).v == 0);
    i += 4;
    ++i;
    CHECK(i == I{8} && I{1} < i && i <= I{8} && i > I{7} && i >= I{8} && i != I{9});

    /* A view subscripted by dimension: a 3 x 4 row-major matrix. */
    float m[12];
    for (int n = 0; n < 12; ++n)
        m[n] = (float)n;
    const auto A = td::view(m, td::Stride<I>{4}, td::Stride<K>{1});
    CHECK(A(I{2}, K{1}) == 9 && A(K{1}, I{2}) == 9);
    /* Its transpose is the same storage with the strides swapped. */
    const auto At = td::view(m, td::Stride<K>{1}, td::Stride<I>{4});
    CHECK(At(I{2}, K{3}) == A(I{2}, K{3}));
    A(I{0}, K{0}) = 100;
    CHECK(m[0] == 100);

    /* A coordinate set projects onto views with some of its dimensions. */
    const auto at = td::coords(I{1}, J{2}, K{3});
    float b[12];
    for (int n = 0; n < 12; ++n)
        b[n] = (float)(10 * n);
    const auto B = td::view(b, td::Stride<K>{3}, td::Stride<J>{1});
    CHECK(A[at] == m[1 * 4 + 3] && B[at] == b[3 * 3 + 2]);
    CHECK(td::get<J>(at) == J{2} && td::get<K>(at) == K{3});

    /* Folds: K = 8 * outer + inner, with carries both ways. */
    const td::Fold<K, 8> f = td::fold<8>(K{14});
    CHECK(f.outer == 1 && f.inner == 6 && f.logical() == K{14});
    const td::Fold<K, 8> g = f + 3; /* 17 = (2, 1): the carry */
    CHECK(g.outer == 2 && g.inner == 1);
    CHECK((g - 3) == f && (f + 8).outer == 2 && (f + 8).inner == 6);
    const td::Fold<K, 8> h = td::fold<8>(K{-1}); /* floor, not truncation */
    CHECK(h.outer == -1 && h.inner == 7 && (h + 1).outer == 0 && (h + 1).inner == 0);
    CHECK(f < K{15} && !(f < K{14}) && f >= K{14});

    /* A folded layout ("K8 x K"): a 3 x 16 matrix (I x K) stored as
     * [K / 8][I][K % 8], the interleaved layout of a vectorised kernel. A
     * plain K subscript is folded by the view; a folded one is used as is. */
    float v[48];
    const auto V = td::view(v, td::Stride<td::Fold<K, 8>>{3 * 8, 1}, td::Stride<I>{8});
    for (int r = 0; r < 3; ++r)
        for (int k = 0; k < 16; ++k)
            v[(k / 8) * 24 + r * 8 + k % 8] = (float)(100 * r + k);
    bool all = true;
    for (I r{0}; r < I{3}; ++r)
        for (K k{0}; k < K{16}; ++k)
            all = all && V(r, k) == (float)(100 * r.v + k.v) && V(td::fold<8>(k), r) == V(r, k);
    CHECK(all);
    /* Walking K through the fold: (0, 7) + 1 lands on (1, 0), 24 elements on. */
    const td::Fold<K, 8> last{0, 7};
    CHECK(&V(last + 1, I{1}) - &V(last, I{1}) == 24 - 7);
    /* A coordinate folded another way goes through its logical index. */
    CHECK(V(td::fold<4>(K{13}), I{2}) == V(K{13}, I{2}));

    /* A tile: outer stride 0, so only the inner part of a folded index counts. */
    float tile[4 * 8];
    const auto T = td::view(tile, td::tile_stride<td::Fold<I, 4>>(8), td::tile_stride<td::Fold<K, 8>>(1));
    CHECK(&T(td::Fold<I, 4>{5, 2}, td::Fold<K, 8>{9, 3}) == &tile[2 * 8 + 3]);

    /* The compound index: block 3 of 32 rows, thread 5 in it. */
    const auto row = td::compound<td::Fold<I, 32>>(3, 5);
    CHECK(row.logical() == I{3 * 32 + 5});

    printf("%s %d checks\n", failures ? "FAILED" : "ok", checks);
    return failures ? 1 : 0;
}
