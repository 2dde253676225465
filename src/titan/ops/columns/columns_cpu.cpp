// The column block on CPU: rows split over threads, one memcpy per row.
#include <cstring>

#include "titan/core/parallel.h"
#include "titan/ops/columns/columns.h"

namespace titan::ops {

// Copies c floats per row from `from` (row stride fs, offset fo) to `to` (row stride ts, offset to_off).
static void copy_rows(int64_t n, int64_t c, const float* from, int64_t fs, int64_t fo, float* to, int64_t ts,
                      int64_t to_off) {
  parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, c)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      std::memcpy(to + i * ts + to_off, from + i * fs + fo, static_cast<size_t>(c) * sizeof(float));
    }
  });
}

static void forward_cpu(const Tensor& x, int64_t start, Tensor& y) {
  copy_rows(y.size(0), y.size(1), x.data<float>(), x.size(1), start, y.data<float>(), y.size(1), 0);
}

static void backward_cpu(const Tensor& dy, int64_t start, Tensor& dx) {
  copy_rows(dy.size(0), dy.size(1), dy.data<float>(), dy.size(1), 0, dx.data<float>(), dx.size(1), start);
}

ColumnsImpl columns_impl_cpu() { return {"columns_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu}; }

}  // namespace titan::ops
