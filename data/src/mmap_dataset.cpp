// defines: MmapDataset: columns of mapped shards, index → (shard, row) by binary search over the shards' first
// rows, consecutive samples copied out of the mapping (with the resident-set release every `resident_bytes`),
// scattered ones read with pread.
#include "ember/data/mmap_dataset.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"
#include "ember/data/npy.h"
#include "mapped_file.h"

namespace ember::data {

struct MmapDataset::Column {
  struct Shard {
    std::shared_ptr<detail::MappedFile> file;
    const unsigned char* base = nullptr;  // first sample
    int64_t first = 0;                    // global index of its first sample
    int64_t rows = 0;
  };
  std::vector<Shard> shards;
  DType dtype = kUInt8;
  Shape sample_shape;
  size_t sample_bytes = 0;
  int64_t rows = 0;

  void add(std::shared_ptr<detail::MappedFile> f, size_t offset, int64_t rows_, DType dt, const Shape& sample) {
    if (shards.empty()) {
      dtype = dt;
      sample_shape = sample;
      sample_bytes = static_cast<size_t>(sample.numel()) * itemsize(dt);
    }
    EMBER_CHECK(dt == dtype && sample == sample_shape, IOError, "MmapDataset: ", f->path(), " holds ", dt,
                " samples of shape ", sample, ", but the first shard holds ", dtype, " samples of shape ", sample_shape,
                " (every shard must match)");
    shards.push_back({std::move(f), nullptr, rows, rows_});
    shards.back().base = shards.back().file->data() + offset;
    rows += rows_;
  }

  // Where sample i lives.
  const unsigned char* row(int64_t i) const {
    auto it = std::upper_bound(shards.begin(), shards.end(), i, [](int64_t v, const Shard& s) { return v < s.first; });
    const Shard& s = *(it - 1);
    return s.base + static_cast<size_t>(i - s.first) * sample_bytes;
  }

  // The file and byte offset of sample i.
  std::pair<const detail::MappedFile*, size_t> locate(int64_t i) const {
    auto it = std::upper_bound(shards.begin(), shards.end(), i, [](int64_t v, const Shard& s) { return v < s.first; });
    const Shard& s = *(it - 1);
    return {s.file.get(),
            static_cast<size_t>(s.base - s.file->data()) + static_cast<size_t>(i - s.first) * sample_bytes};
  }

