# What the lent GPU machine runs: sourced by scripts/gpu-stage.sh (which builds and packs these) and
# scripts/gpu-check.sh (which runs them). One place, so the two cannot drift apart.

# The libraries: libember, its CUDA plugin, the AVX-512 CPU variant (with the bf16 GEMM kernels), NCCL's engine.
EMBER_GPU_LIBS="ember ember_cuda ember_cpu_avx512 ember_dist_nccl"

# Suites that read device-wide state (free memory, peak counters against the driver): run one at a time.
EMBER_GPU_SERIAL_SUITES="test_cuda_caching_allocator test_cuda_stream_event test_nn_memory_plan test_nn_memory_limit"

# The must-pass CUDA suites, run a few at a time (each binary directly, not through ctest).
EMBER_GPU_SUITES="test_cuda_plugin test_cuda_runtime test_cuda_transfers test_cuda_kernels_vs_cpu
  test_cuda_ops_vs_cpu test_cuda_training test_cuda_amp_cuda test_cuda_optim_cuda test_cuda_dataloader_cuda
  test_cuda_device_mismatch test_cuda_no_gpu test_cuda_host_sync test_cuda_nccl_engine test_cuda_gemm_epilogue test_autograd_amp test_autograd_index_ops test_core_elementwise
  test_core_reduce test_core_sort test_core_tensor test_data_dataloader test_nn_init test_nn_losses test_nn_module"

# CPU suites worth running on the GPU machine's host when its CPU has what no build machine had (AVX-512,
# AVX512-BF16, AMX): under each EMBER_CPU_ISA and EMBER_BF16_GEMM path.
EMBER_CPU_ISA_SUITES="test_core_cpu_variants test_core_gemm test_core_elementwise test_core_reduce
  test_core_linalg_conv test_autograd_gradcheck_ops test_nn_layers"
EMBER_BF16_SUITES="test_core_bf16_gemm test_autograd_amp test_core_linalg_conv"

# Programs: the example, the GPU benchmarks (their PyTorch sides are torch_reference.py and bench/torch_gpu_ops.py),
# the CPU op benchmarks (bf16 GEMM),
# the CPU training benchmark (its PyTorch side is bench/torch_train.py), run on the host's CPU as an extra.
EMBER_GPU_PROGRAMS="examples/ember_mnist bench/ember_bench_gpu bench/ember_bench_gpu_ops bench/ember_bench_gpu_models
  bench/ember_bench bench/ember_bench_train"

# The CPU training configs and thread counts the extras time on the GPU host (Ember against the host's PyTorch).
EMBER_HOST_TRAIN_CONFIGS="mlp-b64 mlp-big cnn-b64"
EMBER_HOST_TRAIN_THREADS="1 2 16"

# The gate: one small test that needs a working CUDA device.
EMBER_GPU_GATE="test_cuda_runtime"
