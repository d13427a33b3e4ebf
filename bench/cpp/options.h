// The driver's own command line (--dbench_* flags) and the torch-free set-up helpers main() uses.
// Torch-free, so that options.cpp compiles in seconds.
//
// Flags of this driver (parsed and removed before benchmark::Initialize):
//   --dbench_device=cpu|cuda|cuda:N  (default: $DBENCH_DEVICE, else cpu)
//   --dbench_min_time=SECONDS        min time per repetition, written in the
//                                    --benchmark_min_time syntax of the linked
//                                    Google Benchmark (1.7: "0.1", 1.8: "0.1s")
//   --dbench_threads=N               at::set_num_threads (default 1, like run.py)
//   --dbench_no_pin                  do not pin the process to one core
//   --dbench_gpu_timer=cupti|off     cupti: the GPU pass (CUDA only, main.cpp); default off
//   --dbench_rounds=N                the rounds schedule, N rounds (CPU run only; default: repetitions)
//   --dbench_block_time=SECONDS      its block per benchmark and round (default 0.0025)
//   --dbench_seed=N                  its rounds' order (default 0)
//   --dbench_args_op=NAME|ARITY|KIND|REST|SIGNATURE   (repeatable) an op of the args scenario
//   --dbench_args_shape=D[xD...]     the args scenario's tensor shape (default 16)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dbench::driver {

// An op of the args scenario (args.cpp), as --dbench_args_op gives it.
struct ArgsOp {
  std::string name;
  size_t arity = 0;
  std::string kind;  // scenarios/arity.py ARG_KINDS
  std::string rest;  // scenarios/args.py REST_TYPE
  std::string signature;
};

struct Options {
  std::string device;
  double min_time = -1;  // < 0: Google Benchmark's default
  int threads = 1;
  bool pin = true;
  bool gpu_timer = false;  // --dbench_gpu_timer=cupti
  int rounds = 0;  // --dbench_rounds: the rounds schedule (0: repetitions)
  double block_time = 0.0025;  // --dbench_block_time: a round's block per benchmark, seconds
  unsigned seed = 0;  // --dbench_seed: the rounds' order
  std::vector<ArgsOp> args_ops;  // --dbench_args_op: the args scenario's ops instead of the boundary ones
  std::vector<int64_t> args_shape{16};  // --dbench_args_shape (scenarios/args.py SHAPE)
};

// "dbench_cpp_driver: <msg>" on stderr, then exit status 2.
[[noreturn]] void usage_error(const std::string& msg);

// Removes the --dbench_* flags from argv.
Options parse_own_flags(int& argc, char** argv);

// "4x32" for {4, 32}: the shape as the JSON context gives it.
std::string shape_text(const std::vector<int64_t>& shape);

// --benchmark_min_time=<seconds>, in the syntax of the linked Google Benchmark.
std::string min_time_flag(double seconds);

// Pins the process to the last CPU it may run on; that CPU, or -1.
int pin_to_one_cpu();

// A reason on one line (libcupti's load failure lists every path tried, one per line).
std::string one_line(const std::string& text);

}  // namespace dbench::driver
