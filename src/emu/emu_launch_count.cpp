/*
 * emu_launch_count.cpp: how often each kernel was launched, so that a test
 * can see WHICH kernel an entry point ran, not only that its result is right.
 *
 * Two kernels of a ladder often give the same bits (block_reduce and
 * block_reduce_last_warp add in the same order), so a result alone cannot
 * tell a test whether the kernel policy sent an op to the kernel students
 * write or to a fast rung. The block scheduler calls count_launch() for every
 * launch it accepts; mt_launch_count (src/library.cu) asks launch_count().
 *
 * Launches are counted per kernel address: one template instantiation each.
 * The name is looked up only when a test asks, through the dynamic symbol
 * table (dladdr; kernel templates are exported, weak symbols) and the C++
 * demangler, e.g. "void reduce_all_partials<float, reduce_sum<float>,
 * TreeFinish>(mt_tensor, ...)". Counting costs one lock and one hash lookup
 * per launch, small beside a launch of the emulator (microseconds).
 */
#include "emu_internal.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

namespace mt_emu {

static std::mutex g_count_mutex;
static std::unordered_map<const void *, int64_t> g_counts;

void count_launch(const void *kernel)
{
    std::lock_guard<std::mutex> lock(g_count_mutex);
    ++g_counts[kernel];
}

void reset_launch_counts()
{
    std::lock_guard<std::mutex> lock(g_count_mutex);
    g_counts.clear();
}

/* The demangled name of the function at `address`, "" if it has no symbol. */
static std::string kernel_symbol(const void *address)
{
    Dl_info info;
    if (!dladdr(address, &info) || info.dli_sname == nullptr)
        return "";
    int status = 0;
    char *plain = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string name = status == 0 && plain ? plain : info.dli_sname;
    std::free(plain);
    return name;
}

/* The kernel's own name in a demangled signature: "reduce_all_partials" in
 * "void reduce_all_partials<float, ...>(mt_tensor, ...)". */
static std::string base_name(const std::string &symbol)
{
    size_t end = symbol.find_first_of("<(");
    std::string head = symbol.substr(0, end);
    size_t space = head.rfind(' ');
    return space == std::string::npos ? head : head.substr(space + 1);
}

int64_t launch_count(const char *kernel, const char *with)
{
    std::lock_guard<std::mutex> lock(g_count_mutex);
    const bool every = std::strcmp(kernel, "*") == 0; /* "*": every kernel, for "one launch" tests */
    int64_t total = 0;
    for (const auto &entry : g_counts) {
        const std::string symbol = kernel_symbol(entry.first);
        if (!every && base_name(symbol) != kernel)
            continue;
        if (with != nullptr && *with != '\0' && symbol.find(with) == std::string::npos)
            continue;
        total += entry.second;
    }
    return total;
}

} /* namespace mt_emu */
