#include "titan/ops/builtin.h"

namespace titan::ops {

void register_builtin_rms_norm(OpTable<RmsNormImpl>& table) {
  table.add(rms_norm_impl_ref());
  table.add(rms_norm_impl_cpu());
}

}  // namespace titan::ops
