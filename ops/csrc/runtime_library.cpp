// See runtime_library.h. A boxed kernel, because one function serves every schema: it reads the
// first argument off the stack and drops the rest, so only the boundary grows with the arity.
#include "runtime_library.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "../native/noop.h"
#include "launchers.h"

namespace dbench {
namespace {

void copy_first(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  TORCH_CHECK(n >= 1 && stack->size() >= n, op.schema().name(), ": expected ", n, " arguments on the stack");
  at::Tensor out = launch<native::noop>((*stack)[stack->size() - n].toTensor());
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, std::move(out));
}

// The fragments must outlive every call of their ops: deregistration happens in their destructors.
std::vector<std::unique_ptr<torch::Library>>& fragments() {
  static std::vector<std::unique_ptr<torch::Library>> kept;
  return kept;
}

}  // namespace

void define_copy_first_op(const std::string& ns, const std::string& name, const std::string& signature) {
  static std::mutex guard;
  const std::lock_guard<std::mutex> lock(guard);
  TORCH_CHECK(!c10::Dispatcher::singleton().findSchema({ns + "::" + name, ""}).has_value(), ns, "::", name,
              " is already defined");
  auto fragment = std::make_unique<torch::Library>(torch::Library::FRAGMENT, ns, std::nullopt, __FILE__, __LINE__);
  fragment->def((name + signature).c_str());
  for (const auto key : {c10::DispatchKey::CPU, c10::DispatchKey::CUDA}) {
    fragment->impl(name.c_str(), torch::dispatch(key, torch::CppFunction::makeFromBoxedFunction<&copy_first>()));
  }
  fragments().push_back(std::move(fragment));
}

}  // namespace dbench
