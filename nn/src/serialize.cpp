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
#include "ember/core/file_io.h"
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

// Checksums (CRC-32C) of what a file says and of its data, stored in the metadata as 8 hex digits: a flipped bit in
// a step count, a shape or a weight is an error at load, not a silently different value. Files without them
// (older files, other writers) load unchecked.
constexpr const char* kHeaderCrcKey = "ember.crc32c.header";
constexpr const char* kDataCrcKey = "ember.crc32c.data";
bool is_checksum_key(const std::string& k) { return k == kHeaderCrcKey || k == kDataCrcKey; }

// One tensor as the header describes it.
struct Entry {
  std::string name;
  DType dtype = kFloat32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// The CRC of what the header says — every tensor's name, dtype, shape and offsets (by name) and every metadata
// entry but the checksums — computed from the values, not the JSON text, so the writer and the reader agree
// whatever the JSON library's formatting.
uint32_t header_crc(std::vector<const Entry*> entries, const std::map<std::string, std::string>& metadata) {
  std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) { return a->name < b->name; });
  // Every text field with its length in front, so that no two different headers make the same string.
  std::string c;
  auto field = [&c](const std::string& f) { c.append(std::to_string(f.size())).append(":").append(f); };
  for (const auto& [k, v] : metadata)
    if (!is_checksum_key(k)) field(k), field(v);
  c.append("|tensors|");
  for (const Entry* e : entries) {
    field(e->name);
    field(st_dtype(e->dtype));
    for (int64_t d : e->shape) c.append(std::to_string(d)).push_back(',');
    c.append(std::to_string(e->begin)).push_back(':');
    c.append(std::to_string(e->end)).push_back(';');
  }
  return crc32c(c.data(), c.size());
}

std::string hex8(uint32_t v) {
  char b[9];
  std::snprintf(b, sizeof b, "%08x", v);
  return b;
}

// Names and metadata must be valid UTF-8 (JSON's encoding) and must not collide with the format's own keys.
void check_names(const std::string& path, const NamedTensors& tensors,
                 const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    EMBER_CHECK_VALUE(valid_utf8(name), "save: ", path, ": the tensor name \"", name,
                      "\" is not valid UTF-8 (safetensors headers are JSON text)");
    EMBER_CHECK_VALUE(name != "__metadata__", "save: ", path,
                      ": a tensor cannot be named \"__metadata__\" (the safetensors format reserves that key for the "
                      "file's metadata)");
    EMBER_CHECK(t.defined(), Error, "save: ", path, ": tensor \"", name, "\" is undefined");
    EMBER_CHECK(names.insert(name).second, Error, "save: ", path, ": the name \"", name, "\" appears twice");
  }
  for (const auto& [k, v] : metadata) {
    EMBER_CHECK_VALUE(valid_utf8(k) && valid_utf8(v), "save: ", path, ": the metadata entry \"", k,
                      "\" is not valid UTF-8 (safetensors headers are JSON text)");
    EMBER_CHECK_VALUE(!is_checksum_key(k), "save: ", path, ": the metadata key \"", k,
                      "\" is reserved for the file's checksums");
  }
}

}  // namespace

