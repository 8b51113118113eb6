#include <fmt/format.h>

#include "checks/check_context.hpp"

namespace gpudx {

void check_pcie(const CheckContext& ctx, std::vector<Finding>& out) {
    const auto& s = ctx.snapshot;
    auto* st = s.collector("pcie");
    if (!st || st->state == CollectorState::error || st->state == CollectorState::timed_out) return;
    if (s.pcie.gpus.empty()) {
        Finding f;
        f.id = "pcie.no_gpu";
        f.layer = Layer::pcie;
        f.severity = Severity::error;
        f.message = fmt::format("no GPU on the PCIe bus: {} PCI devices, none of display class from NVIDIA or AMD",
                                s.pcie.devices.size());
        f.evidence.push_back({"/sys/bus/pci/devices", fmt::format("{} devices, 0 GPUs", s.pcie.devices.size())});
        f.next_step = "If this node should have GPUs: check that the cards are seated and powered, the BIOS "
                      "enables the slots (above-4G decoding), and that a VM passes them through.";
        out.push_back(std::move(f));
    }
}

}  // namespace gpudx
