/*
 * optim_multi.cu: the optimizers' update and the gradient clipping of a
 * whole list of tensors in a few launches (torch's foreach and fused
 * optimizers, apex's multi_tensor_apply).
 *
 * optim.cu updates one parameter per launch: a GPT of 78 parameters costs
 * 78 launches of adam_step a step, some of them on 384 elements, each paying
 * the host's cost of a call and the GPU's of a launch; clipping the
 * gradients cost two more launches a parameter (the factor's cast and the
 * multiply). Here the host cuts every tensor of the list into chunks of
 * kListChunk elements and writes the addresses into a struct that is passed
 * by value as the kernel's argument (a kernel's arguments may hold 4 KiB,
 * so nothing is copied to the device first and a CUDA graph can capture
 * the launch): block b of the grid works on chunk block_chunk[b] of tensor
 * block_tensor[b]. When the struct is full (kListTensors tensors or
 * kListBlocks chunks) it is launched and the next one starts, with the rest
 * of the tensor it was in, if any. One pack holds tensors of one dtype.
 *
 *   adam_step_list       Adam's (AdamW's) update of optim.h's adam_element,
 *                        each element once;
 *   count_steps          capturable: every parameter's step count + 1, on
 *                        the device, in a launch before the update reads them;
 *   norm_partials_list   each chunk's sum of squares (or largest |g|) in
 *                        double, one partial per block, in its own slot;
 *   norm_finish          one block adds the partials in a fixed order (the
 *                        same norm at every run: no atomics) -> the norm;
 *   scale_list           g *= min(max_norm / (norm + 1e-6), 1), the factor
 *                        computed from the norm on the device (torch's
 *                        clip_grad_norm_: nothing is read back).
 */
#include "block_reduce.h"
#include "combine.h"
#include "optim.h"

#include <stdio.h>
#include <string.h>

/* Elements of a tensor one block handles; tensors per launch (the struct of
 * four lists of addresses stays under the 4 KiB of kernel arguments); blocks
 * per launch. */
constexpr int64_t kListChunk = 32768;
constexpr int kListTensors = 36;
constexpr int kListBlocks = 320;
/* Threads a block of the element-wise list kernels (Adam's update, the
 * scaling), as torch's multi_tensor_apply: with at most 320 blocks a launch,
 * 256-thread blocks would fill under a third of an H100's thread slots, too
 * few loads in flight for a kernel that only moves memory. The norm's blocks
 * keep kBlockSize, the capacity of their BlockScratch. */
constexpr int kListThreads = 512;

/* The kernel argument: Depth lists of addresses (Adam: p, g, m, v), the
 * element count of each tensor, and each block's tensor and chunk. count is
 * Adam's capturable step count of each tensor (null otherwise). */
template <int Depth>
struct TensorList {
    void *addr[Depth][kListTensors];
    int64_t numel[kListTensors];
    const int64_t *count[kListTensors];
    unsigned char block_tensor[kListBlocks];
    int block_chunk[kListBlocks];
};
static_assert(sizeof(TensorList<4>) + sizeof(AdamScalars<double>) <= 4096, "kernel arguments are at most 4 KiB");
static_assert(kListTensors <= 256, "block_tensor is one byte");

/* The range [*begin, *end) of elements of this block's chunk of its tensor. */
template <int Depth>
MT_DEVICE int block_range(const TensorList<Depth> &list, int64_t *begin, int64_t *end)
{
    const int slot = list.block_tensor[blockIdx.x];
    *begin = (int64_t)list.block_chunk[blockIdx.x] * kListChunk;
    const int64_t n = list.numel[slot];
    *end = *begin + kListChunk < n ? *begin + kListChunk : n;
    return slot;
}

template <typename T>
__global__ void adam_step_list(TensorList<4> list, AdamScalars<T> s)
{
    int64_t begin, end;
    const int slot = block_range(list, &begin, &end);
    if (list.count[slot]) /* capturable: count_steps advanced it in an earlier launch */
        adam_corrections(s, *list.count[slot]);
    T *p = static_cast<T *>(list.addr[0][slot]);
    const T *g = static_cast<const T *>(list.addr[1][slot]);
    T *m = static_cast<T *>(list.addr[2][slot]);
    T *v = static_cast<T *>(list.addr[3][slot]);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
        adam_element(p, g, m, v, i, s);
}

