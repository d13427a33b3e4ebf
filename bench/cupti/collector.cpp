#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // dlinfo
#endif
#include "collector.h"

#include <cupti_activity.h>
#include <cupti_result.h>
#include <cupti_version.h>
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#ifdef DBENCH_HAVE_NVTX3
#include <nvtx3/nvToolsExt.h>
#endif

namespace dbench::cupti {

// The libcupti functions used (without their "cupti" prefix), by area: one list
// declares the Api members and resolves them with dlsym.
#define DBENCH_CUPTI_FUNCTIONS(X)                                              \
  X(GetResultString) X(GetVersion) X(GetTimestamp) X(Finalize)                 \
  X(ActivityRegisterCallbacks) X(ActivityEnable) X(ActivityDisable)            \
  X(ActivityFlushAll) X(ActivityGetNextRecord) X(ActivityGetNumDroppedRecords) \
  X(ActivityPushExternalCorrelationId) X(ActivityPopExternalCorrelationId)

struct Collector::Api {
  void* handle = nullptr;
  std::string path;
#define DBENCH_API_MEMBER(name) decltype(&cupti##name) name = nullptr;
  DBENCH_CUPTI_FUNCTIONS(DBENCH_API_MEMBER)
#undef DBENCH_API_MEMBER
};

namespace {

constexpr auto kExternalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;  // Kineto uses CUSTOM0/1

const char* kind_name(int kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "MEMSET";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return "EXTERNAL_CORRELATION";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "RUNTIME";
    default: return "?";
  }
}

// Is the CUDA driver library there? (libcupti itself links no libcuda; without
// it every CUPTI activity call fails, so say so plainly.)
Status driver_present() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    return Status::Error(std::string("no CUDA driver: cannot load libcuda.so.1 (") +
                         (e ? e : "unknown error") + ")");
  }
  return Status::Ok();  // handle kept: the CUDA runtime loads it anyway
}

// Shared objects mapped in the process whose file name starts with libcupti:
// torch loads its own libcupti; a second copy next to it would be a problem.
std::vector<std::string> loaded_cupti_copies() {
  std::vector<std::string> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const char* path = info->dlpi_name;
        if (path != nullptr && *path) {
          const char* base = std::strrchr(path, '/');
          base = base ? base + 1 : path;
          if (std::strncmp(base, "libcupti", 8) == 0) {
            static_cast<std::vector<std::string>*>(data)->emplace_back(path);
          }
        }
        return 0;
      },
      &out);
  return out;
}

}  // namespace

void Collector::BufferDeleter::operator()(uint8_t* p) const { std::free(p); }

Collector::Collector() : api_(std::make_unique<Api>()) {}

Collector::~Collector() {
  if (enabled_) finalize();
}

Collector& Collector::instance() {
  static Collector* collector = new Collector();  // never destroyed, see collector.h
  return *collector;
}

Status Collector::load() {
  if (load_tried_) return load_status_;
  load_tried_ = true;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("DBENCH_CUPTI_LIBRARY"); env != nullptr && *env) {
    candidates.emplace_back(env);
  }
  // The soname first: reuses a libcupti already in the process (torch's).
  candidates.push_back("libcupti.so." + std::to_string(CUPTI_API_VERSION / 10000));
#ifdef DBENCH_CUPTI_LIBRARY_PATH
  candidates.emplace_back(DBENCH_CUPTI_LIBRARY_PATH);
#endif
  candidates.emplace_back("libcupti.so");
  std::string tried;
  void* handle = nullptr;
  for (const std::string& c : candidates) {
    handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* e = dlerror();
    tried += "\n  " + c + ": " + (e ? e : "not found");
  }
  if (handle == nullptr) {
    load_status_ = Status::Error("libcupti not found (set DBENCH_CUPTI_LIBRARY):" + tried);
    return load_status_;
  }
  Api& a = *api_;
  a.handle = handle;
  link_map* lm = nullptr;
  a.path = dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name ? lm->l_name : "?";
  std::string missing;
