// RoPE frequency scaling, the math of Transformers' modeling_rope_utils.py (contract in
// rope_scaling.h). Computed in double; HF computes in float32, which moves an angle by at most a
// few float32 ulps.
#include "titan/ops/rope/rope_scaling.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "titan/core/error.h"

namespace titan::ops {

const char* rope_type_name(RopeType type) {
  switch (type) {
    case RopeType::default_: return "default";
    case RopeType::linear: return "linear";
    case RopeType::dynamic: return "dynamic";
    case RopeType::yarn: return "yarn";
    case RopeType::llama3: return "llama3";
    case RopeType::longrope: return "longrope";
  }
  return "?";
}

void check_rope_scaling(const RopeScaling& s, int64_t head_dim) {
  const char* name = rope_type_name(s.type);
  if (s.type == RopeType::default_) return;
  {
    TITAN_CHECK(std::isfinite(s.factor) && s.factor > 0, "[rope] ", name, ": factor must be a positive number, got ",
                s.factor, ". HINT: set rope_parameters.factor");
  }
  if (s.type == RopeType::dynamic) {
    TITAN_CHECK(s.max_position_embeddings > 0 && head_dim > 2, "[rope] dynamic: needs max_position_embeddings > 0 and "
                "head_dim > 2, got ", s.max_position_embeddings, " and ", head_dim);
  }
  if (s.type == RopeType::yarn || s.type == RopeType::llama3 || s.type == RopeType::longrope) {
    TITAN_CHECK(s.original_max_position_embeddings > 0 && std::isfinite(s.original_max_position_embeddings), "[rope] ", name,
                ": original_max_position_embeddings must be > 0, got ", s.original_max_position_embeddings,
                ". HINT: set rope_parameters.original_max_position_embeddings");
  }
  if (s.type == RopeType::llama3) {
    TITAN_CHECK(s.low_freq_factor > 0 && s.high_freq_factor > s.low_freq_factor, "[rope] llama3: expected 0 < "
                "low_freq_factor < high_freq_factor, got ", s.low_freq_factor, " and ", s.high_freq_factor);
  }
  if (s.type == RopeType::longrope) {
    const auto k2 = static_cast<size_t>(head_dim / 2);
    TITAN_CHECK(s.long_factor.size() == k2 && s.short_factor.size() == k2, "[rope] longrope: long_factor and "
                "short_factor must hold head_dim/2 = ", k2, " numbers, got ", s.long_factor.size(), " and ",
                s.short_factor.size());
  }
}

namespace {

std::vector<double> base_inv_freq(double theta, int64_t head_dim) {
  std::vector<double> inv(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i) {
    inv[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
  }
  return inv;
}

// _compute_yarn_parameters: get_mscale(scale, m) = 0.1 * m * ln(scale) + 1 (1 when scale <= 1).
double yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

RopeFrequencies yarn(double theta, int64_t head_dim, const RopeScaling& s) {
  RopeFrequencies f;
  const double dim = static_cast<double>(head_dim), factor = s.factor;
  if (s.attention_factor > 0) {
    f.attention_factor = s.attention_factor;
  } else if (s.mscale != 0 && s.mscale_all_dim != 0) {
    f.attention_factor = yarn_mscale(factor, s.mscale) / yarn_mscale(factor, s.mscale_all_dim);
  } else {
    f.attention_factor = yarn_mscale(factor, 1.0);
  }
  // The dimension at which a wavelength turns num_rotations times over the original length.
  auto correction_dim = [&](double num_rotations) {
    return dim * std::log(static_cast<double>(s.original_max_position_embeddings) / (num_rotations * 2 * std::numbers::pi)) /
           (2 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // HF: prevents a singularity
  const std::vector<double> extrapolation = base_inv_freq(theta, head_dim);
  f.inv_freq.resize(extrapolation.size());
  for (size_t i = 0; i < extrapolation.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation_weight = 1.0 - ramp;
    f.inv_freq[i] = extrapolation[i] / factor * (1.0 - extrapolation_weight) + extrapolation[i] * extrapolation_weight;
  }
  return f;
}

RopeFrequencies llama3(double theta, int64_t head_dim, const RopeScaling& s) {
  RopeFrequencies f{base_inv_freq(theta, head_dim), 1.0};
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_len / s.low_freq_factor, high_freq_wavelen = old_len / s.high_freq_factor;
  for (double& inv : f.inv_freq) {
    const double wavelen = 2 * std::numbers::pi / inv;
    if (wavelen > low_freq_wavelen) {
      inv /= s.factor;  // low frequencies: interpolated
    } else if (wavelen >= high_freq_wavelen) {  // medium: blended
      const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      inv = (1 - smooth) * inv / s.factor + smooth * inv;
    }  // high frequencies: unchanged
  }
  return f;
}

RopeFrequencies longrope(double theta, int64_t head_dim, const RopeScaling& s, int64_t seq_len) {
  const double original = static_cast<double>(s.original_max_position_embeddings);
  const double factor = s.factor;  // HF: the given factor, else max_position_embeddings / original
  RopeFrequencies f{base_inv_freq(theta, head_dim), 1.0};
  if (s.attention_factor > 0) {
    f.attention_factor = s.attention_factor;
  } else if (factor > 1.0) {
    f.attention_factor = std::sqrt(1 + std::log(factor) / std::log(original));
  }
  const std::vector<double>& ext = seq_len > s.original_max_position_embeddings ? s.long_factor : s.short_factor;
  for (size_t i = 0; i < f.inv_freq.size(); ++i) f.inv_freq[i] /= ext[i];
  return f;
}

}  // namespace

RopeFrequencies rope_frequencies(double theta, int64_t head_dim, const RopeScaling& s, int64_t seq_len) {
  check_rope_scaling(s, head_dim);
  switch (s.type) {
    case RopeType::default_: return {base_inv_freq(theta, head_dim), 1.0};
    case RopeType::linear: {
      RopeFrequencies f{base_inv_freq(theta, head_dim), 1.0};
      for (double& inv : f.inv_freq) inv /= s.factor;
      return f;
    }
    case RopeType::dynamic: {
      const double m = static_cast<double>(s.max_position_embeddings);
      const double len = std::max(static_cast<double>(seq_len), m), dim = static_cast<double>(head_dim);
      return {base_inv_freq(theta * std::pow(s.factor * len / m - (s.factor - 1), dim / (dim - 2)), head_dim), 1.0};
    }
    case RopeType::yarn: return yarn(theta, head_dim, s);
    case RopeType::llama3: return llama3(theta, head_dim, s);
    case RopeType::longrope: return longrope(theta, head_dim, s, seq_len);
  }
  TITAN_FAIL("[rope] unknown rope type");
}

}  // namespace titan::ops
