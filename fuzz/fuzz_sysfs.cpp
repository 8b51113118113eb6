// sysfs attribute files of a PCI device (collect/pcie.hpp) and the small host files (collect/host.hpp).
#include "collect/host.hpp"
#include "collect/pcie.hpp"
#include "core/root.hpp"
#include "fuzz.hpp"
#include "model/layer_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto in = fuzz::text(data, size);

    (void)parse_link_speed(in);
    (void)parse_sysfs_hex(in);
    (void)parent_from_sysfs_path(in);
    (void)link_basename(in);
    (void)parse_secure_boot_efivar(in);

    PciDevice d;
    d.aer_correctable = parse_aer_counters(in);
    auto u = parse_pci_uevent(in);
    d.driver = u.driver;
    d.vendor_id = u.vendor_id;
    d.device_id = u.device_id;
    d.class_code = u.class_code;
    if (u.vendor_id && u.class_code) {
        (void)is_gpu_class(*u.vendor_id, *u.class_code);
        (void)is_nvswitch_class(*u.vendor_id, *u.class_code);
    }
    PcieLayer layer;
    layer.devices.push_back(std::move(d));
    nlohmann::json j;
    layer_to_json(j, layer);
    fuzz::require_printable(j);

    HostInfo host;
    host.os_release = parse_os_release_pretty_name(in);
    host.kernel_version = parse_kernel_version_from_proc_version(in);
    host.kernel_release = parse_kernel_release_from_proc_version(in);
    nlohmann::json h;
    layer_to_json(h, host);
    fuzz::require_printable(h);
    return 0;
}
