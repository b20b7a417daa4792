// data::WordPieceTokenizer (issue 34, item 4): BertTokenizer's splitting (the expected pieces were checked against
// Hugging Face's BertTokenizer over the same small vocabulary), [CLS]/[SEP]/[PAD], truncation, the attention mask,
// and bad input: invalid UTF-8 in the text or in vocab.txt, a missing file, duplicate or missing tokens.
#include <fstream>

#include "ember/data/wordpiece.h"
#include "test_util.h"

using namespace ember;
using data::WordPieceTokenizer;

namespace {

std::vector<std::string> small_vocab() {
  return {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "!", "hello", "world", ",", "the",  "cafe",
          "a",     "##b",   "##bc",  "$",     "你", "naive", "'",      "s", "don",   "t",     ".", "play", "##ing"};
}
using Pieces = std::vector<std::string>;

}  // namespace

TEST(WordPiece, GreedyLongestMatchSubWords) {
  WordPieceTokenizer tok(small_vocab());
  EXPECT_EQ(tok.tokenize("Unaffable!"), (Pieces{"un", "##aff", "##able", "!"}));
  EXPECT_EQ(tok.tokenize("playing"), (Pieces{"play", "##ing"}));
  // "abc": "a" then the longest continuation "##bc", not "##b" + "##c".
  EXPECT_EQ(tok.tokenize("abc"), (Pieces{"a", "##bc"}));
  // A word with a part no piece covers is one [UNK], whole.
  EXPECT_EQ(tok.tokenize("unx hello"), (Pieces{"[UNK]", "hello"}));
  EXPECT_EQ(tok.tokenize(""), Pieces{});
}

TEST(WordPiece, CleansSplitsAndFoldsAsBertTokenizer) {
  WordPieceTokenizer tok(small_vocab());
  // Case, accents (é is U+00E9; the second "cafe" spells it e + U+0301), punctuation split off every word.
  EXPECT_EQ(tok.tokenize("HELLO,World! Caf\xC3\xA9 cafe\xCC\x81"),
            (Pieces{"hello", ",", "world", "!", "cafe", "cafe"}));
  EXPECT_EQ(tok.tokenize("Na\xC3\x8Fve don't"), (Pieces{"naive", "don", "'", "t"}));
  // ASCII symbols count as punctuation ("$"); so do Unicode's (U+2019, right single quote: no piece: [UNK]).
  EXPECT_EQ(tok.tokenize("$hello\xE2\x80\x99s"), (Pieces{"$", "hello", "[UNK]", "s"}));
  // White space of every kind splits (no-break space, tab, newline); control characters vanish inside a word.
  EXPECT_EQ(tok.tokenize("hello\xC2\xA0world\tthe\nhel\x01lo"), (Pieces{"hello", "world", "the", "hello"}));
  // Each CJK ideograph is a word of its own.
  EXPECT_EQ(tok.tokenize("\xE4\xBD\xA0\xE4\xBD\xA0hello"), (Pieces{"你", "你", "hello"}));
  // Cased: nothing folded.
  WordPieceTokenizer cased(small_vocab(), {.lower_case = false});
  EXPECT_EQ(cased.tokenize("Hello hello"), (Pieces{"[UNK]", "hello"}));
  // A word over max_word_chars is [UNK] without trying pieces.
  WordPieceTokenizer short_words(small_vocab(), {.max_word_chars = 4});
  EXPECT_EQ(short_words.tokenize("hello the"), (Pieces{"[UNK]", "the"}));
}

