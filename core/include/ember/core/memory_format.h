// defines: MemoryFormat (PyTorch's memory_format: how a 4-D [N, C, H, W] tensor's elements lie in memory) and the
// stride rules behind Tensor::contiguous(MemoryFormat) / is_contiguous(MemoryFormat) / suggest_memory_format().
//
//   Tensor x = ember::randn({8, 3, 224, 224}).contiguous(MemoryFormat::ChannelsLast);  // NHWC in memory
//   x.is_contiguous(MemoryFormat::ChannelsLast);  // true; x.shape() is still [8, 3, 224, 224]
//   model.to(Device::cuda(), MemoryFormat::ChannelsLast);  // 4-D parameters (conv weights) too
#pragma once
#include <cstdint>
#include <iosfwd>

#include "ember/core/shape.h"

namespace ember {

// Contiguous: row-major [N, C, H, W]. ChannelsLast: [N, H, W, C] order, strides [H*W*C, 1, W*C, C] (4-D only).
// Preserve (clone): the input's own format, channels-last when it is a dense channels-last tensor, else contiguous.
enum class MemoryFormat : uint8_t { Contiguous, ChannelsLast, Preserve };

std::ostream& operator<<(std::ostream& os, MemoryFormat f);  // "channels_last", as PyTorch prints it

// The strides of a dense tensor of `sizes` in format f (Contiguous or ChannelsLast; ChannelsLast needs 4 dims).
Shape memory_format_strides(const Shape& sizes, MemoryFormat f);
// Whether (sizes, strides) is dense in format f; as PyTorch, dims of size 1 may have any stride, so a tensor can be
// contiguous in both formats (C == 1, or H == W == 1).
bool is_contiguous_in(const Shape& sizes, const Shape& strides, MemoryFormat f);

}  // namespace ember
