#include "titan/parallel/fsdp.h"

#include <algorithm>

#include "titan/core/error.h"
#include "titan/ops/elementwise/elementwise.h"

namespace titan::parallel {
Fsdp::Fsdp(std::vector<nn::ParameterList> units, Comm& shard, Comm& replicate, bool prefetch, DType param_dtype,
           DType reduce_dtype)
    : shard_comm_(shard), replicate_comm_(replicate), prefetch_(prefetch), param_dtype_(param_dtype),
      reduce_dtype_(reduce_dtype), gather_dtype_(param_dtype) {
  TITAN_CHECK(reduce_dtype == DType::f32 || reduce_dtype == DType::bf16, "[fsdp] reduce dtype ",
              dtype_name(reduce_dtype), " is not f32 or bf16");
  TITAN_CHECK(param_dtype == DType::f32 || param_dtype == DType::bf16, "[fsdp] parameter dtype ",
              dtype_name(param_dtype), " is not f32 or bf16");
  TITAN_CHECK(!units.empty(), "[fsdp] no units to shard");
  const std::vector<nn::ParameterList>& groups = units;
  const int64_t n = shard.size(), r = shard.rank();
  units_.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    Unit& u = units_[g];
    u.params = groups[g];
    int64_t numel = 0;
    for (const nn::Parameter* p : u.params) {
      TITAN_CHECK(p->value.defined() && p->value.is_contiguous() && p->value.dtype() == DType::f32,
                  "[fsdp] ", p->fqn, " must be a contiguous f32 tensor to be sharded");
      u.offsets.push_back(numel);
      u.shapes.push_back(p->value.shape());
      full_.emplace_back(p->fqn, p->value.shape());
      numel += p->value.numel();
    }
    // bf16 shards travel as f32 pairs (Comm::start_all_gather): an even shard length.
    const int64_t multiple = param_dtype == DType::bf16 ? 2 * n : n;
    u.padded = (numel + multiple - 1) / multiple * multiple;
    u.shard = u.padded / n;
    u.shard_value = Tensor::zeros({u.shard});
    u.shard_grad = Tensor::zeros({u.shard});
    const int64_t lo = r * u.shard, hi = lo + u.shard;
    for (size_t i = 0; i < u.params.size(); ++i) {
      nn::Parameter* p = u.params[i];
      const int64_t a = std::max(lo, u.offsets[i]), b = std::min(hi, u.offsets[i] + p->value.numel());
      if (a < b) {
        Tensor dst = u.shard_value.narrow(0, a - lo, b - a);
        dst.copy_from(p->value.reshape({p->value.numel()}).narrow(0, a - u.offsets[i], b - a));
        nn::Parameter& piece = shard_params_.emplace_back();
        piece.fqn = p->fqn;
        piece.value = u.shard_value.narrow(0, a - lo, b - a);
        piece.grad = u.shard_grad.narrow(0, a - lo, b - a);
        shard_list_.push_back(&piece);
        pieces_.push_back({p->value.shape(), a - u.offsets[i]});
      }
    }
  }
  // Only the shards stay: the full tensors go (a Parameter keeps its shape through the pieces).
  for (Unit& u : units_) {
    for (nn::Parameter* p : u.params) {
      p->value = Tensor();
      p->grad = Tensor();
    }
  }
}

Fsdp::~Fsdp() {
  for (Unit& u : units_) {
    if (u.pending) u.pending->wait();
  }
}

void Fsdp::zero_grad() {
  for (Unit& u : units_) u.shard_grad.zero_();
}

int64_t Fsdp::shard_numel() const {
  int64_t n = 0;
  for (const Unit& u : units_) n += u.shard;
  return n;
}

