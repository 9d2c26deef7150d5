#!/usr/bin/env bash
# Gradescope's setup script, run once as root when the autograder image is
# built. The autograder zip (`make autograder`, docs/coursework.md) holds
# this file, run_autograder, the student repository made by `make handout`
# (as minitensor/) and, optionally, the instructor's hidden tests (as
# hidden/).
set -euo pipefail
apt-get update
apt-get install -y --no-install-recommends build-essential python3 python3-venv
cd /autograder/source/minitensor
# Boost.Context (tools/setup.sh), .venv, the emulator library and the C test
# programs: every submission then rebuilds only the files it changes.
# (tests/test_course_kit.py runs this step on a copy, without the apt-get.)
make autograder-build
