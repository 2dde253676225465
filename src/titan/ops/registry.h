// The op registry: for each op, a table of implementations {name, device, supports, forward,
// backward}. The reference implementation is registered first; device kernels after it; plugins
// after those. Dispatch takes the most recently added implementation for the device whose
// `supports` accepts the arguments, and falls back to the reference (logged once per op).
// `set_use_ref(true)` (or TITAN_USE_REF=1 in the environment) forces the references everywhere.
// On the meta device (core/tensor.h) dispatch takes the op's meta implementation where it has one
// (an op whose CPU kernel allocates its own outputs or scratch allocates the same on meta), else one
// that does nothing: the dispatch function's contract checks and allocations run, the kernel does
// not.
#pragma once

#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "titan/core/log.h"
#include "titan/core/tensor.h"

namespace titan::ops {

// An op's implementation. Tag tells apart two ops whose function types coincide (ops::Kernel
// holds one alternative per op, so every op's OpImpl must be a distinct type).
template <class Supports, class Forward, class Backward, class Tag = void>
struct OpImpl {
  std::string name;             // e.g. "rms_norm_cpu"
  Device device = Device::cpu;
  Supports supports = nullptr;  // null: supports every case the contract allows
  Forward forward = nullptr;
  Backward backward = nullptr;
};

// A kernel slot's do-nothing value for the meta device (a value-initialised result); the null of a
// std::nullptr_t slot (an op with no backward).
template <class F>
struct MetaNoop {
  static constexpr F fn = nullptr;
};
template <class R, class... A>
struct MetaNoop<R (*)(A...)> {
  static R run(A...) {
    if constexpr (!std::is_void_v<R>) return R{};
  }
  static constexpr R (*fn)(A...) = &run;
};

bool use_ref();
void set_use_ref(bool value);

// Per-op wall time for benchmarks (bench/e2e_bench). Off by default: then an OpTimer costs one
// relaxed load. Dispatch functions open one OpTimer per call, named "<op>_forward"/"_backward".
void set_op_profiling(bool on);
struct OpProfileEntry {
  std::string name;
  double seconds = 0.0;
  int64_t calls = 0;
};
std::vector<OpProfileEntry> op_profile();  // slowest first; reset when profiling is switched on

class OpTimer {
 public:
  explicit OpTimer(const char* name);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  const char* name_;
  double start_ = -1.0;  // < 0: profiling off
};

template <class Impl>
class OpTable {
 public:
  explicit OpTable(std::string op_name) : op_name_(std::move(op_name)) {}

  const std::string& op_name() const { return op_name_; }
  const std::vector<Impl>& impls() const { return impls_; }
  const Impl& ref() const { return impls_.front(); }

  // The first call registers the reference; later calls add kernels with higher priority. A meta
  // implementation is kept apart (impls() lists the kernels that compute).
  void add(Impl impl) {
    if (impl.device == Device::meta) {
      meta_ = std::move(impl);
      has_meta_ = true;
      return;
    }
    impls_.push_back(std::move(impl));
  }

  // The meta device's implementation: the one registered for it, else one doing nothing.
  const Impl& meta() const {
    if (has_meta_) return meta_;
    static const Impl noop{op_name_ + "_meta", Device::meta, nullptr, MetaNoop<decltype(Impl::forward)>::fn,
                           MetaNoop<decltype(Impl::backward)>::fn};
    return noop;
  }

  // The implementation dispatch prefers on `device` when it supports the case.
  const Impl& preferred(Device device) const {
    if (device == Device::meta) return meta();
    if (!use_ref()) {
      for (size_t i = impls_.size(); i-- > 1;) {
        if (impls_[i].device == device) return impls_[i];
      }
    }
    return impls_.front();
  }

  template <class... Args>
  const Impl& select(Device device, const Args&... args) const {
    if (device == Device::meta) return meta();
    if (!use_ref()) {
      for (size_t i = impls_.size(); i-- > 1;) {
        const Impl& impl = impls_[i];
        if (impl.device == device && (impl.supports == nullptr || impl.supports(args...))) return impl;
      }
      std::call_once(fallback_logged_, [&] {
        log_warn(str("[", op_name_, "] no ", device_name(device), " kernel supports this case; using ",
                     impls_.front().name));
      });
    }
    return impls_.front();
  }

 private:
  std::string op_name_;
  std::vector<Impl> impls_;
  Impl meta_{};
  bool has_meta_ = false;
  mutable std::once_flag fallback_logged_;
};

// The table of one op, created on first use and filled by its register_builtin_<op> (the
// explicit list in builtin.cpp). One static per Impl type.
template <class Impl>
OpTable<Impl>& builtin_table(const char* op_name, void (*register_builtin)(OpTable<Impl>&)) {
  static OpTable<Impl>* table = [&] {
    auto* t = new OpTable<Impl>(op_name);
    register_builtin(*t);
    return t;
  }();
  return *table;
}

}  // namespace titan::ops
