#include <gtest/gtest.h>

#include "../fleet/h200x2_snapshot.hpp"
#include "core/text.hpp"
#include "render/formats.hpp"
#include "rules/comparisons/baseline.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {
Diagnosis diagnosis_with(std::vector<Finding> findings) {
    Snapshot s;
    s.collectors.push_back({"pcie", CollectorState::ok, {}, {}, 1.0, {}});
    // Diagnose runs the rule families; build the diagnosis by hand instead to test the renderers alone.
    Diagnosis d;
    d.findings = std::move(findings);
    bool err = false, warn = false;
    for (auto& f : d.findings) {
        err |= f.severity == Severity::error;
        warn |= f.severity == Severity::warning;
    }
    d.exit_code = err ? kExitErrors : warn ? kExitWarnings : kExitHealthy;
    d.verdict = err ? Verdict::unhealthy : warn ? Verdict::degraded : Verdict::healthy;
    for (auto l : kAllLayers) d.layers.push_back({l, LayerState::ok, {}, true, 0, 0});
    return d;
}
const GpuRef kGpu0{"GPU-992cb470-9027-88f4-48a9-a9a329d6978d", "0000:00:06.0"};
}  // namespace

TEST(Formats, PrometheusLabelsAreEscaped) {
    EXPECT_EQ(escape_prometheus_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}

TEST(Formats, PrometheusHasOneSeriesPerFindingAndGpu) {
    auto d = diagnosis_with({{"kernel_log.xid", Layer::kernel_log, Severity::error, {kGpu0}, "Xid 79", {}, {}}});
    Snapshot s;
    s.collectors.push_back({"pcie", CollectorState::ok, {}, {}, 1.5, {}});
    auto text = render_prometheus(s, d, {.node = make_node_record(s)});
    EXPECT_NE(text.find("gpudx_finding{id=\"kernel_log.xid\",layer=\"kernel_log\",severity=\"error\","
                        "uuid=\"GPU-992cb470-9027-88f4-48a9-a9a329d6978d\",pci=\"0000:00:06.0\"} 1\n"),
              std::string::npos);
    EXPECT_NE(text.find("gpudx_collector_duration_seconds{collector=\"pcie\"} 0.001500\n"), std::string::npos);
    EXPECT_NE(text.find("gpudx_layer_status{layer=\"pcie\",state=\"ok\"} 1\n"), std::string::npos);
    EXPECT_NE(text.find("gpudx_layer_status{layer=\"pcie\",state=\"failed\"} 0\n"), std::string::npos);
}

TEST(Formats, SlurmReasonNamesCheckUuidAndAddressWithin80Characters) {
    auto d = diagnosis_with({{"pcie.link_degraded", Layer::pcie, Severity::warning, {kGpu0}, "x", {}, {}},
                             {"kernel_log.xid_fallen_off_bus", Layer::kernel_log, Severity::error, {kGpu0}, "y", {}, {}}});
    std::stable_sort(d.findings.begin(), d.findings.end(),
                     [](auto& a, auto& b) { return a.severity > b.severity; });
    auto r = slurm_reason(d).value().format();
    EXPECT_LE(r.size(), 80u);
    EXPECT_NE(r.find("kernel_log.xid_fallen_off_bus"), std::string::npos) << r;
    EXPECT_NE(r.find("0000:00:06.0"), std::string::npos) << r;
    EXPECT_NE(r.find("GPU-992cb470"), std::string::npos) << r;
    EXPECT_FALSE(slurm_reason(diagnosis_with({})));
}

TEST(Formats, NodeProblemDetectorAndNagiosExitCodes) {
    auto healthy = diagnosis_with({});
    EXPECT_EQ(node_problem_detector(healthy).exit_code, 0);
    auto bad = diagnosis_with({{"module.not_loaded", Layer::module, Severity::error, {kGpu0}, std::string(200, 'x'), {}, {}}});
    auto npd = node_problem_detector(bad);
    EXPECT_EQ(npd.exit_code, 1);
    EXPECT_LE(npd.message.size(), 80u);
    Snapshot s;
    EXPECT_EQ(nagios(s, bad).exit_code, 2);
    EXPECT_EQ(nagios(s, healthy).exit_code, 0);
    auto warn = diagnosis_with({{"driver.persistence_off", Layer::driver, Severity::warning, {kGpu0}, "off", {}, {}}});
    EXPECT_EQ(nagios(s, warn).exit_code, 1);
    EXPECT_EQ(nagios(s, warn).message.rfind("GPUDX WARNING - ", 0), 0u);
}

TEST(Formats, FitCutsOnUtf8Boundary) {
    EXPECT_EQ(fit("short", 80), "short");
    auto r = fit(std::string(78, 'a') + "\xC3\xA9\xC3\xA9", 80);
    EXPECT_LE(r.size(), 80u);
    EXPECT_EQ(r.substr(r.size() - 3), "\xE2\x80\xA6");
}

TEST(Formats, SlurmReasonIsPrefixedAsciiAndAtMost80Bytes) {
    auto one = diagnosis_with({{"pcie.fell_off_bus", Layer::pcie, Severity::error, {kGpu0}, "y", {}, {}}});
    auto r = slurm_reason(one).value().format();
    // Short enough to keep the whole UUID.
    EXPECT_EQ(r, "gpudx: pcie.fell_off_bus GPU-992cb470-9027-88f4-48a9-a9a329d6978d 0000:00:06.0");
    EXPECT_EQ(r.rfind(kSlurmReasonPrefix, 0), 0u);
    // Too long with "(+more)": the UUID keeps its first group, the address stays whole.
    auto two = diagnosis_with({{"pcie.fell_off_bus", Layer::pcie, Severity::error, {kGpu0}, "y", {}, {}},
                               {"module.not_loaded", Layer::module, Severity::error, {}, "z", {}, {}}});
    EXPECT_EQ(slurm_reason(two)->finding, "pcie.fell_off_bus");
    r = slurm_reason(two)->format();
    EXPECT_EQ(r, "gpudx: pcie.fell_off_bus GPU-992cb470 0000:00:06.0 (+more)");
    // A hostile or absurd id cannot push it past 80 bytes or out of ASCII.
    auto odd = diagnosis_with({{std::string(100, 'x') + "\xC3\xA9\n", Layer::pcie, Severity::error, {kGpu0}, "y", {}, {}}});
    r = slurm_reason(odd)->format();
    EXPECT_LE(r.size(), 80u);
    EXPECT_EQ(r.rfind("gpudx: xxx", 0), 0u);
    for (char c : r) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << r;
}

TEST(Formats, PrometheusWritesNoDuplicateSeries) {
    // node_exporter rejects the whole textfile over one duplicate series.
    auto d = diagnosis_with({{"kernel_log.xid", Layer::kernel_log, Severity::error, {kGpu0, kGpu0}, "Xid 79", {}, {}},
                             {"kernel_log.xid", Layer::kernel_log, Severity::error, {kGpu0}, "Xid 48", {}, {}}});
    auto text = render_prometheus(Snapshot{}, d, {});
    auto first = text.find("gpudx_finding{id=\"kernel_log.xid\"");
    ASSERT_NE(first, std::string::npos);
    EXPECT_EQ(text.find("gpudx_finding{id=\"kernel_log.xid\"", first + 1), std::string::npos) << text;
}

TEST(Formats, HostileLabelValuesStayInsideTheirSample) {
    GpuRef hostile{"GPU-\"} 1\nfake_metric{a=\"b\\", "0000:00:06.0"};
    auto d = diagnosis_with({{"devices.holder", Layer::devices, Severity::error, {hostile}, "x", {}, {}}});
    auto text = render_prometheus(Snapshot{}, d, {});
    EXPECT_EQ(text.find("\nfake_metric"), std::string::npos) << text;
    EXPECT_NE(text.find("uuid=\"GPU-\\\"} 1\\nfake_metric{a=\\\"b\\\\\",pci=\"0000:00:06.0\"} 1\n"), std::string::npos)
        << text;
    // Invalid UTF-8 is replaced, so the exposition stays valid UTF-8.
    EXPECT_EQ(escape_prometheus_label("a\xff" "b"), "a\xEF\xBF\xBD" "b");
}

TEST(Formats, NodeProblemDetectorMessageFitsIn80AndCountsWarnings) {
    auto warn = diagnosis_with({{"driver.persistence_off", Layer::driver, Severity::warning, {kGpu0}, "off", {}, {}},
                                {"pcie.info", Layer::pcie, Severity::info, {}, "i", {}, {}}});
    auto r = node_problem_detector(warn);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.message, "gpudx: degraded (1 warnings)");
    auto bad = diagnosis_with({{"pcie.fell_off_bus", Layer::pcie, Severity::error, {kGpu0},
                                "0000:00:06.0 reads all ones: the GPU fell off the bus\nsecond line", {}, {}}});
    r = node_problem_detector(bad);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_LE(r.message.size(), 80u);
    EXPECT_EQ(r.message.find('\n'), std::string::npos);
}