/* Step counts per launch of count_steps: one thread each. */
constexpr int kStepsPerLaunch = 256;
struct StepList {
    int64_t *count[kStepsPerLaunch];
    int n;
};

__global__ void count_steps(StepList list)
{
    if ((int)threadIdx.x < list.n)
        *list.count[threadIdx.x] += 1;
}

/* inf_norm: the largest |g| (NaN-propagating, as torch's), else the sum of squares. */
template <typename T>
__global__ void norm_partials_list(TensorList<1> list, double *partials, int64_t first_block, int inf_norm)
{
    __shared__ BlockScratch<double> scratch;
    int64_t begin, end;
    const int slot = block_range(list, &begin, &end);
    const T *g = static_cast<const T *>(list.addr[0][slot]);
    double acc = 0.0;
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
        const double x = (double)g[i];
        acc = inf_norm ? mt_max(acc, fabs(x)) : acc + x * x;
    }
    /* Every thread calls the reduction (it holds barriers); thread 0 writes. */
    const double total = inf_norm ? block_reduce_warps(scratch, acc, 0.0, CombineMax<double>())
                                  : block_reduce_warps(scratch, acc, 0.0, CombineSum<double>());
    if (threadIdx.x == 0)
        partials[first_block + blockIdx.x] = total;
}

/* One block: thread t combines partials t, t + blockDim.x, ... in order,
 * then the block's tree; the norm (sqrt of the sum, or the max) to *norm. */
__global__ void norm_finish(const double *partials, int64_t n, double *norm, int inf_norm)
{
    __shared__ BlockScratch<double> scratch;
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        acc = inf_norm ? mt_max(acc, partials[i]) : acc + partials[i];
    const double total = inf_norm ? block_reduce_warps(scratch, acc, 0.0, CombineMax<double>())
                                  : block_reduce_warps(scratch, acc, 0.0, CombineSum<double>());
    if (threadIdx.x == 0)
        *norm = inf_norm ? total : sqrt(total);
}

/* g *= the clip factor of *norm, clamped to 1 (a factor of exactly 1 changes
 * nothing, so the kernel need not be skipped: no value is read back). */
template <typename T>
__global__ void scale_list(TensorList<1> list, const double *norm, double max_norm)
{
    int64_t begin, end;
    const int slot = block_range(list, &begin, &end);
    const double clip = max_norm / (*norm + 1e-6);
    const T factor = T(clip < 1.0 ? clip : 1.0);
    T *g = static_cast<T *>(list.addr[0][slot]);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
        g[i] *= factor;
}

/* ---- the host: packing the lists -------------------------------------------------------------------- */

static void *first_byte(const mt_tensor &t)
{
    return static_cast<char *>(t.data) + t.offset * (int64_t)dtype_size(t.dtype);
}

static int64_t chunks_of(int64_t n)
{
    return (n + kListChunk - 1) / kListChunk;
}

/* Packs lists[0..Depth)[0..count) (tensor i of list d: lists[d][i]; steps,
 * if not null, the count of each) and calls launch(pack, blocks,
 * first_block, dtype) for each full pack; first_block numbers the blocks
 * across launches. Empty tensors take no block. */
