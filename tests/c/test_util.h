/*
 * test_util.h: what every direct C test of minitensor shares.
 *
 * A test program reads like a specification: for each case it builds random
 * strided tensors, calls one library function, computes the expected output
 * with a plain C reference loop (walking the output with to_index /
 * index_to_position / broadcast_index from src/indexing.h, the same helpers
 * the kernels use), and compares with tt_expect_close, the one float
 * assertion. tt_summary() prints `N passed, N failed` and gives the exit code.
 *
 *   Seed      fixed by default; MT_TEST_SEED=<n> draws other cases,
 *             MT_TEST_RANDOM=1 a seed from the clock (printed at start).
 *   Filter    MT_TEST_FILTER=GROUP or GROUP/CASE (substrings or globs).
 *   Verbose   MT_TEST_VERBOSE=1 prints every group and case name.
 *
 * Tensors (tt_tensor) live in a device buffer larger than the view: a random
 * layout may permute the dims (a transposed view), step through them (a
 * sliced view), pad them, start at a non-zero offset and, for inputs, repeat
 * a dim with stride 0 (an expanded, broadcast view). The host keeps a copy of
 * the whole buffer, so a check can also prove that nothing outside an
 * output's view was written.
 *
 * Everything is `static inline` so that each program simply includes this
 * file, which gathers four by concern:
 *
 *   tt_harness.h   cases, failures, random numbers, statuses
 *   tt_groups.h    tt_init, groups in child processes (TT_GROUP), filters,
 *                  the summary
 *   tt_tensor.h    random shapes and strided test tensors (tt_tensor)
 *   tt_expect.h    the tolerance policy and the assertions
 */
#ifndef MT_TEST_UTIL_H
#define MT_TEST_UTIL_H

#include "tt_harness.h"
#include "tt_groups.h"
#include "tt_tensor.h"
#include "tt_expect.h"

#endif /* MT_TEST_UTIL_H */
