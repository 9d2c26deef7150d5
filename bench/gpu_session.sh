#!/usr/bin/env bash
# bench/gpu_session.sh: one batched session on the GPU machine (device tool).
#
#   bash bench/gpu_session.sh OUTDIR STEP...
#
# STEPs, run in the order given, each logged to OUTDIR/STEP.log (few files:
# the device tool returns at most 8):
#   build     the CUDA library for sm_90 only (CUDA_ARCHS=90: the H100; a
#             full `make` also builds sm_75..sm_89, which takes longer)
#   check     tools/gpu_check.sh: C tests, compute-sanitizer memcheck and
#             racecheck, the Python suite on the CUDA backend
#   quick     bench/run.py --quick (a smoke test of every case)
#   bench     bench/run.py --out OUTDIR/performance.md (the full run)
#   profile   Nsight Compute on bench/ncu_cases.py (cases: $PROFILE_CASES)
# STEP_TIMEOUT (seconds, default 300) bounds each step.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: gpu_session.sh OUTDIR STEP...}
shift
mkdir -p "$out"
export PYTHONUNBUFFERED=1 MINITENSOR_BACKEND=cuda
export MINITENSOR_CACHE_DIR=/tmp/minitensor-cache
limit=${STEP_TIMEOUT:-300}
summary=()
run() { # run NAME COMMAND...
    local name=$1
    shift
    local start=$SECONDS
    echo "=== $name: $*"
    if timeout "$limit" "$@" > >(tee "$out/$name.log") 2>&1; then
        summary+=("PASS $name ($((SECONDS - start)) s)")
    else
        summary+=("FAIL $name ($((SECONDS - start)) s, exit $?)")
    fi
    printf '%s\n' "${summary[@]}" > "$out/summary.txt"
}
for step in "$@"; do
    case $step in
    build) run build make -j16 CUDA_ARCHS=90 build/libminitensor_cuda.so ;;
    check) run check bash tools/gpu_check.sh "$out/check" ;;
    quick) run quick python3 bench/run.py --quick ;;
    bench) run bench python3 bench/run.py --out "$out/performance.md" --json "$out/results.json" ;;
    profile) run profile ncu --nvtx --nvtx-include "profile/" --section SpeedOfLight \
                 --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
                 --section WarpStateStats --section Occupancy --section LaunchStats \
                 --metrics smsp__sass_thread_inst_executed_op_ffma_pred_on.sum \
                 python3 bench/ncu_cases.py ${PROFILE_CASES:-} ;;
    *) echo "unknown step $step"; summary+=("FAIL $step (unknown)") ;;
    esac
done
echo
cat "$out/summary.txt"
