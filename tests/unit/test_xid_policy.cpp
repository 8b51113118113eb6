#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "rules/comparisons/baseline.hpp"
#include "rules/engine/check_context.hpp"
#include "rules/reference/recovery_action.hpp"
#include "rules/reference/xid_policy.hpp"
#include "collect/kernel_log_parse.hpp"
#include "collect/collectors.hpp"
#include "core/root.hpp"
#include "test_support.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

using namespace gpudx;

namespace gpudx {
void check_kernel_log(const CheckContext&, std::vector<Finding>&);
void check_driver(const CheckContext&, std::vector<Finding>&);
}

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

namespace {
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";
const std::string kGpu0Uuid = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
// Xids that both NVIDIA documents (the Ampere+ catalog and the older listing) call unused.
const std::set<int> kUnusedInBoth = {5, 10, 14, 15, 17, 23, 49, 50, 51, 52, 53, 55};

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

TEST(XidPolicy, BuiltinSeverities) {
    const XidPolicy& p = builtin_xid_policy();
    EXPECT_EQ(p.version, "2026.12.1");
    for (int code : {46, 48, 74, 79, 95, 119, 120, 140})  // DCGM's fatal set and RESET_GPU's 46: gpudx agrees
        EXPECT_EQ(p.rule(code).severity, Severity::error) << code;
    for (int code : {68, 94})  // the disputed codes: see docs/kernel-log.md
        EXPECT_EQ(p.rule(code).severity, Severity::warning) << code;
    for (int code : {43, 63, 92})  // NVIDIA's IGNORE (63, 92) and an application's own fault (43)
        EXPECT_EQ(p.rule(code).severity, Severity::info) << code;
    EXPECT_EQ(p.rule(79).meaning, "GPU has fallen off the bus (it no longer answers on PCIe)");
    EXPECT_EQ(p.rule(79).origin, "built-in");
    EXPECT_FALSE(p.knows(4242));
    EXPECT_EQ(p.rule(4242).severity, Severity::warning);
    EXPECT_EQ(p.rule(4242).code, 0);
    EXPECT_EQ(p.rule(46).immediate, "RESET_GPU");
    EXPECT_EQ(p.rule(46).mnemonic, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR");
    EXPECT_EQ(p.rule(136).immediate, "RESET_GPU");
    EXPECT_EQ(p.rule(151).immediate, "RESTART_VM");
    EXPECT_EQ(p.immediate_bucket(79)->recovery, "reboot");
    EXPECT_EQ(p.immediate_bucket(46)->recovery, "reset");
}

// Every row of NVIDIA's catalog (tests/fixtures/xid-catalog.tsv, NVIDIA's data as published) is in the policy with
// NVIDIA's words, and the rows the catalog marks Unused are not (they get the default).
TEST(XidPolicy, EveryCatalogRowIsParsedFromTheData) {
    std::string tsv = read_all(std::string(GPUDX_TEST_FIXTURES) + "/xid-catalog.tsv");
    ASSERT_FALSE(tsv.empty());
    EXPECT_NE(tsv.find("as of 2025-10-29"), std::string::npos) << "the catalog's date";
    EXPECT_NE(read_all(std::string(GPUDX_TEST_SOURCE_DIR) + "/../data/xid-policy.toml").find("2025-10-29"), std::string::npos)
        << "the policy cites the catalog's date";
    const XidPolicy& p = builtin_xid_policy();
    int in_use = 0, unused = 0, older = 0;
    std::istringstream lines(tsv);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::vector<std::string> f;
        size_t start = 0;
        for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1) f.push_back(line.substr(start, tab - start));
        f.push_back(line.substr(start));
        f.resize(5);
        int code = std::stoi(f[0]);
        if (f[2] == "Unused") {
            ++unused;
            // Unused from Ampere on: an entry from NVIDIA's older listing, for the GPUs before the catalog, or none
            // when the older listing calls it unused too.
            if (!p.knows(code)) {
                EXPECT_TRUE(kUnusedInBoth.count(code)) << code << " is defined in NVIDIA's older listing but has no entry";
                continue;
            }
            const XidRule& r = p.rule(code);
            EXPECT_EQ(r.mnemonic, f[1]) << code << ": NVIDIA's name for it";
            EXPECT_TRUE(r.immediate.empty()) << code << ": the catalog's bucket is for a code it calls Unused";
            EXPECT_FALSE(r.description.empty() || r.description == "Unused") << code << ": the older listing's words";
            EXPECT_FALSE(r.generations.empty()) << code;
            for (auto& g : r.generations)
                EXPECT_EQ(std::count(p.generations.begin(), p.generations.end(), g), 0)
                    << code << " is Unused from Ampere on, yet names " << g;
            EXPECT_FALSE(r.note.empty()) << code;
            ++older;
            continue;
        }
        ++in_use;
        ASSERT_TRUE(p.knows(code)) << code << " (" << f[1] << ") is in the catalog but not in the policy";
        const XidRule& r = p.rule(code);
        EXPECT_EQ(r.mnemonic, f[1]) << code;
        EXPECT_EQ(r.description, f[2]) << code;
        EXPECT_EQ(r.immediate, f[3]) << code;
        EXPECT_EQ(r.investigatory, f[4]) << code;
        EXPECT_FALSE(r.action.empty()) << code;
        EXPECT_EQ(r.generations, p.generations) << code << ": the catalog's scope (it has no per-code column)";
    }
    EXPECT_EQ(p.generations, (std::vector<std::string>{"Ampere", "Hopper", "Blackwell"}));
    EXPECT_EQ(in_use, 109);
    EXPECT_EQ(unused, 63);
    EXPECT_EQ(older, 51);
    EXPECT_EQ(p.rules.size(), 160u) << "a code neither NVIDIA document defines";
}

// Every Xid from 1 to 172 that NVIDIA defined has an entry; only the ones both documents call unused are left to
// [default], and the policy's header says which.
TEST(XidPolicy, EveryDefinedXidFrom1To172HasAnEntry) {
    const XidPolicy& p = builtin_xid_policy();
    std::string text = read_all(std::string(GPUDX_TEST_SOURCE_DIR) + "/../data/xid-policy.toml");
    std::string listed;
    for (int code = 1; code <= 172; ++code) {
        if (kUnusedInBoth.count(code)) {
            EXPECT_FALSE(p.knows(code)) << code;
            listed += (listed.empty() ? "" : ", ") + std::to_string(code);
            continue;
        }
        EXPECT_TRUE(p.knows(code)) << code;
    }
    EXPECT_NE(text.find("Codes \"Unused\" in both documents stay at [default] and have no entry: 5, 10, 14, 15, 17, 23, 49, "
                        "50, 51, 52,\n#    53, 55"),
              std::string::npos);
    // The codes V100, T4 and A10 fleets still log are known, with the older GPUs they apply to and their causes.
    for (int code : {61, 56, 57, 58, 65, 73, 81, 87, 90, 91, 108, 111, 118, 122, 125, 138}) {
        ASSERT_TRUE(p.knows(code)) << code;
        EXPECT_EQ(p.rule(code).generations.front(), "Kepler") << code;
    }
    EXPECT_EQ(p.rule(57).causes, (std::vector<std::string>{"hw", "driver", "fb"}));
    EXPECT_EQ(p.rule(57).severity, Severity::error);
    EXPECT_EQ(p.rule(57).description, "Error programming video memory interface");
    EXPECT_EQ(p.rule(1).causes, (std::vector<std::string>{"driver", "system_memory", "bus", "fb"}));
    EXPECT_TRUE(p.rule(61).causes.empty());
    EXPECT_TRUE(p.rule(79).causes.empty()) << "a catalog entry carries the catalog's fields only";
}