  void release() const {
    for (const Shard& s : shards) s.file->release_resident();
  }
};

namespace {

std::shared_ptr<MmapDataset::Column> npy_column(const std::vector<std::string>& files) {
  auto col = std::make_shared<MmapDataset::Column>();
  for (const std::string& path : files) {
    auto f = detail::MappedFile::open(path, detail::MappedFile::Mode::ReadOnly, "MmapDataset");
    const NpyHeader h = parse_npy_header(f->data(), f->size(), path);
    EMBER_CHECK(!h.widened && !h.swap_bytes && (!h.fortran_order || h.shape.size() <= 1), IOError,
                "MmapDataset: ", path, " holds '", h.descr, "'", h.fortran_order ? " in Fortran order" : "",
                ": only C-order arrays of a dtype Ember has, in native byte order, can be served mapped "
                "(np.ascontiguousarray(a, dtype=...) and np.save make one)");
    EMBER_CHECK(h.shape.size() >= 1, IOError, "MmapDataset: ", path, " holds a 0-d array; dim 0 must be the samples");
    EMBER_CHECK(h.data_offset % itemsize(h.dtype) == 0, IOError, "MmapDataset: ", path,
                ": the data is not aligned to its items (offset ", h.data_offset, ")");
    EMBER_CHECK(h.dtype != kBool, IOError, "MmapDataset: ", path,
                ": bool arrays are not served mapped (store them as uint8)");
    col->add(std::move(f), h.data_offset, h.shape[0], h.dtype, Shape(h.shape.begin() + 1, h.shape.end()));  // h: a copy
  }
  return col;
}

std::shared_ptr<MmapDataset::Column> raw_column(const std::vector<RawArray>& arrays) {
  auto col = std::make_shared<MmapDataset::Column>();
  for (const RawArray& a : arrays) {
    EMBER_CHECK_VALUE(a.dtype != kBool, "MmapDataset: ", a.path, ": bool raw files are not served (use uint8)");
    for (int64_t s : a.sample_shape)
      EMBER_CHECK_VALUE(s > 0, "MmapDataset: ", a.path, ": sample_shape ", a.sample_shape, " must be positive");
    size_t bytes = itemsize(a.dtype);
    for (int64_t d : a.sample_shape)
      EMBER_CHECK_VALUE(!__builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes) && bytes < (size_t{1} << 62),
                        "MmapDataset: ", a.path, ": sample_shape ", a.sample_shape, " is too large");
    auto f = detail::MappedFile::open(a.path, detail::MappedFile::Mode::ReadOnly, "MmapDataset");
    EMBER_CHECK(a.offset <= f->size() && (f->size() - a.offset) % bytes == 0, IOError, "MmapDataset: ", a.path, " has ",
                f->size(), " bytes: after the offset of ", a.offset, " that is not a whole number of ", a.dtype,
                " samples of shape ", a.sample_shape, " (", bytes, " bytes each)");
    EMBER_CHECK(a.offset % itemsize(a.dtype) == 0, IOError, "MmapDataset: ", a.path, ": offset ", a.offset,
                " is not aligned to ", a.dtype, " items");
    const auto rows = static_cast<int64_t>((f->size() - a.offset) / bytes);  // before f is moved from
    col->add(std::move(f), a.offset, rows, a.dtype, a.sample_shape);
  }
  return col;
}

DType y_dtype(DType stored) { return is_floating(stored) ? stored : kInt64; }

// Copies n samples of column c at `indices` into dst (laid out as dst_dtype, which is c.dtype or int64 for labels).
// A run of consecutive indices is copied from the mapping (and counted towards the resident-set release); scattered
// indices are read with pread instead. Why: a page fault maps the whole page-cache folio it lands in (up to 2 MiB on
// current kernels, and fault-around maps cached neighbours), so a shuffled read of small rows through the mapping
// maps the whole file within a few thousand rows, however often the mapping is released. pread copies from the same
// page cache without mapping anything. Returns the bytes read through the mapping.
size_t gather(const MmapDataset::Column& c, const int64_t* indices, size_t n, void* dst, DType dst_dtype) {
  // One sample on its own (get(i), e.g. under a transform or a custom collate) counts as scattered: the loader may
  // be asking for samples in shuffled order one by one.
  bool consecutive = n > 1;
  for (size_t k = 1; k < n && consecutive; ++k) consecutive = indices[k] == indices[k - 1] + 1;
  std::vector<unsigned char> staging;
  auto sample = [&](size_t k) -> const unsigned char* {
    if (consecutive) return c.row(indices[k]);
    const auto [file, offset] = c.locate(indices[k]);
    staging.resize(c.sample_bytes);
    file->read_at(staging.data(), c.sample_bytes, offset, "MmapDataset");
    return staging.data();
  };
  if (dst_dtype == c.dtype) {
    auto* out = static_cast<unsigned char*>(dst);
    for (size_t k = 0; k < n; ++k) {
      if (consecutive) {
        std::memcpy(out + k * c.sample_bytes, c.row(indices[k]), c.sample_bytes);
      } else {
        const auto [file, offset] = c.locate(indices[k]);
        file->read_at(out + k * c.sample_bytes, c.sample_bytes, offset, "MmapDataset");
      }
    }
    return consecutive ? n * c.sample_bytes : 0;
  }
  // Integer labels widened to int64.
  const size_t per = static_cast<size_t>(c.sample_shape.numel());
  auto* out = static_cast<int64_t*>(dst);
  visit_dtype(c.dtype, [&]<class T>() {
    for (size_t k = 0; k < n; ++k) {
      const auto* src = reinterpret_cast<const T*>(sample(k));
      for (size_t j = 0; j < per; ++j) out[k * per + j] = static_cast<int64_t>(src[j]);
    }
  });
  return consecutive ? n * c.sample_bytes : 0;
}

}  // namespace

