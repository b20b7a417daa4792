// defines: MNIST loading: find each IDX file (.gz first, then plain), check the shapes agree, and convert
// images to float32 in [0, 1] (divided by 255, as torchvision's ToTensor does) and labels to int64.
#include "ember/data/mnist.h"

#include <filesystem>

#include "ember/core/raw_ops.h"
#include "ember/data/idx.h"

namespace ember::data {
namespace {

const char* split_name(Split s) { return s == Split::Train ? "train" : "test"; }

// root/<stem>.gz when present, else root/<stem>; IOError naming both when neither exists.
std::string find_file(const std::string& root, const std::string& stem, Split split, const char* what) {
  namespace fs = std::filesystem;
  const fs::path gz = fs::path(root) / (stem + ".gz");
  const fs::path plain = fs::path(root) / stem;
  std::error_code ec;
  if (fs::is_regular_file(gz, ec)) return gz.string();
  if (fs::is_regular_file(plain, ec)) return plain.string();
  throw IOError(detail::str("MNIST: cannot find the ", split_name(split), " ", what, " in '", root, "' (tried ", stem,
                            ".gz and ", stem, ")"));
}

TensorDataset load(const std::string& root, Split split) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string img_path = find_file(root, prefix + "-images-idx3-ubyte", split, "images");
  const std::string lbl_path = find_file(root, prefix + "-labels-idx1-ubyte", split, "labels");
  Tensor img = read_idx(img_path);
  Tensor lbl = read_idx(lbl_path);
  EMBER_CHECK(img.dtype() == kUInt8 && img.dim() == 3, IOError, "MNIST: ", img_path,
              ": expected uint8 images [N, H, W], got ", img.dtype(), " ", img.shape());
  EMBER_CHECK(lbl.dtype() == kUInt8 && lbl.dim() == 1, IOError, "MNIST: ", lbl_path,
              ": expected uint8 labels [N], got ", lbl.dtype(), " ", lbl.shape());
  EMBER_CHECK(img.size(0) == lbl.size(0), IOError, "MNIST: ", img.size(0), " images in ", img_path, " but ",
              lbl.size(0), " labels in ", lbl_path);
  // raw ops: the dataset's tensors are data, never part of an autograd graph.
  Tensor x = raw::cast(img, kFloat32);
  raw::binary_(BinaryOp::Div, x, Scalar(255.0));
  x = raw::reshape(x, {img.size(0), 1, img.size(1), img.size(2)});
  return TensorDataset(x, raw::cast(lbl, kInt64));
}

}  // namespace

MNIST::MNIST(const std::string& root, Split split) : split_(split), rows_(load(root, split)) {}

}  // namespace ember::data
