#include "titan/train/validator.h"

#include <cmath>

#include "titan/core/clock.h"
#include "titan/core/error.h"
#include "titan/core/log.h"
#include "titan/data/prefetch_loader.h"

namespace titan::train {

data::Batch data_parallel_rows(const data::Batch& global, int64_t dp_rank, int64_t rows) {
  if (global.inputs_BT.size(0) == rows) return global;
  return data::Batch{global.inputs_BT.narrow(0, dp_rank * rows, rows).clone(),
                     global.labels_BT.narrow(0, dp_rank * rows, rows).clone(),
                     global.positions_BT.narrow(0, dp_rank * rows, rows).clone()};
}

Validator::Validator(data::LoaderConfig global, const data::Tokenizer& tokenizer, int64_t local_batch,
                     int64_t dp_rank, int64_t max_batches)
    : global_(std::move(global)), tokenizer_(&tokenizer), local_batch_(local_batch), dp_rank_(dp_rank),
      max_batches_(max_batches) {
  global_.infinite = false;
  global_.rank = 0;  // every rank reads the global stream and keeps its rows
  global_.world = 1;
}

int64_t Validator::check_set() const {
  data::Loader loader(global_, *tokenizer_);
  if (loader.next()) return global_.batch_size * global_.seq_len;
  const int64_t held = loader.state().carry_tokens;
  const int64_t want = global_.batch_size * (global_.seq_len + 1);
  TITAN_FAIL("[validation] validation.dataset_path ", global_.dataset.path, " holds ", held,
             " tokens, fewer than one validation batch of ", global_.batch_size, " rows x ", global_.seq_len + 1,
             " tokens = ", want, ". HINT: use a larger validation set, or lower validation.local_batch_size / "
             "validation.seq_len");
}

ValidationMetrics Validator::run(models::Parallelized& model, int64_t step, const std::function<int()>& stop) const {
  const auto t0 = Clock::now();
  data::PrefetchLoader loader(global_, *tokenizer_);
  double sums[2] = {0.0, 0.0};  // the first loss term (cross-entropy) over targets, target count (this rank's rows)
  ValidationMetrics r;
  r.step = step;
  while (max_batches_ < 0 || r.batches < max_batches_) {
    std::optional<data::Batch> global = loader.next();
    if (!global) break;
    const data::Batch mine = data_parallel_rows(*global, dp_rank_, local_batch_);
    const nn::LossResult l = model.forward_loss(mine.inputs_BT, mine.labels_BT, mine.positions_BT);
    sums[0] += l.terms.front().sum;
    sums[1] += static_cast<double>(l.num_targets);
    ++r.batches;
    if (stop() != 0) {
      r.interrupted = true;
      break;
    }
  }
  if (r.interrupted) {
    r.seconds = seconds_since(t0);
    return r;
  }
  for (double& s : sums) s = model.pipeline_sum(s);  // a pipeline's last stage has them
  model.mesh().dp().all_reduce_sum(std::span<double>(sums));
  TITAN_CHECK(sums[1] > 0, "[validation] the pass at step ", step, " saw no target tokens in ",
              global_.dataset.path, ". HINT: check the validation set");
  r.targets = static_cast<int64_t>(sums[1]);
  r.loss = sums[0] / sums[1];
  r.perplexity = std::exp(r.loss);
  r.seconds = seconds_since(t0);
  return r;
}

}  // namespace titan::train
