/*
 * matmul.cu: batched matrix product over the last two dims,
 *     out (..., M, N) = a (..., M, K) @ b (..., K, N),
 * the leading "batch" dims broadcasting NumPy-style (a (5, M, K) times
 * b (K, N) is five products with the same b).
 *
 * The kernel ladder, one readable kernel per idea, each selectable by name
 * (mt_matmul_algo) so that bench/run.py can show what each step buys:
 *
 * Each rung is a file of its own, src/matmul_<name>.cu:
 *
 *   1 naive         one thread per output; the threads of a warp take 32
 *                   consecutive ROWS of out. Each warp load of A then touches
 *                   32 rows (32 separate memory transactions), and every
 *                   store too: uncoalesced.
 *   2 coalesced     the same work, but the threads of a warp take 32
 *                   consecutive COLUMNS: their B loads and out stores are
 *                   neighbouring addresses (one transaction per warp) and
 *                   their A load is one address for all 32 (a broadcast).
 *                   Nothing else changed; on an H100 this alone is ~7x.
 *   3 tiled         the threads of a 32 x 32 block stage 32 x 32 tiles of A
 *                   and B in shared memory and compute from there: each
 *                   element loaded from global memory is used 32 times.
 *   4 blocktile_1d  each thread computes 8 outputs of one column: one B
 *                   value loaded from shared memory serves 8 FMAs.
 *   5 blocktile_2d  each thread computes an 8 x 8 block: 4 FMAs per load.
 *   6 vectorized    as 5, with 16-byte global loads and stores.
 *   7 warptile      warp tiles, double buffering, several tile
 *                   configurations for the autotuner.
 *   8 pipelined     cp.async copies several K-tiles deep instead of
 *                   staging registers, and the fragments of the next step
 *                   loaded while this one computes.
 *
 * MT_MATMUL_DEFAULT is warptile, the fastest rung, with the library's own
 * tile choice, or the rung and tile of the configuration the caller (the
 * autotuner) passes to mt_matmul_with_config: warptile's or pipelined's.
 * For a small product whose operands warptile
 * would first have to copy (see below), the default takes blocktile_2d:
 * the copies would cost more than they save. Under the teaching kernel
 * policy (src/policy.h) the default is always tiled.
 *
 * Rungs 1-5 handle arbitrary strides (a transposed view works: element
 * (i, k) of A is at a_batch + i * stride[-2] + k * stride[-1]). Rungs 6 to 8
 * read with 16-byte loads, so they need row-major operands (warptile and
 * pipelined also take float32 column-major ones, i.e. transposed views) with
 * aligned rows;
 * any other operand is first copied into a contiguous scratch buffer whose
 * rows are padded to a multiple of 16 bytes (prepare_operand; a broadcast
 * batch dim stays broadcast and is not copied once per batch). Every rung
 * handles sizes that are not multiples of its tiles and K == 0 (the sum is
 * empty: zeros).
 *
 * Grid: x walks column tiles (row tiles for naive), y the other dimension,
 * z the output's batch ordinals. The y and z dimensions of a grid are
 * limited to 65535, so the host launches the grid in chunks, passing where
 * each chunk starts (for_each_grid_chunk).
 *
 * out must be a buffer of its own: a thread writes its output element while
 * other threads may still be reading A and B, so if out overlapped a or b
 * the result would depend on timing. mt_matmul rejects overlapping tensors.
 */
#include <limits.h>

#include "matmul_internal.h"

/* ---- host side ------------------------------------------------------------ */

/* Do small's batch dims broadcast to out's (NumPy rules on the leading
 * ndim - 2 dims)? */
static bool batch_broadcasts(const mt_tensor &small, const mt_tensor &out)
{
    const int small_batch = small.ndim - 2;
    const int out_batch = out.ndim - 2;
    if (small_batch > out_batch)
        return false;
    const int lead = out_batch - small_batch;
    for (int d = 0; d < small_batch; ++d) {
        if (small.shape[d] != 1 && small.shape[d] != out.shape[d + lead])
            return false;
    }
    return true;
}

