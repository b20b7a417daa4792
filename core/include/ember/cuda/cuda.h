// defines: the always-available face of the CUDA backend: is_available() (false, never a crash, without a
// GPU, a driver, or a CUDA build), device queries, and the scalar-access guard. These compile and link in
// every build; without CUDA they report no devices and the rest throw DeviceError.
#pragma once
#include <cstdint>
#include <string>

namespace ember::cuda {

bool is_available();
int device_count();
int current_device();
void set_device(int index);
std::string get_device_name(int index = 0);
void synchronize();
// Why CUDA is unusable here ("" when it is usable).
std::string unavailable_reason();
// How many times Ember has made the host wait for a GPU in this process: synchronize(), copies to the host,
// blocking copies from it, stream and event waits. 0 without CUDA. A training step that reads nothing back to the
// host should add none (a test that it does not: tests/cuda/test_host_sync.cpp).
uint64_t host_sync_count();

// Element access to CUDA memory (item, data<T>()) throws unless allowed: one element at a time silently
// serialises the GPU. to_vector() and cpu() always work.
void set_allow_scalar(bool allow);
bool allow_scalar();

// float32 matmul (cuBLAS) and conv2d (cuDNN) may use TF32 tensor cores: ~10 mantissa bits per product,
// much faster on Ampere and later. Off by default, so CUDA float32 results match the CPU's to ~1e-6;
// read at each op, so it can be switched between ops.
void set_allow_tf32(bool allow);
bool allow_tf32();

// conv2d's algorithm per shape (torch.backends.cudnn.benchmark): off, cuDNN's heuristics rank the algorithms
// without running any and the first deterministic one is taken (the same on every run); on, cuDNN times every
// algorithm once per new shape (cudnnFind*) and the fastest is kept (the fastest deterministic one under
// use_deterministic_algorithms). Read when a shape is first met; the choice is cached per setting.
void set_cudnn_benchmark(bool enabled);
bool cudnn_benchmark();

}  // namespace ember::cuda
