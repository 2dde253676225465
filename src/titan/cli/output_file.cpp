#include "titan/cli/output_file.h"

#include <sys/stat.h>

#include "titan/checkpoint/safetensors.h"
#include "titan/cli/args.h"
#include "titan/core/error.h"

namespace titan::cli {

namespace {
constexpr const char* kWrittenBy = "written_by";
}  // namespace

std::map<std::string, std::string> output_metadata(const std::string& command) {
  return {{kWrittenBy, "titan " + command}};
}

void check_output_file(const std::string& command, const std::string& flag, const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // nothing there yet
  std::string why;
  if (!S_ISREG(st.st_mode)) {
    why = S_ISLNK(st.st_mode) ? "is a symbolic link" : "is not a regular file";
  } else {
    try {
      const std::map<std::string, std::string> meta = ckpt::SafetensorsFile::open(path).metadata();
      const auto it = meta.find(kWrittenBy);
      if (it == meta.end() || !it->second.starts_with("titan ")) why = "is a file titan did not write";
    } catch (const Error&) {
      why = "is a file titan did not write";
    }
  }
  if (!why.empty()) {
    throw UsageError(str("titan ", command, ": --", flag, " ", path, " ", why,
                         " (a model's or another program's); titan replaces only its own outputs. HINT: pass a new "
                         "path for --", flag));
  }
}

}  // namespace titan::cli
