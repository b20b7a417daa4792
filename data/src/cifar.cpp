// defines: CIFAR10's readers: find the batch files, check their size is a whole number of records and their
// labels are classes, and split records into an image tensor and a label tensor.
#include "ember/data/cifar.h"

#include <cstring>
#include <filesystem>

#include "ember/core/factory.h"
#include "ember/core/raw_ops.h"
#include "mapped_file.h"

namespace ember::data {

const std::array<const char*, 10>& CIFAR10::classes() {
  static const std::array<const char*, 10> names = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                    "dog",      "frog",       "horse", "ship", "truck"};
  return names;
}

Batch CIFAR10::parse_batch(const void* data, size_t size, const std::string& what) {
  EMBER_CHECK(size % kRecordBytes == 0, IOError, "CIFAR10: ", what,
              " is truncated or not a CIFAR-10 batch file: ", size, " bytes is not a whole number of ", kRecordBytes,
              "-byte records (label + 3x32x32 image)");
  // An empty batch file is a failed download or copy, not a batch of none: loading it would silently train on the
  // other files' samples only.
  EMBER_CHECK(size > 0, IOError, "CIFAR10: ", what, " is empty (0 bytes; a batch file holds 10,000 records of ",
              kRecordBytes, " bytes): download and unpack it again");
  const auto n = static_cast<int64_t>(size / kRecordBytes);
  Tensor x = empty({n, 3, 32, 32}, {.dtype = kUInt8});
  Tensor y = empty({n}, {.dtype = kInt64});
  const auto* src = static_cast<const unsigned char*>(data);
  auto* xp = static_cast<unsigned char*>(x.data_ptr());
  auto* yp = static_cast<int64_t*>(y.data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char* rec = src + static_cast<size_t>(i) * kRecordBytes;
    EMBER_CHECK(rec[0] < 10, IOError, "CIFAR10: ", what, ": record ", i, " has label ", int{rec[0]},
                " (CIFAR-10 labels are 0..9; is this the CIFAR-100 file?)");
    yp[i] = rec[0];
    std::memcpy(xp + static_cast<size_t>(i) * (kRecordBytes - 1), rec + 1, kRecordBytes - 1);
  }
  return {x, y};
}

namespace {

std::vector<std::string> file_names(Split split) {
  if (split == Split::Test) return {"test_batch.bin"};
  return {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"};
}

// The folder holding the batch files: root itself or root/cifar-10-batches-bin.
std::filesystem::path find_folder(const std::string& root, const std::string& first) {
  namespace fs = std::filesystem;
  for (const fs::path& dir : {fs::path(root), fs::path(root) / "cifar-10-batches-bin"})
    if (std::error_code ec; fs::exists(dir / first, ec)) return dir;
  throw IOError(ember::detail::str("CIFAR10: ", first, " not found in ", root, " nor in ", root,
                                   "/cifar-10-batches-bin (download the binary version, cifar-10-binary.tar.gz, from "
                                   "https://www.cs.toronto.edu/~kriz/cifar.html and unpack it there)"));
}

TensorDataset load_split(const std::string& root, Split split) {
  const std::vector<std::string> names = file_names(split);
  const std::filesystem::path dir = find_folder(root, names[0]);
  std::vector<Tensor> xs, ys;
  for (const std::string& name : names) {
    const std::string path = (dir / name).string();
    std::error_code ec;
    EMBER_CHECK(std::filesystem::exists(path, ec), IOError, "CIFAR10: ", path, " is missing (the ",
                split == Split::Train ? "training split needs data_batch_1.bin … data_batch_5.bin"
                                      : "test split needs test_batch.bin",
                ")");
    auto file = detail::MappedFile::open(path, detail::MappedFile::Mode::ReadOnly, "CIFAR10");
    Batch b = CIFAR10::parse_batch(file->data(), file->size(), path);
    xs.push_back(b.x);
    ys.push_back(b.y);
  }
  return {xs.size() == 1 ? xs[0] : raw::cat(xs, 0), ys.size() == 1 ? ys[0] : raw::cat(ys, 0)};
}

}  // namespace

CIFAR10::CIFAR10(const std::string& root, Split split) : split_(split), rows_(load_split(root, split)) {}

}  // namespace ember::data
