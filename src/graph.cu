/*
 * graph.cu: CUDA Graph capture and replay of the library's work.
 *
 * A training step is tens of small launches, and the host spends longer
 * issuing each one than the GPU spends running it. A graph records the
 * launches once (stream capture) and replays them with one call: the GPU
 * then runs them back to back, with no host work between.
 *
 *   mt_graph_capture_begin(s)   work queued on s from now on is recorded
 *   ... the library's ops, with s as the current stream ...
 *   mt_graph_capture_end(s, &g) the recording as a launchable graph
 *   mt_graph_replay(g, s)       runs all of it again, on the current data
 *
 * The rules are CUDA's: the legacy default stream cannot capture; nothing may
 * wait for the device during a capture (a copy to the host, a synchronize);
 * the arguments of every launch are the ones the capture saw, so a replay
 * reads and writes the same buffers. Memory allocated during the capture is
 * the graph's (cudaMallocAsync becomes an allocation in the graph, with the
 * same address at every replay); the graph is instantiated with
 * AutoFreeOnLaunch, so what the capture allocated and did not free (the
 * step's outputs) is given back and allocated again at the next replay.
 *
 * A buffer the program frees during the capture that was allocated before it
 * is not freed into the graph (a replay would free it again): mt_free keeps
 * it until the capture ends (src/memory.cu, mt_capture_defer_free).
 *
 * Emulator: the same calls; src/emu/emu_runtime.cpp records the work and a
 * replay runs it.
 */
#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include "check.h"
#include "launch.h"

/* A captured graph: its instance, the capture's number (every buffer it
 * allocated carries it, src/memory.cu), and the buffers the program dropped. */
struct MtGraph {
    cudaGraphExec_t exec = nullptr;
    unsigned long long id = 0;
    std::vector<void *> dropped; /* its own buffers, dropped by the program */
    std::vector<void *> kept;    /* older buffers the program freed during the capture */
    bool launched = false;       /* until the first replay, its buffers hold no memory (on a GPU) */
};

static std::mutex g_graphs_mutex;
static std::map<unsigned long long, MtGraph *> g_graphs; /* by capture number */
static thread_local MtGraph *t_pending = nullptr;         /* the graph being captured */
static thread_local std::vector<MtGraph *> t_deferred_graphs;
static mt_status release_graph(MtGraph *g);

bool mt_graph_keep(void *ptr)
{
    if (t_pending == nullptr)
        return false;
    t_pending->kept.push_back(ptr);
    return true;
}

bool mt_graph_take_free(unsigned long long id, void *ptr)
{
    std::lock_guard<std::mutex> lock(g_graphs_mutex);
    auto it = g_graphs.find(id);
    if (it == g_graphs.end() || it->second->launched)
        return false; /* a replayed graph's buffer is allocated: free it as any other */
    it->second->dropped.push_back(ptr);
    return true;
}

static thread_local cudaStream_t t_capture = nullptr;
static thread_local bool t_capturing = false;
static thread_local unsigned long long t_capture_id = 0;
static thread_local void *t_stream_before = nullptr; /* the current stream when the capture began */
static std::atomic<unsigned long long> g_captures{0};

unsigned long long mt_capture_id(void)
{
    return t_capturing ? t_capture_id : 0;
}

bool mt_capturing(void)
{
    return t_capturing;
}

cudaStream_t mt_capture_stream(void)
{
    return t_capture;
}

mt_status mt_graph_capture_begin(void *stream)
{
    const char *func = "mt_graph_capture_begin";
    MT_TRY(mt_ensure_init(func));
    if (t_capturing)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "this thread is capturing a graph already");
    if (stream == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func,
                       "the legacy default stream cannot be captured: capture on a stream of your own "
                       "(mt_stream_create)");
    /* Thread-local mode: only this thread's calls are checked against the
     * capture, so another thread's work is not drawn into it. */
    CUDA_CHECK(cudaStreamBeginCapture((cudaStream_t)stream, cudaStreamCaptureModeThreadLocal));
    /* The library's ops queue on the current stream: the capture's, until it ends. */
    t_stream_before = (void *)mt_stream();
    MT_TRY(mt_set_stream(stream));
    t_capture = (cudaStream_t)stream;
    t_capturing = true;
    t_capture_id = ++g_captures;
    t_pending = new MtGraph;
    t_pending->id = t_capture_id;
    std::lock_guard<std::mutex> lock(g_graphs_mutex);
    g_graphs[t_capture_id] = t_pending;
    return MT_OK;
}

/* Ends this thread's capture and frees what mt_free kept back during it.
 * With graph null (an abort) the recording is dropped, and so is the error
 * of a capture that a refused call had spoiled already. */
static mt_status finish_capture(const char *func, cudaGraph_t *graph)
{
    cudaStream_t stream = t_capture;
    t_capture = nullptr;
    t_capturing = false;
    (void)mt_set_stream(t_stream_before);
    cudaGraph_t g = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &g);
    mt_status released = mt_release_deferred_frees(func);
    const mt_status streams = mt_release_deferred_streams();
    if (released == MT_OK)
        released = streams;
    std::vector<MtGraph *> graphs;
    graphs.swap(t_deferred_graphs);
    for (MtGraph *old : graphs) {
        const mt_status status = release_graph(old);
        if (released == MT_OK)
            released = status;
    }
    if (graph == nullptr) {
        if (g)
            (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
        return released;
    }
    if (ended != cudaSuccess && g)
        (void)cudaGraphDestroy(g);
    CUDA_CHECK(ended);
    *graph = g;
    return released;
}

