#include "titan/kernels/cuda/device.h"

namespace titan::kernels {

int cuda_device_count() { return 0; }
std::string cuda_backend_name() { return "none (built without CUDA; configure with -DTITAN_CUDA=ON)"; }

}  // namespace titan::kernels
