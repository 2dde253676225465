#include "titan/ops/builtin.h"

namespace titan::ops {

std::vector<std::pair<std::string, std::string>> selected_kernels(Device device) {
  auto entry = [device](const auto& table) {
    return std::pair<std::string, std::string>(table.op_name(), table.preferred(device).name);
  };
  return {entry(embedding_table()), entry(rms_norm_table()),  entry(linear_table()),
          entry(rope_table()),      entry(attention_table()), entry(swiglu_table()),
          entry(lm_head_xent_table()), entry(adamw_table()), entry(moe_router_table()),
          entry(moe_dispatch_table()), entry(moe_experts_table()), entry(moe_combine_table()),
          entry(accumulate_table()), entry(scale_table()), entry(sum_squares_table())};
}

void register_builtin_rms_norm(OpTable<RmsNormImpl>& table) {
  table.add(rms_norm_impl_ref());
  table.add(rms_norm_impl_cpu());
}

void register_builtin_embedding(OpTable<EmbeddingImpl>& table) {
  table.add(embedding_impl_ref());
  table.add(embedding_impl_cpu());
}

void register_builtin_swiglu(OpTable<SwigluImpl>& table) {
  table.add(swiglu_impl_ref());
  table.add(swiglu_impl_cpu());
}

void register_builtin_rope(OpTable<RopeImpl>& table) {
  table.add(rope_impl_ref());
  table.add(rope_impl_cpu());
}

void register_builtin_attention(OpTable<AttentionImpl>& table) {
  table.add(attention_impl_ref());
  table.add(attention_impl_cpu());
}
void register_builtin_linear(OpTable<LinearImpl>& table) {
  table.add(linear_impl_ref());
  table.add(linear_impl_cpu());
}

void register_builtin_lm_head_xent(OpTable<LmHeadXentImpl>& table) {
  table.add(lm_head_xent_impl_ref());
  table.add(lm_head_xent_impl_cpu());
}

void register_builtin_adamw(OpTable<AdamWImpl>& table) {
  table.add(adamw_impl_ref());
  table.add(adamw_impl_cpu());
}

void register_builtin_moe_router(OpTable<MoeRouterImpl>& table) {
  table.add(moe_router_impl_ref());
  table.add(moe_router_impl_cpu());
}

void register_builtin_moe_dispatch(OpTable<MoeDispatchImpl>& table) {
  table.add(moe_dispatch_impl_ref());
  table.add(moe_dispatch_impl_cpu());
}

void register_builtin_moe_experts(OpTable<MoeExpertsImpl>& table) {
  table.add(moe_experts_impl_ref());
  table.add(moe_experts_impl_cpu());
}

void register_builtin_moe_combine(OpTable<MoeCombineImpl>& table) {
  table.add(moe_combine_impl_ref());
  table.add(moe_combine_impl_cpu());
}

void register_builtin_accumulate(OpTable<AccumulateImpl>& table) {
  table.add(accumulate_impl_ref());
  table.add(accumulate_impl_cpu());
}

void register_builtin_scale(OpTable<ScaleImpl>& table) {
  table.add(scale_impl_ref());
  table.add(scale_impl_cpu());
}

void register_builtin_sum_squares(OpTable<SumSquaresImpl>& table) {
  table.add(sum_squares_impl_ref());
  table.add(sum_squares_impl_cpu());
}

}  // namespace titan::ops
