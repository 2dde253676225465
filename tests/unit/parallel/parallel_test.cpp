// The single-process side of the parallel layer: mesh degrees, the local communicator, FSDP and
// expert parallelism on a one-rank "mesh" (their gather/free/reduce and exchange paths must leave
// training exactly as it was),
// the planner's arithmetic, and a sharded checkpoint written by two "ranks" (threads) and read
// back whole. Multi-process runs are in tests/integration/cli_parallel_test.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "titan/checkpoint/train_state.h"
#include "titan/config/config_error.h"
#include "titan/config/overrides.h"
#include "titan/core/rng.h"
#include "titan/core/slices.h"
#include "titan/models/builtin.h"
#include "titan/parallel/expert_parallel.h"
#include "titan/parallel/fsdp.h"
#include "titan/models/decoder/parallelize.h"
#include "titan/parallel/mesh.h"
#include "titan/parallel/tensor_parallel.h"
#include "titan/plugins/lora.h"
#include "titan/train/memory_check.h"
#include "titan/train/job.h"
#include "titan/train/planner.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using parallel::MeshDegrees;
using parallel::resolve_mesh;

TEST(Mesh, ResolvesMinusOneAndChecksTheProduct) {
  EXPECT_EQ(resolve_mesh({1, -1, 1}, 8).dp_shard, 8);
  EXPECT_EQ(resolve_mesh({2, -1, 2}, 8).dp_shard, 2);
  EXPECT_EQ(resolve_mesh({1, 4, 2}, 8).dp(), 4);
  const auto fails = [](MeshDegrees d, int64_t world, const std::string& what) {
    try {
      resolve_mesh(d, world);
      ADD_FAILURE() << "no error for " << d.describe() << " on " << world;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  fails({1, 3, 1}, 4, "holds 3 ranks but the job has 4");
  fails({3, -1, 1}, 4, "4 ranks do not split into data_parallel_replicate_degree=3");
  fails({1, 0, 1}, 4, "data_parallel_shard_degree=0 must be >= 1");
  fails({0, -1, 1}, 4, "data_parallel_replicate_degree=0");
  fails({1, -1, 0}, 4, "tensor_parallel_degree=0");
}

// The named dimensions on simulated ranks of an 8-rank job, dp_shard=2 x cp=2 x tp=2: the rank
// layout (tp innermost, then cp, then dp_shard) and what the batch split and token accounting read.
TEST(Mesh, NamedDimensionsIncludeContextParallel) {
  MeshDegrees d{1, 2, 2};
  d.cp = 2;
  d = resolve_mesh(d, 8);
  EXPECT_EQ(d.describe(), "dp_replicate=1 dp_shard=2 cp=2 tp=2");
  for (int r = 0; r < 8; ++r) {
    std::unique_ptr<parallel::Comm> world = parallel::make_meta_comm(r, 8);
    parallel::DeviceMesh mesh(*world, d);
    EXPECT_EQ(mesh.tp().rank(), r % 2) << r;
    EXPECT_EQ(mesh.cp().rank(), r / 2 % 2) << r;
    EXPECT_EQ(mesh.dp_shard().rank(), r / 4) << r;
    EXPECT_EQ(mesh.cp().size(), 2);
    EXPECT_EQ(mesh.dp_rank(), r / 4) << r;
    EXPECT_EQ(mesh.ways(parallel::BatchSplit::rows), 2);
    EXPECT_EQ(mesh.way(parallel::BatchSplit::rows), r / 4) << r;
    EXPECT_EQ(mesh.ways(parallel::BatchSplit::sequence), 2);
    EXPECT_EQ(mesh.way(parallel::BatchSplit::sequence), r / 2 % 2) << r;
    EXPECT_EQ(mesh.ranks_per_row(), 4);  // the cp x tp block shares each row
    EXPECT_EQ(mesh.replica().size(), 4);    // dp_shard x tp hold each parameter once per cp rank
    std::vector<std::string> names;
    for (const parallel::MeshDim& m : mesh.dims()) names.push_back(m.name);
    EXPECT_EQ(names, (std::vector<std::string>{"pp", "dp_replicate", "dp_shard", "cp", "tp"}));
    EXPECT_TRUE(mesh.dim("dp_shard").shards_parameters);
    EXPECT_FALSE(mesh.dim("cp").shards_parameters);
  }
  std::unique_ptr<parallel::Comm> world = parallel::make_meta_comm(0, 8);
  parallel::DeviceMesh mesh(*world, d);
  try {
    mesh.dim("sp");
    ADD_FAILURE() << "no error for dimension sp";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the mesh has no dimension 'sp'"), std::string::npos) << e.what();
  }
}

TEST(Mesh, LocalCommunicatorIsTheIdentity) {
  std::unique_ptr<parallel::Comm> comm = parallel::make_local_comm();
  parallel::DeviceMesh mesh(*comm, resolve_mesh({1, -1, 1}, 1));
  EXPECT_EQ(mesh.dp_shard().size(), 1);
  EXPECT_EQ(mesh.tp().size(), 1);
  Tensor in = Tensor::empty({3}), out = Tensor::zeros({3});
  for (int64_t i = 0; i < 3; ++i) in.data<float>()[i] = static_cast<float>(i + 1);
  mesh.dp().all_gather(in, out);
  EXPECT_EQ(out.data<float>()[2], 3.0f);
  mesh.dp().start_all_gather(in, out)->wait();
  EXPECT_EQ(mesh.dp().sum(2.5), 2.5);
  Tensor b = Tensor::zeros({2}, DType::i64);
  b.data<int64_t>()[1] = 7;
  mesh.dp().broadcast(b, 0);
  EXPECT_EQ(b.data<int64_t>()[1], 7);
  EXPECT_EQ(comm->all_gather_strings("x"), std::vector<std::string>{"x"});
  EXPECT_EQ(comm->broadcast_string("y", 0), "y");
}

nn::DecoderConfig tiny() {
  nn::DecoderConfig c = models::find_size("debug").config;
  c.num_layers = 2;
  c.vocab_size = 256;
  return c;
}

Tensor ids(int64_t b, int64_t t, uint64_t seed) {
  Tensor x = Tensor::empty({b, t}, DType::i64);
  Rng(seed).fill_int(x.data<int64_t>(), x.numel(), 256);
  return x;
}

// FSDP over a one-rank communicator gathers, frees and reduce-scatters every unit around each
// use; after one micro-batch the loss and every gradient equal the plain model's bit for bit.
// After a second one (accumulated) they agree to rounding: FSDP adds each micro-batch's
// reduced gradient to the shard, where the plain model's ops accumulate in place.
TEST(Fsdp, OneRankShardingLeavesTrainingUnchanged) {
  nn::Decoder plain(tiny()), sharded(tiny());
  models::find_family("qwen3").init_weights(plain, 7);
  models::find_family("qwen3").init_weights(sharded, 7);
  std::unique_ptr<parallel::Comm> a = parallel::make_local_comm(), b = parallel::make_local_comm();
  parallel::Fsdp fsdp(models::decoder_units(sharded), *a, *b);
  sharded.set_unit_hooks(&fsdp);
  for (nn::Parameter* p : sharded.parameters()) EXPECT_FALSE(p->value.defined()) << p->fqn;
  plain.zero_grad();
  fsdp.zero_grad();
  const nn::ParameterList whole = plain.parameters(), pieces = fsdp.shards();
  ASSERT_EQ(whole.size(), pieces.size());  // one rank: every parameter is one whole piece (in unit order)
  std::map<std::string, const nn::Parameter*> by_name;
  for (const nn::Parameter* p : pieces) by_name[p->fqn] = p;
  for (uint64_t seed : {1, 2}) {
    const Tensor x = ids(2, 16, seed), y = ids(2, 16, seed + 10);
    const nn::LossResult lp = plain.forward_backward(x, y, 0.01f);
    const nn::LossResult ls = sharded.forward_backward(x, y, 0.01f);
    EXPECT_EQ(lp.loss, ls.loss);
    fsdp.reduce_replicas();
    for (const nn::Parameter* w : whole) {
      ASSERT_TRUE(by_name.count(w->fqn)) << w->fqn;
      const nn::Parameter* p = by_name[w->fqn];
      ASSERT_EQ(w->grad.numel(), p->grad.numel());
      if (seed == 1) {
        EXPECT_EQ(0, std::memcmp(w->grad.data<float>(), p->grad.data<float>(), w->grad.nbytes())) << w->fqn;
        continue;
      }
      float worst = 0.0f, scale = 0.0f;
      for (int64_t i = 0; i < w->grad.numel(); ++i) {
        worst = std::max(worst, std::abs(w->grad.data<float>()[i] - p->grad.data<float>()[i]));
        scale = std::max(scale, std::abs(w->grad.data<float>()[i]));
      }
      EXPECT_LE(worst, 1e-6f * scale) << w->fqn;
    }
  }
  fsdp.gather_full();
  for (size_t i = 0; i < whole.size(); ++i) {
    const nn::Parameter* p = sharded.parameters()[i];
    ASSERT_EQ(p->value.shape(), whole[i]->value.shape());
    EXPECT_EQ(0, std::memcmp(p->value.data<float>(), whole[i]->value.data<float>(), p->value.nbytes())) << p->fqn;
  }
  fsdp.release_full();
  EXPECT_FALSE(sharded.parameters()[0]->value.defined());
  sharded.set_unit_hooks(nullptr);
}

// The local communicator's all-to-alls are copies (one rank sends everything to itself).
TEST(Mesh, LocalAllToAllIsACopy) {
  std::unique_ptr<parallel::Comm> comm = parallel::make_local_comm();
  Tensor counts = Tensor::empty({3}, DType::i64), got = Tensor::zeros({3}, DType::i64);
  for (int64_t i = 0; i < 3; ++i) counts.data<int64_t>()[i] = 7 + i;
  comm->all_to_all(counts, got);
  EXPECT_EQ(got.data<int64_t>()[2], 9);
  Tensor rows = Tensor::empty({4}), back = Tensor::zeros({4});
  for (int64_t i = 0; i < 4; ++i) rows.data<float>()[i] = 0.5f * static_cast<float>(i);
  comm->all_to_all_v(rows, {4}, back, {4});
  EXPECT_EQ(back.data<float>()[3], 1.5f);
  EXPECT_THROW(comm->all_to_all_v(rows, {3}, back, {4}), Error);  // counts that do not cover the tensor
}

// The MoE blocks driven through ExpertParallel on a one-rank ep group (plan, to_experts and
// from_experts with one source; the received rows kept for backward; the routing weights sent with
// the gradients, dweight scattered back) train the plain model's loss and gradients bit for bit,
// with both balancing modes.
TEST(ExpertParallel, OneRankExchangeLeavesTrainingUnchanged) {
  for (const nn::LoadBalance balance : {nn::LoadBalance::aux_loss, nn::LoadBalance::bias}) {
    nn::DecoderConfig c = models::find_size("debug_moe").config;
    c.num_layers = 2;
    c.vocab_size = 256;
    c.load_balance = balance;
    nn::Decoder plain(c), split(c);
    models::find_family("qwen3").init_weights(plain, 5);
    models::find_family("qwen3").init_weights(split, 5);
    std::unique_ptr<parallel::Comm> comm = parallel::make_local_comm();
    parallel::ExpertParallel ep(*comm, c.num_experts);
    for (auto& layer : split.layers) layer->moe->set_expert_parallel(&ep);
    plain.zero_grad();
    split.zero_grad();
    const Tensor x = ids(2, 16, 3), y = ids(2, 16, 4);
    EXPECT_EQ(plain.forward_backward(x, y, 0.01f).loss, split.forward_backward(x, y, 0.01f).loss);
    const nn::ParameterList a = plain.parameters(), b = split.parameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i]->grad.shape(), b[i]->grad.shape()) << a[i]->fqn;
      EXPECT_EQ(0, std::memcmp(a[i]->grad.data<float>(), b[i]->grad.data<float>(), a[i]->grad.nbytes())) << a[i]->fqn;
    }
    EXPECT_GT(ep.stats().all_to_all_bytes, 0);
  }
}

