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
    std::string text(Text t) const { return std::string(std::string_view(texts_).substr(t.offset, t.size)); }

    std::string texts_;
    std::vector<Record> records_;
    std::vector<Subject> subjects_;
    std::vector<Proof> evidence_;
    std::vector<Text> followed_by_;
    std::vector<Process> processes_;
};

}  // namespace gpudx
