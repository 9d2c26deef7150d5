#!/usr/bin/env bash
# gpu_check.sh: the checks a GPU machine runs on the CUDA build.
#
#   bash tools/gpu_check.sh [LOGDIR]
#
# 1. builds build/libminitensor_cuda.so and the C tests against it;
# 2. runs the C tests (make test-c-cuda);
# 3. runs every C test program under compute-sanitizer's memcheck and
#    racecheck (each must report 0 errors);
# 4. runs the Python suite on the CUDA backend (MINITENSOR_BACKEND=cuda),
#    unless GPU_CHECK_PYTHON=0.
# Logs go to LOGDIR (default build/gpu-check); the last lines are a summary.
# The results of a run are recorded in docs/testing.md.
set -uo pipefail
cd "$(dirname "$0")/.."
logdir=${1:-build/gpu-check}
mkdir -p "$logdir"
jobs=$(nproc 2>/dev/null || echo 4)
summary=()
status=0

step() { # step NAME COMMAND...: run, log, record pass/fail
    local name=$1
    shift
    local log="$logdir/$name.log"
    local start=$SECONDS
    if "$@" >"$log" 2>&1; then
        summary+=("PASS  $name ($((SECONDS - start)) s)")
    else
        summary+=("FAIL  $name ($((SECONDS - start)) s): see $log")
        status=1
        tail -n 30 "$log"
    fi
}

# Every case of the tests that keep a few on the emulator (tests/c/tt_groups.h
# tt_all_cases, tests/helpers.py all_cases): the CUDA backend runs them all
# anyway; set here so that the GPU check says so itself (bench/gpu_session.sh
# check runs this script).
export MT_TEST_ALL_CASES=1

nvidia-smi -L || { echo "gpu_check: no GPU (nvidia-smi -L failed)"; exit 1; }
nvcc --version | tail -n 2
command -v compute-sanitizer >/dev/null || export PATH=$PATH:/usr/local/cuda/bin

step build make -j"$jobs" build/libminitensor_cuda.so
step c-tests make --no-print-directory test-c-cuda
grep -E '^(cuda/|C tests)' "$logdir/c-tests.log"

for tool in memcheck racecheck; do
    for prog in build/tests/cuda/test_*; do
        [[ -x $prog && ! $prog == *.o ]] || continue
        # test_memory_errors makes failing API calls on purpose (an allocation
        # too large for the GPU, a 2048-thread launch); memcheck would count
        # those as errors, so for it only API errors are not reported. Memory
        # errors inside kernels still are.
        extra=()
        # test_hostile hands the library addresses it must refuse, which
        # cudaPointerGetAttributes is asked about, and test_graph checks that
        # a synchronization during a capture fails: the same applies.
        [[ $tool == memcheck && $(basename "$prog") =~ ^test_(memory_errors|hostile|graph)$ ]] && extra=(--report-api-errors no)
        # MT_TEST_FORK=0: the groups run in the sanitized process itself,
        # not in forked children (tests/c/tt_groups.h).
        step "$tool-$(basename "$prog")" \
            env MT_TEST_FORK=0 compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 "$prog"
        grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$logdir/$tool-$(basename "$prog").log" |
            sed "s|^|  $tool $(basename "$prog"): |"
    done
done

# GPU_CHECK_PYTHON=0 leaves the Python suite out (the device tool's 10-minute
# calls: run it in a call of its own, file by file).
if [[ ${GPU_CHECK_PYTHON:-1} != 0 ]]; then
    step python-tests env MINITENSOR_BACKEND=cuda python3 -m pytest -q -p no:cacheprovider tests
    tail -n 3 "$logdir/python-tests.log"
fi

echo
echo "gpu_check summary:"
printf '  %s\n' "${summary[@]}"
exit $status
