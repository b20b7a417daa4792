// defines: data::WordPieceTokenizer, BERT's tokenizer over a vocab.txt (one token per line, the line number is its
// id), as Hugging Face's BertTokenizer does it: clean the text (control characters out, every white space a space),
// put spaces around CJK ideographs, split on white space, lower-case and strip accents (uncased models), split off
// every punctuation character, then cut each word into the longest sub-words of the vocabulary from the left, the
// pieces after the first spelled "##piece" ([UNK] for a word that cannot be cut, or of more than 100 characters).
//
//   auto tok = data::WordPieceTokenizer::from_file(dir + "/vocab.txt");
//   data::Encoding batch = tok({"A man is eating food.", "Someone is playing a guitar."});
//   Tensor h = bert(batch.input_ids, batch.attention_mask);   // [2, T] int64 each, padded with [PAD]
//
// Text is UTF-8; bytes that are not valid UTF-8 (in the text or in vocab.txt) are a ValueError naming where. Case
// and accents: lower-casing covers Latin, Greek and Cyrillic letters; accents come off the Latin letters of
// Latin-1 and Latin Extended-A and every combining mark (U+0300-U+036F) is dropped, as NFD then dropping marks
// does; characters of other scripts pass as they are. Punctuation is ASCII's and the Unicode punctuation of Latin-1,
// General Punctuation, CJK Symbols and the fullwidth forms.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ember/core/tensor.h"

namespace ember::data {

struct WordPieceOptions {
  bool lower_case = true;    // uncased models (do_lower_case); also strips accents, as BertTokenizer does then
  int64_t max_length = 512;  // [CLS] and [SEP] included; longer texts are truncated (the model's max positions)
  int64_t max_word_chars = 100;
  std::string unk_token = "[UNK]", cls_token = "[CLS]", sep_token = "[SEP]", pad_token = "[PAD]";
};

// A batch of texts, padded to the longest: each [batch, T] int64.
struct Encoding {
  Tensor input_ids;       // [CLS] tokens [SEP] [PAD] ...
  Tensor attention_mask;  // 1 for a real token, 0 for padding
  Tensor token_type_ids;  // 0 (one segment per text)
};

class WordPieceTokenizer {
 public:
  // Reads vocab.txt (IOError when it cannot be read; ValueError for a line that is not UTF-8, a token listed
  // twice, or a special token of the options that is missing).
  static WordPieceTokenizer from_file(const std::string& vocab_path, WordPieceOptions options = {});
  explicit WordPieceTokenizer(std::vector<std::string> vocab, WordPieceOptions options = {});

  // The word pieces of one text, without [CLS]/[SEP]: "Unaffable!" -> "una", "##ff", "##able", "!".
  std::vector<std::string> tokenize(std::string_view text) const;
  // One text's ids: [CLS] pieces [SEP], truncated to max_length.
  std::vector<int64_t> encode(std::string_view text) const;
  // A padded batch (at least one text).
  Encoding operator()(const std::vector<std::string>& texts) const;

  int64_t vocab_size() const { return static_cast<int64_t>(vocab_.size()); }
  // The id of a token (IndexError naming it when the vocabulary lacks it), and back.
  int64_t token_to_id(std::string_view token) const;
  const std::string& id_to_token(int64_t id) const;

 private:
  // The longest-match pieces of one word (already cleaned, lower-cased, split) appended to `out`.
  void split_word(const std::u32string& word, std::vector<std::string>& out) const;
  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int64_t> ids_;
  WordPieceOptions opts_;
  int64_t unk_ = 0, cls_ = 0, sep_ = 0, pad_ = 0;
};

}  // namespace ember::data
