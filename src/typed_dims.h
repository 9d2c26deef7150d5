/*
 * typed_dims.h: typed dimensions for kernel index arithmetic.
 *
 * A kernel's index arithmetic is usually positional, `A[row * lda + k]`, and
 * swapping `row` and `k`, or comparing a row with the column count, compiles
 * and runs. Here each dimension is a type of its own:
 *
 *     TD_DIMENSION(I);                    rows of A and out
 *     TD_DIMENSION(J);                    columns of B and out
 *     TD_DIMENSION(K);                    the dimension the product sums over
 *
 *     I i{3};  K k{5};
 *     i + 1, i - i, i += 2, i < end_i     an I, as with an integer
 *     i + k, i < end_k                    compile errors: two dimensions
 *
 * and a view is subscripted by dimension, not by position:
 *
 *     auto A = td::view(ptr, td::Stride<I>{lda}, td::Stride<K>{1});
 *     A(i, k) == A(k, i)                  the same element, whatever order
 *     A(i, j)                             compile error: A has no J
 *
 * The other pieces, each below with why it is there:
 *   - Coords: a set of coordinates (i, j, k) that every view of some of its
 *     dimensions takes, ignoring the others: A[at], B[at] and Out[at] of one
 *     (i, j, k) are the three elements one step of a product touches;
 *   - Fold<D, N>: D split into an outer and an inner part (D = outer * N +
 *     inner), for tiles and vector or interleaved layouts ("K8 x K"); an
 *     offset added to a folded coordinate carries across the fold, and a view
 *     whose layout folds D takes plain D coordinates (folded for it);
 *   - compound: blockIdx and threadIdx folded into one typed coordinate.
 *
 * Everything is a small struct of integers and inline functions: after
 * inlining, the compiler sees exactly the integer arithmetic a positional
 * kernel writes by hand, and generates the same code (docs/kernels.md
 * compares the instruction counts of src/matmul_blocktile_2d.cu and its
 * typed twin src/matmul_blocktile_2d_typed.cu).
 *
 * One header for nvcc, the emulator build (a plain C++17 compiler) and
 * kernels compiled at run time by NVRTC, which has no C++ standard library:
 * so this header includes only <stdint.h> (src/rtc/ provides it to NVRTC)
 * and spells the two traits it needs (IsSame, IsInteger) itself.
 */
#ifndef MT_TYPED_DIMS_H
#define MT_TYPED_DIMS_H

#include <stdint.h>

/* Like indexing.h's MT_HD (host and device under nvcc and NVRTC, inline
 * elsewhere), but never `static`: these are also member functions. */
#if defined(__CUDACC__)
#define TD_HD __host__ __device__ __forceinline__
#else
#define TD_HD inline
#endif

namespace td {

template <class A, class B>
struct IsSame {
    static constexpr bool value = false;
};
template <class A>
struct IsSame<A, A> {
    static constexpr bool value = true;
};

/* ---- dimensions ------------------------------------------------------------
 * An index along dimension D. D derives from Dim<D> (TD_DIMENSION below), so
 * that the operators, written once here for every Dim<D>, return a D and
 * need both operands to have the same D: `I + K` finds no operator (the
 * compiler says the D it deduced from each side conflict). There is no
 * conversion to a plain integer: `.v` says where the number leaves the type
 * system. A plain integer is an offset along whichever dimension it is added
 * to (i + 1 is the next row); a product of two indices has no meaning. */
template <class D>
struct Dim {
    using dim = D; /* the dimension a view looks this coordinate up by */
    int64_t v;

