// Pipeline stages of a decoder on one process: cutting a decoder into parts (keep_pipeline_part)
// and running stage_forward / stage_backward part after part, handing each part's output (and
// input gradient) to the next by hand, gives the whole decoder's forward_backward loss and every
// gradient bit for bit (the same kernels on the same inputs), for dense and MoE (bias balancing)
// models, two micro-batches held at once (1F1B's order), and interleaved parts (a part holding two
// non-adjacent stages). The forward-only path (stage_forward keep = false, stage_loss) gives
// forward_loss's loss.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "titan/core/rng.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/weights.h"

namespace titan::nn {
namespace {

DecoderConfig tiny(bool moe) {
  DecoderConfig c = models::find_size(moe ? "debug_moe" : "debug").config;
  c.vocab_size = 96;
  c.dim = 32;
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.hidden_dim = 40;
  if (moe) {
    c.num_experts = 4;
    c.num_experts_per_tok = 2;
    c.moe_hidden_dim = 16;
    c.load_balance = LoadBalance::bias;
  }
  return c;
}

Tensor random_ids(int64_t b, int64_t t, int64_t vocab, uint64_t seed) {
  Tensor ids = Tensor::empty({b, t}, DType::i64);
  Rng(seed).fill_int(ids.data<int64_t>(), b * t, vocab);
  return ids;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.numel() * sizeof(float)) == 0;
}

// One part of a cut decoder: the decoder holding `layers` and its stages' spans (local indices).
struct Part {
  std::unique_ptr<Decoder> model;
  std::vector<StageSpan> spans;
};

// Stages given by their first layers (stage s on part s % parts).
std::vector<Part> cut(const DecoderConfig& c, const std::vector<int64_t>& first_layer, int64_t parts) {
  std::vector<Part> out(static_cast<size_t>(parts));
  const int64_t stages = static_cast<int64_t>(first_layer.size()) - 1;
  for (int64_t p = 0; p < parts; ++p) {
    Part& part = out[static_cast<size_t>(p)];
    part.model = std::make_unique<Decoder>(c);
    models::init_weights(*part.model, 7);
    std::vector<int64_t> layers;
    for (int64_t s = p; s < stages; s += parts) {
      const int64_t begin = static_cast<int64_t>(layers.size());
      for (int64_t l = first_layer[static_cast<size_t>(s)]; l < first_layer[static_cast<size_t>(s) + 1]; ++l) {
        layers.push_back(l);
      }
      part.spans.push_back({begin, static_cast<int64_t>(layers.size()), s == 0, s == stages - 1});
    }
    part.model->keep_pipeline_part(layers, p == 0, (stages - 1) % parts == p);
  }
  return out;
}

// Every micro-batch through the stages: all forwards (stage order), then the backwards (reverse).
double run_stages(std::vector<Part>& parts, const std::vector<Tensor>& ids, const std::vector<Tensor>& targets,
                  float scale) {
  const auto stages = static_cast<int64_t>(parts.size() * parts[0].spans.size());
  const auto at = [&](int64_t s) -> std::pair<Decoder&, const StageSpan&> {
    Part& p = parts[static_cast<size_t>(s) % parts.size()];
    return {*p.model, p.spans[static_cast<size_t>(s) / parts.size()]};
  };
  std::vector<std::map<int64_t, Activations>> acts(ids.size());
  double loss = 0;
  for (size_t m = 0; m < ids.size(); ++m) {
    Tensor h;
    for (int64_t s = 0; s < stages; ++s) h = at(s).first.stage_forward(ids[m], h, at(s).second, acts[m][s]);
  }
  for (size_t m = 0; m < ids.size(); ++m) {
    Tensor dh;
    for (int64_t s = stages; s-- > 0;) {
      LossResult l;
      dh = at(s).first.stage_backward(dh, targets[m], scale, at(s).second, acts[m][s], l);
      loss += l.sum(kCrossEntropyTerm);
    }
    EXPECT_FALSE(dh.defined());  // the first stage ends in the embedding
  }
  return loss;
}

void expect_parts_train_whole_bits(const DecoderConfig& c, const std::vector<int64_t>& first_layer, int64_t parts) {
  Decoder whole(c);
  models::init_weights(whole, 7);
  std::vector<Tensor> ids, targets;
  double want = 0;
  for (uint64_t m = 0; m < 2; ++m) {
    ids.push_back(random_ids(2, 16, c.vocab_size, 40 + m));
    targets.push_back(random_ids(2, 16, c.vocab_size, 50 + m));
    want += whole.forward_backward(ids.back(), targets.back(), 1.0f / 64).sum(kCrossEntropyTerm);
  }
  std::vector<Part> cut_parts = cut(c, first_layer, parts);
  const double got = run_stages(cut_parts, ids, targets, 1.0f / 64);
  EXPECT_EQ(std::memcmp(&got, &want, sizeof(double)), 0) << got << " vs " << want;
  std::map<std::string, Tensor> grads;
  size_t held = 0;
  for (Part& p : cut_parts) {
    for (Parameter* q : p.model->parameters()) grads[q->fqn] = q->grad;
    held += p.model->parameters().size();
  }
  const ParameterList all = whole.parameters();
  EXPECT_EQ(held, all.size());  // every parameter on exactly one part
  for (Parameter* q : all) {
    ASSERT_TRUE(grads.count(q->fqn)) << q->fqn;
    EXPECT_TRUE(same_bits(grads.at(q->fqn), q->grad)) << q->fqn;
  }
}

TEST(PipelineStage, PartsTrainTheWholeDecodersBits) {
  for (const bool moe : {false, true}) {
    SCOPED_TRACE(moe ? "moe" : "dense");
    const DecoderConfig c = tiny(moe);
    expect_parts_train_whole_bits(c, {0, 1, 4}, 2);        // uneven stages on 2 parts
    expect_parts_train_whole_bits(c, {0, 1, 2, 3, 4}, 2);  // interleaved: 2 stages per part
  }
}

TEST(PipelineStage, ForwardOnlyStagesGiveForwardLoss) {
  const DecoderConfig c = tiny(false);
  Decoder whole(c);
  models::init_weights(whole, 7);
  const Tensor ids = random_ids(2, 16, c.vocab_size, 60), targets = random_ids(2, 16, c.vocab_size, 61);
  const LossResult want = whole.forward_loss(ids, targets);
  std::vector<Part> parts = cut(c, {0, 2, 4}, 2);
  Activations a0, a1;
  const Tensor h = parts[0].model->stage_forward(ids, Tensor(), parts[0].spans[0], a0, false);
  const Tensor hn = parts[1].model->stage_forward(ids, h, parts[1].spans[0], a1, false);
  EXPECT_TRUE(a1.layers.empty());  // nothing kept for a backward
  const LossResult got = parts[1].model->stage_loss(hn, targets, parts[1].spans[0]);
  EXPECT_EQ(got.sum(kCrossEntropyTerm), want.sum(kCrossEntropyTerm));
  EXPECT_EQ(got.num_targets, want.num_targets);
}

}  // namespace
}  // namespace titan::nn
