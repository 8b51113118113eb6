#pragma once
// The fallback for GPU-component lines no rule knows: a line of the NVIDIA or AMD kernel drivers (or their
// companions: nvidia-nvswitch, nvidia-peermem, nvidia-uvm/-drm/-modeset, the fabric manager, kfd) that says it
// failed, timed out, faulted, hung, reset or returned a negative errno. No signature can list every such line a
// driver prints, and an operator must never see one pass in silence; lines known to be harmless are catalogued
// as `ignore` signatures, so a healthy node stays healthy (docs/signatures.md, "The fallback").
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudx {

struct ComponentFailureLine {
    std::string component;  // "NVRM", "nvidia-peermem", "amdgpu", ...
    std::string pci;        // the first PCI address the line names, normalised; empty when none
    std::string word;       // the failure word that made it one: "failed", "timeout", "-110", ...
};

// The component and failure word of a line, or nullopt when the line is not a GPU component's, says none of
// the failure words, or is one the kernel-log parser reports by its own rules (Xid, SXid, AER, IOMMU faults,
// a GPU fallen off the bus, module signatures).
std::optional<ComponentFailureLine> component_failure_line(std::string_view line);

// The words the kernel-log scanner must keep lines for (beyond NVRM, amdgpu and kfd, which it always keeps) so
// that the companions' lines reach the fallback.
std::vector<std::string> component_gate_words();

}  // namespace gpudx
