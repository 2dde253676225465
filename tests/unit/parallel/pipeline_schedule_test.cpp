// The pipeline's arithmetic: stage splits (torchtitan's rules), the config errors they give, and
// the schedules. Each schedule is simulated as the ranks run it (a forward waits for the previous
// stage's forward of its micro-batch, a backward for the next stage's backward; sends never wait):
// it must finish (no deadlock), run every (stage, micro-batch) forward and backward exactly once,
// and hold no more micro-batches than the schedule promises.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "titan/config/config_error.h"
#include "titan/models/decoder/parallelize.h"
#include "titan/parallel/pipeline_schedule.h"

namespace titan {
namespace {

using parallel::pipeline_layout;
using parallel::PipelineAction;
using parallel::PipelineLayout;
using parallel::PipelineScheduleKind;
using Kind = PipelineScheduleKind;

std::string config_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

TEST(PipelineLayout, SplitsAsTorchtitan) {
  EXPECT_EQ(pipeline_layout(8, 2, Kind::one_f_one_b, -1, {}).first_layer, (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(pipeline_layout(5, 2, Kind::gpipe, -1, {}).first_layer, (std::vector<int64_t>{0, 3, 5}));  // first larger
  EXPECT_EQ(pipeline_layout(8, 2, Kind::interleaved_1f1b, -1, {}).first_layer,
            (std::vector<int64_t>{0, 2, 4, 6, 8}));  // two stages per rank
  EXPECT_EQ(pipeline_layout(9, 3, Kind::one_f_one_b, 3, {}).first_layer, (std::vector<int64_t>{0, 3, 6, 9}));
  EXPECT_EQ(pipeline_layout(7, 2, Kind::interleaved_1f1b, 2, {}).first_layer,
            (std::vector<int64_t>{0, 2, 4, 6, 7}));  // the last stage shorter
  EXPECT_EQ(models::decoder_pipeline_layout(8, 3, Kind::one_f_one_b, 2, "layers.3, layers.5").first_layer,
            (std::vector<int64_t>{0, 3, 5, 8}));  // split points win over layers_per_stage

  const PipelineLayout l = pipeline_layout(8, 2, Kind::interleaved_1f1b, -1, {});
  EXPECT_EQ(l.stages_of(1), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(l.layers_of(1), (std::vector<int64_t>{2, 3, 6, 7}));
  EXPECT_EQ(models::decoder_stage_of(l, "tok_embeddings.weight"), 0);
  EXPECT_EQ(models::decoder_stage_of(l, "layers.5.attention.wq.weight"), 2);
  EXPECT_EQ(models::decoder_stage_of(l, "layers.6.moe.expert_bias"), 3);
  EXPECT_EQ(models::decoder_stage_of(l, "norm.weight"), 3);
  EXPECT_EQ(models::decoder_stage_of(l, "output.weight"), 3);
  EXPECT_EQ(l.describe(), "stage 0 on rank 0: embedding + layers 0-1; stage 1 on rank 1: layers 2-3; stage 2 on "
                          "rank 0: layers 4-5; stage 3 on rank 1: layers 6-7 + norm + head");
}

TEST(PipelineLayout, ImpossibleSplitsAreOneLineConfigErrors) {
  const std::vector<std::tuple<std::function<void()>, std::string>> cases = {
      {[] { pipeline_layout(2, 4, Kind::one_f_one_b, -1, {}); },
       "[pipeline] 4 pipeline stages (parallelism.pipeline_parallel_degree=4) for 2 layers leave a stage empty"},
      {[] { models::decoder_pipeline_layout(4, 2, Kind::one_f_one_b, -1, "layers.4"); },
       "[pipeline] parallelism.pipeline_parallel_split_points: layers.4 leaves a stage empty"},
      {[] { models::decoder_pipeline_layout(4, 2, Kind::one_f_one_b, -1, "layers.0"); },
       "[pipeline] parallelism.pipeline_parallel_split_points: layers.0 leaves a stage empty"},
      {[] { models::decoder_pipeline_layout(6, 3, Kind::one_f_one_b, -1, "layers.3,layers.2"); },
       "[pipeline] parallelism.pipeline_parallel_split_points: layers.2 leaves a stage empty"},
      {[] { models::decoder_pipeline_layout(4, 2, Kind::one_f_one_b, -1, "block.2"); },
       "[pipeline] parallelism.pipeline_parallel_split_points: 'block.2' is not a layer name"},
      {[] { pipeline_layout(6, 2, Kind::one_f_one_b, 2, {}); },
       "[pipeline] 3 pipeline stages do not split over parallelism.pipeline_parallel_degree=2 ranks"},
      {[] { pipeline_layout(8, 2, Kind::one_f_one_b, 2, {}); },
       "[pipeline] parallelism.pipeline_parallel_schedule=1F1B runs one stage per rank, but the split gives 4"},
      {[] { pipeline_layout(4, 2, Kind::interleaved_1f1b, 2, {}); },
       "[pipeline] parallelism.pipeline_parallel_schedule=Interleaved1F1B needs >= 2 stages per rank"},
      {[] { parallel::parse_pipeline_schedule("ZeroBubble"); },
       "[pipeline] parallelism.pipeline_parallel_schedule='ZeroBubble' is unknown"},
      {[] { parallel::pipeline_schedule(Kind::one_f_one_b, pipeline_layout(4, 2, Kind::one_f_one_b, -1, {}), 0, 1); },
       "[pipeline] 1 micro-batches for 2 pipeline stages: every stage needs one"},
      {[] {
         parallel::pipeline_schedule(Kind::interleaved_1f1b, pipeline_layout(4, 2, Kind::interleaved_1f1b, -1, {}), 0,
                                     5);
       },
       "[pipeline] Interleaved1F1B takes the micro-batches in groups of pipeline_parallel_degree=2, but there are 5"},
  };
  for (const auto& [fn, start] : cases) {
    const std::string message = config_error_of(fn);
    EXPECT_EQ(message.rfind(start, 0), 0u) << "got: " << message << "\nwant start: " << start;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_EQ(parallel::parse_pipeline_schedule("interleaved1f1b"), Kind::interleaved_1f1b);
  EXPECT_EQ(parallel::parse_pipeline_schedule("gpipe"), Kind::gpipe);
}

// Runs every rank's list as the ranks would; returns the most micro-batches any rank held at once
// (forwards done whose backward is not), per rank. Fails the test on a deadlock or a wrong list.
std::vector<int64_t> simulate(Kind kind, const PipelineLayout& layout, int64_t M) {
  const int64_t P = layout.pp, S = layout.num_stages();
  std::vector<std::vector<PipelineAction>> lists;
  for (int64_t r = 0; r < P; ++r) {
    lists.push_back(parallel::pipeline_schedule(kind, layout, r, M));
    std::set<std::tuple<int, int64_t, int64_t>> seen;
    for (const PipelineAction& a : lists.back()) {
      EXPECT_EQ(layout.owner(a.stage), r);
      EXPECT_TRUE(a.micro >= 0 && a.micro < M);
      EXPECT_TRUE(seen.insert({a.kind, a.stage, a.micro}).second) << "twice: stage " << a.stage << " micro " << a.micro;
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), 2 * M * layout.stages_per_rank());
  }
  std::set<std::tuple<int, int64_t, int64_t>> done;
  std::vector<size_t> next(static_cast<size_t>(P), 0);
  std::vector<int64_t> held(static_cast<size_t>(P), 0), most(static_cast<size_t>(P), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t r = 0; r < P; ++r) {
      auto& n = next[static_cast<size_t>(r)];
      if (n == lists[static_cast<size_t>(r)].size()) continue;
      const PipelineAction& a = lists[static_cast<size_t>(r)][n];
      const bool ready = a.kind == PipelineAction::forward
                             ? (a.stage == 0 || done.count({PipelineAction::forward, a.stage - 1, a.micro}))
                             : (done.count({PipelineAction::forward, a.stage, a.micro}) &&
                                (a.stage == S - 1 || done.count({PipelineAction::backward, a.stage + 1, a.micro})));
      if (!ready) continue;
      done.insert({a.kind, a.stage, a.micro});
      int64_t& h = held[static_cast<size_t>(r)];
      h += a.kind == PipelineAction::forward ? 1 : -1;
      most[static_cast<size_t>(r)] = std::max(most[static_cast<size_t>(r)], h);
      ++n;
      progress = true;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(done.size()), 2 * S * M) << "deadlock: " << parallel::pipeline_schedule_name(kind)
                                                           << " pp " << P << " stages " << S << " micro " << M;
  return most;
}

TEST(PipelineSchedule, EveryScheduleFinishesAndHoldsWhatItPromises) {
  for (int64_t P : {2, 3, 4}) {
    for (int64_t M : {P, P + 1, 2 * P, 3 * P + 1}) {
      const PipelineLayout one = pipeline_layout(4 * P, P, Kind::one_f_one_b, -1, {});
      const std::vector<int64_t> gpipe = simulate(Kind::gpipe, one, M);
      const std::vector<int64_t> f1b1 = simulate(Kind::one_f_one_b, one, M);
      for (int64_t r = 0; r < P; ++r) {
        EXPECT_EQ(gpipe[static_cast<size_t>(r)], M);  // GPipe holds every micro-batch
        EXPECT_EQ(f1b1[static_cast<size_t>(r)], std::min(M, P - r)) << "1F1B rank " << r;
      }
    }
    for (int64_t V : {2, 3}) {
      const PipelineLayout layout = pipeline_layout(V * P, P, Kind::interleaved_1f1b, 1, {});
      ASSERT_EQ(layout.stages_per_rank(), V);
      for (int64_t M : {V * P, V * P + P, 4 * P * V}) simulate(Kind::interleaved_1f1b, layout, M);
    }
  }
}

TEST(PipelineSchedule, OneFOneBAlternatesAfterWarmUp) {
  const PipelineLayout layout = pipeline_layout(2, 2, Kind::one_f_one_b, -1, {});
  using A = PipelineAction;
  EXPECT_EQ(parallel::pipeline_schedule(Kind::one_f_one_b, layout, 0, 3),
            (std::vector<A>{{A::forward, 0, 0}, {A::forward, 0, 1}, {A::backward, 0, 0}, {A::forward, 0, 2},
                            {A::backward, 0, 1}, {A::backward, 0, 2}}));
  EXPECT_EQ(parallel::pipeline_schedule(Kind::one_f_one_b, layout, 1, 3),
            (std::vector<A>{{A::forward, 1, 0}, {A::backward, 1, 0}, {A::forward, 1, 1}, {A::backward, 1, 1},
                            {A::forward, 1, 2}, {A::backward, 1, 2}}));
}

TEST(PipelineSchedule, BubbleFraction) {
  // (pp - 1) / (V M + pp - 1): 1 / 5 for 2 ranks, 4 micro-batches; interleaving 2 stages: 1 / 9.
  EXPECT_DOUBLE_EQ(parallel::pipeline_bubble_fraction(pipeline_layout(2, 2, Kind::gpipe, -1, {}), 4), 0.2);
  EXPECT_DOUBLE_EQ(parallel::pipeline_bubble_fraction(pipeline_layout(4, 2, Kind::interleaved_1f1b, -1, {}), 4),
                   1.0 / 9.0);
}

}  // namespace
}  // namespace titan
