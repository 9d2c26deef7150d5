/*
 * stream.cu: the current stream, streams and events.
 *
 * Every kernel, copy, memset and allocation of the library is queued on the
 * calling thread's current stream, mt_stream(). It starts as NULL, CUDA's
 * legacy default stream, and mt_set_stream changes it (Python's
 * `with mt.cuda.stream(s):`). A stream is a raw cudaStream_t: one made by
 * mt_stream_create, or another library's (torch's, CuPy's), which the library
 * only borrows.
 *
 * Streams made here are blocking streams (cudaStreamCreate's default): work
 * on two of them may overlap, and the legacy default stream waits for both.
 * A kernel launched without a stream (`kernel<<<grid, block>>>`, as the
 * course's tasks launch) therefore still runs after the work queued before
 * it on any of them.
 *
 * Emulator: one in-order queue. A launch finishes before it returns, so
 * streams and events only keep their handles and timestamps, and every wait
 * has nothing to wait for.
 */
#include "check.h"
#include "launch.h"

#include <vector>

/* The thread's current stream: every launch reads it. */
static thread_local cudaStream_t t_stream = nullptr;

cudaStream_t mt_stream(void)
{
    return t_stream;
}

mt_status mt_set_stream(void *stream)
{
    MT_TRY(mt_ensure_init("mt_set_stream"));
    t_stream = (cudaStream_t)stream;
    return MT_OK;
}

mt_status mt_get_stream(void **stream)
{
    if (stream == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_get_stream", "stream is null");
    *stream = (void *)t_stream;
    return MT_OK;
}

mt_status mt_stream_create(void **stream)
{
    if (stream == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_stream_create", "stream is null");
    *stream = nullptr;
    MT_TRY(mt_ensure_init("mt_stream_create"));
    cudaStream_t s = nullptr;
    CUDA_CHECK(cudaStreamCreate(&s));
    *stream = (void *)s;
    return MT_OK;
}

/* Streams destroyed while this thread captures a graph: destroying one waits
 * for its work, which a capture forbids, so it waits for the capture's end. */
static thread_local std::vector<cudaStream_t> t_deferred_streams;

mt_status mt_release_deferred_streams(void)
{
    std::vector<cudaStream_t> pending;
    pending.swap(t_deferred_streams);
    mt_status first = MT_OK;
    for (cudaStream_t s : pending) {
        const mt_status status = mt_stream_destroy((void *)s);
        if (status != MT_OK && first == MT_OK)
            first = status;
    }
    return first;
}

mt_status mt_stream_destroy(void *stream)
{
    MT_TRY(mt_ensure_init("mt_stream_destroy"));
    if (stream == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_stream_destroy", "the default stream cannot be destroyed");
    if (mt_capturing()) {
        t_deferred_streams.push_back((cudaStream_t)stream);
        return MT_OK;
    }
    /* Buffers allocated on it, or used on it, are freed later on another
     * stream; mt_forget_stream waits for its work and moves them. */
    MT_TRY(mt_forget_stream("mt_stream_destroy", (cudaStream_t)stream));
    if (t_stream == (cudaStream_t)stream)
        t_stream = nullptr;
    CUDA_CHECK(cudaStreamDestroy((cudaStream_t)stream));
    return MT_OK;
}

mt_status mt_stream_synchronize(void *stream)
{
    MT_TRY(mt_ensure_init("mt_stream_synchronize"));
    CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return MT_OK;
}

/* What cudaStreamQuery / cudaEventQuery said, as *done: "not ready" is an
 * answer (0), not an error to keep; success is 1; anything else fails. */
static mt_status query_answer(cudaError_t err, int *done)
{
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        *done = 0;
        return MT_OK;
    }
    CUDA_CHECK(err);
    *done = 1;
    return MT_OK;
}

mt_status mt_stream_query(void *stream, int *done)
{
    if (done == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_stream_query", "done is null");
    MT_TRY(mt_ensure_init("mt_stream_query"));
    return query_answer(cudaStreamQuery((cudaStream_t)stream), done);
}

mt_status mt_stream_wait(void *waiting, void *done)
{
    MT_TRY(mt_ensure_init("mt_stream_wait"));
    if (waiting == done)
        return MT_OK; /* one stream runs its work in order */
    /* An event marks the point reached on `done`; `waiting` waits for it on
     * the device, so the host never blocks. Destroying the event at once is
     * allowed: the wait already queued keeps what it needs. */
    cudaEvent_t event;
    CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    cudaError_t err = cudaEventRecord(event, (cudaStream_t)done);
    if (err == cudaSuccess)
        err = cudaStreamWaitEvent((cudaStream_t)waiting, event, 0);
    const cudaError_t destroyed = cudaEventDestroy(event);
    CUDA_CHECK(err);
    CUDA_CHECK(destroyed);
    return MT_OK;
}

/* ---- events --------------------------------------------------------------- */

mt_status mt_event_create(void **event, int timing)
{
    if (event == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_event_create", "event is null");
    *event = nullptr;
    MT_TRY(mt_ensure_init("mt_event_create"));
    cudaEvent_t e = nullptr;
    /* An event without timing is cheaper to record and to wait for. */
    CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    *event = (void *)e;
    return MT_OK;
}

mt_status mt_event_destroy(void *event)
{
    if (event == nullptr)
        return MT_OK;
    MT_TRY(mt_ensure_init("mt_event_destroy"));
    CUDA_CHECK(cudaEventDestroy((cudaEvent_t)event));
    return MT_OK;
}

mt_status mt_event_record(void *event, void *stream)
{
    if (event == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_event_record", "event is null");
    MT_TRY(mt_ensure_init("mt_event_record"));
    CUDA_CHECK(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
    return MT_OK;
}

mt_status mt_event_synchronize(void *event)
{
    if (event == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_event_synchronize", "event is null");
    MT_TRY(mt_ensure_init("mt_event_synchronize"));
    CUDA_CHECK(cudaEventSynchronize((cudaEvent_t)event));
    return MT_OK;
}

mt_status mt_event_query(void *event, int *done)
{
    if (event == nullptr || done == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_event_query", "event or done is null");
    MT_TRY(mt_ensure_init("mt_event_query"));
    return query_answer(cudaEventQuery((cudaEvent_t)event), done);
}

mt_status mt_event_elapsed(float *ms, void *start, void *end)
{
    if (ms == nullptr || start == nullptr || end == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_event_elapsed", "ms, start or end is null");
    MT_TRY(mt_ensure_init("mt_event_elapsed"));
    CUDA_CHECK(cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)end));
    return MT_OK;
}

mt_status mt_stream_wait_event(void *stream, void *event)
{
    if (event == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, "mt_stream_wait_event", "event is null");
    MT_TRY(mt_ensure_init("mt_stream_wait_event"));
    CUDA_CHECK(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0));
    return MT_OK;
}