#define DBENCH_SYM(name)                                                     \
  a.name = reinterpret_cast<decltype(a.name)>(dlsym(handle, "cupti" #name)); \
  if (a.name == nullptr) missing += " cupti" #name;
  DBENCH_CUPTI_FUNCTIONS(DBENCH_SYM)
#undef DBENCH_SYM
  if (!missing.empty()) {
    load_status_ = Status::Error(a.path + " lacks:" + missing);
    return load_status_;
  }
  uint32_t version = 0;
  if (a.GetVersion(&version) == CUPTI_SUCCESS && version / 10000 != CUPTI_API_VERSION / 10000) {
    // Kernel/memcpy/memset record layouts are fixed within a major version.
    load_status_ = Status::Error(a.path + " is CUPTI API " + std::to_string(version) +
                                 ", built against " + std::to_string(CUPTI_API_VERSION));
    return load_status_;
  }
  loaded_ = true;
  load_status_ = Status::Ok(a.path);
  return load_status_;
}

std::string Collector::error_string(int result) const {
  const char* s = nullptr;
  if (loaded_ && api_->GetResultString(static_cast<CUptiResult>(result), &s) == CUPTI_SUCCESS &&
      s != nullptr) {
    return std::string(s) + " (" + std::to_string(result) + ")";
  }
  return "CUPTI error " + std::to_string(result);
}

Status Collector::call(const char* what, int result) const {
  if (result == CUPTI_SUCCESS) return Status::Ok();
  return Status::Error(std::string(what) + ": " + error_string(result));
}

Status Collector::available() {
  if (enabled_) return Status::Ok("enabled (" + api_->path + ")");
  Status s = load();
  if (!s.ok) return s;
  if (!enable_failure_.ok) return enable_failure_;
  s = driver_present();
  if (!s.ok) return s;
  return Status::Ok(api_->path);
}

Status Collector::enable(const EnableOptions& options) {
  if (enabled_) return Status::Ok("already enabled");
  Status s = load();
  if (s.ok) s = driver_present();
  if (!s.ok) {
    enable_failure_ = s;
    return s;
  }
  Api& a = *api_;
  options_ = options;
  options_.buffer_bytes = (std::max<size_t>(options_.buffer_bytes, 1 << 16) + 7) / 8 * 8;
  options_.max_buffers = std::max<size_t>(options_.max_buffers, 2);
  s = call("cuptiActivityRegisterCallbacks",
           a.ActivityRegisterCallbacks(&Collector::buffer_requested, &Collector::buffer_completed));
  std::vector<int> kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                            CUPTI_ACTIVITY_KIND_MEMSET};
  if (options_.external_correlation) {
    kinds.push_back(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
  }
  enabled_kinds_.clear();
  for (size_t i = 0; s.ok && i < kinds.size(); ++i) {
    const std::string what = std::string("cuptiActivityEnable(") + kind_name(kinds[i]) + ")";
    s = call(what.c_str(), a.ActivityEnable(static_cast<CUpti_ActivityKind>(kinds[i])));
    if (s.ok) enabled_kinds_.push_back(kinds[i]);
  }
  if (!s.ok) {
    for (int k : enabled_kinds_) a.ActivityDisable(static_cast<CUpti_ActivityKind>(k));
    enabled_kinds_.clear();
    enable_failure_ = s;
    return s;
  }
  size_t ignored = 0;  // reset CUPTI's dropped counter
  a.ActivityGetNumDroppedRecords(nullptr, 0, &ignored);
  enabled_ = true;
  enable_failure_ = Status::Ok();
  return Status::Ok("enabled (" + a.path + ")");
}

Status Collector::begin_block(int64_t id) {
  if (!enabled_) return Status::Error("begin_block: CUPTI collector not enabled");
  if (options_.external_correlation && id < 0) {
    return Status::Error("begin_block: block ids must be >= 0 with external correlation");
  }
  uint64_t ts = 0;
  Status s = call("cuptiGetTimestamp", api_->GetTimestamp(&ts));
  if (!s.ok) return s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string error;
    if (!aggregator_.begin_block(id, ts, &error)) return Status::Error(error);
  }
  if (options_.external_correlation) {
    s = call("cuptiActivityPushExternalCorrelationId",
             api_->ActivityPushExternalCorrelationId(kExternalKind, static_cast<uint64_t>(id)));
  }
  return s;
}