TEST(WordPiece, EncodesPadsAndMasksABatch) {
  WordPieceTokenizer tok(small_vocab());
  EXPECT_EQ(tok.encode("Hello world!"), (std::vector<int64_t>{2, 8, 9, 7, 3}));
  const data::Encoding e = tok({"Hello world!", "the", "unaffable"});
  EXPECT_EQ(e.input_ids.shape(), Shape({3, 5}));
  EXPECT_EQ(e.input_ids.dtype(), kInt64);
  EXPECT_EQ(e.input_ids.to_vector<int64_t>(), (std::vector<int64_t>{2, 8, 9, 7, 3, 2, 11, 3, 0, 0, 2, 4, 5, 6, 3}));
  EXPECT_EQ(e.attention_mask.to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(e.token_type_ids.to_vector<int64_t>(), std::vector<int64_t>(15, 0));
  // Truncation keeps [CLS] and [SEP].
  WordPieceTokenizer four(small_vocab(), {.max_length = 4});
  EXPECT_EQ(four.encode("hello world the cafe"), (std::vector<int64_t>{2, 8, 9, 3}));
  EXPECT_EQ(tok.token_to_id("cafe"), 12);
  EXPECT_EQ(tok.id_to_token(12), "cafe");
  EXPECT_EQ(tok.vocab_size(), 26);
}

TEST(WordPiece, ReadsVocabTxt) {
  const auto dir = test::tmpdir("wordpiece");
  const std::string path = (dir / "vocab.txt").string();
  {
    std::ofstream f(path, std::ios::binary);
    for (const std::string& t : small_vocab()) f << t << "\r\n";  // Windows line ends too
  }
  WordPieceTokenizer tok = WordPieceTokenizer::from_file(path);
  EXPECT_EQ(tok.tokenize("Unaffable!"), (Pieces{"un", "##aff", "##able", "!"}));
  EXPECT_EQ(tok.token_to_id("[SEP]"), 3);
}

TEST(WordPiece, BadInputIsAClearError) {
  WordPieceTokenizer tok(small_vocab());
  EXPECT_THROW_MSG((void)tok.tokenize("hello \xFF"), ValueError, "the text is not valid UTF-8 at byte 6");
  EXPECT_THROW_MSG((void)tok.tokenize("\xC0\x80"), ValueError, "not valid UTF-8 at byte 0");      // overlong NUL
  EXPECT_THROW_MSG((void)tok.tokenize("\xED\xA0\x80"), ValueError, "not valid UTF-8 at byte 0");  // a surrogate
  EXPECT_THROW_MSG((void)tok.tokenize("ab\xE4\xBD"), ValueError, "not valid UTF-8 at byte 2");    // cut short
  EXPECT_THROW_MSG((void)tok(std::vector<std::string>{}), ValueError, "no texts to encode");
  EXPECT_THROW_MSG((void)tok.token_to_id("zebra"), IndexError, "\"zebra\" is not in the vocabulary of 26 tokens");
  EXPECT_THROW_MSG((void)tok.id_to_token(26), IndexError, "id 26 is out of range");

  std::vector<std::string> twice = small_vocab();
  twice.push_back("hello");
  EXPECT_THROW_MSG(WordPieceTokenizer{twice}, ValueError, "token \"hello\" is listed twice (ids 8 and 26)");
  std::vector<std::string> no_unk = small_vocab();
  no_unk[1] = "[unk]";
  EXPECT_THROW_MSG(WordPieceTokenizer{no_unk}, ValueError, "has no unk_token \"[UNK]\"");
  EXPECT_THROW_MSG(WordPieceTokenizer(small_vocab(), {.max_length = 1}), ValueError, "max_length must be at least 2");

  EXPECT_THROW_MSG(WordPieceTokenizer::from_file("/nonexistent/vocab.txt"), IOError,
                   "WordPieceTokenizer::from_file: cannot open /nonexistent/vocab.txt");
  const auto dir = test::tmpdir("wordpiece_bad");
  const std::string path = (dir / "vocab.txt").string();
  {
    std::ofstream f(path, std::ios::binary);
    f << "[PAD]\n[UNK]\ncaf\xE9\n";  // Latin-1, not UTF-8
  }
  EXPECT_THROW_MSG(WordPieceTokenizer::from_file(path), ValueError, "vocab.txt\" line 3 is not valid UTF-8 at byte 3");
}
