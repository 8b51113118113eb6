// How the verify report names its verdicts and bus ids.
#include "model/verify.hpp"

#include "core/pci_address.hpp"

namespace gpudx {

std::string shown_or_unknown(std::string_view bus) { return bus.empty() || bus == "-" ? "unknown" : std::string(bus); }

std::string bus_or_empty(std::string_view text) {
    if (text.empty() || text == "-") return {};
    auto a = PciAddress::parse(text);
    return a ? a->str() : std::string(text);
}

std::string_view verdict_name(IdentityVerdict v) {
    switch (v) {
        case IdentityVerdict::consistent: return "consistent";
        case IdentityVerdict::corrected: return "corrected";
        case IdentityVerdict::inconsistent: return "inconsistent";
        case IdentityVerdict::unknown: return "unknown";
    }
    return "unknown";
}

}  // namespace gpudx
