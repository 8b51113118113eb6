#pragma once
// The findings a renderer reads, one at a time, wherever they are held: a diagnosis's own vector, or the agent's
// pack (model/packed_findings.hpp). A renderer over a view reads a storm's thousands of packed findings one at a
// time, never all of them back at once; over a diagnosis's vector it reads them where they are.
#include <cstddef>
#include <string_view>
#include <vector>

#include "model/finding.hpp"
#include "model/packed_findings.hpp"

namespace gpudx {

class FindingsView {
public:
    explicit FindingsView(const std::vector<Finding>& findings) : whole_(&findings) {}
    explicit FindingsView(const PackedFindings& pack) : pack_(&pack) {}

    size_t size() const { return whole_ ? whole_->size() : pack_->size(); }
    bool empty() const { return size() == 0; }
    Severity severity(size_t i) const { return whole_ ? whole_->at(i).severity : pack_->severity(i); }
    // How many are of severity `s`.
    size_t count(Severity s) const {
        size_t n = 0;
        for (size_t i = 0; i < size(); ++i) n += severity(i) == s;
        return n;
    }
    Layer layer(size_t i) const { return whole_ ? whole_->at(i).layer : pack_->layer(i); }
    std::string_view id(size_t i) const { return whole_ ? std::string_view(whole_->at(i).id) : pack_->id(i); }
    size_t subject_count(size_t i) const { return whole_ ? whole_->at(i).subjects.size() : pack_->subject_count(i); }
    SubjectView subject(size_t i, size_t k) const {
        if (!whole_) return pack_->subject(i, k);
        const GpuRef& g = whole_->at(i).subjects.at(k);
        return {g.uuid, g.pci, g.kind};
    }
    // fn(const Finding&) with the i-th finding: the vector's own, or one read back from the pack, alive for the call.
    template <typename Fn>
    decltype(auto) with(size_t i, Fn&& fn) const {
        if (whole_) return fn(whole_->at(i));
        return fn(pack_->at(i));
    }

private:
    const std::vector<Finding>* whole_ = nullptr;
    const PackedFindings* pack_ = nullptr;
};

}  // namespace gpudx
