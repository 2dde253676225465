// Checkpoint save / load throughput for a 0.6B-sized training state (Qwen3-0.6B: 596 M parameters,
// fp32 weights + AdamW's two moments = 7.2 GB), against the disk's sequential bandwidth measured by
// dd in the same run, and the training-thread stall of an async save (the state copy).
//
//   build/bench/checkpoint_bench [--dir /tmp/titan_ckpt_bench] [--layers 28] [--no-dd]
// Needs ~2x the state size free under --dir. Load is timed after dropping the page cache (root
// only; otherwise it reads from memory and says so).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "harness.h"
#include "titan/checkpoint/train_state.h"
#include "titan/core/rng.h"
#include "titan/models/builtin.h"
#include "titan/nn/decoder.h"

using namespace titan;

namespace {

bool drop_page_cache() {
  ::sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  f << "3\n";
  return f.good();
}

double dd_gbps(const std::string& cmd) {
  const double t0 = bench::now_seconds();
  const int rc = std::system(cmd.c_str());
  const double dt = bench::now_seconds() - t0;
  return rc == 0 ? 4.0 * (1 << 30) / dt / 1e9 : -1.0;
}

}  // namespace

int main(int argc, char** argv) try {
  std::string dir = "/tmp/titan_ckpt_bench";
  int64_t layers = 28;
  bool dd = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--layers" && i + 1 < argc) layers = std::stoll(argv[++i]);
    else if (a == "--no-dd") dd = false;
    else TITAN_FAIL("checkpoint_bench: unknown flag ", a, " (--dir --layers --no-dd)");
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  nn::DecoderConfig config = models::find_size("0.6B").config;
  config.num_layers = layers;
  nn::Decoder model(config);
  ckpt::TrainState state;
  state.step = 1;
  state.config_toml = "# bench\n";
  state.loader_state_json = "{}";
  int64_t bytes = 0;
  for (nn::Parameter* p : model.parameters()) {
    Rng(7).fill_normal(p->value.data<float>(), p->value.numel(), 0.0f, 0.02f);
    state.model.emplace_back(p->fqn, p->value);
    state.optimizer.emplace_back(p->fqn + ".exp_avg", p->value);
    state.optimizer.emplace_back(p->fqn + ".exp_avg_sq", p->value);
    bytes += 3 * p->value.nbytes();
  }
  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf("state: %.2f B parameters, %.2f GB (weights + 2 moments, fp32) in %s\n",
              static_cast<double>(config.num_params()) / 1e9, gb, dir.c_str());

  if (dd) {
    const std::string file = dir + "/dd.bin";
    const double w = dd_gbps("dd if=/dev/zero of=" + file + " bs=16M count=256 conv=fsync status=none");
    drop_page_cache();
    const double r = dd_gbps("dd if=" + file + " of=/dev/null bs=16M status=none");
    std::filesystem::remove(file);
    std::printf("dd (4 GiB): write+fsync %.2f GB/s, read (cold cache) %.2f GB/s\n", w, r);
  }

  // The async stall: the training thread copies the state into staging buffers (trainer.cpp), then
  // hands it over. The first save allocates them (page faults); later saves reuse them.
  double t0 = bench::now_seconds();
  ckpt::TrainState copy = state;
  for (auto& [name, t] : copy.model) t = t.clone();
  for (auto& [name, t] : copy.optimizer) t = t.clone();
  const double clone_s = bench::now_seconds() - t0;
  t0 = bench::now_seconds();
  for (size_t i = 0; i < copy.model.size(); ++i) copy.model[i].second.copy_from(state.model[i].second);
  for (size_t i = 0; i < copy.optimizer.size(); ++i) copy.optimizer[i].second.copy_from(state.optimizer[i].second);
  const double reuse_s = bench::now_seconds() - t0;

  t0 = bench::now_seconds();
  const std::string path = ckpt::save_train_state(dir, copy);
  const double save_s = bench::now_seconds() - t0;
  copy = ckpt::TrainState{};
  const bool cold = drop_page_cache();
  t0 = bench::now_seconds();
  const ckpt::TrainState loaded = ckpt::load_train_state(path);  // validates every file's crc32c
  double sum = 0.0;  // touch every loaded byte, as a restore copies them
  for (const auto& [name, t] : loaded.model) sum += t.data<float>()[t.numel() - 1];
  const double load_s = bench::now_seconds() - t0;
  std::printf("save (write + fsync + crc32c + rename): %.2f s = %.2f GB/s\n", save_s, gb / save_s);
  std::printf("load (mmap + crc32c of every file, %s cache): %.2f s = %.2f GB/s\n", cold ? "cold" : "WARM", load_s,
              gb / load_s);
  std::printf("async save stall (state copy on the training thread): first save %.2f s (%.2f GB/s, allocating), "
              "later saves %.2f s (%.2f GB/s, reused buffers)\n", clone_s, gb / clone_s, reuse_s, gb / reuse_s);
  (void)sum;
  std::filesystem::remove_all(dir);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "checkpoint_bench: error: %s\n", e.what());
  return 1;
}