// The seams the trainer reaches an MoE through (train/trainer.h names no model feature): its loss
// terms, its step metrics in metrics.jsonl's order, a validation forward that leaves the expert
// load as it found it, and the post-step hook it registered (bias balancing moves the bias, both
// modes reset the load) before the hooks added after it.
TEST(Parallelized, MoeStepSeams) {
  for (const nn::LoadBalance balance : {nn::LoadBalance::aux_loss, nn::LoadBalance::bias}) {
    nn::DecoderConfig c = models::find_size("debug_moe").config;
    c.num_layers = 2;
    c.vocab_size = 256;
    c.load_balance = balance;
    auto whole = std::make_unique<nn::Decoder>(c);
    models::find_family("qwen3").init_weights(*whole, 5);
    std::unique_ptr<parallel::Comm> comm = parallel::make_local_comm();
    parallel::DeviceMesh mesh(*comm, resolve_mesh({1, -1, 1}, 1));
    models::Parallelized p(std::move(whole), models::find_family("qwen3"), mesh, {});
    EXPECT_EQ(p.loss_terms().size(), balance == nn::LoadBalance::aux_loss ? 2u : 1u);
    p.zero_grad();
    EXPECT_EQ(p.forward_backward(ids(2, 16, 3), ids(2, 16, 4), 0.01f, 1.0f).terms.size(), p.loss_terms().size());
    const nn::ExpertLoad load = p.expert_load();
    ASSERT_TRUE(load.defined);
    EXPECT_GT(load.max, 0);
    (void)p.forward_loss(ids(2, 16, 5), ids(2, 16, 6));
    EXPECT_EQ(p.expert_load().min, load.min);
    EXPECT_EQ(p.expert_load().max, load.max);

    const std::vector<nn::StepMetric> m = p.step_metrics({{"ce", 5.0}, {"aux_loss", 0.25}});
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m[0].name, "expert_load_min");
    EXPECT_EQ(m[1].name, "expert_load_max");
    EXPECT_EQ(m[2].name, "aux_loss");
    EXPECT_EQ(std::get<int64_t>(m[1].value), load.max);
    EXPECT_EQ(std::get<double>(m[2].value), 0.25);
    EXPECT_EQ(m[0].console + m[1].console + m[2].console,
              str("  expert_load: ", load.min, "..", load.max, "  aux: 0.2500"));
    EXPECT_EQ(m[2].tensorboard, "moe/aux_loss");

    std::vector<Tensor> bias;
    for (nn::Parameter* b : p.model().buffers()) bias.push_back(b->value.clone());
    EXPECT_EQ(bias.empty(), balance != nn::LoadBalance::bias);
    std::vector<int> ran;
    p.add_post_step_hook([&] { ran.push_back(p.expert_load().max == 0 ? 1 : 0); });
    p.post_step();
    EXPECT_EQ(ran, std::vector<int>{1});  // after the model's own hook, which reset the load
    const nn::ParameterList after = p.model().buffers();
    for (size_t i = 0; i < bias.size(); ++i) {
      EXPECT_NE(0, std::memcmp(bias[i].data<float>(), after[i]->value.data<float>(), bias[i].nbytes())) << i;
    }
  }
  // A dense model: one term, no metrics, no hook.
  auto whole = std::make_unique<nn::Decoder>(tiny());
  std::unique_ptr<parallel::Comm> comm = parallel::make_local_comm();
  parallel::DeviceMesh mesh(*comm, resolve_mesh({1, -1, 1}, 1));
  models::Parallelized p(std::move(whole), models::find_family("qwen3"), mesh, {});
  EXPECT_EQ(p.loss_terms().size(), 1u);
  EXPECT_TRUE(p.step_metrics({{"ce", 5.0}}).empty());
  p.post_step();
}

