#pragma once
// Fields NVIDIA's driver writes into two kinds of kernel-log line about NVLink, read by the kernel-log scanner
// (collect/) and the rules that judge its tallies (rules/): an NVLink 5 Xid (144-150) names the unit, the link and
// the error; an NVSwitch SXid line names the switch port. Pure functions over one message; no I/O.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpudx {

// The fields an NVLink 5 Xid (144-150) line carries after its code, as the driver writes them:
// "Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 ...)": the unit
// and sub-unit that raised it (RLW, RXPIPE), whether the driver found it fatal, the crossbar and instance, the
// link (-1: none in particular), then the interrupt info word and the error status word (NVIDIA's Xid catalog
// decodes the unit from the first and the error from the second; docs/kernel-log.md).
struct NvlinkXidDetail {
    std::string unit;     // "RLW", "NETIR", "SAW"
    std::string subunit;  // "RXPIPE", "LINK_EVT"; empty when the line names the unit alone
    std::optional<bool> fatal;  // "Fatal" / "Nonfatal"; nullopt when the line says neither
    std::string crossbar;       // "XC0"
    std::optional<int> instance;  // "i0"
    std::optional<int> link;      // "Link 13"; -1 as written when the error is not on one link
    std::optional<uint32_t> intrinfo, error_status;
    // "link 13, unit RLW/RXPIPE, Nonfatal, error status 0x00000008 (interrupt info 0x0409a0c2)"
    std::string describe() const;
    // What one finding groups on: unit, fatality and link ("RLW_RXPIPE Nonfatal Link 13").
    std::string key() const;
};
inline constexpr bool is_nvlink5_xid(int code) { return code >= 144 && code <= 150; }
// nullopt when the message is not an Xid 144-150 line in this form ("NVRM: " and any time prefix may come first).
std::optional<NvlinkXidDetail> parse_nvlink_xid(std::string_view message);

// The NVSwitch link (port) an SXid line names ("..., 20034, Fatal, Link 28 LTSSM Fault Up"), or nullopt.
std::optional<int> sxid_link(std::string_view message);

}  // namespace gpudx
