// Runs in the ROCm SMI probe child: every call announced on the channel first, so a hang names it.
// Read-only queries only: nothing here sets a clock, a power cap or a partition mode.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

#include <fmt/format.h>

#include "core/pci_address.hpp"
#include "gpu_api/health_sampling.hpp"
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

// A second health sample must leave this much of the deadline (every GPU's re-reading is made after the one
// interval), or it is not taken.
constexpr std::chrono::milliseconds kRocmSecondSampleMargin{1000};

struct Sensor {
    RocmTemperatureSensor sensor;
    uint32_t type;  // rsmi_temperature_type_t
};
constexpr Sensor kSensors[] = {{RocmTemperatureSensor::edge, rsmi::TEMP_TYPE_EDGE},
                               {RocmTemperatureSensor::junction, rsmi::TEMP_TYPE_JUNCTION},
                               {RocmTemperatureSensor::memory, rsmi::TEMP_TYPE_MEMORY}};

// Whether this library's rsmi_gpu_metrics_t has indep_throttle_status at its offset (rocm_smi_lib 7.1 and later).
bool metrics_have_indep_throttle(const std::string& library_version) {
    unsigned major = 0, minor = 0;
    if (std::sscanf(library_version.c_str(), "%u.%u", &major, &minor) != 2) return false;
    return major > rsmi::kIndepThrottleFirstLibraryMajor ||
           (major == rsmi::kIndepThrottleFirstLibraryMajor && minor >= rsmi::kIndepThrottleFirstLibraryMinor);
}

template <class T>
T read_at(const std::vector<unsigned char>& buf, size_t offset) {
    T v;
    std::memcpy(&v, buf.data() + offset, sizeof v);
    return v;
}

class RocmSmiDeviceQuery {
public:
    // `addressed` is called once the device's PCI address is known, to publish it before the slower queries.
    RocmSmiDeviceQuery(const RocmSmiApi& api, ProbeChannel& ch, RocmSmiDevice& dev, bool indep_throttle,
                       std::function<void()> addressed = [] {})
        : api_(api),
          calls_(api, ch, dev.index, dev.unsupported, dev.errors),
          dev_(dev),
          indep_throttle_(indep_throttle),
          addressed_(std::move(addressed)) {}

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
        take_first_health_sample();
        if (calls_.ask("rsmi_dev_xgmi_error_status", api_.xgmi_error_status,
                       [&] { return api_.xgmi_error_status(i, &xgmi_status_); }))
            record_xgmi_status();
    }

    // The second sample: the same readings `after_ms` later (the sensors that read in the first), and the ECC counts
    // of blocks that had corrected errors.
    void take_second_health_sample(unsigned after_ms) {
        auto& sample = dev_.health.samples.emplace_back();
        sample.after_ms = after_ms;
        for (const auto& limits : dev_.health.temperature_limits)
            for (const auto& s : kSensors)
                if (s.sensor == limits.sensor)
                    if (auto t = temperature(s, rsmi::TEMP_CURRENT, "current", false))
                        sample.temperatures.push_back({s.sensor, *t});
        read_gpu_metrics(sample, false);
        for (auto& e : dev_.ecc) {
            if (!e.correctable || !api_.ecc_count) continue;
            auto block = std::find_if(std::begin(rsmi::kEccBlocks), std::end(rsmi::kEccBlocks),
                                      [&](auto& b) { return e.block == b.name; });
            if (block == std::end(rsmi::kEccBlocks)) continue;
            rsmi::ErrorCount counts;
            calls_.announce("rsmi_dev_ecc_count_get", block->name);
            rsmi::Status rc = api_.ecc_count(dev_.index, block->bit, &counts);
            if (calls_.file(fmt::format("rsmi_dev_ecc_count_get({}) second sample", block->name), rc))
                sample.ecc.push_back({block->name, counts.correctable_err, counts.uncorrectable_err});
        }
    }

