#pragma once
// What a check concludes: a stable id, the layer, a severity, the GPUs it concerns (UUID and PCI
// address, never a bare index), the evidence with where each value came from, and what to do next.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/heap_optional.hpp"

namespace gpudx {

// Bottom-up order matters: the failure boundary is the lowest layer with an error.
enum class Layer { pcie, module, kernel_log, libraries, devices, driver, container, allocation };
inline constexpr Layer kAllLayers[] = {Layer::pcie,    Layer::module, Layer::kernel_log, Layer::libraries,
                                       Layer::devices, Layer::driver, Layer::container,  Layer::allocation};

enum class Severity { info, warning, error };

// What a finding is about: a GPU, or an NVSwitch (an SXid names the switch, which has a PCI address and no
// UUID a user sees).
enum class SubjectKind { gpu, nvswitch };

struct GpuRef {
    std::string uuid;  // empty when no source knows it
    std::string pci;   // normalised address
    SubjectKind kind = SubjectKind::gpu;
    auto operator<=>(const GpuRef&) const = default;
};

// A subject's names as views into findings held elsewhere (model/findings_view.hpp), valid while they live.
struct SubjectView {
    std::string_view uuid, pci;
    SubjectKind kind = SubjectKind::gpu;
    bool operator==(const SubjectView&) const = default;
};

// "gpu" or "nvswitch": the label a report puts before the subject.
const char* subject_label(const GpuRef& g);
const char* subject_label(SubjectKind k);

// The process a finding is about (`gpudx diagnose --pid`): every output names it beside the finding.
struct ProcessRef {
    int pid = 0;
    std::string command;    // /proc/PID/comm
    std::string user;       // name, else "uid N"; empty when unknown
    std::string container;  // runtime and id ("docker 3f2a9c0d1e4b"); empty when not in one
    std::string job;        // Slurm job id; empty when none
};

struct Evidence {
    std::string source;  // file path or driver call
    std::string value;   // the exact value seen there
};

// Rules build findings through their declaration (rules/engine/rule.hpp), which sets the id, layer and severity.
struct Finding {
    std::string id;  // stable: "libs.version_mismatch"
    Layer layer = Layer::pcie;
    Severity severity = Severity::info;
    std::vector<GpuRef> subjects;
    std::string message;
    std::vector<Evidence> evidence;
    std::string next_step;
    HeapOptional<ProcessRef> process;  // set by the per-process rules only: on the heap (core/heap_optional.hpp)
    // `gpudx explain`: the findings of the same text this one caused, folded into it (rules/reference/consequences.hpp).
    std::vector<std::string> followed_by;
};

const char* to_string(Layer l);
const char* to_string(Severity s);
std::optional<Layer> parse_layer(std::string_view s);
std::optional<Severity> parse_severity(std::string_view s);
// One line naming a GPU: "GPU-7e37... (0000:00:06.0)".
std::string describe(const GpuRef& g);
// "pid 4242 (python, user alice, container docker 3f2a9c0d1e4b, job 17)".
std::string describe(const ProcessRef& p);
// The finding as every JSON output writes it (docs/output-formats.md).
nlohmann::json finding_to_json(const Finding& f);
// Reads back what finding_to_json wrote (the agent's saved state); nullopt when the id, layer or severity is
// missing or unknown.
std::optional<Finding> finding_from_json(const nlohmann::json& j);

}  // namespace gpudx
