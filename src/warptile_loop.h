/*
 * warptile_loop.h: the main loop of the warptile rung (rung 7 of the matmul
 * ladder), written once for every kernel that runs it: the matmul itself
 * (src/matmul_warptile.cu, with its epilogues) and the implicit-GEMM
 * convolution (src/conv_implicit_gemm.cu), which differ only in where a
 * K-tile's operands come from and where the results go.
 *
 * A kernel declares the two shared-memory stages of each operand,
 *
 *     __shared__ __align__(16) T a_tile[2][BK][BM + kWarptilePad];   a_tile[s][k][m]
 *     __shared__ __align__(16) T b_tile[2][BK][BN + kWarptilePad];   b_tile[s][k][n]
 *
 * and passes them to warptile_main_loop with two functors of its own:
 *
 *     load_tile(t)    global memory -> the thread's staging registers, for
 *                     K-tile t (0, 1, ..., k_tiles - 1): a matrix's 16-byte
 *                     loads for the matmul, the implicit im2col gather for
 *                     the convolution; every element outside the product
 *                     (past K, past an edge, in the padding) is staged as 0;
 *     store_tile(s)   those registers -> shared stage s.
 *
 * The loop leaves each lane's sums in acc; the kernel's own epilogue then
 * stores them (WarpPlace says which outputs they are).
 *
 * Compiled as it is by nvcc and the emulator (not passed through
 * minitensor/cuda/_cu2emu.py): it declares no __shared__ arrays and launches
 * nothing. The tiles are template parameters so that the emulator's view of
 * a __shared__ array passes too, and the 16-byte shared loads go through
 * shared_pack, which the emulator checks as one access.
 */
#ifndef MT_WARPTILE_LOOP_H
#define MT_WARPTILE_LOOP_H

#include "ops_common.h"

/*
 * The block tile BM x BN is split into warp tiles WM x WN. Inside a warp the
 * 32 lanes form an 8 x 4 grid (lane / 4, lane % 4); lane (r, c) computes the
 * 4 x 4 pieces at rows  wm + im * 32 + r * 4 .. + 3  (im < WM / 32) and
 * columns  wn + in * 16 + c * 4 .. + 3  (in < WN / 16). Per k a lane loads
 * WM / 32 + WN / 16 Packs of 4 values from shared memory and does
 * (WM / 32) * (WN / 16) * 16 FMAs with them; the 8 distinct A addresses and 4
 * distinct B addresses a warp reads are contiguous, so each load is served in
 * the minimum number of shared-memory wavefronts, the rest broadcast.
 * kMinBlocks: the blocks per SM the compiler must leave room for
 * (__launch_bounds__: 2 blocks of 256 threads cap a thread at 128
 * registers; 1 lets it take up to 255, fewer warps but no spills).
 * kPrefetch: the main loop keeps two sets of fragments in registers (see
 * warptile_main_loop); off by default, so a kernel that does not ask for it
 * (the convolution's) runs the loop as before.
 */
template <int BM_, int BN_, int BK_, int WM_, int WN_, int kMinBlocks_, bool kPrefetch_ = false>
struct WarptileConfig {
    static constexpr int BM = BM_;
    static constexpr int BN = BN_;
    static constexpr int BK = BK_; /* for float; float64 halves it */
    static constexpr int WM = WM_;
    static constexpr int WN = WN_;
    static constexpr int kMinBlocks = kMinBlocks_;
    /* Fragments prefetched: step k + 1's shared-memory loads are issued
     * before step k's FMAs (warptile_main_loop's second form). */
    static constexpr bool kPrefetch = kPrefetch_;
    static constexpr int kWarps = (BM / WM) * (BN / WN);
    static constexpr int kThreads = kWarps * 32;
    static constexpr int kMIter = WM / 32; /* 4 x 4 pieces per lane along M */
    static constexpr int kNIter = WN / 16; /* ... and along N */
    static_assert(BM % WM == 0 && BN % WN == 0, "whole warp tiles");
    static_assert(WM % 32 == 0 && WN % 16 == 0, "a warp's 8 x 4 lanes cover 32 x 16 per piece");
};

/* Shared-memory padding of a row, in elements: 4 keeps rows 16-byte aligned
 * and halves the bank conflicts of the transposing stores. */
