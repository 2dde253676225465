// Helpers shared by the checkpoint tests: a per-test temp folder, raw file writing, and an
// assertion that a call throws one titan::Error line containing given parts.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "titan/core/error.h"

namespace titan::ckpt::testing {

// A fresh folder under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("titan_ckpt_") + std::to_string(::getpid()) + "_" +
                             (info ? std::string(info->test_suite_name()) + "_" + info->name() : "x");
    for (char& c : name) c = c == '/' ? '_' : c;  // parameterized test names contain '/'
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Names of everything directly inside the folder (to spot leftover tmp files).
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_)) out.push_back(e.path().filename());
    return out;
  }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream os(path, std::ios::binary | std::ios::trunc);
  os.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(os.good()) << "cannot write test file " << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream is(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(is), std::istreambuf_iterator<char>());
}

inline std::string le64(uint64_t n) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &n, 8);
  return s;
}

// Runs fn; passes when it throws titan::Error whose message is one line containing every part.
template <class Fn>
::testing::AssertionResult throws_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const titan::Error& e) {
    const std::string msg = e.what();
    if (msg.find('\n') != std::string::npos) {
      return ::testing::AssertionFailure() << "message is not one line: " << msg;
    }
    for (const auto& part : parts) {
      if (msg.find(part) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks \"" << part << "\": " << msg;
      }
    }
    return ::testing::AssertionSuccess() << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-titan exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

}  // namespace titan::ckpt::testing
