// The rule tables: every finding gpudx emits is declared, under the layer its declaration names; a family that
// throws is reported in its own layer; docs/rules.md is what the tables generate.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "model/snapshot.hpp"
#include "rules/engine/catalogue.hpp"
#include "rules/engine/diagnose.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = GPUDX_TEST_SOURCE_DIR;  // tests/
const fs::path kDocs = kSource.parent_path() / "docs" / "rules.md";
const std::string kRegenerate = "cd " + kSource.parent_path().string() + " && " + GPUDX_BINARY +
                                " rules --format md --scenarios tests/scenarios > docs/rules.md";

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string output_of(const std::string& command) {
    std::string out;
    FILE* p = ::popen(command.c_str(), "r");
    if (!p) return out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
    return out;
}

std::vector<fs::path> golden_files(std::string_view suffix) {
    std::vector<fs::path> out;
    for (auto& e : fs::directory_iterator(kSource / "golden"))
        if (e.path().filename().string().ends_with(suffix)) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

// Why a finding does not match a declaration; empty when it does.
std::string undeclared(std::string_view id, std::string_view layer) {
    auto* d = find_declared_rule(id);
    if (!d) return std::string(id) + " is not declared in any rule table";
    auto l = parse_layer(layer);
    if (!l || !d->rule->files_under(*l))
        return std::string(id) + " is filed under " + std::string(layer) + ", its declaration says " +
               layers_text(*d->rule);
    return {};
}

void throw_from_family(const CheckContext&, std::vector<Finding>&) { throw std::runtime_error("boom"); }

}  // namespace

TEST(RuleTables, IdsAreUniqueAndEveryRuleSaysWhatItFinds) {
    std::set<std::string_view> ids;
    for (auto& d : declared_rules()) {
        const Rule& r = *d.rule;
        EXPECT_TRUE(ids.insert(r.id).second) << r.id << " is declared twice";
        EXPECT_NE(r.id.find('.'), std::string_view::npos) << r.id;
        EXPECT_FALSE(r.summary.empty()) << r.id;
        EXPECT_FALSE(d.family.empty()) << r.id;
    }
    EXPECT_GE(ids.size(), 100u);
}

// The collector names a rule declares are the names collectors report under in a snapshot.
TEST(RuleTables, EveryCollectorARuleReadsIsOneASnapshotHas) {
    std::set<std::string> seen;
    for (auto& path : golden_files(".snapshot.json")) {
        auto j = nlohmann::json::parse(read_file(path));
        for (auto& c : j["collectors"]) seen.insert(c["name"].get<std::string>());
    }
    for (auto c : kAllCollectors)
        if (c != Collector::processes) {  // only in a snapshot taken with --pid
            EXPECT_TRUE(seen.count(std::string(to_string(c)))) << to_string(c);
        }
}

TEST(RuleTables, EveryFindingInTheGoldenDiagnosesIsDeclaredUnderItsLayer) {
    auto files = golden_files(".diagnose.json");
    ASSERT_GT(files.size(), 50u);
    size_t findings = 0;
    for (auto& path : files) {
        auto j = nlohmann::json::parse(read_file(path));
        for (auto& f : j["findings"]) {
            ++findings;
            EXPECT_EQ(undeclared(f["id"].get<std::string>(), f["layer"].get<std::string>()), "")
                << path.filename().string();
        }
    }
    EXPECT_GT(findings, 100u);
}

// Diagnose over every scenario's snapshot (the golden snapshots are those trees as gpudx read them), every family.
TEST(RuleTables, DiagnosingEveryScenarioSnapshotEmitsOnlyDeclaredRules) {
    auto files = golden_files(".snapshot.json");
    ASSERT_GT(files.size(), 50u);
    for (auto& path : files) {
        auto s = load_snapshot_file(path.string());
        ASSERT_TRUE(s) << path << ": " << s.error().message;
        DiagnoseOptions o;
        o.expect_gpus = 2;  // the capture's count: asks the pcie family's count rules too
        for (auto& f : diagnose(*s, o).findings) {
            EXPECT_NE(f.id, "gpudx.check_failed") << path.filename().string() << ": " << f.message;
            EXPECT_EQ(undeclared(f.id, to_string(f.layer)), "") << path.filename().string();
        }
    }
}

