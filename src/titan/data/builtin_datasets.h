// Datasets built into the binary, so a first run needs no download and no files of the user's.
//   quickstart  titan's own README, docs and sources (each file after a "# file: <path>" line),
//               concatenated at build time (src/titan/data/CMakeLists.txt) and embedded; a few
//               hundred KB of English and C++, enough to watch the debug model learn.
// The loader reads files, so a run writes the text out once (materialize_builtin_dataset).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace titan::data {

std::vector<std::string> builtin_dataset_names();
// Throws naming the registered datasets when `name` is not one of them.
std::string_view builtin_dataset_text(const std::string& name);
// Writes the text to folder/<name>.txt (created; tmp + rename; skipped when the file already holds
// exactly this text) and returns that path, for DatasetConfig::path.
std::string materialize_builtin_dataset(const std::string& name, const std::string& folder);

}  // namespace titan::data