Status Collector::end_block(int64_t id) {
  if (!enabled_) return Status::Error("end_block: CUPTI collector not enabled");
  uint64_t ts = 0;
  Status s = call("cuptiGetTimestamp", api_->GetTimestamp(&ts));
  if (!s.ok) return s;
  if (options_.external_correlation) {
    uint64_t popped = 0;
    api_->ActivityPopExternalCorrelationId(kExternalKind, &popped);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  std::string error;
  if (!aggregator_.end_block(id, ts, &error)) return Status::Error(error);
  return Status::Ok();
}

std::map<int64_t, BlockStats> Collector::flush(std::string* error) {
  if (enabled_) {
    // Not under mutex_: the completion callback, which takes it, may run on this thread.
    Status s = call("cuptiActivityFlushAll", api_->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    if (!s.ok && error != nullptr) *error = s.reason;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return aggregator_.take_closed();
}

uint64_t Collector::dropped() {
  if (enabled_) {
    size_t d = 0;
    if (api_->ActivityGetNumDroppedRecords(nullptr, 0, &d) == CUPTI_SUCCESS) {
      std::lock_guard<std::mutex> lock(mutex_);
      dropped_ += d;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

Counters Collector::counters() {
  std::lock_guard<std::mutex> lock(mutex_);
  return aggregator_.counters();
}

uint64_t Collector::buffers_refused() {
  std::lock_guard<std::mutex> lock(mutex_);
  return buffers_refused_;
}

uint64_t Collector::record_errors() {
  std::lock_guard<std::mutex> lock(mutex_);
  return record_errors_;
}

uint64_t Collector::timestamp() {
  uint64_t ts = 0;
  if (load().ok) api_->GetTimestamp(&ts);
  return ts;
}

Info Collector::info() {
  Info i;
  i.header_version = CUPTI_API_VERSION;
  if (load().ok) {
    api_->GetVersion(&i.runtime_version);
    i.library = api_->path;
  }
  i.enabled = enabled_;
  i.nvtx = nvtx_compiled();
  i.loaded_cupti = loaded_cupti_copies();
  return i;
}

Status Collector::finalize(bool detach) {
  if (!enabled_) return Status::Ok("not enabled");
  Api& a = *api_;
  Status first = Status::Ok();
  auto keep = [&first](Status s) {
    if (first.ok && !s.ok) first = std::move(s);
  };
  for (int k : enabled_kinds_) {
    keep(call("cuptiActivityDisable", a.ActivityDisable(static_cast<CUpti_ActivityKind>(k))));
  }
  enabled_kinds_.clear();
  keep(call("cuptiActivityFlushAll", a.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)));
  size_t d = 0;
  if (a.ActivityGetNumDroppedRecords(nullptr, 0, &d) == CUPTI_SUCCESS) {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped_ += d;
  }
  if (detach) keep(call("cuptiFinalize", a.Finalize()));
  enabled_ = false;
  return first;
}

// ---- buffer callbacks (run on CUPTI's worker thread, or inside FlushAll) ----

void Collector::buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  instance().on_requested(buffer, size, max_records);
}

void Collector::buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                 size_t /*size*/, size_t valid_size) {
  instance().on_completed(context, stream_id, buffer, valid_size);
}

void Collector::on_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  std::lock_guard<std::mutex> lock(mutex_);
  *max_records = 0;  // as many as fit
  if (outstanding_.size() >= options_.max_buffers) {
    ++buffers_refused_;  // CUPTI drops records and counts them
    *buffer = nullptr;
    *size = 0;
    return;
  }
  Buffer b;
  if (!free_.empty()) {
    b = std::move(free_.back());
    free_.pop_back();
  } else {
    // ACTIVITY_RECORD_ALIGNMENT (8) is what CUPTI needs; a page costs nothing more.
    b.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, (options_.buffer_bytes + 4095) / 4096 * 4096)));
  }
  if (!b) {
    ++buffers_refused_;
    *buffer = nullptr;
    *size = 0;
    return;
  }
  *buffer = b.get();
  *size = options_.buffer_bytes;
  outstanding_.emplace(b.get(), std::move(b));
}

void Collector::on_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                             size_t valid_size) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (buffer != nullptr && valid_size > 0 && loaded_) {
    CUpti_Activity* record = nullptr;
    while (true) {
      CUptiResult r = api_->ActivityGetNextRecord(buffer, valid_size, &record);
      if (r == CUPTI_SUCCESS) {
        aggregator_.consume(*record);
      } else {
        if (r != CUPTI_ERROR_MAX_LIMIT_REACHED) ++record_errors_;
        break;
      }
    }
  }
  size_t d = 0;
  if (loaded_ && api_->ActivityGetNumDroppedRecords(context, stream_id, &d) == CUPTI_SUCCESS) {
    dropped_ += d;
  }
  auto it = outstanding_.find(buffer);
  if (it != outstanding_.end()) {
    if (free_.size() < 4) free_.push_back(std::move(it->second));
    outstanding_.erase(it);
  }
}

// ---- NVTX -----------------------------------------------------------------

bool nvtx_compiled() {
#ifdef DBENCH_HAVE_NVTX3
  return true;
#else
  return false;
#endif
}

void nvtx_push(const char* name) {
#ifdef DBENCH_HAVE_NVTX3
  nvtxRangePushA(name);
#else
  (void)name;
#endif
}

void nvtx_pop() {
#ifdef DBENCH_HAVE_NVTX3
  nvtxRangePop();
#endif
}

}  // namespace dbench::cupti
