#include "titan/parallel/pipeline_schedule.h"

#include <algorithm>
#include <cctype>

#include "titan/config/config_error.h"

namespace titan::parallel {
namespace {

// A layout or schedule that cannot be is a config mistake (exit code 2, no file:line).
template <class... Args>
void check(bool ok, Args&&... parts) {
  if (!ok) config::config_fail(std::forward<Args>(parts)...);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

PipelineScheduleKind parse_pipeline_schedule(const std::string& name) {
  const std::string n = lower(name);
  if (n == "gpipe") return PipelineScheduleKind::gpipe;
  if (n == "1f1b") return PipelineScheduleKind::one_f_one_b;
  if (n == "interleaved1f1b") return PipelineScheduleKind::interleaved_1f1b;
  config::config_fail("[pipeline] parallelism.pipeline_parallel_schedule='", name, "' is unknown; use GPipe, 1F1B or "
             "Interleaved1F1B");
}

const char* pipeline_schedule_name(PipelineScheduleKind kind) {
  switch (kind) {
    case PipelineScheduleKind::gpipe: return "GPipe";
    case PipelineScheduleKind::one_f_one_b: return "1F1B";
    case PipelineScheduleKind::interleaved_1f1b: return "Interleaved1F1B";
  }
  return "?";
}

bool is_multi_stage(PipelineScheduleKind kind) { return kind == PipelineScheduleKind::interleaved_1f1b; }

std::vector<int64_t> PipelineLayout::stages_of(int64_t pp_rank) const {
  std::vector<int64_t> out;
  for (int64_t s = pp_rank; s < num_stages(); s += pp) out.push_back(s);
  return out;
}

std::vector<int64_t> PipelineLayout::layers_of(int64_t pp_rank) const {
  std::vector<int64_t> out;
  for (int64_t s : stages_of(pp_rank)) {
    for (int64_t l = first_layer[static_cast<size_t>(s)]; l < first_layer[static_cast<size_t>(s) + 1]; ++l) {
      out.push_back(l);
    }
  }
  return out;
}

int64_t PipelineLayout::stage_of_layer(int64_t layer) const {
  const auto it = std::upper_bound(first_layer.begin(), first_layer.end(), layer);
  return static_cast<int64_t>(it - first_layer.begin()) - 1;
}

std::string PipelineLayout::describe() const {
  std::string out;
  for (int64_t s = 0; s < num_stages(); ++s) {
    const int64_t a = first_layer[static_cast<size_t>(s)], b = first_layer[static_cast<size_t>(s) + 1];
    out += str(s ? "; " : "", "stage ", s, " on rank ", owner(s), ": ", s == 0 ? "embedding + " : "",
               b - a == 1 ? str("layer ", a) : str("layers ", a, "-", b - 1),
               s == num_stages() - 1 ? " + norm + head" : "");
  }
  return out;
}

PipelineLayout pipeline_layout(int64_t num_layers, int64_t pp, PipelineScheduleKind kind, int64_t layers_per_stage,
                               const std::vector<int64_t>& split_layers) {
  check(pp >= 1, "[pipeline] parallelism.pipeline_parallel_degree=", pp, " must be >= 1");
  PipelineLayout layout;
  layout.pp = pp;
  std::vector<int64_t>& first = layout.first_layer;
  first.push_back(0);
  if (!split_layers.empty()) {
    for (int64_t p : split_layers) first.push_back(p);
  } else if (layers_per_stage > 0) {
    for (int64_t l = layers_per_stage; l < num_layers; l += layers_per_stage) first.push_back(l);
  } else {
    const int64_t stages = pp * (is_multi_stage(kind) ? 2 : 1);
    check(stages <= num_layers, "[pipeline] ", stages, " pipeline stages (parallelism.pipeline_parallel_degree=",
                pp, is_multi_stage(kind) ? " x 2 stages per rank" : "", ") for ", num_layers, " layers leave a stage "
                "empty. HINT: lower the degree, or raise model.n_layers to >= ", stages);
    for (int64_t s = 1; s < stages; ++s) first.push_back(s * (num_layers / stages) + std::min(s, num_layers % stages));
  }
  first.push_back(num_layers);
  const int64_t stages = layout.num_stages();
  check(stages <= num_layers, "[pipeline] parallelism.pipeline_parallel_layers_per_stage=", layers_per_stage,
              " gives ", stages, " stages for ", num_layers, " layers");
  check(stages % pp == 0, "[pipeline] ", stages, " pipeline stages do not split over "
              "parallelism.pipeline_parallel_degree=", pp, " ranks. HINT: make the stage count (from "
              "pipeline_parallel_layers_per_stage or split_points) a multiple of the degree");
  if (is_multi_stage(kind)) {
    check(stages >= 2 * pp, "[pipeline] parallelism.pipeline_parallel_schedule=Interleaved1F1B needs >= 2 "
                "stages per rank, but ", stages, " stages on ", pp, " ranks give ", stages / pp,
                ". HINT: lower pipeline_parallel_layers_per_stage, or use 1F1B");
  } else {
    check(stages == pp, "[pipeline] parallelism.pipeline_parallel_schedule=", pipeline_schedule_name(kind),
                " runs one stage per rank, but the split gives ", stages, " stages on ", pp, " ranks. HINT: use "
                "Interleaved1F1B for several stages per rank, or split into ", pp, " stages");
  }
  return layout;
}

std::vector<PipelineAction> pipeline_schedule(PipelineScheduleKind kind, const PipelineLayout& layout,
                                              int64_t pp_rank, int64_t micro_batches) {
  const int64_t P = layout.pp, V = layout.stages_per_rank(), M = micro_batches;
  check(M >= layout.num_stages(), "[pipeline] ", M, " micro-batches for ",
              layout.num_stages(), " pipeline stages: every stage needs one. HINT: lower "
              "parallelism.pipeline_parallel_microbatch_size or raise training.local_batch_size (micro-batches = "
              "local_batch_size / microbatch_size)");
  std::vector<PipelineAction> out;
  using A = PipelineAction;
  if (kind == PipelineScheduleKind::gpipe) {
    for (int64_t m = 0; m < M; ++m) out.push_back({A::forward, pp_rank, m});
    for (int64_t m = 0; m < M; ++m) out.push_back({A::backward, pp_rank, m});
    return out;
  }
  check(V == 1 || M % P == 0, "[pipeline] Interleaved1F1B takes the micro-batches in groups of "
              "pipeline_parallel_degree=", P, ", but there are ", M, ". HINT: make local_batch_size / "
              "pipeline_parallel_microbatch_size a multiple of ", P);
  // Megatron's interleaved order (V = 1 is plain 1F1B): the k-th forward of this rank runs chunk
  // (k mod P V) / P on micro-batch (k / P V) P + k mod P; backwards walk the chunks in reverse.
  const auto action = [&](A::Kind kind_of, int64_t k) {
    int64_t chunk = (k % (P * V)) / P;
    if (kind_of == A::backward) chunk = V - 1 - chunk;
    return A{kind_of, chunk * P + pp_rank, (k / (P * V)) * P + k % P};
  };
  const int64_t total = M * V;
  const int64_t warmup =
      std::min(total, V == 1 ? P - 1 - pp_rank : (P - 1 - pp_rank) * 2 + (V - 1) * P);
  for (int64_t k = 0; k < warmup; ++k) out.push_back(action(A::forward, k));
  for (int64_t k = 0; k < total - warmup; ++k) {
    out.push_back(action(A::forward, warmup + k));
    out.push_back(action(A::backward, k));
  }
  for (int64_t k = total - warmup; k < total; ++k) out.push_back(action(A::backward, k));
  return out;
}

double pipeline_bubble_fraction(const PipelineLayout& layout, int64_t micro_batches) {
  const double idle = static_cast<double>(layout.pp - 1);
  return idle / (static_cast<double>(layout.stages_per_rank() * micro_batches) + idle);
}

}  // namespace titan::parallel
