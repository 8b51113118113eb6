#pragma once
// Findings held for hours (the agent's published diagnosis, and the findings its ledger holds open) in a fraction
// of their memory. As `Finding`s, an Xid storm's 10,000 findings took 13 MB: each its own copy of the next step and
// of the catalogue's evidence, each string and vector its own allocation with the slack of its growth. Packed,
// every text is in one buffer and each distinct text is there once; the rest is a few flat arrays. A finding is
// read back whole, as a copy, when an answer or an event needs it (docs/agent.md, "The API at size").
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/finding.hpp"

namespace gpudx {

class PackedFindings {
public:
    PackedFindings() = default;
    // Throws std::length_error past 4 GiB of distinct text (offsets are 32 bits; a node's findings are megabytes).
    explicit PackedFindings(const std::vector<Finding>& findings);

    size_t size() const { return records_.size(); }
    bool empty() const { return records_.empty(); }
    // The i-th finding as it was given.
    Finding at(size_t i) const;
    std::vector<Finding> unpack() const;
    Layer layer(size_t i) const { return records_.at(i).layer; }
    Severity severity(size_t i) const { return records_.at(i).severity; }
    // The i-th finding's id and its subjects as views into the pack, valid while it lives: for a reader that needs
    // no whole finding (the agent's /metrics reads these of each, per scrape; its page, which findings name a GPU).
    std::string_view id(size_t i) const { return view(records_.at(i).id); }
    size_t subject_count(size_t i) const { return records_.at(i).subjects.end - records_.at(i).subjects.begin; }
    // Throws std::out_of_range past the finding's own subjects, as at() does past the findings.
    SubjectView subject(size_t i, size_t k) const;
    // The heap bytes it holds.
    size_t held_bytes() const;

private:
    struct Text {
        uint32_t offset = 0, size = 0;
    };
    struct Range {
        uint32_t begin = 0, end = 0;
    };
    struct Subject {
        Text uuid, pci;
        SubjectKind kind = SubjectKind::gpu;
    };
    struct Proof {
        Text source, value;
    };
    struct Process {
        int pid = 0;
        Text command, user, container, job;
    };
    static constexpr uint32_t kNoProcess = UINT32_MAX;
    struct Record {
        Text id, message, next_step;
        Range subjects, evidence, followed_by;
        uint32_t process = kNoProcess;
        Layer layer = Layer::pcie;
        Severity severity = Severity::info;
    };
    std::string_view view(Text t) const { return std::string_view(texts_).substr(t.offset, t.size); }
    std::string text(Text t) const { return std::string(view(t)); }

    std::string texts_;
    std::vector<Record> records_;
    std::vector<Subject> subjects_;
    std::vector<Proof> evidence_;
    std::vector<Text> followed_by_;
    std::vector<Process> processes_;
};

}  // namespace gpudx
