#include "titan/data/builtin_datasets.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "titan/core/error.h"

// The corpus file is embedded by the assembler; TITAN_QUICKSTART_CORPUS is its build-tree path.
__asm__(
    ".pushsection .rodata\n"
    ".balign 16\n"
    "titan_quickstart_corpus_begin:\n"
    ".incbin \"" TITAN_QUICKSTART_CORPUS "\"\n"
    "titan_quickstart_corpus_end:\n"
    ".byte 0\n"
    ".popsection\n");
extern "C" const char titan_quickstart_corpus_begin[];
extern "C" const char titan_quickstart_corpus_end[];

namespace titan::data {

std::vector<std::string> builtin_dataset_names() { return {"quickstart"}; }

std::string_view builtin_dataset_text(const std::string& name) {
  if (name == "quickstart") {
    return {titan_quickstart_corpus_begin,
            static_cast<size_t>(titan_quickstart_corpus_end - titan_quickstart_corpus_begin)};
  }
  std::string known;
  for (const std::string& n : builtin_dataset_names()) known += (known.empty() ? "" : ", ") + n;
  TITAN_FAIL("[data] unknown built-in dataset '", name, "'; built in: ", known,
             ". HINT: set training.dataset to one of them, or training.dataset_path to your own files");
}

std::string materialize_builtin_dataset(const std::string& name, const std::string& folder) {
  const std::string_view text = builtin_dataset_text(name);
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  TITAN_CHECK(!ec && std::filesystem::is_directory(folder), "[data] cannot create ", folder, ": ",
              ec ? ec.message() : "a file is in the way", ". HINT: choose a writable job.dump_folder");
  const std::filesystem::path path = std::filesystem::path(folder) / (name + ".txt");
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream existing;
      existing << in.rdbuf();
      if (existing.view() == text) return path.string();
    }
  }
  const std::string tmp = str(path.string(), ".tmp.", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();
    TITAN_CHECK(out.good(), "[data] cannot write ", tmp, ". HINT: check free space in ", folder);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::remove(tmp.c_str());
  TITAN_CHECK(!ec, "[data] cannot rename ", tmp, " to ", path.string(), ": ", ec.message());
  return path.string();
}

}  // namespace titan::data
