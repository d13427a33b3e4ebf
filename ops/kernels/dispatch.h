// Maps the runtime DType onto a C++ scalar type for kernel templates.
#pragma once

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

}  // namespace dbench::kernels