TEST(TensorParallel, PlanAndLocalConfig) {
  const models::ParallelPlan& plan = models::find_family("qwen3").parallel_plan;
  EXPECT_EQ(plan.tp_split_dim("layers.3.attention.wq.weight"), 0);
  EXPECT_EQ(plan.tp_split_dim("layers.3.attention.wo.weight"), 1);
  EXPECT_EQ(plan.tp_split_dim("layers.0.feed_forward.w2.weight"), 1);
  EXPECT_EQ(plan.tp_split_dim("tok_embeddings.weight"), 0);
  EXPECT_EQ(plan.tp_split_dim("layers.1.attention.q_norm.weight"), -1);
  EXPECT_TRUE(plan.tp_grad_is_partial("layers.1.attention.k_norm.weight", false));
  EXPECT_FALSE(plan.tp_grad_is_partial("layers.1.ffn_norm.weight", false));
  EXPECT_TRUE(plan.tp_grad_is_partial("layers.1.ffn_norm.weight", true));
  EXPECT_THROW(plan.tp_split_dim("layers.1.moe.w1"), Error);
  const nn::DecoderConfig local = plan.tp_local_config(tiny(), 2);
  EXPECT_EQ(local.num_heads, tiny().num_heads / 2);
  EXPECT_EQ(local.vocab_size, 128);
  EXPECT_THROW(plan.tp_local_config(tiny(), 3), Error);
}

