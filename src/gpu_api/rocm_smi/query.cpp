// Runs in the ROCm SMI probe child: every call announced on the channel first, so a hang names it.
// Read-only queries only: nothing here sets a clock, a power cap or a partition mode.
#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "core/pci_address.hpp"
#include "gpu_api/probe.hpp"
#include "gpu_api/queries.hpp"
#include "gpu_api/rocm_smi/api.hpp"

namespace gpudx {

namespace {

struct RocmSmi {
    using Api = RocmSmiApi;
    using Code = rsmi::Status;
    static constexpr std::string_view name = "librocm_smi64";
    static bool succeeded(Code rc) { return rc == rsmi::SUCCESS; }
    static bool unsupported(Code rc) { return rc == rsmi::NOT_SUPPORTED || rc == rsmi::NOT_YET_IMPLEMENTED; }
};

std::string cstr(const char* buf, size_t n) { return std::string(trim(library_string(buf, n))); }

class RocmSmiDeviceQuery {
public:
    // `addressed` is called once the device's PCI address is known, to publish it before the slower queries.
    RocmSmiDeviceQuery(const RocmSmiApi& api, ProbeChannel& ch, RocmSmiDevice& dev, std::function<void()> addressed)
        : api_(api), calls_(api, ch, dev.index, dev.unsupported, dev.errors), dev_(dev), addressed_(std::move(addressed)) {}

    void run() {
        const uint32_t i = dev_.index;
        uint64_t v = 0;
        if (calls_.ask("rsmi_dev_pci_id_get", api_.pci_id, [&] { return api_.pci_id(i, &v); })) {
            dev_.bdfid = v;
            auto b = rsmi::decode_bdfid(v);
            // Partitions of one MI GPU share its PCI function 0; some parts put the partition in the function bits.
            dev_.pci = PciAddress{b.domain, static_cast<uint8_t>(b.bus), static_cast<uint8_t>(b.device), 0}.str();
            unsigned partition = b.partition ? b.partition : b.function;
            if (partition) dev_.partition = partition;
        }
        addressed_();
        if (calls_.ask("rsmi_dev_unique_id_get", api_.unique_id, [&] { return api_.unique_id(i, &v); }) && v)
            dev_.unique_id = fmt::format("{:016x}", v);
        char buf[256] = {};
        if (calls_.ask("rsmi_dev_name_get", api_.name, [&] { return api_.name(i, buf, sizeof buf); }))
            dev_.name = cstr(buf, sizeof buf);
        if (calls_.ask("rsmi_dev_serial_number_get", api_.serial, [&] { return api_.serial(i, buf, sizeof buf); }))
            dev_.serial = cstr(buf, sizeof buf);
        if (calls_.ask("rsmi_dev_vbios_version_get", api_.vbios, [&] { return api_.vbios(i, buf, sizeof buf); }))
            dev_.vbios_version = cstr(buf, sizeof buf);
        uint32_t u = 0;
        if (calls_.ask("rsmi_dev_drm_render_minor_get", api_.render_minor, [&] { return api_.render_minor(i, &u); }))
            dev_.render_minor = u;
        if (calls_.ask("rsmi_dev_xgmi_hive_id_get", api_.hive_id, [&] { return api_.hive_id(i, &v); }) && v)
            dev_.xgmi_hive_id = fmt::format("{:016x}", v);
        if (calls_.ask("rsmi_dev_memory_total_get", api_.memory_total,
                [&] { return api_.memory_total(i, rsmi::MEM_TYPE_VRAM, &v); }))
            dev_.vram_total = v;
        query_ecc();
    }

private:
    void query_ecc() {
        uint64_t enabled = 0;
        if (!calls_.ask("rsmi_dev_ecc_enabled_get", api_.ecc_enabled, [&] { return api_.ecc_enabled(dev_.index, &enabled); }))
            return;
        dev_.ecc_enabled_blocks = enabled;
        for (const auto& block : rsmi::kEccBlocks) {
            if (!(enabled & block.bit)) continue;
            if (!api_.ecc_count) {
                calls_.not_in_library("rsmi_dev_ecc_count_get");
                return;
            }
            rsmi::ErrorCount counts;
            calls_.announce("rsmi_dev_ecc_count_get", block.name);
            rsmi::Status rc = api_.ecc_count(dev_.index, block.bit, &counts);
            if (calls_.file(fmt::format("rsmi_dev_ecc_count_get({})", block.name), rc))
                dev_.ecc.push_back({block.name, counts.correctable_err, counts.uncorrectable_err});
        }
    }

    const RocmSmiApi& api_;
    DeviceCalls<RocmSmi, ProbeChannel> calls_;
    RocmSmiDevice& dev_;
    std::function<void()> addressed_;
};

}  // namespace

void query_rocm_smi(const RocmSmiQueryOptions& options, ProbeChannel& ch) {
    RocmSmiLayer layer;
    layer.probed = true;
    ch.progress("dlopen(librocm_smi64.so)");
    auto opened = RocmSmiApi::open(options.library_dir);
    if (!opened) {
        layer.load_error = opened.error().message;
        send_layer(ch, layer);
        return;
    }
    const RocmSmiApi& api = *opened;
    layer.library_path = api.library.path();
    if (!api.init) {
        layer.load_error = "rsmi_init not found in " + api.library.path();
        send_layer(ch, layer);
        return;
    }
    ch.progress("rsmi_init");
    rsmi::Status rc = api.init(0);
    layer.init_result = rc;
    if (rc != rsmi::SUCCESS) {
        layer.init_error = api.describe(rc);
        send_layer(ch, layer);
        return;
    }
    if (api.version) {
        rsmi::Version v;
        ch.progress("rsmi_version_get");
        if (api.version(&v) == rsmi::SUCCESS) layer.library_version = fmt::format("{}.{}.{}", v.major, v.minor, v.patch);
    }
    if (api.version_str) {
        char buf[256] = {};
        ch.progress("rsmi_version_str_get(RSMI_SW_COMP_DRIVER)");
        if (api.version_str(rsmi::SW_COMP_DRIVER, buf, sizeof buf) == rsmi::SUCCESS)
            layer.driver_version = cstr(buf, sizeof buf);
    }
    uint32_t count = 0;
    ch.progress("rsmi_num_monitor_devices");
    rc = api.count ? api.count(&count) : rsmi::NOT_YET_IMPLEMENTED;
    if (rc != rsmi::SUCCESS) {
        layer.init_error = "rsmi_num_monitor_devices: " + api.describe(rc);
        send_layer(ch, layer);
        return;
    }
    layer.device_count = count;
    send_layer(ch, layer);
    layer.devices.reserve(std::min<uint32_t>(count, 1024));
    for (uint32_t i = 0; i < count && i < 1024; ++i) {
        // Results so far, this device included once its address is read: when a call hangs, the devices
        // already read are kept and the finding can name the GPU the hung call was about.
        auto& dev = layer.devices.emplace_back();
        dev.index = i;
        RocmSmiDeviceQuery(api, ch, dev, [&] { send_layer(ch, layer); }).run();
        send_layer(ch, layer);
    }
}

}  // namespace gpudx
