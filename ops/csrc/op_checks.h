// What every native op's body (ops/native/<op>.h, `forward<Api>`) shares, written once for both
// tensor APIs the bodies are compiled against: ATen (launchers.cpp: the raw and TORCH_LIBRARY
// variants) and the LibTorch stable ABI (stable_library.cpp). An Api supplies the tensor type and
// the few operations that differ between the two:
//
//   using Tensor;
//   static void check_inputs(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>>,
//                            InputRule rule = {});
//   template <class... M> static void check(bool ok, const M&... message);
//   static msg::Sizes sizes(const Tensor&);
//   static Tensor contiguous(const Tensor&);
//   static Tensor contiguous_output(const Tensor& like);   // same shape, dtype, device; contiguous
//   static Tensor empty_2d(const Tensor& like, int64_t rows, int64_t cols);  // like's dtype and device
//   static kernels::DType dtype(const Tensor&);
//   template <class Cpu, class Cuda> static void launch(const char* op, const Tensor& like, Cpu&&, Cuda&&);
//
// launch runs the CPU lambda, or the CUDA lambda with the device's current
// stream under a device guard.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "../kernels/kernels.h"
#include "message.h"

namespace dbench {

// What check_inputs demands beyond the shared contract (defined, strided, CPU or CUDA,
// one device, one of the four floating dtypes, one dtype): the elementwise and row-wise
// ops take tensors of one shape; mm checks its shapes itself.
struct InputRule {
  bool same_shape = true;
};

inline constexpr InputRule kMatmulInputs{false};

// Every op takes these (ops/contract.py SUPPORTED_DTYPES words them the same).
inline constexpr const char* kExpectedDtypes = "expected float16, bfloat16, float32 or float64";

using kernels::IndexWidth;
using kernels::RowPath;

template <class Api>
struct OpChecks {
  using Tensor = typename Api::Tensor;
  using NamedTensor = std::pair<const char*, const Tensor*>;

  // The offset width a launch uses: the forced one, or (kAuto) int32 when every argument's
  // view (sizes, strides, storage offset: kernels::view_fits_int32) and the kernel's own
  // loops fit. A forced int32 that does not fit is refused, naming what does not fit.
  static IndexWidth index_width(const char* op, IndexWidth requested, int64_t kernel_reach,
                                std::initializer_list<NamedTensor> args) {
    const char* wide = nullptr;
    for (const auto& [name, t] : args) {
      if (!view_fits(*t)) {
        wide = name;
        break;
      }
    }
    const IndexWidth w = kernels::resolve_index(requested, wide == nullptr, kernel_reach);
    if (w == IndexWidth::kAuto) {
      if (wide != nullptr) {
        Api::check(false, op, ": index=int32 refused: argument '", wide,
                   "' has a size, a stride or a reachable offset past INT32_MAX; use index=int64 or auto");
      }
      Api::check(false, op, ": index=int32 refused: the kernel's offsets reach ", kernel_reach,
                 " > INT32_MAX; use index=int64 or auto");
    }
    return w;
  }

  static bool view_fits(const Tensor& t) {
    return kernels::view_fits_int32(t.sizes().data(), t.strides().data(), static_cast<int>(t.dim()), t.storage_offset());
  }
};

}  // namespace dbench
