// Maps the runtime DType onto a C++ scalar type for kernel templates.
#pragma once

#include <cstdint>
#include <stdexcept>

#include "kernels.h"

namespace dbench::kernels {

template <class F>
decltype(auto) visit_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::kFloat32:
      return f(float{});
    case DType::kFloat64:
      return f(double{});
    default:  // the 16-bit types are mm's alone: it dispatches on them itself
      break;
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
