// Maps the runtime DType onto a C++ element type for kernel templates (numeric.h: the 16-bit
// types are stored as bits and computed in float). mm dispatches on its dtypes itself.
#pragma once

#include <cstdint>
#include <stdexcept>

#include "kernels.h"
#include "numeric.h"

namespace dbench::kernels {

template <class F>
decltype(auto) visit_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::kFloat32:
      return f(float{});
    case DType::kFloat64:
      return f(double{});
    case DType::kFloat16:
      return f(Float16{});
    case DType::kBFloat16:
      return f(BFloat16{});
  }
  throw std::invalid_argument("dbench kernels: unsupported dtype code");
}

// Calls f(int32_t{}) or f(int64_t{}): the offset type of a loop reaching `reach` elements.
template <class F>
decltype(auto) visit_index(IndexWidth w, int64_t reach, F&& f) {
  if (w == IndexWidth::kInt32 || (w == IndexWidth::kAuto && fits_int32(reach))) {
    if (!fits_int32(reach)) throw std::invalid_argument("dbench kernels: int32 offsets forced past INT32_MAX");
    return f(int32_t{});
  }
  return f(int64_t{});
}

}  // namespace dbench::kernels
