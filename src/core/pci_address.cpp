#include "core/pci_address.hpp"

#include <fmt/format.h>

#include "core/text.hpp"

namespace gpudx {

std::optional<PciAddress> PciAddress::parse(std::string_view text) {
    text = trim(text);
    if (text.empty() || text.size() > 32) return std::nullopt;
    // Split on ':' and '.'; the last field is the function unless only three fields came with no '.'.
    std::string s(text);
    for (auto& c : s)
        if (c == '.') c = ':';
    auto fields = split(s, ':');
    bool has_function = text.find('.') != std::string_view::npos;
    std::string_view dom = "0", bus, dev, fn = "0";
    if (has_function && fields.size() == 4) {
        dom = fields[0]; bus = fields[1]; dev = fields[2]; fn = fields[3];
    } else if (has_function && fields.size() == 3) {
        bus = fields[0]; dev = fields[1]; fn = fields[2];
    } else if (!has_function && fields.size() == 3) {
        dom = fields[0]; bus = fields[1]; dev = fields[2];
    } else {
        return std::nullopt;
    }
    if (dom.empty() || dom.size() > 8 || bus.empty() || bus.size() > 2 || dev.empty() || dev.size() > 2 ||
        fn.size() != 1)
        return std::nullopt;
    auto d = parse_uint(dom, 16), b = parse_uint(bus, 16), v = parse_uint(dev, 16), f = parse_uint(fn, 16);
    if (!d || !b || !v || !f || *v > 0x1f || *f > 7) return std::nullopt;
    // NVML pads the domain to eight digits; only the low 16 bits are a PCI domain on Linux.
    if (*d > 0xffffffffULL) return std::nullopt;
    return PciAddress{static_cast<uint32_t>(*d), static_cast<uint8_t>(*b), static_cast<uint8_t>(*v),
                      static_cast<uint8_t>(*f)};
}

std::string PciAddress::str() const { return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function); }

std::string normalize_pci(std::string_view text) {
    auto a = PciAddress::parse(text);
    return a ? a->str() : std::string(text);
}

}  // namespace gpudx
