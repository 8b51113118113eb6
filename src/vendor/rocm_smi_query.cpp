// Runs in the ROCm SMI probe child: every call announced on the channel first, so a hang names it.
// Read-only queries only: nothing here sets a clock, a power cap or a partition mode.
#include <algorithm>
#include <cstring>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "core/child_probe.hpp"
#include "vendor/library.hpp"
#include "vendor/queries.hpp"
#include "abi/rocm_smi.hpp"
#include "model/layer_json.hpp"

namespace gpudx {

namespace {

struct RocmSmiApi {
    rsmi::Init init = nullptr;
    rsmi::StatusString status_string = nullptr;
    rsmi::VersionGet version = nullptr;
    rsmi::VersionStrGet version_str = nullptr;
    rsmi::NumMonitorDevices count = nullptr;
    rsmi::DevU64 pci_id = nullptr, unique_id = nullptr, hive_id = nullptr, ecc_enabled = nullptr;
    rsmi::DevU32 render_minor = nullptr;
    rsmi::DevName name = nullptr;
    rsmi::DevString serial = nullptr, vbios = nullptr;
    rsmi::DevMemoryTotal memory_total = nullptr;
    rsmi::DevEccCount ecc_count = nullptr;

    explicit RocmSmiApi(const DriverLibrary& l) {
        init = l.get<rsmi::Init>("rsmi_init");
        status_string = l.get<rsmi::StatusString>("rsmi_status_string");
        version = l.get<rsmi::VersionGet>("rsmi_version_get");
        version_str = l.get<rsmi::VersionStrGet>("rsmi_version_str_get");
        count = l.get<rsmi::NumMonitorDevices>("rsmi_num_monitor_devices");
        pci_id = l.get<rsmi::DevU64>("rsmi_dev_pci_id_get");
        unique_id = l.get<rsmi::DevU64>("rsmi_dev_unique_id_get");
        hive_id = l.get<rsmi::DevU64>("rsmi_dev_xgmi_hive_id_get");
        ecc_enabled = l.get<rsmi::DevU64>("rsmi_dev_ecc_enabled_get");
        render_minor = l.get<rsmi::DevU32>("rsmi_dev_drm_render_minor_get");
        name = l.get<rsmi::DevName>("rsmi_dev_name_get");
        serial = l.get<rsmi::DevString>("rsmi_dev_serial_number_get");
        vbios = l.get<rsmi::DevString>("rsmi_dev_vbios_version_get");
        memory_total = l.get<rsmi::DevMemoryTotal>("rsmi_dev_memory_total_get");
        ecc_count = l.get<rsmi::DevEccCount>("rsmi_dev_ecc_count_get");
    }

    std::string describe(rsmi::Status rc) const {
        const char* text = nullptr;
        if (status_string && status_string(rc, &text) != rsmi::SUCCESS) text = nullptr;
        return fmt::format("{} ({}{}{})", rsmi::status_name(rc), rc, text ? ", " : "", text ? text : "");
    }
};

void send(ProbeChannel& ch, const RocmSmiLayer& layer) {
    nlohmann::json j;
    layer_to_json(j, layer);
    ch.result(j);
}

std::string cstr(const char* buf, size_t n) { return sanitize_utf8(trim(std::string_view(buf, strnlen(buf, n)))); }

// librocm_smi64's soname carries the ROCm generation (.so.7 in ROCm 6, .so.5 in ROCm 5); ROCm installs it
// under /opt/rocm/lib, which the loader's cache does not always name.
Result<DriverLibrary> open_library(const std::optional<std::string>& directory) {
    static constexpr std::string_view sonames[] = {"librocm_smi64.so.7", "librocm_smi64.so.6", "librocm_smi64.so.5",
                                                   "librocm_smi64.so"};
    std::optional<Error> first;
    auto attempt = [&](const std::optional<std::string>& dir) -> std::optional<DriverLibrary> {
        for (auto soname : sonames) {
            auto lib = DriverLibrary::open(soname, dir);
            if (lib) return std::move(*lib);
            if (!first) first = lib.error();
        }
        return std::nullopt;
    };
    if (directory) {
        if (auto lib = attempt(directory)) return std::move(*lib);
        return std::unexpected(*first);
    }
    if (auto lib = attempt(std::nullopt)) return std::move(*lib);
    if (auto lib = attempt(std::string("/opt/rocm/lib"))) return std::move(*lib);
    return std::unexpected(*first);
}

class DeviceQuery {
public:
    // `addressed` is called once the device's PCI address is known, to publish it before the slower queries.
    DeviceQuery(const RocmSmiApi& api, ProbeChannel& ch, RocmSmiDevice& dev, std::function<void()> addressed)
        : api_(api), ch_(ch), dev_(dev), addressed_(std::move(addressed)) {}

    // Announces the call, makes it, and files a failure; true when it succeeded.
    template <class Fn>
    bool ask(const char* call, bool available, Fn&& fn) {
        if (!available) {
            dev_.unsupported.push_back(fmt::format("{} (not in this librocm_smi64)", call));
            return false;
        }
        ch_.progress(fmt::format("{}({})", call, dev_.index));
        rsmi::Status rc = fn();
        if (rc == rsmi::SUCCESS) return true;
        if (rc == rsmi::NOT_SUPPORTED || rc == rsmi::NOT_YET_IMPLEMENTED)
            dev_.unsupported.push_back(call);
        else
            dev_.errors.push_back(fmt::format("{}: {}", call, api_.describe(rc)));
        return false;
    }