constexpr int kWarptilePad = 4;

/* The K-tile of config C for element type T: the same 64 bytes of K per
 * row, so float64 halves it and its shared memory stays within 48 KiB. */
template <typename T, typename C>
constexpr int kWarptileBk = C::BK * 4 / (int)sizeof(T);

/* float64 keeps the thread tile, whose accumulators alone take 2 registers
 * each: it gets the whole register file (one block per SM guaranteed) rather
 * than spilling. */
template <typename T, typename C>
constexpr int warptile_min_blocks()
{
    return sizeof(T) == sizeof(double) ? 1 : C::kMinBlocks;
}

/* Where this thread's outputs lie in the block tile: its warp tile's corner
 * (warp_row, warp_col) and its lane's offset in each 32 x 16 piece. Output
 * (im, in, i, j) of acc is at row warp_row + im * 32 + lane_row + i, column
 * warp_col + in * 16 + lane_col + j of the block tile. */
struct WarpPlace {
    int warp_row, warp_col, lane_row, lane_col;
};

template <typename C>
MT_DEVICE WarpPlace warp_place()
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    return WarpPlace{(warp / (C::BN / C::WN)) * C::WM, (warp % (C::BN / C::WN)) * C::WN, (lane / 4) * 4,
                     (lane % 4) * 4};
}

/* *shared_pack<V>(&tile[i][j]): the 16-byte value V at a shared address. */
#ifdef MT_EMULATOR
template <typename V, typename P>
inline auto shared_pack(P address)
{
    return ::mt_emu::shared_cast<V>(address);
}
#else
template <typename V, typename E>
MT_DEVICE V *shared_pack(E *address)
{
    return reinterpret_cast<V *>(address);
}
#endif

/* One step k of the product: a lane's fragments, WM / 32 and WN / 16 Packs
 * of 4 values, read from shared stage s with 16-byte loads (LDS.128: a
 * lane's 4 values are consecutive and every row starts 16-byte aligned). */
template <typename T, typename C, typename ATile, typename BTile>
MT_DEVICE void warptile_fragments(ATile &a_tile, BTile &b_tile, int s, int k, const WarpPlace &at,
                                  T (&a_reg)[C::kMIter][4], T (&b_reg)[C::kNIter][4])
{
    constexpr int W = Pack<T>::kWidth;
    MT_UNROLL for (int im = 0; im < C::kMIter; ++im)
        MT_UNROLL for (int v = 0; v < 4; v += W) {
            const Pack<T> p = *shared_pack<Pack<T>>(&a_tile[s][k][at.warp_row + im * 32 + at.lane_row + v]);
            MT_UNROLL for (int w = 0; w < W; ++w)
                a_reg[im][v + w] = p.v[w];
        }
    MT_UNROLL for (int in = 0; in < C::kNIter; ++in)
        MT_UNROLL for (int v = 0; v < 4; v += W) {
            const Pack<T> p = *shared_pack<Pack<T>>(&b_tile[s][k][at.warp_col + in * 16 + at.lane_col + v]);
            MT_UNROLL for (int w = 0; w < W; ++w)
                b_reg[in][v + w] = p.v[w];
        }
}

/* The outer product of one step's fragments, added to acc. */
template <typename T, typename C>
MT_DEVICE void warptile_fma(const T (&a_reg)[C::kMIter][4], const T (&b_reg)[C::kNIter][4],
                            T (&acc)[C::kMIter][C::kNIter][4][4])
{
    MT_UNROLL for (int im = 0; im < C::kMIter; ++im)
        MT_UNROLL for (int in = 0; in < C::kNIter; ++in)
            MT_UNROLL for (int i = 0; i < 4; ++i)
                MT_UNROLL for (int j = 0; j < 4; ++j)
                    acc[im][in][i][j] += a_reg[im][i] * b_reg[in][j];
}