TEST(RuleTables, AFamilyThatThrowsIsReportedInItsOwnLayer) {
    const RuleFamily family{"throws_in_driver", Layer::driver, {}, throw_from_family};
    Snapshot s;
    s.collectors.push_back({.name = "pcie", .state = CollectorState::ok});
    auto d = diagnose(s, {}, std::span(&family, 1));
    ASSERT_EQ(d.findings.size(), 1u);
    const Finding& f = d.findings[0];
    EXPECT_EQ(f.id, "gpudx.check_failed");
    EXPECT_EQ(f.layer, Layer::driver);
    EXPECT_EQ(f.severity, Severity::warning);
    EXPECT_EQ(f.message, "check family throws_in_driver failed: boom");
    for (auto& l : d.layers) {
        if (l.layer == Layer::pcie) {
            EXPECT_EQ(l.state, LayerState::ok) << "the bus was judged and is fine";
        }
        EXPECT_EQ(l.warnings, l.layer == Layer::driver ? 1u : 0u) << to_string(l.layer);
    }
}

// Each of diagnose's own families, failing, is reported under the layer its declaration names.
TEST(RuleTables, EachFamilyFailingIsReportedUnderItsDeclaredLayer) {
    for (auto& fam : check_families()) {
        RuleFamily failing = fam;
        failing.run = throw_from_family;
        auto d = diagnose(Snapshot{}, {}, std::span(&failing, 1));
        ASSERT_EQ(d.findings.size(), 1u) << fam.name;
        EXPECT_EQ(d.findings[0].layer, fam.layer) << fam.name;
        EXPECT_EQ(undeclared(d.findings[0].id, to_string(d.findings[0].layer)), "");
    }
    auto layer_of = [](std::string_view name) {
        for (auto& fam : check_families())
            if (fam.name == name) return fam.layer;
        throw std::logic_error("no family " + std::string(name));
    };
    EXPECT_EQ(layer_of("driver"), Layer::driver);
    EXPECT_EQ(layer_of("kernel_log"), Layer::kernel_log);
    EXPECT_EQ(layer_of("allocation"), Layer::allocation);
}

TEST(RuleTables, ARuleCannotBeFiledUnderALayerItDoesNotDeclare) {
    const DeclaredRule* cuinit = find_declared_rule("driver.cuda_init_failed");
    ASSERT_TRUE(cuinit);
    EXPECT_EQ(cuinit->rule->finding_in(Layer::allocation, Severity::error, "m").layer, Layer::allocation);
    EXPECT_THROW(cuinit->rule->finding_in(Layer::pcie, Severity::error, "m"), std::logic_error);

    const Rule& nvml_init = *find_declared_rule("driver.nvml_init_failed")->rule;
    Finding f = nvml_init.finding("m");
    EXPECT_EQ(f.layer, Layer::driver);
    nvml_init.file_under(f, Layer::libraries);
    EXPECT_EQ(f.layer, Layer::libraries);
    EXPECT_THROW(nvml_init.file_under(f, Layer::container), std::logic_error);
    Finding other = find_declared_rule("pcie.no_gpu")->rule->finding("m");
    EXPECT_THROW(nvml_init.file_under(other, Layer::libraries), std::logic_error);

    // gpudx.check_failed has no layer of its own: the engine names the family's.
    const Rule& failed = *find_declared_rule("gpudx.check_failed")->rule;
    EXPECT_THROW(failed.finding("m"), std::logic_error);
    EXPECT_EQ(layers_text(failed), "the failing family's");
}

TEST(RuleTables, AFindingTakesItsIdLayerAndSeverityFromItsDeclaration) {
    const Rule& r = *find_declared_rule("module.updated_not_rebooted")->rule;
    Finding f = r.finding("msg", {{{"GPU-1", "0000:00:06.0"}}, {{"src", "val"}}, "next"});
    EXPECT_EQ(f.id, "module.updated_not_rebooted");
    EXPECT_EQ(f.layer, Layer::module);
    EXPECT_EQ(f.severity, Severity::warning);
    EXPECT_EQ(f.message, "msg");
    ASSERT_EQ(f.subjects.size(), 1u);
    EXPECT_EQ(f.subjects[0].uuid, "GPU-1");
    ASSERT_EQ(f.evidence.size(), 1u);
    EXPECT_EQ(f.evidence[0].value, "val");
    EXPECT_EQ(f.next_step, "next");
    EXPECT_EQ(r.finding(Severity::error, "msg").severity, Severity::error);
}

