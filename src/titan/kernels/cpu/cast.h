// f32 <-> bf16 casts for the bf16 compute path: 16-lane loops with the same rounding as
// core/dtype.h's scalar f32_to_bf16 (nearest even, NaN kept quiet), so a cast is the same bits on
// every ISA and in every reference. Single-threaded over one range; callers split the work.
#pragma once

#include <cstdint>

namespace titan::kernels {

void cast_f32_to_bf16(const float* src, uint16_t* dst, int64_t n);
void cast_bf16_to_f32(const uint16_t* src, float* dst, int64_t n);

}  // namespace titan::kernels
