// The explicit list of built-in op implementations (no static-initializer registration that a
// static link could drop). Each op's table calls its register_builtin_<op> on first use.
#pragma once

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "titan/ops/adamw/adamw.h"
#include "titan/ops/attention/attention.h"
#include "titan/ops/attention_merge/attention_merge.h"
#include "titan/ops/causal_conv1d/causal_conv1d.h"
#include "titan/ops/columns/columns.h"
#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/delta_gates/delta_gates.h"
#include "titan/ops/dropout/dropout.h"
#include "titan/ops/embedding/embedding.h"
#include "titan/ops/gated_delta/gated_delta.h"
#include "titan/ops/kv_attention/kv_attention.h"
#include "titan/ops/kv_cache/kv_cache.h"
#include "titan/ops/local_ids/local_ids.h"
#include "titan/ops/matmul/linear.h"
#include "titan/ops/moe_bias/moe_bias.h"
#include "titan/ops/moe_combine/moe_combine.h"
#include "titan/ops/moe_dispatch/moe_dispatch.h"
#include "titan/ops/moe_experts/moe_experts.h"
#include "titan/ops/moe_load/moe_load.h"
#include "titan/ops/moe_router/moe_router.h"
#include "titan/ops/multi_tensor/multi_tensor.h"
#include "titan/ops/muon_update/muon_update.h"
#include "titan/ops/newton_schulz/newton_schulz.h"
#include "titan/ops/positions/positions.h"
#include "titan/ops/quantize/quantize.h"
#include "titan/ops/rms_norm/rms_norm.h"
#include "titan/ops/rope/rope.h"
#include "titan/ops/rows/rows.h"
#include "titan/ops/sigmoid_gate/sigmoid_gate.h"
#include "titan/ops/softmax_xent/softmax_xent.h"
#include "titan/ops/swiglu/swiglu.h"
#include "titan/ops/vocab_parallel_xent/vocab_parallel_xent.h"

namespace titan::ops {

// {op name, preferred implementation on `device`} for every built-in op, for the startup log.
std::vector<std::pair<std::string, std::string>> selected_kernels(Device device);

// An implementation of any op: the op is its type (the variant's alternatives are distinct).
using Kernel = std::variant<EmbeddingImpl, RmsNormImpl, LinearImpl, RopeImpl, AttentionImpl, SwigluImpl,
                            LmHeadXentImpl, AdamWImpl, MoeRouterImpl, MoeDispatchImpl, MoeExpertsImpl, MoeCombineImpl,
                            AccumulateImpl, ScaleImpl, SumSquaresImpl, CastImpl, KvAttentionImpl,
                            MultiSumSquaresImpl, FirstNonfiniteImpl, VocabParallelXentMaxImpl,
                            VocabParallelXentSumsImpl, VocabParallelXentCombineImpl, PositionsImpl,
                            RowsGatherImpl, RowsStridedImpl, RowsMaskImpl, LocalIdsImpl, KvCacheAppendImpl,
                            MoeLoadImpl, MoeBiasUpdateImpl, CausalConv1dImpl, GatedDeltaImpl, SigmoidGateImpl,
                            DeltaGatesImpl, ColumnsImpl, NewtonSchulzImpl,
                            MuonMomentumImpl, MuonApplyImpl, QuantizeImpl, DequantizeImpl, DropoutImpl,
                            AttentionMergeImpl>;
// Adds `kernel` to the table of op `op` ("rms_norm", ...) after the implementations already
// there, so dispatch prefers it on its device wherever its `supports` accepts the case (a plugin's
// kernel; origin names the plugin). A one-line error when `op` is not the kernel's op, the kernel
// has no forward, or its name is taken.
void add_kernel(const std::string& op, Kernel kernel, const std::string& origin);

struct AddedKernel {
  std::string op, name, origin;
};
// The kernels add_kernel added, in order.
const std::vector<AddedKernel>& added_kernels();

void register_builtin_rms_norm(OpTable<RmsNormImpl>& table);
void register_builtin_embedding(OpTable<EmbeddingImpl>& table);
void register_builtin_swiglu(OpTable<SwigluImpl>& table);
void register_builtin_rope(OpTable<RopeImpl>& table);
void register_builtin_attention(OpTable<AttentionImpl>& table);
void register_builtin_attention_merge(OpTable<AttentionMergeImpl>& table);
void register_builtin_kv_attention(OpTable<KvAttentionImpl>& table);
void register_builtin_linear(OpTable<LinearImpl>& table);
void register_builtin_lm_head_xent(OpTable<LmHeadXentImpl>& table);
void register_builtin_adamw(OpTable<AdamWImpl>& table);
void register_builtin_moe_router(OpTable<MoeRouterImpl>& table);
void register_builtin_moe_dispatch(OpTable<MoeDispatchImpl>& table);
void register_builtin_moe_experts(OpTable<MoeExpertsImpl>& table);
void register_builtin_moe_combine(OpTable<MoeCombineImpl>& table);
void register_builtin_multi_sum_squares(OpTable<MultiSumSquaresImpl>& table);
void register_builtin_first_nonfinite(OpTable<FirstNonfiniteImpl>& table);
void register_builtin_vocab_parallel_xent_max(OpTable<VocabParallelXentMaxImpl>& table);
void register_builtin_vocab_parallel_xent_sums(OpTable<VocabParallelXentSumsImpl>& table);
void register_builtin_vocab_parallel_xent_combine(OpTable<VocabParallelXentCombineImpl>& table);
void register_builtin_positions(OpTable<PositionsImpl>& table);
void register_builtin_rows_gather(OpTable<RowsGatherImpl>& table);
void register_builtin_rows_strided(OpTable<RowsStridedImpl>& table);
void register_builtin_rows_mask(OpTable<RowsMaskImpl>& table);
void register_builtin_local_ids(OpTable<LocalIdsImpl>& table);
void register_builtin_kv_cache_append(OpTable<KvCacheAppendImpl>& table);
void register_builtin_moe_load(OpTable<MoeLoadImpl>& table);
void register_builtin_moe_bias_update(OpTable<MoeBiasUpdateImpl>& table);
void register_builtin_causal_conv1d(OpTable<CausalConv1dImpl>& table);
void register_builtin_gated_delta(OpTable<GatedDeltaImpl>& table);
void register_builtin_sigmoid_gate(OpTable<SigmoidGateImpl>& table);
void register_builtin_dropout(OpTable<DropoutImpl>& table);
void register_builtin_delta_gates(OpTable<DeltaGatesImpl>& table);
void register_builtin_columns(OpTable<ColumnsImpl>& table);
void register_builtin_newton_schulz(OpTable<NewtonSchulzImpl>& table);
void register_builtin_muon_momentum(OpTable<MuonMomentumImpl>& table);
void register_builtin_muon_apply(OpTable<MuonApplyImpl>& table);
void register_builtin_quantize(OpTable<QuantizeImpl>& table);
void register_builtin_dequantize(OpTable<DequantizeImpl>& table);

}  // namespace titan::ops