/* Makes x readable by the vectorised kernels (gemm_operand_ok): x itself when
 * it already is, else a copy into `scratch`, row-major with each row padded
 * to a multiple of 16 bytes. A batch dim that x broadcasts (stride 0) has
 * size 1 in the copy, which still broadcasts: it is copied once, not once
 * per batch. The copy runs on the same stream before the product, and
 * scratch is freed (stream-ordered) after it. */
mt_status prepare_operand(const mt_tensor &x, bool transposed_ok, mt_tensor *view, DeviceScratch *scratch)
{
    if (gemm_operand_ok(x, transposed_ok)) {
        *view = x;
        return MT_OK;
    }
    mt_tensor src = x;
    for (int d = 0; d < src.ndim - 2; ++d) {
        if (src.strides[d] == 0)
            src.shape[d] = 1;
    }
    const size_t item = dtype_size(x.dtype);
    const int64_t width = (int64_t)(16 / item);
    const int64_t rows = src.shape[src.ndim - 2];
    const int64_t cols = src.shape[src.ndim - 1];
    mt_tensor dst = src;
    dst.offset = 0;
    dst.strides[dst.ndim - 1] = 1;
    dst.strides[dst.ndim - 2] = (cols + width - 1) / width * width;
    int64_t size = rows * dst.strides[dst.ndim - 2];
    for (int d = dst.ndim - 3; d >= 0; --d) {
        dst.strides[d] = size;
        size *= dst.shape[d];
    }
    CUDA_CHECK(scratch->allocate((size_t)(size > 0 ? size : 1) * item));
    dst.data = scratch->as<void>();
    MT_TRY(copy_tensor(dst, src));
    *view = dst;
    return MT_OK;
}

/* The rung a configuration (numbered as mt_matmul_config_name does)
 * belongs to. */
static int config_algo(int config)
{
    return config < warptile_config_count() ? MT_MATMUL_WARPTILE : MT_MATMUL_PIPELINED;
}

/* Products smaller than this (M * N * K) take the blocktile_2d kernel by
 * default when warptile would first have to copy an operand. (Not tiled:
 * under the fast policy no default path runs a kernel of the course's tasks,
 * so that a student's tiled kernel is graded by its own tests only.) */
constexpr int64_t kCopyWorthIt = (int64_t)1 << 22;

template <typename T>
static mt_status launch_matmul(int algo, int config, const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    const bool float32 = sizeof(T) == sizeof(float);
    if (algo == MT_MATMUL_DEFAULT && !mt_fast_kernels()) {
        algo = MT_MATMUL_TILED; /* the teaching policy's product (policy.h) */
    } else if (algo == MT_MATMUL_DEFAULT) {
        const int64_t M = out.shape[out.ndim - 2];
        const int64_t N = out.shape[out.ndim - 1];
        const int64_t K = a.shape[a.ndim - 1];
        const bool direct = gemm_operand_ok(a, float32) && gemm_operand_ok(b, float32);
        const int tuned = config >= 0 ? config_algo(config) : MT_MATMUL_WARPTILE; /* a configuration names its rung */
        algo = (direct || M * N * K >= kCopyWorthIt) ? tuned : MT_MATMUL_BLOCKTILE_2D;
    }
    switch (algo) {
    case MT_MATMUL_NAIVE:
        return launch_naive<T>(out, a, b);
    case MT_MATMUL_COALESCED:
        return launch_coalesced<T>(out, a, b);
    case MT_MATMUL_TILED:
        return launch_tiled<T>(out, a, b);
    case MT_MATMUL_BLOCKTILE_1D:
        return launch_blocktile_1d<T>(out, a, b);
    case MT_MATMUL_BLOCKTILE_2D:
        return launch_blocktile_2d<T>(out, a, b);
    case MT_MATMUL_BLOCKTILE_2D_TYPED:
        return launch_blocktile_2d_typed<T>(out, a, b);
    default:
        break;
    }

    /* The vectorised rungs: make the operands readable with 16-byte loads. */
    const bool transposed_ok = (algo == MT_MATMUL_WARPTILE || algo == MT_MATMUL_PIPELINED) && float32;
    return with_prepared_operands(a, b, transposed_ok, [&](const mt_tensor &a_view, const mt_tensor &b_view) {
        const int64_t M = out.shape[out.ndim - 2];
        const int64_t N = out.shape[out.ndim - 1];
        const int64_t batches = shape_numel(out.shape, out.ndim - 2);
        if (algo == MT_MATMUL_VECTORIZED)
            return launch_vectorized<T>(out, a_view, b_view);
        if (algo == MT_MATMUL_WARPTILE)
            return launch_warptile<T>(out, a_view, b_view,
                                      config < 0 ? warptile_default_config(M, N, batches, mt_sm_count(), sizeof(T))
                                                 : config);
        const int own = config < 0 ? pipelined_default_config(M, N, batches, mt_sm_count(), sizeof(T))
                                   : config - warptile_config_count();
        return launch_pipelined<T>(out, a_view, b_view, own);
    });
}

