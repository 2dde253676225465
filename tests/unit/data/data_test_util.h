// Helpers shared by the dataset and loader tests: a per-test temp folder, file writing, and
// paragraphs of tinyshakespeare as small real documents.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ops/op_harness.h"

namespace titan::data::testing {

// A fresh folder per test (ctest runs tests as parallel processes), removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            (std::string("titan_data_") + info->test_suite_name() + "_" + info->name() + "_" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// The first `count` blank-line-separated paragraphs of tinyshakespeare (lines joined by '\n').
inline std::vector<std::string> shakespeare(size_t count) {
  std::ifstream in(titan::testing::source_path("../shared/assets/text/tinyshakespeare.txt"));
  EXPECT_TRUE(in.good()) << "tinyshakespeare.txt is missing";
  std::vector<std::string> docs;
  std::string line, doc;
  while (docs.size() < count && std::getline(in, line)) {
    if (line.empty()) {
      if (!doc.empty()) docs.push_back(doc);
      doc.clear();
    } else {
      doc += doc.empty() ? line : "\n" + line;
    }
  }
  if (docs.size() < count && !doc.empty()) docs.push_back(doc);
  return docs;
}

}  // namespace titan::data::testing
