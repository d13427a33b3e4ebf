// _dbench_cupti: torch-free pybind11 module over the CUPTI collector.
//
// Importing never touches CUPTI or the driver; available() says whether
// enable() can work. Per-block stats come back from flush() as
//   {block_id: {"kernels", "kernel_ns", "memcpy", "memcpy_ns", "memcpy_bytes",
//               "memset", "memset_ns", "memset_bytes", "kernel_busy_ns", "busy_ns",
//               "span_ns", "window_ns", "kernels_correlated",
//               "names": {demangled kernel name: launches}}}
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <unordered_map>

#include "collector.h"

namespace py = pybind11;
using dbench::cupti::BlockStats;
using dbench::cupti::Collector;
using dbench::cupti::kNumActivityKinds;
using dbench::cupti::PerKind;
using dbench::cupti::Status;

namespace {

void check(const Status& s) {
  if (!s.ok) throw std::runtime_error(s.reason);
}

const std::string& demangled(const std::string& raw) {
  static std::unordered_map<std::string, std::string> cache;  // under the GIL
  auto it = cache.find(raw);
  if (it == cache.end()) it = cache.emplace(raw, dbench::cupti::demangle(raw.c_str())).first;
  return it->second;
}

// Dict keys of each ActivityKind's totals: count, summed duration, bytes (nullptr: none).
struct TotalsKeys {
  const char* count;
  const char* ns;
  const char* bytes;
};
constexpr TotalsKeys kTotalsKeys[kNumActivityKinds] = {
    {"kernels", "kernel_ns", nullptr},
    {"memcpy", "memcpy_ns", "memcpy_bytes"},
    {"memset", "memset_ns", "memset_bytes"},
};

// Every kind's count and duration into d, keys prefixed; bytes too when with_bytes.
void put_totals(py::dict& d, const PerKind& totals, const std::string& prefix, bool with_bytes) {
  for (size_t kind = 0; kind < kNumActivityKinds; ++kind) {
    const TotalsKeys& key = kTotalsKeys[kind];
    d[py::str(prefix + key.count)] = totals[kind].count;
    d[py::str(prefix + key.ns)] = totals[kind].ns;
    if (with_bytes && key.bytes != nullptr) d[py::str(prefix + key.bytes)] = totals[kind].bytes;
  }
}

py::dict to_dict(const BlockStats& s) {
  py::dict d;
  put_totals(d, s.activity, "", /*with_bytes=*/true);
  d["kernel_busy_ns"] = s.kernel_busy_ns;
  d["busy_ns"] = s.busy_ns;
  d["span_ns"] = s.span_ns;
  d["window_ns"] = s.end_ns - s.begin_ns;
  d["kernels_correlated"] = s.kernels_correlated;
  py::dict names;
  for (const auto& [raw, count] : s.kernel_names) {
    py::str key(demangled(raw));
    // Distinct mangled names can demangle alike: add up.
    names[key] = (names.contains(key) ? names[key].cast<uint64_t>() : 0) + count;
  }
  d["names"] = names;
  return d;
}

}  // namespace

PYBIND11_MODULE(_dbench_cupti, m) {
  m.doc() = "CUPTI kernel-time collector for dbench (torch-free; libcupti loaded lazily)";

  m.def(
      "available",
      [] {
        Status s = Collector::instance().available();
        return py::make_tuple(s.ok, s.reason);
      },
      "(ok, reason): can enable() work here? After a failed enable(), that failure.");
  m.def(
      "enable",
      [](bool external_correlation, size_t buffer_mib, size_t max_buffers) {
        dbench::cupti::EnableOptions o;
        o.external_correlation = external_correlation;
        o.buffer_bytes = buffer_mib << 20;
        o.max_buffers = max_buffers;
        check(Collector::instance().enable(o));
      },
      py::arg("external_correlation") = false, py::arg("buffer_mib") = 8,
      py::arg("max_buffers") = 64,
      "Enable CONCURRENT_KERNEL, MEMCPY and MEMSET activity; RuntimeError('<reason>') if CUPTI "
      "is unavailable (no driver, libcupti missing, another CUPTI client such as nsys).");
  m.def("enabled", [] { return Collector::instance().enabled(); });
  m.def(
      "begin_block", [](int64_t id) { check(Collector::instance().begin_block(id)); },
      py::arg("block_id"), "Open the window of block `block_id` (after the pre-block sync).");
  m.def(
      "end_block", [](int64_t id) { check(Collector::instance().end_block(id)); },
      py::arg("block_id"), "Close the window of block `block_id` (after the post-block sync).");
  m.def(
      "flush",
      [] {
        std::string error;
        std::map<int64_t, BlockStats> blocks;
        {
          py::gil_scoped_release release;
          blocks = Collector::instance().flush(&error);
        }
        if (!error.empty()) {  // the blocks are still good: warn, don't lose them
          const std::string msg = "_dbench_cupti.flush: " + error;
          if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 1) != 0) throw py::error_already_set();
        }
        py::dict out;
        for (const auto& [id, s] : blocks) out[py::int_(id)] = to_dict(s);
        return out;
      },
      "Flush CUPTI's buffers (forced); stats of every closed block not returned before. A CUPTI "
      "flush error is a RuntimeWarning (the blocks aggregated so far are still returned).");
  m.def("dropped", [] { return Collector::instance().dropped(); },
        "Activity records CUPTI dropped for lack of buffer space, since enable().");
  m.def("counters", [] {
    Collector& c = Collector::instance();
    const dbench::cupti::Counters k = c.counters();
    py::dict d;
    d["records"] = k.records;
    d["ignored"] = k.ignored;
    d["no_timestamp"] = k.no_timestamp;
    put_totals(d, k.unattributed, "unattributed_", /*with_bytes=*/false);
    d["late"] = k.late;
    d["buffers_refused"] = c.buffers_refused();
    d["record_errors"] = c.record_errors();
    return d;
  });
  m.def("timestamp", [] { return Collector::instance().timestamp(); },
        "cuptiGetTimestamp (ns, the clock of the records); 0 when libcupti is not loaded.");
  m.def("info", [] {
    const dbench::cupti::Info i = Collector::instance().info();
    py::dict d;
    d["header_version"] = i.header_version;
    d["runtime_version"] = i.runtime_version;
    d["library"] = i.library;
    d["enabled"] = i.enabled;
    d["nvtx"] = i.nvtx;
    d["loaded_cupti"] = i.loaded_cupti;
    return d;
  });
  m.def(
      "finalize", [](bool detach) { check(Collector::instance().finalize(detach)); },
      py::arg("detach") = true,
      "Disable the activity kinds, flush, and cuptiFinalize when detach. Call with the device "
      "synchronised.");
  m.def(
      "nvtx_push", [](const std::string& name) { dbench::cupti::nvtx_push(name.c_str()); },
      py::arg("name"));
  m.def("nvtx_pop", [] { dbench::cupti::nvtx_pop(); });
  m.attr("NVTX") = dbench::cupti::nvtx_compiled();
  m.def("demangle", [](const std::string& name) { return dbench::cupti::demangle(name.c_str()); });
}
