#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudx {

struct PcieLink {
    std::optional<double> speed_gts;  // "32.0 GT/s PCIe" -> 32.0
    std::optional<uint32_t> width;
    std::string speed_text;           // as the kernel wrote it
};

// The AER counter files of one device as read once: each file's lines by counter name ("RxErr" -> 0,
// "TOTAL_ERR_COR" -> 5). A map left empty: the file was absent (a kernel before 5.6, or no AER capability).
struct AerCounters {
    std::map<std::string, uint64_t> fatal, nonfatal, correctable;  // aer_dev_fatal, aer_dev_nonfatal, aer_dev_correctable
    // Root ports only: aer_rootport_total_err_{cor,fatal,nonfatal}, each one number for the whole hierarchy below,
    // by the file's name less "aer_rootport_" ("total_err_cor").
    std::map<std::string, uint64_t> rootport;
};

// Ids, class, driver, NUMA node, slot and parent for every device; revision, link, AER and IOMMU group only
// for NVIDIA/AMD functions and bridges (the rest would cost a syscall round each on servers with hundreds).
struct PciDevice {
    std::string address;  // normalised dddd:bb:dd.f
    std::optional<uint32_t> vendor_id, device_id, subsystem_vendor_id, subsystem_device_id;
    std::optional<uint32_t> class_code;  // 24 bits, e.g. 0x030200
    std::optional<uint32_t> revision;
    std::string vendor_name, device_name;  // from pci.ids when installed
    std::string driver;                    // bound driver, empty when none
    std::optional<int32_t> numa_node;
    PcieLink link_current, link_max;
    std::map<std::string, uint64_t> aer_fatal, aer_nonfatal, aer_correctable;  // counter name -> value
    std::map<std::string, uint64_t> aer_rootport;  // root ports: "total_err_cor" ... (AerCounters::rootport)
    // The same AER files read again PcieLayer::aer_sample_interval_ms later, when the first reading of any device
    // showed an error; absent when no second reading was taken (all zero, or a replay that recorded none).
    std::optional<AerCounters> aer_later;
    std::optional<uint32_t> iommu_group;
    std::string slot;   // physical slot name from /sys/bus/pci/slots/*/address
    std::string parent; // upstream bridge address, empty at a root port
    bool config_unreadable = false;  // vendor read 0xffff: the device fell off the bus
    bool is_gpu = false;             // display class of NVIDIA or AMD, or an AMD processing accelerator (0x1200)
    bool is_nvswitch = false;        // NVIDIA bridge class 0x0680
};

struct PcieLayer {
    std::vector<PciDevice> devices;  // every device, sorted by address
    std::vector<std::string> gpus;   // addresses of GPUs
    std::vector<std::string> nvswitches;
    // How long after the first the second AER reading was taken; absent when none was (docs/host-health.md).
    std::optional<double> aer_sample_interval_ms;
};

// The device at `address`, or nullptr.
const PciDevice* find_pci_device(const PcieLayer& l, std::string_view address);
// The device and every bridge above it to its root port, itself first; empty when the address is not on the bus. At
// most 32 hops, so a parent loop in a damaged snapshot ends.
std::vector<const PciDevice*> pcie_path_up(const PcieLayer& l, std::string_view address);
// The total of an AER file's counters: its TOTAL_ERR_* line, else the sum of the named counters (0 when empty).
uint64_t aer_total(const std::map<std::string, uint64_t>& counters);

}  // namespace gpudx