// NVIDIA's SXid catalogue (fabric manager guide): every code with NVIDIA's name and class; a fatal or always-fatal
// SXid is an error, a corrected single-bit ECC error is info.
TEST(XidPolicy, SxidCatalogueHasNvidiasNamesAndClasses) {
    const XidPolicy& p = builtin_xid_policy();
    EXPECT_EQ(p.sxids.size(), 93u);
    std::map<std::string, int> by_class;
    for (auto& [code, r] : p.sxids) {
        EXPECT_FALSE(r.name.empty()) << code;
        EXPECT_FALSE(r.action.empty()) << code;
        ++by_class[r.sxid_class];
        if (r.sxid_class != "non-fatal") EXPECT_EQ(r.severity, Severity::error) << code << " is " << r.sxid_class;
        if (r.name == "Single bit ECC errors") EXPECT_EQ(r.severity, Severity::info) << code;
    }
    EXPECT_EQ(by_class["non-fatal"], 30);
    EXPECT_EQ(by_class["fatal"], 42);
    EXPECT_EQ(by_class["always-fatal"], 21);
    EXPECT_EQ(p.sxid(20034).name, "LTSSM Fault Up");
    EXPECT_EQ(p.sxid(23001).sxid_class, "always-fatal");
    EXPECT_EQ(p.sxid(11004).severity, Severity::error);  // non-fatal in NVIDIA's guide, but the port stalls: its note
    EXPECT_FALSE(p.sxid(11004).note.empty());
}

TEST(XidPolicy, CausesAndClassesAreCheckedWithTheirLine) {
    const std::string head = "version = \"1\"\n[default]\nseverity = \"warning\"\naction = \"a\"\n";
    auto cause = parse_xid_policy(head + "[xid.57]\nmeaning = \"m\"\nseverity = \"error\"\naction = \"a\"\n"
                                         "causes = [\"hw\", \"cosmic_rays\"]\n",
                                  "p.toml");
    ASSERT_FALSE(cause);
    EXPECT_NE(cause.error().message.find("p.toml:9"), std::string::npos) << cause.error().message;
    EXPECT_NE(cause.error().message.find("cosmic_rays"), std::string::npos);
    auto cls = parse_xid_policy(head + "[sxid.20034]\nname = \"LTSSM Fault Up\"\nclass = \"deadly\"\nseverity = \"error\"\n"
                                       "action = \"a\"\n",
                                "p.toml");
    ASSERT_FALSE(cls);
    EXPECT_NE(cls.error().message.find("p.toml:7"), std::string::npos) << cls.error().message;
    EXPECT_NE(cls.error().message.find("deadly"), std::string::npos);
    // name and class belong to SXids, causes to Xids.
    auto misplaced = parse_xid_policy(head + "[xid.79]\nname = \"n\"\nseverity = \"error\"\naction = \"a\"\n", "p.toml");
    ASSERT_FALSE(misplaced);
    EXPECT_NE(misplaced.error().message.find("p.toml:6"), std::string::npos) << misplaced.error().message;
    auto sxid_causes = parse_xid_policy(head + "[sxid.1]\nmeaning = \"m\"\nseverity = \"error\"\naction = \"a\"\n"
                                               "causes = [\"hw\"]\n",
                                        "p.toml");
    ASSERT_FALSE(sxid_causes);
    auto ok = parse_xid_policy(head + "[sxid.20034]\nname = \"LTSSM Fault Up\"\nclass = \"fatal\"\nseverity = \"error\"\n"
                                      "action = \"a\"\n[xid.57]\ndescription = \"d\"\ncauses = [\"hw\", \"fb\"]\n"
                                      "severity = \"error\"\naction = \"a\"\n",
                               "p.toml");
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(ok->sxid(20034).meaning, "LTSSM Fault Up") << "the name when no meaning is given";
    EXPECT_EQ(ok->rule(57).causes, (std::vector<std::string>{"hw", "fb"}));
}

TEST(XidPolicy, SiteSxidEntryKeepsNvidiasNameAndClass) {
    auto dir = scratch("xidpolicy-sxid");
    auto path = write_file(dir / "site.toml",
                           "version = \"site-1\"\n[sxid.20034]\nmeaning = \"Link down\"\nseverity = \"warning\"\n"
                           "action = \"Page the fabric team\"\n");
    auto p = load_xid_policy_file(path);
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_EQ(p->sxid(20034).severity, Severity::warning);
    EXPECT_EQ(p->sxid(20034).name, "LTSSM Fault Up");
    EXPECT_EQ(p->sxid(20034).sxid_class, "fatal");
    std::filesystem::remove_all(dir);
}

