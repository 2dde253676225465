// Nesting limits for the structured text titan reads (JSON files and lines, TOML job files).
// titan's readers and the JSON/TOML libraries walk nested values recursively (copies, type
// checks, destructors), so a file nested 100,000 deep overflows the stack: a crash instead of an
// error. Real files nest a few levels deep; tokenizers (serde_json) stops at 128, Python's json
// near 1,000. The check is one pass over the bytes before any parser sees them.
#pragma once

#include <string>
#include <string_view>

namespace titan {

// Deeper than this is refused: far above any published file, far below a stack overflow.
inline constexpr int kMaxJsonNesting = 256;

// Throws titan::Error "<where>: nested more than 256 levels deep (arrays/objects) at line L. HINT:
// ..." when an array or object in `text` nests deeper than kMaxJsonNesting. Strings (and the
// brackets inside them) are skipped; the text need not be valid JSON (the parser says why not).
void check_json_nesting(std::string_view text, const std::string& where);

// The byte offset of the first bracket past the limit, or npos: for callers that skip a bad
// line instead of failing (a JSONL dataset).
size_t json_too_deep_at(std::string_view text);

// Dotted parts of TOML table headers ([a.b.c]) and keys (a.b.c = 1): a job file needs two
// ([section] and field); more than kMaxTomlKeyParts in one header or key is refused before
// parsing, with "<where>:LINE: ...". Quoted parts are counted as one each.
inline constexpr int kMaxTomlKeyParts = 64;
void check_toml_key_parts(std::string_view text, const std::string& where);

}  // namespace titan
