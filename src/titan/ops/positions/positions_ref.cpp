// The scalar reference of positions: the formula in positions.h, one element at a time.
#include <algorithm>

#include "titan/ops/positions/positions.h"

namespace titan::ops {

template <class T>
static void fill(const PositionsArgs& a, const Tensor& begin_B, T* pos) {
  for (int64_t b = 0; b < a.batch; ++b) {
    const int64_t begin = begin_B.defined() ? begin_B.data<int64_t>()[b] : 0;
    for (int64_t s = 0; s < a.seq; ++s) {
      pos[b * a.seq + s] = static_cast<T>(a.padding_mask ? (a.start + s < begin ? 1 : 0)
                                                         : std::max<int64_t>(0, a.start + s - begin));
    }
  }
}

static void positions_ref(const PositionsArgs& args, const Tensor& begin_B, Tensor& pos_N) {
  if (pos_N.dtype() == DType::i64) {
    fill(args, begin_B, pos_N.data<int64_t>());
  } else {
    fill(args, begin_B, pos_N.data<int32_t>());
  }
}

PositionsImpl positions_impl_ref() { return {"positions_ref", Device::cpu, nullptr, positions_ref, nullptr}; }

}  // namespace titan::ops
