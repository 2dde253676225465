#include "titan/ops/builtin.h"

#include "titan/core/error.h"

namespace titan::ops {

std::vector<std::pair<std::string, std::string>> selected_kernels(Device device) {
  auto entry = [device](const auto& table) {
    return std::pair<std::string, std::string>(table.op_name(), table.preferred(device).name);
  };
  return {entry(embedding_table()), entry(rms_norm_table()),  entry(linear_table()),
          entry(rope_table()),      entry(attention_table()), entry(swiglu_table()),
          entry(lm_head_xent_table()), entry(adamw_table()), entry(moe_router_table()),
          entry(moe_dispatch_table()), entry(moe_experts_table()), entry(moe_combine_table()),
          entry(accumulate_table()), entry(scale_table()), entry(sum_squares_table()), entry(cast_table()),
          entry(kv_attention_table()), entry(multi_sum_squares_table()), entry(first_nonfinite_table()),
          entry(vocab_parallel_xent_max_table()), entry(vocab_parallel_xent_sums_table()),
          entry(vocab_parallel_xent_combine_table()),
          entry(positions_table()), entry(rows_gather_table()),
          entry(rows_strided_table()), entry(rows_mask_table()), entry(local_ids_table()),
          entry(kv_cache_append_table()), entry(moe_load_table()), entry(moe_bias_update_table()),
          entry(causal_conv1d_table()), entry(gated_delta_table()), entry(sigmoid_gate_table()),
          entry(delta_gates_table()), entry(columns_table()), entry(newton_schulz_table()),
          entry(muon_momentum_table()), entry(muon_apply_table()), entry(quantize_table()),
          entry(dequantize_table()), entry(dropout_table()), entry(attention_merge_table())};
}

// The table an implementation type belongs to (one overload per op).
static OpTable<EmbeddingImpl>& table_of(const EmbeddingImpl&) { return embedding_table(); }
static OpTable<RmsNormImpl>& table_of(const RmsNormImpl&) { return rms_norm_table(); }
static OpTable<LinearImpl>& table_of(const LinearImpl&) { return linear_table(); }
static OpTable<RopeImpl>& table_of(const RopeImpl&) { return rope_table(); }
static OpTable<AttentionImpl>& table_of(const AttentionImpl&) { return attention_table(); }
static OpTable<AttentionMergeImpl>& table_of(const AttentionMergeImpl&) { return attention_merge_table(); }
static OpTable<SwigluImpl>& table_of(const SwigluImpl&) { return swiglu_table(); }
static OpTable<LmHeadXentImpl>& table_of(const LmHeadXentImpl&) { return lm_head_xent_table(); }
static OpTable<AdamWImpl>& table_of(const AdamWImpl&) { return adamw_table(); }
static OpTable<MoeRouterImpl>& table_of(const MoeRouterImpl&) { return moe_router_table(); }
static OpTable<MoeDispatchImpl>& table_of(const MoeDispatchImpl&) { return moe_dispatch_table(); }
static OpTable<MoeExpertsImpl>& table_of(const MoeExpertsImpl&) { return moe_experts_table(); }
static OpTable<MoeCombineImpl>& table_of(const MoeCombineImpl&) { return moe_combine_table(); }
static OpTable<AccumulateImpl>& table_of(const AccumulateImpl&) { return accumulate_table(); }
static OpTable<ScaleImpl>& table_of(const ScaleImpl&) { return scale_table(); }
static OpTable<SumSquaresImpl>& table_of(const SumSquaresImpl&) { return sum_squares_table(); }
static OpTable<CastImpl>& table_of(const CastImpl&) { return cast_table(); }
static OpTable<KvAttentionImpl>& table_of(const KvAttentionImpl&) { return kv_attention_table(); }
static OpTable<MultiSumSquaresImpl>& table_of(const MultiSumSquaresImpl&) { return multi_sum_squares_table(); }
static OpTable<FirstNonfiniteImpl>& table_of(const FirstNonfiniteImpl&) { return first_nonfinite_table(); }
static OpTable<VocabParallelXentMaxImpl>& table_of(const VocabParallelXentMaxImpl&) {
  return vocab_parallel_xent_max_table();
}
static OpTable<VocabParallelXentSumsImpl>& table_of(const VocabParallelXentSumsImpl&) {
  return vocab_parallel_xent_sums_table();
}
static OpTable<VocabParallelXentCombineImpl>& table_of(const VocabParallelXentCombineImpl&) {
  return vocab_parallel_xent_combine_table();
}
static OpTable<PositionsImpl>& table_of(const PositionsImpl&) { return positions_table(); }
static OpTable<RowsGatherImpl>& table_of(const RowsGatherImpl&) { return rows_gather_table(); }
static OpTable<RowsStridedImpl>& table_of(const RowsStridedImpl&) { return rows_strided_table(); }
static OpTable<RowsMaskImpl>& table_of(const RowsMaskImpl&) { return rows_mask_table(); }
static OpTable<LocalIdsImpl>& table_of(const LocalIdsImpl&) { return local_ids_table(); }
static OpTable<KvCacheAppendImpl>& table_of(const KvCacheAppendImpl&) { return kv_cache_append_table(); }
static OpTable<MoeLoadImpl>& table_of(const MoeLoadImpl&) { return moe_load_table(); }
static OpTable<MoeBiasUpdateImpl>& table_of(const MoeBiasUpdateImpl&) { return moe_bias_update_table(); }
static OpTable<CausalConv1dImpl>& table_of(const CausalConv1dImpl&) { return causal_conv1d_table(); }
static OpTable<GatedDeltaImpl>& table_of(const GatedDeltaImpl&) { return gated_delta_table(); }
static OpTable<SigmoidGateImpl>& table_of(const SigmoidGateImpl&) { return sigmoid_gate_table(); }
static OpTable<DropoutImpl>& table_of(const DropoutImpl&) { return dropout_table(); }
static OpTable<DeltaGatesImpl>& table_of(const DeltaGatesImpl&) { return delta_gates_table(); }
static OpTable<ColumnsImpl>& table_of(const ColumnsImpl&) { return columns_table(); }
static OpTable<NewtonSchulzImpl>& table_of(const NewtonSchulzImpl&) { return newton_schulz_table(); }
static OpTable<MuonMomentumImpl>& table_of(const MuonMomentumImpl&) { return muon_momentum_table(); }
static OpTable<MuonApplyImpl>& table_of(const MuonApplyImpl&) { return muon_apply_table(); }
static OpTable<QuantizeImpl>& table_of(const QuantizeImpl&) { return quantize_table(); }
static OpTable<DequantizeImpl>& table_of(const DequantizeImpl&) { return dequantize_table(); }

static std::vector<AddedKernel>& added() {
  static std::vector<AddedKernel> list;
  return list;
}

const std::vector<AddedKernel>& added_kernels() { return added(); }

void add_kernel(const std::string& op, Kernel kernel, const std::string& origin) {
  std::visit(
      [&](auto& impl) {
        auto& table = table_of(impl);
        TITAN_CHECK(table.op_name() == op, "[kernel] ", origin, ": kernel '", impl.name, "' was registered for op '",
                    op, "' but implements op '", table.op_name(), "'. HINT: pass the op its implementation type belongs to");
        TITAN_CHECK(!impl.name.empty() && impl.forward != nullptr, "[kernel] ", origin, ": a kernel for op '", op,
                    "' needs a name and a forward function");
        for (const auto& existing : table.impls()) {
          TITAN_CHECK(existing.name != impl.name, "[kernel] ", origin, ": op '", op, "' already has a kernel named '",
                      impl.name, "'. HINT: give the plugin's kernel its own name");
        }
        added().push_back({op, impl.name, origin});
        table.add(std::move(impl));
      },
      kernel);
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

void register_builtin_attention_merge(OpTable<AttentionMergeImpl>& table) {
  table.add(attention_merge_impl_ref());
  table.add(attention_merge_impl_cpu());
}

void register_builtin_kv_attention(OpTable<KvAttentionImpl>& table) {
  table.add(kv_attention_impl_ref());
  table.add(kv_attention_impl_cpu());
}
void register_builtin_linear(OpTable<LinearImpl>& table) {
  table.add(linear_impl_ref());
  table.add(linear_impl_cpu());
}

void register_builtin_lm_head_xent(OpTable<LmHeadXentImpl>& table) {
  table.add(lm_head_xent_impl_ref());
  table.add(lm_head_xent_impl_cpu());
  table.add(lm_head_xent_impl_meta());
}

void register_builtin_adamw(OpTable<AdamWImpl>& table) {
  table.add(adamw_impl_ref());
  table.add(adamw_impl_cpu());
}

void register_builtin_moe_router(OpTable<MoeRouterImpl>& table) {
  table.add(moe_router_impl_ref());
  table.add(moe_router_impl_cpu());
  table.add(moe_router_impl_meta());
}

void register_builtin_moe_dispatch(OpTable<MoeDispatchImpl>& table) {
  table.add(moe_dispatch_impl_ref());
  table.add(moe_dispatch_impl_cpu());
  table.add(moe_dispatch_impl_meta());
}

void register_builtin_moe_experts(OpTable<MoeExpertsImpl>& table) {
  table.add(moe_experts_impl_ref());
  table.add(moe_experts_impl_cpu());
  table.add(moe_experts_impl_meta());
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

void register_builtin_cast(OpTable<CastImpl>& table) {
  table.add(cast_impl_ref());
  table.add(cast_impl_cpu());
}

void register_builtin_multi_sum_squares(OpTable<MultiSumSquaresImpl>& table) {
  table.add(multi_sum_squares_impl_ref());
  table.add(multi_sum_squares_impl_cpu());
}

void register_builtin_first_nonfinite(OpTable<FirstNonfiniteImpl>& table) {
  table.add(first_nonfinite_impl_ref());
  table.add(first_nonfinite_impl_cpu());
}

void register_builtin_vocab_parallel_xent_max(OpTable<VocabParallelXentMaxImpl>& table) {
  table.add(vocab_parallel_xent_max_impl_ref());
  table.add(vocab_parallel_xent_max_impl_cpu());
}

void register_builtin_vocab_parallel_xent_sums(OpTable<VocabParallelXentSumsImpl>& table) {
  table.add(vocab_parallel_xent_sums_impl_ref());
  table.add(vocab_parallel_xent_sums_impl_cpu());
}

void register_builtin_vocab_parallel_xent_combine(OpTable<VocabParallelXentCombineImpl>& table) {
  table.add(vocab_parallel_xent_combine_impl_ref());
  table.add(vocab_parallel_xent_combine_impl_cpu());
}

void register_builtin_positions(OpTable<PositionsImpl>& table) {
  table.add(positions_impl_ref());
  table.add(positions_impl_cpu());
}

void register_builtin_rows_gather(OpTable<RowsGatherImpl>& table) {
  table.add(rows_gather_impl_ref());
  table.add(rows_gather_impl_cpu());
}

void register_builtin_rows_strided(OpTable<RowsStridedImpl>& table) {
  table.add(rows_strided_impl_ref());
  table.add(rows_strided_impl_cpu());
}

void register_builtin_rows_mask(OpTable<RowsMaskImpl>& table) {
  table.add(rows_mask_impl_ref());
  table.add(rows_mask_impl_cpu());
}

void register_builtin_local_ids(OpTable<LocalIdsImpl>& table) {
  table.add(local_ids_impl_ref());
  table.add(local_ids_impl_cpu());
}

void register_builtin_kv_cache_append(OpTable<KvCacheAppendImpl>& table) {
  table.add(kv_cache_append_impl_ref());
  table.add(kv_cache_append_impl_cpu());
}

void register_builtin_moe_load(OpTable<MoeLoadImpl>& table) {
  table.add(moe_load_impl_ref());
  table.add(moe_load_impl_cpu());
}

void register_builtin_moe_bias_update(OpTable<MoeBiasUpdateImpl>& table) {
  table.add(moe_bias_update_impl_ref());
  table.add(moe_bias_update_impl_cpu());
}

void register_builtin_causal_conv1d(OpTable<CausalConv1dImpl>& table) {
  table.add(causal_conv1d_impl_ref());
  table.add(causal_conv1d_impl_cpu());
}

void register_builtin_gated_delta(OpTable<GatedDeltaImpl>& table) {
  table.add(gated_delta_impl_ref());
  table.add(gated_delta_impl_cpu());
}

void register_builtin_sigmoid_gate(OpTable<SigmoidGateImpl>& table) {
  table.add(sigmoid_gate_impl_ref());
  table.add(sigmoid_gate_impl_cpu());
}

void register_builtin_dropout(OpTable<DropoutImpl>& table) {
  table.add(dropout_impl_ref());
  table.add(dropout_impl_cpu());
}

void register_builtin_delta_gates(OpTable<DeltaGatesImpl>& table) {
  table.add(delta_gates_impl_ref());
  table.add(delta_gates_impl_cpu());
}

void register_builtin_columns(OpTable<ColumnsImpl>& table) {
  table.add(columns_impl_ref());
  table.add(columns_impl_cpu());
}

void register_builtin_newton_schulz(OpTable<NewtonSchulzImpl>& table) {
  table.add(newton_schulz_impl_ref());
  table.add(newton_schulz_impl_cpu());
}

void register_builtin_muon_momentum(OpTable<MuonMomentumImpl>& table) {
  table.add(muon_momentum_impl_ref());
  table.add(muon_momentum_impl_cpu());
}

void register_builtin_muon_apply(OpTable<MuonApplyImpl>& table) {
  table.add(muon_apply_impl_ref());
  table.add(muon_apply_impl_cpu());
}

void register_builtin_quantize(OpTable<QuantizeImpl>& table) {
  table.add(quantize_impl_ref());
  table.add(quantize_impl_cpu());
}

void register_builtin_dequantize(OpTable<DequantizeImpl>& table) {
  table.add(dequantize_impl_ref());
  table.add(dequantize_impl_cpu());
}

}  // namespace titan::ops
