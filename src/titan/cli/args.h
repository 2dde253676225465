// A small command-line reader for subcommands: "--name value", "--name=value" and boolean
// "--flag". Every flag a subcommand accepts is declared with its help; anything else is a
// one-line error listing the accepted flags.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "titan/core/error.h"

namespace titan::cli {

// A mistake on the command line (unknown flag, missing value): main exits with code 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

struct FlagSpec {
  std::string name;   // without "--"
  std::string help;
  std::string fallback;  // default value; "" with is_bool=false means required when `required`
  bool is_bool = false;
  bool required = false;
};

class Args {
 public:
  // Parses argv[first..argc) for `command`; throws titan::Error on unknown or malformed flags.
  Args(const std::string& command, const std::vector<FlagSpec>& specs, int argc, char** argv, int first);

  std::string get(const std::string& name) const;
  int64_t get_int(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  bool help_requested() const { return help_; }
  std::string usage() const;

 private:
  std::string command_;
  std::vector<FlagSpec> specs_;
  std::map<std::string, std::string> values_;
  bool help_ = false;
};

}  // namespace titan::cli
