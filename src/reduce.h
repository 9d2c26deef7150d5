/*
 * reduce.h: what src/reduce.cu (the library's reductions) and
 * src/reduce_ladder.cu (the reduction ladder) share.
 *
 * A reduction is a small struct (a "reducer"): its accumulator type Acc, the
 * type Out of out's elements, the identity, lift (an element and its index
 * -> Acc), operator() (combine two Accs), result (Acc -> the Out written).
 * The identity is what an empty row reduces to: sum 0, prod 1, max the
 * lowest value (-inf; INT64_MIN; false), min the highest. argmax/argmin have
 * no identity, so an empty row is an error, reported before any launch.
 *
 * Reducer reduce_<name> implements op <name> of MT_REDUCE_OPS (minitensor.h)
 * for elements of type T (float, double, int64_t; bool for max, min and the
 * arg reductions: reduce_takes); with_reducer turns an op id into one.
 *
 * This header declares no __shared__ arrays and launches nothing (it is not
 * passed through minitensor/cuda/_cu2emu.py, only the .cu files are).
 */
#ifndef MT_REDUCE_H
#define MT_REDUCE_H

#include <type_traits>

#include "ops_common.h"
#include "block_reduce.h" /* after ops_common.h: its stub uses task.h */

/* ---- reducers -------------------------------------------------------------- */

template <typename T>
struct reduce_sum {
    using Acc = T;
    using Out = T;
    __device__ Acc identity() const { return T(0); }
    __device__ Acc lift(T x, int64_t) const { return x; }
    __device__ Acc operator()(Acc a, Acc b) const { return a + b; }
    __device__ T result(Acc acc) const { return acc; }
};

template <typename T>
struct reduce_prod {
    using Acc = T;
    using Out = T;
    __device__ Acc identity() const { return T(1); }
    __device__ Acc lift(T x, int64_t) const { return x; }
    __device__ Acc operator()(Acc a, Acc b) const { return a * b; }
    __device__ T result(Acc acc) const { return acc; }
};

/* int64 sums and products wrap modulo 2^64 (device_math.h), as torch's do.
 * Wrapping arithmetic is associative and commutative, so every order of the
 * tree gives the same bits. */
template <>
struct reduce_sum<int64_t> {
    using Acc = int64_t;
    using Out = int64_t;
    __device__ Acc identity() const { return 0; }
    __device__ Acc lift(int64_t x, int64_t) const { return x; }
    __device__ Acc operator()(Acc a, Acc b) const { return wrap_add(a, b); }
    __device__ int64_t result(Acc acc) const { return acc; }
};

template <>
struct reduce_prod<int64_t> {
    using Acc = int64_t;
    using Out = int64_t;
    __device__ Acc identity() const { return 1; }
    __device__ Acc lift(int64_t x, int64_t) const { return x; }
    __device__ Acc operator()(Acc a, Acc b) const { return wrap_mul(a, b); }
    __device__ int64_t result(Acc acc) const { return acc; }
};

/* max and min let NaN win (mt_max, mt_min), as NumPy and PyTorch do. On
 * bool they are any and all. */
template <typename T>
struct reduce_max {
    using Acc = T;
    using Out = T;
    __device__ Acc identity() const { return mt_lowest<T>(); }
    __device__ Acc lift(T x, int64_t) const { return x; }
    __device__ Acc operator()(Acc a, Acc b) const { return mt_max(a, b); }
    __device__ T result(Acc acc) const { return acc; }
};

template <typename T>
struct reduce_min {
    using Acc = T;
    using Out = T;
    __device__ Acc identity() const { return mt_highest<T>(); }
    __device__ Acc lift(T x, int64_t) const { return x; }
    __device__ Acc operator()(Acc a, Acc b) const { return mt_min(a, b); }
    __device__ T result(Acc acc) const { return acc; }
};

/* An argmax candidate: a value and where it was found. */
template <typename T>
struct ValueIndex {
    T value;
    int64_t index;
};

/* argmax (kMax true) or argmin. The tree combines candidates in no fixed
 * order, so the combine must itself pick "the first best" to be order-free:
 * a NaN beats every number (NumPy and PyTorch report the first NaN), then the
 * better value wins, and between equal values the smaller index wins. The
 * identity (the worst value, -inf or INT64_MIN or false for argmax, with the
 * largest possible index) loses to, or ties and then loses to, every real
 * element. out holds the index, as int64 whatever the dtype of in. */
