// Positions on CPU: rows split over threads (each element is independent integer arithmetic, so
// the split does not change a value); within a row, a run of consecutive values after the
// padding.
#include <algorithm>

#include "titan/core/parallel.h"
#include "titan/ops/positions/positions.h"

namespace titan::ops {

// Elements per thread chunk at least: below this the fork costs more than the fill.
constexpr int64_t kPositionsGrain = 1 << 15;

template <class T>
static void fill_rows(const PositionsArgs& a, const int64_t* begin, T* pos) {
  const int64_t grain_rows = std::max<int64_t>(1, kPositionsGrain / std::max<int64_t>(1, a.seq));
  parallel_for(a.batch, grain_rows, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      T* row = pos + b * a.seq;
      const int64_t first = a.start - (begin != nullptr ? begin[b] : 0);  // position of token 0
      // Tokens before the row's first slot (first + s < 0) sit on padding: position 0.
      const int64_t pad = std::clamp<int64_t>(-first, 0, a.seq);
      if (a.padding_mask) {
        std::fill(row, row + pad, T{1});
        std::fill(row + pad, row + a.seq, T{0});
        continue;
      }
      std::fill(row, row + pad, T{0});
      for (int64_t s = pad; s < a.seq; ++s) row[s] = static_cast<T>(first + s);
    }
  });
}

static void positions_cpu(const PositionsArgs& args, const Tensor& begin_B, Tensor& pos_N) {
  const int64_t* begin = begin_B.defined() ? begin_B.data<int64_t>() : nullptr;
  if (pos_N.dtype() == DType::i64) {
    fill_rows(args, begin, pos_N.data<int64_t>());
  } else {
    fill_rows(args, begin, pos_N.data<int32_t>());
  }
}

PositionsImpl positions_impl_cpu() { return {"positions_cpu", Device::cpu, nullptr, positions_cpu, nullptr}; }

}  // namespace titan::ops
