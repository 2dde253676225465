// The CUDA seam. This build's implementation is cuda/no_cuda.cpp (no GPU support compiled in);
// a CUDA build (TITAN_CUDA=ON) swaps in the real one without #ifdefs elsewhere.
#pragma once

#include <string>

namespace titan::kernels {

int cuda_device_count();
std::string cuda_backend_name();  // "none (built without CUDA)" in this build

}  // namespace titan::kernels
