#pragma once
// PCI addresses as every source spells them: sysfs "0000:00:06.0", CUDA "0000:00:06.0" (upper case),
// NVML "00000000:00:06.0", old procfs "0000:00:06.0" or with a dot. Compare parsed, never as text.
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpudx {

struct PciAddress {
    uint32_t domain = 0;
    uint8_t bus = 0;
    uint8_t device = 0;
    uint8_t function = 0;

    // Accepts "dddd:bb:dd.f", "dddddddd:bb:dd.f", "bb:dd.f", "dddd:bb:dd" and "dddd.bb.dd.f"/"dddd:bb.dd.f" forms,
    // either case, surrounding blanks. Returns nullopt for anything else.
    static std::optional<PciAddress> parse(std::string_view text);
    // Normalised "dddd:bb:dd.f", lower case.
    std::string str() const;
    auto operator<=>(const PciAddress&) const = default;
};

// Normalised form of a bus-id string, or the input unchanged when it does not parse.
std::string normalize_pci(std::string_view text);

}  // namespace gpudx
