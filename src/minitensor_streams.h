/*
 * minitensor_streams.h: the streams, events and graphs of the public C API
 * (src/stream.cu, src/graph.cu). Part of minitensor.h, which includes it
 * after mt_status is defined: include minitensor.h, not this file.
 */
#ifndef MINITENSOR_STREAMS_H
#define MINITENSOR_STREAMS_H

/* ---- streams and events (src/stream.cu) --------------------------------- */
/* Streams and events are raw cudaStream_t / cudaEvent_t handles. NULL is the
 * legacy default stream; 1 and 2 are CUDA's cudaStreamLegacy and
 * cudaStreamPerThread. Every kernel, copy, memset and allocation of the
 * library is queued on the calling thread's current stream (NULL until
 * mt_set_stream changes it). A buffer is freed on the stream it was
 * allocated on; a stream that used it besides is named with
 * mt_record_stream, so that the free waits for its work. Emulator: one
 * in-order queue; streams and events are handles, and waits return at once. */
mt_status mt_set_stream(void *stream);
mt_status mt_get_stream(void **stream);
/* A new blocking stream (cudaStreamCreate): it may overlap other streams, and
 * the legacy default stream waits for it. */
mt_status mt_stream_create(void **stream);
/* Waits for the stream's work, moves the buffers allocated or used on it to
 * the legacy default stream, then destroys it. */
mt_status mt_stream_destroy(void *stream);
mt_status mt_stream_synchronize(void *stream);
/* *done = 1 when all the work queued on the stream has finished, else 0. */
mt_status mt_stream_query(void *stream, int *done);
/* Work queued on `waiting` after this call starts only after all the work
 * queued on `done` before it (an event recorded on `done`, waited for on the
 * device; the host does not block). */
mt_status mt_stream_wait(void *waiting, void *done);
/* timing = 0 makes an event that cannot be timed but is cheaper. */
mt_status mt_event_create(void **event, int timing);
mt_status mt_event_destroy(void *event);
mt_status mt_event_record(void *event, void *stream);
mt_status mt_event_synchronize(void *event);
mt_status mt_event_query(void *event, int *done);
/* Milliseconds between two recorded timing events. */
mt_status mt_event_elapsed(float *ms, void *start, void *end);
mt_status mt_stream_wait_event(void *stream, void *event);
/* The buffer starting at ptr (from mt_malloc) is used on `stream` too: its
 * free will wait for the work queued there (torch's record_stream). */
mt_status mt_record_stream(void *ptr, void *stream);

/* ---- graphs (src/graph.cu) ------------------------------------------------ */
/* Work queued on `stream` (not the legacy default stream) by this thread from
 * mt_graph_capture_begin to mt_graph_capture_end is recorded, not run, and
 * comes back as a graph that mt_graph_replay runs again, on the same buffers.
 * The capture makes `stream` the thread's current stream meanwhile (the one
 * before comes back when it ends), so the library's ops are what it records.
 * Nothing may wait for the device in between (a copy to the host, a
 * synchronize: they fail and spoil the capture). Buffers allocated during
 * the capture are the graph's: the same address at every replay. A failed
 * capture is ended with mt_graph_capture_abort. Emulator: the same, the
 * recorded launches run again at each replay. */
mt_status mt_graph_capture_begin(void *stream);
mt_status mt_graph_capture_end(void *stream, void **graph_exec);
mt_status mt_graph_capture_abort(void);
mt_status mt_graph_replay(void *graph_exec, void *stream);
mt_status mt_graph_destroy(void *graph_exec);

#endif /* MINITENSOR_STREAMS_H */
