// Contract checks, table and dispatch of local_ids.
#include "titan/ops/local_ids/local_ids.h"

#include <string>

#include "titan/ops/builtin.h"

namespace titan::ops {

static std::string found(const Tensor& t) {
  return t.defined() ? t.describe() + " on " + device_name(t.device()) + (t.is_contiguous() ? "" : ", non-contiguous")
                     : std::string("an undefined tensor");
}

void check_local_ids(const LocalIdsArgs& args, const Tensor& ids_N, const Tensor& local_N, const Tensor& outside_N) {
  TITAN_CHECK(args.start >= 0 && args.size > 0, "[local_ids] rows [", args.start, ", ", args.start + args.size,
              "): expected start >= 0 and size > 0. HINT: pass the rank's slice of the vocabulary");
  TITAN_CHECK(ids_N.defined() && ids_N.dtype() == DType::i64 && ids_N.is_contiguous(),
              "[local_ids] ids_N: expected a contiguous i64 tensor, got ", found(ids_N),
              ". HINT: call contiguous() on the ids first");
  const int64_t n = ids_N.numel();
  TITAN_CHECK(local_N.defined() && local_N.dtype() == DType::i64 && local_N.is_contiguous() &&
                  local_N.numel() == n && local_N.device() == ids_N.device(),
              "[local_ids] local_N: expected a contiguous i64 tensor of ", n, " elements (one per id) on ",
              device_name(ids_N.device()), ", got ", found(local_N), ". HINT: allocate it like the ids");
  TITAN_CHECK(outside_N.defined() && outside_N.dtype() == DType::i32 && outside_N.is_contiguous() &&
                  outside_N.numel() == n && outside_N.device() == ids_N.device(),
              "[local_ids] outside_N: expected a contiguous i32 [", n, "] (one flag per id) on ",
              device_name(ids_N.device()), ", got ", found(outside_N), ". HINT: allocate N i32 flags");
}

// Defined with the other registrations in ops/builtin.cpp (the explicit list).
void register_builtin_local_ids(OpTable<LocalIdsImpl>& table);

OpTable<LocalIdsImpl>& local_ids_table() { return builtin_table<LocalIdsImpl>("local_ids", register_builtin_local_ids); }

void local_ids_forward(const LocalIdsArgs& args, const Tensor& ids_N, Tensor& local_N, Tensor& outside_N) {
  OpTimer timer("local_ids_forward");
  check_local_ids(args, ids_N, local_N, outside_N);
  local_ids_table().select(ids_N.device(), args, ids_N).forward(args, ids_N, local_N, outside_N);
}

}  // namespace titan::ops
