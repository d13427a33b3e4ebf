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
// all give the same bits.
#pragma once

#include <cmath>
#include <type_traits>

#if defined(__CUDACC__)
#define DBENCH_HD __host__ __device__ __forceinline__
#else
#define DBENCH_HD inline __attribute__((always_inline))
#endif

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

// Step S applied to x.
template <int S, class T>
DBENCH_HD T step(T x) {
  if constexpr (S % kCycle == 0) {
    return add(mul(x, T(1.25)), T(-0.5));
  } else if constexpr (S % kCycle == 1) {
    return x < T(0) ? T(0) : x;  // relu; NaN passes through, as in torch.relu
  } else if constexpr (S % kCycle == 2) {
    return mul(x, T(0.75));
  } else {
    return add(x, T(-0.125));
  }
}

// d(step S)/dx at x (relu's is 0 at 0, as PyTorch's).
template <int S, class T>
DBENCH_HD T slope(T x) {
  if constexpr (S % kCycle == 0) {
    return T(1.25);
  } else if constexpr (S % kCycle == 1) {
    return x > T(0) ? T(1) : T(0);
  } else if constexpr (S % kCycle == 2) {
    return T(0.75);
  } else {
    return T(1);
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
