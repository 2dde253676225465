// UTF-8 validation for the text titan reads (datasets, Parquet columns).
#pragma once

#include <cstddef>
#include <string>

namespace titan {

// True when `bytes` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF);
// `bad_at` then gets the offset of the first bad byte.
bool valid_utf8(const std::string& bytes, size_t* bad_at = nullptr);

}  // namespace titan