void save_tensors(const std::string& path, const NamedTensors& tensors,
                  const std::map<std::string, std::string>& metadata) {
  check_names(path, tensors, metadata);
  std::vector<Tensor> host;
  std::vector<Entry> entries;
  uint64_t offset = 0, data_crc = 0;
  for (const auto& [name, t] : tensors) {
    Tensor h = raw::contiguous(raw::to_device(t.detach(), Device::cpu()));
    const uint64_t bytes = static_cast<uint64_t>(h.numel()) * h.itemsize();
    entries.push_back({name, h.dtype(), h.shape().vec(), offset, offset + bytes});
    data_crc = crc32c(h.data_ptr(), bytes, static_cast<uint32_t>(data_crc));
    offset += bytes;
    host.push_back(h);
  }
  std::map<std::string, std::string> meta = metadata;
  std::vector<const Entry*> listed;
  for (const Entry& e : entries) listed.push_back(&e);
  meta[kHeaderCrcKey] = hex8(header_crc(listed, metadata));
  meta[kDataCrcKey] = hex8(static_cast<uint32_t>(data_crc));

  nlohmann::ordered_json header;
  for (const Entry& e : entries)
    header[e.name] = {{"dtype", st_dtype(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  header["__metadata__"] = meta;
  std::string hs;
  try {
    hs = header.dump();
  } catch (const nlohmann::json::exception& e) {  // checked above; a library's exception never reaches the user
    throw IOError(detail::str("save: ", path, ": cannot write the header (", e.what(), ")"));
  }
  while ((hs.size() + 8) % 8) hs.push_back(' ');  // pad so the data starts 8-byte aligned
  uint64_t n = hs.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));  // little endian

  write_atomically(path, "save", [&](int fd, const std::string& tmp) {
    write_all(fd, len, 8, tmp, "save");
    write_all(fd, hs.data(), hs.size(), tmp, "save");
    for (const Tensor& h : host)
      write_all(fd, h.data_ptr(), static_cast<size_t>(h.numel()) * h.itemsize(), tmp, "save");
  });
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
  const int fd = open_for_reading(path, "load");  // refuses a FIFO, a directory, a device before reading
  auto m = std::make_shared<Mapping>();
  struct stat st = {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  m->size = stat_ok ? static_cast<size_t>(st.st_size) : 0;
  if (m->size >= 8) m->data = ::mmap(nullptr, m->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
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

// A JSON array of non-negative integers (a shape or the data offsets): 2.9, 1e30, -1 or "2" are refused, never
// rounded or cast.
std::vector<uint64_t> whole_numbers(const nlohmann::json& v, const std::string& path, const std::string& name,
                                    const char* what) {
  EMBER_CHECK(v.is_array(), IOError, "load: ", path, ": tensor \"", name, "\" has a ", what, " that is not a list");
  std::vector<uint64_t> out;
  for (const nlohmann::json& x : v) {
    EMBER_CHECK(x.is_number_unsigned(), IOError, "load: ", path, ": tensor \"", name, "\" has ", what, " ", v.dump(),
                ": every entry must be a non-negative integer");
    out.push_back(x.get<uint64_t>());
  }
  return out;
}

// One header entry, checked against the data section (sizes are checked as they are multiplied, so a hostile
// shape cannot overflow).
Entry parse_entry(uint64_t data_size, const std::string& path, const std::string& name, const nlohmann::json& info) {
  EMBER_CHECK(info.is_object(), IOError, "load: ", path, ": the entry of tensor \"", name, "\" is not an object");
  Entry e;
  e.name = name;
  e.dtype = from_st_dtype(info.at("dtype").get<std::string>(), path, name);
  uint64_t bytes = itemsize(e.dtype), span = itemsize(e.dtype);
  for (uint64_t d : whole_numbers(info.at("shape"), path, name, "shape")) {
    // The span (zeros counted as one) makes the strides: it must fit even when a zero size empties the tensor.
    EMBER_CHECK(!__builtin_mul_overflow(span, std::max<uint64_t>(d, 1), &span) && span < (uint64_t{1} << 62), IOError,
                "load: ", path, ": tensor \"", name, "\" has an impossibly large shape");
    bytes = (bytes == 0 || d <= data_size / bytes) ? bytes * d : data_size + 1;
    e.shape.push_back(static_cast<int64_t>(d));
  }
  const std::vector<uint64_t> off = whole_numbers(info.at("data_offsets"), path, name, "data_offsets");
  EMBER_CHECK(off.size() == 2 && off[1] >= off[0] && off[1] - off[0] == bytes && off[1] <= data_size, IOError,
              "load: ", path, ": tensor \"", name, "\" has data offsets that do not match its shape ", Shape(e.shape),
              " and dtype ", e.dtype, " or run past the end of the file (truncated data?)");
  e.begin = off[0];
  e.end = off[1];
  return e;
}

// No two tensors may share bytes (a damaged offset would make one tensor read another's data); empty tensors take
// none.
void check_disjoint(std::vector<const Entry*> entries, const std::string& path) {
  std::erase_if(entries, [](const Entry* e) { return e->begin == e->end; });
  std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  const Entry* reach = nullptr;  // the entry that ends last among those before
  for (const Entry* e : entries) {
    EMBER_CHECK(!reach || e->begin >= reach->end, IOError, "load: ", path, ": tensors \"", reach ? reach->name : "",
                "\" and \"", e->name, "\" have overlapping data offsets (a damaged header)");
    if (!reach || e->end > reach->end) reach = e;
  }
}

// The stored checksums, when the file has them, against what the file holds now.
void verify_checksums(const std::string& path, const std::map<std::string, std::string>& metadata,
                      const std::vector<const Entry*>& entries, const unsigned char* data, uint64_t data_size) {
  const auto h = metadata.find(kHeaderCrcKey), d = metadata.find(kDataCrcKey);
  if (h == metadata.end() && d == metadata.end()) return;  // an older file, or another writer's
  EMBER_CHECK(h != metadata.end() && d != metadata.end(), IOError, "load: ", path, ": the file has only one of its two ",
              "checksums (\"", kHeaderCrcKey, "\", \"", kDataCrcKey, "\"): its header was damaged");
  const std::string header_now = hex8(header_crc(entries, metadata));
  EMBER_CHECK(h->second == header_now, IOError, "load: ", path, ": checksum mismatch in the header (tensor names, ",
              "shapes, offsets and metadata such as the step): stored ", h->second, ", computed ", header_now,
              "; the file was damaged or changed after it was written");
  const std::string data_now = hex8(crc32c(data, data_size));
  EMBER_CHECK(d->second == data_now, IOError, "load: ", path, ": checksum mismatch in the tensor data: stored ",
              d->second, ", computed ", data_now, "; the file was damaged or changed after it was written");
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
  const uint64_t data_start = 8 + n, data_size = m->size - data_start;
  std::map<std::string, std::string> meta;
  std::vector<Entry> entries;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (info.is_object())
        for (auto& [k, v] : info.items()) meta[k] = v.is_string() ? v.get<std::string>() : v.dump();
      continue;
    }
    try {
      entries.push_back(parse_entry(data_size, path, name, info));
    } catch (const nlohmann::json::exception& e) {
      throw IOError(detail::str("load: ", path, ": malformed entry for tensor \"", name, "\" (", e.what(), ")"));
    }
  }
  std::vector<const Entry*> listed;
  for (const Entry& e : entries) listed.push_back(&e);
  check_disjoint(listed, path);
  verify_checksums(path, meta, listed, m->bytes() + data_start, data_size);
  NamedTensors out;
  for (const Entry& e : entries)
    out.emplace_back(e.name, tensor_at(m, data_start + e.begin, e.end - e.begin, Shape(e.shape), e.dtype));
  if (metadata)
    for (const auto& [k, v] : meta)
      if (!is_checksum_key(k)) (*metadata)[k] = v;
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
  // A tied tensor (one TensorImpl under several names) is read from the first of its names the file has: a file
  // written by save() holds only its first name, Hugging Face's GPT-2 files only the embedding's, others only the
  // head's; a file with several is checked for each and read from the first. It is missing only when none is there.
  std::vector<std::pair<const TensorImpl*, std::vector<std::string>>> groups;  // in state_dict order
  std::map<const TensorImpl*, size_t> group_of;
  std::map<std::string, Tensor> by_name;
  for (const auto& [name, t] : into) {
    expected.insert(name);
    by_name.emplace(name, t);
    auto [it, fresh] = group_of.emplace(t.impl(), groups.size());
    if (fresh) groups.push_back({t.impl(), {}});
    groups[it->second].second.push_back(name);
  }
  for (const auto& [impl, names] : groups) {
    const Tensor& t = by_name.at(names[0]);
    const Tensor* source = nullptr;
    for (const std::string& name : names) {
      auto it = src.find(name);
      if (it == src.end()) continue;
      EMBER_CHECK(it->second.shape() == t.shape(), IOError, what, ": tensor \"", name, "\" has shape ",
                  it->second.shape(), " in the file but ", t.shape(), " in the model");
      EMBER_CHECK(opts.dtype_cast || it->second.dtype() == t.dtype(), IOError, what, ": tensor \"", name,
                  "\" has dtype ", it->second.dtype(), " in the file but ", t.dtype(),
                  " in the model (pass .dtype_cast = true to convert)");
      if (!source) source = &it->second;
    }
    if (source) {
      plan.copies.emplace_back(t, *source);
    } else {
      plan.result.missing.push_back(names[0]);
      plan.missing_described.push_back(describe(names[0], t));
    }
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
