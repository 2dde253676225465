// The decoder's config tree: the nodes titan builds by default, each the config of its module.
#include "titan/nn/decoder.h"
#include "titan/nn/gated_delta_net.h"

namespace titan::nn {

// A block's norm: x * w, or x * (1 + w) with zero-centred norms (Qwen3.5).
static std::shared_ptr<RmsNormConfig> norm_node(const DecoderConfig& c, int64_t dim) {
  auto norm = std::make_shared<RmsNormConfig>(dim, c.norm_eps);
  norm->weight_offset = c.zero_centered_norms ? 1.0f : 0.0f;
  return norm;
}

// A linear-attention layer's mixer (Qwen3.5's linear_attn) in the attention slot.
static void add_linear_attention(ConfigTree& tree, const std::string& layer, const DecoderConfig& c) {
  GatedDeltaNetConfig net;
  net.dim = c.dim;
  net.k_heads = c.linear_num_key_heads;
  net.k_dim = c.linear_key_head_dim;
  net.v_heads = c.linear_num_value_heads;
  net.v_dim = c.linear_value_head_dim;
  net.conv_kernel = c.linear_conv_kernel_dim;
  net.norm_eps = c.norm_eps;
  add_gated_delta_net_nodes(tree, layer + ".attention", net);
}

// A block's MLP: the mixture of experts in a sparse layer, the dense SwiGLU otherwise.
static void add_mlp(ConfigTree& tree, const std::string& layer, int64_t i, const DecoderConfig& c) {
  if (c.is_moe_layer(i)) {
    auto moe = std::make_shared<MoeConfig>(c.dim, c.moe_hidden_dim, c.num_experts, c.num_experts_per_tok,
                                           c.norm_topk_prob, c.load_balance);
    moe->shared_expert_dim = c.shared_expert_dim;
    tree[layer + ".moe"] = std::move(moe);
    if (c.shared_expert_dim > 0) {
      const std::string shared = layer + ".moe.shared_expert";
      tree[shared] = std::make_shared<FeedForwardConfig>(c.dim, c.shared_expert_dim, false);
      tree[shared + ".w1"] = std::make_shared<LinearConfig>(c.dim, c.shared_expert_dim, false);
      tree[shared + ".w2"] = std::make_shared<LinearConfig>(c.shared_expert_dim, c.dim, false);
      tree[shared + ".w3"] = std::make_shared<LinearConfig>(c.dim, c.shared_expert_dim, false);
      tree[layer + ".moe.shared_expert_gate"] = std::make_shared<LinearConfig>(c.dim, 1, false);
    }
    auto router = std::make_shared<RouterConfig>();
    router->dim = c.dim;
    router->num_experts = c.num_experts;
    router->top_k = c.num_experts_per_tok;
    router->norm_topk_prob = c.norm_topk_prob;
    router->load_balance = c.load_balance;
    tree[layer + ".moe.router"] = std::move(router);
    auto experts = std::make_shared<ExpertsConfig>();
    experts->dim = c.dim;
    experts->hidden_dim = c.moe_hidden_dim;
    experts->num_experts = c.num_experts;
    tree[layer + ".moe.experts"] = std::move(experts);
  } else {
    const std::string ffn = layer + ".feed_forward";
    tree[ffn] = std::make_shared<FeedForwardConfig>(c.dim, c.hidden_dim, c.mlp_bias);
    tree[ffn + ".w1"] = std::make_shared<LinearConfig>(c.dim, c.hidden_dim, c.mlp_bias);
    tree[ffn + ".w2"] = std::make_shared<LinearConfig>(c.hidden_dim, c.dim, c.mlp_bias);
    tree[ffn + ".w3"] = std::make_shared<LinearConfig>(c.dim, c.hidden_dim, c.mlp_bias);
  }
}

ConfigTree decoder_config_tree(const DecoderConfig& c) {
  ConfigTree tree;
  tree["model"] = std::make_shared<DecoderNode>(c);
  tree["model.tok_embeddings"] = std::make_shared<EmbeddingConfig>(c.vocab_size, c.dim);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string layer = str("model.layers.", i);
    tree[layer] = std::make_shared<TransformerBlockConfig>();
    tree[layer + ".attention_norm"] = norm_node(c, c.dim);
    tree[layer + ".ffn_norm"] = norm_node(c, c.dim);
    add_mlp(tree, layer, i, c);
    if (c.is_linear_attention_layer(i)) {
      add_linear_attention(tree, layer, c);
      continue;
    }
    auto attention = std::make_shared<AttentionConfig>();
    attention->dim = c.dim;
    attention->num_heads = c.num_heads;
    attention->num_kv_heads = c.num_kv_heads;
    attention->head_dim = c.head_dim;
    attention->bias = c.attention_bias || c.qkv_bias;
    attention->qk_norm = c.qk_norm;
    attention->norm_eps = c.norm_eps;
    attention->out_bias = c.attention_bias;
    attention->output_gate = c.attn_output_gate;
    const int64_t q_width = c.num_heads * c.head_dim, kv_width = c.num_kv_heads * c.head_dim;
    const bool qkv_bias = attention->bias, o_bias = attention->out_bias;
    tree[layer + ".attention"] = std::move(attention);
    tree[layer + ".attention.wq"] =
        std::make_shared<LinearConfig>(c.dim, q_width * (c.attn_output_gate ? 2 : 1), qkv_bias);
    tree[layer + ".attention.wk"] = std::make_shared<LinearConfig>(c.dim, kv_width, qkv_bias);
    tree[layer + ".attention.wv"] = std::make_shared<LinearConfig>(c.dim, kv_width, qkv_bias);
    tree[layer + ".attention.wo"] = std::make_shared<LinearConfig>(q_width, c.dim, o_bias);
    if (c.qk_norm) {
      tree[layer + ".attention.q_norm"] = norm_node(c, c.head_dim);
      tree[layer + ".attention.k_norm"] = norm_node(c, c.head_dim);
    }
    auto rope = std::make_shared<RopeConfig>();
    rope->theta = c.rope_theta;
    rope->head_dim = c.rotary_dim();
    tree[layer + ".attention.rope"] = std::move(rope);
  }
  tree["model.norm"] = norm_node(c, c.dim);
  tree["model.output"] = std::make_shared<HeadConfig>(c.dim, c.vocab_size, c.tie_embeddings);
  return tree;
}

void check_decoder_tree(const DecoderConfig& config, const ConfigTree& tree) {
  const ConfigTree builtin = decoder_config_tree(config);
  for (const auto& [path, want] : builtin) {
    const auto it = tree.find(path);
    TITAN_CHECK(it != tree.end(), "[model] the config tree has no node ", path, " (", want->type_name(), ")");
    const bool container = want->type_name() == DecoderNode::kType || want->type_name() == TransformerBlockConfig::kType;
    TITAN_CHECK(!container || it->second->type_name() == want->type_name(), "[model] ", path, " is a ",
                it->second->type_name(), " node, but ", want->type_name(),
                " nodes are containers titan builds from their children. HINT: replace the children (attention, "
                "feed_forward, moe, the norms, rope, tok_embeddings, output) instead");
  }
  for (const auto& [path, node] : tree) {
    TITAN_CHECK(builtin.count(path) > 0, "[model] the config tree has a node ", path, " (", node->type_name(),
                ") that the model does not: an override may only replace nodes, not add them");
  }
}

}  // namespace titan::nn
