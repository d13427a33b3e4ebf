// Test double of the CUDA driver library: built as libcuda.so.1 (soname) so
// that the collector's driver check passes in test_collector.cpp, which loads
// it by path before the collector looks it up by soname. Never on a library path.
extern "C" int dbench_fake_cuda_driver() { return 1; }
