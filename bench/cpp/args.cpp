// The args scenario (scenarios/args.py): what a call costs by the number and kind of its arguments.
// Each op comes on the command line as NAME|ARITY|KIND|REST|SIGNATURE (REST: the schema type of the
// arguments after the first; parsed in options.cpp) and is defined here as the scenario defines it in
// Python: dbench_args::NAME, a torch::Library fragment with one boxed kernel that copies the first
// argument (ops/csrc/runtime_library.cpp), and dbench_stable::NAME, its stable-ABI twin. Neither has an
// autograd formula in C++, so only inference is timed:
//   NAME/direct/inference   the noop launcher on the first tensor (the floor: it does not grow)
//   NAME/typed/inference    dbench_args::NAME through a TypedOperatorHandle
//   NAME/boxed/inference    dbench_args::NAME through callBoxed on a Stack
//   NAME/stable/inference   dbench_stable::NAME through a TypedOperatorHandle
// A typed call needs its signature at compile time: one instantiation per kind and arity of
// kArities. Every call goes through a std::function, the floor's too, so that indirection cancels.
#include <ATen/core/List.h>
#include <ATen/core/stack.h>
#include <ATen/ops/randn.h>

#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "driver.h"
#include "launchers.h"
#include "native_ops.h"
#include "runtime_library.h"

// libdbench_stable.so (ops/csrc/stable_library.cpp): defines ns::name as a stable-ABI op whose
// boxed kernel copies the first argument and frees the others, all of schema type `rest`.
extern "C" int dbench_stable_define_copy_first(const char* ns, const char* name, const char* signature,
                                               const char* rest, char* error, size_t error_size);

