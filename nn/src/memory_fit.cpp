// defines: memory::fit and memory::apply (ember/nn/memory_fit.h): the checkpoint choice by plans alone.
#include "ember/nn/memory_fit.h"

#include <algorithm>
#include <numeric>

#include "ember/core/allocator.h"
#include "ember/core/error.h"
#include "ember/core/memory_plan.h"
#include "ember/nn/containers.h"
#include "ember/nn/layers.h"

namespace ember::memory {
namespace {

struct Candidate {
  nn::Module* module;
  std::string path;
  size_t order;       // in the model's module order
  double flops = 0;   // what its checkpoint runs again (Plan::recompute_flops with it alone checkpointed)
  double saving = 0;  // planned peak without checkpoints less the peak with this one alone
};

bool is_container(nn::Module* m) {
  return dynamic_cast<nn::Chain*>(m) != nullptr || dynamic_cast<nn::ModuleList*>(m) != nullptr;
}
bool inside(const std::string& path, const std::string& ancestor) {
  return ancestor.empty() || path == ancestor || path.starts_with(ancestor + ".");
}

// The candidates with their paths: the given ones (each must be in the model), or every child of the outermost
// Chains and ModuleLists.
std::vector<Candidate> candidates_of(const FitOptions& opts) {
  const nn::NamedModules all = opts.model->named_modules();
  std::vector<Candidate> out;
  if (!opts.candidates.empty()) {
    for (nn::Module* c : opts.candidates) {
      auto it = std::find_if(all.begin(), all.end(), [c](const auto& nm) { return nm.second == c; });
      EMBER_CHECK_VALUE(it != all.end() && c != opts.model, "memory::fit: a candidate is not a submodule of the model");
      out.push_back({c, it->first, static_cast<size_t>(it - all.begin())});
    }
    return out;
  }
  std::vector<std::string> containers;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& [path, m] = all[i];
    if (!is_container(m)) continue;
    const bool nested = std::any_of(out.begin(), out.end(), [&](const Candidate& c) { return inside(path, c.path); });
    if (nested) continue;
    for (size_t j = i + 1; j < all.size(); ++j) {  // its direct children: one more dotted part than the container
      const std::string& p = all[j].first;
      if (!inside(p, path) || p == path) continue;
      const std::string rest = path.empty() ? p : p.substr(path.size() + 1);
      if (rest.find('.') == std::string::npos) out.push_back({all[j].second, p, j});
    }
  }
  return out;
}

class Fitter {
 public:
  Fitter(const std::function<void(int64_t)>& step, size_t budget, const FitOptions& opts)
      : step_(step), budget_(budget), opts_(opts), cands_(candidates_of(opts)) {
    for (const Candidate& c : cands_) saved_.push_back(c.module->checkpointing());
  }
  ~Fitter() {  // the candidates' checkpointing as it was
    for (size_t i = 0; i < cands_.size(); ++i) cands_[i].module->set_checkpointing(saved_[i]);
  }
  Fitter(const Fitter&) = delete;
  Fitter& operator=(const Fitter&) = delete;

  FitPlan run() {
    const Plan none = plan_with({}, opts_.batch);
    std::vector<size_t> chosen;
    if (none.peak_bytes > budget_) chosen = choose(none);
    FitPlan out;
    out.batch = opts_.batch;
    if (opts_.max_batch > opts_.batch) out.batch = largest_batch(chosen);
    const Plan final_plan = plan_with(chosen, out.batch);
    out.predicted_peak_bytes = final_plan.peak_bytes;
    out.recompute_flops = final_plan.recompute_flops;
    std::sort(chosen.begin(), chosen.end(), [&](size_t a, size_t b) { return cands_[a].order < cands_[b].order; });
    for (size_t i : chosen) out.checkpointed.push_back(cands_[i].path);
    return out;
  }

 private:
  Plan plan_with(const std::vector<size_t>& on, int64_t batch) {
    for (size_t i = 0; i < cands_.size(); ++i)
      cands_[i].module->set_checkpointing(std::find(on.begin(), on.end(), i) != on.end());
    return plan(opts_.device, [&] { step_(batch); });
  }
  bool fits(const std::vector<size_t>& on, int64_t batch) { return plan_with(on, batch).peak_bytes <= budget_; }

