// libtorch's side of bench/charlm_table.sh: bench/torch_charlm.py's GPT in the libtorch C++ frontend (Debian's
// libtorch-dev 1.13, or a wheel's 2.x by bench/build_libtorch_peer.sh), attention through libtorch 2.x's
// scaled_dot_product_attention, or in 1.13 as the composite softmax(q k^T / sqrt(d)) v; nothing of Ember is linked.
// Prints tokens/s of AdamW steps on random token windows and the process's peak resident memory.
//   ember_torch_charlm THREADS [STEPS] [BATCH] [CONTEXT] [D] [HEADS] [BLOCKS] [VOCAB]
#include <sys/resource.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

namespace {

int64_t d = 128, heads = 4, context = 128, vocab = 96;

struct BlockImpl : torch::nn::Module {
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc{nullptr}, out{nullptr};
  torch::Tensor causal;
  BlockImpl() {
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    qkv = register_module("qkv", torch::nn::Linear(d, 3 * d));
    proj = register_module("proj", torch::nn::Linear(d, d));
    fc = register_module("fc", torch::nn::Linear(d, 4 * d));
    out = register_module("out", torch::nn::Linear(4 * d, d));
    causal = register_buffer("causal", torch::ones({context, context}, torch::kBool).tril());
  }
  torch::Tensor forward(torch::Tensor x) {
    const int64_t B = x.size(0), T = x.size(1);
    auto parts = qkv->forward(ln1->forward(x)).view({B, T, 3, heads, d / heads}).permute({2, 0, 3, 1, 4});
    auto q = parts[0], k = parts[1], v = parts[2];
#if TORCH_VERSION_MAJOR >= 2  // libtorch 2.x (the PyPI wheel's): its fused attention, as PyTorch eager uses
    auto a = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true).transpose(1, 2).reshape({B, T, d});
#else
    auto s = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d / heads));
    s = s.masked_fill(causal.slice(0, 0, T).slice(1, 0, T).logical_not(), -INFINITY);
    auto a = torch::matmul(torch::softmax(s, -1), v).transpose(1, 2).reshape({B, T, d});
#endif
    x = x + proj->forward(a);
    return x + out->forward(torch::gelu(fc->forward(ln2->forward(x))));
  }
};
TORCH_MODULE(Block);

struct GPTImpl : torch::nn::Module {
  torch::nn::Embedding tok{nullptr};
  torch::Tensor pos;
  std::vector<Block> blocks;
  torch::nn::LayerNorm ln_f{nullptr};
  explicit GPTImpl(int64_t n_blocks) {
    tok = register_module("tok", torch::nn::Embedding(vocab, d));
    pos = register_parameter("pos", torch::zeros({context, d}));
    for (int64_t i = 0; i < n_blocks; ++i) blocks.push_back(register_module("block" + std::to_string(i), Block()));
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
  }
  torch::Tensor forward(torch::Tensor idx) {
    auto h = tok->forward(idx) + pos.slice(0, 0, idx.size(1));
    for (auto& b : blocks) h = b->forward(h);
    return torch::matmul(ln_f->forward(h), tok->weight.t());
  }
};
TORCH_MODULE(GPT);

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> a = {1, 10, 32, 128, 128, 4, 4, 96};
  for (int i = 1; i < argc && i <= 8; ++i) a[static_cast<size_t>(i - 1)] = std::stoll(argv[i]);
  const int threads = static_cast<int>(a[0]), steps = static_cast<int>(a[1]);
  const int64_t batch = a[2];
  context = a[3];
  d = a[4];
  heads = a[5];
  vocab = a[7];
  torch::set_num_threads(threads);
  torch::manual_seed(0);
  GPT model(a[6]);
  {
    torch::NoGradGuard g;  // as the Ember model (GPT-2's initialisation)
    torch::nn::init::normal_(model->tok->weight, 0.0, 0.02);
    torch::nn::init::normal_(model->pos, 0.0, 0.02);
  }
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3));
  auto x = torch::randint(0, vocab, {batch, context});
  auto y = torch::randint(0, vocab, {batch, context});
  auto step = [&] {
    auto loss = torch::nn::functional::cross_entropy(model->forward(x).reshape({-1, vocab}), y.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss;
  };
  for (int i = 0; i < 3; ++i) step();
  const auto t0 = std::chrono::steady_clock::now();
  float last = 0;
  for (int i = 0; i < steps; ++i) last = step().item<float>();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  int64_t params = 0;
  for (auto& p : model->parameters()) params += p.numel();
  std::printf("libtorch tokens/s %.0f peak_rss_mib %.1f threads %d loss %.4f params %lld\n",
              static_cast<double>(steps) * static_cast<double>(batch * context) / secs,
              static_cast<double>(ru.ru_maxrss) / 1024.0, torch::get_num_threads(), last,
              static_cast<long long>(params));
  return 0;
}
