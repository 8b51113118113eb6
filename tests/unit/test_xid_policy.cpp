#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "rules/check_context.hpp"
#include "rules/xid_policy.hpp"
#include "collect/collectors.hpp"
#include "core/root.hpp"
#include "test_support.hpp"

using namespace gpudx;

namespace gpudx {
void check_kernel_log(const CheckContext&, std::vector<Finding>&);
}

namespace {
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";
const std::string kGpu0Uuid = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";

using test::read_all;
using test::run_gpudx;
using test::scratch;
using test::write_file;

std::vector<Finding> kernel_log_findings(const Snapshot& s, const XidPolicy* policy = nullptr) {
    DiagnoseOptions o;
    o.xid_policy = policy;
    CheckContext ctx{s, o};
    std::vector<Finding> out;
    check_kernel_log(ctx, out);
    return out;
}

Snapshot h200_with_log(const std::string& log_path) {
    Root root(kH200);
    CollectOptions o;
    o.kernel_log_file = log_path;
    o.probe_driver = false;
    return take_snapshot(root, o);
}
}  // namespace

TEST(XidPolicy, BuiltinTextIsTheDataFile) {
    std::string data = read_all(std::string(GPUDX_TEST_SOURCE_DIR) + "/../data/xid-policy.toml");
    ASSERT_FALSE(data.empty());
    EXPECT_EQ(std::string(builtin_xid_policy_text()), data)
        << "src/rules/xid_policy.cpp's kBuiltinPolicy must be a copy of data/xid-policy.toml";
    EXPECT_TRUE(parse_xid_policy(data, "data/xid-policy.toml"));
}

TEST(XidPolicy, BuiltinSeverities) {
    const XidPolicy& p = builtin_xid_policy();
    EXPECT_EQ(p.version, "2026.11.1");
    for (int code : {48, 74, 79, 95, 119, 120, 140})  // DCGM's fatal set: gpudx agrees
        EXPECT_EQ(p.rule(code).severity, Severity::error) << code;
    for (int code : {63, 92, 68, 94})  // the disputed codes: see docs/kernel-log.md
        EXPECT_EQ(p.rule(code).severity, Severity::warning) << code;
    EXPECT_EQ(p.rule(43).severity, Severity::info);
    EXPECT_EQ(p.rule(79).meaning, "GPU has fallen off the bus (it no longer answers on PCIe)");
    EXPECT_EQ(p.rule(79).origin, "built-in");
    EXPECT_FALSE(p.knows(4242));
    EXPECT_EQ(p.rule(4242).severity, Severity::warning);
    EXPECT_EQ(p.rule(4242).code, 0);
}

