/*
 * conv_depthwise.h: what the depthwise rung's two files share: the checks
 * (src/conv_depthwise_backward.cu) and the tiled kernel's input-gradient
 * launch (src/conv_depthwise.cu).
 */
#ifndef MT_CONV_DEPTHWISE_H
#define MT_CONV_DEPTHWISE_H

#include "conv_direct.h"

/* conv_direct_check with groups = C, and weight (C, 1, KH, KW): a channel
 * multiplier (C_out = m C) is refused with a message. */
mt_status depthwise_check(const char *func, const mt_tensor &written, const mt_tensor &in_shaped,
                          const char *in_name, const mt_tensor &w_shaped, const char *w_name,
                          const mt_tensor &out_shaped, const char *out_name, int sh, int sw, int ph, int pw, int dh,
                          int dw, DirectDims *d);

/* The dynamic shared memory of a tile's patch and taps, or 0 when over 48 KiB. */
size_t depthwise_tiled_shared_bytes(int64_t kh, int64_t kw, int sh, int sw, int dh, int dw, size_t item);

/* Whether the tiled kernel takes d's input gradient (stride 1, padding at
 * most dilation (K - 1), the patch fits), and its launch. */
bool depthwise_input_grad_tiled_takes(const DirectDims &d, size_t item);
mt_status depthwise_input_grad_tiled(const mt_tensor &grad_in, const mt_tensor &grad_out, const mt_tensor &weight,
                                     const DirectDims &d);

#endif /* MT_CONV_DEPTHWISE_H */
