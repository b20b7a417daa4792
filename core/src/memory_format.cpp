// defines: the stride rules of MemoryFormat (memory_format.h) and the Tensor members that ask them.
#include "ember/core/memory_format.h"

#include <ostream>

#include "op_utils.h"

namespace ember {

std::ostream& operator<<(std::ostream& os, MemoryFormat f) {
  switch (f) {
    case MemoryFormat::Contiguous:
      return os << "contiguous_format";
    case MemoryFormat::ChannelsLast:
      return os << "channels_last";
    case MemoryFormat::Preserve:
      return os << "preserve_format";
  }
  return os << "MemoryFormat(" << static_cast<int>(f) << ")";
}

namespace {
// The dims from the one that varies fastest in memory to the slowest: NCHW walks W, H, C, N; NHWC walks C, W, H, N.
constexpr int64_t kChannelsLastOrder[4] = {1, 3, 2, 0};
}  // namespace

Shape memory_format_strides(const Shape& sizes, MemoryFormat f) {
  if (f != MemoryFormat::ChannelsLast) return contiguous_strides(sizes);
  EMBER_CHECK_SHAPE(sizes.size() == 4, "channels_last: needs a 4-D [N, C, H, W] tensor, got shape ", sizes);
  Shape strides(4, 1);
  int64_t step = 1;
  for (int64_t d : kChannelsLastOrder) {
    strides[static_cast<size_t>(d)] = step;
    step *= std::max<int64_t>(sizes[static_cast<size_t>(d)], 1);
  }
  return strides;
}

bool is_contiguous_in(const Shape& sizes, const Shape& strides, MemoryFormat f) {
  if (f != MemoryFormat::ChannelsLast) {
    int64_t expected = 1;
    for (size_t i = sizes.size(); i-- > 0;) {
      if (sizes[i] == 1) continue;
      if (sizes[i] == 0) return true;
      if (strides[i] != expected) return false;
      expected *= sizes[i];
    }
    return true;
  }
  if (sizes.size() != 4) return false;
  int64_t expected = 1;
  for (int64_t d : kChannelsLastOrder) {
    const auto i = static_cast<size_t>(d);
    if (sizes[i] == 0) return true;
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

bool Tensor::is_contiguous(MemoryFormat f) const {
  EMBER_CHECK_VALUE(f != MemoryFormat::Preserve,
                    "is_contiguous: preserve_format names no layout; ask for Contiguous or ChannelsLast");
  if (f == MemoryFormat::Contiguous) return is_contiguous();
  return is_contiguous_in(shape(), strides(), f);
}

MemoryFormat Tensor::suggest_memory_format() const {
  return dim() == 4 && !is_contiguous() && is_contiguous(MemoryFormat::ChannelsLast) ? MemoryFormat::ChannelsLast
                                                                                        : MemoryFormat::Contiguous;
}

namespace raw {
Tensor layout_view(const Tensor& x, MemoryFormat f) {
  return f == MemoryFormat::ChannelsLast ? permute(x, {0, 2, 3, 1}) : x;
}
Tensor from_layout_view(const Tensor& v, MemoryFormat f) {
  return f == MemoryFormat::ChannelsLast ? permute(v, {0, 3, 1, 2}) : v;
}
}  // namespace raw

}  // namespace ember
