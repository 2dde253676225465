// The rule for the single files the CLI writes (forward's and generate's --out): titan replaces
// only what it wrote. A new path is fine; an existing file is replaced only when it is a
// safetensors file whose metadata says a titan command wrote it, so `--out MODEL/model.safetensors`
// or `--out MODEL/config.json` is refused before any work instead of destroying the model read.
#pragma once

#include <map>
#include <string>

namespace titan::cli {

// The safetensors metadata that marks `command`'s output ({"written_by": "titan forward"}).
std::map<std::string, std::string> output_metadata(const std::string& command);

// Throws UsageError naming `flag`, the path and the fix when `path` exists and is not a file a
// titan command wrote (or is a folder, a FIFO, ...).
void check_output_file(const std::string& command, const std::string& flag, const std::string& path);

}  // namespace titan::cli
