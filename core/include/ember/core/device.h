// defines: DeviceType and Device, a small value type: Device::cpu(), Device::cuda(i), to_string() "cpu"/"cuda:0".
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>

namespace ember {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
inline constexpr int kNumDeviceTypes = 2;

class Device {
 public:
  constexpr Device() = default;
  constexpr Device(DeviceType type, int index) : type_(type), index_(static_cast<int16_t>(index)) {}
  static constexpr Device cpu() { return Device(DeviceType::CPU, 0); }
  static constexpr Device cuda(int index = 0) { return Device(DeviceType::CUDA, index); }
  constexpr DeviceType type() const { return type_; }
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type_ == DeviceType::CUDA; }
  std::string to_string() const;
  constexpr bool operator==(const Device& o) const { return type_ == o.type_ && index_ == o.index_; }
  constexpr bool operator!=(const Device& o) const { return !(*this == o); }

 private:
  DeviceType type_ = DeviceType::CPU;
  int16_t index_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace ember

template <>
struct std::hash<ember::Device> {
  size_t operator()(const ember::Device& d) const noexcept {
    return (static_cast<size_t>(d.type()) << 16) ^ static_cast<size_t>(d.index());
  }
};
