// Ops registered while the process runs, for schemas only known then (the args scenario's
// generated ops: every arity and kind of argument), through the same dispatcher API as
// TORCH_LIBRARY: a torch::Library fragment per call, kept alive for the process.
#pragma once

#include <string>

namespace dbench {

// Defines ns::name with `signature` ("(Tensor x0, float s1) -> Tensor") and one boxed kernel for
// CPU and CUDA: a copy of the first argument (the noop launcher), whatever follows it.
void define_copy_first_op(const std::string& ns, const std::string& name, const std::string& signature);

}  // namespace dbench
