// defines: NumPy's file formats. load_npy / save_npy read and write .npy (format 1.0, 2.0 and 3.0; C and
// Fortran order; little- and big-endian), load_npz reads an .npz archive (stored or deflated members, ZIP64),
// and load_npy(path, {.mmap = true}) maps the file instead of reading it, so an array larger than RAM opens at
// once and only the pages touched are read.
//
//   Tensor x = ember::data::load_npy("x.npy");                    // np.save("x.npy", a)
//   ember::data::save_npy("y.npy", y);                            // np.load("y.npy")
//   auto arrays = ember::data::load_npz("data.npz");              // np.savez / np.savez_compressed
//   Tensor big = ember::data::load_npy("big.npy", {.mmap = true});
//
// dtypes: float32 '<f4', float64 '<f8', float16 '<f2', int64 '<i8', int32 '<i4', uint8 '|u1', bool '|b1' map one
// to one. NumPy's int8, int16, uint16 and uint32 load widened to int32 (uint32 to int64), since Ember has no such
// dtype (not with mmap: a mapping cannot change width). NumPy has no bfloat16, so save_npy refuses one (convert with
// .to(kFloat32)). Everything else (uint64, complex, structured, object arrays) is an IOError naming the dtype.
// A file that is malformed, truncated or declares more data than it holds is an IOError, never a crash, and
// nothing is allocated before the declared size has been checked against the bytes actually there.
#pragma once
#include <cstddef>
#include <map>
#include <string>

#include "ember/core/tensor.h"

namespace ember::data {

struct NpyLoadOptions {
  // Map the file copy-on-write instead of reading it: the tensor's memory is the page cache, writes stay in this
  // process. Needs native byte order, a dtype Ember has, and data aligned to its item size (np.save's always is).
  // A Fortran-order file maps to a transposed (non-contiguous) view.
  bool mmap = false;
};

Tensor load_npy(const std::string& path, NpyLoadOptions options = {});
// Writes format 1.0 (2.0 when the header needs it), C order, little-endian; any layout or device is accepted
// (the data is copied to the host in C order first).
void save_npy(const std::string& path, const Tensor& t);
// Every member "name.npy" of an .npz archive, keyed by "name".
std::map<std::string, Tensor> load_npz(const std::string& path);

// The same readers over bytes in memory (`what` names the source in errors); for archives and fuzzing.
Tensor parse_npy(const void* data, size_t size, const std::string& what = "<memory>");
std::map<std::string, Tensor> parse_npz(const void* data, size_t size, const std::string& what = "<memory>");

// What a .npy header says (parse_npy_header validates it against `size`, the bytes available).
struct NpyHeader {
  std::string descr;         // e.g. "<f4"
  DType dtype = kFloat32;    // the Ember dtype it loads as
  size_t file_itemsize = 0;  // bytes per element in the file (differs from itemsize(dtype) when widened)
  bool widened = false;      // the file's integer type is narrower than dtype
  bool swap_bytes = false;   // the file's byte order is not this machine's
  bool fortran_order = false;
  Shape shape;
  size_t data_offset = 0;  // where the data starts
  size_t data_bytes = 0;   // numel * file_itemsize
};
NpyHeader parse_npy_header(const void* data, size_t size, const std::string& what);

}  // namespace ember::data
