// Validator: torchtitan's validation loop. A forward-only pass over a held-out set, run by the
// trainer every validation.freq steps and after the last step:
//
//   data     a finite loader (infinite = false) over validation.dataset_path, built from the
//            training loader's config (same tokenizer, bos/eot, packing, document boundaries and
//            whatever later dataset options that config carries), with a global batch of
//            local_batch x dp rows of seq_len; every rank reads the global stream and keeps its
//            rows (data_parallel_rows), as training does, so every mesh sees the same batches.
//            Each pass starts at the beginning of the set and takes max_batches batches, or every
//            whole batch the set holds (max_batches = -1); a partial last batch is dropped.
//   compute  Parallelized::forward_loss per batch, the one path for every layout: no gradients, no
//            saved activations (FSDP gathers each block for its forward and frees it; under TP
//            the vocabulary-parallel head gives every tp rank the loss of all tokens; a pipeline
//            runs the batch through its stages, the loss on the last one).
//   reduce   the model's own loss term (its first, cross-entropy: nn/loss_terms.h) summed over
//            target tokens and the target count, summed over the pass's batches, then over the
//            data-parallel ranks (an all-reduce on mesh.dp()): loss = sum / count,
//            perplexity = exp(loss). The model's other terms are training objectives, not part of it.
//
// A pass leaves the training untouched: it has its own loader (the training cursor and every
// checkpoint's data state are not involved), writes no gradient and no optimizer state, and
// forward_loss puts back any step state the model's forward counts (Parallelized::forward_loss).
#pragma once

#include <functional>

#include <cstdint>
#include <memory>

#include "titan/data/loader.h"
#include "titan/models/decoder/parallelize.h"
#include "titan/train/metrics.h"

namespace titan::train {

// Rows [dp_rank x rows, (dp_rank + 1) x rows) of a global batch: what one data-parallel rank keeps.
data::Batch data_parallel_rows(const data::Batch& global, int64_t dp_rank, int64_t rows);

class Validator {
 public:
  // `global` is the loader config of the global batch (batch_size = local_batch x dp rows);
  // `tokenizer` must outlive the validator. max_batches: batches per pass, -1 = the whole set.
  Validator(data::LoaderConfig global, const data::Tokenizer& tokenizer, int64_t local_batch, int64_t dp_rank,
            int64_t max_batches);

  // Before step 1: throws a one-line error when the set holds no whole batch (naming its token
  // count and the batch's). Returns the tokens of the first batch (B x dp x T) otherwise.
  int64_t check_set() const;
  // One pass at `step` (a collective over the model's mesh: every rank calls it). `stop` is asked
  // after each batch (every rank at the same batch; it must agree across ranks): a non-zero answer
  // ends the pass at once, returned with `interrupted` set and no loss. A whole-set pass can take
  // many minutes, and a SIGTERM must not wait for its end.
  ValidationMetrics run(models::Parallelized& model, int64_t step, const std::function<int()>& stop) const;

  const data::LoaderConfig& loader_config() const { return global_; }

 private:
  data::LoaderConfig global_;
  const data::Tokenizer* tokenizer_;
  int64_t local_batch_, dp_rank_, max_batches_;
};

}  // namespace titan::train
