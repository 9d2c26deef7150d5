/*
 * scratch.h: DeviceScratch, a temporary device buffer that frees itself.
 */
#ifndef MT_SCRATCH_H
#define MT_SCRATCH_H

#include <stddef.h>

#include "cuda_compat.h"
#include "launch.h"

/* A temporary device buffer (reduction partials, an error flag). CUDA_CHECK
 * returns early on failure; the destructor then frees the buffer so that the
 * early return cannot leak it. On success the caller frees it with
 * CUDA_CHECK(buf.release()), so that a failing free is reported too. */
class DeviceScratch {
public:
    DeviceScratch() = default;
    DeviceScratch(const DeviceScratch &) = delete;
    DeviceScratch &operator=(const DeviceScratch &) = delete;

    /* On the current stream, where the kernels that use it are queued; freed
     * on the same stream after them. */
    cudaError_t allocate(size_t bytes)
    {
        stream_ = mt_stream();
        return cudaMallocAsync(&ptr_, bytes, stream_);
    }

    cudaError_t release()
    {
        void *p = ptr_;
        ptr_ = nullptr;
        return p ? cudaFreeAsync(p, stream_) : cudaSuccess;
    }

    ~DeviceScratch()
    {
        /* Only reached with ptr_ set on an error path: the error being
         * returned is the one worth reporting, so this free's status is
         * dropped on purpose. */
        if (ptr_)
            (void)cudaFreeAsync(ptr_, stream_);
    }

    template <typename T>
    T *as() const
    {
        return static_cast<T *>(ptr_);
    }

private:
    cudaStream_t stream_ = nullptr;
    void *ptr_ = nullptr;
};

#endif /* MT_SCRATCH_H */
