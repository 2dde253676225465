#include "titan/parallel/pipeline.h"

#include <algorithm>

#include "titan/core/error.h"

namespace titan::parallel {

struct Pipeline::Slot {
  nn::Activations acts;
  bool live = false;
};

Pipeline::Pipeline(nn::Decoder& model, Comm& pp, PipelineLayout layout, PipelineScheduleKind kind, int64_t token_shards)
    : model_(model), pp_(pp), layout_(std::move(layout)), kind_(kind), rank_(pp.rank()), token_shards_(token_shards) {
  TITAN_CHECK(pp.size() == layout_.pp, "[pipeline] a layout for ", layout_.pp, " ranks on a pp communicator of ",
              pp.size());
  int64_t begin = 0;
  for (int64_t s : layout_.stages_of(rank_)) {
    const auto u = static_cast<size_t>(s);
    const int64_t size = layout_.first_layer[u + 1] - layout_.first_layer[u];
    spans_.push_back({begin, begin + size, s == 0, s == layout_.num_stages() - 1});
    begin += size;
  }
  TITAN_CHECK(begin == static_cast<int64_t>(model.layers.size()), "[pipeline] rank ", rank_, " holds ",
              model.layers.size(), " layers, its stages ", begin, " (internal: keep_pipeline_part first)");
}

bool Pipeline::holds_last_stage() const { return layout_.owner(layout_.num_stages() - 1) == rank_; }

int64_t Pipeline::local_index(int64_t stage) const { return stage / layout_.pp; }

int Pipeline::tag(Message kind, int64_t stage, int64_t micro, int64_t micro_batches) const {
  return static_cast<int>((static_cast<int64_t>(kind) * layout_.num_stages() + stage) * micro_batches + micro);
}

nn::LossResult Pipeline::run(const Tensor& ids_BT, const Tensor& labels_BT, int64_t micro_rows, float grad_scale,
                             float forward_scale, const Tensor& positions_BT) {
  const int64_t B = ids_BT.size(0), T = ids_BT.size(1), D = model_.config().dim;
  TITAN_CHECK(micro_rows > 0 && B % micro_rows == 0, "[pipeline] ", B, " rows do not split into micro-batches of ",
              micro_rows);
  const int64_t M = B / micro_rows, last = layout_.num_stages() - 1;
  TITAN_CHECK((micro_rows * T) % token_shards_ == 0, "[pipeline] a micro-batch's ", micro_rows * T,
              " tokens do not split over ", token_shards_, " sequence-parallel ranks");
  const int64_t N = micro_rows * T / token_shards_;  // tokens of a stage's output on this rank
  std::vector<std::vector<Slot>> slots(spans_.size(), std::vector<Slot>(static_cast<size_t>(M)));
  struct InFlight {
    Tensor t;  // alive until its send is done
    std::unique_ptr<Pending> pending;
  };
  std::vector<InFlight> sends;
  const auto send = [&](Tensor t, int64_t to_stage, Message kind, int64_t micro) {
    auto pending = pp_.start_send(t, static_cast<int>(layout_.owner(to_stage)), tag(kind, to_stage, micro, M));
    stats_.send_bytes += static_cast<int64_t>(t.nbytes());
    sends.push_back({std::move(t), std::move(pending)});
  };
  const auto recv = [&](Tensor t, int64_t from_stage, Message kind, int64_t stage, int64_t micro) {
    CommTimer timer{stats_.seconds};
    pp_.recv(t, static_cast<int>(layout_.owner(from_stage)), tag(kind, stage, micro, M));
    return t;
  };
  // The router totals and their gradient are host values whatever device the activations are on
  // (zeros: a meta run's receive moves nothing).
  const bool totals = model_.stages_carry_router_totals();
  const int64_t E = model_.config().num_experts;
  nn::LossResult total{0.0, 0, model_.loss_terms()};
  const auto rows = [&](const Tensor& t, int64_t m) { return t.narrow(0, m * micro_rows, micro_rows).contiguous(); };
  for (const PipelineAction& a : pipeline_schedule(kind_, layout_, rank_, M)) {
    const nn::StageSpan& span = spans_[static_cast<size_t>(local_index(a.stage))];
    Slot& slot = slots[static_cast<size_t>(local_index(a.stage))][static_cast<size_t>(a.micro)];
    if (a.kind == PipelineAction::forward) {
      Tensor h_ND;
      if (!span.first) {
        h_ND = recv(Tensor::empty({N, D}, DType::f32), a.stage - 1, Message::activation, a.stage, a.micro);
        if (totals) {
          model_.set_stage_totals(slot.acts, recv(Tensor::zeros({2 * E + 1}, DType::f64, Device::cpu), a.stage - 1,
                                                  Message::router_totals, a.stage, a.micro));
        }
      }
      if (positions_BT.defined()) slot.acts.positions_BT = rows(positions_BT, a.micro);
      Tensor out_ND = model_.stage_forward(rows(ids_BT, a.micro), h_ND, span, slot.acts);
      slot.live = true;
      if (!span.last) {
        send(std::move(out_ND), a.stage + 1, Message::activation, a.micro);
        if (totals) send(model_.stage_totals(slot.acts), a.stage + 1, Message::router_totals, a.micro);
      }
      continue;
    }
    TITAN_CHECK(slot.live, "[pipeline] backward of stage ", a.stage, " micro-batch ", a.micro, " before its forward");
    Tensor dh_ND;
    if (a.stage != last) {
      dh_ND = recv(Tensor::empty({N, D}, DType::f32), a.stage + 1, Message::gradient, a.stage, a.micro);
      if (totals) {
        model_.set_stage_aux_grad(slot.acts, recv(Tensor::zeros({E}, DType::f64, Device::cpu), a.stage + 1, Message::aux_gradient,
                                                  a.stage, a.micro));
      }
    }
    nn::LossResult loss;
    Tensor dx_ND =
        model_.stage_backward(dh_ND, rows(labels_BT, a.micro), grad_scale, span, slot.acts, loss, forward_scale);
    if (!span.first) {
      send(std::move(dx_ND), a.stage - 1, Message::gradient, a.micro);
      if (totals) send(model_.stage_aux_grad(slot.acts), a.stage - 1, Message::aux_gradient, a.micro);
    }
    slot = Slot{};  // its activations are spent
    total.add(loss);
  }
  {
    CommTimer t{stats_.seconds};
    for (InFlight& f : sends) f.pending->wait();
  }
  total.loss = total.mean(M);
  return total;
}

nn::LossResult Pipeline::forward_loss(const Tensor& ids_BT, const Tensor& labels_BT, const Tensor& positions_BT) {
  const int64_t N = ids_BT.numel() / token_shards_, D = model_.config().dim;
  std::vector<std::pair<Tensor, std::unique_ptr<Pending>>> sends;
  nn::LossResult loss{0.0, 0, model_.loss_terms()};
  const std::vector<int64_t> stages = layout_.stages_of(rank_);
  for (size_t k = 0; k < stages.size(); ++k) {  // ascending stages: each waits only for the one before
    const int64_t stage = stages[k];
    const nn::StageSpan& span = spans_[k];
    Tensor h_ND;
    if (!span.first) {
      h_ND = Tensor::empty({N, D}, DType::f32);
      pp_.recv(h_ND, static_cast<int>(layout_.owner(stage - 1)), tag(Message::activation, stage, 0, 1));
    }
    nn::Activations acts;
    acts.positions_BT = positions_BT;
    Tensor out_ND = model_.stage_forward(ids_BT, h_ND, span, acts, false);
    if (span.last) {
      loss = model_.stage_loss(out_ND, labels_BT, span);
      continue;
    }
    auto pending =
        pp_.start_send(out_ND, static_cast<int>(layout_.owner(stage + 1)), tag(Message::activation, stage + 1, 0, 1));
    sends.emplace_back(std::move(out_ND), std::move(pending));
  }
  for (auto& [t, pending] : sends) pending->wait();
  return loss;
}

}  // namespace titan::parallel
