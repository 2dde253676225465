// Legend: P this rank's dispatch rows, R the rows its experts process, C row width, S source ranks,
// E experts (E_local per rank).
#include "titan/parallel/expert_parallel.h"

#include <cstring>

#include "titan/core/error.h"

namespace titan::parallel {
namespace {

// Copies `rows` rows of `width` floats from src row `from` to dst row `to`.
void copy_rows(const Tensor& src, int64_t from, Tensor& dst, int64_t to, int64_t rows, int64_t width) {
  if (rows == 0) return;
  std::memcpy(dst.data<float>() + to * width, src.data<float>() + from * width,
              static_cast<size_t>(rows * width) * sizeof(float));
}

// Where block (s, e) of the received rows sits once grouped by expert: expert e's rows start at
// offsets[e], source ranks ascending within it. first_SE[s * E_local + e].
std::vector<int64_t> grouped_starts(const nn::ExpertExchange& x, int64_t ep, int64_t local) {
  std::vector<int64_t> first(static_cast<size_t>(ep * local));
  const int64_t* offsets = x.offsets_E1.data<int64_t>();
  for (int64_t e = 0; e < local; ++e) {
    int64_t at = offsets[e];
    for (int64_t s = 0; s < ep; ++s) {
      first[static_cast<size_t>(s * local + e)] = at;
      at += x.recv_rows_SE[static_cast<size_t>(s * local + e)];
    }
  }
  return first;
}

// Elements each source rank sends (or, backwards, receives): its rows for all local experts x C.
std::vector<int64_t> source_counts(const nn::ExpertExchange& x, int64_t ep, int64_t local, int64_t width) {
  std::vector<int64_t> counts(static_cast<size_t>(ep), 0);
  for (int64_t s = 0; s < ep; ++s) {
    for (int64_t e = 0; e < local; ++e) counts[static_cast<size_t>(s)] += x.recv_rows_SE[static_cast<size_t>(s * local + e)];
    counts[static_cast<size_t>(s)] *= width;
  }
  return counts;
}

std::vector<int64_t> times(std::vector<int64_t> rows, int64_t width) {
  for (int64_t& r : rows) r *= width;
  return rows;
}

}  // namespace

ExpertParallel::ExpertParallel(Comm& ep, int64_t num_experts) : comm_(ep), num_local_(num_experts / ep.size()) {
  TITAN_CHECK(num_experts % ep.size() == 0, "[parallel] ", num_experts, " experts do not split over ",
              ep.size(), " expert-parallel ranks (internal: validate_expert_parallel first)");
}

// Rank q holds experts [q E_local, (q + 1) E_local): this rank's counts for them go to q, and
// q's counts for this rank's experts come back.
nn::ExpertExchange ExpertParallel::plan(const Tensor& counts_E) {
  CommTimer timer{stats_.seconds};
  const int64_t ep = degree(), local = num_local_;
  Tensor received_SE = Tensor::zeros({ep * local}, DType::i64);
  comm_.all_to_all(counts_E.contiguous(), received_SE);
  nn::ExpertExchange x;
  const int64_t* counts = counts_E.data<int64_t>();
  x.send_rows.assign(static_cast<size_t>(ep), 0);
  for (int64_t q = 0; q < ep; ++q) {
    for (int64_t e = 0; e < local; ++e) x.send_rows[static_cast<size_t>(q)] += counts[q * local + e];
  }
  const int64_t* received = received_SE.data<int64_t>();
  x.recv_rows_SE.assign(received, received + ep * local);
  x.offsets_E1 = Tensor::zeros({local + 1}, DType::i64);
  int64_t* offsets = x.offsets_E1.data<int64_t>();
  for (int64_t e = 0; e < local; ++e) {
    offsets[e + 1] = offsets[e];
    for (int64_t s = 0; s < ep; ++s) offsets[e + 1] += received[s * local + e];
  }
  x.num_rows = offsets[local];
  return x;
}

// All-to-all (the rows arrive by source rank, each source's rows by expert), then regrouped by
// expert.
Tensor ExpertParallel::to_experts(const Tensor& rows_PC, const nn::ExpertExchange& x) {
  CommTimer timer{stats_.seconds};
  const int64_t ep = degree(), local = num_local_, width = rows_PC.size(1);
  Tensor arrived_RC = Tensor::empty({x.num_rows, width});
  comm_.all_to_all_v(rows_PC.contiguous(), times(x.send_rows, width), arrived_RC, source_counts(x, ep, local, width));
  stats_.all_to_all_bytes += (rows_PC.numel() + arrived_RC.numel()) * static_cast<int64_t>(sizeof(float));
  Tensor grouped_RC = Tensor::empty({x.num_rows, width});
  const std::vector<int64_t> first = grouped_starts(x, ep, local);
  int64_t at = 0;
  for (size_t block = 0; block < first.size(); ++block) {
    copy_rows(arrived_RC, at, grouped_RC, first[block], x.recv_rows_SE[block], width);
    at += x.recv_rows_SE[block];
  }
  return grouped_RC;
}

// The transpose of to_experts: regrouped by source rank, then all-to-all back.
Tensor ExpertParallel::from_experts(const Tensor& rows_RC, const nn::ExpertExchange& x) {
  CommTimer timer{stats_.seconds};
  const int64_t ep = degree(), local = num_local_, width = rows_RC.size(1);
  TITAN_CHECK(rows_RC.size(0) == x.num_rows, "[parallel] expert rows: expected ", x.num_rows, " rows, got ",
              rows_RC.describe());
  const Tensor grouped_RC = rows_RC.contiguous();
  Tensor by_source_RC = Tensor::empty({x.num_rows, width});
  const std::vector<int64_t> first = grouped_starts(x, ep, local);
  int64_t at = 0;
  for (size_t block = 0; block < first.size(); ++block) {
    copy_rows(grouped_RC, first[block], by_source_RC, at, x.recv_rows_SE[block], width);
    at += x.recv_rows_SE[block];
  }
  int64_t p = 0;
  for (int64_t rows : x.send_rows) p += rows;
  Tensor back_PC = Tensor::empty({p, width});
  comm_.all_to_all_v(by_source_RC, source_counts(x, ep, local, width), back_PC, times(x.send_rows, width));
  stats_.all_to_all_bytes += (by_source_RC.numel() + back_PC.numel()) * static_cast<int64_t>(sizeof(float));
  return back_PC;
}

}  // namespace titan::parallel
