#include "titan/core/slices.h"

#include <cstring>

#include "titan/core/error.h"

namespace titan {
namespace {

// The [outer, size, inner] view of `shape` around `dim`.
struct Around {
  int64_t outer = 1, size = 1, inner = 1;
};

Around around(const Shape& shape, int dim) {
  TITAN_CHECK(dim >= 0 && dim < static_cast<int>(shape.size()), "[tensor] dim ", dim, " of a ", shape.size(),
              "-d tensor");
  Around a;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d < dim) a.outer *= shape[static_cast<size_t>(d)];
    if (d > dim) a.inner *= shape[static_cast<size_t>(d)];
  }
  a.size = shape[static_cast<size_t>(dim)];
  return a;
}

// Copies between a whole tensor's bytes and a slice's: for each outer index and each run of
// consecutive indices, slice rows [j, j + n) <-> whole rows [indices[j], indices[j] + n), `row`
// bytes each. to_slice: whole -> slice, else slice -> whole.
void copy_rows(const char* from, char* to, const Around& a, const std::vector<int64_t>& indices, size_t row,
               bool to_slice) {
  const int64_t local = static_cast<int64_t>(indices.size());
  for (int64_t o = 0; o < a.outer; ++o) {
    for (int64_t j = 0; j < local;) {
      const int64_t i = indices[static_cast<size_t>(j)];
      int64_t n = 1;
      while (j + n < local && indices[static_cast<size_t>(j + n)] == i + n) ++n;
      TITAN_CHECK(i >= 0 && i + n <= a.size, "[tensor] index ", i + n - 1, " out of a dimension of ", a.size);
      const size_t whole_at = static_cast<size_t>(o * a.size + i) * row, slice_at = static_cast<size_t>(o * local + j) * row;
      std::memcpy(to + (to_slice ? slice_at : whole_at), from + (to_slice ? whole_at : slice_at),
                  static_cast<size_t>(n) * row);
      j += n;
    }
  }
}

}  // namespace

bool sections_divide(int64_t size, const std::vector<int64_t>& sections, int64_t degree) {
  if (degree < 1) return false;
  if (sections.empty()) return size % degree == 0;
  int64_t sum = 0;
  for (const int64_t s : sections) {
    if (s <= 0 || s % degree != 0) return false;
    sum += s;
  }
  return sum == size;
}

std::vector<int64_t> slice_indices(int64_t size, const std::vector<int64_t>& sections, int64_t rank, int64_t degree) {
  TITAN_CHECK(degree >= 1 && rank >= 0 && rank < degree, "[tensor] slice ", rank, " of ", degree);
  TITAN_CHECK(sections_divide(size, sections, degree), "[tensor] a dimension of ", size, " in sections ",
              sections.size(), " does not split into ", degree, " slices (each section positive, divisible, the "
              "sections summing to the dimension)");
  const std::vector<int64_t> parts = sections.empty() ? std::vector<int64_t>{size} : sections;
  std::vector<int64_t> out;
  int64_t offset = 0;
  for (const int64_t s : parts) {
    const int64_t local = s / degree;
    for (int64_t j = 0; j < local; ++j) out.push_back(offset + rank * local + j);
    offset += s;
  }
  return out;
}

Tensor take_along(const Tensor& t, int dim, const std::vector<int64_t>& indices) {
  const Tensor src = t.contiguous();
  const Around a = around(src.shape(), dim);
  Shape shape = src.shape();
  shape[static_cast<size_t>(dim)] = static_cast<int64_t>(indices.size());
  Tensor out = Tensor::empty(shape, src.dtype(), src.device());
  if (src.is_meta()) return out;
  copy_rows(static_cast<const char*>(src.raw_data()), static_cast<char*>(out.raw_data()), a, indices,
            static_cast<size_t>(a.inner) * dtype_size(src.dtype()), true);
  return out;
}

void put_along(Tensor& dst, int dim, const std::vector<int64_t>& indices, const Tensor& src) {
  const Around a = around(dst.shape(), dim);
  Shape shape = dst.shape();
  shape[static_cast<size_t>(dim)] = static_cast<int64_t>(indices.size());
  TITAN_CHECK(src.shape() == shape, "[tensor] put_along: ", src.describe(), " into ", dst.describe(), " along dim ",
              dim, " at ", indices.size(), " indices");
  TITAN_CHECK(dst.is_contiguous(), "[tensor] put_along into a non-contiguous ", dst.describe());
  if (dst.is_meta()) return;
  const Tensor s_t = src.dtype() == dst.dtype() ? src.contiguous() : src.to(dst.dtype());
  copy_rows(static_cast<const char*>(s_t.raw_data()), static_cast<char*>(dst.raw_data()), a, indices,
            static_cast<size_t>(a.inner) * dtype_size(dst.dtype()), false);
}

}  // namespace titan