// Where gpudx's severity is not the one the immediate bucket stands for, the data says why.
TEST(XidPolicy, ASeverityOtherThanTheBucketsHasANote) {
    const XidPolicy& p = builtin_xid_policy();
    int differing = 0;
    for (auto& [code, r] : p.rules) {
        const XidBucket* b = p.immediate_bucket(code);
        if (r.immediate.empty()) {
            EXPECT_FALSE(r.note.empty()) << code << ": NVIDIA gives no bucket, so the note says why gpudx chose "
                                         << to_string(r.severity);
            continue;
        }
        ASSERT_TRUE(b && b->implies) << code;
        if (*b->implies == r.severity) continue;
        ++differing;
        EXPECT_FALSE(r.note.empty()) << code << " is " << to_string(r.severity) << " though " << r.immediate
                                     << " implies " << to_string(*b->implies);
    }
    EXPECT_GT(differing, 0);
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
    EXPECT_NE(p->version.find("2026.12.1"), std::string::npos);
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
    auto generations = parse_xid_policy("version = \"1\"\ngenerations = [\"Hopper\"]\n[default]\nseverity = \"warning\"\n"
                                        "action = \"a\"\n[xid.79]\nmeaning = \"m\"\nseverity = \"error\"\naction = \"a\"\n"
                                        "generations = \"Hopper\"\n",
                                        "p.toml");
    ASSERT_FALSE(generations);
    EXPECT_NE(generations.error().message.find("p.toml:10"), std::string::npos) << generations.error().message;
    EXPECT_NE(generations.error().message.find("array of names"), std::string::npos);
    auto own = parse_xid_policy("version = \"1\"\ngenerations = [\"Hopper\"]\n[default]\nseverity = \"warning\"\n"
                                "action = \"a\"\n[xid.79]\nmnemonic = \"X\"\nmeaning = \"m\"\nseverity = \"error\"\n"
                                "action = \"a\"\n[xid.80]\nmnemonic = \"Y\"\nmeaning = \"m\"\nseverity = \"error\"\n"
                                "action = \"a\"\ngenerations = [\"Blackwell\"]\n",
                                "p.toml");
    ASSERT_TRUE(own) << own.error().message;
    EXPECT_EQ(own->rule(79).generations, std::vector<std::string>{"Hopper"});  // the policy's
    EXPECT_EQ(own->rule(80).generations, std::vector<std::string>{"Blackwell"});  // its own
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
    EXPECT_EQ(x63->severity, Severity::info);  // NVIDIA's IGNORE: the NVML remap-pending finding asks for the reset
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

// ---- site policies with buckets -------------------------------------------------------------------

TEST(XidPolicy, ASiteBucketNobodyDeclaredIsAnErrorWithFileAndLine) {
    auto dir = scratch("xidbucket");
    auto path = write_file(dir / "site.toml",
                           "version = \"site-4\"\n"
                           "[xid.46]\n"
                           "meaning = \"m\"\n"
                           "immediate = \"REBOOT_EVERYTHING\"\n"
                           "severity = \"error\"\n"
                           "action = \"a\"\n");
    auto p = load_xid_policy_file(path);
    ASSERT_FALSE(p);
    EXPECT_NE(p.error().message.find(path + ":4"), std::string::npos) << p.error().message;
    EXPECT_NE(p.error().message.find("REBOOT_EVERYTHING"), std::string::npos);
    auto inv = write_file(dir / "inv.toml",
                          "version = \"site-5\"\n[xid.46]\nmeaning = \"m\"\nseverity = \"error\"\naction = \"a\"\n"
                          "investigatory = \"CALL_SOMEONE\"\n");
    auto q = load_xid_policy_file(inv);
    ASSERT_FALSE(q);
    EXPECT_NE(q.error().message.find(inv + ":6"), std::string::npos) << q.error().message;
    // A bucket the site declares itself may be named, and a built-in bucket too.
    auto own = write_file(dir / "own.toml",
                          "version = \"site-6\"\n[bucket.DRAIN_RACK]\nmeaning = \"drain the rack\"\nimplies = \"error\"\n"
                          "[xid.46]\nmeaning = \"m\"\nimmediate = \"DRAIN_RACK\"\nseverity = \"error\"\naction = \"a\"\n"
                          "[xid.13]\nmeaning = \"m\"\nimmediate = \"IGNORE\"\nseverity = \"info\"\naction = \"a\"\n");
    auto r = load_xid_policy_file(own);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->rule(46).immediate, "DRAIN_RACK");
    EXPECT_EQ(r->rule(46).mnemonic, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR");  // NVIDIA's fields stay
    EXPECT_EQ(r->rule(13).immediate, "IGNORE");
    // A bad threshold names its line.
    auto bad = write_file(dir / "bad.toml", "version = \"s\"\n[xid.46]\nmeaning = \"m\"\nseverity = \"error\"\naction = \"a\"\nrepeats = -2\n");
    auto b = load_xid_policy_file(bad);
    ASSERT_FALSE(b);
    EXPECT_NE(b.error().message.find(bad + ":6"), std::string::npos) << b.error().message;
    std::filesystem::remove_all(dir);
}

TEST(XidPolicy, EscalationComesFromTheBucketAndTheCodeOverridesIt) {
    const XidPolicy& p = builtin_xid_policy();
    auto reset = p.escalation(46);
    ASSERT_TRUE(reset);
    EXPECT_EQ(reset->repeats, 2u);
    EXPECT_EQ(reset->within_s, 3600);
    EXPECT_NE(reset->action.find("CHECK_MECHANICALS"), std::string::npos);
    EXPECT_FALSE(p.escalation(13));   // an application's own fault repeats with the application
    EXPECT_FALSE(p.escalation(63));   // IGNORE never escalates by default
    EXPECT_FALSE(p.escalation(4242)); // unknown code
    auto sbe = p.escalation(92);      // IGNORE, but the code asks for it
    ASSERT_TRUE(sbe);
    EXPECT_EQ(sbe->repeats, 3u);
    EXPECT_EQ(sbe->severity, Severity::warning);
}

// ---- the kernel log: one example line per bucket, chains, Xid 154, repeats, SXids -----------------

namespace {
std::vector<Finding> findings_for_log(const std::string& name, const std::string& text, const XidPolicy* policy = nullptr) {
    auto dir = scratch(name);
    Snapshot s = h200_with_log(write_file(dir / "dmesg.txt", text));
    auto out = kernel_log_findings(s, policy);
    std::filesystem::remove_all(dir);
    return out;
}

std::vector<const Finding*> with_id(const std::vector<Finding>& fs, std::string_view id) {
    std::vector<const Finding*> out;
    for (auto& f : fs)
        if (f.id == id) out.push_back(&f);
    return out;
}

bool alarms(const std::vector<Finding>& fs) {
    return std::any_of(fs.begin(), fs.end(), [](auto& f) { return f.severity != Severity::info; });
}
}  // namespace

TEST(KernelLogRules, AnExampleLineForEachBucketGetsThePolicysSeverityAndNvidiasBuckets) {
    const XidPolicy& p = builtin_xid_policy();
    // code -> a line of it; one per immediate bucket the catalog uses.
    const std::vector<std::pair<int, std::string>> lines = {
        {13, "NVRM: Xid (PCI:0000:00:06): 13, pid=2121, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address"},  // RESTART_APP
        {46, "NVRM: Xid (PCI:0000:00:06): 46, pid=9, name=trainer"},                     // RESET_GPU
        {79, "NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus."},  // RESTART_BM
        {151, "NVRM: Xid (PCI:0000:00:06): 151, Key rotation Error"},                    // RESTART_VM
        {63, "NVRM: Xid (PCI:0000:00:06): 63, pid=77, name=app, Row Remapper: New row marked"},  // IGNORE
        {142, "NVRM: Xid (PCI:0000:00:06): 142, NVENC3 Error"},                          // CONTACT_SUPPORT
        {54, "NVRM: Xid (PCI:0000:00:06): 54, Auxiliary power is not connected to the GPU board"},  // CHECK_MECHANICALS
        {159, "NVRM: Xid (PCI:0000:00:06): 159, CHI Non-Data Error"},                    // CHECK_UVM
        {78, "NVRM: Xid (PCI:0000:00:06): 78, vGPU Start Error"},                        // UPDATE_SWFW
        {45, "NVRM: Xid (PCI:0000:00:06): 45, pid=1818990, name=python3, Ch 00000001"},  // WORKFLOW_XID_45
        {48, "NVRM: Xid (PCI:0000:00:06): 48, pid=7, name=app, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."},  // WORKFLOW_XID_48
        {74, "NVRM: Xid (PCI:0000:00:06): 74, pid=3, name=nccl, NVLink: fatal error detected on link 11"},  // WORKFLOW_NVLINK_ERR
        // A Fatal one: the driver's Nonfatal makes an NVLink 5 Xid a warning (AnNvlink5XidFindingNames...).
        {149, "NVRM: Xid (PCI:0000:00:06): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"},  // WORKFLOW_NVLINK5_ERR
        {154, "NVRM: Xid (PCI:0000:00:06): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"},  // XID_154
    };
    std::set<std::string> buckets;
    for (auto& [code, line] : lines) {
        auto fs = findings_for_log("bucket" + std::to_string(code), "[  100.000000] " + line + "\n");
        auto xids = with_id(fs, "kernel_log.xid");
        ASSERT_EQ(xids.size(), 1u) << line;
        const Finding& f = *xids[0];
        const XidRule& r = p.rule(code);
        buckets.insert(r.immediate);
        Severity expected = code == 154 ? Severity::error : r.severity;  // 154: the action it states
        EXPECT_EQ(f.severity, expected) << code;
        ASSERT_EQ(f.subjects.size(), 1u);
        EXPECT_EQ(f.subjects[0].uuid, kGpu0Uuid);
        bool catalog = std::any_of(f.evidence.begin(), f.evidence.end(), [&](auto& e) {
            return e.source == "NVIDIA Xid catalog" && e.value.find(r.immediate) != std::string::npos;
        });
        EXPECT_TRUE(catalog) << code << " carries NVIDIA's buckets";
        EXPECT_EQ(f.next_step.find("<UUID>"), std::string::npos) << "the UUID is filled in";
    }
    std::set<std::string> used;
    for (auto& [code, r] : p.rules)
        if (!r.immediate.empty()) used.insert(r.immediate);
    EXPECT_EQ(buckets, used) << "one example line per immediate bucket the catalog uses";
}

TEST(KernelLogRules, IgnoreBucketCodesDoNotAlarmAHealthyNode) {
    const XidPolicy& p = builtin_xid_policy();
    std::string log;
    int n = 0;
    for (auto& [code, r] : p.rules) {
        if (r.immediate != "IGNORE" || r.severity != Severity::info) continue;
        log += fmt::format("[  {}.000000] NVRM: Xid (PCI:0000:00:07): {}, {}\n", 100 + n++, code, r.description);
    }
    ASSERT_GT(n, 10);
    auto fs = findings_for_log("ignore", log);
    EXPECT_EQ(with_id(fs, "kernel_log.xid").size(), static_cast<size_t>(n));
    EXPECT_FALSE(alarms(fs)) << "an IGNORE-bucket Xid alone is info";
}

TEST(KernelLogRules, AnXidCausedByAnotherIsAttributedToIt) {
    auto fs = findings_for_log("chain",
                               "[  10.000000] NVRM: Xid (PCI:0000:00:06): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)\n"
                               "[  10.100000] NVRM: Xid (PCI:0000:00:06): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149\n");
    const Finding* x45 = nullptr;
    for (auto* f : with_id(fs, "kernel_log.xid"))
        if (f->message.starts_with("Xid 45")) x45 = f;
    ASSERT_TRUE(x45);
    EXPECT_EQ(x45->severity, Severity::info);
    EXPECT_NE(x45->message.find("caused by Xid 149"), std::string::npos) << x45->message;
    EXPECT_NE(x45->next_step.find("Xid 149"), std::string::npos);
    // The signature catalogue's finding carries 149's severity.
    auto chained = with_id(fs, "kernel_log.xid_caused_by");
    ASSERT_EQ(chained.size(), 1u);
    EXPECT_EQ(chained[0]->severity, Severity::error);
}

TEST(KernelLogRules, Xid154TakesTheSeverityOfTheActionItStates) {
    struct Case {
        std::string line;
        Severity severity;
        std::string says;
    };
    for (auto& c : {Case{"154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)", Severity::error, "GPU reset"},
                    Case{"154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", Severity::error, "node reboot"},
                    Case{"154, GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)", Severity::warning, "drain P2P"},
                    Case{"154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)", Severity::error, "drain and reset"},
                    Case{"154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)", Severity::info, "none"},
                    Case{"154, GPU recovery action changed", Severity::warning, "GPU recovery action changed"}}) {
        auto fs = findings_for_log("x154", "[  5.000000] NVRM: Xid (PCI:0000:00:07): " + c.line + "\n");
        auto xids = with_id(fs, "kernel_log.xid");
        ASSERT_EQ(xids.size(), 1u) << c.line;
        EXPECT_EQ(xids[0]->severity, c.severity) << c.line;
        EXPECT_NE(xids[0]->message.find(c.says), std::string::npos) << xids[0]->message;
    }
    auto stated = recovery_action_in_text("GPU recovery action changed to 0x2 (Node Reboot Required)");
    ASSERT_TRUE(stated);
    EXPECT_EQ(stated->value, 2u);
    EXPECT_EQ(stated->wording, "Node Reboot Required");
    EXPECT_FALSE(recovery_action_in_text("GPU recovery action changed"));
    EXPECT_EQ(recovery_action(9).severity, Severity::warning);  // a value gpudx does not know
}

// Escalation over a generated log: the same code on one GPU, spaced out, against the policy's threshold.
std::string repeated(int code, int pci_device, int count, double every_s, double start_s = 100) {
    std::string out;
    for (int i = 0; i < count; ++i)
        out += fmt::format("[{:12.6f}] NVRM: Xid (PCI:0000:00:{:02x}): {}, pid={}, name=python3\n", start_s + i * every_s,
                           pci_device, code, 4000 + i);
    return out;
}

// A storm on one GPU pushes an earlier GPU's repeats out of the kept events (the newest 10,000); the tallies still
// count them, and escalation reads them: GPU 0000:00:06.0's 12 Xid 39 in 11 minutes, then 10,500 on 0000:00:07.0.
TEST(KernelLogRules, RepeatsPushedOutByAStormStillEscalate) {
    auto fs = findings_for_log("storm", repeated(39, 6, 12, 60) + repeated(39, 7, 10500, 0.5, 2000));
    auto esc = with_id(fs, "kernel_log.xid_repeated");
    ASSERT_EQ(esc.size(), 2u);
    std::set<std::string> gpus;
    for (auto* f : esc) gpus.insert(f->subjects.at(0).pci);
    EXPECT_TRUE(gpus.count("0000:00:06.0"));
    EXPECT_TRUE(gpus.count("0000:00:07.0"));
    for (auto* f : esc)
        if (f->subjects[0].pci == "0000:00:06.0")
            EXPECT_NE(f->message.find("12 times in 660 s, so at least 12 within 3600 s"), std::string::npos) << f->message;
    // Spread thin, a storm's count is no proof of a burst: 12 a day apart on the first GPU do not escalate.
    auto thin = findings_for_log("thin", repeated(39, 6, 12, 86400) + repeated(39, 7, 10500, 0.5, 12 * 86400));
    for (auto* f : with_id(thin, "kernel_log.xid_repeated")) EXPECT_NE(f->subjects.at(0).pci, "0000:00:06.0");
}

TEST(KernelLogRules, RepeatsPastTheThresholdEscalatePerGpuAndCode) {
    // RESET_GPU: 2 within an hour escalate, with CHECK_MECHANICALS.
    auto twice = findings_for_log("rep1", repeated(46, 6, 2, 1800));
    auto esc = with_id(twice, "kernel_log.xid_repeated");
    ASSERT_EQ(esc.size(), 1u);
    EXPECT_EQ(esc[0]->severity, Severity::error);
    EXPECT_EQ(esc[0]->subjects[0].uuid, kGpu0Uuid);
    EXPECT_NE(esc[0]->next_step.find("CHECK_MECHANICALS"), std::string::npos);
    EXPECT_NE(esc[0]->message.find("2 times within 1800 s"), std::string::npos) << esc[0]->message;
    // Two hours apart: each reset held for an hour; no escalation.
    EXPECT_TRUE(with_id(findings_for_log("rep2", repeated(46, 6, 2, 7200)), "kernel_log.xid_repeated").empty());
    // Once on each GPU is not a repeat on one GPU.
    EXPECT_TRUE(with_id(findings_for_log("rep3", repeated(46, 6, 1, 1) + repeated(46, 7, 1, 1, 200)),
                        "kernel_log.xid_repeated").empty());
    // An application's own fault repeats with the application: 50 Xid 13 do not escalate.
    EXPECT_TRUE(with_id(findings_for_log("rep4", repeated(13, 7, 50, 10)), "kernel_log.xid_repeated").empty());
    // RESTART_APP codes escalate at 10 within an hour: 9 do not, 10 do.
    EXPECT_TRUE(with_id(findings_for_log("rep5", repeated(39, 7, 9, 60)), "kernel_log.xid_repeated").empty());
    EXPECT_EQ(with_id(findings_for_log("rep6", repeated(39, 7, 10, 60)), "kernel_log.xid_repeated").size(), 1u);
    // 92 (IGNORE) is info alone and a warning at three in a day.
    auto sbe = findings_for_log("rep7", repeated(92, 7, 3, 3600));
    ASSERT_EQ(with_id(sbe, "kernel_log.xid_repeated").size(), 1u);
    EXPECT_EQ(with_id(sbe, "kernel_log.xid_repeated")[0]->severity, Severity::warning);
    // A site policy raises the threshold for 46.
    auto dir = scratch("rep-site");
    auto site = load_xid_policy_file(write_file(dir / "site.toml",
                                                "version = \"s\"\n[xid.46]\nmeaning = \"m\"\nseverity = \"error\"\n"
                                                "action = \"a\"\nrepeats = 5\n"));
    ASSERT_TRUE(site) << site.error().message;
    EXPECT_TRUE(with_id(findings_for_log("rep8", repeated(46, 6, 4, 60), &*site), "kernel_log.xid_repeated").empty());
    EXPECT_EQ(with_id(findings_for_log("rep9", repeated(46, 6, 5, 60), &*site), "kernel_log.xid_repeated").size(), 1u);
    std::filesystem::remove_all(dir);
}

TEST(KernelLogRules, RepeatsAreCountedFromWallTimesTooAndAcrossAStorm) {
    // journalctl -k: wall times only.
    std::string journal = "Nov 30 06:28:08 node kernel: NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=a, GPU has fallen off the bus.\n"
                          "Nov 30 18:28:08 node kernel: NVRM: Xid (PCI:0000:00:06): 79, pid=2, name=b, GPU has fallen off the bus.\n";
    auto fs = findings_for_log("wall", journal);
    auto esc = with_id(fs, "kernel_log.xid_repeated");
    ASSERT_EQ(esc.size(), 1u);
    EXPECT_NE(esc[0]->message.find("43200 s"), std::string::npos) << esc[0]->message;
    // 2000 Xid 46 in the window: one finding, counted.
    auto storm = findings_for_log("storm", repeated(46, 7, 2000, 0.5));
    auto s = with_id(storm, "kernel_log.xid_repeated");
    ASSERT_EQ(s.size(), 1u);
    EXPECT_NE(s[0]->message.find("2000 times"), std::string::npos) << s[0]->message;
}

TEST(KernelLogRules, SxidsAreAttributedToTheSwitchAndFatalOnesAreErrors) {
    auto fs = findings_for_log("sxid",
                               "[  38.178720] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 46 egress non-posted PRIV error (First)\n"
                               "[  38.180708] nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Severity 0 Engine instance 46 Sub-engine instance 00\n"
                               "[  39.000000] nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up\n"
                               "[  39.100000] nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 29 LTSSM Fault Up\n"
                               "[  40.000000] nvidia-nvswitch2: SXid (PCI:0000:c4:00.0): 10002, Severity 5 Engine instance 00 Sub-engine instance 00\n"
                               "[  41.000000] nvidia-nvswitch1: SXid (PCI:0000:c3:00.0): 22013, Link 44 Minion Link DLREQ interrupt\n"
                               "[  42.000000] nvidia-nvswitch1: SXid (PCI:0000:c3:00.0): 11999, Fatal, Link 02 ingress invalid ACL\n");
    std::map<std::string, const Finding*> by_switch;
    for (auto* f : with_id(fs, "kernel_log.sxid")) {
        ASSERT_EQ(f->subjects.size(), 1u);
        by_switch[f->subjects[0].pci + " " + f->message.substr(f->message.find("SXid ") + 5, 5)] = f;
    }
    ASSERT_EQ(by_switch.size(), 5u);
    const Finding* nonfatal = by_switch["0000:86:00.0 12028"];
    ASSERT_TRUE(nonfatal);
    EXPECT_EQ(nonfatal->severity, Severity::warning);
    EXPECT_NE(nonfatal->message.find("nvidia-nvswitch3"), std::string::npos) << nonfatal->message;
    EXPECT_NE(nonfatal->message.find("Non-fatal"), std::string::npos);
    EXPECT_NE(nonfatal->message.find("at 38.178720"), std::string::npos) << "the detail line is not a second report";
    const Finding* fatal = by_switch["0000:c2:00.0 20034"];
    ASSERT_TRUE(fatal);
    EXPECT_EQ(fatal->severity, Severity::error);
    EXPECT_NE(fatal->message.find("2 times"), std::string::npos);
    // An SXid the policy does not know, said Fatal: still an error.
    ASSERT_TRUE(by_switch["0000:c3:00.0 11999"]);
    EXPECT_EQ(by_switch["0000:c3:00.0 11999"]->severity, Severity::error);
    // Missing severity: reported, not dropped, and it says so.
    for (auto key : {"0000:c4:00.0 10002", "0000:c3:00.0 22013"}) {
        const Finding* f = by_switch[key];
        ASSERT_TRUE(f) << key;
        EXPECT_EQ(f->severity, Severity::warning) << key;
        EXPECT_NE(f->message.find("no severity stated"), std::string::npos) << f->message;
    }
    auto parsed = parse_sxid("nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 46 egress non-posted PRIV error (First)");
    ASSERT_TRUE(parsed);
    EXPECT_EQ(parsed->kind, TallyKind::sxid_nonfatal);
    EXPECT_EQ(parsed->device, "0000:86:00.0");
    EXPECT_EQ(parsed->module, "nvidia-nvswitch3");
    EXPECT_EQ(parsed->code, 12028);
    EXPECT_FALSE(parse_sxid("nvidia-nvswitch3: SXid (PCI:0000:86:00.0): , Fatal"));
    EXPECT_FALSE(parse_sxid("NVRM: Xid (PCI:0000:86:00): 79, GPU has fallen off the bus."));
    EXPECT_EQ(classify_topic("nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Non-fatal, x"), LogTopic::sxid);
}

// NVLink 5 Xids name their unit, link and error: the lines posted in leptonai/gpud#1174 (GB200) and NVIDIA/nccl#2241
// (B200; tests/corpus/real/xid_149_145_nvlink5_fatal_nonfatal_gpud1174.txt, xid_145_137_..._nccl2241.txt).
TEST(NvlinkXid, TheLineNamesUnitLinkAndError) {
    auto rx = parse_nvlink_xid("NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 "
                               "0x00000001 0x00000000 0x00100000 0x00000004)");
    ASSERT_TRUE(rx);
    EXPECT_EQ(rx->unit, "RLW");
    EXPECT_EQ(rx->subunit, "RXPIPE");
    EXPECT_EQ(rx->fatal, false);
    EXPECT_EQ(rx->crossbar, "XC0");
    EXPECT_EQ(rx->instance, 0);
    EXPECT_EQ(rx->link, 13);
    EXPECT_EQ(rx->intrinfo, 0x0409a0c2u);
    EXPECT_EQ(rx->error_status, 0x00000008u);
    EXPECT_EQ(rx->describe(), "link 13, unit RLW/RXPIPE, Nonfatal, error status 0x00000008 (interrupt info 0x0409a0c2)");
    EXPECT_EQ(rx->key(), "RLW_RXPIPE Nonfatal Link 13");
    auto netir = parse_nvlink_xid("NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 "
                                  "0x00000000 0x00000000 0x00000000 0x00000000)");
    ASSERT_TRUE(netir);
    EXPECT_EQ(netir->unit, "NETIR");
    EXPECT_TRUE(netir->subunit.empty());
    EXPECT_EQ(netir->fatal, true);
    EXPECT_EQ(netir->link, -1);
    EXPECT_EQ(netir->describe().substr(0, 24), "no single link (Link -1)");
    auto evt = parse_nvlink_xid("kernel: NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 "
                                "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)");
    ASSERT_TRUE(evt);
    EXPECT_EQ(evt->subunit, "LINK_EVT");
    EXPECT_EQ(evt->link, 0);
    // The B200 line with its address and words elided by the reporter: unit, fatality and link still read.
    auto b200 = parse_nvlink_xid("NVRM: Xid (PCI:...): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11 (...)");
    ASSERT_TRUE(b200);
    EXPECT_EQ(b200->link, 11);
    EXPECT_FALSE(b200->error_status);
    // Not NVLink 5: another code, or no unit word.
    EXPECT_FALSE(parse_nvlink_xid("NVRM: Xid (PCI:...): 137, RLW_RXPIPE interrupt hit on link 11 on GPU0: PRIV Error"));
    EXPECT_FALSE(parse_nvlink_xid("NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=a, GPU has fallen off the bus."));
    EXPECT_FALSE(parse_nvlink_xid("NVRM: Xid (PCI:0000:00:06): 145, rlw went wrong"));
    auto pid = parse_nvlink_xid("NVRM: Xid (PCI:0000:00:06): 146, pid=12, name=python3, TLW_TX Fatal XC0 i1 Link 7 (0x1 0x2)");
    ASSERT_TRUE(pid);
    EXPECT_EQ(pid->unit, "TLW");
    EXPECT_EQ(pid->instance, 1);
    EXPECT_EQ(pid->error_status, 2u);
}

TEST(KernelLogRules, AnNvlink5XidFindingNamesLinkUnitAndErrorAndTheDriversFatality) {
    auto fs = findings_for_log(
        "nvlink5",
        "[  100.000000] NVRM: Xid (PCI:0000:00:06): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 "
        "0x00000000 0x00100000 0x00000004)\n"
        "[  101.000000] NVRM: Xid (PCI:0000:00:06): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 "
        "0x00000000 0x00100000 0x00000004)\n"
        "[  102.000000] NVRM: Xid (PCI:0000:00:06): 145, RLW_SRC_TRACK Fatal XC0 i0 Link 14 (0x0409a0e2 0x00000001 0x00000000 "
        "0x00000000 0x00000000 0x00000000)\n"
        "[  103.000000] NVRM: Xid (PCI:0000:00:07): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 0x00000000 "
        "0x00000000 0x00000000 0x00000000)\n");
    auto xids = with_id(fs, "kernel_log.xid");
    ASSERT_EQ(xids.size(), 3u) << "one finding per GPU, code, unit, fatality and link";
    const Finding* nonfatal = nullptr;
    const Finding* fatal = nullptr;
    const Finding* netir = nullptr;
    for (auto* f : xids) {
        if (f->message.find("link 13") != std::string::npos) nonfatal = f;
        if (f->message.find("link 14") != std::string::npos) fatal = f;
        if (f->message.starts_with("Xid 149")) netir = f;
    }
    ASSERT_TRUE(nonfatal && fatal && netir);
    EXPECT_EQ(nonfatal->severity, Severity::warning) << nonfatal->message;
    EXPECT_NE(nonfatal->message.find("unit RLW/RXPIPE, Nonfatal, error status 0x00000008"), std::string::npos) << nonfatal->message;
    EXPECT_NE(nonfatal->message.find("2 times"), std::string::npos) << nonfatal->message;
    EXPECT_EQ(fatal->severity, Severity::error) << fatal->message;
    EXPECT_NE(fatal->message.find("unit RLW/SRC_TRACK, Fatal, error status 0x00000001"), std::string::npos) << fatal->message;
    EXPECT_EQ(fatal->subjects[0].uuid, kGpu0Uuid);
    EXPECT_EQ(netir->severity, Severity::error);
    EXPECT_NE(netir->message.find("link 0, unit NETIR/LINK_EVT, Fatal"), std::string::npos) << netir->message;
    EXPECT_EQ(netir->subjects[0].pci, "0000:00:07.0");
}

// The switch ports an SXid's lines name, each once, on the real lines of an HGX node (MENTHOS dataset,
// tests/corpus/real/nvswitch_sxid_fatal_nonfatal_unstated_menthos.txt) and the burst of NVIDIA/nvtrust#124.
TEST(KernelLogRules, AnSxidFindingNamesTheSwitchAndItsLinks) {
    EXPECT_EQ(sxid_link("nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up"), 28);
    EXPECT_EQ(sxid_link("nvidia-nvswitch4: SXid (PCI:0000:c6:00.0): 19084, Non-fatal, Link 29 AN1 Heartbeat Timeout Error (First)"), 29);
    EXPECT_FALSE(sxid_link("nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance 44 Sub-engine instance 00"));
    EXPECT_FALSE(sxid_link("nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {0x000001c0, 0x00bd5c8a}"));
    EXPECT_FALSE(sxid_link("NVRM: Xid (PCI:0000:00:06): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x1 0x2)"));
    auto fs = findings_for_log(
        "sxid-links",
        "[  38.175561] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Data {0x0000002b, 0x0000002b, 0x00000000, 0x0000002b, "
        "0x80005302, 0x00000000, 0x00000000, 0x00000000, 0x00000000}\n"
        "[  38.178720] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt\n"
        "[  38.180708] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Severity 0 Engine instance 44 Sub-engine instance 00\n"
        "[  38.187830] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 45 Minion Link DLREQ interrupt\n"
        "[  38.194959] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 46 Minion Link DLREQ interrupt\n"
        "[  38.195000] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt\n"
        "[  39.000000] nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 28 LTSSM Fault Up\n"
        "[  39.100000] nvidia-nvswitch0: SXid (PCI:0000:c2:00.0): 20034, Fatal, Link 29 LTSSM Fault Up\n");
    auto sx = with_id(fs, "kernel_log.sxid");
    ASSERT_EQ(sx.size(), 2u);
    for (auto* f : sx) {
        if (f->subjects[0].pci == "0000:04:00.0") {
            EXPECT_NE(f->message.find("NVSwitch nvidia-nvswitch3 (0000:04:00.0) reported SXid 22013"), std::string::npos)
                << f->message;
            EXPECT_NE(f->message.find("NVIDIA: non-fatal"), std::string::npos) << f->message;
            EXPECT_NE(f->message.find("on links 44, 45, 46: 4 times"), std::string::npos) << f->message;
        } else {
            EXPECT_EQ(f->subjects[0].pci, "0000:c2:00.0");
            EXPECT_EQ(f->severity, Severity::error);
            EXPECT_NE(f->message.find("(LTSSM fault: an NVSwitch link dropped out of its trained state; NVIDIA: fatal), "
                                      "Fatal, on links 28, 29: 2 times"),
                      std::string::npos)
                << f->message;
        }
    }
}

// An Xid storm (NVIDIA/NVSentinel#1120: 800,000 Xid 95 lines of 29 events) is one finding per GPU and code with the
// exact count and the first and last time, and one escalation, however many lines; kept events stay bounded.
TEST(KernelLogRules, AnXidStormIsOneFindingWithItsCountAndFirstAndLastTime) {
    std::string log;
    log.reserve(200000 * 120);
    const int kEvents = 29, kLinesPerEvent = 200000 / 29 + 1;
    size_t lines = 0;
    for (int e = 0; e < kEvents; ++e)
        for (int i = 0; i < kLinesPerEvent && lines < 200000; ++i, ++lines)
            log += fmt::format("[{:12.6f}] NVRM: Xid (PCI:0000:00:06): 95, pid={}, name=python3, Uncontained: FBHUB. RST: Yes, D-RST: No\n",
                               100.0 + e * 60.0 + i * 0.000001, 1000 + e);
    auto fs = findings_for_log("storm95", log);
    auto xids = with_id(fs, "kernel_log.xid");
    ASSERT_EQ(xids.size(), 1u);
    EXPECT_NE(xids[0]->message.find("200000 times, first at 100.000000 s after boot, last at"), std::string::npos)
        << xids[0]->message;
    EXPECT_EQ(xids[0]->subjects[0].uuid, kGpu0Uuid);
    EXPECT_LE(xids[0]->evidence.size(), 4u) << "the first and last lines, not every line";
    auto repeats = with_id(fs, "kernel_log.xid_repeated");
    ASSERT_EQ(repeats.size(), 1u);
    // Counted as the Xid finding counts it, not as the newest 10,000 kept events would: the two findings agree.
    EXPECT_NE(repeats[0]->message.find("200000 times in 1680 s, so at least 200000 within 3600 s"), std::string::npos)
        << repeats[0]->message;
    std::string ids;
    for (auto& f : fs) ids += f.id + " ";
    EXPECT_LE(fs.size(), 3u) << "every finding of the storm: " << ids;
}

// NVML's recovery action per GPU (the stand-in serves each value in tests/scenarios/recovery-action-*): a finding
// on that GPU with the same severities as Xid 154; not read (an older driver) is no finding.
TEST(DriverRecoveryAction, EachActionIsAFindingOnItsGpu) {
    Snapshot base;
    {
        Root root(kH200);
        CollectOptions o;
        o.probe_driver = false;
        base = take_snapshot(root, o);
    }
    NvmlDevice d;
    d.index = 1;
    d.uuid = "GPU-40cd403d-66ba-4608-72b9-5be5031085dc";
    d.pci = "0000:00:07.0";
    d.bus_id = "00000000:00:07.0";
    d.persistence_mode = true;
    auto run = [&](std::optional<unsigned> action) {
        Snapshot s = base;
        NvmlDevice dev = d;
        dev.gpu_recovery_action = action;
        if (!action) dev.unsupported.push_back("NVML_FI_DEV_GET_GPU_RECOVERY_ACTION");
        s.nvml.devices = {dev};
        DiagnoseOptions o;
        CheckContext ctx{s, o};
        std::vector<Finding> out;
        check_driver(ctx, out);
        std::vector<Finding> mine;
        for (auto& f : out)
            if (f.id == "driver.recovery_action") mine.push_back(f);
        return mine;
    };
    for (auto [value, severity, name] : {std::tuple{1u, Severity::error, "GPU reset"}, std::tuple{2u, Severity::error, "node reboot"},
                                         std::tuple{3u, Severity::warning, "drain P2P"},
                                         std::tuple{4u, Severity::error, "drain and reset"},
                                         std::tuple{7u, Severity::warning, "does not know"}}) {
        auto fs = run(value);
        ASSERT_EQ(fs.size(), 1u) << value;
        EXPECT_EQ(fs[0].severity, severity) << value;
        EXPECT_NE(fs[0].message.find(name), std::string::npos) << fs[0].message;
        ASSERT_EQ(fs[0].subjects.size(), 1u);
        EXPECT_EQ(fs[0].subjects[0].pci, "0000:00:07.0");
    }
    EXPECT_TRUE(run(0u).empty()) << "none pending";
    EXPECT_TRUE(run(std::nullopt).empty()) << "an older driver is not a finding";
}

// ---- the node record: a reset or reboot Xid back after the reboot --------------------------------

TEST(NodeRecord, AResetOrRebootXidThatRecursAfterTheRebootIsReported) {
    auto dir = scratch("recur");
    Snapshot before = h200_with_log(write_file(dir / "before.txt", repeated(79, 6, 1, 1)));
    before.host.boot_id = "11111111-2222-3333-4444-555555555555";
    NodeRecord record = make_node_record(before);
    ASSERT_EQ(record.recovery_xids.size(), 1u);
    EXPECT_EQ(record.recovery_xids[0].recovery, "reboot");
    EXPECT_EQ(record.recovery_xids[0].uuid, kGpu0Uuid);
    // Through JSON and back, as `gpudx baseline save` writes it.
    auto round = node_record_from_json(node_record_to_json(record));
    ASSERT_TRUE(round) << round.error().message;
    EXPECT_EQ(round->boot_id, record.boot_id);
    ASSERT_EQ(round->recovery_xids.size(), 1u);

    Snapshot after = h200_with_log(write_file(dir / "after.txt", repeated(79, 6, 1, 1, 5000)));
    after.host.boot_id = "99999999-2222-3333-4444-555555555555";
    auto fs = diff_against_baseline(*round, after);
    auto recurs = std::find_if(fs.begin(), fs.end(), [](auto& f) { return f.id == "baseline.xid_recurs_after_reboot"; });
    ASSERT_NE(recurs, fs.end());
    EXPECT_EQ(recurs->severity, Severity::error);
    EXPECT_EQ(recurs->subjects[0].uuid, kGpu0Uuid);
    EXPECT_NE(recurs->next_step.find("CHECK_MECHANICALS"), std::string::npos);
    // The same boot: no reboot happened, so nothing recurred after one.
    after.host.boot_id = before.host.boot_id;
    auto same = diff_against_baseline(*round, after);
    EXPECT_TRUE(std::none_of(same.begin(), same.end(), [](auto& f) { return f.id == "baseline.xid_recurs_after_reboot"; }));
    // Another GPU's Xid after the reboot is not this one recurring.
    Snapshot other = h200_with_log(write_file(dir / "other.txt", repeated(79, 7, 1, 1, 5000)));
    other.host.boot_id = "99999999-2222-3333-4444-555555555555";
    auto fo = diff_against_baseline(*round, other);
    EXPECT_TRUE(std::none_of(fo.begin(), fo.end(), [](auto& f) { return f.id == "baseline.xid_recurs_after_reboot"; }));
    std::filesystem::remove_all(dir);
}

// ---- gpudx xid ------------------------------------------------------------------------------------

TEST(XidCommand, ExplainsKnownAndUnknownCodes) {
    auto [rc, out] = run_gpudx("xid 79");
    EXPECT_EQ(rc, 0);
    EXPECT_NE(out.find("Xid 79: GPU has fallen off the bus"), std::string::npos) << out;
    EXPECT_NE(out.find("severity: error"), std::string::npos);
    EXPECT_NE(out.find("2026.12.1"), std::string::npos);
    EXPECT_NE(out.find("immediate RESTART_BM"), std::string::npos) << out;
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

TEST(XidCommand, TheCatalogsCodesAndBucketsAndBadCodes) {
    auto [rc, out] = run_gpudx("xid 46");
    EXPECT_EQ(rc, 0);
    EXPECT_NE(out.find("Xid 46: GPU stopped processing"), std::string::npos) << out;
    EXPECT_NE(out.find("immediate RESET_GPU"), std::string::npos) << out;
    EXPECT_NE(out.find("2 on one GPU within 3600 s"), std::string::npos) << out;
    for (auto code : {"136", "151"}) {
        auto [c, o] = run_gpudx(std::string("xid ") + code);
        EXPECT_EQ(c, 0);
        EXPECT_EQ(o.find("unknown to this policy"), std::string::npos) << o;
    }
    auto [rc2, json] = run_gpudx("xid 154 --format json");
    EXPECT_EQ(rc2, 0);
    auto j = nlohmann::json::parse(json);
    EXPECT_EQ(j["xid"]["immediate"], "XID_154");
    EXPECT_EQ(j["xid"]["investigatory"], "N/A Informational only regarding another Xid");
    EXPECT_EQ(j["xid"]["mnemonic"], "GPU_RECOVERY_ACTION_CHANGED");
    auto [rc3, list] = run_gpudx("xid --list --format json");
    EXPECT_EQ(rc3, 0);
    auto l = nlohmann::json::parse(list);
    EXPECT_EQ(l["codes"].size(), 160u);
    EXPECT_TRUE(l["buckets"].contains("RESET_GPU"));
    EXPECT_EQ(l["sxids"].size(), builtin_xid_policy().sxids.size());
    auto [rc4, text] = run_gpudx("xid --list");
    EXPECT_NE(text.find("RESET_GPU"), std::string::npos);
    EXPECT_NE(text.find("NVSwitch SXids"), std::string::npos);
    auto [rc5, sx] = run_gpudx("xid --sxid 20034");
    EXPECT_EQ(rc5, 0);
    EXPECT_NE(sx.find("SXid 20034"), std::string::npos) << sx;
    EXPECT_NE(sx.find("\"LTSSM Fault Up\", fatal"), std::string::npos) << sx;
    // Unused in both NVIDIA documents: unknown, with the default treatment.
    auto [rc6, unused] = run_gpudx("xid 14");
    EXPECT_EQ(rc6, 0);
    EXPECT_NE(unused.find("unknown to this policy"), std::string::npos);
    // Unused in the Ampere+ catalog, defined in the older listing: its causes and the older GPUs.
    auto [rc9, old] = run_gpudx("xid 57");
    EXPECT_EQ(rc9, 0);
    EXPECT_NE(old.find("causes:   hw, driver, fb"), std::string::npos) << old;
    EXPECT_NE(old.find("GPUs:     Kepler, Maxwell, Pascal, Volta, Turing"), std::string::npos) << old;
    EXPECT_NE(old.find("severity: error"), std::string::npos) << old;
    // Bad codes: usage error 64 with a message that says what a code is.
    for (auto bad : {"-1", "99999999999", "0", "abc", "100000", "4.5"}) {
        auto [c, o] = run_gpudx(std::string("xid -- ") + bad);
        EXPECT_EQ(c, 64) << bad << ": " << o;
        EXPECT_NE(o.find("whole number from 1 to 99999"), std::string::npos) << bad << ": " << o;
    }
    auto [rc7, neg] = run_gpudx("xid -1");
    EXPECT_EQ(rc7, 64) << neg;
    auto [rc8, big] = run_gpudx("xid 99999999999");
    EXPECT_EQ(rc8, 64) << big;
    EXPECT_NE(big.find("99999999999"), std::string::npos) << big;
}

// ---- Xids NVML delivered to the agent (Snapshot::nvml_events) ------------------------------------

namespace {
NvmlEvent nvml_xid(const std::string& pci, unsigned long long code, const std::string& time) {
    NvmlEvent e;
    e.time = time;
    e.pci = pci;
    e.uuid = pci == "0000:00:06.0" ? kGpu0Uuid : "";
    e.type = NvmlEventType::xid;
    e.mask = 0x8;
    e.data = code;
    return e;
}
}  // namespace

TEST(KernelLogRules, AnXidOnlyNvmlDeliveredIsJudgedByThePolicyOncePerGpuAndCode) {
    auto dir = scratch("nvml-xids");
    auto log = write_file(dir / "dmesg.txt", "[  5.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.86.15\n");
    Snapshot s = h200_with_log(log);
    s.nvml_events = {nvml_xid("0000:00:06.0", 79, "2026-12-02T06:00:00Z"), nvml_xid("0000:00:06.0", 79, "2026-12-02T06:00:05Z"),
                     nvml_xid("0000:00:07.0", 63, "2026-12-02T06:01:00Z")};
    NvmlEvent pstate;  // not an Xid: never a finding of this rule
    pstate.type = NvmlEventType::pstate;
    pstate.pci = "0000:00:06.0";
    s.nvml_events.push_back(pstate);
    auto fs = kernel_log_findings(s);
    auto nvml = with_id(fs, "kernel_log.xid_from_nvml");
    ASSERT_EQ(nvml.size(), 2u);
    EXPECT_EQ(nvml[0]->severity, Severity::error);
    EXPECT_EQ(nvml[0]->subjects[0].uuid, kGpu0Uuid);
    EXPECT_NE(nvml[0]->message.find("2 times, 2026-12-02T06:00:00Z to 2026-12-02T06:00:05Z"), std::string::npos)
        << nvml[0]->message;
    EXPECT_NE(nvml[0]->message.find("the kernel log read does not show it"), std::string::npos);
    EXPECT_EQ(nvml[0]->evidence[0].source, "NVML event");
    EXPECT_EQ(nvml[1]->severity, Severity::info);  // 63: NVIDIA's IGNORE bucket, as from the log
    EXPECT_EQ(nvml[1]->subjects[0].pci, "0000:00:07.0");
    EXPECT_TRUE(with_id(fs, "kernel_log.xid").empty());
    std::filesystem::remove_all(dir);
}

TEST(KernelLogRules, AnXidInTheLogAndFromNvmlIsOneFindingFromTheLog) {
    auto dir = scratch("nvml-xids-dup");
    auto log = write_file(dir / "dmesg.txt",
                          "[  100.000000] NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.\n");
    Snapshot s = h200_with_log(log);
    s.nvml_events = {nvml_xid("0000:00:06.0", 79, "2026-12-02T06:00:00Z"), nvml_xid("0000:00:07.0", 79, "2026-12-02T06:00:00Z")};
    auto fs = kernel_log_findings(s);
    EXPECT_EQ(with_id(fs, "kernel_log.xid").size(), 1u);
    auto nvml = with_id(fs, "kernel_log.xid_from_nvml");
    ASSERT_EQ(nvml.size(), 1u);  // only the other GPU's, which the log does not show
    EXPECT_EQ(nvml[0]->subjects[0].pci, "0000:00:07.0");
    std::filesystem::remove_all(dir);
}

TEST(KernelLogRules, AnNvmlXidIsJudgedWhenTheKernelLogCannotBeRead) {
    Snapshot s = h200_with_log("/nonexistent/gpudx-kern.log");
    ASSERT_FALSE(s.collected(Collector::kernel_log));
    s.nvml_events = {nvml_xid("0000:00:06.0", 48, "2026-12-02T06:00:00Z")};
    auto fs = kernel_log_findings(s);
    auto nvml = with_id(fs, "kernel_log.xid_from_nvml");
    ASSERT_EQ(nvml.size(), 1u);
    EXPECT_EQ(nvml[0]->severity, Severity::error);
    EXPECT_NE(nvml[0]->message.find("the kernel log could not be read here"), std::string::npos) << nvml[0]->message;
}

}  // namespace GPUDX_UNITY_ID
