// One run per dump folder, and per checkpoint folder. RunLock takes an exclusive lock (flock) on
// <folder>/.titan.lock for the run's life and writes the holder's pid and host into it. A second
// `titan train` on the same folder gets a one-line ConfigError (exit 2) naming the holder, before
// it writes anything (config.toml, metrics, checkpoints). The OS releases the lock when the holder
// exits or dies, so a killed run leaves no stale lock (the file stays; its content is only a label).
// A .titan.lock that is a symbolic link is refused, never followed (it would truncate its target).
#pragma once

#include <string>

namespace titan::train {

class RunLock {
 public:
  // `field` names the folder's config field in errors: "job.dump_folder", "checkpoint.folder".
  // The folder is created when missing.
  RunLock(const std::string& folder, const std::string& field);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace titan::train