int mt_matmul_config_count(void)
{
    return warptile_config_count() + pipelined_config_count();
}

const char *mt_matmul_config_name(int config)
{
    if (config >= 0 && config < warptile_config_count())
        return warptile_config_name(config);
    return pipelined_config_name(config - warptile_config_count());
}

mt_status mt_matmul(mt_tensor out, mt_tensor a, mt_tensor b, int algo)
{
    return mt_matmul_with_config(out, a, b, algo, -1);
}

/* config is -1 (the library chooses) or a configuration of a tunable rung,
 * given with the default algo or with that rung. */
static mt_status check_config(const char *func, int algo, int config)
{
    if (config < -1 || config >= mt_matmul_config_count())
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "unknown matmul config %d (valid: -1 for the library's choice, or 0..%d)",
                       config, mt_matmul_config_count() - 1);
    if (config >= 0 && algo != MT_MATMUL_DEFAULT && algo != MT_MATMUL_WARPTILE && algo != MT_MATMUL_PIPELINED)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "matmul config %d given for algo %d, which has no configurations (only "
                       "default, warptile and pipelined do; pass -1)",
                       config, algo);
    if (config >= 0 && algo != MT_MATMUL_DEFAULT && algo != config_algo(config))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "matmul config %d (%s) belongs to the %s rung, not to algo %d (warptile's are "
                       "0..%d, pipelined's %d..%d)",
                       config, mt_matmul_config_name(config),
                       config_algo(config) == MT_MATMUL_WARPTILE ? "warptile" : "pipelined", algo,
                       warptile_config_count() - 1, warptile_config_count(), mt_matmul_config_count() - 1);
    return MT_OK;
}

/* Under the teaching policy the default product is tiled: a warptile config
 * for it is a mistake of the caller (the autotuner asks the policy first).
 * Checked after mt_ensure_init, which applies MINITENSOR_KERNELS. */
static mt_status check_default_config(const char *func, int algo, int config)
{
    if (config >= 0 && algo == MT_MATMUL_DEFAULT && !mt_fast_kernels())
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "matmul config %d given for algo default, but under the teaching kernel "
                       "policy the default product is tiled, which has no configurations (pass -1, "
                       "or name algo %s, the config's own rung)",
                       config, config_algo(config) == MT_MATMUL_WARPTILE ? "warptile" : "pipelined");
    return MT_OK;
}

/* out = a @ b is a product: at least 2 dims each, a's columns are b's rows,
 * out has the product's rows and columns, the batch dims broadcast, out
 * overlaps neither operand, and the grid can hold the tiles. */
