// Hand-built CUPTI activity records, of the struct versions the CUDA 13 headers
// deliver (records.h), for the tests: test_records.cpp feeds them to the
// Aggregator, the fake libcupti (fake_cupti.cpp) hands them to the collector.
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <cstring>

namespace dbench::cupti::test_support {

// A zeroed record of struct type R and kind `kind`.
template <typename R>
R blank_record(CUpti_ActivityKind kind) {
  R r;
  std::memset(&r, 0, sizeof r);
  r.kind = kind;
  return r;
}

// A zeroed record of struct type R timed [start, end].
template <typename R>
R timed_record(CUpti_ActivityKind kind, uint64_t start, uint64_t end) {
  R r = blank_record<R>(kind);
  r.start = start;
  r.end = end;
  return r;
}

// `name` is not copied: it must outlive the record's consumer.
inline CUpti_ActivityKernel10 kernel_record(
    uint64_t start, uint64_t end, const char* name, uint32_t correlation_id = 0,
    CUpti_ActivityKind kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
  auto k = timed_record<CUpti_ActivityKernel10>(kind, start, end);
  k.completed = end;
  k.correlationId = correlation_id;
  k.name = name;
  k.gridX = k.gridY = k.gridZ = 1;
  return k;
}

inline CUpti_ActivityMemcpy6 memcpy_record(uint64_t start, uint64_t end, uint64_t bytes) {
  auto m = timed_record<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY, start, end);
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  m.bytes = bytes;
  m.copyCount = 1;
  return m;
}

inline CUpti_ActivityMemset4 memset_record(uint64_t start, uint64_t end, uint64_t bytes) {
  auto m = timed_record<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET, start, end);
  m.bytes = bytes;
  return m;
}

// A runtime (or driver) API call: a kind the aggregation ignores.
inline CUpti_ActivityAPI api_record(uint64_t start, uint64_t end,
                                    CUpti_ActivityKind kind = CUPTI_ACTIVITY_KIND_RUNTIME) {
  return timed_record<CUpti_ActivityAPI>(kind, start, end);
}

inline CUpti_ActivityExternalCorrelation external_correlation_record(uint32_t correlation_id,
                                                                     uint64_t external_id) {
  auto e = blank_record<CUpti_ActivityExternalCorrelation>(
      CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
  e.externalId = external_id;
  e.correlationId = correlation_id;
  return e;
}

}  // namespace dbench::cupti::test_support
