// The fake libcupti (fake_cupti.cpp) and fake libcuda.so.1 (fake_cuda.cpp) as the collector
// tests drive them: loaded once per test process, by the paths CMake passes in as
// DBENCH_FAKE_CUPTI / DBENCH_FAKE_CUDA, with the fake's control functions resolved.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace dbench::cupti::test_support {

struct Fake {
  void (*reset)();
  void (*set_time)(uint64_t);
  void (*add_kernel)(uint64_t, uint64_t, const char*, uint32_t);
  void (*add_memcpy)(uint64_t, uint64_t, uint64_t);
  void (*add_api)(uint64_t, uint64_t);
  void (*fail_enable)(int, int);
  void (*set_dropped)(size_t);
  void (*deliver_async)();
  int (*enabled)(int);
  int (*finalized)();
  size_t (*external_depth)();
};

template <typename F>
void resolve(void* h, const char* name, F*& f) {
  f = reinterpret_cast<F*>(dlsym(h, name));
  ASSERT_NE(f, nullptr) << name;
}

Fake& fake() {
  static Fake f = [] {
    Fake x{};
    // The fake driver, loaded by path: the collector's dlopen("libcuda.so.1")
    // then finds it by soname. The fake libcupti is what the collector loads.
    EXPECT_NE(dlopen(DBENCH_FAKE_CUDA, RTLD_NOW | RTLD_GLOBAL), nullptr) << dlerror();
    setenv("DBENCH_CUPTI_LIBRARY", DBENCH_FAKE_CUPTI, 1);
    void* h = dlopen(DBENCH_FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(h, nullptr) << dlerror();
    resolve(h, "fake_cupti_reset", x.reset);
    resolve(h, "fake_cupti_set_time", x.set_time);
    resolve(h, "fake_cupti_add_kernel", x.add_kernel);
    resolve(h, "fake_cupti_add_memcpy", x.add_memcpy);
    resolve(h, "fake_cupti_add_api", x.add_api);
    resolve(h, "fake_cupti_fail_enable", x.fail_enable);
    resolve(h, "fake_cupti_set_dropped", x.set_dropped);
    resolve(h, "fake_cupti_deliver_async", x.deliver_async);
    resolve(h, "fake_cupti_enabled", x.enabled);
    resolve(h, "fake_cupti_finalized", x.finalized);
    resolve(h, "fake_cupti_external_depth", x.external_depth);
    return x;
  }();
  return f;
}

}  // namespace dbench::cupti::test_support
