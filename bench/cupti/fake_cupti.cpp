// Test double of libcupti: the functions the collector resolves with dlsym,
// with scripted records, timestamps and failures, so collector.cpp (loading,
// buffer callbacks, flush, dropped counts, finalize, error reporting) is
// tested without a GPU (test_collector.cpp). Not part of the module.
#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_version.h>

#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "test_support.h"

namespace {

using namespace dbench::cupti::test_support;

std::mutex mu;
CUpti_BuffersCallbackRequestFunc requested = nullptr;
CUpti_BuffersCallbackCompleteFunc completed = nullptr;
std::vector<std::vector<uint8_t>> queue;  // records not delivered yet
std::vector<int> enabled_kinds;
int fail_kind = -1;
CUptiResult fail_result = CUPTI_SUCCESS;
size_t dropped = 0;
uint64_t now = 0;
int finalized = 0;
std::vector<uint64_t> external_stack;

size_t record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(CUpti_ActivityExternalCorrelation);
    default: return sizeof(CUpti_ActivityAPI);
  }
}

template <typename R>
void enqueue(const R& r) {
  std::vector<uint8_t> bytes(sizeof r);
  std::memcpy(bytes.data(), &r, sizeof r);
  std::lock_guard<std::mutex> lock(mu);
  queue.push_back(std::move(bytes));
}

// Hand every queued record to the client: one requested buffer, then completed.
void deliver() {
  std::vector<std::vector<uint8_t>> records;
  CUpti_BuffersCallbackRequestFunc req;
  CUpti_BuffersCallbackCompleteFunc done;
  {
    std::lock_guard<std::mutex> lock(mu);
    records.swap(queue);
    req = requested;
    done = completed;
  }
  if (records.empty() || req == nullptr || done == nullptr) return;
  uint8_t* buffer = nullptr;
  size_t size = 0, max_records = 0;
  req(&buffer, &size, &max_records);
  if (buffer == nullptr) {
    std::lock_guard<std::mutex> lock(mu);
    dropped += records.size();
    return;
  }
  size_t used = 0;
  for (const auto& r : records) {
    if (used + r.size() > size) {
      std::lock_guard<std::mutex> lock(mu);
      ++dropped;
      continue;
    }
    std::memcpy(buffer + used, r.data(), r.size());
    used += r.size();
  }
  done(nullptr, 0, buffer, size, used);
}

}  // namespace

extern "C" {

// ---- control (test side) ----
void fake_cupti_reset() {
  std::lock_guard<std::mutex> lock(mu);
  queue.clear();
  fail_kind = -1;
  fail_result = CUPTI_SUCCESS;
  dropped = 0;
  finalized = 0;
}
void fake_cupti_set_time(uint64_t t) { now = t; }
void fake_cupti_add_kernel(uint64_t start, uint64_t end, const char* name, uint32_t corr) {
  enqueue(kernel_record(start, end, name, corr));  // name: static storage on the test side
}
void fake_cupti_add_memcpy(uint64_t start, uint64_t end, uint64_t bytes) {
  enqueue(memcpy_record(start, end, bytes));
}
void fake_cupti_add_api(uint64_t start, uint64_t end) { enqueue(api_record(start, end)); }
void fake_cupti_fail_enable(int kind, int result) {
  fail_kind = kind;
  fail_result = static_cast<CUptiResult>(result);
}
void fake_cupti_set_dropped(size_t n) {
  std::lock_guard<std::mutex> lock(mu);
  dropped = n;
}
// Deliver the queued records from another thread, as CUPTI's worker does.
void fake_cupti_deliver_async() { std::thread(deliver).join(); }
int fake_cupti_enabled(int kind) {
  std::lock_guard<std::mutex> lock(mu);
  for (int k : enabled_kinds)
    if (k == kind) return 1;
  return 0;
}
int fake_cupti_finalized() { return finalized; }
size_t fake_cupti_external_depth() { return external_stack.size(); }

// ---- the libcupti API used by collector.cpp ----
CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  switch (result) {
    case CUPTI_SUCCESS: *str = "CUPTI_SUCCESS"; break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: *str = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; break;
    default: *str = "CUPTI_ERROR_UNKNOWN"; break;
  }
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  *timestamp = now;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                    CUpti_BuffersCallbackCompleteFunc done) {
  if (req == nullptr || done == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::lock_guard<std::mutex> lock(mu);
  requested = req;
  completed = done;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  if (static_cast<int>(kind) == fail_kind) return fail_result;
  std::lock_guard<std::mutex> lock(mu);
  enabled_kinds.push_back(kind);
  finalized = 0;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(mu);
  for (auto it = enabled_kinds.begin(); it != enabled_kinds.end(); ++it) {
    if (*it == kind) {
      enabled_kinds.erase(it);
      return CUPTI_SUCCESS;
    }
  }
  return CUPTI_ERROR_INVALID_KIND;
}
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t /*flag*/) {
  deliver();
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  size_t offset = 0;
  if (*record != nullptr) {
    offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer) +
             record_size((*record)->kind);
  }
  if (offset >= valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + offset);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* n) {
  std::lock_guard<std::mutex> lock(mu);
  *n = dropped;
  dropped = 0;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind, uint64_t id) {
  external_stack.push_back(id);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind, uint64_t* id) {
  if (external_stack.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (id) *id = external_stack.back();
  external_stack.pop_back();
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI cuptiFinalize(void) {
  std::lock_guard<std::mutex> lock(mu);
  finalized = 1;
  enabled_kinds.clear();
  return CUPTI_SUCCESS;
}

}  // extern "C"