void Fsdp::start_gather(int index) {
  Unit& u = unit(index);
  if (u.gathered || u.pending) return;
  const bool bf16 = gather_dtype_ == DType::bf16;
  u.full_value = Tensor::empty({u.padded}, gather_dtype_);
  if (bf16) u.shard_compute = ops::cast_to(u.shard_value, DType::bf16);
  CommTimer t{stats_.seconds};
  u.pending = shard_comm_.start_all_gather(bf16 ? u.shard_compute : u.shard_value, u.full_value);
  stats_.all_gather_bytes += u.padded * static_cast<int64_t>(dtype_size(gather_dtype_));
}

void Fsdp::ensure_gathered(int index) {
  Unit& u = unit(index);
  if (u.gathered) return;
  start_gather(index);
  {
    CommTimer t{stats_.seconds};
    u.pending->wait();
  }
  u.pending.reset();
  u.shard_compute = Tensor();
  const bool bf16 = u.full_value.dtype() == DType::bf16;
  for (size_t i = 0; i < u.params.size(); ++i) {
    nn::Parameter* p = u.params[i];
    const Shape& shape = u.shapes[i];
    (bf16 ? p->compute : p->value) = u.full_value.narrow(0, u.offsets[i], shape_numel(shape)).reshape(shape);
  }
  u.gathered = true;
}

void Fsdp::attach_grads(int index) {
  Unit& u = unit(index);
  u.full_grad = Tensor::zeros({u.padded});
  for (size_t i = 0; i < u.params.size(); ++i) {
    nn::Parameter* p = u.params[i];
    p->grad = u.full_grad.narrow(0, u.offsets[i], shape_numel(u.shapes[i])).reshape(u.shapes[i]);
  }
}

void Fsdp::reduce_grads(int index) {
  Unit& u = unit(index);
  // bf16: the gradient is rounded, summed across ranks in bf16, and widened into the f32 shard.
  const Tensor full = ops::cast_to(u.full_grad, reduce_dtype_);
  Tensor reduced = Tensor::empty({u.shard}, reduce_dtype_);
  {
    CommTimer t{stats_.seconds};
    shard_comm_.reduce_scatter_sum(full, reduced);
  }
  stats_.reduce_scatter_bytes += u.padded * static_cast<int64_t>(dtype_size(reduce_dtype_));
  ops::accumulate(u.shard_grad, ops::cast_to(reduced, DType::f32));
  for (nn::Parameter* p : u.params) p->grad = Tensor();
  u.full_grad = Tensor();
}

void Fsdp::release(int index) {
  Unit& u = unit(index);
  if (u.pending) {
    u.pending->wait();
    u.pending.reset();
  }
  for (nn::Parameter* p : u.params) p->value = p->compute = Tensor();
  u.full_value = u.shard_compute = Tensor();
  u.gathered = false;
}

void Fsdp::before_forward(int index) {
  ensure_gathered(index);
  const int next = index + 1;  // kRoot + 1 = layer 0
  if (prefetch_ && next < num_layers()) start_gather(next);
}

void Fsdp::after_forward(int index) { release(index); }

void Fsdp::before_backward(int index) {
  ensure_gathered(index);
  attach_grads(index);
  if (prefetch_ && index > 0) start_gather(index - 1);
}

void Fsdp::after_backward(int index) {
  reduce_grads(index);
  release(index);
}

void Fsdp::reduce_replicas() {
  if (replicate_comm_.size() == 1) return;
  for (Unit& u : units_) {
    CommTimer t{stats_.seconds};
    replicate_comm_.all_reduce_sum(u.shard_grad);
    stats_.all_reduce_bytes += u.shard * static_cast<int64_t>(sizeof(float));
  }
}

void Fsdp::gather_full() {
  release_full();  // nothing stays gathered in the compute dtype
  gather_dtype_ = DType::f32;
  for (int i = -1; i < num_layers(); ++i) ensure_gathered(i);
}

void Fsdp::release_full() {
  for (int i = -1; i < num_layers(); ++i) release(i);
  gather_dtype_ = param_dtype_;
}

}  // namespace titan::parallel