TEST(XidPolicy, SiteFileOverridesCodeByCode) {
    auto dir = scratch("xidpolicy");
    auto path = write_file(dir / "site.toml",
                           "version = \"site-3\"\n"
                           "[xid.63]\n"
                           "meaning = \"Row remap recorded\"\n"
                           "severity = \"error\"\n"
                           "action = \"Drain and reset during the maintenance window\"\n");
    auto p = load_xid_policy_file(path);
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_EQ(p->rule(63).severity, Severity::error);
    EXPECT_EQ(p->rule(63).origin, path);
    EXPECT_EQ(p->rule(79).severity, Severity::error);  // still the built-in rule
    EXPECT_EQ(p->rule(79).origin, "built-in");
    EXPECT_NE(p->version.find("site-3"), std::string::npos);
    EXPECT_NE(p->version.find("2026.11.1"), std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST(XidPolicy, SyntaxErrorNamesFileAndLine) {
    auto r = parse_xid_policy("version = \"1\"\n\n[xid.79\nseverity = \"error\"\n", "site.toml");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("site.toml:3"), std::string::npos) << r.error().message;
}

TEST(XidPolicy, UnknownKeysAreErrorsWithTheirLine) {
    auto r = parse_xid_policy("version = \"1\"\n[default]\nseverity = \"warning\"\naction = \"a\"\n"
                              "[xid.79]\nmeaning = \"m\"\nseverity = \"error\"\naction = \"a\"\ncolour = \"red\"\n",
                              "site.toml");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("site.toml:9"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("colour"), std::string::npos);
    auto top = parse_xid_policy("version = \"1\"\nseverity = \"error\"\n", "p.toml");
    ASSERT_FALSE(top);
    EXPECT_NE(top.error().message.find("p.toml:2"), std::string::npos) << top.error().message;
}

TEST(XidPolicy, BadValuesAreErrors) {
    auto sev = parse_xid_policy("version = \"1\"\n[default]\nseverity = \"warning\"\naction = \"a\"\n"
                                "[xid.79]\nmeaning = \"m\"\nseverity = \"fatal\"\naction = \"a\"\n",
                                "p.toml");
    ASSERT_FALSE(sev);
    EXPECT_NE(sev.error().message.find("p.toml:7"), std::string::npos) << sev.error().message;
    EXPECT_NE(sev.error().message.find("fatal"), std::string::npos);
    auto code = parse_xid_policy("version = \"1\"\n[default]\nseverity = \"warning\"\naction = \"a\"\n"
                                 "[xid.fallen]\nmeaning = \"m\"\nseverity = \"error\"\naction = \"a\"\n",
                                 "p.toml");
    ASSERT_FALSE(code);
    EXPECT_NE(code.error().message.find("positive number"), std::string::npos);
    auto no_version = parse_xid_policy("[default]\nseverity = \"warning\"\naction = \"a\"\n", "p.toml");
    ASSERT_FALSE(no_version);
    EXPECT_NE(no_version.error().message.find("version"), std::string::npos);
    auto missing = load_xid_policy_file("/nonexistent/policy.toml");
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("/nonexistent/policy.toml"), std::string::npos);
}

// ---- the rules, on the real capture with a log added --------------------------------------------

TEST(KernelLogRules, XidIsAttributedToItsGpuWithRepeatsCounted) {
    auto dir = scratch("kernlog-rules");
    auto log = write_file(dir / "dmesg.txt",
                          "[  100.000000] NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.\n"
                          "[  160.500000] NVRM: Xid (PCI:0000:00:06): 79, pid=1300, name=torchrun, GPU has fallen off the bus.\n"
                          "[  200.250000] NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.\n"
                          "[  200.250010] NVRM: GPU 0000:00:06.0: GPU has fallen off the bus.\n"
                          "[  300.000000] NVRM: Xid (PCI:0000:00:07): 63, pid=77, name=app, Row Remapper: New row marked\n");
    Snapshot s = h200_with_log(log);
    auto findings = kernel_log_findings(s);
    const Finding* x79 = nullptr;
    const Finding* x63 = nullptr;
    const Finding* fell = nullptr;
    for (auto& f : findings) {
        if (f.id == "kernel_log.xid" && f.message.starts_with("Xid 79")) x79 = &f;
        if (f.id == "kernel_log.xid" && f.message.starts_with("Xid 63")) x63 = &f;
        if (f.id == "kernel_log.fallen_off_bus") fell = &f;
    }
    ASSERT_TRUE(x79);
    EXPECT_EQ(x79->severity, Severity::error);
    EXPECT_EQ(x79->layer, Layer::kernel_log);
    ASSERT_EQ(x79->subjects.size(), 1u);
    EXPECT_EQ(x79->subjects[0].uuid, kGpu0Uuid);
    EXPECT_EQ(x79->subjects[0].pci, "0000:00:06.0");
    EXPECT_NE(x79->message.find("3 times, first at 100.000000 s after boot, last at 200.250000 s after boot"),
              std::string::npos)
        << x79->message;
    EXPECT_NE(x79->message.find("python3, torchrun"), std::string::npos);
    EXPECT_EQ(x79->evidence[0].source, log);
    ASSERT_TRUE(x63);
    EXPECT_EQ(x63->severity, Severity::warning);
    EXPECT_EQ(x63->subjects[0].pci, "0000:00:07.0");
    ASSERT_TRUE(fell);
    EXPECT_EQ(fell->severity, Severity::error);
    EXPECT_EQ(fell->subjects[0].uuid, kGpu0Uuid);

    // A site policy that makes 63 an error changes only that finding.
    auto site = load_xid_policy_file(
        write_file(dir / "site.toml", "version = \"s1\"\n[xid.63]\nmeaning = \"m\"\nseverity = \"error\"\naction = \"drain\"\n"));
    ASSERT_TRUE(site) << site.error().message;
    for (auto& f : kernel_log_findings(s, &*site))
        if (f.id == "kernel_log.xid" && f.message.starts_with("Xid 63")) {
            EXPECT_EQ(f.severity, Severity::error);
            EXPECT_EQ(f.next_step, "drain");
        }
    std::filesystem::remove_all(dir);
}