/* Forgets a graph: its dropped buffers are freed where they hold memory,
 * the buffers the program still has become ordinary ones (src/memory.cu),
 * and its instance is destroyed. */
static mt_status release_graph(MtGraph *g)
{
    {
        std::lock_guard<std::mutex> lock(g_graphs_mutex);
        g_graphs.erase(g->id);
    }
#ifdef MT_EMULATOR
    const bool backed = true; /* the emulator's graph memory lives from the capture on */
#else
    const bool backed = g->launched;
#endif
    mt_status status = MT_OK;
    if (backed && !g->dropped.empty()) {
        /* The last replay's buffers may still be in use on any stream: wait
         * for the device, then give them back to the pool they came from
         * (stream-ordered, as they were allocated: compute-sanitizer follows
         * a graph's memory through cudaFreeAsync, not through cudaFree). */
        cudaError_t err = cudaDeviceSynchronize();
        for (void *p : g->dropped)
            if (err == cudaSuccess)
                err = cudaFreeAsync(p, nullptr);
        if (err == cudaSuccess)
            err = cudaStreamSynchronize(nullptr);
        if (err != cudaSuccess)
            status = mt_fail_cuda(err, "cudaFree(a graph's buffer)", __FILE__, __LINE__);
    }
    const mt_status forgot = mt_forget_capture(g->id, backed);
    if (status == MT_OK)
        status = forgot;
    /* The older buffers its kernels read at every replay: free now. */
    for (void *p : g->kept) {
        const mt_status freed = mt_free(p);
        if (status == MT_OK)
            status = freed;
    }
    if (g->exec) {
        const cudaError_t err = cudaGraphExecDestroy(g->exec);
        if (err != cudaSuccess && status == MT_OK)
            status = mt_fail_cuda(err, "cudaGraphExecDestroy(graph)", __FILE__, __LINE__);
    }
    delete g;
    return status;
}

mt_status mt_graph_capture_end(void *stream, void **graph_exec)
{
    const char *func = "mt_graph_capture_end";
    if (graph_exec == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "graph_exec is null");
    *graph_exec = nullptr;
    MT_TRY(mt_ensure_init(func));
    if (!t_capturing || (cudaStream_t)stream != t_capture)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "the stream %p is not capturing on this thread", stream);
    MtGraph *g = t_pending;
    t_pending = nullptr;
    cudaGraph_t graph = nullptr;
    const mt_status finished = finish_capture(func, &graph);
    if (finished != MT_OK) {
        (void)release_graph(g);
        return finished;
    }
    const cudaError_t err = cudaGraphInstantiateWithFlags(&g->exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
    /* The instance keeps what it needs; the recording itself can go. */
    const cudaError_t destroyed = cudaGraphDestroy(graph);
    if (err != cudaSuccess || destroyed != cudaSuccess) {
        g->exec = err == cudaSuccess ? g->exec : nullptr;
        (void)release_graph(g);
        CUDA_CHECK(err);
        CUDA_CHECK(destroyed);
    }
    *graph_exec = (void *)g;
    return MT_OK;
}

mt_status mt_graph_capture_abort(void)
{
    if (!t_capturing)
        return MT_OK;
    /* The capture failed (an op raised in the middle of it): end it, drop
     * what it recorded, and clear the error it left, so the next call works. */
    MT_TRY(mt_ensure_init("mt_graph_capture_abort"));
    MtGraph *g = t_pending;
    t_pending = nullptr;
    const mt_status status = finish_capture("mt_graph_capture_abort", nullptr);
    const mt_status released = release_graph(g);
    return status != MT_OK ? status : released;
}

mt_status mt_graph_replay(void *graph_exec, void *stream)
{
    const char *func = "mt_graph_replay";
    if (graph_exec == nullptr)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "graph_exec is null");
    MT_TRY(mt_ensure_init(func));
    if (t_capturing)
        return mt_fail(MT_ERR_INVALID_ARGUMENT, func, "a graph cannot be replayed while this thread captures one");
    MtGraph *g = (MtGraph *)graph_exec;
    CUDA_CHECK(cudaGraphLaunch(g->exec, (cudaStream_t)stream));
    g->launched = true;
    CUDA_CHECK(mt_launch_status());
    return MT_OK;
}

mt_status mt_graph_destroy(void *graph_exec)
{
    if (graph_exec == nullptr)
        return MT_OK;
    MT_TRY(mt_ensure_init("mt_graph_destroy"));
    if (t_capturing) {
        /* Freeing waits for the device, which a capture forbids. */
        t_deferred_graphs.push_back((MtGraph *)graph_exec);
        return MT_OK;
    }
    return release_graph((MtGraph *)graph_exec);
}
