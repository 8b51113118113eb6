#pragma once
// When a driver probe (NVML, ROCm SMI) may take its second health sample: the interval between the two, and the
// probe's own deadline, which the second sample must leave room under (each probe says how much).
#include <chrono>

namespace gpudx {

struct HealthSampling {
    std::chrono::milliseconds interval{1000};
    std::chrono::steady_clock::time_point deadline;

    // Whether waiting the interval now still leaves `margin` of the deadline for the calls after it.
    bool leaves(std::chrono::milliseconds margin) const {
        return std::chrono::steady_clock::now() + interval + margin <= deadline;
    }
};

}  // namespace gpudx
