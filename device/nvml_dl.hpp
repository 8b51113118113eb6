// device/nvml_dl.hpp: what the device programs (gpu_health.cpp, nvml_overlap.cpp) share: the NVML library they
// dlopen, a typed symbol lookup with gpudx's own declarations (src/abi/nvml.hpp), and a millisecond clock.
#pragma once
#include <dlfcn.h>

#include <chrono>

#include "abi/nvml.hpp"

namespace device_nvml {

inline void* lib;  // set by the program: dlopen("libnvidia-ml.so.1", RTLD_NOW)
template <class F>
F sym(const char* name) { return reinterpret_cast<F>(dlsym(lib, name)); }
inline double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace device_nvml
