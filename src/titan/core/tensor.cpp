#include "titan/core/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace titan {

const char* device_name(Device device) {
  switch (device) {
    case Device::cpu: return "cpu";
    case Device::cuda: return "cuda";
    case Device::meta: return "meta";
  }
  return "?";
}

static std::atomic<Device> g_default_device{Device::cpu};

Device default_device() { return g_default_device.load(std::memory_order_relaxed); }

DeviceScope::DeviceScope(Device device) : previous_(g_default_device.exchange(device)) {}
DeviceScope::~DeviceScope() { g_default_device.store(previous_); }

std::string shape_str(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

static Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

Storage::Storage(size_t bytes, Allocator& allocator, Device device)
    : bytes_(bytes), allocator_(&allocator), device_(device) {
  data_ = allocator.allocate(bytes);
}

Storage::Storage(void* data, size_t bytes, std::shared_ptr<void> keepalive, Device device, bool file_pages)
    : data_(data), bytes_(bytes), keepalive_(std::move(keepalive)), device_(device), file_pages_(file_pages) {}

Storage::~Storage() {
  if (allocator_ != nullptr) allocator_->deallocate(data_, bytes_);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  TITAN_CHECK(device != Device::cuda, "[tensor] no allocator for device ", device_name(device),
              " in this build: titan has no CUDA backend yet (kernels/cuda/ is its seam). HINT: run on the CPU");
  for (int64_t d : shape) {
    TITAN_CHECK(d >= 0, "[tensor] negative dimension in shape ", shape_str(shape));
  }
  Tensor t;
  Allocator& allocator = device == Device::meta ? meta_allocator() : host_allocator();
  t.storage_ = std::make_shared<Storage>(shape_numel(shape) * dtype_size(dtype), allocator, device);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero_();
  return t;
}

Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> keepalive,
                    bool file_pages) {
  Tensor t;
  t.storage_ = std::make_shared<Storage>(data, shape_numel(shape) * dtype_size(dtype),
                                         std::move(keepalive), Device::cpu, file_pages);
  t.shape_ = shape;
  t.strides_ = contiguous_strides(shape);
  t.dtype_ = dtype;
  return t;
}

void Tensor::release_file_pages() const {
  if (!reads_file() || numel() == 0) return;
  // Only pages wholly inside the tensor: a neighbour's edge page is left alone.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(raw_data());
  const uintptr_t first = (begin + page - 1) / page * page, last = (begin + nbytes()) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

int64_t Tensor::size(int dim) const {
  const int d = dim < 0 ? dim + ndim() : dim;
  TITAN_CHECK(d >= 0 && d < ndim(), "[tensor] dim ", dim, " out of range for ", describe());
  return shape_[d];
}

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

Tensor Tensor::reshape(const Shape& shape) const {
  TITAN_CHECK(is_contiguous(), "[tensor] reshape of non-contiguous ", describe(),
              ". HINT: call contiguous() first");
  Shape out = shape;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TITAN_CHECK(infer < 0, "[tensor] reshape to ", shape_str(shape), ": more than one -1");
      infer = static_cast<int>(i);
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0 && known > 0) out[infer] = numel() / known;
  TITAN_CHECK(shape_numel(out) == numel(), "[tensor] cannot reshape ", describe(), " to ",
              shape_str(shape), ": element counts differ");
  Tensor t = *this;
  t.shape_ = out;
  t.strides_ = contiguous_strides(out);
  return t;
}

Tensor Tensor::narrow(int dim, int64_t start, int64_t length) const {
  const int d = dim < 0 ? dim + ndim() : dim;
  TITAN_CHECK(d >= 0 && d < ndim() && start >= 0 && length >= 0 && start + length <= shape_[d],
              "[tensor] narrow(dim ", dim, ", start ", start, ", length ", length, ") out of range for ",
              describe());
  Tensor t = *this;
  t.shape_[d] = length;
  t.offset_ += start * strides_[d];
  return t;
}

Tensor Tensor::select(int64_t index) const {
  Tensor t = narrow(0, index, 1);
  t.shape_.erase(t.shape_.begin());
  t.strides_.erase(t.strides_.begin());
  return t;
}

// Copies `src` (any strides) into contiguous `dst_data` of the same dtype.
static void gather_strided(const Tensor& src, char* dst_data) {
  const size_t elem = dtype_size(src.dtype());
  const int64_t n = src.numel();
  if (n == 0) return;
  if (src.is_contiguous()) {
    std::memcpy(dst_data, src.raw_data(), n * elem);
    return;
  }
  const int nd = src.ndim();
  std::vector<int64_t> index(nd, 0);
  const char* base = static_cast<const char*>(src.raw_data());
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += index[d] * src.strides()[d];
    std::memcpy(dst_data + i * elem, base + off * static_cast<int64_t>(elem), elem);
    for (int d = nd - 1; d >= 0; --d) {
      if (++index[d] < src.shape()[d]) break;
      index[d] = 0;
    }
  }
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device());
  if (is_meta()) return t;
  gather_strided(*this, static_cast<char*>(t.raw_data()));
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return contiguous();
  Tensor src = contiguous();
  Tensor t = empty(shape_, dtype, device());
  if (is_meta()) return t;
  convert(src.raw_data(), dtype_, t.raw_data(), dtype, numel());
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  TITAN_CHECK(src.shape() == shape_, "[tensor] copy_from: shape ", shape_str(src.shape()),
              " into ", describe());
  TITAN_CHECK(is_contiguous(), "[tensor] copy_from into non-contiguous ", describe());
  if (is_meta()) return;
  if (src.is_meta()) src.no_data();
  Tensor s = src.contiguous();
  if (s.dtype() == dtype_) {
    std::memcpy(raw_data(), s.raw_data(), nbytes());
  } else {
    convert(s.raw_data(), s.dtype(), raw_data(), dtype_, numel());
  }
}

void Tensor::zero_() {
  TITAN_CHECK(is_contiguous(), "[tensor] zero_ on non-contiguous ", describe());
  if (is_meta()) return;
  std::memset(raw_data(), 0, nbytes());
}

void Tensor::fill_(float value) {
  TITAN_CHECK(dtype_ == DType::f32, "[tensor] fill_ on a ", dtype_name(dtype_), " tensor (f32 only)");
  TITAN_CHECK(is_contiguous(), "[tensor] fill_ on non-contiguous ", describe());
  if (is_meta()) return;
  float* p = data<float>();
  for (int64_t i = 0, n = numel(); i < n; ++i) p[i] = value;
}

void Tensor::no_data() const {
  throw MetaValuesError(str("[tensor] ", describe(), " is on the meta device, which holds shapes and no values (titan plan and the "
             "memory floor run the model on it). HINT: code that reads values on the host must not on meta: a "
             "module computing on the host itself (a plugin's) allocates its outputs, then returns them when its "
             "input is_meta(); ops skip their kernels there"));
}

std::string Tensor::describe() const { return std::string(dtype_name(dtype_)) + shape_str(shape_); }

}  // namespace titan
