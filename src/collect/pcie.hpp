#pragma once
// Pure parsers behind collect_pcie (collectors.hpp), exposed for unit tests.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "model/pcie.hpp"

namespace gpudx {

// "32.0 GT/s PCIe" / "8 GT/s" / "2.5 GT/s" -> GT/s; "Unknown" or garbage -> nullopt (text kept by the caller).
std::optional<double> parse_link_speed(std::string_view text);
// aer_dev_{fatal,nonfatal,correctable}: "NAME COUNT" per line, TOTAL_ERR_* lines included. Bad lines skipped.
std::map<std::string, uint64_t> parse_aer_counters(std::string_view text);
// A sysfs hex attribute ("0x10de\n") -> value; nullopt unless the whole trimmed text parses.
std::optional<uint32_t> parse_sysfs_hex(std::string_view text);
// The identity lines of a PCI device's uevent file (PCI_ID, PCI_SUBSYS_ID, PCI_CLASS, DRIVER): one read
// instead of five for every device.
struct PciUevent {
    std::optional<uint32_t> vendor_id, device_id, subsystem_vendor_id, subsystem_device_id, class_code;
    std::string driver;
};
PciUevent parse_pci_uevent(std::string_view text);
// GPU classification by class code and vendor: display class (0x0300, 0x0302, 0x0380) of NVIDIA or AMD, and
// AMD's processing accelerators (0x1200: Instinct MI300 and later).
bool is_gpu_class(uint32_t vendor, uint32_t class_code);
// NVIDIA bridge class 0x0680: NVSwitch, never counted as a GPU.
bool is_nvswitch_class(uint32_t vendor, uint32_t class_code);
// Upstream bridge from a sysfs device path or the target of its /sys/bus/pci/devices link
// ("../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0" -> "0000:00:01.0"); empty on a root bus.
std::string parent_from_sysfs_path(std::string_view path);

inline constexpr uint32_t kVendorNvidia = 0x10de;
inline constexpr uint32_t kVendorAmd = 0x1002;

}  // namespace gpudx
