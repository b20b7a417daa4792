// defines: the live byte counters by category and the memory timeline (memory_history.h). Both hang on the
// storage's life (storage.cpp calls on_allocated / on_freed), so the CPU and the CUDA allocator share them; the
// bytes are rounded as the device's allocator rounds them (memory::allocated_size).
#include "ember/core/memory_history.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "ember/core/error.h"
#include "ember/cuda/stream.h"
#include "memory_plan_internal.h"

namespace ember::memory {
namespace {

// --- counters: [device type][device index][category]; devices past kMaxDevices are not counted.
constexpr int kMaxDevices = 16;
std::atomic<int64_t> g_bytes[kNumDeviceTypes][kMaxDevices][kNumCategories] = {};

std::atomic<int64_t>* counters(Device d) {
  const int t = static_cast<int>(d.type()), i = d.index();
  if (t < 0 || t >= kNumDeviceTypes || i < 0 || i >= kMaxDevices) return nullptr;
  return g_bytes[t][i];
}

// --- the timeline. The records of storages still alive are found by the storage's address (kept here, not in
// the storage: the timeline observes storages); record_history(true) starts a new log and forgets them.
struct History {
  std::mutex mu;
  std::vector<AllocationRecord> records;
  std::unordered_map<const StorageImpl*, size_t> live;  // storages alive with a record -> its index
  size_t max_records = 0;
  bool truncated = false;
  std::chrono::steady_clock::time_point start;

  AllocationRecord* record_of(const StorageImpl& s) {
    auto it = live.find(&s);
    return it == live.end() ? nullptr : &records[it->second];
  }
};
std::atomic<bool> g_recording{false};
std::atomic<bool> g_live_records{false};  // History::live is not empty: frees and tags must look there
History& history() {
  static auto* h = new History();  // never destroyed: storages freed during static destruction still look here
  return *h;
}

double now_us(const History& h) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h.start).count();
}


// Counted: storages of the device's caching allocator (not pinned host memory, whose device is the CPU too).
bool counted(const StorageImpl& s) { return !s.device.is_cpu() || s.allocator == &cpu_allocator(); }

}  // namespace

namespace internal {
void on_allocated(StorageImpl& s) noexcept {
  if (!counted(s)) return;
  if (auto* c = counters(s.device))
    c[s.category.load(std::memory_order_relaxed)].fetch_add(static_cast<int64_t>(allocated_size(s.device, s.nbytes)),
                                                            std::memory_order_relaxed);
  if (!g_recording.load(std::memory_order_relaxed)) [[likely]]
    return;
  try {
    AllocationRecord r;
    r.bytes = allocated_size(s.device, s.nbytes);
    r.device = s.device;
    r.category = static_cast<Category>(s.category.load(std::memory_order_relaxed));
    const Context ctx = current_context();
    r.phase = ctx.phase;
    r.module = ctx.module_path;
    if (ctx.op) r.op = ctx.op;
    if (s.device.is_cuda()) r.stream = reinterpret_cast<uintptr_t>(cuda::current_stream(s.device.index()).handle());
    History& h = history();
    std::lock_guard<std::mutex> lock(h.mu);
    if (h.records.size() >= h.max_records) {
      h.truncated = true;
      return;
    }
    r.alloc_us = now_us(h);
    h.records.push_back(std::move(r));
    h.live.emplace(&s, h.records.size() - 1);
    g_live_records.store(true, std::memory_order_relaxed);
  } catch (...) {  // a timeline entry is never worth failing an allocation for
  }
}

void on_freed(StorageImpl& s) noexcept {
  if (!counted(s)) return;
  if (auto* c = counters(s.device))
    c[s.category.load(std::memory_order_relaxed)].fetch_sub(static_cast<int64_t>(allocated_size(s.device, s.nbytes)),
                                                            std::memory_order_relaxed);
  if (!g_live_records.load(std::memory_order_relaxed)) [[likely]]
    return;
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mu);
  auto it = h.live.find(&s);
  if (it == h.live.end()) return;
  h.records[it->second].free_us = now_us(h);
  h.live.erase(it);
  if (h.live.empty()) g_live_records.store(false, std::memory_order_relaxed);
}

