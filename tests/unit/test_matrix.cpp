#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../fleet/h200x2_snapshot.hpp"
#include "rules/comparisons/baseline.hpp"
#include "rules/comparisons/matrix.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
using namespace gpudx::testdata;

namespace {

const std::string kExample = std::string(GPUDX_TEST_SOURCE_DIR) + "/../examples/matrix.toml";
const CalendarDate kToday{2026, 6, 1};

// A small valid matrix; tests splice errors into it at known lines.
const std::string kSmall = R"(schema_version = 1

[[class]]
name = "h200x2"
owner = "ops@example.com"
review_by = 2027-01-31

[class.match]
gpu_model = "NVIDIA H200*"
gpu_count = 2
hostname = ["gpu-*", "vm"]

[class.tested]
driver_branches = ["580"]
driver_versions = ["580.159.04"]
kernels = ["6.18.44-*"]
vbios = ["96.00.a5.00.1a"]
cuda = ["13.0"]

[class.accept]
h2d_gbps = 48
d2h_gbps = 48.5
p2p_gbps = 335
d2d_gbps = 3500
memory_min_fraction = 0.85
pairs = "all"
)";

Matrix small() {
    auto m = parse_matrix(kSmall, "small.toml");
    EXPECT_TRUE(m) << m.error().message;
    return *m;
}

std::vector<std::string> ids(const MatrixCheck& c) {
    std::vector<std::string> out;
    for (auto& f : c.findings) out.push_back(f.id);
    return out;
}

std::string error_of(const std::string& toml) {
    auto m = parse_matrix(toml, "m.toml");
    EXPECT_FALSE(m) << "parsed although it should not:\n" << toml;
    return m ? std::string() : m.error().message;
}

