// defines (internal to data/): the few Unicode facts BERT's tokenizer needs, without ICU: UTF-8 decoding and
// encoding, the character classes of Hugging Face's BasicTokenizer (white space, control, punctuation, CJK
// ideograph) and the lower-casing with accents stripped of uncased models, over the ranges wordpiece.h lists.
#pragma once
#include <string>
#include <string_view>

namespace ember::data::unicode {

// The code points of UTF-8 text; ValueError "<what> is not valid UTF-8 at byte N" for a bad or overlong sequence,
// a surrogate or a code point past U+10FFFF.
std::u32string decode_utf8(std::string_view text, const std::string& what);
std::string encode_utf8(std::u32string_view cps);

bool is_whitespace(char32_t c);   // space, \t, \n, \r and the Zs spaces
bool is_control(char32_t c);      // Cc and Cf, except \t, \n, \r (dropped, as NUL and U+FFFD)
bool is_punctuation(char32_t c);  // ASCII's non-alphanumeric symbols and Unicode's P* (unicode_punct.inc)
bool is_cjk(char32_t c);          // CJK Unified Ideographs and their extensions, compatibility ideographs

// c lower-cased with its accents removed (0: a combining mark, dropped). Ranges: ASCII, Latin-1, Latin
// Extended-A, Greek, Cyrillic; other characters are returned as they are.
char32_t fold_uncased(char32_t c);

}  // namespace ember::data::unicode