void retag(StorageImpl& s, uint8_t category) noexcept {
  // Threads may tag one storage at once: the one whose exchange succeeds moves the bytes.
  uint8_t cur = s.category.load(std::memory_order_relaxed);
  do {
    if (!stronger(static_cast<Category>(category), static_cast<Category>(cur))) return;  // as strong a tag is there
  } while (!s.category.compare_exchange_weak(cur, category, std::memory_order_relaxed));
  if (!counted(s)) return;
  if (auto* c = counters(s.device)) {
    const auto bytes = static_cast<int64_t>(allocated_size(s.device, s.nbytes));
    c[cur].fetch_sub(bytes, std::memory_order_relaxed);
    c[category].fetch_add(bytes, std::memory_order_relaxed);
  }
  if (!g_live_records.load(std::memory_order_relaxed)) return;
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mu);
  if (AllocationRecord* r = h.record_of(s)) r->category = static_cast<Category>(category);
}
}  // namespace internal

std::array<size_t, kNumCategories> bytes_by_category(Device device) {
  std::array<size_t, kNumCategories> out{};
  if (auto* c = counters(device))
    for (int i = 0; i < kNumCategories; ++i)
      out[static_cast<size_t>(i)] = static_cast<size_t>(std::max<int64_t>(0, c[i].load()));
  return out;
}

std::string describe_categories(Device device) {
  const auto by = bytes_by_category(device);
  size_t total = 0;
  for (size_t b : by) total += b;
  if (total == 0) return "no tensors";
  std::vector<int> order(kNumCategories);
  for (int i = 0; i < kNumCategories; ++i) order[static_cast<size_t>(i)] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return by[static_cast<size_t>(a)] > by[static_cast<size_t>(b)]; });
  std::ostringstream os;
  for (int k = 0; k < 3; ++k) {
    const size_t b = by[static_cast<size_t>(order[static_cast<size_t>(k)])];
    if (b == 0) break;
    os << (k ? ", " : "") << category_name(static_cast<Category>(order[static_cast<size_t>(k)])) << " "
       << (100 * b + total / 2) / total << "% (" << ember::detail::format_bytes(b, 1) << ")";
  }
  return os.str();
}

std::string category_advice(Device device) {
  const auto by = bytes_by_category(device);
  size_t total = 0;
  for (size_t b : by) total += b;
  if (total == 0) return "";
  const auto top = static_cast<size_t>(std::max_element(by.begin(), by.end()) - by.begin());
  const size_t b = by[top];
  const std::string pct = ember::detail::str((100 * b + total / 2) / total, "%");
  auto fmt = [](size_t n) { return ember::detail::format_bytes(n, 1); };
  switch (static_cast<Category>(top)) {
    case Category::kActivations:
      if (current_context().checkpoint_recompute)
        return ember::detail::str("activations are ", pct, ": half the batch saves about ", fmt(b / 2),
                                  ", and checkpointing smaller segments holds fewer of them at once");
      return ember::detail::str("activations are ", pct, ": half the batch saves about ", fmt(b / 2),
                                ", and autograd::checkpoint on the largest blocks keeps only their inputs");
    case Category::kTemporaries:
      return ember::detail::str("temporaries are ", pct, " (tensors not saved for backward: outputs, tensors you keep",
                                ", an op's intermediates): half the batch saves about ", fmt(b / 2),
                                "; keep losses as numbers (item()), not tensors");
    case Category::kGradients:
      return ember::detail::str("gradients are ", pct, ": freeze what need not train (requires_grad_(false)), or ",
                                "train in bfloat16 (model.to(kBFloat16)) to halve them and the parameters (saves ",
                                fmt(b / 2), ")");
    case Category::kParameters:
      return ember::detail::str("parameters are ", pct, ": model.to(kBFloat16) halves them (saves ", fmt(b / 2),
                                "; the optimiser keeps float32 state)");
    case Category::kOptimizerState:
      return ember::detail::str("optimizer state is ", pct, ": Adam keeps two buffers per parameter, SGD with ",
                                "momentum one (saves about ", fmt(b / 2), ")");
    case Category::kWorkspace:
      return ember::detail::str("workspace is ", pct, ": the kernels' scratch; a smaller batch shrinks it");
  }
  return "";
}

