/*
 * emu_tma.cpp: the emulator's shared-memory barriers (mbarrier) and TMA
 * copies, the twins of src/tma.h.
 *
 * An mbarrier counts arrivals and bytes: a phase completes when the count
 * given at its init has arrived and every byte announced with an arrive
 * (expect_tx) has landed; then the next phase starts with the same count.
 * A thread waits for the completion of the phase of a parity (0, 1, 0, ...).
 * Here each barrier's state is kept beside the block, keyed by its address,
 * and its 8 bytes of shared memory are not touched.
 *
 * A TMA copy is queued on the barrier it signals and lands (its box copied
 * into shared memory in the 128-byte swizzle, its bytes counted off) when a
 * thread first waits on that barrier: the latest moment a GPU allows. From
 * its issue to its landing the box holds NaN. So a consumer that reads a
 * stage without waiting for its barrier reads NaN (or, before the copy was
 * issued, the previous tile), and a stage refilled while products still
 * read it gives NaN products.
 *
 * A wait yields to the block's other threads between looks (a producer
 * must run for a consumer's barrier to complete) and fails once no barrier
 * of the block changed for MINITENSOR_EMU_WAIT seconds (default 30) instead
 * of hanging: a barrier whose arrivals never come is a deadlock on a GPU.
 */
#include "emu_block.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace mt_emu {

namespace {

/* What tma_describe writes into a map's 128 bytes. */
struct TmaDescription {
    uint64_t magic;
    const float *data;
    int64_t rows, cols, ld, batches, batch_ld;
    int32_t box_rows, box_cols;
};
constexpr uint64_t kTmaMagic = 0x746d615f6d617032ull; /* "tma_map2" */
static_assert(sizeof(TmaDescription) <= 128, "a description fits a tensor map");

struct TmaCopy {
    unsigned char *dst; /* the alias of the box's shared memory */
    TmaDescription map;
    int col, row, z;
};

struct Mbarrier {
    uint64_t block = 0;    /* the block (runner's serial) that initialised it */
    unsigned count = 0;    /* arrivals a phase */
    unsigned missing = 0;  /* arrivals this phase still waits for */
    long long bytes = 0;   /* announced bytes not yet landed */
    unsigned phase = 0;    /* phases completed */
    std::vector<TmaCopy> copies;
};

thread_local std::unordered_map<const void *, Mbarrier> t_barriers;
/* Counts every change of a barrier of this OS thread's blocks (an init, an
 * arrival, a landed copy): a wait fails only after the limit passed with
 * no change, which on a GPU would be a deadlock. A long wait for slow
 * threads (the full checks' emulated reads) is not one. */
thread_local uint64_t t_progress = 0;

double wait_limit_s()
{
    static const double limit = [] {
        const char *v = std::getenv("MINITENSOR_EMU_WAIT");
        const double s = v && *v ? std::atof(v) : 0.0;
        return s > 0.0 ? s : 30.0;
    }();
    return limit;
}

/* The running block's barrier at bar, which it must have initialised. */
Mbarrier &barrier_at(const void *bar, const char *what)
{
    BlockRunner &r = running();
    auto it = t_barriers.find(from_raw(bar));
    if (it == t_barriers.end() || it->second.block != r.block_serial())
        throw KernelError(format("%s: %s on an mbarrier at shared offset %td that this block never initialised "
                                 "(mbar_init)",
                                 r.where_running().c_str(), what,
                                 (const unsigned char *)from_raw(bar) - (const unsigned char *)from_raw(
                                     dynamic_shared_ptr())));
    return it->second;
}

void complete_if_done(Mbarrier &m)
{
    ++t_progress;
    if (m.missing == 0 && m.bytes == 0) {
        ++m.phase;
        m.missing = m.count;
    }
}

/* The box of copy c into shared memory, chunk by chunk: row r's 16-byte
 * chunk k at r * 128 + 16 (k ^ (r % 8)), zeros outside the matrix. */
void land(const TmaCopy &c)
{
    const TmaDescription &d = c.map;
    const int chunks = d.box_cols / 4;
    for (int r = 0; r < d.box_rows; ++r)
        for (int k = 0; k < chunks; ++k) {
            float v[4];
            const int64_t row = (int64_t)c.row + r;
            const bool inside = row >= 0 && row < d.rows && c.z >= 0 && c.z < d.batches;
            for (int e = 0; e < 4; ++e) {
                const int64_t col = (int64_t)c.col + 4 * k + e;
                v[e] = inside && col >= 0 && col < d.cols ? d.data[c.z * d.batch_ld + row * d.ld + col] : 0.0f;
            }
            const size_t offset = (size_t)r * (size_t)(4 * d.box_cols) + 16 * (size_t)(k ^ (r % 8));
            std::memcpy(c.dst + offset, v, sizeof v);
            if (check_full)
                shared_initialised(c.dst + offset, sizeof v);
        }
}

} /* namespace */

