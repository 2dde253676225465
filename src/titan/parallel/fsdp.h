// FSDP (ZeRO-3) over one communicator, with HSDP's all-reduce across a second. Its units are lists
// of parameters, in nn::UnitHooks order (unit kRoot first, then 0, 1, ...; for the decoder: the
// root = embedding + final norm + head, then each transformer block; parallelize.h builds them and
// attaches the hooks). Each unit is flattened (parameters concatenated in collect order, zero-padded to a multiple of
// the shard count) and split evenly: rank r keeps elements [r S, (r+1) S) of every unit as its
// shard, values and gradients in fp32; the full parameters exist only while a unit is in use:
//
//   forward   a block is all-gathered just before its forward and freed after it; the next
//             block's gather is started first (prefetch, MPI_Iallgather). With bf16 compute
//             (training.mixed_precision_param) each rank casts its shard to bf16 and the gather
//             fills the parameters' bf16 compute copies (Parameter::compute): half the traffic,
//             and the same bf16 values one rank gets by casting the whole weight
//             (gather_full, for exports, still gathers the f32 master weights)
//   backward  gathered again (the previous block prefetched), its gradients written into a zeroed
//             full buffer, then reduce-scattered (sum, fp32, or bf16 with
//             training.mixed_precision_reduce) into the shard gradient (+=, in f32, so
//             micro-batches accumulate) and freed as soon as the block's backward is done
//   root      gathered for the whole micro-batch (the tied table is used first and last)
//   step      reduce_replicas() sums the shard gradients across dp_replicate (HSDP), then the
//             optimizer updates the shards (shards(): one Parameter per parameter piece)
//
// Every rank must start from the same full weights (same seed / same checkpoint); the constructor
// keeps this rank's shard and frees the full tensors. Modules must read parameters through
// Parameter::value / ::grad at use (every built-in one does); a module that keeps views of its
// weights (a plugin's fused layout) cannot be sharded, and the trainer refuses that combination.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "titan/nn/decoder.h"
#include "titan/parallel/comm.h"

namespace titan::parallel {

// One piece of a parameter that this rank holds: flat elements [start, start + length) of a
// parameter shaped `shape`.
struct ShardPiece {
  Shape shape;
  int64_t start = 0;
};

struct CommStats {
  int64_t all_gather_bytes = 0;      // buffers gathered (full unit size), summed over calls
  int64_t reduce_scatter_bytes = 0;  // buffers reduce-scattered (full unit size)
  int64_t all_reduce_bytes = 0;      // HSDP gradient all-reduce
  int64_t all_to_all_bytes = 0;      // expert parallelism's rows, sent plus received
  int64_t send_bytes = 0;            // a pipeline's activations and gradients sent to other stages
  double seconds = 0.0;              // wall time inside (or waiting for) collectives
};

class Fsdp final : public nn::UnitHooks {
 public:
  // units[0] is hook unit kRoot, units[i + 1] hook unit i. Every parameter's full value is
  // copied into this rank's shard and then freed.
  // param_dtype: what forward/backward gather (f32 values, or bf16 compute copies); reduce_dtype:
  // what the gradient reduce-scatter sums in (f32, or bf16: half the traffic, bf16 rounding).
  Fsdp(std::vector<nn::ParameterList> units, Comm& shard, Comm& replicate, bool prefetch = true,
       DType param_dtype = DType::f32, DType reduce_dtype = DType::f32);
  ~Fsdp() override;
  Fsdp(const Fsdp&) = delete;
  Fsdp& operator=(const Fsdp&) = delete;

  // This rank's pieces: 1-D views into the shards, each named by its parameter's FQN; in unit order.
  nn::ParameterList shards() { return shard_list_; }
  const std::vector<ShardPiece>& pieces() const { return pieces_; }  // shards()[i]'s place
  // Every parameter of the model (all ranks' pieces together): FQN and full shape, in unit order.
  const std::vector<std::pair<std::string, Shape>>& full_parameters() const { return full_; }
  void zero_grad();
  void reduce_replicas();  // after the step's last micro-batch (no-op without replicas)

  // Gathers every unit into the model (whole parameters, e.g. for an HF export) / frees them again.
  void gather_full();
  void release_full();

  int64_t shard_numel() const;  // elements of this rank's shards (values; grads are as many)
  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  void before_forward(int unit) override;
  void after_forward(int unit) override;
  void before_backward(int unit) override;
  void after_backward(int unit) override;

 private:
  struct Unit {
    std::vector<nn::Parameter*> params;
    std::vector<int64_t> offsets;  // of each parameter in the flat unit
    std::vector<Shape> shapes;     // of each parameter
    int64_t padded = 0;            // flat size, a multiple of the shard count
    int64_t shard = 0;             // padded / shard count
    Tensor shard_value, shard_grad;
    Tensor shard_compute;          // bf16 [shard] while its gather is in flight (bf16 compute)
    Tensor full_value, full_grad;  // [padded] while gathered (full_value bf16 with bf16 compute)
    std::unique_ptr<Pending> pending;
    bool gathered = false;
  };
  Unit& unit(int u) { return units_[static_cast<size_t>(u + 1)]; }
  int num_layers() const { return static_cast<int>(units_.size()) - 1; }
  void start_gather(int u);
  void ensure_gathered(int u);
  void attach_grads(int u);
  void reduce_grads(int u);
  void release(int u);

  Comm& shard_comm_;
  Comm& replicate_comm_;
  bool prefetch_;
  DType param_dtype_;
  DType reduce_dtype_;
  DType gather_dtype_;  // param_dtype_, or f32 between gather_full and release_full
  std::vector<Unit> units_;  // root first, then layer 0..L-1
  std::deque<nn::Parameter> shard_params_;
  nn::ParameterList shard_list_;
  std::vector<ShardPiece> pieces_;
  std::vector<std::pair<std::string, Shape>> full_;
  CommStats stats_;
};

}  // namespace titan::parallel
