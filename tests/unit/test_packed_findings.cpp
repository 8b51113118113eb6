// The agent holds its published findings packed (model/packed_findings.hpp): what it reads back must be what it
// was given, byte for byte, and a storm's shared texts must be held once.
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "identity/page_identity.hpp"
#include "model/packed_findings.hpp"
#include "model/snapshot.hpp"
#include "render/formats.hpp"
#include "render/html.hpp"
#include "render/report_format.hpp"
#include "rules/engine/diagnose.hpp"
#include "test_support.hpp"

namespace gpudx {
namespace GPUDX_UNITY_ID {

nlohmann::json as_json(const std::vector<Finding>& findings) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : findings) out.push_back(finding_to_json(f));
    return out;
}

// The text of `t`, asked for in pieces of at least `piece` bytes.
std::string joined(PiecedText t, size_t piece) {
    std::string out;
    while (auto p = t.next(piece)) out += *p;
    return out;
}

TEST(PackedFindings, EveryGoldenDiagnosisReadsBackAsItWas) {
    size_t diagnoses = 0, findings = 0;
    for (const auto& entry : std::filesystem::directory_iterator(std::string(GPUDX_TEST_SOURCE_DIR) + "/golden")) {
        std::string name = entry.path().filename().string();
        if (!name.ends_with(".snapshot.json")) continue;
        auto s = snapshot_from_json(nlohmann::json::parse(test::read_all(entry.path().string())));
        ASSERT_TRUE(s.has_value()) << name;
        Diagnosis d = diagnose(*s, {});
        PackedFindings packed(d.findings);
        ASSERT_EQ(packed.size(), d.findings.size()) << name;
        EXPECT_EQ(as_json(packed.unpack()), as_json(d.findings)) << name;
        for (size_t i = 0; i < packed.size(); ++i) {
            EXPECT_EQ(packed.layer(i), d.findings[i].layer);
            EXPECT_EQ(packed.severity(i), d.findings[i].severity);
        }
        // The agent's answers read the findings from the pack, with a diagnosis of no findings, and send the long
        // ones in pieces: every format, the whole or in pieces of any size, is the text of the whole diagnosis.
        Diagnosis summary = d;
        summary.findings.clear();
        const FindingsView view(packed);
        EXPECT_EQ(render_prometheus(*s, summary, view, {}), render_prometheus(*s, d, {})) << name;
        nlohmann::json extra = {{"agent", {{"x", 1}}}};
        const std::string json = diagnosis_json_text(*s, d, extra);
        for (bool verbose : {false, true})
            for (auto format : {ReportFormat::text, ReportFormat::json, ReportFormat::prom, ReportFormat::slurm,
                                ReportFormat::npd, ReportFormat::nagios}) {
                RenderOptions o{.verbose = verbose};
                auto whole = render_report(*s, d, format, o, {});
                auto from_pack = render_report(*s, summary, view, format, o, {});
                EXPECT_EQ(from_pack.text, whole.text) << name << " " << name_of(format);
                EXPECT_EQ(from_pack.exit_code, whole.exit_code) << name << " " << name_of(format);
            }
        const std::string page = render_node_page_html(node_page_of(*s, d));
        EXPECT_EQ(render_node_page_html(node_page_of(*s, summary, packed)), page) << name;
        for (size_t piece : {size_t{1}, size_t{4096}}) {
            EXPECT_EQ(joined(diagnosis_json_pieces(*s, summary, extra, view), piece), json) << name;
            EXPECT_EQ(joined(diagnosis_text_pieces(*s, summary, view, {.verbose = true}), piece),
                      render_diagnosis_text(*s, d, {.verbose = true})) << name;
            NodePage from_pack = node_page_of(*s, summary, packed);
            EXPECT_EQ(joined(node_page_html_pieces(from_pack), piece), page) << name;
        }
        ++diagnoses;
        findings += d.findings.size();
    }
    EXPECT_GT(diagnoses, 20u);
    EXPECT_GT(findings, 100u);
}

