// What a native op declaration is. Each op is one header, ops/native/<op>.h, holding one struct
// dbench::native::<op>; CMake collects every such header into the generated native_ops.h (the
// type list AllOps), and each place that registers ops walks that list:
//   torch_library.cpp   TORCH_LIBRARY dbench::<op> and its dbench::<op>_autograd twin (with the
//                       C++ Autograd-key kernel its Gradient says), dbench::<op>_backward
//   stable_library.cpp  STABLE_TORCH_LIBRARY dbench_stable::<op>
//   raw_module.cpp      the pybind11 launchers _dbench_raw.<op>, <op>_backward, and for a
//                       declaration with KernelKnobs its kernel-level variant _dbench_raw.kernel.<op>
//   bench/cpp/boundary.cpp  the C++ driver's benchmarks, for the ops with kBoundary
// A declaration is torch-free (the stable-ABI library includes it too):
//
//   struct myop {
//     static constexpr char kName[] = "myop";
//     static constexpr char kSignature[] = "(Tensor x, float eps) -> Tensor";
//     static constexpr char kDoc[] = "what it computes";
//     static constexpr std::array<const char*, 2> kArgNames{"x", "eps"};
//     using Args = native::Args<native::Tensor, native::Float>;  // the schema's arguments, in order
//     template <class Api>                                        // Api: aten_api.h or the stable one
//     static typename Api::Tensor forward(const char* op, const typename Api::Tensor& x, double eps);
//     using Gradient = native::BackwardOp;  // or Identity, or Formula (below)
//     struct backward { ...the same fields, for "myop_backward"... };  // with BackwardOp
//     static constexpr bool kBoundary = true;            // a row of the boundary table (C++ driver)
//     static constexpr std::tuple kBoundaryScalars{1e-6};  // its scalar arguments there
//     using KernelKnobs = native::Knobs<native::IndexKnob>;  // optional: its kernel-level variant
//   };
//
// The header may carry the op's kernels too, under #if defined(DBENCH_NATIVE_KERNELS): CMake compiles
// them once, into the kernels library, through the generated native_kernels.cpp (CPU kernels, and
// stubs without CUDA) and native_kernels.cu (CUDA builds). ops/native/rmsnorm.h is the example.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace dbench::native {

// The schema's argument kinds; each tensor API maps them to its C++ parameter types.
struct Tensor {};  // "Tensor"
struct Float {};   // "float": double
struct Int {};     // "int": int64_t

template <class... Kinds>
struct Args {
  static constexpr size_t kSize = sizeof...(Kinds);
  static constexpr size_t kTensors = (size_t{0} + ... + size_t{std::is_same_v<Kinds, Tensor>});
};

// How the C++ Autograd-key kernel (variant cpp_autograd) differentiates the op:
//   Identity    the gradient passes through (one tensor argument)
//   BackwardOp  one call of the op's `backward` declaration on (grad, every argument), which returns
//               one gradient per tensor argument; it has no derivative itself (first order only)
//   Formula     the declaration's own
//                 template <class M> static std::array<typename M::Tensor, N> gradient(
//                     const M& m, const typename M::Tensor& grad, saved tensors...)
//               over the ATen math M (torch_library.cpp AtenMath), with kSaved naming the tensor
//               arguments it needs
struct Identity {};
struct BackwardOp {};
struct Formula {};

template <class... Ops>
struct List {};

// Kernel-level knobs: arguments a declaration's forward takes after the schema's, each with a
// default (what the registered ops use). A declaration lists the ones its forward takes, in its
// order, as KernelKnobs; the raw module binds that forward as _dbench_raw.kernel.<op>, each knob a
// keyword argument with its default (launchers.h KnobArg), for the offsets and fusion scenarios.
struct IndexKnob {};  // index: the offset width, "auto" | "int32" | "int64" (kernels::IndexWidth)
struct PathKnob {};   // path: l2norm's row schedule on CUDA, "auto" | "warp" | "block" (kernels::RowPath)
struct FirstKnob {};  // first: the chain step the launch starts at (int, 0)
template <class... K>
struct Knobs {};

// Suffix of the ops that carry a C++ Autograd-key kernel (variant cpp_autograd).
inline constexpr const char* kAutogradSuffix = "_autograd";

// "ns::name" as a constant: the op name the launchers' messages start with, fixed at compile time
// so that a call pays nothing for it.
template <const char* Ns, const char* Name>
struct Qualified {
  static constexpr size_t kNs = std::char_traits<char>::length(Ns);
  static constexpr size_t kName = std::char_traits<char>::length(Name);
  static constexpr std::array<char, kNs + 2 + kName + 1> make() {
    std::array<char, kNs + 2 + kName + 1> out{};
    size_t i = 0;
    for (size_t j = 0; j < kNs; ++j) out[i++] = Ns[j];
    out[i++] = ':';
    out[i++] = ':';
    for (size_t j = 0; j < kName; ++j) out[i++] = Name[j];
    return out;
  }
  static constexpr std::array<char, kNs + 2 + kName + 1> kValue = make();
  static constexpr const char* c_str() { return kValue.data(); }
};

// Calls f(Tag<Op>{}) for each op of the list, in order (C++17 lambdas take no template list:
// `using Op = typename decltype(tag)::type;`).
template <class T>
struct Tag {
  using type = T;
};
template <class... Ops, class F>
void for_each(List<Ops...>, F&& f) {
  (f(Tag<Ops>{}), ...);
}

// The op's declared backward, or void.
template <class Op, class = void>
struct BackwardOf {
  using type = void;
};
template <class Op>
struct BackwardOf<Op, std::void_t<typename Op::backward>> {
  using type = typename Op::backward;
};
template <class Op>
inline constexpr bool kHasBackward = !std::is_void_v<typename BackwardOf<Op>::type>;

// Whether the declaration has a kernel-level variant (KernelKnobs).
template <class Op, class = void>
inline constexpr bool kHasKnobs = false;
template <class Op>
inline constexpr bool kHasKnobs<Op, std::void_t<typename Op::KernelKnobs>> = true;

}  // namespace dbench::native

namespace dbench::native {

// An argument kind's C++ parameter type under a tensor API (Api::TensorParam for a tensor).
template <class Api, class Kind>
struct ParamOf {
  using type = typename Api::TensorParam;
};
template <class Api>
struct ParamOf<Api, Float> {
  using type = double;
};
template <class Api>
struct ParamOf<Api, Int> {
  using type = int64_t;
};

// The op bound to a tensor API: a plain function with the schema's parameter types (what
// TORCH_LIBRARY, TORCH_BOX and pybind11 take), whose messages name it Api::kNamespace::kName.
template <class Op, class Api, class A = typename Op::Args>
struct Bound;
template <class Op, class Api, class... K>
struct Bound<Op, Api, Args<K...>> {
  using Name = Qualified<Api::kNamespace, Op::kName>;
  static auto call(typename ParamOf<Api, K>::type... args) { return Op::template forward<Api>(Name::c_str(), args...); }
};

// The bound function's type, e.g. at::Tensor(const at::Tensor&, double).
template <class Op, class Api>
using SigOf = std::remove_pointer_t<decltype(&Bound<Op, Api>::call)>;

}  // namespace dbench::native