struct CliRun {
    int status = -1;
    std::string out;
};
CliRun cli(const std::string& args) {
    CliRun r;
    FILE* p = ::popen((std::string(GPUDX_BINARY) + " " + args + " 2>&1").c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    int st = ::pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

std::filesystem::path scratch(const std::string& name) {
    auto p = std::filesystem::temp_directory_path() / ("gpudx-test-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p;
}

}  // namespace

TEST(MatrixParse, ExampleFileLoads) {
    auto m = load_matrix(kExample);
    ASSERT_TRUE(m) << m.error().message;
    ASSERT_EQ(m->classes.size(), 2u);
    auto& c = m->classes[0];
    EXPECT_EQ(c.name, "h200x2");
    EXPECT_EQ(c.owner, "gpu-platform@example.com");
    EXPECT_EQ(c.review_by, (CalendarDate{2027, 6, 30}));
    EXPECT_EQ(c.match.gpu_count, 2u);
    EXPECT_EQ(c.tested.driver_versions, std::vector<std::string>{"580.159.04"});
    EXPECT_EQ(c.tested.vbios, std::vector<std::string>{"96.00.a5.00.1a"});
    ASSERT_TRUE(c.accept);
    EXPECT_EQ(c.accept->min_h2d_gbps, 48.0);
    EXPECT_EQ(c.accept->min_p2p_gbps, 335.0);
    EXPECT_EQ(c.accept->min_memory_fraction, 0.85);
    EXPECT_EQ(m->classes[1].review_by, (CalendarDate{2026, 12, 31}));  // written as a string
    EXPECT_EQ(m->classes[1].match.hostnames, std::vector<std::string>{"h100-*"});
}

TEST(MatrixParse, SmallMatrixValues) {
    auto m = small();
    ASSERT_EQ(m.classes.size(), 1u);
    EXPECT_EQ(m.classes[0].line, 3u);
    EXPECT_EQ(m.classes[0].accept->min_d2h_gbps, 48.5);
    EXPECT_EQ(m.classes[0].accept->min_h2d_gbps, 48.0);  // an integer is a number too
    EXPECT_EQ(m.classes[0].accept->pairs, "all");
}

TEST(MatrixParse, SyntaxErrorNamesFileAndLine) {
    std::string bad = kSmall;
    bad.replace(bad.find("gpu_count = 2"), 13, "gpu_count = = 2");  // line 10
    auto e = error_of(bad);
    EXPECT_EQ(e.rfind("m.toml:10:", 0), 0u) << e;
}

TEST(MatrixParse, UnknownKeyIsAnErrorWithItsLine) {
    std::string bad = kSmall;
    bad.replace(bad.find("driver_versions"), 15, "drivr_versions");  // line 15
    auto e = error_of(bad);
    EXPECT_EQ(e.rfind("m.toml:15:", 0), 0u) << e;
    EXPECT_NE(e.find("unknown key 'drivr_versions' in class 'h200x2' tested"), std::string::npos) << e;
    EXPECT_NE(e.find("driver_versions"), std::string::npos) << e;  // the allowed keys are listed

    e = error_of("colour = 1\n" + kSmall);
    EXPECT_EQ(e.rfind("m.toml:1:", 0), 0u) << e;
    EXPECT_NE(e.find("unknown key 'colour' in the top level"), std::string::npos) << e;

    bad = kSmall;
    bad.insert(bad.find("review_by"), "ownr = \"x\"\n");  // line 6
    e = error_of(bad);
    EXPECT_EQ(e.rfind("m.toml:6:", 0), 0u) << e;
    EXPECT_NE(e.find("unknown key 'ownr' in [[class]]"), std::string::npos) << e;

    bad = kSmall + "h2d = 50\n";  // inside [class.accept], line 27
    e = error_of(bad);
    EXPECT_EQ(e.rfind("m.toml:27:", 0), 0u) << e;
}

TEST(MatrixParse, WrongTypesAndMissingKeys) {
    std::string bad = kSmall;
    bad.replace(bad.find("gpu_count = 2"), 13, "gpu_count = \"two\"");
    auto e = error_of(bad);
    EXPECT_EQ(e.rfind("m.toml:10:", 0), 0u) << e;
    EXPECT_NE(e.find("gpu_count must be a positive integer"), std::string::npos) << e;

    bad = kSmall;
    bad.replace(bad.find("owner = \"ops@example.com\"\n"), 26, "");
    e = error_of(bad);
    EXPECT_EQ(e.rfind("m.toml:3:", 0), 0u) << e;
    EXPECT_NE(e.find("has no 'owner'"), std::string::npos) << e;

    bad = kSmall;
    bad.replace(bad.find("review_by = 2027-01-31"), 22, "review_by = \"soon\"");
    e = error_of(bad);
    EXPECT_NE(e.find("review_by 'soon' is not a date"), std::string::npos) << e;

    bad = kSmall;
    bad.replace(bad.find("kernels = [\"6.18.44-*\"]"), 23, "kernels = [6]");
    e = error_of(bad);
    EXPECT_EQ(e.rfind("m.toml:16:", 0), 0u) << e;
    EXPECT_NE(e.find("every entry of kernels must be a string"), std::string::npos) << e;

    bad = kSmall;
    bad.replace(bad.find("memory_min_fraction = 0.85"), 26, "memory_min_fraction = 85");
    e = error_of(bad);
    EXPECT_NE(e.find("memory_min_fraction must be a number in (0, 1]"), std::string::npos) << e;

    e = error_of(kSmall + "\n[[class]]\nname = \"h200x2\"\nowner = \"x\"\nreview_by = 2027-01-01\n");
    EXPECT_NE(e.find("class 'h200x2' is defined twice"), std::string::npos) << e;
    EXPECT_EQ(e.rfind("m.toml:28:", 0), 0u) << e;

    e = error_of("schema_version = 1\n");
    EXPECT_NE(e.find("no node classes"), std::string::npos) << e;
    e = error_of("[class]\nname = \"x\"\n");
    EXPECT_NE(e.find("must be an array of tables"), std::string::npos) << e;
    e = error_of("schema_version = 2\n" + kSmall.substr(kSmall.find("[[class]]")));
    EXPECT_NE(e.find("newer"), std::string::npos) << e;
}

TEST(MatrixParse, MissingFileNamesIt) {
    auto m = load_matrix("/nonexistent/matrix.toml");
    ASSERT_FALSE(m);
    EXPECT_NE(m.error().message.find("/nonexistent/matrix.toml"), std::string::npos);
}

TEST(MatrixDates, ParseAndOrder) {
    EXPECT_EQ(CalendarDate::parse("2026-06-30"), (CalendarDate{2026, 6, 30}));
    EXPECT_FALSE(CalendarDate::parse("2026-13-01"));
    EXPECT_FALSE(CalendarDate::parse("30.06.2026"));
    EXPECT_LT((CalendarDate{2026, 5, 31}), (CalendarDate{2026, 6, 1}));
    EXPECT_EQ((CalendarDate{2026, 6, 1}).str(), "2026-06-01");
}

TEST(MatrixGlobs, CaseInsensitiveShellPatterns) {
    EXPECT_TRUE(matches_any({"580.*"}, "580.159.04"));
    EXPECT_FALSE(matches_any({"580.*"}, "570.172.08"));
    EXPECT_TRUE(matches_any({"96.00.a5.00.1a"}, "96.00.A5.00.1A"));
    EXPECT_TRUE(matches_any({"gpu-a*", "vm"}, "vm"));
    EXPECT_FALSE(matches_any({}, "anything"));
}

TEST(MatrixCheck, CapturedNodeConformsToItsClass) {
    auto m = small();
    auto c = check_against_matrix(m, h200x2_snapshot(), kToday);
    ASSERT_NE(c.node_class, nullptr);
    EXPECT_EQ(c.node_class->name, "h200x2");
    EXPECT_TRUE(c.findings.empty()) << ids(c).front();
    EXPECT_EQ(c.exit_code, 0);
}

TEST(MatrixCheck, ReviewPastItsDateWarns) {
    auto m = small();
    auto c = check_against_matrix(m, h200x2_snapshot(), CalendarDate{2027, 2, 1});
    ASSERT_EQ(ids(c), std::vector<std::string>{"matrix.review_overdue"});
    EXPECT_NE(c.findings[0].message.find("2027-01-31"), std::string::npos);
    EXPECT_NE(c.findings[0].message.find("ops@example.com"), std::string::npos);
    EXPECT_EQ(c.exit_code, 2);
}

TEST(MatrixCheck, UntestedDriverBranchAndVersion) {
    auto m = small();
    auto s = h200x2_snapshot();
    s.module.nvidia_driver_version = "580.126.09";
    auto c = check_against_matrix(m, s, kToday);
    ASSERT_EQ(ids(c), std::vector<std::string>{"matrix.driver_untested"});
    EXPECT_NE(c.findings[0].message.find("Driver version 580.126.09 is not in the tested set"), std::string::npos)
        << c.findings[0].message;
    s.module.nvidia_driver_version = "570.172.08";
    c = check_against_matrix(m, s, kToday);
    ASSERT_EQ(ids(c), std::vector<std::string>{"matrix.driver_untested"});  // the branch; not the version again
    EXPECT_NE(c.findings[0].message.find("Driver branch 570 is not in the tested set"), std::string::npos)
        << c.findings[0].message;
}

TEST(MatrixCheck, KernelCudaAndVbiosOutsideTheTestedSet) {
    auto m = small();
    auto s = h200x2_snapshot();
    s.host.kernel_release = "6.8.0-45-generic";
    s.cuda.driver_version = 12080;
    s.module.nvidia_gpus[1].vbios = "96.00.a5.00.19";
    auto c = check_against_matrix(m, s, kToday);
    auto got = ids(c);
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, (std::vector<std::string>{"matrix.cuda_untested", "matrix.kernel_untested",
                                             "matrix.vbios_untested"}));
    for (auto& f : c.findings)
        if (f.id == "matrix.vbios_untested") {
            ASSERT_EQ(f.subjects.size(), 1u);
            EXPECT_EQ(f.subjects[0].uuid, "GPU-40cd403d-66ba-4608-72b9-5be5031085dc");
            EXPECT_EQ(f.subjects[0].pci, "0000:00:07.0");
        }
    EXPECT_EQ(c.exit_code, 2);
}

TEST(MatrixCheck, FewerGpusThanTheClassIsAnError) {
    auto m = small();
    auto s = h200x2_snapshot();
    std::erase_if(s.module.nvidia_gpus, [](auto& g) { return g.address == kGpu1Pci; });
    std::erase_if(s.pcie.devices, [](auto& d) { return d.address == kGpu1Pci; });
    std::erase_if(s.pcie.gpus, [](auto& a) { return a == kGpu1Pci; });
    std::erase_if(s.nvml.devices, [](auto& d) { return d.pci == kGpu1Pci; });
    std::erase_if(s.cuda.caller.devices, [](auto& d) { return d.pci == kGpu1Pci; });
    auto c = check_against_matrix(m, s, kToday);
    ASSERT_NE(c.node_class, nullptr);
    EXPECT_EQ(c.node_class->name, "h200x2");
    ASSERT_EQ(ids(c), std::vector<std::string>{"matrix.gpu_count"});
    EXPECT_EQ(c.findings[0].severity, Severity::error);
    EXPECT_EQ(c.findings[0].message, "1 GPU(s) found, class 'h200x2' has 2");
    EXPECT_EQ(c.exit_code, 1);
}

TEST(MatrixCheck, NodeNoClassFits) {
    auto m = small();
    auto s = h200x2_snapshot();
    s.host.hostname = "lab-0007";
    auto c = check_against_matrix(m, s, kToday);
    EXPECT_EQ(c.node_class, nullptr);
    ASSERT_EQ(ids(c), std::vector<std::string>{"matrix.no_class"});
    EXPECT_EQ(c.exit_code, 2);
}

TEST(MatrixCheck, OtherModelInANodeOfTheClassIsAnError) {
    auto m = small();
    auto s = h200x2_snapshot();
    s.host.hostname = "gpu-a017";
    for (auto& g : s.module.nvidia_gpus) g.model = "NVIDIA H100 80GB HBM3";
    auto c = check_against_matrix(m, s, kToday);
    ASSERT_NE(c.node_class, nullptr);
    EXPECT_EQ(c.node_class->name, "h200x2");
    ASSERT_EQ(ids(c), std::vector<std::string>{"matrix.gpu_model"});
    EXPECT_EQ(c.findings[0].subjects.size(), 2u);
    EXPECT_EQ(c.exit_code, 1);
}

TEST(MatrixCheck, GpuCountChoosesBetweenClassesOfOneModel) {
    auto m = parse_matrix(R"(
[[class]]
name = "x2"
owner = "o"
review_by = 2030-01-01
match = { gpu_model = "NVIDIA H200", gpu_count = 2 }

[[class]]
name = "x8"
owner = "o"
review_by = 2030-01-01
match = { gpu_model = "NVIDIA H200", gpu_count = 8 }
)",
                          "count.toml");
    ASSERT_TRUE(m) << m.error().message;
    auto node = make_node_record(h200x2_snapshot());
    EXPECT_EQ(classify_node(*m, node).node_class->name, "x2");
    auto eight = node;
    while (eight.gpus.size() < 8) eight.gpus.push_back(node.gpus[0]);
    EXPECT_EQ(classify_node(*m, eight).node_class->name, "x8");
    auto seven = eight;
    seven.gpus.pop_back();
    auto cls = classify_node(*m, seven);
    EXPECT_EQ(cls.node_class->name, "x8");  // an 8-GPU node that lost one, not a bigger 2-GPU node
    EXPECT_EQ(cls.also_fitting, std::vector<std::string>{"x2"});
}

