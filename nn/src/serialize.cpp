// defines: the safetensors reader/writer, save / load of a module, and assign_tensors (checkpoint.cpp uses them).
// Format: an 8-byte little-endian header length N, N bytes of JSON {"name": {"dtype": "F32", "shape": [...],
// "data_offsets": [begin, end]}, ..., "__metadata__": {...}}, then the raw little-endian tensor bytes.
#include "ember/nn/serialize.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "ember/autograd/grad_mode.h"
#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"

namespace ember::nn {
namespace {

const char* st_dtype(DType d) {
  switch (d) {
    case kFloat32:
      return "F32";
    case kFloat64:
      return "F64";
    case kFloat16:
      return "F16";
    case kBFloat16:
      return "BF16";
    case kInt64:
      return "I64";
    case kInt32:
      return "I32";
    case kUInt8:
      return "U8";
    case kBool:
      return "BOOL";
  }
  return "?";
}
DType from_st_dtype(const std::string& s, const std::string& path, const std::string& name) {
  static const std::map<std::string, DType> m = {{"F32", kFloat32},   {"F64", kFloat64}, {"F16", kFloat16},
                                                 {"BF16", kBFloat16}, {"I64", kInt64},   {"I32", kInt32},
                                                 {"U8", kUInt8},      {"BOOL", kBool}};
  auto it = m.find(s);
  EMBER_CHECK(it != m.end(), IOError, "load: ", path, ": tensor \"", name, "\" has unsupported dtype ", s);
  return it->second;
}

void write_all(int fd, const void* p, size_t n, const std::string& path) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    EMBER_CHECK(w > 0, IOError, "save: writing ", path, " failed (", std::strerror(errno), ")");
    c += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void save_tensors(const std::string& path, const NamedTensors& tensors,
                  const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  std::vector<Tensor> host;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    EMBER_CHECK(t.defined(), Error, "save: tensor \"", name, "\" is undefined");
    EMBER_CHECK(names.insert(name).second, Error, "save: the name \"", name, "\" appears twice");
    Tensor h = raw::contiguous(raw::to_device(t.detach(), Device::cpu()));
    const uint64_t bytes = static_cast<uint64_t>(h.numel()) * h.itemsize();
    header[name] = {
        {"dtype", st_dtype(h.dtype())}, {"shape", h.shape().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    host.push_back(h);
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string hs = header.dump();
  while ((hs.size() + 8) % 8) hs.push_back(' ');  // pad so the data starts 8-byte aligned
  uint64_t n = hs.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));  // little endian

  // Atomic replace: write a temporary file beside the target, fsync it, rename it, fsync the folder.
  // pid + a counter: concurrent saves from several threads or processes never share a temporary file.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  EMBER_CHECK(fd >= 0, IOError, "save: cannot create ", tmp, " (", std::strerror(errno), ")");
  try {
    write_all(fd, len, 8, tmp);
    write_all(fd, hs.data(), hs.size(), tmp);
    for (const Tensor& h : host) write_all(fd, h.data_ptr(), static_cast<size_t>(h.numel()) * h.itemsize(), tmp);
    EMBER_CHECK(::fsync(fd) == 0, IOError, "save: fsync of ", tmp, " failed (", std::strerror(errno), ")");
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw IOError(detail::str("save: cannot rename ", tmp, " to ", path, " (", std::strerror(e), ")"));
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);  // make the rename itself durable
    ::close(dfd);
  }
}

namespace {

// A file mapped copy-on-write: the tensors read from it share its pages (nothing is copied before they reach the
// parameters they are loaded into), and writing into one of them never reaches the file.
struct Mapping {
  void* data = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (data != MAP_FAILED) ::munmap(data, size);
  }
  const unsigned char* bytes() const { return static_cast<const unsigned char*>(data); }
};

std::shared_ptr<Mapping> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EMBER_CHECK(fd >= 0, IOError, "load: cannot open ", path, " (", std::strerror(errno), ")");
  auto m = std::make_shared<Mapping>();
  struct stat st = {};
  const bool is_file = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  m->size = is_file ? static_cast<size_t>(st.st_size) : 0;
  if (is_file && m->size >= 8) m->data = ::mmap(nullptr, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  EMBER_CHECK(is_file, IOError, "load: ", path, " is not a regular file");
  EMBER_CHECK(m->size >= 8, IOError, "load: ", path, ": too short to be a safetensors file");
  EMBER_CHECK(m->data != MAP_FAILED, IOError, "load: cannot map ", path, " (", std::strerror(map_errno), ")");
  return m;
}

// The bytes of one tensor as a tensor: the mapping itself when aligned for its dtype, else a copy (and bool bytes
// are always copied: a C++ bool must hold 0 or 1, any other byte would be undefined behaviour in every later op).
Tensor tensor_at(const std::shared_ptr<Mapping>& m, size_t offset, size_t bytes, const Shape& shape, DType dt) {
  void* p = static_cast<unsigned char*>(m->data) + offset;
  if (dt != kBool && reinterpret_cast<uintptr_t>(p) % itemsize(dt) == 0)
    return from_blob(p, shape, {.dtype = dt}, [keep = m](void*) {});
  Tensor t = empty(shape, {.dtype = dt});
  if (bytes) std::memcpy(t.data_ptr(), p, bytes);
  if (dt == kBool) {
    auto* b = static_cast<unsigned char*>(t.data_ptr());
    for (size_t i = 0; i < bytes; ++i) b[i] = b[i] != 0;
  }
  return t;
}

// One header entry checked against the data section (sizes are checked as they are multiplied, so a hostile
// shape cannot overflow), and read.
Tensor read_entry(const std::shared_ptr<Mapping>& m, uint64_t data_start, const std::string& path,
                  const std::string& name, const nlohmann::json& info) {
  const uint64_t data_size = m->size - data_start;
  DType dt = from_st_dtype(info.at("dtype").get<std::string>(), path, name);
  std::vector<int64_t> shape = info.at("shape").get<std::vector<int64_t>>();
  auto off = info.at("data_offsets").get<std::vector<uint64_t>>();
  uint64_t bytes = itemsize(dt), span = itemsize(dt);
  for (int64_t d : shape) {
    EMBER_CHECK(d >= 0, IOError, "load: ", path, ": tensor \"", name, "\" has a negative size");
    // The span (zeros counted as one) makes the strides: it must fit even when a zero size empties the tensor.
    EMBER_CHECK(!__builtin_mul_overflow(span, static_cast<uint64_t>(std::max<int64_t>(d, 1)), &span) &&
                    span < (uint64_t{1} << 62),
                IOError, "load: ", path, ": tensor \"", name, "\" has an impossibly large shape");
    bytes = (bytes == 0 || static_cast<uint64_t>(d) <= data_size / bytes) ? bytes * static_cast<uint64_t>(d)
                                                                          : data_size + 1;
  }
  Shape s(shape);
  EMBER_CHECK(off.size() == 2 && off[1] >= off[0] && off[1] - off[0] == bytes && off[1] <= data_size, IOError,
              "load: ", path, ": tensor \"", name, "\" has data offsets that do not match its shape ", s, " and dtype ",
              dt, " or run past the end of the file (truncated data?)");
  return tensor_at(m, data_start + off[0], bytes, s, dt);
}

}  // namespace

