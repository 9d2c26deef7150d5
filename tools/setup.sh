#!/usr/bin/env bash
# Installs the system packages the emulator builds need, if they are missing:
#   system  Boost.Context (Debian/Ubuntu: libboost-context-dev), whose fibers
#           run the emulated CUDA threads. Needed by the core library.
#   mpi     OpenMPI (Debian/Ubuntu: openmpi-bin libopenmpi-dev): mpicxx and
#           mpirun, for the distributed library build/libminitensor_dist_emu.so
#           and its tests (docs/distributed.md). The core library never needs it.
# Called by `make`; safe to run by hand. Usage: bash tools/setup.sh system|mpi
set -euo pipefail

have_boost_context() {
    echo '#include <boost/context/fiber.hpp>
int main() { return 0; }' | ${CXX:-g++} -std=c++17 -x c++ - -o /dev/null -lboost_context 2>/dev/null
}

have_openmpi() {
    command -v mpicxx >/dev/null && command -v mpirun >/dev/null || return 1
    echo '#include <mpi.h>
int main() { MPI_Init(0, 0); MPI_Finalize(); return 0; }' |
        mpicxx -x c++ - -o /dev/null 2>/dev/null
}

# apt_install WHAT PACKAGE...: installs the packages with apt-get (as root, or
# through sudo), or says what to run.
apt_install() {
    local what="$1"
    shift
    local install="apt-get install -y --no-install-recommends $*"
    if ! command -v apt-get >/dev/null; then
        echo "minitensor: no apt-get here; install $what (with its headers) by hand" >&2
        exit 1
    fi
    local sudo_cmd
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
}

case "${1:-system}" in
system)
    if have_boost_context; then
        exit 0
    fi
    echo "minitensor: Boost.Context is missing; installing libboost-context-dev"
    apt_install "Boost.Context" libboost-context-dev
    have_boost_context || { echo "minitensor: Boost.Context still not usable" >&2; exit 1; }
    ;;
mpi)
    if have_openmpi; then
        exit 0
    fi
    echo "minitensor: OpenMPI is missing; installing openmpi-bin libopenmpi-dev"
    apt_install "OpenMPI" openmpi-bin libopenmpi-dev
    hash -r
    have_openmpi || { echo "minitensor: OpenMPI (mpicxx, mpirun) still not usable" >&2; exit 1; }
    ;;
*)
    echo "usage: bash tools/setup.sh system|mpi" >&2
    exit 2
    ;;
esac
