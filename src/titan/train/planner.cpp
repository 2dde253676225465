#include "titan/train/planner.h"

#include "titan/parallel/pipeline_schedule.h"
#include "titan/train/job.h"
#include "titan/train/meta_plan.h"
#include "titan/train/support.h"

namespace titan::train {
namespace {

// The rule of the support matrix this layout hits ("" when none).
std::string unsupported(const config::JobConfig& c, const nn::DecoderConfig& model, const LayoutPlan& p) {
  JobFeatures job = job_features(c, &model);
  job.tp = p.tp;
  job.ep = p.ep;
  job.pp = p.pp;
  for (const SupportRule& rule : support_matrix()) {
    if (rule.hits(job)) return str("not run yet: ", rule.first, " with ", rule.second);
  }
  return "";
}

// The layout's numbers: its pipeline rank with the largest total.
void measure(const config::JobConfig& c, const models::ResolvedModel& model, const nn::ConfigTree& tree,
             LayoutPlan& p) {
  const parallel::MeshDegrees degrees{p.dp_replicate, p.dp_shard, p.tp, p.pp, p.ep};
  for (int64_t r = 0; r < p.pp; ++r) {
    const MetaPlan m = meta_plan(c, model, tree, degrees, pipeline_rank(degrees, r));
    if (r > 0 && m.peak <= p.total) continue;
    p.pp_rank = r;
    p.parameters = m.parameters;
    p.optimizer = m.optimizer;
    p.step = m.step();
    p.total = m.peak;
    p.all_to_all_bytes = static_cast<double>(m.comm.all_to_all_bytes);
    p.comm_bytes = static_cast<double>(m.comm.all_gather_bytes + m.comm.reduce_scatter_bytes +
                                       m.comm.all_reduce_bytes + m.comm.all_to_all_bytes + m.comm.send_bytes);
  }
}

}  // namespace

std::vector<LayoutPlan> plan_layouts(const config::JobConfig& c, const models::ResolvedModel& model,
                                     const nn::ConfigTree& tree, int64_t world, double memory_per_rank) {
  std::vector<LayoutPlan> out;
  const nn::DecoderConfig& mc = model.config;
  const config::ParallelismSection& ps = c.parallelism;
  const int64_t pp = std::max<int64_t>(ps.pipeline_parallel_degree, 1), rep = ps.data_parallel_replicate_degree;
  const PipelineConfig pipeline = resolve_pipeline(ps, mc.num_layers, c.training.local_batch_size);
  const int64_t micro = pp > 1 ? pipeline.micro_rows : c.training.local_batch_size;
  for (int64_t tp = 1; tp <= world; ++tp) {
    if (world % (tp * rep * pp) != 0) continue;
    try {
      (void)model.spec->parallel_plan.tp_local_config(mc, tp);
    } catch (const Error&) {
      continue;  // the family's plan does not split this model tp ways
    }
    if (tp > 1 && ps.enable_sequence_parallel && (micro * c.training.seq_len) % tp != 0) continue;
    const int64_t dp_shard = world / (tp * rep * pp);
    for (int64_t ep = 1; ep <= dp_shard; ++ep) {
      const bool valid = ep == 1 || (mc.num_experts > 0 && dp_shard % ep == 0 && mc.num_experts % ep == 0);
      const bool asked = ps.expert_parallel_degree > 1 ? ep == ps.expert_parallel_degree : valid;
      if (!valid || !asked) continue;
      LayoutPlan p;
      p.dp_replicate = rep;
      p.dp_shard = dp_shard;
      p.tp = tp;
      p.ep = ep;
      p.pp = pp;
      if (pp > 1) p.bubble = parallel::pipeline_bubble_fraction(pipeline.layout, c.training.local_batch_size / micro);
      p.refused = unsupported(c, mc, p);
      if (p.refused.empty()) {
        try {
          measure(c, model, tree, p);
        } catch (const Error& e) {
          p.refused = e.what();
        }
      }
      p.fits = p.refused.empty() && (memory_per_rank <= 0 || p.total <= memory_per_rank);
      out.push_back(p);
    }
  }
  return out;
}

int recommended_layout(const std::vector<LayoutPlan>& plans) {
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].fits) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace titan::train