void tma_describe(uint64_t *words, const float *data, int64_t rows, int64_t cols, int64_t ld, int64_t batches,
                  int64_t batch_ld, int box_rows, int box_cols)
{
    const TmaDescription d{kTmaMagic, data, rows, cols, ld, batches, batch_ld, box_rows, box_cols};
    std::memcpy(words, &d, sizeof d);
}

void mbarrier_init(void *bar, unsigned count)
{
    BlockRunner &r = running();
    if ((uintptr_t)from_raw(bar) % 8 != 0)
        throw KernelError(format("%s: mbarrier at %p: an mbarrier is 8 bytes, 8-byte aligned",
                                 r.where_running().c_str(), bar));
    if (count == 0)
        throw KernelError(format("%s: mbarrier initialised with a count of 0 arrivals (1 to 2^20 - 1)",
                                 r.where_running().c_str()));
    Mbarrier &m = t_barriers[from_raw(bar)];
    m = Mbarrier{};
    m.block = r.block_serial();
    m.count = m.missing = count;
    ++t_progress;
}

void mbarrier_arrive(void *bar, unsigned tx_bytes)
{
    Mbarrier &m = barrier_at(bar, "arrive");
    if (m.missing == 0) {
        BlockRunner &r = running();
        throw KernelError(format("%s: more arrivals on an mbarrier than its count (%u) in one phase",
                                 r.where_running().c_str(), m.count));
    }
    m.bytes += tx_bytes;
    --m.missing;
    complete_if_done(m);
}

void tma_load(float *dst, const uint64_t *words, int col, int row, int z, void *bar)
{
    BlockRunner &r = running();
    TmaCopy c;
    std::memcpy(&c.map, words, sizeof c.map);
    if (c.map.magic != kTmaMagic)
        throw KernelError(format("%s: a TMA copy with a tensor map that tma_map_3d did not fill",
                                 r.where_running().c_str()));
    c.dst = reinterpret_cast<unsigned char *>(from_raw(dst));
    const uintptr_t origin = (uintptr_t)from_raw(dynamic_shared_ptr()) & ~(uintptr_t)1023;
    /* the 128-byte swizzle repeats every 1024 bytes: a box that starts
     * elsewhere would be swizzled against other address bits than wgmma's
     * descriptors assume */
    if (((uintptr_t)c.dst - origin) % 1024 != 0)
        throw KernelError(format("%s: a TMA copy in the 128-byte swizzle to shared offset %td: its destination "
                                 "must be 1024-byte aligned",
                                 r.where_running().c_str(), (ptrdiff_t)((uintptr_t)c.dst - origin)));
    const size_t box_bytes = (size_t)c.map.box_rows * (size_t)c.map.box_cols * sizeof(float);
    if ((size_t)(c.dst - (unsigned char *)from_raw(dynamic_shared_ptr())) + box_bytes > r.dynamic_bytes())
        throw KernelError(format("%s: a TMA copy of %zu bytes past the end of the block's %zu bytes of dynamic "
                                 "shared memory",
                                 r.where_running().c_str(), box_bytes, r.dynamic_bytes()));
    c.col = col;
    c.row = row;
    c.z = z;
    barrier_at(bar, "a TMA copy signals").copies.push_back(c);
    /* Until it lands, the box holds garbage on a GPU (the copy writes it at
     * some moment before its barrier completes): NaN here, from the issue.
     * So a stage handed back to the producer before the products that read
     * it ran (an early arrive on its "empty" barrier) gives NaN products. */
    std::memset(c.dst, 0xff, box_bytes);
}

void mbarrier_wait(void *bar, unsigned parity)
{
    using Clock = std::chrono::steady_clock;
    BlockRunner &r = running();
    const Clock::duration limit =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_limit_s()));
    Clock::time_point deadline = Clock::now() + limit;
    uint64_t seen = t_progress;
    for (unsigned spins = 0;; ++spins) {
        Mbarrier &m = barrier_at(bar, "wait");
        if (!m.copies.empty()) {
            /* land them now: the latest moment a GPU allows */
            std::vector<TmaCopy> copies;
            copies.swap(m.copies);
            for (const TmaCopy &c : copies) {
                land(c);
                m.bytes -= (long long)c.map.box_rows * c.map.box_cols * (long long)sizeof(float);
            }
            complete_if_done(m);
        }
        if ((m.phase & 1u) != (parity & 1u))
            return;
        if (spins % 1024 == 1023 && seen != t_progress) {
            seen = t_progress;
            deadline = Clock::now() + limit;
        } else if (spins % 1024 == 1023 && Clock::now() > deadline)
            throw KernelError(format("%s: waited %.0f s on an mbarrier for the phase of parity %u (it completed %u "
                                     "phases; %u arrivals and %lld bytes missing) while no barrier of the block changed: a "
                                     "deadlock on a GPU (MINITENSOR_EMU_WAIT sets the limit)",
                                     r.where_running().c_str(), wait_limit_s(), parity & 1u, m.phase, m.missing,
                                     m.bytes));
        /* let the threads that will arrive run */
        r.yield_to_next_round();
    }
}

} /* namespace mt_emu */