    void run() {
        const uint32_t i = dev_.index;
        uint64_t v = 0;
        if (ask("rsmi_dev_pci_id_get", api_.pci_id, [&] { return api_.pci_id(i, &v); })) {
            dev_.bdfid = v;
            auto b = rsmi::decode_bdfid(v);
            // Partitions of one MI GPU share its PCI function 0; some parts put the partition in the function bits.
            dev_.pci = PciAddress{b.domain, static_cast<uint8_t>(b.bus), static_cast<uint8_t>(b.device), 0}.str();
            unsigned partition = b.partition ? b.partition : b.function;
            if (partition) dev_.partition = partition;
        }
        addressed_();
        if (ask("rsmi_dev_unique_id_get", api_.unique_id, [&] { return api_.unique_id(i, &v); }) && v)
            dev_.unique_id = fmt::format("{:016x}", v);
        char buf[256] = {};
        if (ask("rsmi_dev_name_get", api_.name, [&] { return api_.name(i, buf, sizeof buf); }))
            dev_.name = cstr(buf, sizeof buf);
        if (ask("rsmi_dev_serial_number_get", api_.serial, [&] { return api_.serial(i, buf, sizeof buf); }))
            dev_.serial = cstr(buf, sizeof buf);
        if (ask("rsmi_dev_vbios_version_get", api_.vbios, [&] { return api_.vbios(i, buf, sizeof buf); }))
            dev_.vbios_version = cstr(buf, sizeof buf);
        uint32_t u = 0;
        if (ask("rsmi_dev_drm_render_minor_get", api_.render_minor, [&] { return api_.render_minor(i, &u); }))
            dev_.render_minor = u;
        if (ask("rsmi_dev_xgmi_hive_id_get", api_.hive_id, [&] { return api_.hive_id(i, &v); }) && v)
            dev_.xgmi_hive_id = fmt::format("{:016x}", v);
        if (ask("rsmi_dev_memory_total_get", api_.memory_total,
                [&] { return api_.memory_total(i, rsmi::MEM_TYPE_VRAM, &v); }))
            dev_.vram_total = v;
        query_ecc();
    }

private:
    void query_ecc() {
        uint64_t enabled = 0;
        if (!ask("rsmi_dev_ecc_enabled_get", api_.ecc_enabled, [&] { return api_.ecc_enabled(dev_.index, &enabled); }))
            return;
        dev_.ecc_enabled_blocks = enabled;
        for (const auto& block : rsmi::kEccBlocks) {
            if (!(enabled & block.bit)) continue;
            rsmi::ErrorCount counts;
            auto call = fmt::format("rsmi_dev_ecc_count_get({})", block.name);
            if (!api_.ecc_count) {
                dev_.unsupported.push_back("rsmi_dev_ecc_count_get (not in this librocm_smi64)");
                return;
            }
            ch_.progress(fmt::format("rsmi_dev_ecc_count_get({}, {})", dev_.index, block.name));
            rsmi::Status rc = api_.ecc_count(dev_.index, block.bit, &counts);
            if (rc == rsmi::SUCCESS)
                dev_.ecc.push_back({block.name, counts.correctable_err, counts.uncorrectable_err});
            else if (rc == rsmi::NOT_SUPPORTED || rc == rsmi::NOT_YET_IMPLEMENTED)
                dev_.unsupported.push_back(call);
            else
                dev_.errors.push_back(fmt::format("{}: {}", call, api_.describe(rc)));
        }
    }

    const RocmSmiApi& api_;
    ProbeChannel& ch_;
    RocmSmiDevice& dev_;
    std::function<void()> addressed_;
};

}  // namespace

void query_rocm_smi(const RocmSmiQueryOptions& options, ProbeChannel& ch) {
    RocmSmiLayer layer;
    layer.probed = true;
    ch.progress("dlopen(librocm_smi64.so)");
    auto lib = open_library(options.library_dir);
    if (!lib) {
        layer.load_error = lib.error().message;
        send(ch, layer);
        return;
    }
    layer.library_path = lib->path();
    RocmSmiApi api(*lib);
    if (!api.init) {
        layer.load_error = "rsmi_init not found in " + lib->path();
        send(ch, layer);
        return;
    }
    ch.progress("rsmi_init");
    rsmi::Status rc = api.init(0);
    layer.init_result = rc;
    if (rc != rsmi::SUCCESS) {
        layer.init_error = api.describe(rc);
        send(ch, layer);
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
        send(ch, layer);
        return;
    }
    layer.device_count = count;
    send(ch, layer);
    layer.devices.reserve(std::min<uint32_t>(count, 1024));
    for (uint32_t i = 0; i < count && i < 1024; ++i) {
        // Results so far, this device included once its address is read: when a call hangs, the devices
        // already read are kept and the finding can name the GPU the hung call was about.
        auto& dev = layer.devices.emplace_back();
        dev.index = i;
        DeviceQuery(api, ch, dev, [&] { send(ch, layer); }).run();
        send(ch, layer);
    }
}

}  // namespace gpudx
