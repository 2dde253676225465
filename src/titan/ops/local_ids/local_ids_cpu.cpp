// local_ids on CPU: the ids split over threads (each id is independent integer arithmetic, so the
// split does not change a value), branch-free so the loop vectorises.
#include "titan/core/parallel.h"
#include "titan/ops/local_ids/local_ids.h"

namespace titan::ops {

// Ids per thread chunk at least: below this the fork costs more than the work.
constexpr int64_t kLocalIdsGrain = 1 << 15;

static void local_ids_cpu(const LocalIdsArgs& args, const Tensor& ids_N, Tensor& local_N, Tensor& outside_N) {
  const int64_t* id = ids_N.data<int64_t>();
  int64_t* local = local_N.data<int64_t>();
  int32_t* outside = outside_N.data<int32_t>();
  const int64_t start = args.start;
  // One unsigned compare: j < 0 wraps to a huge value, so j >= size catches both sides.
  const auto size = static_cast<uint64_t>(args.size);
  parallel_for(ids_N.numel(), kLocalIdsGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t j = id[i] - start;
      const bool inside = static_cast<uint64_t>(j) < size;
      outside[i] = inside ? 0 : 1;
      local[i] = inside ? j : 0;
    }
  });
}

LocalIdsImpl local_ids_impl_cpu() { return {"local_ids_cpu", Device::cpu, nullptr, local_ids_cpu, nullptr}; }

}  // namespace titan::ops
