// A small GPT for characters: token embedding + learned positions, causal pre-LayerNorm TransformerBlocks, a final
// LayerNorm, and an output head tied to the token embedding (the logits are h E^T). Shared by examples/charlm and
// bench/bench_charlm.cpp, so the benchmark times the example's model.
#pragma once
#include <ember/ember.h>

namespace charlm {

struct GPTConfig {
  int64_t vocab = 0, context = 128, d = 128, heads = 4, blocks = 4;
  double dropout = 0;
  bool checkpoint = false;  // recompute each block in backward instead of keeping its activations
};

struct GPT : ember::nn::Module {
  GPTConfig cfg;
  ember::nn::Embedding tok;
  ember::Tensor pos;
  ember::nn::ModuleList blocks;
  ember::nn::LayerNorm ln_f;

  explicit GPT(const GPTConfig& c) : cfg(c), tok(c.vocab, c.d), ln_f(c.d) {
    using namespace ember;
    register_module("tok", tok);
    pos = register_parameter("pos", zeros({c.context, c.d}));
    // GPT-2's initialisation: N(0, 0.02) embeddings
    nn::init::normal_(tok.weight(), 0.0, 0.02);
    nn::init::normal_(pos, 0.0, 0.02);
    for (int64_t i = 0; i < c.blocks; ++i)
      blocks.push_back(nn::TransformerBlock(c.d, c.heads, {.dropout = c.dropout, .causal = true}));
    register_module("blocks", blocks);
    register_module("ln_f", ln_f);
  }

  // idx [B, T] (int64, T <= context) -> logits [B, T, vocab]
  ember::Tensor forward(const ember::Tensor& idx) override {
    using namespace ember;
    const int64_t T = idx.size(1);
    EMBER_CHECK_SHAPE(T <= cfg.context, "GPT: sequence of ", T, " tokens is longer than the context ", cfg.context);
    Tensor h = tok(idx) + pos.slice(0, 0, T);
    for (nn::Module& b : blocks) {
      if (cfg.checkpoint && is_training())
        h = autograd::checkpoint([&b](const std::vector<Tensor>& in) { return b(in[0]); }, {h});
      else
        h = b(h);
    }
    return matmul(ln_f(h), tok.weight().t());
  }
};

}  // namespace charlm