// Qwen3.5's gated DeltaNet under TP: its heads split like attention's, in_proj_qkv and conv1d in
// [q | k | v] parts (rank r: some key heads of q and of k, and the value heads reading them).
TEST(TensorParallel, GatedDeltaNetPlacement) {
  const models::ModelSpec& family = models::find_family("qwen3_5");
  const models::ParallelPlan& plan = family.parallel_plan;
  const nn::DecoderConfig full = models::find_size("debug_qwen3_5").config;
  const int64_t key = full.linear_num_key_heads * full.linear_key_head_dim;
  const int64_t value = full.linear_num_value_heads * full.linear_value_head_dim;
  for (const char* fqn : {"layers.0.attention.in_proj_qkv.weight", "layers.0.attention.conv1d.weight"}) {
    EXPECT_EQ(plan.tp_split_dim(fqn), 0);
    EXPECT_EQ(plan.tp_sections(full, fqn), (std::vector<int64_t>{key, key, value}));
  }
  for (const char* fqn : {"layers.0.attention.in_proj_z.weight", "layers.0.attention.in_proj_b.weight",
                          "layers.0.attention.in_proj_a.weight", "layers.0.attention.A_log",
                          "layers.0.attention.dt_bias"}) {
    EXPECT_EQ(plan.tp_split_dim(fqn), 0) << fqn;
    EXPECT_TRUE(plan.tp_sections(full, fqn).empty()) << fqn;
  }
  EXPECT_EQ(plan.tp_split_dim("layers.0.attention.out_proj.weight"), 1);
  EXPECT_EQ(plan.tp_split_dim("layers.0.attention.norm.weight"), -1);
  EXPECT_TRUE(plan.tp_grad_is_partial("layers.0.attention.norm.weight", false));  // each rank: some heads
  const nn::DecoderConfig local = plan.tp_local_config(full, 2);
  EXPECT_EQ(local.linear_num_key_heads, full.linear_num_key_heads / 2);
  EXPECT_EQ(local.linear_num_value_heads, full.linear_num_value_heads / 2);
  nn::DecoderConfig four_kv = full;  // attention's heads divide by 4; the DeltaNet's 2 key heads do not
  four_kv.num_kv_heads = 4;
  try {
    (void)plan.tp_local_config(four_kv, 4);
    ADD_FAILURE() << "tp 4 of 2 DeltaNet key heads was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear_num_key_heads = 2 does not divide"), std::string::npos) << e.what();
  }
  // Rank 1's in_proj_qkv: the second half of q's rows, then of k's, then of v's.
  nn::Decoder whole(full);
  family.init_weights(whole, 5);
  nn::Decoder r1(local);
  models::copy_tp_shard(plan, whole, r1, 1, 2);
  const auto qkv = [](nn::Decoder& d) -> const Tensor& {
    for (nn::Parameter* p : d.parameters()) {
      if (p->fqn == "layers.0.attention.in_proj_qkv.weight") return p->value;
    }
    throw Error("no in_proj_qkv");
  };
  const Tensor& w = qkv(whole);
  const Tensor& w1 = qkv(r1);
  const int64_t d = w.size(1);
  for (const auto& [local_row, row] : {std::pair<int64_t, int64_t>{0, key / 2}, {key / 2, key + key / 2},
                                       {key, 2 * key + value / 2}}) {
    EXPECT_EQ(w1.data<float>()[local_row * d], w.data<float>()[row * d]) << local_row;
  }
}

