/*
 * emu_errors.cpp: the emulator's error texts: what cudaGetErrorString and
 * cudaGetErrorName answer for each code, and record_error, which sets the
 * per-thread error state (emu_runtime.cpp) with a detail naming the call.
 * (Split from emu_runtime.cpp, which had grown past 600 lines.)
 */
#include "emu_internal.h"

#include <string>

namespace mt_emu {

namespace {

const char *plain_error_string(cudaError_t err)
{
    switch (err) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorPeerAccessUnsupported: return "peer access is not supported between these two devices";
    case cudaErrorPeerAccessAlreadyEnabled: return "peer access is already enabled";
    case cudaErrorPeerAccessNotEnabled: return "peer access has not been enabled";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched: return "capture was not initiated in this stream";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
    case cudaErrorHardwareStackError: return "hardware stack error";
    case cudaErrorInvalidAddressSpace: return "operation not supported on global/shared address space";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorInterrupted: return "interrupted (Ctrl-C)";
    default: return "unknown error";
    }
}

} /* namespace */

cudaError_t record_error(cudaError_t err, const std::string &detail)
{
    last_error = err;
    detail_code = err;
    detail_text = std::string(plain_error_string(err)) + " [emulator: " + detail + "]";
    return err;
}


} /* namespace mt_emu */

const char *cudaGetErrorString(cudaError_t err)
{
    if (err == mt_emu::detail_code && !mt_emu::detail_text.empty())
        return mt_emu::detail_text.c_str();
    return mt_emu::plain_error_string(err);
}

const char *cudaGetErrorName(cudaError_t err)
{
    switch (err) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorPeerAccessUnsupported: return "cudaErrorPeerAccessUnsupported";
    case cudaErrorPeerAccessAlreadyEnabled: return "cudaErrorPeerAccessAlreadyEnabled";
    case cudaErrorPeerAccessNotEnabled: return "cudaErrorPeerAccessNotEnabled";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case cudaErrorIllegalInstruction: return "cudaErrorIllegalInstruction";
    case cudaErrorHardwareStackError: return "cudaErrorHardwareStackError";
    case cudaErrorInvalidAddressSpace: return "cudaErrorInvalidAddressSpace";
    case cudaErrorAssert: return "cudaErrorAssert";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorInterrupted: return "cudaErrorInterrupted";
    default: return "cudaErrorUnknown";
    }
}