private:
    // One metric of one sensor; Not Supported is filed only when `file_unsupported` (the first sample), so the
    // second sample does not list it twice.
    std::optional<long long> temperature(const Sensor& s, int metric, std::string_view metric_name, bool file_unsupported) {
        if (!api_.temp_metric) {
            if (file_unsupported && s.sensor == RocmTemperatureSensor::edge && metric == rsmi::TEMP_CURRENT)
                calls_.not_in_library("rsmi_dev_temp_metric_get");
            return std::nullopt;
        }
        const std::string args = fmt::format("{}, {}", name_of(s.sensor), metric_name);
        calls_.announce("rsmi_dev_temp_metric_get", args);
        int64_t v = 0;
        rsmi::Status rc = api_.temp_metric(dev_.index, s.type, metric, &v);
        if (rc == rsmi::SUCCESS) return v;
        if (file_unsupported || !RocmSmi::unsupported(rc)) calls_.file(fmt::format("rsmi_dev_temp_metric_get({})", args), rc);
        return std::nullopt;
    }

    // Each sensor's reading and, for a sensor that reads, its limits: a sensor the GPU does not have (MI300 parts
    // have no edge sensor) is listed once in `unsupported`, and is not judged. Then the gpu metrics.
    void take_first_health_sample() {
        auto& sample = dev_.health.samples.emplace_back();
        for (const auto& s : kSensors) {
            auto now = temperature(s, rsmi::TEMP_CURRENT, "current", true);
            if (!now) continue;
            sample.temperatures.push_back({s.sensor, *now});
            dev_.health.temperature_limits.push_back({s.sensor, temperature(s, rsmi::TEMP_CRITICAL, "critical", true),
                                                      temperature(s, rsmi::TEMP_EMERGENCY, "emergency", true)});
        }
        read_gpu_metrics(sample, true);
    }

    void read_gpu_metrics(RocmSmiHealthSample& sample, bool first) {
        if (!api_.gpu_metrics) {
            if (first) calls_.not_in_library("rsmi_dev_gpu_metrics_info_get");
            return;
        }
        // All ones: what the library writes for a field the GPU's metrics lack, and what a field an older library
        // does not write keeps.
        std::vector<unsigned char> buf(rsmi::kGpuMetricsBufferSize, 0xff);
        calls_.announce("rsmi_dev_gpu_metrics_info_get");
        rsmi::Status rc = api_.gpu_metrics(dev_.index, buf.data());
        if (rc != rsmi::SUCCESS) {
            if (first || !RocmSmi::unsupported(rc)) calls_.file("rsmi_dev_gpu_metrics_info_get", rc);
            return;
        }
        if (first)
            dev_.health.gpu_metrics_version =
                fmt::format("{}.{}", buf[rsmi::kGpuMetricsFormatRevision], buf[rsmi::kGpuMetricsContentRevision]);
        auto status = read_at<uint32_t>(buf, rsmi::kGpuMetricsThrottleStatus);
        if (status != UINT32_MAX) sample.throttle_status = status;
        if (!indep_throttle_) {
            if (first) dev_.unsupported.push_back("indep_throttle_status (not in this librocm_smi64's gpu metrics)");
            return;
        }
        auto indep = read_at<uint64_t>(buf, rsmi::kGpuMetricsIndepThrottleStatus);
        if (indep != UINT64_MAX) sample.indep_throttle_status = indep;
        else if (first) dev_.unsupported.push_back("indep_throttle_status (not in this GPU's gpu metrics)");
    }

    void record_xgmi_status() {
        switch (xgmi_status_) {
            case rsmi::XGMI_STATUS_NO_ERRORS: dev_.health.xgmi_error_status = RocmXgmiStatus::no_errors; break;
            case rsmi::XGMI_STATUS_ERROR: dev_.health.xgmi_error_status = RocmXgmiStatus::error; break;
            case rsmi::XGMI_STATUS_MULTIPLE_ERRORS: dev_.health.xgmi_error_status = RocmXgmiStatus::multiple_errors; break;
            default: dev_.errors.push_back(fmt::format("rsmi_dev_xgmi_error_status: unknown status {}", xgmi_status_));
        }
    }

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
    bool indep_throttle_;
    int xgmi_status_ = 0;
    std::function<void()> addressed_;
};