template <int Depth, typename Launch>
static mt_status for_each_pack(int64_t count, const mt_tensor *const *lists, const mt_tensor *steps, Launch launch)
{
    TensorList<Depth> pack{};
    int tensors = 0, blocks = 0;
    int64_t first_block = 0;
    int32_t dtype = -1;
    for (int64_t i = 0; i < count; ++i) {
        const int64_t n = tensor_numel(lists[0][i]);
        if (n == 0)
            continue;
        if (blocks > 0 && lists[0][i].dtype != dtype) { /* one dtype a launch: the kernel's T */
            MT_TRY(launch(pack, blocks, first_block, dtype));
            first_block += blocks;
            blocks = tensors = 0;
        }
        dtype = lists[0][i].dtype;
        const int slot = tensors++;
        for (int d = 0; d < Depth; ++d)
            pack.addr[d][slot] = first_byte(lists[d][i]);
        pack.numel[slot] = n;
        pack.count[slot] = steps ? static_cast<const int64_t *>(first_byte(steps[i])) : nullptr;
        for (int64_t chunk = 0; chunk < chunks_of(n); ++chunk) {
            pack.block_tensor[blocks] = (unsigned char)(tensors - 1);
            pack.block_chunk[blocks] = (int)chunk;
            ++blocks;
            const bool last = chunk + 1 == chunks_of(n);
            if (blocks < kListBlocks && !(last && tensors == kListTensors))
                continue;
            MT_TRY(launch(pack, blocks, first_block, dtype));
            first_block += blocks;
            blocks = 0;
            if (last) {
                tensors = 0;
            } else { /* the rest of this tensor goes on in slot 0 of the next pack */
                const int from = tensors - 1;
                for (int d = 0; d < Depth; ++d)
                    pack.addr[d][0] = pack.addr[d][from];
                pack.numel[0] = pack.numel[from];
                pack.count[0] = pack.count[from];
                tensors = 1;
            }
        }
    }
    if (blocks > 0)
        MT_TRY(launch(pack, blocks, first_block, dtype));
    return MT_OK;
}

/* The failure st of item i of a list: its message (the check's), naming the item. */
static mt_status list_failure(mt_status st, const char *func, const char *what, int64_t i)
{
    char message[512];
    snprintf(message, sizeof message, "%s", mt_last_error());
    const size_t prefix = strlen(func);
    const bool ours = strncmp(message, func, prefix) == 0 && strncmp(message + prefix, ": ", 2) == 0;
    return mt_fail(st, func, "%s %lld of the list: %s", what, (long long)i, ours ? message + prefix + 2 : message);
}

static mt_status check_count(const char *func, int64_t count, const void *first)
{
    MT_TRY(mt_ensure_init(func));
    if (count < 0 || (count > 0 && first == nullptr))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "a list of %lld tensors at %p", (long long)count, first);
    return MT_OK;
}

mt_status mt_adam_step_list(int64_t count, const mt_tensor *params, const mt_tensor *grads, const mt_tensor *exp_avgs,
                            const mt_tensor *exp_avg_sqs, const mt_tensor *steps, double lr, double beta1,
                            double beta2, double eps, double weight_decay, int64_t step, int decoupled)
{
    const char *func = steps ? "mt_adam_step_list (capturable)" : "mt_adam_step_list";
    MT_TRY(check_count(func, count, params));
    if (count > 0 && (!grads || !exp_avgs || !exp_avg_sqs))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "grads, exp_avgs and exp_avg_sqs must be lists too");
    MT_TRY(optim_check_adam_hyper(func, lr, beta1, beta2, eps, weight_decay));
    for (int64_t i = 0; i < count; ++i) {
        if (mt_status st = optim_check_adam_operands(func, &params[i], &grads[i], &exp_avgs[i], &exp_avg_sqs[i]))
            return list_failure(st, func, "parameter", i);
        if (steps) {
            if (mt_status st = optim_check_step(func, &steps[i], &params[i]))
                return list_failure(st, func, "parameter", i);
        }
    }
    double step_size = 0.0, inv_sqrt_bc2 = 0.0;
    if (steps) {
        /* Counted even for an empty parameter: the count is the optimizer's steps. */
        for (int64_t first = 0; first < count; first += kStepsPerLaunch) {
            StepList list;
            list.n = (int)(count - first < kStepsPerLaunch ? count - first : kStepsPerLaunch);
            for (int j = 0; j < list.n; ++j)
                list.count[j] = static_cast<int64_t *>(first_byte(steps[first + j]));
            count_steps<<<1, kStepsPerLaunch, 0, mt_stream()>>>(list);
            CUDA_CHECK(mt_launch_status());
        }
    } else {
        MT_TRY(optim_host_corrections(func, step, lr, beta1, beta2, &step_size, &inv_sqrt_bc2));
    }
    const mt_tensor *lists[4] = {params, grads, exp_avgs, exp_avg_sqs};
    return for_each_pack<4>(count, lists, steps, [&](const TensorList<4> &pack, int blocks, int64_t, int32_t dtype) {
        if (dtype == MT_FLOAT32) {
            AdamScalars<float> s{(float)lr, (float)beta1, (float)beta2, (float)eps, (float)weight_decay,
                                 (float)step_size, (float)inv_sqrt_bc2, decoupled != 0};
            adam_step_list<float><<<blocks, kListThreads, 0, mt_stream()>>>(pack, s);
        } else {
            AdamScalars<double> s{lr, beta1, beta2, eps, weight_decay, step_size, inv_sqrt_bc2, decoupled != 0};
            adam_step_list<double><<<blocks, kListThreads, 0, mt_stream()>>>(pack, s);
        }
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}

/* Every gradient of the list: a contiguous float tensor in memory the library knows. */
static mt_status check_grads(const char *func, int64_t count, const mt_tensor *grads)
{
    MT_TRY(check_count(func, count, grads));
    for (int64_t i = 0; i < count; ++i) {
        if (mt_status st = optim_check_param(func, &grads[i]))
            return list_failure(st, func, "gradient", i);
    }
    return MT_OK;
}

/* The norm: one float64 element in memory the library knows. */
static mt_status check_norm(const char *func, const mt_tensor *norm, bool output)
{
    MT_TRY(output ? mt_check_output(func, "norm", norm) : mt_check_tensor(func, "norm", norm));
    MT_TRY(mt_check_extent(func, "norm", norm));
    if (norm->dtype != MT_FLOAT64 || tensor_numel(*norm) != 1)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "norm must be one float64 element, got %lld elements of %s",
                       (long long)tensor_numel(*norm), dtype_name(norm->dtype));
    return MT_OK;
}

