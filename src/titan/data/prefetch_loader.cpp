#include "titan/data/prefetch_loader.h"

#include <chrono>
#include <utility>

#include "titan/core/clock.h"
#include "titan/core/error.h"

namespace titan::data {

PrefetchLoader::PrefetchLoader(LoaderConfig config, const Tokenizer& tokenizer, int64_t depth)
    : loader_(config, tokenizer),
      depth_(depth),
      tokens_per_batch_(config.batch_size * config.seq_len),
      consumed_(loader_.state()) {
  TITAN_CHECK(depth >= 1, "[data] prefetch loader: depth ", depth, " must be >= 1 (batches queued ahead)");
  start();
}

PrefetchLoader::~PrefetchLoader() { stop(); }

void PrefetchLoader::start() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = false;
    finished_ = false;
    error_ = nullptr;
    queue_.clear();
  }
  producer_ = std::thread([this] { produce(); });
}

void PrefetchLoader::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  not_full_.notify_all();  // wakes a producer waiting on a full queue
  if (producer_.joinable()) producer_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.clear();
}

void PrefetchLoader::produce() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      not_full_.wait(lock, [&] { return stopping_ || static_cast<int64_t>(queue_.size()) < depth_; });
      if (stopping_) return;
    }
    const auto start = std::chrono::steady_clock::now();
    Item item;
    std::exception_ptr error;
    try {
      item.batch = loader_.next();
      item.state = loader_.state();
    } catch (...) {
      error = std::current_exception();
    }
    const double seconds = seconds_since(start);
    const bool end = !error && !item.batch;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      producer_seconds_ += seconds;
      num_bad_lines_ = loader_.num_bad_lines();
      if (error) {
        error_ = error;
        finished_ = true;
      } else {
        if (!end) tokens_emitted_ += tokens_per_batch_;
        finished_ = end;
        queue_.push_back(std::move(item));
      }
    }
    not_empty_.notify_one();
    if (error || end) return;
  }
}

std::optional<Batch> PrefetchLoader::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (queue_.empty() && !finished_) {
    const auto start = std::chrono::steady_clock::now();
    not_empty_.wait(lock, [&] { return !queue_.empty() || finished_; });
    seconds_waiting_ += seconds_since(start);
    ++num_waits_;
  }
  if (queue_.empty()) {
    // The producer has returned: after an error (re-thrown on every call, as the plain loader
    // would throw again at the same line), or after the end, whose item was consumed already.
    if (error_) std::rethrow_exception(error_);
    return std::nullopt;
  }
  Item item = std::move(queue_.front());
  queue_.pop_front();
  lock.unlock();
  not_full_.notify_one();
  consumed_ = std::move(item.state);
  return std::move(item.batch);
}

LoaderState PrefetchLoader::state() const { return consumed_; }

void PrefetchLoader::restore(const LoaderState& state) {
  stop();
  try {
    loader_.restore(state);
    consumed_ = loader_.state();  // the restored cursor (a fresh one when the dataset changed)
  } catch (...) {
    // Stay usable: resume from the last consumed batch, as if restore had not been called.
    loader_.restore(consumed_);
    start();
    throw;
  }
  start();
}

int64_t PrefetchLoader::tokens_emitted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tokens_emitted_;
}

double PrefetchLoader::tokens_per_second() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return producer_seconds_ > 0 ? static_cast<double>(tokens_emitted_) / producer_seconds_ : 0.0;
}

double PrefetchLoader::seconds_waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return seconds_waiting_;
}

int64_t PrefetchLoader::num_waits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_waits_;
}

int64_t PrefetchLoader::num_bad_lines() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_bad_lines_;
}

}  // namespace titan::data
