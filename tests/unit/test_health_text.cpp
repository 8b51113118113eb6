// The per-GPU health lines of `diagnose -v` and `snapshot --format text` (render/health_text.cpp): NVML's facts,
// AER along the GPU's path to its root port, the nearest InfiniBand/RoCE adapter; what was not read is said to be.
#include <gtest/gtest.h>

#include "render/report.hpp"

using namespace gpudx;

namespace GPUDX_UNITY_ID {
namespace {

PciDevice bridge(std::string addr, std::string parent) {
    PciDevice d;
    d.address = std::move(addr);
    d.parent = std::move(parent);
    d.numa_node = 0;
    return d;
}

// One H200 behind a PCIe switch (root port 0000:15:01.0, switch ports 0000:16:00.0 and 0000:17:00.0), a
// ConnectX-7 on the same switch, NVML's answers of one healthy sample.
Snapshot node() {
    Snapshot s;
    s.collectors.push_back({"pcie", CollectorState::ok});
    s.collectors.push_back({"infiniband", CollectorState::ok});
    s.collectors.push_back({"nvml", CollectorState::ok});
    s.pcie.devices = {bridge("0000:15:01.0", ""), bridge("0000:16:00.0", "0000:15:01.0"),
                      bridge("0000:17:00.0", "0000:16:00.0"), bridge("0000:17:01.0", "0000:16:00.0"),
                      bridge("0000:18:00.0", "0000:17:00.0"), bridge("0000:19:00.0", "0000:17:01.0")};
    s.pcie.devices[4].is_gpu = true;
    s.pcie.gpus = {"0000:18:00.0"};
    for (auto& d : s.pcie.devices) {
        d.aer_correctable = {{"RxErr", 0}, {"TOTAL_ERR_COR", 0}};
        d.aer_fatal = {{"DLP", 0}, {"TOTAL_ERR_FATAL", 0}};
    }
    NvmlDevice g;
    g.pci = "0000:18:00.0";
    g.uuid = "GPU-2f4c0a1e-0000-0000-0000-000000000001";
    for (unsigned i = 0; i < 18; ++i) g.nvlinks.push_back({i, i != 3});
    g.ecc_enabled = true;
    g.health.temperature_slowdown_c = 87;
    g.health.power_limit_mw = 700000;
    g.health.row_remap_histogram = RowRemapHistogram{16380, 2, 0, 2, 0};
    g.health.ecc.push_back({EccLocation::total, 4, 0, 10, 0});
    GpuHealthSample first;
    first.clock_event_reasons = 0x1;
    first.temperature_c = 33;
    first.power_mw = 72400;
    first.pcie_replays = 2;
    g.health.samples.push_back(first);
    s.nvml.devices.push_back(g);
    IbDevice nic;
    nic.name = "mlx5_0";
    nic.pci = "0000:19:00.0";
    IbPort p;
    p.port = 1;
    p.state = "ACTIVE";
    p.phys_state = "LinkUp";
    p.rate = "400 Gb/sec (4X NDR)";
    p.rate_gbps = 400;
    p.link_layer = "InfiniBand";
    p.counters = {{"symbol_error", 0}, {"link_downed", 0}};
    nic.ports.push_back(p);
    s.infiniband.devices.push_back(nic);
    return s;
}

TEST(HealthText, OneLineOfNvmlAndOneOfAerAndTheNearestAdapterPerGpu) {
    std::string text = render_health_text(node());
    EXPECT_NE(text.find("  0000:18:00.0 GPU-2f4c0a1e-0000-0000-0000-000000000001: NVLink 17/18 up, clocks: idle, 33 °C "
                        "(slowdown 87 °C), 72 W of 700 W, PCIe replays 2, ECC since load: 0 uncorrected, 4 corrected, "
                        "row-remap banks: 2 low, 0 none of 16384\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("      AER (GPU and 3 ports to the root port): no errors; nearest adapter (same PCIe switch): "
                        "mlx5_0 port 1 ACTIVE/LinkUp 400 Gb/s, no link errors\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("  InfiniBand/RoCE: 1 adapter, 1 port, 1 active; no link errors\n"), std::string::npos) << text;
}

TEST(HealthText, GrowthOnAPortAndTwoSamplesShowBothReadings) {
    Snapshot s = node();
    s.pcie.devices[2].aer_correctable = {{"BadTLP", 1}, {"TOTAL_ERR_COR", 1}};
    AerCounters later;
    later.correctable = {{"BadTLP", 5}, {"TOTAL_ERR_COR", 5}};
    s.pcie.devices[2].aer_later = later;
    auto& h = s.nvml.devices[0].health;
    GpuHealthSample second = h.samples[0];
    second.after_ms = 1000;
    second.temperature_c = 35;
    h.samples.push_back(second);
    s.infiniband.devices[0].ports[0].counters["symbol_error"] = 12;
    s.infiniband.devices[0].ports[0].counters_later = {{"symbol_error", 40}, {"link_downed", 0}};
    std::string text = render_health_text(s);
    EXPECT_NE(text.find("33 -> 35 °C (slowdown 87 °C)"), std::string::npos) << text;
    EXPECT_NE(text.find("AER (GPU and 3 ports to the root port): switch port 0000:17:00.0 1 -> 5 correctable;"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("mlx5_0 port 1 ACTIVE/LinkUp 400 Gb/s, link errors symbol_error 12 -> 40"), std::string::npos)
        << text;
    EXPECT_NE(text.find("; link errors: mlx5_0 port 1 symbol_error 12 -> 40"), std::string::npos) << text;
}

TEST(HealthText, WhatWasNotReadIsSaidNeverShownAsZero) {
    Snapshot s = node();
    for (auto& d : s.pcie.devices) d.aer_correctable.clear(), d.aer_fatal.clear();
    s.nvml.devices.clear();
    s.collectors[2] = {"nvml", CollectorState::no_data, "--no-driver: NVML not loaded"};
    s.infiniband.devices[0].ports[0].counters.clear();
    s.infiniband.devices[0].ports[0].counters_unread = "no counters/ directory";
    std::string text = render_health_text(s);
    EXPECT_NE(text.find("0000:18:00.0 UUID unknown: NVML not read: --no-driver: NVML not loaded\n"), std::string::npos)
        << text;
    EXPECT_NE(text.find("AER: not offered (GPU and 3 ports to the root port: no aer_dev_* files)"), std::string::npos)
        << text;
    EXPECT_NE(text.find("link errors not read"), std::string::npos) << text;
    EXPECT_NE(text.find("counters not read: mlx5_0 port 1"), std::string::npos) << text;
    EXPECT_EQ(text.find(" 0 uncorrected"), std::string::npos) << text;
}

TEST(HealthText, NothingForANodeWithoutGpusOrAdapters) {
    EXPECT_EQ(render_health_text(Snapshot{}), "");
}

}  // namespace
}  // namespace GPUDX_UNITY_ID
