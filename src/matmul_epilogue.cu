/*
 * matmul_epilogue.cu: mt_matmul_epilogue, out = act(a @ b + bias) + residual
 * in one kernel, the rung beside the unfused chain a transformer block
 * would otherwise run (a matmul, a broadcast add of the bias, an activation,
 * a residual add: four passes over the M x N output where one suffices).
 *
 * There is no new main loop here. The warptile and pipelined kernels
 * (rungs 7 and 8, src/matmul_warptile.cu, src/matmul_pipelined.cu) take
 * their store as a template parameter; this file launches them with
 * BiasActResidual (src/matmul_epilogue.h) instead of PlainStore, so the same
 * loop ends by adding the bias, applying the activation and adding the
 * residual to each sum while it is still in a register. The extra memory traffic is what the epilogue reads (N bias
 * values per block row, the residual) and, when asked, the pre-activation
 * it writes for the backward pass.
 *
 * Operands as mt_matmul's warptile (with_prepared_operands, shared with
 * src/matmul.cu): row-major or (float32) column-major, such as the
 * transposed weight of F.linear; any other is copied first. The tile
 * configuration is one of mt_matmul's (warptile's, then pipelined's),
 * chosen by the caller (the autotuner times them for the fused product,
 * minitensor/ops/autotune.py) or, at -1, warptile_default_config's.
 */
#include "matmul_epilogue.h"
#include "matmul_internal.h"

/* An epilogue tensor (bias, residual, pre) of out's dtype that passes the
 * descriptor and extent checks. */
static mt_status check_side(const char *func, const char *name, const mt_tensor &x, const mt_tensor &out)
{
    MT_TRY(mt_check_tensor(func, name, &x));
    MT_TRY(mt_check_same_dtype(func, &out, "out", &x, name));
    return mt_check_extent(func, name, &x);
}

/* The checks of the epilogue's tensors, after the product's own. */
static mt_status check_epilogue(const char *func, const mt_tensor &out, const mt_tensor &a, const mt_tensor &b,
                                const mt_tensor &bias, const mt_tensor &residual, const mt_tensor &pre, int flags)
{
    const int64_t N = out.shape[out.ndim - 1];
    if (flags & MT_EPILOGUE_BIAS) {
        MT_TRY(check_side(func, "bias", bias, out));
        if (bias.ndim != 1 || bias.shape[0] != N) {
            char shape[256], out_shape[256];
            mt_shape_str(&bias, shape, sizeof shape);
            mt_shape_str(&out, out_shape, sizeof out_shape);
            return mt_fail(MT_ERR_SHAPE, func, "bias has shape %s; out has shape %s, so bias must be (%lld,)", shape,
                           out_shape, (long long)N);
        }
        if (tensors_overlap(out, bias))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "out overlaps bias in memory; out must be a separate buffer");
    }
    if (flags & MT_EPILOGUE_RESIDUAL) {
        MT_TRY(check_side(func, "residual", residual, out));
        MT_TRY(mt_check_same_shape(func, &out, "out", &residual, "residual"));
        /* Each element of residual is read by the thread that then writes
         * the same element of out: exactly out is safe, a partial overlap
         * is not. */
        MT_TRY(mt_check_alias(func, &out, &residual, "residual"));
    }
    if (flags & MT_EPILOGUE_PRE) {
        MT_TRY(mt_check_output(func, "pre", &pre));
        MT_TRY(check_side(func, "pre", pre, out));
        MT_TRY(mt_check_same_shape(func, &out, "out", &pre, "pre"));
        const mt_tensor *others[5] = {&out, &a, &b, &bias, &residual};
        const char *names[5] = {"out", "a", "b", "bias", "residual"};
        const int present[5] = {1, 1, 1, flags & MT_EPILOGUE_BIAS, flags & MT_EPILOGUE_RESIDUAL};
        for (int i = 0; i < 5; ++i) {
            if (present[i] && tensors_overlap(pre, *others[i]))
                return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                               "pre overlaps %s in memory; pre must be a separate buffer", names[i]);
        }
    }
    return MT_OK;
}

/* The checks both entry points share (the config's aside). */
static mt_status check_epilogue_call(const char *func, const mt_tensor &out, const mt_tensor &a,
                                     const mt_tensor &b, const mt_tensor &bias, const mt_tensor &residual,
                                     const mt_tensor &pre, int act, int flags)
{
    MT_TRY(mt_check_id(func, "epilogue activation", act, MT_EPILOGUE_ACT_COUNT));
    if (flags & ~(MT_EPILOGUE_BIAS | MT_EPILOGUE_RESIDUAL | MT_EPILOGUE_PRE))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "unknown flags 0x%x (MT_EPILOGUE_BIAS 1, MT_EPILOGUE_RESIDUAL 2, MT_EPILOGUE_PRE 4)", flags);
    MT_TRY(mt_ensure_init(func));
    MT_TRY(mt_check_binary(func, &out, &a, "a", &b, "b"));
    MT_TRY(mt_check_float(func, "a", &a));
    MT_TRY(mt_check_extent(func, "out", &out));
    MT_TRY(mt_check_extent(func, "a", &a));
    MT_TRY(mt_check_extent(func, "b", &b));
    MT_TRY(check_product(func, out, a, b));
    return check_epilogue(func, out, a, b, bias, residual, pre, flags);
}