template <typename T, bool kMax>
struct ReduceArg {
    using Acc = ValueIndex<T>;
    using Out = int64_t;
    __device__ Acc identity() const
    {
        return Acc{kMax ? mt_lowest<T>() : mt_highest<T>(), INT64_MAX};
    }
    __device__ Acc lift(T x, int64_t index) const { return Acc{x, index}; }
    __device__ Acc operator()(Acc a, Acc b) const
    {
        bool a_nan = mt_isnan(a.value);
        bool b_nan = mt_isnan(b.value);
        if (a_nan != b_nan)
            return a_nan ? a : b;
        if (!a_nan && a.value != b.value) {
            bool a_better = kMax ? a.value > b.value : a.value < b.value;
            return a_better ? a : b;
        }
        return a.index < b.index ? a : b;
    }
    __device__ int64_t result(Acc acc) const { return acc.index; }
};

template <typename T>
using reduce_argmax = ReduceArg<T, true>;
template <typename T>
using reduce_argmin = ReduceArg<T, false>;

/* acc combined with x, element k of the row, when every index acc holds is
 * smaller than k (a thread walking its share of a row in order, from the
 * identity). The arg reducers' last rule (the smaller index wins a tie) then
 * always keeps acc, so x wins only when it is strictly better, or the first
 * NaN, or acc is still the identity (index INT64_MAX, which every element
 * beats): fewer instructions per element than the full, order-free combine
 * in the loops that read the row. Other reducers: the combine itself. */
template <typename T, typename R>
MT_DEVICE typename R::Acc fold_next(const R &reducer, typename R::Acc acc, T x, int64_t k)
{
    constexpr bool kArgMax = std::is_base_of<ReduceArg<T, true>, R>::value;
    constexpr bool kArgMin = std::is_base_of<ReduceArg<T, false>, R>::value;
    if constexpr (kArgMax || kArgMin) {
        const bool better = kArgMax ? x > acc.value : x < acc.value;
        const bool take = mt_isnan(x) ? !mt_isnan(acc.value) : better || acc.index == INT64_MAX;
        return take ? typename R::Acc{x, k} : acc;
    } else {
        return reducer(acc, reducer.lift(x, k));
    }
}

/* ---- where a row's result goes ----------------------------------------------
 *
 * Every kernel writes a row's result with store_result(reducer, out, pos,
 * acc): out[pos] = reducer.result(acc), out being the first element of the
 * output tensor's memory or of its first element, pos counted from there. */
template <typename R>
MT_DEVICE void store_result(const R &reducer, typename R::Out *out, int64_t pos, typename R::Acc acc)
{
    out[pos] = reducer.result(acc);
}

/* torch's max(dim) / min(dim): the argmax candidate, and so one pass over
 * the row, but both halves of it written: the index to `out` (the indices
 * tensor, int64) and the value to the values tensor, which has the same
 * strides, so the element at out[pos] has its value at the same distance
 * from values_first as out + pos is from indices_first. */
template <typename T, bool kMax>
struct ReduceWithIndex : ReduceArg<T, kMax> {
    int64_t *indices_first;
    T *values_first;
};

template <typename T, bool kMax>
MT_DEVICE void store_result(const ReduceWithIndex<T, kMax> &reducer, int64_t *out, int64_t pos, ValueIndex<T> acc)
{
    out[pos] = acc.index;
    reducer.values_first[(out + pos) - reducer.indices_first] = acc.value;
}

/* The argmax candidate through a warp shuffle: its two fields one by one
 * (found by argument-dependent lookup from warp_reduce in block_reduce.h). */
template <typename T>
MT_DEVICE ValueIndex<T> shfl_down(ValueIndex<T> v, int delta)
{
    v.value = __shfl_down_sync(0xffffffffu, v.value, delta);
    v.index = (int64_t)__shfl_down_sync(0xffffffffu, (long long)v.index, delta);
    return v;
}

/* Which ops each element type takes: the dtype rule of each op in
 * MT_REDUCE_OPS (minitensor.h); bool has no sum or prod (the Python layer
 * sums bools as int64). */
