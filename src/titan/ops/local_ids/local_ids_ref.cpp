// The scalar reference of local_ids: local_ids.h's rule, one id at a time.
#include "titan/ops/local_ids/local_ids.h"

namespace titan::ops {

static void local_ids_ref(const LocalIdsArgs& args, const Tensor& ids_N, Tensor& local_N, Tensor& outside_N) {
  const int64_t* id = ids_N.data<int64_t>();
  int64_t* local = local_N.data<int64_t>();
  int32_t* outside = outside_N.data<int32_t>();
  for (int64_t i = 0; i < ids_N.numel(); ++i) {
    const int64_t j = id[i] - args.start;
    const bool out = j < 0 || j >= args.size;
    outside[i] = out ? 1 : 0;
    local[i] = out ? 0 : j;
  }
}

LocalIdsImpl local_ids_impl_ref() { return {"local_ids_ref", Device::cpu, nullptr, local_ids_ref, nullptr}; }

}  // namespace titan::ops
