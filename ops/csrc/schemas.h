// The one declaration of each op's schema. The C++ libraries define their ops
// from these strings and the Python variant factory reads them back from the
// dispatcher, so every variant of an op has the same signature.
#pragma once

namespace dbench::schema {

struct OpSchema {
  const char* name;
  const char* signature;
};

inline constexpr OpSchema kNoop{"noop", "(Tensor x) -> Tensor"};
inline constexpr OpSchema kMulAdd{"muladd", "(Tensor a, Tensor b, Tensor c) -> Tensor"};
inline constexpr OpSchema kL2Norm{"l2norm", "(Tensor x, float eps) -> Tensor"};
inline constexpr OpSchema kL2NormBackward{"l2norm_backward", "(Tensor grad, Tensor x, float eps) -> Tensor"};
inline constexpr OpSchema kMm{"mm", "(Tensor a, Tensor b) -> Tensor"};
inline constexpr OpSchema kChain{"chain", "(Tensor x, int k) -> Tensor"};
inline constexpr OpSchema kChainBackward{"chain_backward", "(Tensor grad, Tensor x, int k) -> Tensor"};

// Suffix of the ops that carry a C++ Autograd-key kernel (variant cpp_autograd).
inline constexpr const char* kAutogradSuffix = "_autograd";

}  // namespace dbench::schema