TEST(MatrixCheck, ConstrainedValueTheSnapshotLacksIsOnlyInfo) {
    auto m = parse_matrix(R"(
[[class]]
name = "nvswitch"
owner = "o"
review_by = 2030-01-01
tested = { fabric_manager = ["580.159.04"] }
)",
                          "fm.toml");
    ASSERT_TRUE(m) << m.error().message;
    auto c = check_against_matrix(*m, h200x2_snapshot(), kToday);
    ASSERT_EQ(ids(c), std::vector<std::string>{"matrix.value_unknown"});
    EXPECT_EQ(c.findings[0].severity, Severity::info);
    EXPECT_EQ(c.exit_code, 0);
}

TEST(MatrixThresholds, ForTheNodesClass) {
    auto m = load_matrix(kExample);
    ASSERT_TRUE(m);
    auto t = thresholds_for(*m, h200x2_snapshot());
    ASSERT_TRUE(t);
    EXPECT_EQ(t->min_h2d_gbps, 48.0);
    EXPECT_EQ(t->min_d2h_gbps, 48.0);
    EXPECT_EQ(t->min_p2p_gbps, 335.0);
    EXPECT_EQ(t->min_d2d_gbps, 3500.0);
    EXPECT_EQ(t->min_memory_fraction, 0.85);
    auto s = h200x2_snapshot();
    s.host.hostname = "lab-0001";
    EXPECT_FALSE(thresholds_for(*m, s));
}