    TD_HD D &self() { return static_cast<D &>(*this); }
    TD_HD D &operator+=(int64_t n) { v += n; return self(); }
    TD_HD D &operator-=(int64_t n) { v -= n; return self(); }
    TD_HD D &operator++() { ++v; return self(); }
};

/* Declares dimension Name: `TD_DIMENSION(I);` An I is built explicitly,
 * I{5} or I(n), never converted silently from an int. */
#define TD_DIMENSION(Name)                                                    \
    struct Name : ::td::Dim<Name> {                                           \
        TD_HD constexpr Name() : ::td::Dim<Name>{0} {}                       \
        TD_HD constexpr explicit Name(int64_t value) : ::td::Dim<Name>{value} {} \
    }

template <class D> TD_HD D operator+(const Dim<D> &a, int64_t n) { return D(a.v + n); }
template <class D> TD_HD D operator+(int64_t n, const Dim<D> &a) { return D(n + a.v); }
template <class D> TD_HD D operator-(const Dim<D> &a, int64_t n) { return D(a.v - n); }
template <class D> TD_HD D operator+(const Dim<D> &a, const Dim<D> &b) { return D(a.v + b.v); }
template <class D> TD_HD D operator-(const Dim<D> &a, const Dim<D> &b) { return D(a.v - b.v); }
template <class D> TD_HD bool operator<(const Dim<D> &a, const Dim<D> &b) { return a.v < b.v; }
template <class D> TD_HD bool operator<=(const Dim<D> &a, const Dim<D> &b) { return a.v <= b.v; }
template <class D> TD_HD bool operator>(const Dim<D> &a, const Dim<D> &b) { return a.v > b.v; }
template <class D> TD_HD bool operator>=(const Dim<D> &a, const Dim<D> &b) { return a.v >= b.v; }
template <class D> TD_HD bool operator==(const Dim<D> &a, const Dim<D> &b) { return a.v == b.v; }
template <class D> TD_HD bool operator!=(const Dim<D> &a, const Dim<D> &b) { return a.v != b.v; }

/* ---- folded dimensions -----------------------------------------------------
 * Fold<D, N>: index d of D as the pair (outer, inner) with d = outer * N +
 * inner and 0 <= inner < N. Kernels fold all the time without saying so: a
 * row is (row tile, row within the tile); a float4 layout splits the
 * contiguous dimension into (vector, lane); an interleaved layout stores
 * K as K/8 x M x 8 ("K8 x K"). The inner part is an int (it is small) and
 * the outer an int64_t, as a hand-written kernel would have them. */
template <class D, int N>
struct Fold {
    static_assert(N > 0, "a fold of at least one element");
    using dim = D;
    static constexpr int size = N;
    int64_t outer;
    int64_t inner; /* 0 <= inner < N */

