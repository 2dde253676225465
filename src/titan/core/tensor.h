// Tensor: a typed, strided view of a Storage. Storage comes from an Allocator (accounted) or
// wraps memory owned elsewhere (an mmap'd safetensors file), kept alive by a shared handle.
// Kernels assume contiguous row-major tensors; op shape checks enforce it at the boundary.
// The meta device holds shapes and no data: its storage is accounted (meta_allocator) but has no
// memory, views and copies keep shapes, ops check their contracts and skip their kernels
// (ops/registry.h), and reading its values is an Error. `titan plan` and the memory floor run the
// real model on it (train/meta_plan.h). DeviceScope sets the device new tensors default to.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "titan/core/allocator.h"
#include "titan/core/dtype.h"
#include "titan/core/error.h"

namespace titan {

enum class Device : uint8_t { cpu, cuda, meta };
const char* device_name(Device device);

// The device Tensor::empty / zeros allocate on when none is named: cpu, or what the innermost
// DeviceScope set (process-wide: a meta run is single-threaded and owns the process meanwhile).
Device default_device();
class DeviceScope {
 public:
  explicit DeviceScope(Device device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  Device previous_;
};

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& shape);  // "[2, 3]"
int64_t shape_numel(const Shape& shape);

class Storage {
 public:
  Storage(size_t bytes, Allocator& allocator, Device device);
  Storage(void* data, size_t bytes, std::shared_ptr<void> keepalive, Device device, bool file_pages = false);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  bool file_pages() const { return file_pages_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Allocator* allocator_ = nullptr;  // null for borrowed memory
  std::shared_ptr<void> keepalive_;
  Device device_ = Device::cpu;
  bool file_pages_ = false;
};

// What reading a meta tensor's values throws (a module that computes on the host without a meta
// path): the memory floor catches it and counts the states only.
class MetaValuesError : public Error {
 public:
  using Error::Error;
};

template <class T>
constexpr bool dtype_matches(DType dtype) {
  if constexpr (std::is_same_v<T, float>) return dtype == DType::f32;
  if constexpr (std::is_same_v<T, int32_t>) return dtype == DType::i32;
  if constexpr (std::is_same_v<T, int64_t>) return dtype == DType::i64;
  if constexpr (std::is_same_v<T, double>) return dtype == DType::f64;
  if constexpr (std::is_same_v<T, uint16_t>) return dtype == DType::bf16 || dtype == DType::f16;
  if constexpr (std::is_same_v<T, uint8_t>) return dtype == DType::u8;
  if constexpr (std::is_same_v<T, int8_t>) return dtype == DType::i8;
  return false;
}

class Tensor {
 public:
  Tensor() = default;

  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = default_device());
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = default_device());
  // Borrows `data` (must hold numel * dtype_size bytes); `keepalive` owns it. `file_pages`: the
  // bytes are a private mapping of a file (a safetensors tensor read in place), see
  // release_file_pages.
  static Tensor wrap(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> keepalive,
                     bool file_pages = false);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t size(int dim) const;  // negative dims count from the end
  int64_t numel() const { return shape_numel(shape_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;

  bool is_meta() const { return storage_ != nullptr && storage_->device() == Device::meta; }
  // The values are a file's mapped pages (wrap with file_pages): the page cache's, not the allocator's.
  bool reads_file() const { return storage_ != nullptr && storage_->file_pages(); }
  // For a tensor that reads_file() and is never written (a frozen weight read in place): unmaps the
  // whole pages it spans from this process, so that it holds only what is read again (a minor
  // fault from the page cache). Linux maps a file's large folios whole (MiBs) on one read, so a
  // gather of a few rows otherwise keeps a large part of a table resident. A no-op otherwise.
  void release_file_pages() const;
  // The values' address; an Error on the meta device (it has none).
  void* raw_data() const {
    if (is_meta()) no_data();
    return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
  }
  template <class T>
  T* data() const {
    TITAN_CHECK(dtype_matches<T>(dtype_), "[tensor] data<T>() on a ", dtype_name(dtype_),
                " tensor of a different element type");
    return static_cast<T*>(raw_data());
  }

  // Views sharing storage.
  Tensor reshape(const Shape& shape) const;  // contiguous only; one -1 allowed
  Tensor narrow(int dim, int64_t start, int64_t length) const;
  Tensor select(int64_t index) const;  // drops dim 0

  // Copies (on the meta device: the result's shape, no values; copying meta values into a host
  // tensor is an Error).
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType dtype) const;  // float dtypes only; contiguous result
  void copy_from(const Tensor& src);  // same shape; converts float dtypes
  void zero_();
  void fill_(float value);  // f32 only

  std::string describe() const;  // "f32[2, 3]"

 private:
  [[noreturn]] void no_data() const;
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;  // in elements
  DType dtype_ = DType::f32;
};

}  // namespace titan