#define MT_REDUCE_DTYPES_(id, name, dtypes) dtypes,
static constexpr const char *kReduceDtypes[] = {MT_REDUCE_OPS(MT_REDUCE_DTYPES_)};
#undef MT_REDUCE_DTYPES_

template <typename T>
constexpr bool reduce_takes(int op)
{
    return mt_rule_takes<T>(kReduceDtypes[op]);
}

/* op id -> reducer: calls launch(reduce_<name><T>{}) for the op of
 * MT_REDUCE_OPS (minitensor.h) with that id, and returns what it returns;
 * only the reducers T takes are instantiated. */
template <typename T, typename Launch>
mt_status with_reducer(const char *func, int op, Launch launch)
{
    switch (op) {
#define MT_REDUCE_CASE_(id, name, dtypes)         \
    case MT_REDUCE_##id:                          \
        if constexpr (reduce_takes<T>(MT_REDUCE_##id)) \
            return launch(reduce_##name<T>{});    \
        break;
        MT_REDUCE_OPS(MT_REDUCE_CASE_)
#undef MT_REDUCE_CASE_
    default:
        break;
    }
    /* The entry points checked the id and the dtype. */
    return mt_fail(MT_ERR_DTYPE, func, "reduce op %d has no kernel for this dtype", op);
}

/* acc combined, in order, with the elements k = first_k, first_k + step, ...
 * (< len) of a row whose element k is at row[k * stride]. Loads are issued
 * eight at a time before they are combined, so eight are in flight per
 * thread (a loop that loads and adds one element at a time waits for each
 * load); the combines still run in the order of k, so the result has the
 * same bits as the one-at-a-time loop. */
template <typename T, typename R>
MT_DEVICE typename R::Acc accumulate_strided(const T *row, int64_t first_k, int64_t step, int64_t len, int64_t stride, typename R::Acc acc, const R &reducer)
{
    constexpr int kBatch = 8;
    int64_t k = first_k;
    for (; k + (kBatch - 1) * step < len; k += kBatch * step) {
        T x[kBatch];
        MT_UNROLL for (int u = 0; u < kBatch; ++u)
            x[u] = row[(k + u * step) * stride];
        MT_UNROLL for (int u = 0; u < kBatch; ++u)
            acc = fold_next(reducer, acc, x[u], k + u * step);
    }
    for (; k < len; k += step)
        acc = fold_next(reducer, acc, row[k * stride], k);
    return acc;
}

/* Rung 4: first add during load, then the tree of rung 3 with its last five
 * levels done by warp shuffles (block_reduce_last_warp): the same additions
 * in the same order as rungs 2 and 3, so the same bits, with five barriers
 * fewer. mt_reduce's default for rows (but many short ones, which take
 * warp_rows): a teacher (or a notebook) can mirror
 * it exactly in NumPy. */

/* One rung of the reduction ladder (algo: an mt_reduce_algo other than
 * DEFAULT) for reduce op `op` of validated, non-empty tensors: out is in
 * reduced along dim, keepdim (src/reduce_ladder.cu). */
mt_status reduce_rows_variant(const char *func, int algo, int op, const mt_tensor &out, const mt_tensor &in, int dim);

/* The same rung for max(dim) / min(dim) with indices (kMax: max): the
 * values go to `values`, the indices to `indices` (mt_reduce_with_indices). */
mt_status reduce_rows_with_index_variant(const char *func, int algo, bool max, const mt_tensor &values,
                                         const mt_tensor &indices, const mt_tensor &in, int dim);

/* max / min / argmax / argmin over contiguous rows in one pass, the index
 * in 32 bits (src/reduce_index_rows.cu). index_rows_fit: does the layout
 * and dtype of `in` suit it along dim; index_rows_default_warps: the
 * library's warps a row (1, 2, 4 or 8) for it; reduce_index_rows_launch:
 * runs it on validated, non-empty tensors that fit, writing the values to
 * *values and the int64 indices to *indices (same strides), either null but
 * not both. */
bool index_rows_fit(const mt_tensor &in, int dim);
int index_rows_default_warps(const mt_tensor &in, int dim);
mt_status reduce_index_rows_launch(bool max, const mt_tensor *values, const mt_tensor *indices, const mt_tensor &in,
                                   int dim, int warps);

#endif /* MT_REDUCE_H */
