// defines: unicode_text.h's decoding and character classes.
#include "unicode_text.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "ember/core/error.h"

namespace ember::data::unicode {

std::u32string decode_utf8(std::string_view s, const std::string& what) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
    EMBER_CHECK_VALUE(len > 0 && i + len <= s.size(), what, " is not valid UTF-8 at byte ", i);
    char32_t cp = len == 1 ? b0 : b0 & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<uint8_t>(s[i + k]);
      EMBER_CHECK_VALUE((b & 0xC0) == 0x80, what, " is not valid UTF-8 at byte ", i + k);
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};  // shorter forms are overlong
    EMBER_CHECK_VALUE(cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF), what,
                      " is not valid UTF-8 at byte ", i);
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string encode_utf8(std::u32string_view cps) {
  std::string out;
  for (char32_t c : cps) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

namespace {
bool in(char32_t c, char32_t lo, char32_t hi) { return c >= lo && c <= hi; }
}  // namespace

bool is_whitespace(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0xA0 || c == 0x1680 || in(c, 0x2000, 0x200A) ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return c < 0x20 || in(c, 0x7F, 0x9F) || c == 0xAD || in(c, 0x600, 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F ||
         c == 0x890 || c == 0x891 || c == 0x8E2 || c == 0x180E || in(c, 0x200B, 0x200F) || in(c, 0x202A, 0x202E) ||
         in(c, 0x2060, 0x2064) || in(c, 0x2066, 0x206F) || c == 0xFEFF || in(c, 0xFFF9, 0xFFFB);
}

bool is_punctuation(char32_t c) {
  // Sorted, disjoint [lo, hi] ranges; BERT counts every non-alphanumeric ASCII symbol ("$", "^", "`") too.
  static constexpr char32_t kRanges[][2] = {
#include "unicode_punct.inc"
  };
  const auto* r = std::upper_bound(std::begin(kRanges), std::end(kRanges), c,
                                   [](char32_t v, const char32_t(&range)[2]) { return v < range[0]; });
  return r != std::begin(kRanges) && c <= (*(r - 1))[1];
}

bool is_cjk(char32_t c) {
  return in(c, 0x4E00, 0x9FFF) || in(c, 0x3400, 0x4DBF) || in(c, 0x20000, 0x2A6DF) || in(c, 0x2A700, 0x2B73F) ||
         in(c, 0x2B740, 0x2B81F) || in(c, 0x2B820, 0x2CEAF) || in(c, 0xF900, 0xFAFF) || in(c, 0x2F800, 0x2FA1F);
}

namespace {
// The base letter of U+00C0..U+00FF and U+0100..U+017F once lower-cased and decomposed; '.' where the letter has
// no canonical decomposition (Æ, Ø, Đ, Ł, Œ, ...) and keeps its own lower-case form, '=' for a character that
// stays as it is (×, ß, ÷).
constexpr std::string_view kLatin1 = "aaaaaa.ceeeeiiii.nooooo=.uuuuy.=aaaaaa.ceeeeiiii.nooooo=.uuuuy.y";
constexpr std::string_view kLatinExtA =
    "aaaaaaccccccccdd..eeeeeeeeeegggggggghh..iiiiiiiii...jjkk.llllll....nnnnnn...oooooo..rrrrrrsssssssstttt..uuuu"
    "uuuuuuuuwwyyyzzzzzz.";
static_assert(kLatin1.size() == 64 && kLatinExtA.size() == 128);

// Latin Extended-A pairs its cases: upper at even code points in U+0100-U+0137 and U+014A-U+0177, at odd ones in
// U+0139-U+0148 and U+0179-U+017E.
bool is_upper_latin_ext_a(char32_t c) {
  if (in(c, 0x100, 0x137) || in(c, 0x14A, 0x177)) return c % 2 == 0;
  if (in(c, 0x139, 0x148) || in(c, 0x179, 0x17E)) return c % 2 == 1;
  return false;
}
}  // namespace

char32_t fold_uncased(char32_t c) {
  if (c < 0x80) return in(c, 'A', 'Z') ? c + 32 : c;
  if (in(c, 0x300, 0x36F)) return 0;  // a combining mark: what stripping accents removes
  if (in(c, 0xC0, 0xFF)) {
    const char base = kLatin1[c - 0xC0];
    if (base == '=') return c;
    return base == '.' ? (c < 0xE0 ? c + 32 : c) : static_cast<char32_t>(base);
  }
  if (in(c, 0x100, 0x17F)) {
    if (c == 0x178) return 'y';  // Ÿ
    const char base = kLatinExtA[c - 0x100];
    return base == '.' ? (is_upper_latin_ext_a(c) ? c + 1 : c) : static_cast<char32_t>(base);
  }
  if (in(c, 0x391, 0x3A9) && c != 0x3A2) return c + 32;  // Greek capitals
  if (in(c, 0x410, 0x42F)) return c + 32;                // Cyrillic А..Я
  if (in(c, 0x400, 0x40F)) return c + 80;                // Cyrillic Ѐ..Џ
  return c;
}

}  // namespace ember::data::unicode