    TD_HD D logical() const { return D(outer * N + inner); }
};

/* (q, r) with n = q * N + r and 0 <= r < N, also for negative n (C's / and %
 * round towards zero: -1 / 8 is 0, where the fold needs -1 and 7). */
template <int N>
TD_HD void floor_split(int64_t n, int64_t *q, int64_t *r)
{
    int64_t qq = n / N, rr = n % N;
    if (rr < 0) {
        rr += N;
        qq -= 1;
    }
    *q = qq;
    *r = rr;
}

/* d as a Fold<D, N>: td::fold<8>(k). */
template <int N, class D>
TD_HD Fold<D, N> fold(const Dim<D> &d)
{
    Fold<D, N> f;
    floor_split<N>(d.v, &f.outer, &f.inner);
    return f;
}

/* An offset added to a folded coordinate carries across the fold: with
 * N = 8, (0, 6) + 3 is (1, 1), and (1, 1) - 3 is (0, 6). The carry costs a
 * division and a remainder (shifts for a power of two); a kernel that knows
 * its offset stays inside the fold builds the coordinate from its parts,
 * Fold<D, N>{f.outer, f.inner + i}, and pays nothing. */
template <class D, int N>
TD_HD Fold<D, N> operator+(const Fold<D, N> &f, int64_t n)
{
    Fold<D, N> g;
    floor_split<N>(f.inner + n, &g.outer, &g.inner);
    g.outer += f.outer;
    return g;
}
template <class D, int N>
TD_HD Fold<D, N> operator-(const Fold<D, N> &f, int64_t n) { return f + (-n); }
template <class D, int N>
TD_HD bool operator==(const Fold<D, N> &a, const Fold<D, N> &b) { return a.outer == b.outer && a.inner == b.inner; }
template <class D, int N>
TD_HD bool operator!=(const Fold<D, N> &a, const Fold<D, N> &b) { return !(a == b); }
/* A folded coordinate against a bound of its dimension (i < end_i). */
template <class D, int N>
TD_HD bool operator<(const Fold<D, N> &f, const Dim<D> &end) { return f.logical() < end; }
template <class D, int N>
TD_HD bool operator>=(const Fold<D, N> &f, const Dim<D> &end) { return !(f < end); }

/* A compound index: the grid's position along D folded into one coordinate,
 * block `block` of N elements and element `within` of that block. The typed
 * form of `blockIdx.y * N + threadIdx.y`: the tile size is in the type, and
 * the pair keeps both parts for the shared-memory tile, which needs only the
 * inner one. */
template <class F>
TD_HD F compound(int64_t block, int within)
{
    return F{block, within};
}

/* ---- strides and views -----------------------------------------------------
 * Stride<D>: how far apart (in elements) neighbours along D are. A view's
 * position is the sum over its dimensions of coordinate times stride, each
 * product between a D coordinate and a D stride only.
 * Stride<Fold<D, N>>: a layout that stores D folded, the outer and inner
 * parts each with their own stride. A shared-memory tile is one: it holds the
 * block's current tile of D, whichever tile that is, so its outer stride is
 * 0 and it reads only the inner part of a coordinate (tile_stride). */
template <class A>
struct Stride {
    int64_t s;
};
template <class D, int N>
struct Stride<Fold<D, N>> {
    int64_t outer;
    int64_t inner;
};

template <class F>
TD_HD Stride<F> tile_stride(int64_t inner)
{
    return Stride<F>{0, inner};
}

/* The position of coordinate c along an axis, one overload per pairing of a
 * plain or folded axis with a plain or folded coordinate. A D axis and a
 * coordinate of another dimension match none of them. */
template <class D>
TD_HD int64_t offset(const Stride<D> &s, const Dim<D> &c) { return c.v * s.s; }
template <class D, int N>
TD_HD int64_t offset(const Stride<D> &s, const Fold<D, N> &c) { return c.logical().v * s.s; }
/* A folded layout subscripted in the logical dimension: folded here. */
template <class D, int N>
TD_HD int64_t offset(const Stride<Fold<D, N>> &s, const Dim<D> &c)
{
    const Fold<D, N> f = fold<N>(c);
    return f.outer * s.outer + f.inner * s.inner;
}
template <class D, int N>
TD_HD int64_t offset(const Stride<Fold<D, N>> &s, const Fold<D, N> &c) { return c.outer * s.outer + c.inner * s.inner; }
/* ... and by a coordinate folded another way: through the logical index. */
template <class D, int N, int M>
TD_HD int64_t offset(const Stride<Fold<D, N>> &s, const Fold<D, M> &c) { return offset(s, c.logical()); }

/* The coordinate of dimension D among a subscript's coordinates: the first
 * whose ::dim is D; the others are ignored (this is the projection of a
 * coordinate set onto a view with fewer dimensions). None at all is an
 * error naming the missing dimension in the compiler's instantiation
 * trace. */
template <class D>
struct Missing {}; /* what pick finds for D when nothing is there */
template <class D>
TD_HD auto pick()
{
    static_assert(sizeof(D) == 0, "typed_dims: the subscript has no coordinate of one of the view's dimensions");
    return Missing<D>{};
}
/* The dimension of coordinate type C; a plain integer has none. */
template <class C> struct IsInteger { static constexpr bool value = false; };
template <> struct IsInteger<int> { static constexpr bool value = true; };
template <> struct IsInteger<unsigned> { static constexpr bool value = true; };
template <> struct IsInteger<long> { static constexpr bool value = true; };
template <> struct IsInteger<long long> { static constexpr bool value = true; };
template <class C, bool = IsInteger<C>::value>
struct DimOf {
    using type = typename C::dim;
};
template <class C>
struct DimOf<C, true> {
    static_assert(sizeof(C) == 0, "typed_dims: a view is subscripted by typed coordinates (I{3}), not by plain integers");
    using type = void;
};

template <class D, class C, class... Cs>
TD_HD auto pick(const C &c, const Cs &...cs)
{
    if constexpr (IsSame<typename DimOf<C>::type, D>::value)
        return c;
    else
        return pick<D>(cs...);
}

/* A set of coordinates of distinct dimensions, e.g. one (i, j, k) of a
 * product: `const auto at = td::coords(i, j, k);` then A[at] reads A(i, k). */
template <class C>
struct Slot {
    C c;
};
template <class... C>
struct Coords : Slot<C>... {
    TD_HD explicit Coords(const C &...c) : Slot<C>{c}... {}
};
template <class... C>
TD_HD Coords<C...> coords(const C &...c)
{
    return Coords<C...>(c...);
}
/* The set's coordinate of dimension D: td::get<K>(at). */
template <class D, class... C>
TD_HD auto get(const Coords<C...> &at)
{
    return pick<D>(static_cast<const Slot<C> &>(at).c...);
}

/* A tensor view: storage P (a pointer, or anything indexed like one: the
 * emulator's checked view of a __shared__ array) and one stride per axis
 * A..., each axis a dimension D or a folded Fold<D, N>. Build one with
 * td::view(data, td::Stride<I>{lda}, td::Stride<K>{1}). */
template <class P, class... A>
struct View : Stride<A>... {
    P data;

    TD_HD View(P d, const Stride<A> &...s) : Stride<A>(s)..., data(d) {}

    /* v(i, k): any order, any extra coordinates (ignored); every axis of
     * the view must be given. Returns what data[position] does (a reference). */
    template <class... C>
    TD_HD decltype(auto) operator()(const C &...c) const
    {
        return data[(int64_t(0) + ... + offset(static_cast<const Stride<A> &>(*this), pick<typename A::dim>(c...)))];
    }
    /* v[at]: the set's coordinates of the view's dimensions. */
    template <class... C>
    TD_HD decltype(auto) operator[](const Coords<C...> &at) const
    {
        return (*this)(static_cast<const Slot<C> &>(at).c...);
    }
};

template <class P, class... A>
TD_HD View<P, A...> view(P data, const Stride<A> &...s)
{
    return View<P, A...>(data, s...);
}

} /* namespace td */

#endif /* MT_TYPED_DIMS_H */
