// The elementwise chain: k cheap steps over one input, the fused-vs-unfused experiment.
//
// Step i of a chain is kSteps[i % 4]:
//   0  x = x * 1.25 - 0.5   (multiply, then add: two roundings, as eager PyTorch does)
//   1  x = max(x, 0)        (relu)
//   2  x = x * 0.75         (scale)
//   3  x = x - 0.125        (subtract)
// The same definition serves the CPU and CUDA kernels; ops/chain.py writes it once more
// for PyTorch (the aten form, the fp64 reference, the Triton kernel) and the tests hold
// the two to each other. Every operation rounds to T on its own (no contraction into an
// FMA: __fmul_rn / __fadd_rn on the GPU, -ffp-contract=off for the CPU kernels), so k
// launches of one-step kernels, one launch of the k-step kernel and the k eager torch ops
// all give the same bits. float16 / bfloat16 (Rounded below) compute each operation in float
// and round it back to the 16-bit format at once, as eager PyTorch does (its opmath is float):
// the same bits again.
#pragma once

#include <cmath>
#include <type_traits>

#include "numeric.h"

namespace dbench::kernels::chain {

inline constexpr int kMaxLength = 8;
inline constexpr int kCycle = 4;

// One rounded multiply and one rounded add. On the GPU these are intrinsics, which nvcc never
// contracts into an FMA -- not within a step, and not across two steps of a fused chain (a
// scale followed by a subtract would otherwise become one FMA in the fused kernel only).
#if defined(__CUDA_ARCH__)
DBENCH_HD float mul(float a, float b) { return __fmul_rn(a, b); }
DBENCH_HD double mul(double a, double b) { return __dmul_rn(a, b); }
DBENCH_HD float add(float a, float b) { return __fadd_rn(a, b); }
DBENCH_HD double add(double a, double b) { return __dadd_rn(a, b); }
#else
template <class T>
DBENCH_HD T mul(T a, T b) { return a * b; }
template <class T>
DBENCH_HD T add(T a, T b) { return a + b; }
#endif

// A float16 / bfloat16 value (S: Float16 or BFloat16) held widened in float, every operation
// rounded back to S's grid: one eager PyTorch op per operation.
template <class S>
struct Rounded {
  float v;
  static DBENCH_HD Rounded exact(float x) { return Rounded{x}; }  // x already on S's grid
  static DBENCH_HD Rounded of(float x) { return Rounded{Num<S>::widen(Num<S>::narrow(x))}; }
};
// The steps' constants (1.25, -0.5, 0.75, -0.125, 0, 1) are exact in both 16-bit formats.
template <class T, class C>
DBENCH_HD T constant(C c) {
  if constexpr (std::is_arithmetic_v<T>) {
    return T(c);
  } else {
    return T::of(static_cast<float>(c));
  }
}
template <class S>
DBENCH_HD Rounded<S> mul(Rounded<S> a, Rounded<S> b) { return Rounded<S>::of(mul(a.v, b.v)); }
template <class S>
DBENCH_HD Rounded<S> add(Rounded<S> a, Rounded<S> b) { return Rounded<S>::of(add(a.v, b.v)); }
template <class S>
DBENCH_HD bool operator<(Rounded<S> a, Rounded<S> b) { return a.v < b.v; }
template <class S>
DBENCH_HD bool operator>(Rounded<S> a, Rounded<S> b) { return a.v > b.v; }

// Step S applied to x.
template <int S, class T>
DBENCH_HD T step(T x) {
  if constexpr (S % kCycle == 0) {
    return add(mul(x, constant<T>(1.25)), constant<T>(-0.5));
  } else if constexpr (S % kCycle == 1) {
    return x < constant<T>(0) ? constant<T>(0) : x;  // relu; NaN passes through, as in torch.relu
  } else if constexpr (S % kCycle == 2) {
    return mul(x, constant<T>(0.75));
  } else {
    return add(x, constant<T>(-0.125));
  }
}

// d(step S)/dx at x (relu's is 0 at 0, as PyTorch's).
template <int S, class T>
DBENCH_HD T slope(T x) {
  if constexpr (S % kCycle == 0) {
    return constant<T>(1.25);
  } else if constexpr (S % kCycle == 1) {
    return x > constant<T>(0) ? constant<T>(1) : constant<T>(0);
  } else if constexpr (S % kCycle == 2) {
    return constant<T>(0.75);
  } else {
    return constant<T>(1);
  }
}

// Steps First .. First + K - 1 in registers: one instantiation per (First, K).
template <int First, int K, class T>
DBENCH_HD T forward(T x) {
  if constexpr (K == 0) {
    return x;
  } else {
    return forward<First + 1, K - 1>(step<First>(x));
  }
}

// g * d(steps First .. First + K - 1)/dx at x: the chain recomputed, its slopes multiplied in.
template <int K, int First = 0, class T>
DBENCH_HD T backward(T g, T x) {
  if constexpr (K == 0) {
    return g;
  } else {
    return backward<K - 1, First + 1>(mul(g, slope<First>(x)), step<First>(x));
  }
}

// What the chain computes in for a stored element type: itself (float, double), or Rounded.
template <class T>
struct Arith {
  using type = T;
  static DBENCH_HD T in(T v) { return v; }
  static DBENCH_HD T out(T v) { return v; }
};
template <class S>
struct RoundedArith {
  using type = Rounded<S>;
  static DBENCH_HD Rounded<S> in(S v) { return Rounded<S>::exact(Num<S>::widen(v)); }
  static DBENCH_HD S out(Rounded<S> v) { return Num<S>::narrow(v.v); }  // exact: v is on the grid
};
template <>
struct Arith<Float16> : RoundedArith<Float16> {};
template <>
struct Arith<BFloat16> : RoundedArith<BFloat16> {};

// forward / backward on stored elements (what the kernels call).
template <int First, int K, class T>
DBENCH_HD T apply(T x) {
  using A = Arith<T>;
  return A::out(forward<First, K>(A::in(x)));
}

template <int K, class T>
DBENCH_HD T apply_backward(T g, T x) {
  using A = Arith<T>;
  return A::out(backward<K>(A::in(g), A::in(x)));
}

// Calls f(std::integral_constant<int, K>{}) for a runtime k in [1, kMaxLength].
template <class F>
decltype(auto) visit_length(int k, F&& f) {
  switch (k) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    default: return f(std::integral_constant<int, 8>{});  // the launchers admit 1..8 only
  }
}

// Calls f(std::integral_constant<int, S>{}) for the step kind of position `step` (step % 4).
template <class F>
decltype(auto) visit_step(int step, F&& f) {
  switch (step % kCycle) {
    case 0: return f(std::integral_constant<int, 0>{});
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    default: return f(std::integral_constant<int, 3>{});
  }
}

}  // namespace dbench::kernels::chain