TEST(Formats, NodeProblemDetectorShortensTheUuidBeforeTheMessage) {
    auto bad = diagnosis_with({{"pcie.fell_off_bus", Layer::pcie, Severity::error, {kGpu0}, "config space reads all ones", {}, {}}});
    EXPECT_EQ(node_problem_detector(bad).message, "pcie.fell_off_bus GPU-992cb470 0000:00:06.0: config space reads all ones");
}

TEST(Formats, PrometheusInfoMetricsNameTheNodeAndEachGpu) {
    auto s = testdata::h200x2_snapshot();
    ModuleFile ko;
    ko.name = "nvidia";
    ko.path = "/lib/modules/6.18.44-fc-v657-gpu/kernel/drivers/video/nvidia.ko";
    ko.version = "580.159.04";
    s.module.files.push_back(ko);
    auto text = render_prometheus(s, diagnosis_with({}), {.node = make_node_record(s), .node_class = "h200x2"});
    EXPECT_NE(text.find("# TYPE gpudx_node_info gauge\n"), std::string::npos) << text;
    EXPECT_NE(text.find("gpudx_node_info{driver=\"580.159.04\",module=\"580.159.04\",kernel=\"6.18.44-fc-v657-gpu\","
                        "cuda=\"13.0\",class=\"h200x2\"} 1\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("gpudx_gpu_info{uuid=\"GPU-992cb470-9027-88f4-48a9-a9a329d6978d\",pci=\"0000:00:06.0\","
                        "slot=\"\",model=\"NVIDIA H200\",vbios=\"96.00.a5.00.1a\"} 1\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("gpudx_gpu_info{uuid=\"GPU-40cd403d-66ba-4608-72b9-5be5031085dc\",pci=\"0000:00:07.0\""),
              std::string::npos);
    // Without a matrix the class is empty (Prometheus treats it as absent), never guessed.
    EXPECT_NE(render_prometheus(s, diagnosis_with({}), {.node = make_node_record(s)}).find(",class=\"\"} 1\n"),
              std::string::npos);
}

TEST(Formats, PrometheusXidCounterCountsByCodeAndGpuFromTheTallies) {
    auto s = testdata::h200x2_snapshot();
    XidEvent kept;
    kept.pci = testdata::kGpu1Pci;
    kept.code = 79;
    s.kernel_log.xids.push_back(kept);  // capped: only one of the 250 events kept
    KernelLogTally storm;
    storm.kind = TallyKind::xid;
    storm.device = testdata::kGpu1Pci;
    storm.code = 79;
    storm.count = 250;
    s.kernel_log.tallies.push_back(storm);
    KernelLogTally aer;
    aer.kind = TallyKind::aer_corrected;
    aer.device = testdata::kGpu0Pci;
    aer.count = 3;
    s.kernel_log.tallies.push_back(aer);
    auto text = render_prometheus(s, diagnosis_with({}), {.node = make_node_record(s)});
    EXPECT_NE(text.find("# TYPE gpudx_xid_events_total counter\n"), std::string::npos) << text;
    EXPECT_NE(text.find("gpudx_xid_events_total{code=\"79\",pci=\"0000:00:07.0\"} 250\n"), std::string::npos) << text;
    EXPECT_EQ(text.find("gpudx_xid_events_total{code=\"0\""), std::string::npos) << text;  // not an Xid
    // An older snapshot without tallies: its kept events count.
    s.kernel_log.tallies.clear();
    EXPECT_NE(render_prometheus(s, diagnosis_with({}), {.node = make_node_record(s)})
                  .find("gpudx_xid_events_total{code=\"79\",pci=\"0000:00:07.0\"} 1\n"),
              std::string::npos);
}

}  // namespace GPUDX_UNITY_ID
