// defines: data::WordPieceTokenizer (wordpiece.h): BertTokenizer's basic tokenizer (unicode_text.h's classes) and
// the greedy longest-match sub-word split.
#include "ember/data/wordpiece.h"

#include <algorithm>
#include <sstream>

#include "ember/core/factory.h"
#include "ember/core/file_io.h"
#include "unicode_text.h"

namespace ember::data {

WordPieceTokenizer WordPieceTokenizer::from_file(const std::string& vocab_path, WordPieceOptions options) {
  std::istringstream in(read_file(vocab_path, "WordPieceTokenizer::from_file"));
  std::vector<std::string> vocab;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    (void)unicode::decode_utf8(
        line, detail::str("WordPieceTokenizer::from_file: \"", vocab_path, "\" line ", vocab.size() + 1));
    vocab.push_back(std::move(line));
  }
  EMBER_CHECK_VALUE(!vocab.empty(), "WordPieceTokenizer::from_file: \"", vocab_path, "\" has no tokens");
  return WordPieceTokenizer(std::move(vocab), std::move(options));
}

WordPieceTokenizer::WordPieceTokenizer(std::vector<std::string> vocab, WordPieceOptions options)
    : vocab_(std::move(vocab)), opts_(std::move(options)) {
  EMBER_CHECK_VALUE(opts_.max_length >= 2, "WordPieceTokenizer: max_length must be at least 2 ([CLS] and [SEP]), got ",
                    opts_.max_length);
  EMBER_CHECK_VALUE(opts_.max_word_chars > 0, "WordPieceTokenizer: max_word_chars must be positive, got ",
                    opts_.max_word_chars);
  for (size_t i = 0; i < vocab_.size(); ++i) {
    const auto [it, fresh] = ids_.emplace(vocab_[i], static_cast<int64_t>(i));
    EMBER_CHECK_VALUE(fresh, "WordPieceTokenizer: token \"", vocab_[i], "\" is listed twice (ids ", it->second, " and ",
                      i, ")");
  }
  auto special = [&](const std::string& token, const char* option) {
    const auto it = ids_.find(token);
    EMBER_CHECK_VALUE(it != ids_.end(), "WordPieceTokenizer: the vocabulary has no ", option, " \"", token,
                      "\" (set WordPieceOptions::", option, ")");
    return it->second;
  };
  unk_ = special(opts_.unk_token, "unk_token");
  cls_ = special(opts_.cls_token, "cls_token");
  sep_ = special(opts_.sep_token, "sep_token");
  pad_ = special(opts_.pad_token, "pad_token");
}

namespace {
// BertTokenizer's basic tokenizer: cleaned, split on white space and punctuation, folded when uncased.
std::vector<std::u32string> basic_words(const std::u32string& text, bool uncased) {
  std::vector<std::u32string> words;
  std::u32string word;
  auto end_word = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (char32_t c : text) {
    if (c == 0 || c == 0xFFFD || unicode::is_control(c)) continue;
    if (unicode::is_whitespace(c)) {
      end_word();
      continue;
    }
    if (uncased && (c = unicode::fold_uncased(c)) == 0) continue;  // an accent, stripped
    if (unicode::is_punctuation(c) || unicode::is_cjk(c)) {        // a word of its own
      end_word();
      words.push_back(std::u32string(1, c));
      continue;
    }
    word.push_back(c);
  }
  end_word();
  return words;
}
}  // namespace

void WordPieceTokenizer::split_word(const std::u32string& word, std::vector<std::string>& out) const {
  if (static_cast<int64_t>(word.size()) > opts_.max_word_chars) {
    out.push_back(opts_.unk_token);
    return;
  }
  std::vector<std::string> pieces;
  size_t start = 0;
  while (start < word.size()) {
    // The longest piece of the vocabulary starting at `start` ("##"-prefixed after the first).
    std::string found;
    for (size_t end = word.size(); end > start; --end) {
      std::string piece = (start > 0 ? "##" : "") + unicode::encode_utf8(word.substr(start, end - start));
      if (ids_.count(piece)) {
        found = std::move(piece);
        start = end;
        break;
      }
    }
    if (found.empty()) {  // no piece fits: the whole word is unknown
      out.push_back(opts_.unk_token);
      return;
    }
    pieces.push_back(std::move(found));
  }
  out.insert(out.end(), pieces.begin(), pieces.end());
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  const std::u32string cps = unicode::decode_utf8(text, "WordPieceTokenizer: the text");
  std::vector<std::string> out;
  for (const std::u32string& word : basic_words(cps, opts_.lower_case)) split_word(word, out);
  return out;
}

std::vector<int64_t> WordPieceTokenizer::encode(std::string_view text) const {
  const std::vector<std::string> pieces = tokenize(text);
  const size_t keep = std::min(pieces.size(), static_cast<size_t>(opts_.max_length - 2));
  std::vector<int64_t> ids = {cls_};
  for (size_t i = 0; i < keep; ++i) ids.push_back(ids_.at(pieces[i]));
  ids.push_back(sep_);
  return ids;
}

Encoding WordPieceTokenizer::operator()(const std::vector<std::string>& texts) const {
  EMBER_CHECK_VALUE(!texts.empty(), "WordPieceTokenizer: no texts to encode");
  std::vector<std::vector<int64_t>> rows;
  size_t width = 0;
  for (const std::string& t : texts) {
    rows.push_back(encode(t));
    width = std::max(width, rows.back().size());
  }
  const auto b = static_cast<int64_t>(rows.size()), w = static_cast<int64_t>(width);
  std::vector<int64_t> ids(rows.size() * width, pad_), mask(rows.size() * width, 0);
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t i = 0; i < rows[r].size(); ++i) {
      ids[r * width + i] = rows[r][i];
      mask[r * width + i] = 1;
    }
  return {tensor<int64_t>(ids, {b, w}), tensor<int64_t>(mask, {b, w}), zeros({b, w}, {.dtype = kInt64})};
}

int64_t WordPieceTokenizer::token_to_id(std::string_view token) const {
  const auto it = ids_.find(std::string(token));
  EMBER_CHECK(it != ids_.end(), IndexError, "WordPieceTokenizer::token_to_id: \"", token,
              "\" is not in the vocabulary of ", vocab_.size(), " tokens");
  return it->second;
}

const std::string& WordPieceTokenizer::id_to_token(int64_t id) const {
  EMBER_CHECK(id >= 0 && id < vocab_size(), IndexError, "WordPieceTokenizer::id_to_token: id ", id,
              " is out of range for a vocabulary of ", vocab_.size(), " tokens");
  return vocab_[static_cast<size_t>(id)];
}

}  // namespace ember::data
