#include "titan/nn/config_tree.h"

namespace titan::nn {

bool NodeConfig::is_a(const std::string& type) const {
  for (const std::string& t : type_chain()) {
    if (t == type) return true;
  }
  return false;
}

}  // namespace titan::nn