/*
 * The loop: acc = the sum over k_tiles K-tiles of this thread's pieces.
 *
 * Double buffering: two shared-memory stages. While the warps compute on
 * stage s, each thread has already issued the global loads of the next
 * K-tile into registers (load_tile); it stores them into stage s ^ 1
 * (store_tile), and one barrier per K-tile separates the two uses of each
 * stage. The loop count is the same for every thread of the block, so all
 * reach each barrier. With k_tiles 0, acc is zeros.
 *
 * Two forms of the K-tile's steps:
 *  - C::kPrefetch false: each step loads its fragments, then does its FMAs
 *    (the compiler may move loads earlier as registers allow); the store
 *    and the barrier come after the last step.
 *  - C::kPrefetch true: two sets of fragments. Step k's FMAs run on set
 *    k % 2 while the loads of step k + 1 fill the other set, so an FMA never
 *    waits for the load just before it, which matters most when a scheduler
 *    has a single warp to issue from (one block of 4 warps per SM). The
 *    store and the barrier move before the last step: by then every warp
 *    holds the tile's last fragments in registers, so stage s is no longer
 *    read, and after the barrier step 0 of the next tile can be loaded from
 *    stage s ^ 1 while the last step's FMAs run. Costs WM / 8 + WN / 4
 *    registers a thread.
 */
template <typename T, typename C, typename ATile, typename BTile, typename Load, typename Store>
MT_DEVICE void warptile_main_loop(ATile &a_tile, BTile &b_tile, int64_t k_tiles, const WarpPlace &at,
                                  Load &&load_tile, Store &&store_tile, T (&acc)[C::kMIter][C::kNIter][4][4])
{
    constexpr int BK = kWarptileBk<T, C>;
    constexpr int MI = C::kMIter;
    constexpr int NI = C::kNIter;

    MT_UNROLL for (int im = 0; im < MI; ++im)
        MT_UNROLL for (int in = 0; in < NI; ++in)
            MT_UNROLL for (int i = 0; i < 4; ++i)
                MT_UNROLL for (int j = 0; j < 4; ++j)
                    acc[im][in][i][j] = T(0);
    if (k_tiles <= 0)
        return;

    load_tile((int64_t)0);
    store_tile(0);
    __syncthreads(); /* stage 0 is complete before anyone reads it */
    if constexpr (!C::kPrefetch) {
        for (int64_t t = 0; t < k_tiles; ++t) {
            const int s = (int)(t & 1);
            const bool more = t + 1 < k_tiles;
            if (more)
                load_tile(t + 1); /* in flight while we compute */
            MT_UNROLL for (int k = 0; k < BK; ++k) {
                T a_reg[MI][4];
                T b_reg[NI][4];
                warptile_fragments<T, C>(a_tile, b_tile, s, k, at, a_reg, b_reg);
                warptile_fma<T, C>(a_reg, b_reg, acc);
            }
            /* Stage s ^ 1 was last read in iteration t - 1, which ended with
             * the barrier below: it is free to overwrite. */
            if (more)
                store_tile(s ^ 1);
            /* Stage s ^ 1 is complete before anyone reads it (next
             * iteration), and everyone has finished reading stage s before
             * iteration t + 1 overwrites it. */
            __syncthreads();
        }
    } else {
        static_assert(BK % 2 == 0, "step 0 of every K-tile uses fragment set 0");
        T a_reg[2][MI][4];
        T b_reg[2][NI][4];
        warptile_fragments<T, C>(a_tile, b_tile, 0, 0, at, a_reg[0], b_reg[0]);
        for (int64_t t = 0; t < k_tiles; ++t) {
            const int s = (int)(t & 1);
            const bool more = t + 1 < k_tiles;
            if (more)
                load_tile(t + 1); /* in flight while we compute */
            MT_UNROLL for (int k = 0; k < BK; ++k) {
                if (k == BK - 1) {
                    /* Stage s ^ 1 was last read before the barrier of
                     * iteration t - 1 (this same point): free to overwrite.
                     * After the barrier it is complete, and nobody reads
                     * stage s again before iteration t + 1 overwrites it. */
                    if (more)
                        store_tile(s ^ 1);
                    __syncthreads();
                }
                if (k + 1 < BK)
                    warptile_fragments<T, C>(a_tile, b_tile, s, k + 1, at, a_reg[(k + 1) % 2], b_reg[(k + 1) % 2]);
                else if (more)
                    warptile_fragments<T, C>(a_tile, b_tile, s ^ 1, 0, at, a_reg[0], b_reg[0]);
                warptile_fma<T, C>(a_reg[k % 2], b_reg[k % 2], acc);
            }
        }
    }
}

#endif /* MT_WARPTILE_LOOP_H */