void record_history(bool on, size_t max_allocations) {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mu);
  if (on) {
    h.records.clear();
    h.live.clear();
    g_live_records.store(false, std::memory_order_relaxed);
    h.truncated = false;
    h.max_records = max_allocations;
    h.start = std::chrono::steady_clock::now();
  }
  g_recording.store(on, std::memory_order_relaxed);
}
bool is_recording_history() { return g_recording.load(std::memory_order_relaxed); }

Snapshot snapshot() {
  History& h = history();
  std::lock_guard<std::mutex> lock(h.mu);
  return Snapshot{h.records, h.truncated};
}

namespace {
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {  // control characters as \u00XX
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}
}  // namespace

std::string Snapshot::to_chrome_trace() const {
  // Every alloc (+bytes) and free (-bytes) as a step, per device, in time order.
  struct Step {
    double t;
    int64_t delta;
    size_t record;
  };
  std::map<Device, std::vector<Step>, bool (*)(const Device&, const Device&)> by_device(
      [](const Device& a, const Device& b) {
        return std::make_pair(a.type(), a.index()) < std::make_pair(b.type(), b.index());
      });
  for (size_t i = 0; i < allocations.size(); ++i) {
    const AllocationRecord& r = allocations[i];
    auto& steps = by_device[r.device];
    steps.push_back({r.alloc_us, static_cast<int64_t>(r.bytes), i});
    if (r.free_us >= 0) steps.push_back({r.free_us, -static_cast<int64_t>(r.bytes), i});
  }
  std::ostringstream os;
  os << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto event = [&](const std::string& e) {
    os << (first ? "" : ",\n") << e;
    first = false;
  };
  int pid = 0;
  for (auto& [device, steps] : by_device) {
    ++pid;
    std::stable_sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.t < b.t; });
    event(ember::detail::str("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", pid,
                             ",\"args\":{\"name\":", json_string("ember memory " + device.to_string()), "}}"));
    // The 8 modules holding the most at their own peak get a track each; the rest share "other".
    std::map<std::string, int64_t> cur, peak;
    for (const Step& s : steps) {
      const std::string& m = allocations[s.record].module;
      cur[m] += s.delta;
      peak[m] = std::max(peak[m], cur[m]);
    }
    std::vector<std::pair<int64_t, std::string>> ranked;
    for (auto& [m, p] : peak) ranked.emplace_back(-p, m);
    std::sort(ranked.begin(), ranked.end());
    std::map<std::string, std::string> track;
    for (size_t i = 0; i < ranked.size(); ++i)
      track[ranked[i].second] = i < 8 ? (ranked[i].second.empty() ? "(no module)" : ranked[i].second) : "other";
    std::array<int64_t, kNumCategories> by_cat{};
    std::map<std::string, int64_t> by_module;
    for (const auto& [m, t] : track) by_module[t] = 0;
    for (size_t k = 0; k < steps.size(); ++k) {
      const Step& s = steps[k];
      const AllocationRecord& r = allocations[s.record];
      by_cat[static_cast<size_t>(r.category)] += s.delta;
      by_module[track[r.module]] += s.delta;
      if (k + 1 < steps.size() && steps[k + 1].t == s.t) continue;  // one counter sample per time
      std::ostringstream cat, mod;
      for (int c = 0; c < kNumCategories; ++c)
        cat << (c ? "," : "") << json_string(category_name(static_cast<Category>(c))) << ":"
            << by_cat[static_cast<size_t>(c)];
      bool f = true;
      for (const auto& [m, b] : by_module) {
        mod << (f ? "" : ",") << json_string(m) << ":" << b;
        f = false;
      }
      const std::string ts = ember::detail::str(std::fixed, s.t);
      event(ember::detail::str("{\"name\":\"by category\",\"ph\":\"C\",\"pid\":", pid, ",\"ts\":", ts, ",\"args\":{",
                               cat.str(), "}}"));
      event(ember::detail::str("{\"name\":\"by module\",\"ph\":\"C\",\"pid\":", pid, ",\"ts\":", ts, ",\"args\":{",
                               mod.str(), "}}"));
    }
  }
  os << "\n]}\n";
  return os.str();
}

void dump_snapshot(const std::string& path) {
  const std::string json = snapshot().to_chrome_trace();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << json;
  f.close();
  EMBER_CHECK(f.good(), Error, "memory::dump_snapshot: cannot write ", json.size(), " bytes to '", path, "'");
}

}  // namespace ember::memory
