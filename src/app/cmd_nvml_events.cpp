// `gpudx nvml-events`: the driver's NVML events as they happen, one JSON line each (gpu_api/nvml/events.hpp).
// The agent runs it as its watcher child; an operator runs it to see what the driver delivers.
#include <unistd.h>

#include <cstdlib>

#include <fmt/format.h>

#include "app/command.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "gpu_api/nvml/events.hpp"

namespace gpudx::app {
namespace {

struct NvmlEventsCmdOptions {
    std::string root = "/";
    std::string driver_lib_dir;
    std::string types = "health";
    double wait_s = 1.0;
    double duration_s = 0;
    uint64_t count = 0;
};

// "health", "all", or names joined by commas ("xid,double_bit_ecc").
unsigned long long parse_types(const std::string& text) {
    if (text == "health") return nvml_health_event_mask();
    if (text == "all") return nvml_all_event_mask();
    unsigned long long mask = 0;
    for (const auto& name : split(text, ',')) {
        auto bit = nvml_event_type_bit(trim(name));
        if (!bit)
            throw UsageError{fmt::format("--types: \"{}\" is not an event type; use health, all, or names joined by "
                                         "commas from: {}",
                                         trim(name), join_strings(nvml_event_type_names(nvml_all_event_mask()), ", "))};
        mask |= *bit;
    }
    if (mask == 0) throw UsageError{"--types: no event type given"};
    return mask;
}

int run_nvml_events(const NvmlEventsCmdOptions& c) {
    NvmlEventWatchOptions o;
    o.mask = parse_types(c.types);
    if (!c.driver_lib_dir.empty()) o.library_dir = c.driver_lib_dir;
    o.wait = std::chrono::milliseconds(static_cast<long>(c.wait_s * 1000));
    if (c.duration_s > 0) o.duration = std::chrono::milliseconds(static_cast<long>(c.duration_s * 1000));
    if (c.count > 0) o.max_events = c.count;
    // Stand-in libraries replaying a capture find its recorded answers through this (as the probes do).
    if (c.root != "/" && !std::getenv("GPUDX_STANDIN_ROOT")) ::setenv("GPUDX_STANDIN_ROOT", c.root.c_str(), 1);
    return watch_nvml_events(o, STDOUT_FILENO);
}

CommandRegistrar register_nvml_events{
    {"nvml-events", "Print the driver's NVML events as they happen (Xid, ECC, recovery action), one JSON line each",
     16,
     [](CLI::App& cmd) -> std::function<int()> {
         auto o = std::make_shared<NvmlEventsCmdOptions>();
         cmd.add_option("--types", o->types,
                        "health (the failures the agent watches), all, or names joined by commas (xid,double_bit_ecc)")
             ->capture_default_str();
         cmd.add_option("--wait", o->wait_s, "Seconds each wait for an event lasts; an \"alive\" line follows an empty one")
             ->capture_default_str()
             ->check(CLI::Range(0.01, 3600.0));
         cmd.add_option("--duration", o->duration_s, "Stop after this many seconds (default: run until killed)")
             ->check(CLI::Range(0.0, 1e9));
         cmd.add_option("--count", o->count, "Stop after this many events");
         cmd.add_option("--driver-lib-dir", o->driver_lib_dir, "Load libnvidia-ml.so.1 from this folder")
             ->type_name("DIR");
         cmd.add_option("--root", o->root, "A capture whose recorded answers stand-in libraries serve")
             ->type_name("DIR")
             ->capture_default_str();
         cmd.footer(
             "Registers every GPU for the event types it supports among those asked for, then waits\n"
             "(nvmlEventSetWait_v2) and prints each event as it comes:\n"
             "  {\"line\":\"ready\",\"devices\":[{\"index\":0,\"uuid\":\"GPU-...\",\"pci\":\"0000:00:06.0\",\n"
             "     \"supported\":[...],\"registered\":[\"xid\",\"double_bit_ecc\",...]}]}\n"
             "  {\"line\":\"event\",\"time\":\"2026-12-02T06:10:00Z\",\"index\":0,\"uuid\":\"GPU-...\",\n"
             "     \"pci\":\"0000:00:06.0\",\"type\":\"xid\",\"mask\":8,\"data\":79}\n"
             "  {\"line\":\"alive\",...} after each wait with no event; {\"line\":\"call\",...} before each setup call;\n"
             "  {\"line\":\"error\",...} a failed call; {\"line\":\"unavailable\",\"reason\":...} nothing to watch.\n"
             "The agent runs this as a child it can kill: a wait inside a wedged driver never returns.\n"
             "Types: " + join_strings(nvml_event_type_names(nvml_all_event_mask()), ", ") + ".\n\n"
             "Exit codes: 0 the duration or count was reached, 1 the output was closed, 3 nothing to watch\n"
             "(no libnvidia-ml, no driver, no GPU that delivers the events), 64 usage error.\n\n"
             "Examples:\n  gpudx nvml-events\n  gpudx nvml-events --types all --duration 30\n"
             "Details: docs/agent.md.");
         return [o] { return run_nvml_events(*o); };
     }}};

}  // namespace
}  // namespace gpudx::app
