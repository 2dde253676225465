// The explicit list of built-in op implementations (no static-initializer registration that a
// static link could drop). Each op's table calls its register_builtin_<op> on first use.
#pragma once

#include "titan/ops/rms_norm/rms_norm.h"

namespace titan::ops {

void register_builtin_rms_norm(OpTable<RmsNormImpl>& table);

}  // namespace titan::ops
