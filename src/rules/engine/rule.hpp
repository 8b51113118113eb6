#pragma once
// A rule as its family declares it: the finding id, the layer it is filed under, its default severity, what it
// reads and one line saying what it finds. Each family keeps its rules in one table in its own file and builds
// every finding through a declared rule, so the id, layer and severity come from one place, and `gpudx rules`,
// docs/rules.md and the "every emitted id is declared" test all read the same tables.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/collector_status.hpp"
#include "model/finding.hpp"

namespace gpudx {


// A small set of enumerators, written in a table as {Layer::libraries, Layer::allocation}.
template <typename E>
class EnumSet {
public:
    constexpr EnumSet() = default;
    constexpr EnumSet(std::initializer_list<E> members) {
        for (E e : members) bits_ |= bit(e);
    }
    constexpr bool contains(E e) const { return (bits_ & bit(e)) != 0; }
    constexpr bool empty() const { return bits_ == 0; }

private:
    static constexpr uint32_t bit(E e) { return uint32_t{1} << static_cast<unsigned>(e); }
    uint32_t bits_ = 0;
};
using Collectors = EnumSet<Collector>;
using Layers = EnumSet<Layer>;

// What a rule is about beyond its layer, for a command that shows one subject. identity: which GPU is which (the
// sources disagree on a GPU's address or UUID, or a name the environment gives matches no GPU here): `gpudx ids`
// lists these findings under its table.
enum class RuleTag { identity };
using RuleTags = EnumSet<RuleTag>;

// What a finding says beyond its message: the GPUs it concerns, the evidence, what to do next.
struct FindingDetails {
    std::vector<GpuRef> subjects;
    std::vector<Evidence> evidence;
    std::string next_step;
};

// A finding's subjects for one GPU: none when no source named it (neither UUID nor PCI address known).
inline std::vector<GpuRef> subjects_of(const GpuRef& gpu) {
    if (gpu.pci.empty() && gpu.uuid.empty()) return {};
    return {gpu};
}

struct Rule {
    std::string_view id;  // stable: "libs.version_mismatch"
    // The layer its findings are filed under; none for gpudx.check_failed, filed under the failing family's.
    std::optional<Layer> layer;
    Severity severity;  // the default; a rule whose severity a policy or the evidence decides passes its own
    Collectors reads;
    std::string_view summary;
    RuleTags tags = {};
    // Further layers the cause can file a finding under (a cuInit failure caused by the libraries is theirs).
    Layers also_filed_under = {};

    bool files_under(Layer l) const { return layer == l || also_filed_under.contains(l); }

    // The finding, under the declared layer, with the declared severity or the one the rule decided.
    Finding finding(std::string message, FindingDetails details = {}) const;
    Finding finding(Severity actual, std::string message, FindingDetails details = {}) const;
    // The finding under one of the layers the rule declares; throws std::logic_error for any other, so a family
    // cannot file a rule where its declaration does not say (the engine reports that as gpudx.check_failed).
    Finding finding_in(Layer filed_under, Severity actual, std::string message, FindingDetails details = {}) const;
    // Moves a finding of this rule to another declared layer once its cause is known; throws as finding_in.
    void file_under(Finding& f, Layer filed_under) const;
};

// The rule a family's table declares under `id`; used in a constant expression, an id missing from the table
// does not compile. Each family wraps it: `consteval const Rule& rule(std::string_view id)`.
template <size_t N>
consteval const Rule& declared_rule(const Rule (&table)[N], std::string_view id) {
    for (const Rule& r : table)
        if (r.id == id) return r;
    throw "finding id not declared in this family's rule table";
}

}  // namespace gpudx
