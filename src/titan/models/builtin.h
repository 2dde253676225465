// The model families this build knows, and the lookups everything above models/ goes through.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "titan/models/model_spec.h"

namespace titan::models {

// Every family, in the order of models/builtin.cpp.
const std::vector<const ModelSpec*>& model_families();

// The family named `name` ("qwen3"); throws listing the known ones.
const ModelSpec& find_family(const std::string& name);
// The family with the named size `size_name` ("debug", "4B"); throws listing every known size.
const ModelSpec& family_of_size(const std::string& size_name);
// The family that reads config.json `architectures` value `architecture`; throws listing them.
const ModelSpec& family_of_architecture(const std::string& architecture);
// The named size `size_name` of whichever family has it.
const NamedSize& find_size(const std::string& size_name);

// The model a run builds: the named size `size_name`, or (empty) hf_dir/config.json read as
// AutoConfig does, by the family its `architectures` names. n_layers > 0 then overrides the depth.
ResolvedModel resolve_model(const std::string& size_name, const std::string& hf_dir, int64_t n_layers = 0);
// The family of a model read from hf_dir/config.json (its `architectures`).
const ModelSpec& family_of_hf_folder(const std::string& hf_dir);

// The model of an HF folder: `spec` (family_of_hf_folder(dir)) builds it from dir/config.json and
// loads its weights.
std::unique_ptr<nn::Decoder> load_hf_model(const ModelSpec& spec, const std::string& dir);

// Adds every family's config functions to config::config_registry(), once (later calls do
// nothing). The CLI calls it first; so does any program that looks configs up by name.
void register_config_functions();

}  // namespace titan::models
