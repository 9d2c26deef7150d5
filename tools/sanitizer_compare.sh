#!/usr/bin/env bash
# sanitizer_compare.sh: the bug corpus of tests/c/broken_kernels.cu under the
# emulator's full checks and under compute-sanitizer, one Markdown table row
# per bug (docs/emulator.md, "The emulator against compute-sanitizer").
#
#   tools/sanitizer_compare.sh               both halves where a GPU and
#                                            compute-sanitizer are found
#   tools/sanitizer_compare.sh --emulator    the emulator half only
#   tools/sanitizer_compare.sh --cuda        the compute-sanitizer half only
#                                            (a GPU machine without the
#                                            emulator's Boost.Context)
#
# Builds what it runs with `make sanitizer-emu` and `make sanitizer-cuda`
# (the CUDA driver for CHECK_ARCH, 90 by default: make CHECK_ARCH=80 ... for
# an A100). Each bug runs in a process of its own, under the one
# compute-sanitizer tool that should catch it, with a time limit: a kernel
# whose threads wait at different barriers may hang a GPU.
set -u
cd "$(dirname "$0")/.." || exit 1

emulator_only=0 cuda_only=0
case "${1:-}" in
"") ;;
--emulator) emulator_only=1 ;;
--cuda) cuda_only=1 ;;
*)
    echo "usage: $0 [--emulator | --cuda]" >&2
    exit 2
    ;;
esac

gpu=0
if [[ $emulator_only == 0 ]] && command -v compute-sanitizer >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    gpu=1
fi

if [[ $cuda_only == 1 && $gpu == 0 ]]; then
    echo "$0: --cuda needs nvidia-smi to find a GPU and compute-sanitizer on the PATH" >&2
    exit 1
fi
if [[ $cuda_only == 0 ]]; then
    make --no-print-directory sanitizer-emu >/dev/null || { echo "$0: make sanitizer-emu failed" >&2; exit 1; }
fi
if [[ $gpu == 1 ]]; then
    make --no-print-directory sanitizer-cuda >/dev/null || { echo "$0: make sanitizer-cuda failed" >&2; exit 1; }
fi
emu=build/sanitizer/broken_driver_emu
cuda=build/sanitizer/broken_driver_cuda

# name | what the bug is | the compute-sanitizer tool that should see it
bugs=(
    "global_overflow|global write one past a cudaMalloc buffer|memcheck"
    "global_overread|global read one past the end|memcheck"
    "two_writers|two threads write one shared slot with no barrier|racecheck"
    "missing_barrier|a thread reads a shared slot its neighbour wrote, no barrier|racecheck"
    "split_barrier|a different __syncthreads() in each arm of an if/else|synccheck"
    "use_after_free|use after cudaFree|memcheck"
    "shared_past_end|shared write one past a __shared__ array|memcheck"
    "shared_vector_overflow|16-byte vector store through &row[i], past a __shared__ array|memcheck"
    "shared_vector_misaligned|16-byte vector store through &row[i] at a float not 16-byte aligned|memcheck"
    "shared_overflow|shared write one past each row of a 2-D __shared__ array (the last row: past the array)|memcheck"
    "uninitialised_read|read of global memory nothing wrote|initcheck"
    "matmul_missing_barrier|tiled matmul without the barrier after the tile loads|racecheck"
    "async_copy_early_read|a cp.async destination read before its thread waited for the copy|racecheck"
    "shared_pointer_race|a missing barrier through a pointer kept from &tile[0]|racecheck"
    "scratch_rmw_race|every thread folds its value into one slot of a BlockScratch, through a pointer|racecheck"
    "uninitialised_shared_read|read of __shared__ memory nothing wrote|initcheck"
    "global_overrun_bytes|global write one float past a 244-byte buffer (i <= n)|memcheck"
    "stack_overflow|a 128 KiB local array (legal on a GPU; the emulated stack is 64 KiB)|memcheck"
    "warp_ordered|(correct kernel: __syncwarp-ordered lanes, shared atomics)|racecheck"
)

