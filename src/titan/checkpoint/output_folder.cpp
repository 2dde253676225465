#include "titan/checkpoint/output_folder.h"

#include <filesystem>

#include "titan/checkpoint/train_state_files.h"
#include "titan/core/error.h"
#include "titan/core/log.h"

namespace titan::ckpt {
namespace {

namespace fs = std::filesystem;

// The folder with symbolic links resolved (as far as it exists) and a trailing '/', so that
// prefix tests compare whole path components ("/a/b/" is not inside "/a/bc/").
std::string resolved_dir(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path).lexically_normal();
  std::string s = p.string();
  if (s.empty() || s.back() != '/') s += '/';
  return s;
}

bool is_hf_file(const std::string& name) {
  return name.ends_with(".safetensors") || name == "model.safetensors.index.json" || name == "config.json" ||
         name == "generation_config.json" || name.starts_with("tokenizer") || name == "special_tokens_map.json" ||
         name == "vocab.json" || name == "merges.txt";
}

// PEFT's save_pretrained writes a README.md model card beside the adapter.
bool is_adapter_file(const std::string& name) {
  return name == "adapter_config.json" || name == "adapter_model.safetensors" || name == "README.md";
}

}  // namespace

const char* folder_kind_name(FolderKind kind) {
  switch (kind) {
    case FolderKind::hf_model: return "a Hugging Face model folder";
    case FolderKind::peft_adapter: return "a PEFT adapter folder";
    case FolderKind::checkpoints: return "a checkpoint folder of step-<N> folders";
  }
  return "?";
}

bool is_folder_output_of(const std::string& dir, FolderKind kind) {
  std::error_code ec;
  bool any_safetensors = false;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool is_dir = e.is_directory(ec);
    switch (kind) {
      case FolderKind::hf_model:
        if (is_dir || !is_hf_file(name)) return false;
        any_safetensors = any_safetensors || name.ends_with(".safetensors");
        break;
      case FolderKind::peft_adapter:
        if (is_dir || !is_adapter_file(name)) return false;
        break;
      case FolderKind::checkpoints:  // and the lock of a run that wrote them (train/run_lock.h)
        if (name == ".titan.lock" && !is_dir) break;
        if (!is_dir || !name.starts_with("step-")) return false;
        break;
    }
  }
  if (ec) return false;
  switch (kind) {
    case FolderKind::hf_model: return any_safetensors && fs::is_regular_file(fs::path(dir) / "config.json", ec);
    case FolderKind::peft_adapter: return fs::is_regular_file(fs::path(dir) / "adapter_config.json", ec);
    case FolderKind::checkpoints: return true;
  }
  return false;
}

bool folder_contains(const std::string& folder, const std::string& path) {
  return resolved_dir(path).starts_with(resolved_dir(folder));
}

std::string output_folder_problem(const OutputFolder& out, const std::vector<GuardedFolder>& guarded) {
  const std::string name = str(out.flag, " ", out.path);
  const std::string t = resolved_dir(out.path);
  for (const GuardedFolder& g : guarded) {
    if (g.path.empty()) continue;
    const std::string f = resolved_dir(g.path);
    const std::string of = str(g.flag, " ", g.path);
    if (t == f) {
      return str(name, " is ", g.flag, " itself; writing it would replace what ",
                 g.outputs_inside ? "the run" : "the job", " reads and writes there. HINT: choose another ", out.flag);
    }
    if (f.starts_with(t)) {
      return str(name, " holds ", of, "; replacing it would delete that. HINT: choose another ", out.flag);
    }
    if (!g.outputs_inside && t.starts_with(f)) {
      return str(name, " is inside ", of, ", a source that is never written. HINT: choose another ", out.flag);
    }
  }
  std::error_code ec;
  if (!fs::exists(out.path, ec)) return "";
  if (!fs::is_directory(out.path, ec)) {
    return str(name, " is a file, not a folder. HINT: choose another ", out.flag);
  }
  if (fs::is_empty(out.path, ec) || out.overwrite || is_folder_output_of(out.path, out.kind)) return "";
  return str(name, " is not empty and is not ", folder_kind_name(out.kind),
             "; writing it would delete what is there. HINT: choose an empty or new folder, or pass ",
             out.overwrite_flag);
}

int remove_stale_tmp_folders(const std::string& out) {
  const fs::path path(out);
  const fs::path parent = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  const std::string prefix = path.filename().string() + ".tmp.";
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const fs::directory_entry& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    std::string pid = name.substr(prefix.size());
    if (pid.ends_with(".old")) pid.resize(pid.size() - 4);
    const int64_t n = detail::parse_count(pid);
    if (n <= 0 || detail::process_alive(static_cast<long>(n))) continue;
    if (e.is_directory(ec) && !e.is_symlink(ec)) stale.push_back(e.path());
  }
  for (const fs::path& p : stale) {
    fs::remove_all(p, ec);
    if (!ec) log_info(str("[export] removed ", p.string(), ", left by an export that was killed"));
  }
  return static_cast<int>(stale.size());
}

}  // namespace titan::ckpt