/* The epilogue of a call. An absent residual or pre is never touched, but
 * the epilogue reads out's bounds from their shapes: out's descriptor
 * stands in. */
template <typename T>
static BiasActResidual<T> make_epilogue(const mt_tensor &out, const mt_tensor &bias, const mt_tensor &residual,
                                        const mt_tensor &pre, int act, int flags)
{
    BiasActResidual<T> epi;
    epi.bias = bias;
    epi.residual = (flags & MT_EPILOGUE_RESIDUAL) ? residual : out;
    epi.pre = (flags & MT_EPILOGUE_PRE) ? pre : out;
    epi.act = act;
    epi.flags = flags;
    return epi;
}

template <typename T>
static mt_status launch_epilogue(const mt_tensor &out, const mt_tensor &a, const mt_tensor &b,
                                 const mt_tensor &bias, const mt_tensor &residual, const mt_tensor &pre, int act,
                                 int flags, int config)
{
    const BiasActResidual<T> epi = make_epilogue<T>(out, bias, residual, pre, act, flags);

    /* The operands as mt_matmul's warptile takes them (float32 may be a
     * transposed view, such as F.linear's weight.T). */
    return with_prepared_operands(a, b, sizeof(T) == sizeof(float), [&](const mt_tensor &a_view,
                                                                        const mt_tensor &b_view) {
        const int64_t M = out.shape[out.ndim - 2];
        const int64_t N = out.shape[out.ndim - 1];
        const int64_t batches = shape_numel(out.shape, out.ndim - 2);
        if (config < 0)
            return launch_warptile_epilogue<T>(out, a_view, b_view,
                                               warptile_default_config(M, N, batches, mt_sm_count(), sizeof(T)), epi);
        if (config < warptile_config_count())
            return launch_warptile_epilogue<T>(out, a_view, b_view, config, epi);
        return launch_pipelined_epilogue<T>(out, a_view, b_view, config - warptile_config_count(), epi);
    });
}

mt_status mt_matmul_tf32_epilogue(mt_tensor out, mt_tensor a, mt_tensor b, mt_tensor bias, mt_tensor residual,
                                  mt_tensor pre, int act, int flags)
{
    const char *func = "mt_matmul_tf32_epilogue";
    MT_TRY(check_epilogue_call(func, out, a, b, bias, residual, pre, act, flags));
    if (out.dtype != MT_FLOAT32)
        return mt_fail(MT_ERR_DTYPE, func, "TF32 products take float32 operands, got %s", dtype_name(out.dtype));
    MT_TRY(check_tf32_device(func));
    if (tensor_numel(out) == 0)
        return MT_OK;
    const BiasActResidual<float> epi = make_epilogue<float>(out, bias, residual, pre, act, flags);
    /* The wgmma rung where mt_matmul_tf32 takes it, its operands made
     * K-major (copied where they are not); else the mma rung, which reads
     * row-major or column-major operands in place and copies any other. */
    if (tf32_wgmma_chosen(out, a, b))
        return with_k_major_operands(a, b, [&](const mt_tensor &a_view, const mt_tensor &b_view) {
            if (tf32_tma_operands_ok(a_view, b_view))
                return launch_tf32_tma_epilogue(out, a_view, b_view, epi);
            return launch_tf32_wgmma_epilogue(out, a_view, b_view, epi);
        });
    return with_prepared_operands(a, b, true, [&](const mt_tensor &a_view, const mt_tensor &b_view) {
        return launch_tf32_mma_epilogue(out, a_view, b_view, epi);
    });
}

int mt_matmul_epilogue_config_count(void)
{
    return mt_matmul_config_count();
}

mt_status mt_matmul_epilogue(mt_tensor out, mt_tensor a, mt_tensor b, mt_tensor bias, mt_tensor residual,
                             mt_tensor pre, int act, int flags, int config)
{
    const char *func = "mt_matmul_epilogue";
    if (config < -1 || config >= mt_matmul_config_count())
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "unknown epilogue config %d (valid: -1 for the library's choice, or a matmul "
                       "configuration 0..%d)",
                       config, mt_matmul_config_count() - 1);
    MT_TRY(check_epilogue_call(func, out, a, b, bias, residual, pre, act, flags));
    if (tensor_numel(out) == 0)
        return MT_OK;
    if (out.dtype == MT_FLOAT32)
        return launch_epilogue<float>(out, a, b, bias, residual, pre, act, flags, config);
    return launch_epilogue<double>(out, a, b, bias, residual, pre, act, flags, config);
}
