#include "titan/cli/args.h"

#include "titan/core/error.h"

namespace {

template <class... Parts>
void usage_check(bool ok, Parts&&... parts) {
  if (!ok) throw titan::cli::UsageError(titan::str(std::forward<Parts>(parts)...));
}

}  // namespace

namespace titan::cli {

Args::Args(const std::string& command, const std::vector<FlagSpec>& specs, int argc, char** argv,
           int first)
    : command_(command), specs_(specs) {
  for (const FlagSpec& s : specs_) values_[s.name] = s.is_bool ? (s.fallback.empty() ? "false" : s.fallback) : s.fallback;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help_ = true;
      continue;
    }
    usage_check(arg.rfind("--", 0) == 0, "titan ", command_, ": unexpected argument '", arg,
                "'. HINT: flags look like --name value; see titan ", command_, " --help");
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs_) {
      if (s.name == name) spec = &s;
    }
    if (spec == nullptr) {
      std::string known;
      for (const FlagSpec& s : specs_) known += (known.empty() ? "--" : ", --") + s.name;
      usage_check(false, "titan ", command_, ": unknown flag '--", name, "'. HINT: accepted flags: ", known);
    }
    if (spec->is_bool) {
      values_[name] = has_value ? value : "true";
      continue;
    }
    if (!has_value) {
      usage_check(i + 1 < argc, "titan ", command_, ": flag --", name, " needs a value");
      value = argv[++i];
    }
    values_[name] = value;
  }
  if (help_) return;
  for (const FlagSpec& s : specs_) {
    usage_check(!s.required || !values_[s.name].empty(), "titan ", command_, ": missing required flag --",
                s.name, " (", s.help, ")");
  }
}

std::string Args::get(const std::string& name) const { return values_.at(name); }

int64_t Args::get_int(const std::string& name) const {
  const std::string& v = values_.at(name);
  size_t used = 0;
  int64_t out = 0;
  try {
    out = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  usage_check(used == v.size() && !v.empty(), "titan ", command_, ": --", name,
              " expects an integer, got '", v, "'");
  return out;
}

bool Args::get_bool(const std::string& name) const {
  const std::string& v = values_.at(name);
  usage_check(v == "true" || v == "false" || v == "1" || v == "0", "titan ", command_, ": --", name,
              " expects true or false, got '", v, "'");
  return v == "true" || v == "1";
}

std::string Args::usage() const {
  std::string out = "usage: titan " + command_ + " [flags]\n";
  for (const FlagSpec& s : specs_) {
    out += "  --" + s.name + (s.is_bool ? "" : " VALUE") + "\n      " + s.help;
    if (!s.fallback.empty()) out += " (default: " + s.fallback + ")";
    if (s.required) out += " (required)";
    out += "\n";
  }
  return out;
}

}  // namespace titan::cli
