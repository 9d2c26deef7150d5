#!/usr/bin/env bash
# Installs the system package the emulator build needs, if it is missing:
#   Boost.Context (Debian/Ubuntu: libboost-context-dev), whose fibers run
#   the emulated CUDA threads.
# Called by `make`; safe to run by hand. Usage: bash tools/setup.sh system
set -euo pipefail

have_boost_context() {
    echo '#include <boost/context/fiber.hpp>
int main() { return 0; }' | ${CXX:-g++} -std=c++17 -x c++ - -o /dev/null -lboost_context 2>/dev/null
}

case "${1:-system}" in
system)
    if have_boost_context; then
        exit 0
    fi
    echo "minitensor: Boost.Context is missing; installing libboost-context-dev"
    install="apt-get install -y --no-install-recommends libboost-context-dev"
    if ! command -v apt-get >/dev/null; then
        echo "minitensor: no apt-get here; install Boost.Context (with its headers) by hand" >&2
        exit 1
    fi
    if [ "$(id -u)" -eq 0 ]; then
        sudo_cmd=""
    elif command -v sudo >/dev/null; then
        sudo_cmd="sudo"
    else
        echo "minitensor: run as root: $install" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo_cmd apt-get update -qq || true
    $sudo_cmd $install
    have_boost_context || { echo "minitensor: Boost.Context still not usable" >&2; exit 1; }
    ;;
*)
    echo "usage: bash tools/setup.sh system" >&2
    exit 2
    ;;
esac