RocmLinkType link_type(uint32_t type) {
    switch (type) {
        case rsmi::IOLINK_TYPE_UNDEFINED: return RocmLinkType::undefined;
        case rsmi::IOLINK_TYPE_PCIEXPRESS: return RocmLinkType::pcie;
        case rsmi::IOLINK_TYPE_XGMI: return RocmLinkType::xgmi;
        default: return RocmLinkType::other;
    }
}

// How each GPU reaches every other: one device per PCI address (the partitions of one GPU share its links), each
// pair asked once and recorded on both.
void query_links(const RocmSmiApi& api, ProbeChannel& ch, RocmSmiLayer& layer) {
    std::vector<RocmSmiDevice*> gpus;
    for (auto& d : layer.devices)
        if (!d.pci.empty() && std::none_of(gpus.begin(), gpus.end(), [&](auto* g) { return g->pci == d.pci; }))
            gpus.push_back(&d);
    if (gpus.size() < 2) return;
    if (!api.link_type) {
        for (auto* g : gpus) DeviceCalls<RocmSmi, ProbeChannel>(api, ch, g->index, g->unsupported, g->errors)
                                 .not_in_library("rsmi_topo_get_link_type");
        return;
    }
    for (size_t a = 0; a < gpus.size(); ++a)
        for (size_t b = a + 1; b < gpus.size(); ++b) {
            RocmSmiDevice& src = *gpus[a];
            RocmSmiDevice& dst = *gpus[b];
            DeviceCalls<RocmSmi, ProbeChannel> calls(api, ch, src.index, src.unsupported, src.errors);
            calls.announce("rsmi_topo_get_link_type", std::to_string(dst.index));
            uint64_t hops = 0;
            uint32_t type = 0;
            rsmi::Status rc = api.link_type(src.index, dst.index, &hops, &type);
            if (!calls.file(fmt::format("rsmi_topo_get_link_type({}, {})", src.index, dst.index), rc)) continue;
            src.health.links.push_back({dst.index, dst.pci, link_type(type), hops});
            dst.health.links.push_back({src.index, src.pci, link_type(type), hops});
        }
}

// The devices whose first sample calls for a second take it together after one interval, when it can finish well
// inside the deadline; otherwise each says why it has one sample.
void take_second_samples(const RocmSmiApi& api, ProbeChannel& ch, RocmSmiLayer& layer, const HealthSampling& sampling,
                         bool indep_throttle) {
    std::vector<std::pair<RocmSmiDevice*, std::string>> wanted;
    for (auto& d : layer.devices)
        if (auto why = rocm_second_sample_wanted(d)) wanted.emplace_back(&d, *why);
    if (wanted.empty() || sampling.interval.count() == 0) return;  // 0: the user asked for one sample
    if (!sampling.leaves(kRocmSecondSampleMargin)) {
        for (auto& [d, why] : wanted)
            d->health.second_sample_skipped =
                fmt::format("{}; no second sample: it would not finish inside the driver deadline", why);
        return;
    }
    std::this_thread::sleep_for(sampling.interval);
    for (auto& [d, why] : wanted) {
        RocmSmiDeviceQuery(api, ch, *d, indep_throttle)
            .take_second_health_sample(static_cast<unsigned>(sampling.interval.count()));
        send_layer(ch, layer);
    }
}

}  // namespace

void query_rocm_smi(const RocmSmiQueryOptions& options, ProbeChannel& ch) {
    const HealthSampling sampling{std::chrono::milliseconds(options.health_interval_ms),
                                  std::chrono::steady_clock::now() + std::chrono::milliseconds(options.deadline_ms)};
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
    const bool indep_throttle = metrics_have_indep_throttle(layer.library_version);
    layer.devices.reserve(std::min<uint32_t>(count, 1024));
    for (uint32_t i = 0; i < count && i < 1024; ++i) {
        // Results so far, this device included once its address is read: when a call hangs, the devices
        // already read are kept and the finding can name the GPU the hung call was about.
        auto& dev = layer.devices.emplace_back();
        dev.index = i;
        RocmSmiDeviceQuery(api, ch, dev, indep_throttle, [&] { send_layer(ch, layer); }).run();
        send_layer(ch, layer);
    }
    query_links(api, ch, layer);
    send_layer(ch, layer);
    take_second_samples(api, ch, layer, sampling, indep_throttle);
}

}  // namespace gpudx
