// CPU-only builds: the CUDA entry points exist but report that no CUDA
// kernels were compiled, so callers raise a clear error instead of linking
// conditionally.
#include "kernels.h"

namespace dbench::kernels {

namespace {
constexpr int kNotBuilt = -1;
}

bool cuda_kernels_available() { return false; }
int noop_cuda(DType, const void*, void*, int64_t, void*, IndexWidth) { return kNotBuilt; }
int muladd_cuda(DType, const void*, const void*, const void*, void*, int64_t, void*, IndexWidth) {
  return kNotBuilt;
}
int l2norm_fwd_cuda(DType, const void*, void*, int64_t, int64_t, double, void*, IndexWidth, RowPath) {
  return kNotBuilt;
}
int l2norm_bwd_cuda(DType, const void*, const void*, void*, int64_t, int64_t, double, void*,
                    IndexWidth) {
  return kNotBuilt;
}
int mm_cuda(DType, const void*, const void*, void*, int64_t, int64_t, int64_t, void*) { return kNotBuilt; }
int mm_kernel_cuda(DType, const void*, const void*, const void*, int64_t, int64_t, MmKernel*) { return kNotBuilt; }
int chain_cuda(DType, const void*, void*, int64_t, int, int, void*, IndexWidth) { return kNotBuilt; }
int chain_bwd_cuda(DType, const void*, const void*, void*, int64_t, int, void*, IndexWidth) { return kNotBuilt; }
int kernel_attributes(const char*, DType, IndexWidth, bool, int, KernelAttributes*) { return kNotBuilt; }
int spin_cuda(int64_t, void*) { return kNotBuilt; }
void set_launch_delay_ns(int64_t) {}
const char* cuda_error_string(int) { return "this build of dbench has no CUDA kernels"; }

}  // namespace dbench::kernels
