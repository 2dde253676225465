#include "titan/nn/sequence_attention.h"

#include <array>

#include "titan/ops/attention_merge/attention_merge.h"
#include "titan/ops/elementwise/elementwise.h"

namespace titan::nn {

void KvRecorder::forward(const std::string& layer, const ops::AttentionArgs& args, const Tensor& q_BTHK,
                         const Tensor& k_BTGK, const Tensor& v_BTGK, Tensor& out_BTHK, std::any& saved) {
  ops::attention_forward(args, q_BTHK, k_BTGK, v_BTGK, out_BTHK, saved.emplace<ops::AttentionSaved>());
  kv_[layer] = {k_BTGK.clone(), v_BTGK.clone()};
}

void KvRecorder::backward(const std::string&, const ops::AttentionArgs& args, const Tensor& dout_BTHK,
                          const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK, const Tensor& out_BTHK,
                          std::any& saved, Tensor& dq_BTHK, Tensor& dk_BTGK, Tensor& dv_BTGK) {
  ops::attention_backward(args, dout_BTHK, Tensor(), q_BTHK, k_BTGK, v_BTGK, out_BTHK,
                          std::any_cast<ops::AttentionSaved&>(saved), dq_BTHK, dk_BTGK, dv_BTGK);
}

namespace {

// What PrefixAttention's backward needs: each part's output and lse, and the merged lse.
struct PrefixSaved {
  std::array<Tensor, 2> out_BTHK;
  std::array<ops::AttentionSaved, 2> part;
  Tensor lse_BHT;
};

// Part 0: the prefix's keys (positions 0..P-1) for queries at P..; part 1: the chunk's own keys.
std::array<ops::AttentionArgs, 2> part_args(ops::AttentionArgs args, int64_t prefix_len) {
  args.mask = ops::AttentionMask::causal;
  args.q_offset = prefix_len;
  args.kv_offset = 0;
  ops::AttentionArgs own = args;
  own.kv_offset = prefix_len;
  return {args, own};
}

}  // namespace

const KvRecorder::Kv& PrefixAttention::prefix_of(const std::string& layer) const {
  const auto it = prefix_.recorded().find(layer);
  TITAN_CHECK(it != prefix_.recorded().end(), "[attention] ", layer,
              ": the prefix recorded no keys and values for this layer. HINT: run the prefix's forward with a "
              "KvRecorder through the same model");
  return it->second;
}

void PrefixAttention::forward(const std::string& layer, const ops::AttentionArgs& args, const Tensor& q_BTHK,
                              const Tensor& k_BTGK, const Tensor& v_BTGK, Tensor& out_BTHK, std::any& saved) {
  const KvRecorder::Kv& prefix = prefix_of(layer);
  TITAN_CHECK(prefix.k_BPGK.size(0) == q_BTHK.size(0), "[attention] ", layer, ": the prefix has ",
              prefix.k_BPGK.size(0), " rows, this chunk ", q_BTHK.size(0), ". HINT: continue the same batch rows");
  PrefixSaved& s = saved.emplace<PrefixSaved>();
  const auto args2 = part_args(args, prefix.k_BPGK.size(1));
  const std::array<const Tensor*, 2> ks = {&prefix.k_BPGK, &k_BTGK}, vs = {&prefix.v_BPGK, &v_BTGK};
  for (size_t r = 0; r < 2; ++r) {
    s.out_BTHK[r] = Tensor::empty(out_BTHK.shape(), DType::f32, q_BTHK.device());
    ops::attention_forward(args2[r], q_BTHK, *ks[r], *vs[r], s.out_BTHK[r], s.part[r]);
  }
  const std::array<Tensor, 2> lses = {s.part[0].lse_BHT, s.part[1].lse_BHT};
  ops::attention_merge_forward(s.out_BTHK, lses, out_BTHK, s.lse_BHT);
}

void PrefixAttention::backward(const std::string& layer, const ops::AttentionArgs& args, const Tensor& dout_BTHK,
                               const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK,
                               const Tensor& out_BTHK, std::any& saved, Tensor& dq_BTHK, Tensor& dk_BTGK,
                               Tensor& dv_BTGK) {
  const KvRecorder::Kv& prefix = prefix_of(layer);
  PrefixSaved& s = std::any_cast<PrefixSaved&>(saved);
  const auto args2 = part_args(args, prefix.k_BPGK.size(1));
  const std::array<Tensor, 2> lses = {s.part[0].lse_BHT, s.part[1].lse_BHT};
  std::array<Tensor, 2> douts, dlses;
  ops::attention_merge_backward(dout_BTHK, Tensor(), out_BTHK, s.lse_BHT, s.out_BTHK, lses, douts, dlses);
  // The prefix part: only its query gradient counts (the prefix is constant).
  Tensor dk_prefix = Tensor::empty(prefix.k_BPGK.shape(), DType::f32, q_BTHK.device());
  Tensor dv_prefix = Tensor::empty(prefix.v_BPGK.shape(), DType::f32, q_BTHK.device());
  Tensor dq_prefix = Tensor::empty(q_BTHK.shape(), DType::f32, q_BTHK.device());
  ops::attention_backward(args2[0], douts[0], dlses[0], q_BTHK, prefix.k_BPGK, prefix.v_BPGK, s.out_BTHK[0],
                          s.part[0], dq_prefix, dk_prefix, dv_prefix);
  ops::attention_backward(args2[1], douts[1], dlses[1], q_BTHK, k_BTGK, v_BTGK, s.out_BTHK[1], s.part[1], dq_BTHK,
                          dk_BTGK, dv_BTGK);
  ops::accumulate(dq_BTHK, dq_prefix);
}

}  // namespace titan::nn