TEST(RuleTables, ExpectFilesNameTheFindingsDiagnoseMustReport) {
    auto ids = expected_finding_ids(
        "pcie.aer_fatal\n  module.not_loaded  \n!driver.gpu_lost\n# note\n"
        "boundary: pcie\nexit: 1\n\n");
    EXPECT_EQ(ids, (std::vector<std::string>{"pcie.aer_fatal", "module.not_loaded"}));
}

// Every id a scenario expects is a declared rule (an expect file with a typo would otherwise test nothing).
TEST(RuleTables, EveryIdAScenarioExpectsIsDeclared) {
    for (auto& e : fs::directory_iterator(kSource / "scenarios")) {
        if (!fs::exists(e.path() / "expect")) continue;
        std::string text = read_file(e.path() / "expect");
        for (auto& id : expected_finding_ids(text))
            EXPECT_TRUE(find_declared_rule(id)) << e.path().filename().string() << ": " << id;
    }
}

// `gpudx ids` lists the findings of the rules tagged identity: every identity.* rule, and the others that find a
// GPU missing from one source or a name in the environment that no GPU here answers to.
TEST(RuleTables, TheIdentityTagIsDeclaredWithEachRuleAboutWhichGpuIsWhich) {
    std::set<std::string> tagged, expected = {"driver.nvml_missing_gpu",
                                              "driver.cuda_missing_gpu",
                                              "allocation.uuid_not_on_node",
                                              "allocation.visible_devices_invalid",
                                              "allocation.mig_uuid_unverified",
                                              "allocation.rocm_visible_devices_invalid",
                                              "module.gpu_not_in_kfd"};
    for (auto& d : declared_rules()) {
        if (d.rule->tags.contains(RuleTag::identity)) tagged.emplace(d.rule->id);
        if (d.rule->id.starts_with("identity.")) expected.emplace(d.rule->id);
    }
    EXPECT_EQ(tagged, expected);
}

TEST(RulesDoc, EveryDeclaredIdIsDocumented) {
    std::string doc = read_file(kDocs);
    ASSERT_FALSE(doc.empty()) << kDocs;
    for (auto& d : declared_rules())
        EXPECT_NE(doc.find("| `" + std::string(d.rule->id) + "` |"), std::string::npos)
            << d.rule->id << " is not in docs/rules.md; regenerate it: " << kRegenerate;
}

TEST(RulesDoc, TheCheckedInFileIsWhatTheTablesGenerate) {
    std::string generated =
        output_of(std::string(GPUDX_BINARY) + " rules --format md --scenarios " + (kSource / "scenarios").string());
    ASSERT_FALSE(generated.empty());
    EXPECT_TRUE(generated == read_file(kDocs))
        << "docs/rules.md differs from what the rule tables generate; regenerate it:\n  "
        << kRegenerate;
}

TEST(RulesCommand, JsonListsEveryDeclaredRuleWithItsScenarios) {
    auto j = nlohmann::json::parse(
        output_of(std::string(GPUDX_BINARY) + " rules --format json --scenarios " + (kSource / "scenarios").string()));
    ASSERT_EQ(j["rules"].size(), declared_rules().size());
    for (auto& r : j["rules"])
        if (r["id"] == "pcie.aer_fatal") {
            EXPECT_EQ(r["layer"], "pcie");
            EXPECT_EQ(r["severity"], "error");
            EXPECT_EQ(r["reads"], nlohmann::json::array({"pcie"}));
            auto scenarios = r["scenarios"].get<std::vector<std::string>>();
            EXPECT_NE(std::find(scenarios.begin(), scenarios.end(), "aer-errors"), scenarios.end());
        } else if (r["id"] == "gpudx.check_failed") {
            EXPECT_TRUE(r["layer"].is_null());
            EXPECT_EQ(r["family"], "engine");
        } else if (r["id"] == "driver.cuda_init_failed") {
            EXPECT_EQ(r["also_filed_under"], nlohmann::json::array({"libraries", "allocation"}));
        }
}

TEST(RulesCommand, TextListsOneRulePerLine) {
    std::string text = output_of(std::string(GPUDX_BINARY) + " rules");
    EXPECT_EQ(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')), declared_rules().size() + 1);
    EXPECT_NE(text.find("kernel_log.xid"), std::string::npos);
}

}  // namespace GPUDX_UNITY_ID
