// defines: MmapDataset, samples served straight from memory-mapped files, so a dataset larger than RAM trains:
// nothing is read at construction beyond the headers, each sample is copied out of the page cache when asked for,
// and the process's resident set stays bounded. A batch of consecutive samples (sequential order) is copied from
// the mapping, and after every `resident_bytes` copied so the mappings' page-table entries are dropped (the pages
// stay in the kernel's page cache, so a re-read costs no I/O); a batch of scattered samples (shuffled) is read with
// pread from the same page cache, which maps nothing — a fault would map a whole page-cache folio, up to 2 MiB,
// for each small row.
//
//   data::MmapDataset ds({"x_000.npy", "x_001.npy"}, {"y_000.npy", "y_001.npy"});  // shards, concatenated
//   data::MmapDataset raw(data::RawArray{.path = "x.bin", .dtype = kUInt8, .sample_shape = {3, 32, 32}});
//   data::DataLoader loader(ds, {.batch_size = 256, .shuffle = true, .num_workers = 2});
//
// x keeps its stored dtype; an integer y is delivered as int64 (what the losses take), a float y as stored.
// Every shard of a column must have the same dtype and sample shape; x and y the same number of samples.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/core/tensor.h"
#include "ember/data/dataset.h"

namespace ember::data {

// A headerless file of samples: `offset` bytes to skip, then samples of `sample_shape` × `dtype`, C order,
// native byte order, back to back (the file size minus offset must be a whole number of samples).
struct RawArray {
  std::string path;
  DType dtype = kUInt8;
  Shape sample_shape;
  size_t offset = 0;
};

struct MmapDatasetOptions {
  size_t resident_bytes = size_t{256} << 20;  // bytes copied from the mapping between releases (0: never release)
};

class MmapDataset {
 public:
  // x from .npy files (C order, native byte order, a dtype Ember has, dim 0 = samples); y likewise or empty.
  MmapDataset(const std::vector<std::string>& x_files, const std::vector<std::string>& y_files = {},
              MmapDatasetOptions options = {});
  MmapDataset(const std::string& x_file, const std::string& y_file = "", MmapDatasetOptions options = {});
  // x from raw files, y from raw files (or none).
  MmapDataset(const std::vector<RawArray>& x, const std::vector<RawArray>& y = {}, MmapDatasetOptions options = {});
  explicit MmapDataset(const RawArray& x, MmapDatasetOptions options = {})
      : MmapDataset(std::vector<RawArray>{x}, {}, options) {}

  int64_t size() const;
  Example get(int64_t i) const;  // fresh tensors (not views of the mapping)
  Batch get_batch(const std::vector<int64_t>& indices) const;
  DType x_dtype() const;
  Shape x_sample_shape() const;
  size_t mapped_bytes() const;  // the files' total size

  struct Column;  // the mapped shards of x or y (mmap_dataset.cpp)

 private:
  void served(size_t bytes) const;
  std::shared_ptr<const Column> x_, y_;
  MmapDatasetOptions opts_;
  std::shared_ptr<std::atomic<size_t>> since_release_;  // shared: copies of the dataset (one per loader) share it
};

static_assert(BatchDataset<MmapDataset>);

}  // namespace ember::data