// Copying rank shares out of a whole model and gathering them back is the identity.
TEST(TensorParallel, ShardsRoundTrip) {
  const models::ParallelPlan& plan = models::find_family("qwen3").parallel_plan;
  nn::Decoder whole(tiny());
  models::find_family("qwen3").init_weights(whole, 3);
  const nn::DecoderConfig lc = plan.tp_local_config(tiny(), 2);
  nn::Decoder r0(lc), r1(lc);
  models::copy_tp_shard(plan, whole, r0, 0, 2);
  models::copy_tp_shard(plan, whole, r1, 1, 2);
  // wo is row-parallel: rank 1 holds the second half of its columns.
  const Tensor& wo = dynamic_cast<nn::Linear&>(*dynamic_cast<nn::Attention&>(*whole.layers[0]->attention).wo).weight.value;
  const Tensor& wo1 = dynamic_cast<nn::Linear&>(*dynamic_cast<nn::Attention&>(*r1.layers[0]->attention).wo).weight.value;
  EXPECT_EQ(wo1.data<float>()[0], wo.data<float>()[wo.size(1) / 2]);
  const Tensor& e1 = r1.tok_embeddings->table().value;
  EXPECT_EQ(e1.data<float>()[0], whole.tok_embeddings->table().value.data<float>()[128 * tiny().dim]);
}

// titan plan runs the job's model and step on the meta device (train/meta_plan.h): these check the
// figures it reads against what the model is (parameter counts, byte identities of the mechanics).
// The figures against a real run's allocator peak: CliPlan.MetaPlanMatchesTheMeasuredPeak.
config::JobConfig plan_job(std::vector<std::string> args) {
  models::register_config_functions();
  args.insert(args.begin(), {"--config", "qwen3_debug", "--training.seq_len", "64"});
  return config::resolve_config(args).config;
}

std::vector<train::LayoutPlan> plan(const config::JobConfig& c, int64_t world, double memory = 0) {
  const models::ResolvedModel model = train::resolve_model(c);
  return train::plan_layouts(c, model, train::job_tree(c, model), world, memory);
}