NamedTensors load_tensors(const std::string& path, std::map<std::string, std::string>* metadata) {
  const std::shared_ptr<Mapping> m = map_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | m->bytes()[i];
  EMBER_CHECK(n <= m->size - 8 && n < (uint64_t{1} << 30), IOError, "load: ", path, ": header length ", n,
              " does not fit the file (", m->size, " bytes): not a safetensors file or truncated header");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(m->bytes() + 8, m->bytes() + 8 + n);
  } catch (const std::exception& e) {
    throw IOError(detail::str("load: ", path, ": malformed header (", e.what(), ")"));
  }
  EMBER_CHECK(header.is_object(), IOError, "load: ", path, ": the header is not a JSON object");
  NamedTensors out;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (metadata && info.is_object())
        for (auto& [k, v] : info.items()) (*metadata)[k] = v.is_string() ? v.get<std::string>() : v.dump();
      continue;
    }
    try {
      out.emplace_back(name, read_entry(m, 8 + n, path, name, info));
    } catch (const nlohmann::json::exception& e) {
      throw IOError(detail::str("load: ", path, ": malformed entry for tensor \"", name, "\" (", e.what(), ")"));
    }
  }
  return out;
}

NamedTensors tensors_once(const NamedTensors& tensors) {
  NamedTensors out;
  std::set<const TensorImpl*> seen;
  for (const auto& nt : tensors)
    if (seen.insert(nt.second.impl()).second) out.push_back(nt);
  return out;
}