MmapDataset::MmapDataset(const std::vector<std::string>& x_files, const std::vector<std::string>& y_files,
                         MmapDatasetOptions options)
    : opts_(options), since_release_(std::make_shared<std::atomic<size_t>>(0)) {
  EMBER_CHECK_VALUE(!x_files.empty(), "MmapDataset: no x files given");
  x_ = npy_column(x_files);
  if (!y_files.empty()) y_ = npy_column(y_files);
  EMBER_CHECK_SHAPE(!y_ || y_->rows == x_->rows, "MmapDataset: x has ", x_->rows, " samples but y has ", y_->rows);
}

MmapDataset::MmapDataset(const std::string& x_file, const std::string& y_file, MmapDatasetOptions options)
    : MmapDataset(std::vector<std::string>{x_file},
                  y_file.empty() ? std::vector<std::string>{} : std::vector<std::string>{y_file}, options) {}

MmapDataset::MmapDataset(const std::vector<RawArray>& x, const std::vector<RawArray>& y, MmapDatasetOptions options)
    : opts_(options), since_release_(std::make_shared<std::atomic<size_t>>(0)) {
  EMBER_CHECK_VALUE(!x.empty(), "MmapDataset: no x files given");
  x_ = raw_column(x);
  if (!y.empty()) y_ = raw_column(y);
  EMBER_CHECK_SHAPE(!y_ || y_->rows == x_->rows, "MmapDataset: x has ", x_->rows, " samples but y has ", y_->rows);
}

int64_t MmapDataset::size() const { return x_->rows; }
DType MmapDataset::x_dtype() const { return x_->dtype; }
Shape MmapDataset::x_sample_shape() const { return x_->sample_shape; }
size_t MmapDataset::mapped_bytes() const {
  size_t n = 0;
  for (const auto* c : {x_.get(), y_.get()})
    if (c)
      for (const auto& s : c->shards) n += s.file->size();
  return n;
}

void MmapDataset::served(size_t bytes) const {
  if (opts_.resident_bytes == 0) return;
  // The thread that crosses the budget releases; the others go on (a release under a concurrent copy only
  // makes that copy fault its pages back in from the page cache).
  const size_t before = since_release_->fetch_add(bytes);
  if (before < opts_.resident_bytes && before + bytes >= opts_.resident_bytes) {
    x_->release();
    if (y_) y_->release();
    since_release_->store(0);
  }
}

Example MmapDataset::get(int64_t i) const {
  EMBER_CHECK_INDEX(i >= 0 && i < size(), "MmapDataset::get: index ", i, " is out of range for a dataset of size ",
                    size());
  Batch b = get_batch({i});
  return {raw::select(b.x, 0, 0), b.y.defined() ? raw::select(b.y, 0, 0) : Tensor()};
}

Batch MmapDataset::get_batch(const std::vector<int64_t>& indices) const {
  for (int64_t i : indices)
    EMBER_CHECK_INDEX(i >= 0 && i < size(), "MmapDataset::get_batch: index ", i,
                      " is out of range for a dataset of size ", size());
  const auto n = static_cast<int64_t>(indices.size());
  auto batch_shape = [n](const Shape& sample) {
    Shape s{n};
    for (int64_t d : sample) s.push_back(d);
    return s;
  };
  Batch b;
  b.x = empty(batch_shape(x_->sample_shape), {.dtype = x_->dtype});
  size_t bytes = gather(*x_, indices.data(), indices.size(), b.x.data_ptr(), x_->dtype);
  if (y_) {
    b.y = empty(batch_shape(y_->sample_shape), {.dtype = y_dtype(y_->dtype)});
    bytes += gather(*y_, indices.data(), indices.size(), b.y.data_ptr(), b.y.dtype());
  }
  served(bytes);
  return b;
}

}  // namespace ember::data
