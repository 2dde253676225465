// PrefetchLoader: a Loader whose tokenization and packing run on one background thread, ahead of
// the trainer, into a bounded queue of `depth` batches (default 2). The producer blocks while the
// queue is full, so it holds at most depth batches (plus the one it is building).
//
// Same stream: next() yields exactly what Loader::next() would, batch for batch, and nullopt at
// the end when infinite = false.
//
// Resume: every queued batch carries the Loader state after it; state() is the state after the last
// batch the caller *consumed*, not after what the producer has run ahead to. A checkpoint taken
// between steps therefore resumes at the first unconsumed batch: batches prefetched but not consumed
// are produced again after restore(). restore() stops the producer, drops the queue, restores the
// inner loader and restarts it.
//
// Errors: an exception in the producer (bad input: "path:line: ...") is re-thrown by next() on the
// caller's thread, after the batches that preceded it, with the same type and message.
//
// Throughput: tokens_per_second() is tokens produced / seconds the producer spent in Loader::next()
// (the loader's own speed); seconds_waiting() is how long next() blocked on an empty queue (0 when the
// loader keeps up with the trainer).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "titan/data/loader.h"

namespace titan::data {

class PrefetchLoader {
 public:
  // `tokenizer` must outlive the loader. Throws for a bad config (as Loader) or depth < 1.
  PrefetchLoader(LoaderConfig config, const Tokenizer& tokenizer, int64_t depth = 2);
  // Stops and joins the producer: at once when it waits on a full queue, else after the batch it
  // is building (Loader::next() is not interruptible).
  ~PrefetchLoader();
  PrefetchLoader(const PrefetchLoader&) = delete;
  PrefetchLoader& operator=(const PrefetchLoader&) = delete;

  // Blocks until the producer has a batch; re-throws the producer's exception.
  std::optional<Batch> next();

  LoaderState state() const;               // after the last consumed batch
  void restore(const LoaderState& state);  // throws if it was saved by another rank or world size

  int64_t depth() const { return depth_; }
  int64_t tokens_emitted() const;     // B*T per batch the producer made (consumed or queued)
  double tokens_per_second() const;   // tokens_emitted / producer seconds inside Loader::next()
  double seconds_waiting() const;     // total seconds next() blocked on an empty queue
  int64_t num_waits() const;          // calls of next() that found the queue empty and blocked
  int64_t num_bad_lines() const;      // skipped by the producer so far (skip_bad_lines)

 private:
  struct Item {
    std::optional<Batch> batch;  // nullopt: the data ended (infinite = false)
    LoaderState state;           // the loader's state after this item
  };
  void start();
  void stop();  // joins the producer and drops the queue; the inner loader is then unused
  void produce();

  Loader loader_;  // touched only by the producer while it runs
  int64_t depth_;
  int64_t tokens_per_batch_;
  LoaderState consumed_;  // state after the last consumed batch (caller side)

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  bool finished_ = false;  // the producer returned (end of data or error)
  std::exception_ptr error_;
  int64_t tokens_emitted_ = 0;
  double producer_seconds_ = 0.0;
  double seconds_waiting_ = 0.0;
  int64_t num_waits_ = 0;
  int64_t num_bad_lines_ = 0;

  std::thread producer_;  // last: started after everything it reads is constructed
};

}  // namespace titan::data
