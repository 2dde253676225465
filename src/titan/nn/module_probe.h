// One forward and backward of any module on random inputs, for checking a plugin's module or
// kernel against titan's own (titan check-kernels). The kind of the module (nn/module.h) decides
// the inputs: tokens [N, D] for norms, attention, feed-forward, MoE, the router and the head; ids
// for the embedding; q/k-shaped [B, T, H, K] for RoPE (with the query and the kv head counts);
// dispatch rows [2 N, D] split evenly over the experts for the grouped experts.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "titan/nn/decoder.h"

namespace titan::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Sets every parameter of `module` to N(0, 1/fan_in) values from `seed` (keyed by FQN, so two
// modules with the same parameter names get the same values).
void probe_parameters(Module& module, uint64_t seed);
// Runs `module` (built from the node at `path` of `tree`) on micro-batches of [batch, seq]: its
// outputs, its input gradient and every parameter gradient (zeroed first), named. Throws the
// module's own error when its check() refuses the shape.
NamedTensors probe_module(Module& module, const ConfigTree& tree, const std::string& path, int64_t batch, int64_t seq);

}  // namespace titan::nn