TEST(PackedFindings, EveryFieldReadsBackIncludingTheRareOnes) {
    Finding a{.id = "slurm.process_on_foreign_gpu", .layer = Layer::allocation, .severity = Severity::warning};
    a.subjects = {{"GPU-5bd41b7c-8a07-7c1a-30c4-3c5f4cc3b8a1", "0000:00:06.0"},
                  {"", "0000:05:00.0", SubjectKind::nvswitch}};
    a.message = "a message";
    a.evidence = {{"/proc/4242/environ", "CUDA_VISIBLE_DEVICES=1"}, {"", ""}, {"nvidia-smi", std::string(70000, 'v')}};
    a.next_step = "a next step";
    a.process = ProcessRef{4242, "python3", "alice", "docker 3f2a9c0d1e4b", "17"};
    a.followed_by = {"kernel_log.xid", "driver.nvml_unreachable"};
    Finding b{.id = "pcie.link_degraded", .layer = Layer::pcie, .severity = Severity::error};  // nothing else set
    Finding c = a;
    c.process = ProcessRef{7, "", "", "", ""};
    std::vector<Finding> given = {a, b, c};
    PackedFindings packed(given);
    EXPECT_EQ(as_json(packed.unpack()), as_json(given));
    Finding back = packed.at(0);
    ASSERT_TRUE(back.process.has_value());
    EXPECT_EQ(back.process->job, "17");
    EXPECT_EQ(back.subjects.at(1).kind, SubjectKind::nvswitch);
    // The views a reader of ids and subjects takes instead of a whole finding.
    EXPECT_EQ(packed.id(0), "slurm.process_on_foreign_gpu");
    ASSERT_EQ(packed.subject_count(0), 2u);
    EXPECT_EQ(packed.subject(0, 0),
              (SubjectView{"GPU-5bd41b7c-8a07-7c1a-30c4-3c5f4cc3b8a1", "0000:00:06.0", SubjectKind::gpu}));
    EXPECT_EQ(packed.subject(0, 1), (SubjectView{"", "0000:05:00.0", SubjectKind::nvswitch}));
    EXPECT_EQ(packed.subject_count(1), 0u);
    EXPECT_THROW(packed.subject(1, 0), std::out_of_range);
    EXPECT_FALSE(packed.at(1).process.has_value());
    EXPECT_EQ(packed.at(2).process->pid, 7);
    EXPECT_THROW(packed.at(3), std::out_of_range);
    EXPECT_TRUE(PackedFindings().empty());
    EXPECT_TRUE(PackedFindings(std::vector<Finding>{}).unpack().empty());
}

// An Xid storm: a finding per GPU, each with the same next step and catalogue evidence. Packed, those are held once.
TEST(PackedFindings, AStormsSharedTextsAreHeldOnce) {
    const std::string next_step(500, 'n'), catalogue(300, 'c');
    std::vector<Finding> storm;
    for (int i = 0; i < 1000; ++i) {
        Finding f{.id = "kernel_log.xid", .layer = Layer::kernel_log, .severity = Severity::error};
        std::string pci = fmt::format("0000:{:02x}:{:02x}.0", i / 32, i % 32);
        f.subjects = {{"", pci}};
        f.message = "Xid 79 on GPU at " + pci;
        f.evidence = {{"/var/log/kern.log", "NVRM: Xid (PCI:" + pci + "): 79"}, {"NVIDIA Xid catalog", catalogue}};
        f.next_step = next_step;
        storm.push_back(std::move(f));
    }
    PackedFindings packed(storm);
    EXPECT_EQ(as_json(packed.unpack()), as_json(storm));
    size_t shared = 1000 * (next_step.size() + catalogue.size());
    EXPECT_LT(packed.held_bytes(), shared / 4) << packed.held_bytes();
}

}  // namespace GPUDX_UNITY_ID
}  // namespace gpudx
