#include "model/packed_findings.hpp"

#include <cstring>
#include <limits>
#include <stdexcept>
#include <unordered_map>

namespace gpudx {

namespace {

uint32_t narrow(size_t n) {
    if (n > std::numeric_limits<uint32_t>::max()) throw std::length_error("findings too large to pack (over 4 GiB)");
    return static_cast<uint32_t>(n);
}

}  // namespace

PackedFindings::PackedFindings(const std::vector<Finding>& findings) {
    // Each distinct text gets its place in the buffer on first sight; the buffer is made once all are known, in
    // one allocation of the exact size (the views point into `findings`, which outlive this constructor's work).
    std::unordered_map<std::string_view, Text> placed;
    size_t total = 0;
    auto place = [&](const std::string& s) -> Text {
        if (s.empty()) return {};
        auto [it, inserted] = placed.try_emplace(s);
        if (inserted) {
            it->second = {narrow(total), narrow(s.size())};
            total += s.size();
        }
        return it->second;
    };
    size_t subjects = 0, evidence = 0, followed_by = 0, processes = 0;
    for (const auto& f : findings) {
        subjects += f.subjects.size();
        evidence += f.evidence.size();
        followed_by += f.followed_by.size();
        processes += f.process.has_value();
    }
    records_.reserve(findings.size());
    subjects_.reserve(subjects);
    evidence_.reserve(evidence);
    followed_by_.reserve(followed_by);
    processes_.reserve(processes);
    for (const auto& f : findings) {
        Record r{.id = place(f.id), .message = place(f.message), .next_step = place(f.next_step)};
        r.layer = f.layer;
        r.severity = f.severity;
        r.subjects.begin = narrow(subjects_.size());
        for (const auto& g : f.subjects) subjects_.push_back({place(g.uuid), place(g.pci), g.kind});
        r.subjects.end = narrow(subjects_.size());
        r.evidence.begin = narrow(evidence_.size());
        for (const auto& e : f.evidence) evidence_.push_back({place(e.source), place(e.value)});
        r.evidence.end = narrow(evidence_.size());
        r.followed_by.begin = narrow(followed_by_.size());
        for (const auto& id : f.followed_by) followed_by_.push_back(place(id));
        r.followed_by.end = narrow(followed_by_.size());
        if (f.process) {
            const ProcessRef& p = *f.process;
            r.process = narrow(processes_.size());
            processes_.push_back({p.pid, place(p.command), place(p.user), place(p.container), place(p.job)});
        }
        records_.push_back(r);
    }
    texts_.resize(total);
    for (const auto& [view, at] : placed) std::memcpy(texts_.data() + at.offset, view.data(), view.size());
}

Finding PackedFindings::at(size_t i) const {
    const Record& r = records_.at(i);
    Finding f;
    f.id = text(r.id);
    f.layer = r.layer;
    f.severity = r.severity;
    f.message = text(r.message);
    f.next_step = text(r.next_step);
    f.subjects.reserve(r.subjects.end - r.subjects.begin);
    for (uint32_t k = r.subjects.begin; k < r.subjects.end; ++k)
        f.subjects.push_back({text(subjects_[k].uuid), text(subjects_[k].pci), subjects_[k].kind});
    f.evidence.reserve(r.evidence.end - r.evidence.begin);
    for (uint32_t k = r.evidence.begin; k < r.evidence.end; ++k)
        f.evidence.push_back({text(evidence_[k].source), text(evidence_[k].value)});
    f.followed_by.reserve(r.followed_by.end - r.followed_by.begin);
    for (uint32_t k = r.followed_by.begin; k < r.followed_by.end; ++k) f.followed_by.push_back(text(followed_by_[k]));
    if (r.process != kNoProcess) {
        const Process& p = processes_[r.process];
        f.process = ProcessRef{p.pid, text(p.command), text(p.user), text(p.container), text(p.job)};
    }
    return f;
}

SubjectView PackedFindings::subject(size_t i, size_t k) const {
    if (k >= subject_count(i)) throw std::out_of_range("PackedFindings::subject: no such subject");
    const Subject& g = subjects_[records_.at(i).subjects.begin + k];
    return {view(g.uuid), view(g.pci), g.kind};
}

std::vector<Finding> PackedFindings::unpack() const {
    std::vector<Finding> out;
    out.reserve(size());
    for (size_t i = 0; i < size(); ++i) out.push_back(at(i));
    return out;
}

size_t PackedFindings::held_bytes() const {
    return texts_.capacity() + records_.capacity() * sizeof(Record) + subjects_.capacity() * sizeof(Subject) +
           evidence_.capacity() * sizeof(Proof) + followed_by_.capacity() * sizeof(Text) +
           processes_.capacity() * sizeof(Process);
}

}  // namespace gpudx