mt_status check_product(const char *func, const mt_tensor &out, const mt_tensor &a, const mt_tensor &b)
{
    char a_shape[256];
    char b_shape[256];
    char out_shape[256];
    mt_shape_str(&a, a_shape, sizeof a_shape);
    mt_shape_str(&b, b_shape, sizeof b_shape);
    mt_shape_str(&out, out_shape, sizeof out_shape);
    const mt_tensor *operands[3] = {&a, &b, &out};
    const char *names[3] = {"a", "b", "out"};
    const char *shapes[3] = {a_shape, b_shape, out_shape};
    for (int i = 0; i < 3; ++i) {
        if (operands[i]->ndim < 2)
            return mt_fail(MT_ERR_SHAPE, func,
                           "%s has shape %s; matmul needs at least 2 dims (..., rows, cols)",
                           names[i], shapes[i]);
    }
    const int64_t M = a.shape[a.ndim - 2];
    const int64_t K = a.shape[a.ndim - 1];
    const int64_t N = b.shape[b.ndim - 1];
    if (b.shape[b.ndim - 2] != K)
        return mt_fail(MT_ERR_SHAPE, func,
                       "a has shape %s and b has shape %s: a's last dim (%lld) must equal b's "
                       "second-to-last (%lld)",
                       a_shape, b_shape, (long long)K, (long long)b.shape[b.ndim - 2]);
    if (out.shape[out.ndim - 2] != M || out.shape[out.ndim - 1] != N)
        return mt_fail(MT_ERR_SHAPE, func,
                       "out has shape %s but a of shape %s @ b of shape %s gives (..., %lld, %lld)",
                       out_shape, a_shape, b_shape, (long long)M, (long long)N);
    for (int i = 0; i < 2; ++i) {
        if (!batch_broadcasts(*operands[i], out))
            return mt_fail(MT_ERR_SHAPE, func,
                           "the batch dims of %s (shape %s) do not broadcast to those of out "
                           "(shape %s)",
                           names[i], shapes[i], out_shape);
        if (tensors_overlap(out, *operands[i]))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                           "out overlaps %s in memory; matmul reads %s while it writes out, so "
                           "out must be a separate buffer",
                           names[i], names[i]);
    }
    /* gridDim.x takes column tiles (row tiles for naive), at most 2^31 - 1;
     * the smallest tiles are those of rungs 1-3. */
    constexpr int kTile = SimpleTiles::BM;
    static_assert(SimpleTiles::BN == kTile, "square tiles");
    if ((N + kTile - 1) / kTile > INT_MAX || (M + kTile - 1) / kTile > INT_MAX)
        return mt_fail(MT_ERR_SHAPE, func, "out has shape %s: too many rows or columns for one grid",
                       out_shape);
    return MT_OK;
}

mt_status mt_matmul_with_config(mt_tensor out, mt_tensor a, mt_tensor b, int algo, int config)
{
    const char *func = "mt_matmul";
    MT_TRY(mt_check_id(func, "matmul algo", algo, MT_MATMUL_ALGO_COUNT));
    MT_TRY(check_config(func, algo, config));
    MT_TRY(mt_ensure_init(func));
    MT_TRY(check_default_config(func, algo, config));
    MT_TRY(mt_check_binary(func, &out, &a, "a", &b, "b"));
    MT_TRY(mt_check_float(func, "a", &a));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "a", &a));
    MT_TRY(mt_check_extent(func, "b", &b));
    MT_TRY(check_product(func, out, a, b));
    if (tensor_numel(out) == 0)
        return MT_OK;

    if (out.dtype == MT_FLOAT32)
        return launch_matmul<float>(algo, config, out, a, b);
    return launch_matmul<double>(algo, config, out, a, b);
}

mt_status check_tf32_device(const char *func)
{
    mt_device_caps caps;
    MT_TRY(mt_get_device_caps(&caps));
    if (caps.major < 8)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "TF32 tensor cores need compute capability 8.0 or newer; this GPU has %d.x", caps.major);
    return MT_OK;
}

/* mt_matmul_tf32, mt_matmul_tf32_rung and mt_matmul_tf32_tile, each naming
 * itself in errors; tile is the mma rung's tile variant (-1: its choice);
 * choose: the library's choice between the wgmma and mma rungs
 * (mt_matmul_tf32), else the rung named. */
