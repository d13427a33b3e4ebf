#include "records.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>

namespace dbench::cupti {

// The fields read below sit at the same offsets in every record version since
// CUDA 11 (new versions append); a header that moved them fails to compile here.
static_assert(offsetof(KernelRecord, start) == 16 && offsetof(KernelRecord, end) == 24,
              "CUpti_ActivityKernel layout changed: check records.cpp");
static_assert(offsetof(MemcpyRecord, start) == 16 && offsetof(MemcpyRecord, end) == 24,
              "CUpti_ActivityMemcpy layout changed: check records.cpp");
static_assert(offsetof(MemsetRecord, start) == 16 && offsetof(MemsetRecord, end) == 24,
              "CUpti_ActivityMemset layout changed: check records.cpp");

uint64_t union_length(std::vector<Interval>& intervals) {
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  uint64_t total = 0;
  bool have = false;
  uint64_t cur_start = 0, cur_end = 0;
  for (const Interval& iv : intervals) {
    if (iv.end <= iv.start) continue;
    if (!have) {
      cur_start = iv.start;
      cur_end = iv.end;
      have = true;
    } else if (iv.start <= cur_end) {
      cur_end = std::max(cur_end, iv.end);
    } else {
      total += cur_end - cur_start;
      cur_start = iv.start;
      cur_end = iv.end;
    }
  }
  if (have) total += cur_end - cur_start;
  return total;
}

std::string demangle(const char* name) {
  if (name == nullptr) return "<unnamed>";
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) {
    std::free(out);
    return name;
  }
  std::string result(out);
  std::free(out);
  return result;
}

bool Aggregator::begin_block(int64_t id, uint64_t timestamp_ns, std::string* error) {
  if (has_open_block()) {
    *error = "begin_block(" + std::to_string(id) + "): block " +
             std::to_string(windows_.back().id) + " is still open (windows must not overlap)";
    return false;
  }
  if (!windows_.empty() && timestamp_ns < windows_.back().end) {
    *error = "begin_block(" + std::to_string(id) + "): timestamp before the end of block " +
             std::to_string(windows_.back().id);
    return false;
  }
  if (!used_ids_.insert(id).second) {
    *error = "begin_block(" + std::to_string(id) + "): block id already used";
    return false;
  }
  windows_.push_back({id, timestamp_ns, kOpen, false});
  Accum& a = accum_[id];
  a.stats.id = id;
  a.stats.begin_ns = timestamp_ns;
  return true;
}

bool Aggregator::end_block(int64_t id, uint64_t timestamp_ns, std::string* error) {
  if (!has_open_block() || windows_.back().id != id) {
    *error = "end_block(" + std::to_string(id) + "): no such open block";
    return false;
  }
  Window& w = windows_.back();
  if (timestamp_ns < w.begin) {
    *error = "end_block(" + std::to_string(id) + "): end timestamp before begin";
    return false;
  }
  w.end = timestamp_ns;
  accum_[id].stats.end_ns = timestamp_ns;
  return true;
}

Aggregator::Accum* Aggregator::find(uint64_t start) {
  // Last window with begin <= start.
  auto it = std::upper_bound(windows_.begin(), windows_.end(), start,
                             [](uint64_t t, const Window& w) { return t < w.begin; });
  if (it == windows_.begin()) return nullptr;
  const Window& w = *(it - 1);
  if (start > w.end) return nullptr;
  if (w.taken) {
    ++counters_.late;
    return nullptr;
  }
  auto a = accum_.find(w.id);
  return a == accum_.end() ? nullptr : &a->second;
}

void Aggregator::add(ActivityKind kind, uint64_t start, uint64_t end, uint64_t bytes,
                     uint32_t correlation_id, const char* name) {
  if (start == 0 && end == 0) {
    ++counters_.no_timestamp;
    return;
  }
  Accum* a = find(start);
  ActivityTotals& totals = a != nullptr ? a->stats.activity[kind] : counters_.unattributed[kind];
  ++totals.count;
  totals.ns += end > start ? end - start : 0;
  totals.bytes += bytes;
  if (a == nullptr) return;
  if (kind == kKernel) {
    a->kernel_intervals.push_back({start, end});
    a->kernel_correlations.push_back(correlation_id);
    auto& names = a->stats.kernel_names;
    std::string_view key = name ? std::string_view(name) : std::string_view("<unnamed>");
    auto n = names.find(key);
    if (n == names.end()) {
      names.emplace(std::string(key), 1);
    } else {
      ++n->second;
    }
  }
  a->all_intervals.push_back({start, end});
  a->first_start = std::min(a->first_start, start);
  a->last_end = std::max(a->last_end, std::max(start, end));
}

void Aggregator::add_kernel(uint64_t start, uint64_t end, uint32_t correlation_id,
                            const char* name) {
  add(kKernel, start, end, 0, correlation_id, name);
}

void Aggregator::add_memcpy(uint64_t start, uint64_t end, uint64_t bytes) {
  add(kMemcpy, start, end, bytes, 0, nullptr);
}

void Aggregator::add_memset(uint64_t start, uint64_t end, uint64_t bytes) {
  add(kMemset, start, end, bytes, 0, nullptr);
}

void Aggregator::add_external_correlation(uint32_t correlation_id, uint64_t external_id) {
  external_[correlation_id] = external_id;
}

template <typename R>
void Aggregator::add_transfer(ActivityKind kind, const CUpti_Activity& record) {
  const auto& r = reinterpret_cast<const R&>(record);
  add(kind, r.start, r.end, r.bytes, 0, nullptr);
}

void Aggregator::consume(const CUpti_Activity& record) {
  ++counters_.records;
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto& k = reinterpret_cast<const KernelRecord&>(record);
      add_kernel(k.start, k.end, k.correlationId, k.name);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: add_transfer<MemcpyRecord>(kMemcpy, record); break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2: add_transfer<MemcpyPtoPRecord>(kMemcpy, record); break;
    case CUPTI_ACTIVITY_KIND_MEMSET: add_transfer<MemsetRecord>(kMemset, record); break;
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto& e = reinterpret_cast<const ExternalCorrelationRecord&>(record);
      add_external_correlation(e.correlationId, e.externalId);
      break;
    }
    default:
      ++counters_.ignored;
      break;
  }
}

std::map<int64_t, BlockStats> Aggregator::take_closed() {
  std::map<int64_t, BlockStats> out;
  std::unordered_set<int64_t> taken_ids;
  for (Window& w : windows_) {
    if (w.taken || w.end == kOpen) continue;
    auto it = accum_.find(w.id);
    w.taken = true;
    if (it == accum_.end()) continue;
    Accum& a = it->second;
    BlockStats& s = a.stats;
    s.kernel_busy_ns = union_length(a.kernel_intervals);
    s.busy_ns = union_length(a.all_intervals);
    s.span_ns = a.last_end > a.first_start && a.first_start != kOpen ? a.last_end - a.first_start : 0;
    if (!external_.empty()) {
      for (uint32_t c : a.kernel_correlations) {
        auto e = external_.find(c);
        if (e != external_.end() && e->second == static_cast<uint64_t>(w.id)) ++s.kernels_correlated;
      }
    }
    taken_ids.insert(w.id);
    out.emplace(w.id, std::move(s));
    accum_.erase(it);
  }
  if (!taken_ids.empty() && !external_.empty()) {
    for (auto it = external_.begin(); it != external_.end();) {
      if (taken_ids.count(static_cast<int64_t>(it->second))) {
        it = external_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return out;
}

}  // namespace dbench::cupti
