// The CUPTI layer: activity tracing of kernels, memcpys and memsets into
// per-block aggregates (records.h), plus NVTX ranges.
//
// libcupti is loaded lazily with dlopen/dlsym, not linked: importing the
// module never fails, on a machine without a GPU driver or without libcupti
// available() just says why. The soname (libcupti.so.<major>) is tried first,
// so a libcupti that torch already loaded is reused instead of loading a
// second copy into the process.
//
// CUPTI allows one activity client per process: when Nsight Systems / Compute
// or torch.profiler (Kineto) holds it, enable() fails with the CUPTI error
// (e.g. CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) and the caller falls
// back to CUDA events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "records.h"

namespace dbench::cupti {

struct Status {
  bool ok = true;
  std::string reason;  // why not, when !ok; a description when ok
  static Status Ok(std::string what = {}) { return {true, std::move(what)}; }
  static Status Error(std::string why) { return {false, std::move(why)}; }
};

struct EnableOptions {
  // Also push the block id as CUPTI external correlation id on the thread
  // calling begin_block (kind CUSTOM2) and enable EXTERNAL_CORRELATION +
  // RUNTIME records: gives BlockStats::kernels_correlated as a cross-check of
  // the time windows. Costs one runtime-API record per CUDA call; off by default.
  bool external_correlation = false;
  size_t buffer_bytes = size_t{8} << 20;  // per activity buffer (CUPTI suggests 1-10 MiB)
  size_t max_buffers = 64;                // outstanding; beyond, CUPTI drops records (counted)
};

struct Info {
  uint32_t header_version = 0;   // CUPTI_API_VERSION compiled against
  uint32_t runtime_version = 0;  // cuptiGetVersion of the loaded library (0: not loaded)
  std::string library;           // path of the loaded libcupti
  std::vector<std::string> loaded_cupti;  // every libcupti* mapped in the process (1 expected)
  bool enabled = false;
  bool nvtx = false;             // NVTX3 ranges compiled in
};

class Collector {
 public:
  Collector();
  ~Collector();  // finalize() if still enabled
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // The process-wide collector (CUPTI's buffer callbacks are plain functions).
  // Deliberately never destroyed: C++ static destructors run after the CUDA
  // runtime's own atexit teardown; call finalize() before exit instead.
  static Collector& instance();

  // Can enable() work here? Loads libcupti and checks for the CUDA driver
  // library; after a failed enable() it returns that failure. Does not enable.
  Status available();

  // Register the buffer callbacks and enable CONCURRENT_KERNEL, MEMCPY and
  // MEMSET activity. Idempotent. On failure nothing stays enabled and
  // available() reports the reason from then on.
  Status enable(const EnableOptions& options = {});
  bool enabled() const { return enabled_; }

  // Window of one timed block: call begin right after the pre-block device
  // sync and end right after the post-block device sync.
  Status begin_block(int64_t id);
  Status end_block(int64_t id);

  // cuptiActivityFlushAll(FORCED), then the stats of every closed block not
  // returned before. Call after the post-block sync. On a CUPTI error the
  // blocks aggregated so far are still returned and *error is set.
  std::map<int64_t, BlockStats> flush(std::string* error);

  // Records CUPTI dropped (no buffer space) since enable().
  uint64_t dropped();
  Counters counters();
  uint64_t buffers_refused();  // buffer requests refused (max_buffers reached / no memory)
  uint64_t record_errors();    // cuptiActivityGetNextRecord failures (buffer abandoned)
  uint64_t timestamp();  // cuptiGetTimestamp, 0 when not loaded
  Info info();

  // Disable the activity kinds, flush, and (detach) cuptiFinalize. Call with
  // the device synchronised. Aggregated blocks stay available to flush().
  Status finalize(bool detach = true);

 private:
  struct Api;
  struct BufferDeleter {
    void operator()(uint8_t* p) const;
  };
  using Buffer = std::unique_ptr<uint8_t, BufferDeleter>;

  Status load();  // dlopen + dlsym once
  std::string error_string(int result) const;
  Status call(const char* what, int result) const;  // result is a CUptiResult

  static void buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                               size_t size, size_t valid_size);
  void on_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  void on_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t valid_size);

  std::unique_ptr<Api> api_;
  Status load_status_ = Status::Error("not loaded yet");
  bool load_tried_ = false;
  bool loaded_ = false;
  Status enable_failure_ = Status::Ok();  // a failed enable(): reported by available()
  bool enabled_ = false;
  EnableOptions options_;
  std::vector<int> enabled_kinds_;  // CUpti_ActivityKind values

  std::mutex mutex_;  // guards everything below (buffer callbacks run on CUPTI's thread)
  Aggregator aggregator_;
  std::map<uint8_t*, Buffer> outstanding_;  // handed to CUPTI
  std::vector<Buffer> free_;
  uint64_t dropped_ = 0;
  uint64_t buffers_refused_ = 0;
  uint64_t record_errors_ = 0;
};

// NVTX ranges (NVTX3, header-only; no-ops unless a tool such as Nsight Systems
// is attached, and when the build had no NVTX3 headers). Independent of CUPTI.
bool nvtx_compiled();
void nvtx_push(const char* name);
void nvtx_pop();

}  // namespace dbench::cupti
