#include "titan/train/memory_check.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "titan/config/config_error.h"
#include "titan/nn/lora.h"
#include "titan/parallel/comm.h"

namespace titan::train {
namespace {

// "12.3 GiB", "14.2 TiB": the figures of the error line.
std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", bytes, units[u]);
  return buf;
}

// A number read from a one-value file (cgroup v2's memory.max / memory.current); -1 when absent
// or "max".
double read_bytes_file(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return -1.0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() ? v : -1.0;
}

}  // namespace

// Parameter elements of a model, in double: the sizes this check exists for overflow nothing here.
struct Elements {
  double total = 0, root = 0, experts = 0, expert_weights = 0;  // root: embedding (+ head) + final norm
};
static Elements model_elements(const nn::DecoderConfig& c) {
  const double d = static_cast<double>(c.dim);
  const double linear = static_cast<double>(c.num_linear_attention_layers());
  const double dense_mlp = 3 * d * static_cast<double>(c.hidden_dim);
  const double experts = static_cast<double>(c.num_experts) * (d + 3 * d * static_cast<double>(c.moe_hidden_dim));
  const double moe_layers = static_cast<double>(c.num_moe_layers());
  const double layers = static_cast<double>(c.num_layers);
  Elements e;
  e.root = static_cast<double>(c.vocab_size) * d * (c.tie_embeddings ? 1 : 2) + d;
  e.experts = moe_layers * experts;
  e.expert_weights = moe_layers * static_cast<double>(c.num_experts) * 3 * d * static_cast<double>(c.moe_hidden_dim);
  e.total = e.root + (layers - linear) * c.full_attention_params() + linear * c.linear_attention_params() +
            (layers - moe_layers) * dense_mlp + e.experts;
  return e;
}

MemoryFloor memory_floor_states(const MemoryFloorInput& in) {
  const Elements e = model_elements(in.model);
  MemoryFloor f;
  // A frozen base stays whole on every rank; trained parameters are sharded over FSDP x TP.
  // A pipeline splits the layers over pp stage ranks: the most loaded rank holds at least 1 / pp.
  const double stage = 1.0 / static_cast<double>(in.pp);
  const double trained_share = stage * (in.world == 1 ? 1.0 : 1.0 / static_cast<double>(in.dp_shard * in.tp));
  const double share = in.frozen_base ? stage : trained_share;
  const double trained = in.bf16_moments ? 12.0 : 16.0;  // f32 value and gradient, the two moments
  const double per_element = in.frozen_base ? (in.bf16 ? 2.0 : 4.0) : trained;
  // Expert parallelism: the stacked expert weights are whole on their ep rank (1 / ep of them).
  const double expert_share = in.ep > 1 ? 1.0 / static_cast<double>(in.ep) : share;
  const double expert_shift = e.expert_weights * (expert_share - share) * per_element;
  // LoRA adapters train like any parameter: f32 master, gradient and two AdamW moments.
  f.adapter_states = in.adapter_elements * trained_share * trained;
  // QLoRA: the blocks' linear weights (all but the embedding, head, norms and experts) quantized.
  const double quantized =
      in.frozen_base && in.quantized_bytes_per_weight > 0 ? std::max(0.0, e.total - e.root - e.experts) : 0.0;
  f.states = (e.total - quantized) * share * per_element + quantized * share * in.quantized_bytes_per_weight +
             expert_shift + f.adapter_states;
  f.embedding_states = e.root * share * per_element;
  f.expert_states = e.experts * share * per_element + expert_shift;
  f.frozen = in.frozen_base;
  return f;
}

MemoryFloor memory_floor(const MemoryFloorInput& in) {
  MemoryFloor f = memory_floor_states(in);
  f.activations = std::max(0.0, in.measured_peak - f.states);
  return f;
}

double lora_adapter_elements(const nn::ConfigTree& tree) {
  double n = 0;
  for (const auto& [path, node] : tree) {
    if (const auto* lora = dynamic_cast<const nn::LoraLinearConfig*>(node.get())) {
      n += static_cast<double>(lora->rank) * static_cast<double>(lora->in_features + lora->out_features);
    }
  }
  return n;
}

MemoryFloor inference_memory_floor(const nn::DecoderConfig& c, double adapter_elements, int64_t rows,
                                   int64_t cache_positions, int64_t logit_positions) {
  const Elements e = model_elements(c);
  MemoryFloor f;
  f.inference = true;
  f.states = 4.0 * (e.total + adapter_elements);
  f.embedding_states = 4.0 * e.root;
  f.expert_states = 4.0 * e.experts;
  f.adapter_states = 4.0 * adapter_elements;
  const double kv = 2.0 * static_cast<double>(c.num_layers) * static_cast<double>(c.num_kv_heads) *
                    static_cast<double>(c.head_dim) * static_cast<double>(cache_positions);
  f.activations = 4.0 * static_cast<double>(rows) *
                  (kv + static_cast<double>(logit_positions) * static_cast<double>(c.vocab_size));
  return f;
}

double available_memory_per_rank() {
  double available = -1.0;
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  double kib = 0.0;
  while (in >> name >> kib >> unit) {
    if (name == "MemAvailable:") available = kib * 1024.0;
  }
  const double limit = read_bytes_file("/sys/fs/cgroup/memory.max");
  const double used = read_bytes_file("/sys/fs/cgroup/memory.current");
  if (limit > 0 && used >= 0) available = available < 0 ? limit - used : std::min(available, limit - used);
  if (available < 0) return -1.0;  // unknown: the check is skipped
  return available / std::max(1, parallel::launch_info().local_world);
}

void check_memory_floor(const MemoryFloor& floor, double available, const std::string& model_label,
                        const FloorFields& fields) {
  if (available <= 0 || floor.total() <= available) return;
  const double layer_states = floor.states - floor.embedding_states - floor.expert_states - floor.adapter_states;
  const std::string more_ranks = floor.inference ? "" : ", or shard over more ranks";
  std::string hint;
  // States past the budget on their own: only a smaller model (or more ranks) helps; else the
  // batch's activations tip it over.
  if (floor.states <= available) {
    hint = "lower " + fields.batch;
  } else if (floor.adapter_states >= std::max({floor.expert_states, floor.embedding_states, layer_states})) {
    hint = "lower " + fields.adapter_rank + " (the LoRA adapters hold most of it)";
  } else if (floor.expert_states >= std::max(floor.embedding_states, layer_states)) {
    hint = "lower model.num_experts (the experts hold most of it)" + more_ranks;
  } else if (floor.embedding_states >= layer_states) {
    hint = "the vocabulary holds most of it: check " + fields.vocab;
  } else {
    hint = "lower " + fields.layers +
           (floor.inference ? "" : more_ranks + " (parallelism.data_parallel_shard_degree; titan plan shows the layouts)");
  }
  const char* states = floor.inference ? "weights "
                       : floor.frozen  ? "frozen base weights and trained adapters "
                                       : "parameters with gradients and optimizer state ";
  config::config_fail("[memory] ", model_label, " needs at least ", bytes_text(floor.total()),
                      floor.inference ? " (" : " per rank (", states, bytes_text(floor.states),
                      ", activations ", bytes_text(floor.activations), "), but ", bytes_text(available),
                      " is available. HINT: ", hint);
}

}  // namespace titan::train
