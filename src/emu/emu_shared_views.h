/*
 * emu_shared_views.h: how the emulator sees __shared__ memory (part of emu.h,
 * which includes it; not a header to include on its own).
 *
 * minitensor/cuda/_cu2emu.py turns each `__shared__ T name[N]` into a view
 * declared here. The views index like the array they replace; under
 * MINITENSOR_EMU_CHECK=full every element access is checked for bounds,
 * races and reads of elements nothing wrote, and every raw address (a
 * pointer kept from &tile[i], a __shared__ struct) lands in a mapping that
 * faults, so those accesses are checked too (emu_shared.cpp).
 */
#pragma once

namespace mt_emu {

/* ---- raw addresses of shared memory (MINITENSOR_EMU_CHECK=full, x86-64) -----
 * In full mode a block's shared memory is mapped twice (emu_shared.cpp): the
 * checked views below read and write it through one mapping, the *alias*;
 * every other access (a pointer kept from &tile[i], a __shared__ struct such
 * as BlockScratch, pointer arithmetic) gets an address in the other, the
 * *raw* mapping, which is inaccessible: the access faults, and the fault
 * handler records it for the race and initialisation checks before letting
 * it through (emu_faults.cpp). to_raw and from_raw convert between the two;
 * outside full mode both mappings are one and they return their argument. */
extern uintptr_t shared_alias_lo, shared_raw_lo, shared_arena_span;
template <typename T>
inline T *to_raw(T *alias)
{
    uintptr_t a = (uintptr_t)alias;
    return a - shared_alias_lo < shared_arena_span ? (T *)(a - shared_alias_lo + shared_raw_lo) : alias;
}
template <typename T>
inline T *from_raw(T *raw)
{
    uintptr_t a = (uintptr_t)raw;
    return a - shared_raw_lo < shared_arena_span ? (T *)(a - shared_raw_lo + shared_alias_lo) : raw;
}
/* Shared bytes written by the emulator on a thread's behalf without a check
 * (a WMMA store, an unchecked asynchronous copy): initialised from now on. */
void shared_initialised(const void *p, size_t bytes);
/* Full mode: shared memory at p (the alias) read by the emulator on a
 * thread's behalf (a wgmma operand), checked as a raw access of the thread
 * at code address pc would be, without the fault. */
void shared_emulated_read(const void *p, const void *pc);

/* ---- checked shared arrays (MINITENSOR_EMU_CHECK=full) ---------------------
 * cu2emu.py declares every __shared__ array as a SharedView: an object that
 * indexes like the array (tile[i][j]) and hands out, for an element of an
 * arithmetic type, a SharedRef that records each read and write. With the
 * check off (the default), check_full is false and a view costs what the
 * plain array does (one predictable branch per access). With it on, an index
 * outside the array and an access that races with another thread's since
 * their last common barrier are kernel errors naming the array, the element,
 * the threads and the .cu lines (cu2emu rewrites `tile[` into
 * `tile(__LINE__)[` so that each access knows its line). */
extern bool check_full;
/* check_full, or MINITENSOR_EMU_INTERLEAVE: a checked read calls shared_access. */
extern bool shared_hooks;
/* MINITENSOR_EMU_INTERLEAVE: a checked read calls shared_read_done. */
extern bool interleave_reads;

/* What the checks know of one __shared__ array of the running block. */
struct SharedArrayInfo {
    const char *name;
    const char *file;
    int decl_line;
    int rank;
    size_t dims[4];
    size_t elem_size;
    unsigned char *base;
};
const SharedArrayInfo *shared_array_info(const char *name, const char *file, int line, int rank,
                                         const size_t *dims, size_t elem_size, bool dynamic);
[[noreturn]] void shared_index_error(const SharedArrayInfo *info, const void *sub, int sub_rank,
                                     long long index, size_t extent, int line);
/* line 0: the access is at code address pc (for addr2line) */
void shared_access(const SharedArrayInfo *info, const void *elem, bool write, int line, const void *pc);
/* After a checked read: with MINITENSOR_EMU_INTERLEAVE, the thread yields. */
void shared_read_done(void);
/* A vector access of `bytes` bytes at p (a load or store through a pointer
 * cast from &tile[i][j]): bounds of the whole array, alignment, and a race
 * check of every 4-byte word. */
void shared_vector_access(const SharedArrayInfo *info, const void *p, size_t bytes, bool write, int line);
/* An element of struct type read or written whole: each of its words. */
void shared_struct_access(const SharedArrayInfo *info, const void *p, size_t bytes, bool write, int line,
                          const void *pc);
/* The info of member array `member` (n elements) of the __shared__ struct
 * variable holding p. */
const SharedArrayInfo *shared_member_info(const void *p, const char *member, size_t n, size_t elem_size);

/* &tile[i][j] for a checked element: converts to T * (atomics take it so,
 * unchecked: atomics do not race), and keeps what the checks need for
 * reinterpret_cast<V *>(&tile[i][j]), which cu2emu.py rewrites into
 * shared_cast<V>(&tile[i][j]). */
template <typename T>
struct SharedPtr {
    T *p;
    const SharedArrayInfo *info;
    int line;
    /* Kept in a variable, the address is raw: its accesses fault and are checked. */
    operator T *() const { return to_raw(p); }
};

/* *shared_cast<V>(&tile[i][j]): a vector V read or written whole. */
template <typename V>
struct SharedVecRef {
    V *p;
    const SharedArrayInfo *info;
    int line;
    operator V() const
    {
        if (__builtin_expect(check_full, 0))
            shared_vector_access(info, p, sizeof(V), false, line);
        return *p;
    }
    const SharedVecRef &operator=(const V &v) const
    {
        if (__builtin_expect(check_full, 0))
            shared_vector_access(info, p, sizeof(V), true, line);
        *p = v;
        return *this;
    }
};
template <typename V>
struct SharedVecPtr {
    V *p;
    const SharedArrayInfo *info;
    int line;
    SharedVecRef<V> operator*() const { return SharedVecRef<V>{p, info, line}; }
    SharedVecRef<V> operator[](ptrdiff_t i) const { return SharedVecRef<V>{p + i, info, line}; }
    operator V *() const { return to_raw(p); }
};
template <typename V, typename E>
SharedVecPtr<V> shared_cast(SharedPtr<E> q)
{
    return SharedVecPtr<V>{reinterpret_cast<V *>(q.p), q.info, q.line};
}
/* An element of struct type, or a pointer from elsewhere: the plain cast. */
template <typename V, typename P>
V *shared_cast(P *q)
{
    return reinterpret_cast<V *>(to_raw(q));
}

/* ---- asynchronous copies into shared memory (cp.async; src/async_copy.h) --
 * A copy is queued by the thread that issues it and lands (its bytes are
 * written) only when that thread waits for its group, so a kernel that reads
 * a stage before waiting for it reads stale bytes here, as it may on a GPU.
 * In full mode the destination is checked (bounds, alignment) and counted as
 * written twice, when the copy is issued and when it lands: on a GPU the
 * write happens somewhere in between, so a reader that no barrier orders
 * after either point races with it. */
void async_copy(const SharedArrayInfo *info, void *dst, const void *src, size_t bytes, size_t src_bytes, int line);
void async_commit(void);
void async_wait(int prior);
template <typename T>
void async_copy_to(SharedPtr<T> dst, const void *src, size_t bytes, size_t src_bytes)
{
    async_copy(dst.info, dst.p, src, bytes, src_bytes, dst.line);
}
inline void async_copy_to(void *dst, const void *src, size_t bytes, size_t src_bytes)
{
    async_copy(nullptr, from_raw(dst), src, bytes, src_bytes, 0);
}

/* ---- mbarriers and TMA copies (src/tma.h; emu_tma.cpp) ---------------------
 * A barrier's state is kept beside the block (its 8 bytes are not used); a
 * TMA copy is queued on the barrier it signals and lands when a thread first
 * waits on that barrier. tma_describe writes the emulator's tensor map. */
void mbarrier_init(void *bar, unsigned count);
void mbarrier_arrive(void *bar, unsigned tx_bytes);
void mbarrier_wait(void *bar, unsigned parity);
void tma_describe(uint64_t *words, const float *data, int64_t rows, int64_t cols, int64_t ld, int64_t batches,
                  int64_t batch_ld, int box_rows, int box_cols);
void tma_load(float *dst, const uint64_t *words, int col, int row, int z, void *bar);

template <typename T>
struct SharedRef {
    T *p;
    const SharedArrayInfo *info;
    int line;
    const void *pc; /* where it is used, when line is 0 */
    void check(bool write) const
    {
        if constexpr (std::is_arithmetic<T>::value)
            shared_access(info, p, write, line, pc);
        else
            shared_struct_access(info, p, sizeof(T), write, line, pc);
    }
    operator T() const
    {
        if (__builtin_expect(shared_hooks, 0)) {
            check(false);
            T v = *p;
            if (interleave_reads)
                shared_read_done();
            return v;
        }
        return *p;
    }
    const SharedRef &operator=(const T &v) const
    {
        if (__builtin_expect(check_full, 0))
            check(true);
        *p = v;
        return *this;
    }
    const SharedRef &operator=(const SharedRef &o) const { return *this = (T)o; }
    template <typename U> const SharedRef &operator+=(U v) const { return *this = (T)(T(*this) + v); }
    template <typename U> const SharedRef &operator-=(U v) const { return *this = (T)(T(*this) - v); }
    template <typename U> const SharedRef &operator*=(U v) const { return *this = (T)(T(*this) * v); }
    template <typename U> const SharedRef &operator/=(U v) const { return *this = (T)(T(*this) / v); }
    const SharedRef &operator++() const { return *this = (T)(T(*this) + 1); }
    const SharedRef &operator--() const { return *this = (T)(T(*this) - 1); }
    T operator++(int) const { T old = *this; *this = (T)(old + 1); return old; }
    T operator--(int) const { T old = *this; *this = (T)(old - 1); return old; }
    /* The address: accesses through it are not seen, except the vector
     * loads and stores of shared_cast (atomics on shared memory are no
     * races anyway). */
    SharedPtr<T> operator&() const { return SharedPtr<T>{p, info, line}; }
};

template <typename A>
struct SharedView;

template <typename E>
struct SharedElem {
    /* Every element is read and written whole through a SharedRef (a
     * struct's words all at once: its members are not reached one by one,
     * which is all the library's kernels do with one). */
    using type = SharedRef<E>;
    static type make(E *p, const SharedArrayInfo *info, int line) { return SharedRef<E>{p, info, line, nullptr}; }
};
template <typename E, size_t M>
struct SharedElem<E[M]> {
    using type = SharedView<E[M]>;
    static type make(E (*p)[M], const SharedArrayInfo *info, int line) { return type{p, info, line, M}; }
};

template <typename I>
constexpr bool negative_index(I i)
{
    if constexpr (std::is_signed<I>::value)
        return i < 0;
    else
        return false;
}

/* A view of an array A = E[N] (E maybe an array itself); extent is N, or
 * for a dynamic array (E[]) the number of elements the launch gave. */
template <typename E, size_t N>
struct SharedView<E[N]> {
    E (*p)[N];
    const SharedArrayInfo *info;
    int line;
    size_t extent;
    template <typename I>
    typename SharedElem<E>::type operator[](I i) const
    {
        if (__builtin_expect(check_full, 0) && (negative_index(i) || (size_t)i >= extent))
            shared_index_error(info, p, (int)std::rank<E[N]>::value, (long long)i, extent, line);
        return SharedElem<E>::make(&(*p)[i], info, line);
    }
    SharedView operator()(int at) const { return SharedView{p, info, at, extent}; }
    operator E *() const { return to_raw(*p); }
};

template <typename A>
SharedView<A> shared_array(const char *name, const char *file, int line)
{
    static_assert(std::rank<A>::value >= 1 && std::rank<A>::value <= 4, "__shared__ arrays of rank 1 to 4");
    void *mem = block_shared_alloc(name, nullptr, file, line, sizeof(A));
    const SharedArrayInfo *info = nullptr;
    if (check_full) {
        size_t dims[4] = {std::extent<A, 0>::value, std::extent<A, 1>::value, std::extent<A, 2>::value,
                          std::extent<A, 3>::value};
        info = shared_array_info(name, file, line, (int)std::rank<A>::value, dims,
                                 sizeof(typename std::remove_all_extents<A>::type), false);
    }
    return SharedView<A>{static_cast<A *>(mem), info, line, std::extent<A, 0>::value};
}

/* The member array of a __shared__ struct that the library declares
 * (BlockScratch's `slot`, src/block_reduce.h, under MT_EMULATOR): slot[i] is
 * checked as an element of a __shared__ array is; the array itself decays to
 * its raw address (a pointer kept from it is checked through the MMU). */
template <typename E, size_t N>
struct SharedSlots {
    E data[N];
    template <typename I>
    SharedRef<E> operator[](I i)
    {
        static_assert(std::is_integral<I>::value, "an index");
        if (__builtin_expect(check_full, 0))
            return checked((long long)i);
        return SharedRef<E>{from_raw(&data[0]) + i, nullptr, 0, nullptr};
    }
    /* Not inlined, so that its return address is a place in the caller
     * (src/block_reduce.h is not rewritten by cu2emu.py to pass __LINE__):
     * addr2line names that line in a message. */
    [[gnu::noinline]] SharedRef<E> checked(long long i)
    {
        E *alias = from_raw(&data[0]);
        /* within the call instruction: its line is the caller's */
        const void *pc = static_cast<const char *>(__builtin_return_address(0)) - 1;
        const SharedArrayInfo *info = shared_member_info(alias, "slot", N, sizeof(E));
        if (i < 0 || (unsigned long long)i >= N)
            shared_index_error(info, alias, 1, i, N, 0);
        return SharedRef<E>{alias + i, info, 0, pc};
    }
    operator E *() { return data; }
};

/* extern __shared__ T name[]: viewed as T[huge], with the launch's size.
 * Huge but below 2**31: GCC 12 does not match SharedView<E[N]> to an array
 * type whose bound is 2**31 or more (the view would be an incomplete type). */
constexpr size_t kDynamicExtent = (size_t)1 << 30;
size_t dynamic_shared_bytes(void);
template <typename T>
SharedView<T[kDynamicExtent]> dynamic_shared_array(const char *name, const char *file, int line)
{
    size_t n = dynamic_shared_bytes() / sizeof(T);
    const SharedArrayInfo *info = nullptr;
    if (check_full) {
        size_t dims[4] = {n, 0, 0, 0};
        info = shared_array_info(name, file, line, 1, dims, sizeof(T), true);
    }
    return SharedView<T[kDynamicExtent]>{reinterpret_cast<T (*)[kDynamicExtent]>(dynamic_shared_ptr()), info,
                                         line, n};
}

/* __shared__ T name; of a struct type: the raw address (see to_raw). */
template <typename T>
T &block_shared(const char *name, const char *type, const char *file, int line)
{
    return *to_raw(static_cast<T *>(block_shared_alloc(name, type, file, line, sizeof(T))));
}
template <typename T>
T *dynamic_shared(void)
{
    return to_raw(static_cast<T *>(dynamic_shared_ptr()));
}

} /* namespace mt_emu */
