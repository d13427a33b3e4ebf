#include "blocks.h"

#include <atomic>
#include <string>

namespace dbench::cupti {

namespace {

int64_t next_block_id() {
  static std::atomic<int64_t> next{1};
  return next.fetch_add(1);
}

}  // namespace

PerCall per_call(const BlockStats& stats, uint64_t calls) {
  PerCall p;
  if (calls == 0) return p;
  const double n = static_cast<double>(calls);
  p.gpu_us = static_cast<double>(stats.busy_ns) / n / 1e3;
  p.kernels = static_cast<double>(stats.activity[kKernel].count) / n;
  return p;
}

Status enable_collector(Collector& collector, const EnableOptions& options) {
  if (collector.enabled()) return Status::Ok("already enabled");
  Status s = collector.available();
  if (!s.ok) return s;
  return collector.enable(options);
}

ScopedBlock::ScopedBlock(Collector& collector) : collector_(collector), id_(next_block_id()) {
  dropped_at_open_ = collector_.dropped();
  opened_ = collector_.begin_block(id_);
  open_ = opened_.ok;
}

ScopedBlock::~ScopedBlock() {
  if (open_) collector_.end_block(id_);  // nothing to report from a destructor: the block is dropped
}

Status ScopedBlock::finish(uint64_t calls, PerCall* out) {
  if (!opened_.ok) return Status::Error("block window not opened: " + opened_.reason);
  if (!open_) return Status::Error("block " + std::to_string(id_) + " already finished");
  open_ = false;
  Status s = collector_.end_block(id_);
  if (!s.ok) return s;
  if (calls == 0) return Status::Error("block of 0 calls");
  std::string error;
  const auto blocks = collector_.flush(&error);
  if (!error.empty()) return Status::Error("CUPTI flush failed, the block may lack records: " + error);
  const auto it = blocks.find(id_);
  if (it == blocks.end()) return Status::Error("CUPTI returned no stats for block " + std::to_string(id_));
  const uint64_t dropped = collector_.dropped() - dropped_at_open_;
  if (dropped > 0) {
    return Status::Error("CUPTI dropped " + std::to_string(dropped) +
                         " activity records during the block (buffers full): no GPU time for it");
  }
  *out = per_call(it->second, calls);
  return Status::Ok();
}

}  // namespace dbench::cupti
