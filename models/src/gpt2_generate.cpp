// defines: GPT2::generate — the prompt through the model once, filling a key/value cache, then one position a step:
// the next token by argmax (temperature 0) or drawn from softmax(logits / temperature) over the top_k most likely
// (Hugging Face's order: temperature, then top-k), from a generator of its own.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "ember/autograd/grad_mode.h"
#include "ember/autograd/ops.h"
#include "ember/core/factory.h"
#include "ember/core/generator.h"
#include "ember/models/gpt2.h"
#include "model_checks.h"

namespace ember::models {
namespace {

// A cache for `total` positions of every layer, on the model's device and in its dtype.
KVCache make_cache(const GPT2Config& c, int64_t batch, int64_t total, const TensorOptions& opts) {
  KVCache cache;
  const Shape shape = {batch, c.n_head, total, c.n_embd / c.n_head};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    cache.keys.push_back(empty(shape, opts));
    cache.values.push_back(empty(shape, opts));
  }
  return cache;
}

// One token per row of `logits` [B, V] (on the host), as generate's options say; u: one uniform draw per row.
std::vector<int64_t> pick(const std::vector<double>& logits, int64_t rows, int64_t vocab, const GenerateOptions& o,
                          const std::vector<float>& u) {
  std::vector<int64_t> out(static_cast<size_t>(rows));
  std::vector<double> p(static_cast<size_t>(vocab));
  for (int64_t r = 0; r < rows; ++r) {
    const double* z = logits.data() + r * vocab;
    if (o.temperature == 0) {  // the first of equal maxima, as torch.argmax
      out[static_cast<size_t>(r)] = std::max_element(z, z + vocab) - z;
      continue;
    }
    // Top-k keeps every logit at least the k-th largest (ties at the threshold stay, as Hugging Face's warper).
    double threshold = -INFINITY;
    if (o.top_k > 0 && o.top_k < vocab) {
      std::vector<double> sorted(z, z + vocab);
      std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(), std::greater<double>());
      threshold = sorted[static_cast<size_t>(o.top_k - 1)];
    }
    const double m = *std::max_element(z, z + vocab);
    double total = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      p[static_cast<size_t>(v)] = z[v] < threshold ? 0.0 : std::exp((z[v] - m) / o.temperature);
      total += p[static_cast<size_t>(v)];
    }
    double target = static_cast<double>(u[static_cast<size_t>(r)]) * total, acc = 0;
    int64_t chosen = vocab - 1;
    for (int64_t v = 0; v < vocab; ++v) {
      acc += p[static_cast<size_t>(v)];
      if (p[static_cast<size_t>(v)] > 0 && acc > target) {
        chosen = v;
        break;
      }
    }
    while (p[static_cast<size_t>(chosen)] == 0 && chosen > 0) --chosen;  // rounding at the very end
    out[static_cast<size_t>(r)] = chosen;
  }
  return out;
}

}  // namespace

Tensor GPT2::generate(const Tensor& ids, const GenerateOptions& o) const {
  const char* who = "models::GPT2::generate";
  detail::check_ids(who, ids, config_.n_positions);
  EMBER_CHECK_VALUE(o.max_new_tokens >= 0, who, ": max_new_tokens must be >= 0, got ", o.max_new_tokens);
  EMBER_CHECK_VALUE(o.temperature >= 0 && std::isfinite(o.temperature), who,
                    ": temperature must be >= 0 (0: greedy), got ", o.temperature);
  EMBER_CHECK_VALUE(o.top_k >= 0, who, ": top_k must be >= 0 (0: no limit), got ", o.top_k);
  const int64_t b = ids.size(0), t = ids.size(1), total = t + o.max_new_tokens;
  EMBER_CHECK_VALUE(total <= config_.n_positions, who, ": the prompt of ", t, " tokens and ", o.max_new_tokens,
                    " new ones make ", total, ", more than the model's ", config_.n_positions, " positions");
  NoGradGuard no_grad;
  auto& model = const_cast<GPT2Model&>(transformer_);  // a handle: generation changes no module state
  const Tensor weight = transformer_.wte().weight();
  KVCache cache = make_cache(config_, b, total, {.dtype = weight.dtype(), .device = weight.device()});
  // Every draw — the sampling, and dropout when the model is left in training mode — from the seed's own stream.
  Generator gen(o.seed);
  GeneratorScope use_gen(gen);
  const Tensor prompt = ids.to(kInt64).to(weight.device());
  std::vector<Tensor> pieces = {prompt};
  std::vector<bool> done(static_cast<size_t>(b), false);
  Tensor next_input = prompt;
  for (int64_t step = 0; step < o.max_new_tokens; ++step) {
    const Tensor h = model.forward_cached(next_input, cache);  // [B, t or 1, D]
    const Tensor last = linear(h.select(1, h.size(1) - 1), weight).to(kFloat64);  // [B, V]
    std::vector<float> u(static_cast<size_t>(b), 0.f);
    if (o.temperature > 0) u = rand({b}).to_vector<float>();
    std::vector<int64_t> tokens = pick(last.to_vector<double>(), b, config_.vocab_size, o, u);
    for (int64_t r = 0; r < b; ++r) {
      auto& tok = tokens[static_cast<size_t>(r)];
      if (done[static_cast<size_t>(r)]) tok = *o.eos_token_id;  // a finished row is padded with the end token
      else if (o.eos_token_id && tok == *o.eos_token_id) done[static_cast<size_t>(r)] = true;
    }
    next_input = tensor<int64_t>(tokens, {b, 1}).to(weight.device());
    pieces.push_back(next_input);
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
  }
  return cat(pieces, 1);
}

}  // namespace ember::models
