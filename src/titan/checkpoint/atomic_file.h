// Whole-file writes that never leave half a file behind (STYLE.md habit 5): the content goes to
// "<path>.tmp.<pid>", is flushed and fsync'd, then renamed over `path`. On any failure (including
// an exception thrown by `write`) the tmp file is removed and `path` keeps its old content.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace titan::ckpt {

void write_file_atomic(const std::string& path, const std::function<void(std::ostream&)>& write);

// Convenience for text files (config.json, index.json, manifests).
void write_text_file_atomic(const std::string& path, const std::string& text);

}  // namespace titan::ckpt