namespace {

std::string describe(const std::string& name, const Tensor& t) {
  return detail::str("\"", name, "\" (", t.dtype(), t.shape(), ")");
}
std::string list(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s;
}

// What a load will copy, worked out and checked whole before anything is copied.
struct LoadPlan {
  std::vector<std::pair<Tensor, Tensor>> copies;  // (the model's tensor, the file's)
  LoadResult result;
  std::vector<std::string> missing_described, unexpected_described;
};

// The file's tensors under their renamed names (an empty name drops one; two under one name is an error).
std::map<std::string, Tensor> renamed(const NamedTensors& from, const LoadOptions& opts, const std::string& what) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : from) {
    const std::string n = opts.rename ? opts.rename(name) : name;
    if (n.empty()) continue;
    EMBER_CHECK(out.emplace(n, t).second, IOError, what, ": two tensors of the file are named \"", n,
                "\" after renaming (the second was \"", name, "\")");
  }
  return out;
}

LoadPlan plan_load(const NamedTensors& into, const NamedTensors& from, const std::string& what,
                   const LoadOptions& opts) {
  std::map<std::string, Tensor> src = renamed(from, opts, what);
  LoadPlan plan;
  std::set<std::string> expected;
  // A tied tensor (one TensorImpl under several names) is read from its first name; a file written by save()
  // holds only that one, an older file may hold the others too (they are then checked and ignored).
  std::set<const TensorImpl*> seen;
  for (const auto& [name, t] : into) {
    expected.insert(name);
    const bool alias = !seen.insert(t.impl()).second;
    auto it = src.find(name);
    if (it == src.end()) {
      if (alias) continue;
      plan.result.missing.push_back(name);
      plan.missing_described.push_back(describe(name, t));
      continue;
    }
    EMBER_CHECK(it->second.shape() == t.shape(), IOError, what, ": tensor \"", name, "\" has shape ",
                it->second.shape(), " in the file but ", t.shape(), " in the model");
    EMBER_CHECK(opts.dtype_cast || it->second.dtype() == t.dtype(), IOError, what, ": tensor \"", name,
                "\" has dtype ", it->second.dtype(), " in the file but ", t.dtype(),
                " in the model (pass .dtype_cast = true to convert)");
    if (!alias) plan.copies.emplace_back(t, it->second);
  }
  for (const auto& [name, t] : src)
    if (!expected.count(name)) {
      plan.result.unexpected.push_back(name);
      plan.unexpected_described.push_back(describe(name, t));
    }
  return plan;
}

LoadResult assign_planned(const NamedTensors& into, const NamedTensors& from, const std::string& what,
                          const LoadOptions& opts) {
  LoadPlan plan = plan_load(into, from, what, opts);
  if (opts.strict && !plan.result.complete()) {
    std::string why;
    if (!plan.result.missing.empty())
      why += detail::str(plan.result.missing.size(), " tensor(s) of the model missing from the file: ",
                         list(plan.missing_described));
    if (!plan.result.unexpected.empty())
      why += detail::str(why.empty() ? "" : "; ", plan.result.unexpected.size(),
                         " tensor(s) in the file that the model does not have: ", list(plan.unexpected_described));
    throw IOError(detail::str(what, ": ", why,
                              " (load with .strict = false to load the rest, or .rename to map the file's names)"));
  }
  NoGradGuard g;
  for (auto& [dst, src] : plan.copies) raw::copy_(dst, src);  // onto the model's device and dtype; bumps the version
  return plan.result;
}

}  // namespace

void assign_tensors(const NamedTensors& into, const NamedTensors& from, const std::string& what) {
  assign_planned(into, from, what, {.strict = true, .rename = {}, .dtype_cast = false});
}

LoadResult assign_tensors(Module& module, const NamedTensors& from, const LoadOptions& opts) {
  return assign_planned(module.state_dict(), from, "assign_tensors", opts);
}

void save(const Module& module, const std::string& path) {
  save_tensors(path, tensors_once(module.state_dict()), {{"format", "pt"}});
}

LoadResult load(Module& module, const std::string& path, const LoadOptions& opts) {
  return assign_planned(module.state_dict(), load_tensors(path), "load " + path, opts);
}

}  // namespace ember::nn
