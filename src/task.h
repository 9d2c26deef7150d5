/*
 * task.h: how a student's handout says "this task is not done yet".
 *
 * The code a student writes is marked in the source as a task region
 * (course/tasks.toml lists the tasks; tools/course.py makes the handout):
 * three comment lines of their own, TASK(map_zip) BEGIN, TASK(map_zip) STUB
 * and TASK(map_zip) END, each inside a C comment. Between BEGIN and STUB is
 * the solution; between STUB and END, each line commented out by a leading
 * "//| ", is what the handout puts in its place.
 *
 * A stubbed kernel must never run: it would return a wrong answer (or
 * zeros) with no word of why. So a stub of a .cu region starts with
 *
 *     MT_TASK_MISSING(map_zip, "map_strided, map_contiguous", "src/map.cu")
 *
 * and the host code that launches the task's kernels asks, before the launch,
 *
 *     MT_TRY(MT_TASK_CHECK(map_zip));
 *
 * which fails with MT_ERR_NOT_IMPLEMENTED and "task map_zip is not done:
 * map_strided, map_contiguous in src/map.cu" (Python raises it as a
 * NotImplementedError). The check is written once, in the launcher, and
 * never edited for a release: it asks the compiler which of two overloads of
 * mt_task_missing() it can see. In the solved library only the template
 * below exists; it returns nullptr at compile time, so the check folds away
 * and costs nothing. A stub's MT_TASK_MISSING adds a plain function for
 * that one task, which overload resolution prefers to the template. The
 * stub must come before the launcher in the translation unit (regions sit
 * above the host code of their file, or in a header it includes), because a
 * call is bound to the overloads declared before it.
 *
 * In C (the test programs include indexing.h) the macro is empty: only the
 * library checks.
 */
#ifndef MT_TASK_H
#define MT_TASK_H

#include "minitensor.h"

/* The tasks whose stubs live in the C/CUDA sources, one X(id) each; their ids
 * are the ids of course/tasks.toml (tests/test_course_kit.py checks). */
#define MT_COURSE_TASKS(X) \
    X(indexing)            \
    X(map_zip)             \
    X(reductions)          \
    X(matmul_tiled)        \
    X(softmax)             \
    X(ladder_rung)

#ifdef __cplusplus

enum mt_task_id {
#define MT_TASK_ENUM_(id) MT_TASK_##id,
    MT_COURSE_TASKS(MT_TASK_ENUM_)
#undef MT_TASK_ENUM_
};

/* One empty type per task, so that each task can have its own overload. */
template <int Task>
struct mt_task_tag {};

/* The solved library: nothing is missing. */
template <int Task>
constexpr const char *mt_task_missing(mt_task_tag<Task>)
{
    return nullptr;
}

/* What a stub declares: task `id` is missing, naming the function(s) the
 * student writes and their file. static: each translation unit with a stub
 * has its own copy. */
#define MT_TASK_MISSING(id, function, file)                                    \
    static constexpr const char *mt_task_missing(mt_task_tag<MT_TASK_##id>) \
    {                                                                          \
        return "task " #id " is not done: " function " in " file;              \
    }

/* Records MT_ERR_NOT_IMPLEMENTED with `message`, prefixed with the entry
 * point the caller is in (src/errors.cu). */
mt_status mt_task_not_done(const char *message);

static inline mt_status mt_task_check(const char *missing)
{
    return missing == nullptr ? MT_OK : mt_task_not_done(missing);
}

/* MT_OK, or MT_ERR_NOT_IMPLEMENTED when task `id` is a stub here. */
#define MT_TASK_CHECK(id) mt_task_check(mt_task_missing(mt_task_tag<MT_TASK_##id>{}))

#else /* C */

#define MT_TASK_MISSING(id, function, file)

#endif /* __cplusplus */

#endif /* MT_TASK_H */
