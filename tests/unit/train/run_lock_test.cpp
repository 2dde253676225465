// RunLock: one titan train per dump folder (flock: released by the OS when the holder ends).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "ops/op_harness.h"
#include "titan/config/config_error.h"
#include "titan/train/run_lock.h"

namespace titan::train {
namespace {

namespace fs = std::filesystem;

TEST(RunLock, SecondHolderIsRefusedNamingTheFirstUntilItEnds) {
  const fs::path dir = fs::temp_directory_path() / ("titan_run_lock_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    RunLock first(dir.string(), "job.dump_folder");
    // A second open of the file is another lock holder (flock is per open file description).
    const std::string message = testing::error_of([&] { RunLock second(dir.string(), "job.dump_folder"); });
    EXPECT_NE(message.find("is in use by another titan train (pid " + std::to_string(::getpid()) + " on "),
              std::string::npos) << message;
    EXPECT_NE(message.find("HINT: wait for that run, or pass another --job.dump_folder"), std::string::npos) << message;
    bool config_error = false;
    try {
      RunLock second(dir.string(), "job.dump_folder");
    } catch (const config::ConfigError&) {
      config_error = true;  // exit code 2
    }
    EXPECT_TRUE(config_error);
  }
  EXPECT_NO_THROW(RunLock again(dir.string(), "job.dump_folder"));  // released with the first holder
  fs::remove_all(dir);
}

}  // namespace
}  // namespace titan::train