// One rank holds 16 bytes per parameter (value, gradient, two AdamW moments) before the step; four
// FSDP ranks a quarter of it; a layout per tp dividing the heads; nothing fits in one byte.
TEST(Planner, SingleRankStateIsSixteenBytesPerParameter) {
  const config::JobConfig c = plan_job({});
  const double params = static_cast<double>(train::resolve_model(c).config.num_params());
  const std::vector<train::LayoutPlan> one = plan(c, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_DOUBLE_EQ(one[0].parameters + one[0].optimizer, 16.0 * params);
  EXPECT_GT(one[0].step, 0.0);
  EXPECT_DOUBLE_EQ(one[0].total, one[0].parameters + one[0].optimizer + one[0].step);
  EXPECT_EQ(one[0].comm_bytes, 0.0);
  const std::vector<train::LayoutPlan> four = plan(c, 4);
  ASSERT_EQ(four.size(), 3u);  // tp 1, 2, 4 (debug: 8 heads, 4 kv heads)
  EXPECT_NEAR((four[0].parameters + four[0].optimizer) * 4, 16.0 * params, 1e-4 * params);  // shards padded
  EXPECT_EQ(four[2].tp, 4);
  EXPECT_EQ(train::recommended_layout(plan(c, 4, /*memory=*/1)), -1);
}

// Activation checkpointing changes only what the step adds: keep_ops keeps less than keep_all,
// every 2nd block replayed less, keep_input everywhere least.
TEST(Planner, ActivationCheckpointingShrinksOnlyTheStep) {
  const auto step = [](const std::string& mode, const std::string& option) {
    return plan(plan_job({"--activation_checkpoint.mode", mode, "--activation_checkpoint.selective_ac_option", option}),
                1)
        .at(0);
  };
  const train::LayoutPlan none = step("none", "op"), op = step("selective", "op"), every2 = step("selective", "2"),
                          full = step("full", "op");
  EXPECT_LT(op.step, none.step);
  EXPECT_LT(every2.step, none.step);
  EXPECT_LT(full.step, every2.step);
  EXPECT_LT(full.step, op.step);
  for (const train::LayoutPlan* p : {&op, &every2, &full}) {
    EXPECT_EQ(p->parameters + p->optimizer, none.parameters + none.optimizer);
  }
}

// bf16 compute keeps the f32 state and gathers bf16 copies: FSDP's traffic (gathers and, with a bf16
// reduce, reduce-scatters of the same units) halves exactly.
TEST(Planner, Bf16HalvesTheFsdpTraffic) {
  const train::LayoutPlan f32 = plan(plan_job({}), 2).at(0);
  const train::LayoutPlan bf16 = plan(plan_job({"--training.mixed_precision_param", "bfloat16"}), 2).at(0);
  const train::LayoutPlan reduce = plan(plan_job({"--training.mixed_precision_param", "bfloat16",
                                                  "--training.mixed_precision_reduce", "bfloat16"}), 2).at(0);
  EXPECT_EQ(bf16.parameters + bf16.optimizer, f32.parameters + f32.optimizer);
  EXPECT_LT(reduce.comm_bytes, bf16.comm_bytes);
  EXPECT_LT(bf16.comm_bytes, f32.comm_bytes);
  EXPECT_DOUBLE_EQ(reduce.comm_bytes, f32.comm_bytes / 2);
}

// Expert parallelism in the plan of a MoE model: a layout per ep dividing dp_shard and the 8
// experts; ep ranks hold E / ep experts whole beside the FSDP shard of the rest, and each MoE layer
// moves every routed pair's row out and back, forward and backward, at even routing:
// 2 (sent + received) x pairs x (2 D + 2 (D + 1)) floats per layer.
TEST(Planner, ExpertParallelHoldsItsExpertsAndCountsTheExchange) {
  const config::JobConfig c = plan_job({"--model.name", "debug_moe", "--model.n_layers", "2"});
  const nn::DecoderConfig mc = train::resolve_model(c).config;
  const std::vector<train::LayoutPlan> plans = plan(c, 4);
  ASSERT_EQ(plans.size(), 3u);  // ep 1, 2, 4 (tp: the family's plan does not split MoE)
  const double params = static_cast<double>(mc.num_params());
  const double experts = 2.0 * 3.0 * static_cast<double>(mc.num_experts * mc.moe_hidden_dim * mc.dim);
  const double pairs = static_cast<double>(64 * c.training.local_batch_size * mc.num_experts_per_tok);
  const double d = static_cast<double>(mc.dim);
  for (const train::LayoutPlan& p : plans) {
    SCOPED_TRACE(p.ep);
    const double state = p.parameters + p.optimizer;
    const double expected = p.ep == 1 ? 16.0 * params / 4 : 16.0 * ((params - experts) / 4 + experts / static_cast<double>(p.ep));
    EXPECT_NEAR(state, expected, 1e-3 * expected);  // FSDP pads its shards; the routers' bias buffers
    if (p.ep == 1) {
      EXPECT_EQ(p.all_to_all_bytes, 0.0);
      continue;
    }
    EXPECT_DOUBLE_EQ(p.all_to_all_bytes, 4.0 * 2 * pairs * (4 * d + 2) * 2);
    EXPECT_GT(p.comm_bytes, p.all_to_all_bytes);
  }
  ASSERT_EQ(plan(plan_job({"--model.name", "debug_moe", "--parallelism.expert_parallel_degree", "2"}), 4).size(), 1u);
}

// A pipeline of 2 stages on 2 ranks: each rank holds its half of the layers and one end of the root;
// 1F1B holds fewer micro-batches' activations than GPipe; the bubble is (pp - 1) / (M + pp - 1) = 1 / 5
// with 4 micro-batches; the layouts are pp x (dp_shard or tp).
TEST(Planner, PipelineRanksHoldTheirStagesAndTheScheduleDecidesTheActivations) {
  const auto piped = [](const std::string& schedule, int64_t world) {
    return plan(plan_job({"--training.local_batch_size", "4", "--parallelism.pipeline_parallel_degree", "2",
                          "--parallelism.pipeline_parallel_microbatch_size", "1",
                          "--parallelism.pipeline_parallel_schedule", schedule}),
                world);
  };
  const train::LayoutPlan one = plan(plan_job({"--training.local_batch_size", "4"}), 1).at(0);
  const std::vector<train::LayoutPlan> f1b1 = piped("1F1B", 2), gpipe = piped("GPipe", 2);
  ASSERT_EQ(f1b1.size(), 1u);
  EXPECT_EQ(f1b1[0].pp, 2);
  EXPECT_DOUBLE_EQ(f1b1[0].bubble, 0.2);
  EXPECT_LT(f1b1[0].parameters, one.parameters);
  EXPECT_GT(f1b1[0].parameters, one.parameters / 4);
  EXPECT_LT(f1b1[0].step, gpipe[0].step);
  const std::vector<train::LayoutPlan> four = piped("1F1B", 4);
  ASSERT_EQ(four.size(), 2u);  // pp 2 x dp_shard 2, pp 2 x tp 2
  EXPECT_EQ(four[0].dp_shard, 2);
  EXPECT_NEAR(four[0].parameters * 2, f1b1[0].parameters, 1e-4 * f1b1[0].parameters);  // shards padded
  EXPECT_EQ(four[1].tp, 2);
  EXPECT_LT(four[1].step, f1b1[0].step);  // heads, FFN and (sequence parallel) tokens split
}

// The memory floor's states are the model's parameter count (DecoderConfig::num_params, counted
// separately) times 16 bytes, its FSDP share on a mesh, or 2 bytes a weight of a whole frozen bf16
// base; the MoE experts and the vocabulary are named parts of it; over the budget is one line.
TEST(MemoryFloor, StatesCountEveryParameterOnce) {
  train::MemoryFloorInput in;
  for (const char* name : {"debug", "debug_moe"}) {
    in.model = models::find_size(name).config;
    const double params = static_cast<double>(in.model.num_params());
    in.world = in.dp_shard = 1;
    in.frozen_base = false;
    const train::MemoryFloor one = train::memory_floor(in);
    EXPECT_DOUBLE_EQ(one.states, 16.0 * params) << name;
    EXPECT_DOUBLE_EQ(one.embedding_states, 16.0 * (2.0 * 2048 * 256 + 256)) << name;  // untied 2048 x 256, + norm
    EXPECT_EQ(one.activations, 0.0);  // nothing measured
    in.measured_peak = one.states + 1000.0;
    EXPECT_DOUBLE_EQ(train::memory_floor(in).activations, 1000.0);  // what the step adds beyond the states
    in.measured_peak = 0;
    in.world = in.dp_shard = 4;
    EXPECT_DOUBLE_EQ(train::memory_floor(in).states, 4.0 * params) << name;
    in.frozen_base = in.bf16 = true;
    EXPECT_DOUBLE_EQ(train::memory_floor(in).states, 2.0 * params) << "a frozen base stays whole: " << name;
    in.bf16 = false;
  }
  in.world = in.dp_shard = 1;
  in.frozen_base = false;
  in.measured_peak = 16.0 * static_cast<double>(in.model.num_params()) + 1e6;  // the step adds 1 MB
  const train::MemoryFloor moe = train::memory_floor(in);
  EXPECT_DOUBLE_EQ(moe.activations, 1e6);
  EXPECT_DOUBLE_EQ(moe.expert_states, 16.0 * 4 * 8 * (256 + 3.0 * 256 * 256));  // 4 layers x 8 experts (+ router)
  EXPECT_NO_THROW(train::check_memory_floor(moe, moe.total(), "model 'debug_moe'"));
  try {
    train::check_memory_floor(moe, moe.total() - 1, "model 'debug_moe'");
    ADD_FAILURE() << "one byte short must be refused";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model 'debug_moe' needs at least"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("HINT: lower training.local_batch_size"), std::string::npos) << e.what();
  }
}

// LoRA adapters are trained states (f32 master, gradient, two AdamW moments: 16 bytes an element),
// counted from the config tree the override made: rank r on all seven projections of every layer
// has r x (in + out) per projection. Adapters that
// hold most of an over-budget floor name lora.rank.
TEST(MemoryFloor, LoraAdaptersAreTrainedStates) {
  const nn::DecoderConfig c = models::find_size("debug").config;
  nn::ConfigTree tree = nn::decoder_config_tree(c);
  plugins::LoraOptions lora;
  lora.rank = 8;
  plugins::apply_overrides(tree, {plugins::lora_override(lora)});
  const double d = static_cast<double>(c.dim), f = static_cast<double>(c.hidden_dim);
  const double q = static_cast<double>(c.num_heads * c.head_dim), kv = static_cast<double>(c.num_kv_heads * c.head_dim);
  const double per_layer = 8.0 * ((d + q) + 2 * (d + kv) + (q + d) + 2 * (d + f) + (f + d));  // wq wk wv wo w1 w3 w2
  const double adapters = static_cast<double>(c.num_layers) * per_layer;
  EXPECT_DOUBLE_EQ(train::lora_adapter_elements(tree), adapters);
  train::MemoryFloorInput in;
  in.model = c;
  in.frozen_base = true;
  in.adapter_elements = adapters;
  const double params = static_cast<double>(c.num_params());
  EXPECT_DOUBLE_EQ(train::memory_floor(in).states, 4.0 * params + 16.0 * adapters);
  in.adapter_elements = 1e12;
  const train::MemoryFloor huge = train::memory_floor_states(in);
  EXPECT_DOUBLE_EQ(huge.activations, 0.0);
  try {
    train::check_memory_floor(huge, 1e9, "model 'debug'");
    ADD_FAILURE() << "16 TB of adapters must be refused";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("HINT: lower lora.rank"), std::string::npos) << e.what();
  }
}