namespace dbench::driver {
namespace {

constexpr std::array<size_t, 7> kArities{1, 2, 4, 8, 16, 32, 64};  // scenarios/arity.py ARITIES
// The scalar arguments' values (scenarios/args.py SCALARS).
constexpr double kFloatArg = 0.5;
constexpr int64_t kIntArg = 1;
constexpr bool kBoolArg = true;
constexpr const char* kStrArg = "a";

using Call = std::function<at::Tensor()>;

template <class T, size_t>
using Repeat = T;

// An op's arguments, made once: the first tensor, the tensors after it (tensor, mutable, list and
// optional kinds), and every argument as the boxed call pushes it.
struct ArgsInputs {
  at::Tensor x0;
  Tensors rest;
  std::vector<c10::IValue> boxed;
};

ArgsInputs args_inputs(const ArgsOp& op, const Config& cfg, const std::vector<int64_t>& shape) {
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(cfg.device);
  ArgsInputs in;
  in.x0 = at::randn(shape, opts);
  in.boxed.emplace_back(in.x0);
  const size_t n = op.arity - 1;
  const bool tensors = op.kind == "tensor" || op.kind == "mutable" || op.kind == "optional" || op.kind == "list";
  for (size_t i = 0; tensors && i < n; ++i) in.rest.push_back(at::randn(shape, opts));
  if (op.kind == "list") {
    c10::List<at::Tensor> list;
    for (const auto& t : in.rest) list.push_back(t);
    in.boxed.emplace_back(std::move(list));
    return in;
  }
  for (size_t i = 0; i < n; ++i) {
    if (tensors) {
      in.boxed.emplace_back(in.rest[i]);
    } else if (op.kind == "float") {
      in.boxed.emplace_back(kFloatArg);
    } else if (op.kind == "int") {
      in.boxed.emplace_back(kIntArg);
    } else if (op.kind == "bool") {
      in.boxed.emplace_back(kBoolArg);
    } else if (op.kind == "str") {
      in.boxed.emplace_back(std::string(kStrArg));
    } else {
      throw std::runtime_error("unknown argument kind '" + op.kind + "'");
    }
  }
  return in;
}

// A typed call with the arguments after the first all of type Rest, held as Stored.
template <class Rest, class Stored, size_t... I>
Call typed_call(const std::string& qualified, const at::Tensor& x0, std::vector<Stored> rest,
                std::index_sequence<I...>) {
  const auto h = typed_op<at::Tensor(const at::Tensor&, Repeat<Rest, I>...)>(qualified);
  return [h, x0, rest = std::move(rest)] { return h.call(x0, rest[I]...); };
}

// The mutable kind: plain tensors, of which the last is declared Tensor(a!) (a non-const reference).
template <size_t... I>
Call typed_mutable_call(const std::string& qualified, const at::Tensor& x0, const Tensors& rest,
                        std::index_sequence<I...>) {
  const auto h = typed_op<at::Tensor(const at::Tensor&, Repeat<const at::Tensor&, I>..., at::Tensor&)>(qualified);
  return [h, x0, rest, last = rest.back()]() mutable { return h.call(x0, rest[I]..., last); };
}

// make(std::integral_constant<size_t, N>) for the N of kArities equal to `arity`.
template <class Make, size_t... K>
Call for_arity(size_t arity, Make&& make, std::index_sequence<K...>) {
  Call out;
  const bool found = ((arity == kArities[K] ? (out = make(std::integral_constant<size_t, kArities[K]>{}), true)
                                            : false) || ...);
  if (!found) throw std::runtime_error("arity " + std::to_string(arity) + " is not one this driver was built for");
  return out;
}

Call typed_args_call(const ArgsOp& op, const std::string& qualified, const ArgsInputs& in) {
  if (op.kind == "list") {
    const auto h = typed_op<at::Tensor(const at::Tensor&, at::TensorList)>(qualified);
    return [h, x0 = in.x0, rest = in.rest] { return h.call(x0, rest); };
  }
  auto make = [&](auto n) -> Call {
    constexpr size_t kRest = decltype(n)::value - 1;  // the arguments after the first
    const auto seq = std::make_index_sequence<kRest>{};
    if (op.kind == "tensor") return typed_call<const at::Tensor&>(qualified, in.x0, in.rest, seq);
    if (op.kind == "optional") {
      return typed_call<const std::optional<at::Tensor>&>(
          qualified, in.x0, std::vector<std::optional<at::Tensor>>(in.rest.begin(), in.rest.end()), seq);
    }
    if (op.kind == "float") return typed_call<double>(qualified, in.x0, std::vector<double>(kRest, kFloatArg), seq);
    if (op.kind == "int") return typed_call<int64_t>(qualified, in.x0, std::vector<int64_t>(kRest, kIntArg), seq);
    if (op.kind == "bool") return typed_call<bool>(qualified, in.x0, std::vector<bool>(kRest, kBoolArg), seq);
    if (op.kind == "str") {
      return typed_call<c10::string_view>(qualified, in.x0, std::vector<std::string>(kRest, kStrArg), seq);
    }
    if (op.kind == "mutable") {
      if constexpr (kRest >= 1) {
        return typed_mutable_call(qualified, in.x0, in.rest, std::make_index_sequence<kRest - 1>{});
      }
      throw std::runtime_error("a mutable op takes two arguments or more");
    }
    throw std::runtime_error("unknown argument kind '" + op.kind + "'");
  };
  return for_arity(op.arity, make, std::make_index_sequence<kArities.size()>{});
}

// callBoxed consumes its arguments: the stack is refilled from the prepared values each call (a
// Tensor[] is built once, as the tensors are; a caller that builds its list per call pays for that too).
Call boxed_args_call(const std::string& qualified, const ArgsInputs& in) {
  return [h = boxed_op(qualified), args = in.boxed, stack = torch::jit::Stack()]() mutable {
    stack.clear();
    stack.insert(stack.end(), args.begin(), args.end());
    h.callBoxed(stack);
    return std::move(stack.back()).toTensor();
  };
}

// Defines dbench_args::NAME and dbench_stable::NAME; "" or why they could not be.
std::string define_args_op(const ArgsOp& op) {
  try {
    dbench::define_copy_first_op("dbench_args", op.name, op.signature);
  } catch (const std::exception& e) {
    return "could not define dbench_args::" + op.name + ": " + e.what();
  }
  std::array<char, 512> error{};
  if (dbench_stable_define_copy_first("dbench_stable", op.name.c_str(), op.signature.c_str(), op.rest.c_str(),
                                      error.data(), error.size()) != 0) {
    return "could not define dbench_stable::" + op.name + ": " + error.data();
  }
  return "";
}

}  // namespace

void register_args_op(const ArgsOp& op, const Config& cfg, const std::vector<int64_t>& shape) {
  const ArgsInputs in = args_inputs(op, cfg, shape);
  const std::string defined = define_args_op(op);
  const auto none = [] { return at::Tensor(); };
  auto add_checked = [&](const std::string& kind, const std::function<Call()>& make) {
    const std::string name = op.name + "/" + kind + "/inference";
    Call call = none;
    std::string err = defined;
    if (err.empty()) {
      err = preflight(name, [&] {
        call = make();
        expect_close(call(), in.x0, kind + " (a copy of the first argument)");
      });
    }
    add(name, err, cfg.timing, call);  // with an error, the benchmark skips and never calls it
  };
  add_checked("direct", [&] { return Call([x0 = in.x0] { return dbench::launch<dbench::native::noop>(x0); }); });
  add_checked("typed", [&] { return typed_args_call(op, "dbench_args::" + op.name, in); });
  add_checked("boxed", [&] { return boxed_args_call("dbench_args::" + op.name, in); });
  add_checked("stable", [&] { return typed_args_call(op, "dbench_stable::" + op.name, in); });
}

}  // namespace dbench::driver
