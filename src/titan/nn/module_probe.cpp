#include "titan/nn/module_probe.h"

#include <cmath>
#include <functional>

#include "titan/core/rng.h"
#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/positions/positions.h"

namespace titan::nn {
namespace {

Tensor random(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  Rng(seed).fill_normal(t.data<float>(), t.numel(), 0.0f, 1.0f);
  return t;
}

Tensor random_ids(int64_t n, int64_t vocab, uint64_t seed) {
  Tensor ids = Tensor::empty({n}, DType::i64);
  Rng(seed).fill_int(ids.data<int64_t>(), n, vocab);
  return ids;
}

// The step context of a [batch, seq] micro-batch with the model's RoPE.
StepContext context(const ConfigTree& tree, int64_t batch, int64_t seq) {
  const DecoderConfig& c = dynamic_cast<const DecoderNode&>(*tree.at("model")).config;
  StepContext ctx;
  ctx.batch = batch;
  ctx.seq = seq;
  ctx.positions_N = ops::make_positions({batch, seq, 0});
  ctx.rope = ops::rope_tables({c.rope_theta, c.rope_scaling}, ctx.positions_N, c.head_dim);
  return ctx;
}

void add_parameter_grads(Module& module, NamedTensors& out) {
  ParameterList params;
  module.collect(params);
  for (Parameter* p : params) out.emplace_back("d" + p->fqn, p->grad.clone());
}

}  // namespace

void probe_parameters(Module& module, uint64_t seed) {
  ParameterList params;
  module.collect(params);
  for (Parameter* p : params) {
    Tensor w = random(p->value.shape(), seed ^ std::hash<std::string>{}(p->fqn));
    const float scale = 1.0f / std::sqrt(static_cast<float>(w.size(w.ndim() - 1)));
    ops::scale(w, scale);
    p->value.copy_from(w);
  }
}

NamedTensors probe_module(Module& module, const ConfigTree& tree, const std::string& path, int64_t batch, int64_t seq) {
  const DecoderConfig& c = dynamic_cast<const DecoderNode&>(*tree.at("model")).config;
  const int64_t n = batch * seq;
  ParameterList params;
  module.collect(params);
  for (Parameter* p : params) p->grad.zero_();
  NamedTensors out;
  const StepContext ctx = context(tree, batch, seq);
  if (auto* rope = dynamic_cast<RopeModule*>(&module)) {
    for (const int64_t heads : {c.num_heads, c.num_kv_heads}) {
      rope->check_heads(batch, seq, heads, c.head_dim);
      Tensor y = random({batch, seq, heads, c.head_dim}, 1), dx = random(y.shape(), 2);
      rope->forward(ctx, y);
      rope->backward(ctx, dx);
      out.emplace_back(str("y (", heads, " heads)"), y);
      out.emplace_back(str("dx (", heads, " heads)"), dx);
    }
    return out;
  }
  module.check(batch, seq);
  std::any saved;
  if (auto* emb = dynamic_cast<EmbeddingModule*>(&module)) {
    out.emplace_back("y", emb->forward(random_ids(n, c.vocab_size, 1), saved));
    emb->backward(random({n, c.dim}, 2), saved);
  } else if (auto* head = dynamic_cast<HeadModule*>(&module)) {
    Tensor x = random({n, c.dim}, 1), dx = Tensor::empty({n, c.dim});
    Tensor targets = random_ids(n, c.vocab_size, 2);
    const ops::LmHeadXentResult r = head->loss(x, targets, 1.0f / static_cast<float>(n), dx);
    Tensor loss = Tensor::empty({1});
    loss.data<float>()[0] = static_cast<float>(r.loss_sum / static_cast<double>(n));
    out.emplace_back("loss", loss);
    out.emplace_back("logits", head->logits(x));
    out.emplace_back("dx", dx);
  } else if (auto* router = dynamic_cast<RouterModule*>(&module)) {
    const auto& rc = dynamic_cast<const RouterConfig&>(*tree.at(path));
    const Tensor x = random({n, c.dim}, 1);
    ops::MoeRouting routing;
    router->forward(x, routing);
    Tensor dx = Tensor::empty({n, c.dim});
    router->backward(random({n, rc.top_k}, 2), random({n, rc.num_experts}, 3), x, routing, dx);
    out.emplace_back("probs", routing.probs_NE);
    out.emplace_back("weight", routing.weight_NK);
    out.emplace_back("dx", dx);
  } else if (auto* experts = dynamic_cast<ExpertsModule*>(&module)) {
    // n tokens x 2 pairs as dispatch rows, split evenly over the experts (the last takes the rest).
    const auto& ec = dynamic_cast<const ExpertsConfig&>(*tree.at(path));
    const int64_t k = 2, p = n * k;
    Tensor offsets = Tensor::empty({ec.num_experts + 1}, DType::i64);
    for (int64_t e = 0; e <= ec.num_experts; ++e) offsets.data<int64_t>()[e] = e * (p / ec.num_experts);
    offsets.data<int64_t>()[ec.num_experts] = p;
    Tensor pair_of_row = Tensor::empty({p}, DType::i32);
    ops::positions_forward({1, p, 0}, Tensor(), pair_of_row);  // row r is pair r
    const Tensor x = random({p, c.dim}, 1), weight = random({n, k}, 4);
    out.emplace_back("y", experts->forward(x, offsets, saved));
    Tensor dx = Tensor::empty({p, c.dim}), dweight = Tensor::empty({n, k});
    experts->backward(random({p, c.dim}, 2), weight, pair_of_row, x, offsets, saved, dx, dweight);
    out.emplace_back("dx", dx);
    out.emplace_back("dweight", dweight);
  } else {
    // The rest read tokens [N, D] (q/k norms: [N, H, K] rows of head_dim) and give them back.
    const auto* norm = dynamic_cast<const RmsNormConfig*>(tree.at(path).get());
    const Shape shape = norm != nullptr ? Shape{n, norm->dim} : Shape{n, c.dim};
    const Tensor x = random(shape, 1), dy = random(shape, 2);
    Tensor y, dx;
    if (auto* m = dynamic_cast<LinearModule*>(&module)) {
      const auto& lc = dynamic_cast<const LinearConfig&>(*tree.at(path));
      const Tensor xl = random({n, lc.in_features}, 1);
      LinearModule::Saved ls;
      y = m->forward(xl, ls);
      dx = m->backward(random({n, lc.out_features}, 2), ls);
    } else if (auto* m = dynamic_cast<RmsNormModule*>(&module)) {
      y = m->forward(x, saved);
      dx = m->backward(dy, saved);
    } else if (auto* m = dynamic_cast<AttentionModule*>(&module)) {
      y = m->forward(ctx, x, saved);
      dx = m->backward(ctx, dy, saved);
    } else if (auto* m = dynamic_cast<FeedForwardModule*>(&module)) {
      y = m->forward(x, saved);
      dx = m->backward(dy, saved);
    } else if (auto* m = dynamic_cast<MoeModule*>(&module)) {
      RouterTotals totals;
      y = m->forward(x, saved, &totals);
      dx = m->backward(ctx, dy, saved);
    } else {
      TITAN_FAIL("[nn] ", path, ": ", module.describe(), " is of no module kind titan knows (nn/module.h)");
    }
    out.emplace_back("y", y);
    out.emplace_back("dx", dx);
  }
  add_parameter_grads(module, out);
  return out;
}

}  // namespace titan::nn
