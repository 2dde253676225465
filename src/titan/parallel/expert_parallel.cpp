// Legend: P this rank's dispatch rows, R the rows its experts process, C row width, S source ranks,
// E experts (E_local per rank).
#include "titan/parallel/expert_parallel.h"

#include <vector>

#include "titan/core/error.h"
#include "titan/ops/rows/rows.h"

namespace titan::parallel {
namespace {

// A tensor's int64 values on the host: the exchange's sizes are host metadata (the all-to-all needs
// them on the host whatever device holds the counts); core's copy moves them.
std::vector<int64_t> host_values(const Tensor& t_N) {
  TITAN_CHECK(!t_N.is_meta(), "[parallel] expert exchange sizes of a meta tensor (internal: plan() routes evenly "
              "on meta)");
  std::vector<int64_t> out(static_cast<size_t>(t_N.numel()));
  Tensor::wrap(out.data(), {t_N.numel()}, DType::i64, nullptr).copy_from(t_N.contiguous());
  return out;
}

// Where block (s, e) of the received rows sits once grouped by expert: expert e's rows start at
// offsets[e], source ranks ascending within it. first_SE[s * E_local + e].
std::vector<int64_t> grouped_starts(const nn::ExpertExchange& x, int64_t ep, int64_t local) {
  std::vector<int64_t> first(static_cast<size_t>(ep * local));
  int64_t at = 0;  // expert e's rows start where expert e - 1's end (offsets_E1, from the host counts)
  for (int64_t e = 0; e < local; ++e) {
    for (int64_t s = 0; s < ep; ++s) {
      first[static_cast<size_t>(s * local + e)] = at;
      at += x.recv_rows_SE[static_cast<size_t>(s * local + e)];
    }
  }
  return first;
}

// The row index that regroups the received rows (by source rank, then expert) by expert
// (`to_grouped`), or back: index_R[r] is the row of the input that row r of the output copies.
std::vector<int64_t> regroup_index(const nn::ExpertExchange& x, int64_t ep, int64_t local, bool to_grouped) {
  const std::vector<int64_t> first = grouped_starts(x, ep, local);
  std::vector<int64_t> index(static_cast<size_t>(x.num_rows));
  int64_t at = 0;
  for (size_t block = 0; block < first.size(); ++block) {
    for (int64_t k = 0; k < x.recv_rows_SE[block]; ++k) {
      if (to_grouped) {
        index[static_cast<size_t>(first[block] + k)] = at + k;
      } else {
        index[static_cast<size_t>(at + k)] = first[block] + k;
      }
    }
    at += x.recv_rows_SE[block];
  }
  return index;
}

// rows_RC regrouped through `index` (ops/rows: a whole-row gather).
Tensor regroup(const Tensor& rows_RC, std::vector<int64_t>& index) {
  Tensor out_RC = Tensor::empty({rows_RC.size(0), rows_RC.size(1)}, DType::f32, rows_RC.device());
  if (rows_RC.size(0) == 0 || rows_RC.is_meta()) return out_RC;  // meta rows have no order to change
  const Tensor index_R = Tensor::wrap(index.data(), {static_cast<int64_t>(index.size())}, DType::i64, nullptr);
  ops::rows_gather_forward(rows_RC, index_R, out_RC);
  return out_RC;
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
nn::ExpertExchange ExpertParallel::plan(const Tensor& counts_E, int64_t rows) {
  CommTimer timer{stats_.seconds};
  const int64_t ep = degree(), local = num_local_, e = counts_E.numel();
  Tensor received_SE = Tensor::zeros({ep * local}, DType::i64, counts_E.device());
  comm_.all_to_all(counts_E.contiguous(), received_SE);
  nn::ExpertExchange x;
  // A meta run has no counts: every rank routes its rows evenly (expert j gets rows / E, the first
  // rows % E one more), so each source rank sends this rank what it sends each rank.
  std::vector<int64_t> counts(static_cast<size_t>(e));
  for (int64_t j = 0; j < e; ++j) counts[static_cast<size_t>(j)] = rows / e + (j < rows % e ? 1 : 0);
  if (!counts_E.is_meta()) counts = host_values(counts_E);
  x.send_rows.assign(static_cast<size_t>(ep), 0);
  for (int64_t q = 0; q < ep; ++q) {
    for (int64_t e = 0; e < local; ++e) x.send_rows[static_cast<size_t>(q)] += counts[static_cast<size_t>(q * local + e)];
  }
  if (received_SE.is_meta()) {
    x.recv_rows_SE.resize(static_cast<size_t>(ep * local));
    for (int64_t s = 0; s < ep; ++s) {
      for (int64_t j = 0; j < local; ++j) {
        x.recv_rows_SE[static_cast<size_t>(s * local + j)] = counts[static_cast<size_t>(rank() * local + j)];
      }
    }
  } else {
    x.recv_rows_SE = host_values(received_SE);
  }
  std::vector<int64_t> offsets(static_cast<size_t>(local + 1), 0);
  for (int64_t e = 0; e < local; ++e) {
    offsets[static_cast<size_t>(e + 1)] = offsets[static_cast<size_t>(e)];
    for (int64_t s = 0; s < ep; ++s) offsets[static_cast<size_t>(e + 1)] += x.recv_rows_SE[static_cast<size_t>(s * local + e)];
  }
  x.offsets_E1 = Tensor::empty({local + 1}, DType::i64, counts_E.device());
  x.offsets_E1.copy_from(Tensor::wrap(offsets.data(), {local + 1}, DType::i64, nullptr));
  x.num_rows = offsets[static_cast<size_t>(local)];
  return x;
}

// All-to-all (the rows arrive by source rank, each source's rows by expert), then regrouped by
// expert.
Tensor ExpertParallel::to_experts(const Tensor& rows_PC, const nn::ExpertExchange& x) {
  CommTimer timer{stats_.seconds};
  const int64_t ep = degree(), local = num_local_, width = rows_PC.size(1);
  Tensor arrived_RC = Tensor::empty({x.num_rows, width}, DType::f32, rows_PC.device());
  comm_.all_to_all_v(rows_PC.contiguous(), times(x.send_rows, width), arrived_RC, source_counts(x, ep, local, width));
  stats_.all_to_all_bytes += (rows_PC.numel() + arrived_RC.numel()) * static_cast<int64_t>(sizeof(float));
  std::vector<int64_t> index = regroup_index(x, ep, local, /*to_grouped=*/true);
  const Tensor grouped_RC = regroup(arrived_RC, index);
  return grouped_RC;
}

// The transpose of to_experts: regrouped by source rank, then all-to-all back.
Tensor ExpertParallel::from_experts(const Tensor& rows_RC, const nn::ExpertExchange& x) {
  CommTimer timer{stats_.seconds};
  const int64_t ep = degree(), local = num_local_, width = rows_RC.size(1);
  TITAN_CHECK(rows_RC.size(0) == x.num_rows, "[parallel] expert rows: expected ", x.num_rows, " rows, got ",
              rows_RC.describe());
  std::vector<int64_t> index = regroup_index(x, ep, local, /*to_grouped=*/false);
  const Tensor by_source_RC = regroup(rows_RC.contiguous(), index);
  int64_t p = 0;
  for (int64_t rows : x.send_rows) p += rows;
  Tensor back_PC = Tensor::empty({p, width}, DType::f32, rows_RC.device());
  comm_.all_to_all_v(by_source_RC, source_counts(x, ep, local, width), back_PC, times(x.send_rows, width));
  stats_.all_to_all_bytes += (by_source_RC.numel() + back_PC.numel()) * static_cast<int64_t>(sizeof(float));
  return back_PC;
}

}  // namespace titan::parallel
