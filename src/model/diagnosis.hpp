#pragma once
// What a diagnosis concludes: the findings, a state per layer, the failure boundary and a verdict. The rule
// engine (rules/engine/diagnose.hpp) fills it; renderers, baselines and the agent read it.
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/named_enum.hpp"
#include "core/pieced_text.hpp"
#include "model/finding.hpp"
#include "model/findings_view.hpp"

namespace gpudx {

enum class LayerState { ok, warning, failed, not_evaluated };
const char* to_string(LayerState s);

struct LayerReport {
    Layer layer = Layer::pcie;
    LayerState state = LayerState::ok;
    std::string reason;   // for not_evaluated: why; otherwise a one-line summary
    bool trusted = true;  // false above the failure boundary
    // not_evaluated because its evidence could not be read (a layer every node has, or a collector that
    // failed), not because it is absent here: the verdict cannot be healthy while one is.
    bool unreadable = false;
    unsigned errors = 0, warnings = 0;
};

// Exit codes scripts rely on (README.md, "Exit codes"). kExitIoError (sysexits' EX_IOERR): the report could not
// be written whole (standard output or the named file failed: a full disk, an I/O error), so whatever a reader
// got is no verdict.
enum ExitCode : int {
    kExitHealthy = 0,
    kExitErrors = 1,
    kExitWarnings = 2,
    kExitUnknown = 3,
    kExitUsage = 64,
    kExitIoError = 74
};

// What a diagnosis concludes about the node. unknown: "could not evaluate": nothing read, or a layer unreadable
// and no error found in the others.
enum class Verdict { healthy, degraded, unhealthy, unknown };
inline constexpr EnumName<Verdict> kVerdicts[] = {{Verdict::healthy, "healthy"},
                                                  {Verdict::degraded, "degraded"},
                                                  {Verdict::unhealthy, "unhealthy"},
                                                  {Verdict::unknown, "unknown"}};
constexpr std::span<const EnumName<Verdict>> enum_names(Verdict) { return kVerdicts; }

struct Diagnosis {
    std::vector<Finding> findings;  // errors first, then warnings, then info; bottom layer first within each
    std::vector<LayerReport> layers;  // bottom-up
    std::optional<Layer> boundary;    // lowest layer with an error
    Verdict verdict = Verdict::unknown;
    int exit_code = kExitHealthy;
};

// `d`'s verdict, layers and boundary with only the first `n` of `findings` (the most severe first): what a reader of
// the first few needs, from findings held elsewhere (the agent's pack) or from `d`'s own.
Diagnosis with_first_findings(const Diagnosis& d, FindingsView findings, size_t n);

// The layers marked unreadable, bottom-up, as reports name them ("pcie, kernel_log"); empty when none.
std::string unreadable_layers(const Diagnosis& d);

struct Snapshot;
// The diagnosis of a snapshot as JSON (docs/output-formats.md); every other format is render/'s.
nlohmann::json diagnosis_to_json(const Snapshot& s, const Diagnosis& d);
// The text of diagnosis_to_json(s, d) with `extra`'s keys added (the agent's status), indented by 2: the same bytes,
// made a finding at a time instead of from one tree of every finding (an agent holding a storm's thousands).
std::string diagnosis_json_text(const Snapshot& s, const Diagnosis& d, const nlohmann::json& extra);
// The same text in pieces (core/pieced_text.hpp), the findings read from `findings` one at a time as the pieces are
// asked for (`d`'s own are not read): the agent's /v1/status, sent as it is made from its pack. The snapshot and `d`
// are read before this returns; `findings` must outlive the pieces.
PiecedText diagnosis_json_pieces(const Snapshot& s, const Diagnosis& d, const nlohmann::json& extra,
                                 FindingsView findings);

}  // namespace gpudx
