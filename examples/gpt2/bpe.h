// GPT-2's byte-level BPE tokenizer from a Hugging Face folder's vocab.json and merges.txt, for examples/gpt2: text is
// split into pieces as GPT-2's pattern does (contractions, runs of letters, of digits, of other characters, each
// with one leading space; runs of spaces), each piece's bytes are mapped to GPT-2's printable characters, merged by
// rank, and looked up. Simplification: only ASCII is classified; every non-ASCII byte counts as a letter, so ASCII
// text tokenises as GPT-2's does, but curly quotes and apostrophes, dashes, non-breaking spaces and other scripts'
// punctuation can split differently (a piece boundary moves; the text still round-trips through decode).
#pragma once
#include <ember/ember.h>

#include <climits>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpt2_example {

class Bpe {
 public:
  explicit Bpe(const std::string& folder) {
    const nlohmann::json vocab = nlohmann::json::parse(ember::read_file(folder + "/vocab.json", "Bpe"));
    for (auto& [token, id] : vocab.items()) {
      ids_[token] = id.get<int64_t>();
      tokens_[id.get<int64_t>()] = token;
    }
    std::istringstream merges(ember::read_file(folder + "/merges.txt", "Bpe"));
    std::string line;
    int rank = 0;
    while (std::getline(merges, line)) {
      if (line.empty() || line.rfind("#version", 0) == 0) continue;
      const size_t sp = line.find(' ');
      if (sp != std::string::npos) ranks_[line.substr(0, sp) + "\n" + line.substr(sp + 1)] = rank++;
    }
    // GPT-2's byte -> character map: printable bytes stand for themselves, the others for 256 + n.
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      byte_char_[b] = utf8(printable ? b : 256 + n++);
      char_byte_[byte_char_[b]] = static_cast<char>(b);
    }
  }

  std::vector<int64_t> encode(const std::string& text) const {
    std::vector<int64_t> out;
    for (const std::string& piece : pieces(text)) {
      std::vector<std::string> parts;
      for (unsigned char b : piece) parts.push_back(byte_char_[b]);
      merge(parts);
      for (const std::string& p : parts) {
        auto it = ids_.find(p);
        if (it == ids_.end()) throw ember::ValueError("Bpe: no token for \"" + p + "\"");
        out.push_back(it->second);
      }
    }
    return out;
  }

  std::string decode(const std::vector<int64_t>& ids) const {
    std::string out;
    for (int64_t id : ids) {
      auto it = tokens_.find(id);
      if (it == tokens_.end()) continue;
      const std::string& t = it->second;
      for (size_t i = 0; i < t.size();) {  // one UTF-8 character at a time back to its byte
        const size_t len = (t[i] & 0x80) == 0 ? 1 : (t[i] & 0xE0) == 0xC0 ? 2 : (t[i] & 0xF0) == 0xE0 ? 3 : 4;
        auto b = char_byte_.find(t.substr(i, len));
        if (b != char_byte_.end()) out.push_back(b->second);
        i += len;
      }
    }
    return out;
  }

 private:
  static std::string utf8(int cp) {
    std::string s;
    if (cp < 0x80) s.push_back(static_cast<char>(cp));
    else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    return s;
  }
  static int kind(unsigned char c) {  // 0 space, 1 letter, 2 digit, 3 other
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') return 0;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return 1;
    if (c >= '0' && c <= '9') return 2;
    return 3;
  }
  // GPT-2's pre-tokenisation, 's|'t|'re|'ve|'m|'ll|'d| ?letters| ?digits| ?others|spaces(?!non-space)|spaces: at
  // each position the first alternative that matches, each run as long as it goes.
  static std::vector<std::string> pieces(const std::string& s) {
    auto kind_at = [&](size_t i) { return kind(static_cast<unsigned char>(s[i])); };
    auto run_end = [&](size_t i, int k) {
      while (i < s.size() && kind_at(i) == k) ++i;
      return i;
    };
    std::vector<std::string> out;
    size_t i = 0;
    while (i < s.size()) {
      size_t end = i;
      if (s[i] == '\'') {
        for (const char* c : {"s", "t", "re", "ve", "m", "ll", "d"})
          if (s.compare(i + 1, std::strlen(c), c) == 0) {
            end = i + 1 + std::strlen(c);
            break;
          }
      }
      if (end == i && s[i] == ' ' && i + 1 < s.size() && kind_at(i + 1) != 0) {
        end = run_end(i + 1, kind_at(i + 1));  // one space and the run after it
      } else if (end == i && kind_at(i) != 0) {
        end = run_end(i, kind_at(i));
      } else if (end == i) {  // whitespace: all of it, but the last one when a non-space follows
        end = run_end(i, 0);
        if (end < s.size() && end - i > 1) --end;
      }
      out.push_back(s.substr(i, end - i));
      i = end;
    }
    return out;
  }
  void merge(std::vector<std::string>& parts) const {
    while (parts.size() > 1) {
      int best = INT_MAX;
      size_t at = 0;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        auto it = ranks_.find(parts[i] + "\n" + parts[i + 1]);
        if (it != ranks_.end() && it->second < best) best = it->second, at = i;
      }
      if (best == INT_MAX) return;
      parts[at] += parts[at + 1];
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
  }

  std::unordered_map<std::string, int64_t> ids_;
  std::unordered_map<int64_t, std::string> tokens_;
  std::unordered_map<std::string, int> ranks_;
  std::string byte_char_[256];
  std::unordered_map<std::string, char> char_byte_;
};

}  // namespace gpt2_example
