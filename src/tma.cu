/*
 * tma.cu: tensor maps for TMA copies (src/tma.h), built on the host.
 *
 * The CUDA build asks the driver to encode the map (cuTensorMapEncodeTiled).
 * The library links the runtime only, not the driver library, so the
 * function is fetched through the runtime's entry-point query, once.
 * The emulator build writes its own description into the same 128 bytes,
 * which its TMA twin reads (src/emu/emu_tma.cpp).
 */
#include "tma.h"

#ifndef MT_EMULATOR
#include <cuda.h>
#include <cudaTypedefs.h>
#endif

static_assert(sizeof(TmaMap) == 128, "a tensor map is 128 bytes");

static mt_status refuse(const char *func, int64_t rows, int64_t cols, int64_t ld, int64_t batches, int64_t batch_ld,
                        int box_rows)
{
    return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                   "a TMA map of %lld matrices of %lld x %lld floats, rows %lld and matrices %lld floats apart, in "
                   "boxes of %d rows: the address and the strides must be 16-byte multiples, sizes under 2^31, "
                   "boxes of 1 to 256 rows",
                   (long long)batches, (long long)rows, (long long)cols, (long long)ld, (long long)batch_ld,
                   box_rows);
}

#ifdef MT_EMULATOR

static bool encoder_available(void) { return true; }

mt_status tma_map_3d(const char *func, TmaMap *map, const float *data, int64_t rows, int64_t cols, int64_t ld,
                     int64_t batches, int64_t batch_ld, int box_rows)
{
    if (!tma_map_ok(data, rows, cols, ld, batches, batch_ld) || box_rows < 1 || box_rows > 256)
        return refuse(func, rows, cols, ld, batches, batch_ld, box_rows);
    *map = TmaMap{};
    ::mt_emu::tma_describe(map->words, data, rows, cols, ld, batches, batch_ld, box_rows, 32);
    return MT_OK;
}

#else

/* cuTensorMapEncodeTiled, fetched once (null: the driver has none). */
static PFN_cuTensorMapEncodeTiled_v12000 encode_function(void)
{
    static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void *fn = nullptr;
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
        const cudaError_t err =
            cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
#else
        const cudaError_t err = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &found);
#endif
        if (err != cudaSuccess || found != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError(); /* a missing symbol is an answer, not a sticky error */
            fn = nullptr;
        }
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    return encode;
}

static bool encoder_available(void) { return encode_function() != nullptr; }

mt_status tma_map_3d(const char *func, TmaMap *map, const float *data, int64_t rows, int64_t cols, int64_t ld,
                     int64_t batches, int64_t batch_ld, int box_rows)
{
    if (!tma_map_ok(data, rows, cols, ld, batches, batch_ld) || box_rows < 1 || box_rows > 256)
        return refuse(func, rows, cols, ld, batches, batch_ld, box_rows);
    const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_function();
    if (!encode)
        return mt_fail(MT_ERR_CUDA, func, "the CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12)");
    /* dim 0 is the contiguous one (columns), dim 1 the rows, dim 2 the
     * matrices; the strides list every dim but the first, in bytes */
    const cuuint64_t dims[3] = {(cuuint64_t)cols, (cuuint64_t)rows, (cuuint64_t)batches};
    const cuuint64_t strides[2] = {(cuuint64_t)ld * sizeof(float), (cuuint64_t)batch_ld * sizeof(float)};
    const cuuint32_t box[3] = {32, (cuuint32_t)box_rows, 1}; /* 32 floats: the 128-byte swizzle's row */
    const cuuint32_t steps[3] = {1, 1, 1};
    const CUresult r = encode(reinterpret_cast<CUtensorMap *>(map), CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3,
                              const_cast<float *>(data), dims, strides, box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return mt_fail(MT_ERR_CUDA, func, "cuTensorMapEncodeTiled failed (CUresult %d) for %lld matrices of %lld x "
                       "%lld floats, rows %lld apart", (int)r, (long long)batches, (long long)rows, (long long)cols,
                       (long long)ld);
    return MT_OK;
}

#endif /* MT_EMULATOR */

/* The limits of a tiled map with 4-byte elements (and a driver that
 * encodes one): the address and the strides 16-byte multiples, every size under 2^31 elements (the
 * coordinates are 32-bit), the strides under 2^40 bytes. */
bool tma_map_ok(const float *data, int64_t rows, int64_t cols, int64_t ld, int64_t batches, int64_t batch_ld)
{
    if (!encoder_available())
        return false;
    const int64_t limit = (int64_t)1 << 31, stride_limit = (int64_t)1 << 38; /* floats: 2^40 bytes */
    return (uintptr_t)data % 16 == 0 && ld % 4 == 0 && batch_ld % 4 == 0 && ld >= cols && rows > 0 && cols > 0 &&
           batches > 0 && rows < limit && cols < limit && batches < limit && ld < stride_limit && batch_ld > 0 &&
           batch_ld < stride_limit;
}