  std::vector<size_t> choose(const Plan& none) {
    std::vector<size_t> all(cands_.size());
    std::iota(all.begin(), all.end(), size_t{0});
    const Plan every = plan_with(all, opts_.batch);
    EMBER_CHECK_VALUE(every.peak_bytes <= budget_, "memory::fit: no choice of the ", cands_.size(),
                      " candidate modules fits ", ember::detail::format_bytes(budget_), " at batch ", opts_.batch,
                      ": the smallest peak reachable, with all of them checkpointed, is ",
                      ember::detail::format_bytes(every.peak_bytes), " (without any: ",
                      ember::detail::format_bytes(none.peak_bytes), "); lower the batch or give more candidates");
    for (size_t i = 0; i < cands_.size(); ++i) {
      const Plan alone = plan_with({i}, opts_.batch);
      cands_[i].flops = alone.recompute_flops;
      cands_[i].saving = static_cast<double>(none.peak_bytes) - static_cast<double>(alone.peak_bytes);
    }
    // best bytes per FLOP first (a candidate of no FLOPs that saves bytes first of all)
    std::vector<size_t> order;
    for (size_t i = 0; i < cands_.size(); ++i)
      if (cands_[i].saving > 0) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return cands_[a].saving * std::max(cands_[b].flops, 1.0) > cands_[b].saving * std::max(cands_[a].flops, 1.0);
    });
    std::vector<size_t> chosen;
    for (size_t i : order) {
      chosen.push_back(i);
      if (fits(chosen, opts_.batch)) break;
    }
    if (!fits(chosen, opts_.batch)) chosen = all;  // savings that do not add up alone: all of them fit (above)
    // then drop what is not needed, most recomputation first
    std::vector<size_t> by_cost = chosen;
    std::stable_sort(by_cost.begin(), by_cost.end(), [&](size_t a, size_t b) { return cands_[a].flops > cands_[b].flops; });
    for (size_t i : by_cost) {
      std::vector<size_t> without;
      for (size_t j : chosen)
        if (j != i) without.push_back(j);
      if (fits(without, opts_.batch)) chosen = without;
    }
    return chosen;
  }

  // The largest batch in [batch, max_batch] that fits with `chosen` (bisection; batch itself fits).
  int64_t largest_batch(const std::vector<size_t>& chosen) {
    int64_t lo = opts_.batch, hi = opts_.max_batch;
    if (fits(chosen, hi)) return hi;
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (fits(chosen, mid) ? lo : hi) = mid;
    }
    return lo;
  }

  const std::function<void(int64_t)>& step_;
  size_t budget_;
  const FitOptions& opts_;
  std::vector<Candidate> cands_;
  std::vector<bool> saved_;
};

}  // namespace

FitPlan fit(const std::function<void(int64_t)>& step, size_t budget_bytes, const FitOptions& opts) {
  EMBER_CHECK_VALUE(static_cast<bool>(step), "memory::fit: the step is empty");
  EMBER_CHECK_VALUE(opts.model != nullptr, "memory::fit: FitOptions::model is required (the candidates' paths)");
  EMBER_CHECK_VALUE(budget_bytes > 0, "memory::fit: the budget must be positive");
  EMBER_CHECK_VALUE(opts.batch >= 1 && (opts.max_batch == 0 || opts.max_batch >= opts.batch),
                    "memory::fit: expected 1 <= batch <= max_batch (or max_batch 0), got batch ", opts.batch,
                    " and max_batch ", opts.max_batch);
  Fitter f(step, budget_bytes, opts);
  return f.run();
}

FitPlan fit(const std::function<void()>& step, size_t budget_bytes, const FitOptions& opts) {
  EMBER_CHECK_VALUE(opts.max_batch == 0, "memory::fit: max_batch needs a step that takes the batch, step(batch)");
  EMBER_CHECK_VALUE(static_cast<bool>(step), "memory::fit: the step is empty");
  FitOptions fixed = opts;
  fixed.batch = 1;
  FitPlan p = fit([&](int64_t) { step(); }, budget_bytes, fixed);
  p.batch = 0;  // not the step's to say
  return p;
}

void apply(nn::Module& model, const FitPlan& plan) {
  const nn::NamedModules all = model.named_modules();
  std::vector<nn::Module*> found;
  for (const std::string& path : plan.checkpointed) {
    auto it = std::find_if(all.begin(), all.end(), [&](const auto& nm) { return nm.first == path; });
    EMBER_CHECK_VALUE(it != all.end(), "memory::apply: the model has no module '", path, "'");
    found.push_back(it->second);
  }
  for (nn::Module* m : found) m->set_checkpointing(true);
}

}  // namespace ember::memory