static mt_status matmul_tf32_checked(const char *func, mt_tensor out, mt_tensor a, mt_tensor b, int rung, int tile,
                                     bool choose = false)
{
    if (rung != MT_TF32_SIMPLE && rung != MT_TF32_PIPELINED && rung != MT_TF32_MMA && rung != MT_TF32_WGMMA &&
        rung != MT_TF32_TMA)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "unknown TF32 rung %d (0: simple, 1: pipelined, 2: mma, 3: wgmma, 4: tma)", rung);
    if (tile < -1 || tile >= tf32_mma_tile_count())
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "unknown TF32 tile variant %d (-1 .. %d)", tile,
                       tf32_mma_tile_count() - 1);
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_binary(func, &out, &a, "a", &b, "b"));
    MT_TRY(mt_check_float(func, "a", &a));
    if (out.dtype != MT_FLOAT32)
        return mt_fail(MT_ERR_DTYPE, func, "TF32 products take float32 operands, got %s", dtype_name(out.dtype));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "a", &a));
    MT_TRY(mt_check_extent(func, "b", &b));
    MT_TRY(check_product(func, out, a, b));
    MT_TRY(check_tf32_device(func));
    if ((rung == MT_TF32_WGMMA || rung == MT_TF32_TMA) && !tf32_wgmma_available())
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "the %s rung runs on compute capability 9.0 (sm_90a) with a "
                       "library built for it", rung == MT_TF32_TMA ? "tma" : "wgmma");
    if (tensor_numel(out) == 0)
        return MT_OK;
    if (rung == MT_TF32_SIMPLE)
        return launch_tf32(out, a, b);
    /* The wgmma rung reads both operands K-major (with_k_major_operands:
     * any other layout copied into that first, b transposed), except a
     * column-major a with a row-major b (a weight gradient's dz.T @ x),
     * which its transposing stages read in place. mt_matmul_tf32 takes the
     * copying kernel where it runs and pays (tf32_wgmma_chosen), any
     * layout; else the transposing one where it reads the operands and the
     * product is large (tf32_wgmma_mn_chosen). */
    const bool wgmma_copies = choose && tf32_wgmma_chosen(out, a, b);
    if ((rung == MT_TF32_WGMMA && tf32_wgmma_mn_layout(a, b)) ||
        (choose && !wgmma_copies && tf32_wgmma_mn_chosen(out, a, b)))
        return launch_tf32_wgmma_mn(out, a, b);
    if (rung == MT_TF32_WGMMA)
        return with_k_major_operands(a, b, [&](const mt_tensor &a_view, const mt_tensor &b_view) {
            return launch_tf32_wgmma(out, a_view, b_view, -1);
        });
    if (rung == MT_TF32_TMA || wgmma_copies)
        return with_k_major_operands(a, b, [&](const mt_tensor &a_view, const mt_tensor &b_view) {
            return launch_tf32_wgmma_best(out, a_view, b_view);
        });
    /* The pipelined and mma rungs copy 16 bytes at a time: row-major
     * operands, or column-major ones (a transposed view) for the mma
     * rung's own tile choice, which has a kernel per layout; any other
     * operand is copied. */
    const bool transposed_ok = rung == MT_TF32_MMA && tile == -1;
    return with_prepared_operands(a, b, transposed_ok, [&](const mt_tensor &a_view, const mt_tensor &b_view) {
        if (rung == MT_TF32_PIPELINED)
            return launch_tf32_pipelined(out, a_view, b_view);
        return launch_tf32_mma(out, a_view, b_view, tile);
    });
}

mt_status mt_matmul_tf32(mt_tensor out, mt_tensor a, mt_tensor b)
{
    return matmul_tf32_checked("mt_matmul_tf32", out, a, b, MT_TF32_MMA, -1, true);
}

mt_status mt_matmul_tf32_rung(mt_tensor out, mt_tensor a, mt_tensor b, int rung)
{
    return matmul_tf32_checked("mt_matmul_tf32_rung", out, a, b, rung, -1);
}

int mt_matmul_tf32_tile_count(void) { return tf32_mma_tile_count(); }

const char *mt_matmul_tf32_tile_name(int tile) { return tf32_mma_tile_name(tile); }

mt_status mt_matmul_tf32_tile(mt_tensor out, mt_tensor a, mt_tensor b, int tile)
{
    return matmul_tf32_checked("mt_matmul_tf32_tile", out, a, b, MT_TF32_MMA, tile);
}
