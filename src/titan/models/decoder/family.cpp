#include "titan/models/decoder/family.h"

#include "titan/models/decoder/flops.h"
#include "titan/models/decoder/hf_checkpoint.h"
#include "titan/models/decoder/hf_names.h"
#include "titan/models/decoder/parallel_plan.h"
#include "titan/models/decoder/weights.h"

namespace titan::models {

static std::unique_ptr<nn::Decoder> build_decoder(const nn::DecoderConfig& config, const nn::ConfigTree& tree) {
  return std::make_unique<nn::Decoder>(config, tree);
}

ModelSpec decoder_family(std::string name, std::string summary, std::vector<NamedSize> sizes,
                         std::vector<std::string> hf_architectures, std::vector<config::ConfigEntry> (*configs)()) {
  ModelSpec s;
  s.name = std::move(name);
  s.summary = std::move(summary);
  s.sizes = std::move(sizes);
  s.hf.architectures = std::move(hf_architectures);
  s.hf.read_config = &load_hf_config;
  s.hf.load_weights = &load_initial_hf;
  s.hf.save_folder = &save_hf_folder;
  s.hf.architecture_of = &hf_architecture;
  s.hf.to_hf_tensors = &to_hf_tensors;
  s.parallel_plan.tp_split_dim = &tp_split_dim;
  s.parallel_plan.tp_sections = &tp_sections;
  s.parallel_plan.tp_grad_is_partial = &tp_grad_is_partial;
  s.parallel_plan.tp_local_config = &tp_local_config;
  s.config_tree = &nn::decoder_config_tree;
  s.build = &build_decoder;
  s.init_weights = &init_weights;
  s.flops_per_token = &train_flops_per_token;
  s.configs = configs;
  return s;
}

}  // namespace titan::models
