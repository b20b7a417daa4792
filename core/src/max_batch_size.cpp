// defines: memory::max_batch_size (memory_plan.h): the largest batch whose planned step fits the budget, by
// bisection over memory::plan, and the default budget (what the device or the machine has free).
#include <fstream>
#include <string>

#include "ember/core/allocator.h"
#include "ember/core/error.h"
#include "ember/core/memory_context.h"
#include "ember/core/memory_plan.h"
#include "ember/cuda/cuda.h"
#include "ember/cuda/memory.h"

namespace ember::memory {
namespace {
size_t system_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

size_t default_budget(Device target) {
  const size_t limit = memory_limit(target);
  if (target.is_cpu()) {
    const size_t in_use = cpu_memory_stats().bytes_in_use;
    if (limit) return limit > in_use ? limit - in_use : 0;
    return system_available_bytes();
  }
  EMBER_CHECK_DEVICE(cuda::is_available(), "memory::max_batch_size: no budget_bytes given and ", target,
                     " cannot be asked for its free memory (", cuda::unavailable_reason(),
                     "); pass BatchSearch::budget_bytes to plan for a device that is not here");
  // The limit caps reserved segments, and only wholly free ones can be given back: count every reserved byte as
  // taken (cuda::empty_cache() first gives the most room). Without a limit: what the driver has free.
  const size_t reserved = cuda::memory_reserved(target.index());
  if (limit) return limit > reserved ? limit - reserved : 0;
  return cuda::mem_get_info(target.index()).first;
}
}  // namespace

int64_t max_batch_size(Device target, const std::function<void(int64_t)>& step, const BatchSearch& opts) {
  EMBER_CHECK_VALUE(static_cast<bool>(step), "memory::max_batch_size: the step function is empty");
  EMBER_CHECK_VALUE(opts.lo >= 1 && opts.lo <= opts.hi,
                    "memory::max_batch_size: expected 1 <= lo <= hi, got lo = ", opts.lo, ", hi = ", opts.hi);
  const size_t budget = opts.budget_bytes ? opts.budget_bytes : default_budget(target);
  EMBER_CHECK_VALUE(budget > 0, "memory::max_batch_size: no budget_bytes given and ", target,
                    " has no room left (its memory limit is used up, or its free memory could not be read); pass "
                    "BatchSearch::budget_bytes, e.g. {.budget_bytes = size_t{8} << 30}");
  auto fits = [&](int64_t b) { return plan(target, [&] { step(b); }, {.limit_bytes = budget}); };
  Plan at_lo = fits(opts.lo);
  if (!at_lo.fits)
    throw ValueError(detail::str("memory::max_batch_size: even batch ", opts.lo, " does not fit ",
                                 detail::format_bytes(budget, 2), " on ", target, ": its step needs a peak of ",
                                 detail::format_bytes(at_lo.peak_bytes, 2), " (first refused: ", at_lo.first_oom, ")"));
  if (fits(opts.hi).fits) return opts.hi;
  int64_t good = opts.lo, bad = opts.hi;  // invariant: good fits, bad does not
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    (fits(mid).fits ? good : bad) = mid;
  }
  return good;
}

}  // namespace ember::memory
