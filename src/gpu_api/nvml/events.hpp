#pragma once
// NVML's events, as the driver delivers them (nvmlEventSetCreate, nvmlDeviceRegisterEvents,
// nvmlEventSetWait_v2), written as they come, one JSON line each. This runs in a process of its own
// (`gpudx nvml-events`, which the agent starts and watches, docs/agent.md): a wait inside a wedged driver
// never returns, so the watcher must be something the agent can kill.
//
// The lines, each one JSON object with "line" naming its kind (docs/agent.md, "NVML events"):
//   {"line":"call","call":"nvmlDeviceRegisterEvents","index":1}   about to make this setup call
//   {"line":"ready","devices":[{"index","uuid","pci","supported":[...],"registered":[...]}]}
//   {"line":"event","time":"...Z","index","uuid","pci","type":"xid","mask":8,"data":79,
//    "gpu_instance":..., "compute_instance":...}   (the MIG ids only when the event names an instance)
//   {"line":"alive","time":"...Z"}                 a wait ended with no event (one per --wait)
//   {"line":"error","call":"...","index":..,"code":..,"reason":"..."}   a call failed; the watch goes on
//   {"line":"unavailable","reason":"..."}          nothing to watch here (no library, no driver, no event
//                                                  any GPU supports); the last line
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudx {

// The event bits, by the names the lines use: "xid", "double_bit_ecc", ... (and back).
std::string nvml_event_type_name(unsigned long long bit);
std::optional<unsigned long long> nvml_event_type_bit(std::string_view name);
// The names of the bits set in `mask`, lowest bit first.
std::vector<std::string> nvml_event_type_names(unsigned long long mask);

// What the agent subscribes to: the events that say a GPU or its memory is failing (Xid critical errors,
// double-bit ECC, the DRAM retirement and poison events, a GPU gone unavailable, a recovery action the driver
// asks for). Not the P-state, clock, power-source or MIG-configuration changes, nor single-bit ECC, which are
// the normal life of a busy GPU.
unsigned long long nvml_health_event_mask();
// Every bit this gpudx knows.
unsigned long long nvml_all_event_mask();

struct NvmlEventWatchOptions {
    std::optional<std::string> library_dir;  // where libnvidia-ml.so.1 is; none: the loader's search
    unsigned long long mask = nvml_health_event_mask();
    std::chrono::milliseconds wait{1000};    // one nvmlEventSetWait_v2; an "alive" line after each empty one
    std::optional<std::chrono::milliseconds> duration;  // stop after this long
    std::optional<uint64_t> max_events;                 // stop after this many events
};

// The exit status of `gpudx nvml-events`.
inline constexpr int kNvmlEventsEnded = 0;        // the duration or the count was reached
inline constexpr int kNvmlEventsUnavailable = 3;  // nothing to watch (the "unavailable" line says why)
inline constexpr int kNvmlEventsOutputGone = 1;   // whoever read the lines has stopped reading

// Watches until the duration or count is reached or `fd` can no longer be written; the lines go to `fd`.
int watch_nvml_events(const NvmlEventWatchOptions& o, int fd);

}  // namespace gpudx
