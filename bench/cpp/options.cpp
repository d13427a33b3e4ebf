// The driver's own flags (options.h); no torch headers.
#include "options.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <stdexcept>

// 1 when the linked Google Benchmark (>= 1.8) wants "--benchmark_min_time=<x>s".
#ifndef DBENCH_MIN_TIME_SUFFIX_S
#define DBENCH_MIN_TIME_SUFFIX_S 0
#endif

namespace dbench::driver {
namespace {

// A positive integer, or std::invalid_argument naming `what`.
size_t positive(const std::string& text, const char* what) {
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < 1) {
    throw std::invalid_argument(std::string(what) + " must be a positive integer, got '" + text + "'");
  }
  return static_cast<size_t>(value);
}

// NAME|ARITY|KIND|REST|SIGNATURE; throws std::invalid_argument with what is wrong.
ArgsOp parse_args_op(const std::string& spec) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t bar = spec.find('|', start);
    if (bar == std::string::npos) throw std::invalid_argument("expected NAME|ARITY|KIND|REST|SIGNATURE");
    parts.push_back(spec.substr(start, bar - start));
    start = bar + 1;
  }
  parts.push_back(spec.substr(start));
  ArgsOp op{parts[0], positive(parts[1], "ARITY"), parts[2], parts[3], parts[4]};
  if (op.name.empty() || op.signature.empty()) throw std::invalid_argument("NAME and SIGNATURE must not be empty");
  const std::array<const char*, 8> kinds{"tensor", "optional", "list", "mutable", "float", "int", "bool", "str"};
  if (std::find(kinds.begin(), kinds.end(), op.kind) == kinds.end()) {
    throw std::invalid_argument("KIND must be one of tensor, optional, list, mutable, float, int, bool, str");
  }
  return op;
}

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t x = std::min(text.find('x', start), text.size());
    shape.push_back(static_cast<int64_t>(positive(text.substr(start, x - start), "a dimension")));
    start = x + 1;
  }
  return shape;
}

}  // namespace

void usage_error(const std::string& msg) {
  std::cerr << "dbench_cpp_driver: " << msg << "\n";
  std::exit(2);
}

Options parse_own_flags(int& argc, char** argv) {
  Options o;
  const char* env = std::getenv("DBENCH_DEVICE");
  o.device = env && *env ? env : "cpu";
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const std::string& flag) -> const char* {
      return a.rfind(flag + "=", 0) == 0 ? argv[i] + flag.size() + 1 : nullptr;
    };
    try {
      if (const char* v = value("--dbench_device")) {
        o.device = v;
      } else if (const char* v = value("--dbench_min_time")) {
        o.min_time = std::stod(v);
      } else if (const char* v = value("--dbench_threads")) {
        o.threads = std::stoi(v);
      } else if (a == "--dbench_no_pin") {
        o.pin = false;
      } else if (const char* v = value("--dbench_gpu_timer")) {
        const std::string t = v;
        if (t != "cupti" && t != "off") usage_error("--dbench_gpu_timer must be cupti or off, got '" + t + "'");
        o.gpu_timer = t == "cupti";
      } else if (const char* v = value("--dbench_rounds")) {
        o.rounds = static_cast<int>(positive(v, "--dbench_rounds"));
      } else if (const char* v = value("--dbench_block_time")) {
        o.block_time = std::stod(v);
        if (!(o.block_time > 0 && o.block_time < 10)) usage_error("--dbench_block_time must lie in (0, 10) seconds");
      } else if (const char* v = value("--dbench_seed")) {
        o.seed = static_cast<unsigned>(std::stoul(v));
      } else if (const char* v = value("--dbench_args_op")) {
        try {
          o.args_ops.push_back(parse_args_op(v));
        } catch (const std::logic_error& e) {
          usage_error("bad --dbench_args_op '" + std::string(v) + "': " + e.what());
        }
      } else if (const char* v = value("--dbench_args_shape")) {
        try {
          o.args_shape = parse_shape(v);
        } catch (const std::logic_error& e) {
          usage_error("bad --dbench_args_shape '" + std::string(v) + "': " + e.what());
        }
      } else if (a.rfind("--dbench_", 0) == 0) {
        usage_error("unknown flag " + a +
                    " (valid: --dbench_device=cpu|cuda|cuda:N, --dbench_min_time=SECONDS, "
                    "--dbench_threads=N, --dbench_no_pin, --dbench_gpu_timer=cupti|off, --dbench_rounds=N, "
                    "--dbench_block_time=SECONDS, --dbench_seed=N, "
                    "--dbench_args_op=NAME|ARITY|KIND|REST|SIGNATURE, --dbench_args_shape=D[xD...])");
      } else {
        argv[out++] = argv[i];
      }
    } catch (const std::logic_error&) {
      usage_error("bad value in " + a);
    }
  }
  argc = out;
  argv[argc] = nullptr;
  return o;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out;
  for (const int64_t d : shape) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

std::string min_time_flag(double seconds) {
  std::ostringstream v;
  v << "--benchmark_min_time=" << seconds << (DBENCH_MIN_TIME_SUFFIX_S ? "s" : "");
  return v.str();
}

int pin_to_one_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) last = c;
  }
  if (last < 0) return -1;
  CPU_ZERO(&set);
  CPU_SET(last, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0 ? last : -1;
}

std::string one_line(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    if (ch != '\n') {
      out += ch;
    } else if (!out.empty()) {
      out += "; ";
    }
  }
  return out;
}

}  // namespace dbench::driver
