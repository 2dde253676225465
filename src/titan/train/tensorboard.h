// TensorBoard scalar logging with no protobuf or TensorFlow dependency. The event file is a
// TFRecord stream of hand-encoded `tensorboard.Event` protos (tensorboard/compat/proto/
// event.proto and summary.proto):
//   record  = uint64 length (LE) | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
//   Event   = wall_time (1, double) | step (2, int64) | file_version (3, string) | summary (5)
//   Summary = repeated value (1) = Value { tag (1, string), simple_value (2, float) }
// The first record is {wall_time, file_version = "brain.Event:2"}; each add_scalar appends one
// {wall_time, step, summary} record.
//
// Crash safety: every record goes to the file in one write(2) when it is added, so a killed
// process leaves whole records (the OS still holds them); flush() additionally fsyncs so they
// survive a machine crash. The trainer calls flush() at its log steps. TensorBoard's reader stops
// cleanly at a torn last record, so a power loss mid-write loses at most that record.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace titan::train {

class TensorBoardWriter {
 public:
  // Creates `folder` (mkdir -p) and a new file
  // "folder/events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>", n = 0 unless taken.
  explicit TensorBoardWriter(const std::string& folder);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One scalar at `step`. TensorBoard stores it as float32; non-finite values are kept as-is.
  void add_scalar(const std::string& tag, double value, int64_t step);
  // Several scalars in one event (one record), e.g. all metrics of a log step.
  void add_scalars(const std::vector<std::pair<std::string, double>>& values, int64_t step);
  // fsync: what was added survives a machine crash.
  void flush();

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);

  std::string path_;
  int fd_ = -1;
};

}  // namespace titan::train