// Under expert parallelism a rank holds E / ep experts whole: ep=2 of dp_shard=4 keeps half the
// stacked expert weights (4 layers x 8 experts x 3 x 256 x 256) and a quarter of the rest.
TEST(MemoryFloor, ExpertParallelHoldsItsExpertsWhole) {
  train::MemoryFloorInput in;
  in.model = models::find_size("debug_moe").config;
  in.world = in.dp_shard = 4;
  const double params = static_cast<double>(in.model.num_params()), experts = 4 * 8 * 3.0 * 256 * 256;
  EXPECT_DOUBLE_EQ(train::memory_floor(in).states, 4.0 * params);
  in.ep = 2;
  EXPECT_DOUBLE_EQ(train::memory_floor(in).states, 16.0 * ((params - experts) / 4 + experts / 2));
  in.ep = 4;
  EXPECT_DOUBLE_EQ(train::memory_floor(in).states, 4.0 * params);
}

// Two ranks (threads) meeting through a SaveGroup write one checkpoint of flat pieces (one of
// them a tensor-parallel slice along dim 1); loading gives the whole tensors back exactly.
TEST(ShardedCheckpoint, TwoRanksWriteOneCheckpointThatLoadsWhole) {
  const fs::path folder = fs::temp_directory_path() / ("titan_sharded_ckpt_" + std::to_string(::getpid()));
  fs::remove_all(folder);
  Tensor w = Tensor::empty({4, 6}), v = Tensor::empty({10}), u = Tensor::empty({6, 2});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = static_cast<float>(i);
  for (int64_t i = 0; i < v.numel(); ++i) v.data<float>()[i] = 100.0f + static_cast<float>(i);
  for (int64_t i = 0; i < u.numel(); ++i) u.data<float>()[i] = 200.0f + static_cast<float>(i);
  std::barrier sync(2);
  std::string slots[2];
  const auto group = [&](int rank) {
    ckpt::SaveGroup g;
    g.rank = rank;
    g.world = 2;
    g.all_gather = [&, rank](const std::string& s) {
      slots[rank] = s;
      sync.arrive_and_wait();
      std::vector<std::string> all = {slots[0], slots[1]};
      sync.arrive_and_wait();
      return all;
    };
    g.broadcast = [&, rank](const std::string& s) {
      if (rank == 0) slots[0] = s;
      sync.arrive_and_wait();
      std::string out = slots[0];
      sync.arrive_and_wait();
      return out;
    };
    return g;
  };
  std::string paths[2];
  const auto rank_main = [&](int r) {
    ckpt::TrainState s;
    s.step = 5;
    s.loader_state_json = "{}";
    s.config_toml = "x = 1\n";
    // w split over 2 tp ranks along dim 1 ([4, 3] each), each slice in two flat pieces written
    // by... this rank alone here: rank r holds its slice whole (start 0, 12 elements).
    Tensor slice = w.narrow(1, 3 * r, 3).contiguous().reshape({12});
    s.model.emplace_back("w", slice);
    s.model_pieces.push_back({{4, 6}, 0, 1, r, 2, {}});
    // v: flat halves.
    s.model.emplace_back("v", v.narrow(0, 5 * r, 5));
    s.model_pieces.push_back({{10}, 5 * r, -1, 0, 1, {}});
    // u: rows in two parts [2 | 4] (a fused projection's), rank r holding row r of the first and
    // rows 2 + 2r, 3 + 2r of the second.
    s.model.emplace_back("u", take_along(u, 0, {r, 2 + 2 * r, 3 + 2 * r}).reshape({6}));
    s.model_pieces.push_back({{6, 2}, 0, 0, r, 2, {2, 4}});
    paths[r] = ckpt::save_train_state_sharded(folder.string(), s, group(r), true);
  };
  std::thread t1(rank_main, 1);
  rank_main(0);
  t1.join();
  EXPECT_EQ(paths[0], paths[1]);
  EXPECT_EQ(ckpt::check_checkpoint(paths[0]), "");
  const ckpt::TrainState back = ckpt::load_train_state(paths[0]);
  ASSERT_EQ(back.model.size(), 3u);
  for (const auto& [name, t] : back.model) {
    const Tensor& want = name == "w" ? w : name == "v" ? v : u;
    ASSERT_EQ(t.shape(), want.shape()) << name;
    EXPECT_EQ(0, std::memcmp(t.data<float>(), want.data<float>(), want.nbytes())) << name;
  }
  // A missing piece is an error naming the tensor, not a silently zero slice.
  fs::remove(fs::path(paths[0]) / "model-rank00001-of-00002.safetensors");
  EXPECT_THROW(ckpt::load_train_state(paths[0]), Error);
  fs::remove_all(folder);
}

}  // namespace
}  // namespace titan