TEST(MatrixCli, ExitCodesAndErrorMessages) {
    auto dir = scratch("matrix-cli");
    std::ofstream(dir / "snap.json") << snapshot_to_json(h200x2_snapshot()).dump();
    std::ofstream(dir / "good.toml") << kSmall;
    std::string bad = kSmall;
    bad.replace(bad.find("kernels"), 7, "kernel");  // line 16
    std::ofstream(dir / "unknown.toml") << bad;
    std::ofstream(dir / "syntax.toml") << "[[class]]\nname = \"x\n";

    auto ok = cli("matrix check --today 2026-06-01 --matrix " + (dir / "good.toml").string() + " --from " +
                  (dir / "snap.json").string());
    EXPECT_EQ(ok.status, 0) << ok.out;
    EXPECT_NE(ok.out.find("Class: h200x2"), std::string::npos) << ok.out;

    auto late = cli("matrix check --today 2027-02-01 --matrix " + (dir / "good.toml").string() + " --from " +
                    (dir / "snap.json").string() + " --format json");
    EXPECT_EQ(late.status, 2) << late.out;
    EXPECT_NE(late.out.find("\"matrix.review_overdue\""), std::string::npos) << late.out;

    auto unknown = cli("matrix check --matrix " + (dir / "unknown.toml").string() + " --from " +
                       (dir / "snap.json").string());
    EXPECT_EQ(unknown.status, 64) << unknown.out;
    EXPECT_NE(unknown.out.find((dir / "unknown.toml").string() + ":16: unknown key 'kernel'"), std::string::npos)
        << unknown.out;

    auto syntax = cli("matrix validate --matrix " + (dir / "syntax.toml").string());
    EXPECT_EQ(syntax.status, 64) << syntax.out;
    EXPECT_NE(syntax.out.find((dir / "syntax.toml").string() + ":2:"), std::string::npos) << syntax.out;

    auto validate = cli("matrix validate --today 2026-06-01 --matrix " + (dir / "good.toml").string());
    EXPECT_EQ(validate.status, 0) << validate.out;
    EXPECT_NE(validate.out.find("h200x2"), std::string::npos);
    std::filesystem::remove_all(dir);
}

}  // namespace GPUDX_UNITY_ID
