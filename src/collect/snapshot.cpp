#include <array>
#include <chrono>
#include <ctime>
#include <exception>
#include <future>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "collect/collectors.hpp"
#include "collect/process.hpp"
#include "collect/services.hpp"

#include "core/clock.hpp"

namespace gpudx {

CollectorStatus status_ok(Collector c) { return {std::string(to_string(c)), CollectorState::ok, {}, {}, 0, {}}; }

CollectorStatus status_no_data(Collector c, std::string why, std::string path) {
    return {std::string(to_string(c)), CollectorState::no_data, std::move(why), std::move(path), 0, {}};
}

CollectorStatus status_error(Collector c, const Error& e) {
    return {std::string(to_string(c)), CollectorState::error, e.message, e.path, 0, {}};
}

namespace {

// The registry of host collectors: every row of GPUDX_HOST_COLLECTORS, in its order, bound to its function and
// to the snapshot's layer of its name.
struct HostCollector {
    Collector id;
    CollectorStatus (*collect)(const CollectContext&, Snapshot&);
};
#define GPUDX_HOST_COLLECTOR_ROW(name)                                                                  \
    HostCollector{Collector::name, [](const CollectContext& ctx, Snapshot& s) { return collect_##name(ctx, s.name); }},
constexpr HostCollector kHostCollectors[] = {GPUDX_HOST_COLLECTORS(GPUDX_HOST_COLLECTOR_ROW)};
#undef GPUDX_HOST_COLLECTOR_ROW

// The host collectors at the same time, one thread each (the first on the caller's): each fills only its own
// layer of `s`, so they share nothing but read-only state, and a node's diagnosis costs its slowest source (the
// kernel log, usually) rather than their sum. The statuses keep the registry's order, so snapshots read the same.
// Must run after start_driver_probes: no fork may happen while these threads exist (core/child_probe.hpp).
void run_host_collectors_side_by_side(const CollectContext& ctx, Snapshot& s) {
    constexpr size_t n = std::size(kHostCollectors);
    std::array<CollectorStatus, n> statuses;
    auto run = [&](size_t i) {
        const HostCollector& host = kHostCollectors[i];
        statuses[i] = run_collector(host.id, [&] { return host.collect(ctx, s); });
    };
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (size_t i = 1; i < n; ++i) {
        try {
            threads.emplace_back(run, i);
        } catch (const std::system_error&) {
            break;  // no more threads: the rest run here, after the first
        }
    }
    run(0);
    for (size_t i = 1 + threads.size(); i < n; ++i) run(i);
    for (auto& t : threads) t.join();
    for (auto& st : statuses) s.collectors.push_back(std::move(st));
}

}  // namespace

CollectorStatus run_collector(Collector c, const std::function<CollectorStatus()>& collect) {
    auto t0 = SteadyClock::now();
    CollectorStatus st;
    // Fault-isolation boundary: each collector.
    try {
        st = collect();
    } catch (const std::exception& e) {
        st = status_error(c, Error{std::string("collector failed: ") + e.what(), {}, 0});
    } catch (...) {
        st = status_error(c, Error{"collector failed", {}, 0});
    }
    st.name = to_string(c);
    st.duration_ms = ms_since(t0);
    return st;
}

CollectorStatus run_host_collector(Collector c, const CollectContext& ctx, Snapshot& s) {
    for (auto& host : kHostCollectors)
        if (host.id == c) return run_collector(c, [&] { return host.collect(ctx, s); });
    return status_error(c, Error{"not a host collector", {}, 0});
}

Snapshot take_snapshot(const Root& root, const CollectOptions& options) {
    Snapshot s;
    s.gpudx_version = GPUDX_VERSION;
    s.collected_at = utc_now_iso8601();
    s.root = root.base().string();
    CollectContext ctx{root, options};

    // cuInit alone costs ~430 ms on an H200 node: the driver layers run beside the host collectors. Their
    // children are forked here, before the thread that reads them exists.
    std::future<std::vector<CollectorStatus>> driver;
    if (options.probe_driver) {
        auto t0 = SteadyClock::now();
        StartedDriverProbes probes;
        std::string start_error;
        // Fault-isolation boundary: the driver collectors, when their children are started and when read.
        try {
            probes = start_driver_probes(ctx, true);
        } catch (const std::exception& e) {
            start_error = e.what();
        }
        driver = std::async(std::launch::async, [&, t0, start_error, probes = std::move(probes)]() mutable {
            auto failed = [](const std::string& why) {
                return std::vector<CollectorStatus>{status_error(Collector::nvml, Error{why, {}, 0}),
                                                    status_error(Collector::cuda, Error{why, {}, 0})};
            };
            std::vector<CollectorStatus> out;
            if (!probes) {
                out = failed("could not start the driver probes: " + start_error);
            } else {
                try {
                    out = finish_driver_probes(ctx, std::move(probes), s.nvml, s.cuda, &s.rocm_smi);
                } catch (const std::exception& e) {
                    out = failed(e.what());
                }
            }
            for (auto& st : out)
                if (st.duration_ms == 0) st.duration_ms = ms_since(t0);
            return out;
        });
    }

    run_host_collectors_side_by_side(ctx, s);
    // After the host layers: whether the node has NVSwitches (PCIe, /dev) decides whether systemd is asked.
    s.collectors.push_back(
        run_collector(Collector::services, [&] { return collect_services(ctx, s.pcie, s.devices, s.services); }));

    if (!options.pids.empty())
        s.collectors.push_back(run_collector(Collector::processes, [&] {
            NodeView node{&s.libraries, &options.environment, &s.devices.nodes};
            for (int pid : options.pids) s.processes.push_back(collect_process(root, pid, node));
            return status_ok(Collector::processes);
        }));
    if (driver.valid())
        for (auto& st : driver.get()) s.collectors.push_back(std::move(st));
    else {
        std::string why = options.driver_not_probed_reason.empty() ? "driver layers not probed (--no-driver)"
                                                                    : options.driver_not_probed_reason;
        s.collectors.push_back(status_no_data(Collector::nvml, why));
        s.collectors.push_back(status_no_data(Collector::cuda, why));
    }
    return s;
}

}  // namespace gpudx