# "L" or "L1, L2": the distinct broken_kernels.cu lines named in $1.
lines_in() {
    grep -oE 'broken_kernels\.cu:[0-9]+|line [0-9]+' <<<"$1" | grep -oE '[0-9]+' | awk '!seen[$0]++' |
        paste -sd, - | sed 's/,/, /g'
}

emulator_verdict() {
    local out=$1 rc=$2 kind
    if [[ $rc == 124 ]]; then
        echo "hung (killed after 60 s)"
        return
    fi
    if grep -q ': error 0: ' <<<"$out"; then
        echo "no error"
        return
    fi
    case $out in
    *"read of uninitialised"*) kind="uninitialised read" ;;
    *"stack overflow"*) kind="stack overflow" ;;
    *"shared-memory race"*) kind="race" ;;
    *"barrier divergence"*) kind="barrier divergence" ;;
    *"misaligned"*) kind="misaligned" ;;
    *"out of bounds"*) kind="shared out of bounds" ;;
    *"freed by cudaFree"*) kind="use after free" ;;
    *"illegal memory access"*) kind="illegal address" ;;
    *) kind="error" ;;
    esac
    local at
    at=$(lines_in "${out%%(declared at*}") # not the array's declaration
    echo "caught: $kind${at:+, line $at}"
}

sanitizer_verdict() {
    local out=$1 rc=$2 errors at
    if [[ $rc == 124 ]]; then
        echo "hung (killed after 120 s)"
        return
    fi
    # memcheck, initcheck and synccheck end with "ERROR SUMMARY: N errors";
    # racecheck with "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)".
    errors=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' <<<"$out" | grep -oE '[0-9]+' | tail -n 1)
    if [[ -z $errors ]]; then
        errors=$(grep -oE 'RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ error' <<<"$out" |
            grep -oE '[0-9]+ error' | grep -oE '[0-9]+' | tail -n 1)
    fi
    if [[ -z $errors ]]; then
        echo "no summary (exit status $rc)"
        return
    fi
    if [[ $errors == 0 ]]; then
        echo "no error reported"
        return
    fi
    at=$(lines_in "$out")
    echo "caught: $errors error(s)${at:+, line $at}"
}

header="| bug | line of the bug |"
rule="| --- | --- |"
if [[ $cuda_only == 0 ]]; then
    header+=" emulator (MINITENSOR_EMU_CHECK=full) |"
    rule+=" --- |"
fi
if [[ $gpu == 1 ]]; then
    header+=" compute-sanitizer |"
    rule+=" --- |"
fi
echo "$header"
echo "$rule"
log_dir=build/sanitizer/logs
mkdir -p "$log_dir"
for entry in "${bugs[@]}"; do
    IFS='|' read -r name what tool <<<"$entry"
    # The driver names the bug's lines first, on either build.
    if [[ $cuda_only == 1 ]]; then
        out=$(timeout 120 "$cuda" "$name" 2>&1)
        rc=$?
    else
        out=$(MINITENSOR_EMU_CHECK=full timeout 60 "$emu" "$name" 2>&1)
        rc=$?
        printf '%s\n' "$out" >"$log_dir/$name.emulator.txt"
    fi
    bug_at=$(sed -n "s/^$name: bug at lines \([0-9]*\) \([0-9]*\)$/\1 \2/p" <<<"$out" |
        awk '{ if ($1 == 0) print "-"; else if ($2 == 0 || $2 == $1) print $1; else print $1 ", " $2 }')
    row="| $what | ${bug_at:--} |"
    [[ $cuda_only == 1 ]] || row+=" $(emulator_verdict "$out" "$rc") |"
    if [[ $gpu == 1 ]]; then
        out=$(timeout 120 compute-sanitizer --tool "$tool" "$cuda" "$name" 2>&1)
        rc=$?
        printf '%s\n' "$out" >"$log_dir/$name.$tool.txt"
        row+=" $tool: $(sanitizer_verdict "$out" "$rc") |"
    fi
    echo "$row"
done
echo
echo "(each run's full output: $log_dir/)"