mt_status mt_grad_norm_list(int64_t count, const mt_tensor *grads, mt_tensor norm, int inf_norm)
{
    const char *func = "mt_grad_norm_list";
    MT_TRY(check_grads(func, count, grads));
    MT_TRY(check_norm(func, &norm, true));
    int64_t blocks = 0;
    for (int64_t i = 0; i < count; ++i)
        blocks += chunks_of(tensor_numel(grads[i]));
    DeviceScratch partials;
    CUDA_CHECK(partials.allocate((size_t)(blocks > 0 ? blocks : 1) * sizeof(double)));
    double *slots = partials.as<double>();
    const mt_tensor *lists[1] = {grads};
    MT_TRY(for_each_pack<1>(count, lists, nullptr,
                            [&](const TensorList<1> &pack, int n, int64_t first_block, int32_t dtype) {
        if (dtype == MT_FLOAT32)
            norm_partials_list<float><<<n, kBlockSize, 0, mt_stream()>>>(pack, slots, first_block, inf_norm);
        else
            norm_partials_list<double><<<n, kBlockSize, 0, mt_stream()>>>(pack, slots, first_block, inf_norm);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    }));
    /* No gradient (or only empty ones): no partial, and the norm is 0. */
    norm_finish<<<1, kBlockSize, 0, mt_stream()>>>(slots, blocks, static_cast<double *>(first_byte(norm)), inf_norm);
    CUDA_CHECK(mt_launch_status());
    CUDA_CHECK(partials.release());
    return MT_OK;
}

mt_status mt_grad_scale_list(int64_t count, const mt_tensor *grads, mt_tensor norm, double max_norm)
{
    const char *func = "mt_grad_scale_list";
    MT_TRY(check_grads(func, count, grads));
    MT_TRY(check_norm(func, &norm, false));
    if (!(max_norm >= 0.0))
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "max_norm must be >= 0, got %g", max_norm);
    /* The factor is read from norm by every block while others scale: the
     * norm may not be one of the gradients. */
    for (int64_t i = 0; i < count; ++i) {
        if (tensors_overlap(grads[i], norm))
            return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "gradient %lld of the list shares memory with norm",
                           (long long)i);
    }
    const double *at = static_cast<const double *>(first_byte(norm));
    const mt_tensor *lists[1] = {grads};
    return for_each_pack<1>(count, lists, nullptr, [&](const TensorList<1> &pack, int n, int64_t, int32_t dtype) {
        if (dtype == MT_FLOAT32)
            scale_list<float><<<n, kListThreads, 0, mt_stream()>>>(pack, at, max_norm);
        else
            scale_list<double><<<n, kListThreads, 0, mt_stream()>>>(pack, at, max_norm);
        CUDA_CHECK(mt_launch_status());
        return MT_OK;
    });
}