TEST(KernelLogRules, AerIommuAndSignatureRefusal) {
    auto dir = scratch("kernlog-rules2");
    auto log = write_file(dir / "dmesg.txt",
                          "[   12.000000] nvidia 0000:00:07.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)\n"
                          "[   13.000000] nvidia 0000:00:07.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n"
                          "[   14.000000] DMAR: [DMA Read NO_PASID] Request device [00:06.0] fault addr 0x7f5e3000 [fault reason 0x06] PTE Read access is not set\n"
                          "[   15.000000] Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7\n");
    Snapshot s = h200_with_log(log);
    std::map<std::string, const Finding*> by_id;
    auto findings = kernel_log_findings(s);
    for (auto& f : findings) by_id[f.id] = &f;
    ASSERT_TRUE(by_id.count("kernel_log.aer_uncorrected"));
    EXPECT_EQ(by_id["kernel_log.aer_uncorrected"]->severity, Severity::error);
    EXPECT_EQ(by_id["kernel_log.aer_uncorrected"]->subjects[0].pci, "0000:00:07.0");
    ASSERT_TRUE(by_id.count("kernel_log.aer_corrected"));
    EXPECT_EQ(by_id["kernel_log.aer_corrected"]->severity, Severity::warning);
    ASSERT_TRUE(by_id.count("kernel_log.iommu_fault"));
    EXPECT_EQ(by_id["kernel_log.iommu_fault"]->severity, Severity::error);  // a GPU's DMA was blocked
    EXPECT_EQ(by_id["kernel_log.iommu_fault"]->subjects[0].uuid, kGpu0Uuid);
    ASSERT_TRUE(by_id.count("module.signature_refused"));
    EXPECT_EQ(by_id["module.signature_refused"]->layer, Layer::module);
    std::filesystem::remove_all(dir);
}

TEST(KernelLogRules, TheRealCaptureHasNoKernelLogFindings) {
    Root root(kH200);
    CollectOptions o;
    o.probe_driver = false;
    Snapshot s = take_snapshot(root, o);
    EXPECT_TRUE(kernel_log_findings(s).empty());
}

// ---- gpudx xid ------------------------------------------------------------------------------------

TEST(XidCommand, ExplainsKnownAndUnknownCodes) {
    auto [rc, out] = run_gpudx("xid 79");
    EXPECT_EQ(rc, 0);
    EXPECT_NE(out.find("Xid 79: GPU has fallen off the bus"), std::string::npos) << out;
    EXPECT_NE(out.find("severity: error"), std::string::npos);
    EXPECT_NE(out.find("2026.11.1"), std::string::npos);
    auto [rc2, out2] = run_gpudx("xid 4242");
    EXPECT_EQ(rc2, 0);
    EXPECT_NE(out2.find("unknown to this policy"), std::string::npos) << out2;
    EXPECT_NE(out2.find("default treatment: warning"), std::string::npos);
    auto [rc3, out3] = run_gpudx("xid --list");
    EXPECT_EQ(rc3, 0);
    EXPECT_NE(out3.find("   94  warning"), std::string::npos) << out3;
    auto dir = scratch("xidcmd");
    auto bad = write_file(dir / "bad.toml", "version = \"1\"\n[xid.79]\nseverity = \n");
    auto [rc4, out4] = run_gpudx("xid 79 --xid-policy " + bad);
    EXPECT_EQ(rc4, 64);
    EXPECT_NE(out4.find(bad + ":3"), std::string::npos) << out4;
    std::filesystem::remove_all(dir);
}
