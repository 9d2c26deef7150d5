#!/usr/bin/env bash
# run_tests.sh VARIANT PROGRAM...: runs each C test program in turn.
#
# A failing or crashing program does not stop the others. Prints one summary
# line per program and a total `N passed, N failed` line; a program that
# crashes or exits non-zero without printing its own summary counts as one
# failure. Exits non-zero if any program failed. Each program's full output
# is shown only when it fails (MT_TEST_VERBOSE=1 shows everything).
set -u
variant=$1
shift
total_pass=0
total_fail=0
bad_programs=()
for prog in "$@"; do
    name=$(basename "$prog")
    start=$(date +%s%N)
    out=$("$prog" 2>&1)
    rc=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    secs=$((ms / 1000)).$((ms % 1000 / 100))
    summary=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [[ -n $summary ]]; then
        pass=${summary%% passed*}
        fail=${summary#*, }
        fail=${fail%% failed*}
    else
        pass=0
        fail=0
    fi
    if [[ $rc -ne 0 && $fail -eq 0 ]]; then
        fail=1 # crashed, or failed before its summary
        summary="$summary${summary:+, }exit status $rc"
    fi
    total_pass=$((total_pass + pass))
    total_fail=$((total_fail + fail))
    if [[ $rc -ne 0 || ${MT_TEST_VERBOSE:-0} != 0 ]]; then
        printf '%s\n' "$out" | sed "s/^/  [$name] /"
    fi
    [[ $rc -ne 0 ]] && bad_programs+=("$name")
    printf '%-24s %s (%ss)\n' "$variant/$name:" "${summary:-no summary line, exit status $rc}" "$secs"
done
echo "C tests ($variant): $total_pass passed, $total_fail failed"
if [[ ${#bad_programs[@]} -gt 0 ]]; then
    echo "failing programs ($variant): ${bad_programs[*]}"
    exit 1
fi
exit 0
