// Runs in the NVML probe child: every call announced on the channel first, so a hang names it.
#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/pci_address.hpp"
#include "gpu_api/nvml/api.hpp"
#include "gpu_api/probe.hpp"
#include "gpu_api/queries.hpp"

namespace gpudx {

namespace {

struct Nvml {
    using Api = NvmlApi;
    using Code = nvmlReturn_t;
    static constexpr std::string_view name = "libnvidia-ml";
    static bool succeeded(Code rc) { return rc == NVML_SUCCESS; }
    static bool unsupported(Code rc) { return rc == NVML_ERROR_NOT_SUPPORTED; }
};

// A field value as an integer, whatever type NVML filled it with.
std::optional<unsigned long long> field_number(const nvmlFieldValue_t& f) {
    switch (f.valueType) {
        case NVML_VALUE_TYPE_UNSIGNED_INT: return f.value.uiVal;
        case NVML_VALUE_TYPE_UNSIGNED_LONG: return f.value.ulVal;
        case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: return f.value.ullVal;
        case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
            if (f.value.sllVal < 0) return std::nullopt;
            return static_cast<unsigned long long>(f.value.sllVal);
        case NVML_VALUE_TYPE_SIGNED_INT:
            if (f.value.siVal < 0) return std::nullopt;
            return static_cast<unsigned long long>(f.value.siVal);
        case NVML_VALUE_TYPE_UNSIGNED_SHORT: return f.value.usVal;
        default: return std::nullopt;
    }
}

// One device's queries. Not Supported is an answer (recorded in `unsupported`), not an error.
class NvmlDeviceQuery {
public:
    NvmlDeviceQuery(const NvmlApi& api, ProbeChannel::Lane& ch, NvmlDevice& dev, nvmlDevice_t h)
        : api_(api), calls_(api, ch, dev.index, dev.unsupported, dev.errors), dev_(dev), h_(h) {}

    void run() {
        char buf[256];
        if (calls_.ask("nvmlDeviceGetUUID", api_.uuid, [&] { return api_.uuid(h_, buf, NVML_DEVICE_UUID_V2_BUFFER_SIZE); }))
            dev_.uuid = library_string(buf, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
        nvmlPciInfo_t pci{};
        if (calls_.ask("nvmlDeviceGetPciInfo_v3", api_.pci, [&] { return api_.pci(h_, &pci); })) {
            dev_.bus_id = library_string(pci.busId, sizeof pci.busId);
            dev_.pci = normalize_pci(dev_.bus_id);
            dev_.domain = pci.domain;
            dev_.bus = pci.bus;
            dev_.device = pci.device;
        }
        if (calls_.ask("nvmlDeviceGetName", api_.name, [&] { return api_.name(h_, buf, NVML_DEVICE_NAME_V2_BUFFER_SIZE); }))
            dev_.name = library_string(buf, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
        if (calls_.ask("nvmlDeviceGetSerial", api_.serial, [&] { return api_.serial(h_, buf, NVML_DEVICE_SERIAL_BUFFER_SIZE); }))
            dev_.serial = library_string(buf, NVML_DEVICE_SERIAL_BUFFER_SIZE);
        unsigned u = 0;
        if (calls_.ask("nvmlDeviceGetMinorNumber", api_.minor, [&] { return api_.minor(h_, &u); })) dev_.minor = u;
        nvmlEnableState_t st = 0;
        if (calls_.ask("nvmlDeviceGetPersistenceMode", api_.persistence, [&] { return api_.persistence(h_, &st); }))
            dev_.persistence_mode = st != 0;
        query_mig();
        query_memory_health();
        query_fabric();
        query_nvlinks();
        query_processes();
    }

private:
    void query_mig() {
        unsigned current = 0, pending = 0;
        if (!calls_.ask("nvmlDeviceGetMigMode", api_.mig_mode, [&] { return api_.mig_mode(h_, &current, &pending); })) return;
        dev_.mig_mode = current == 1;
        if (current != 1) return;
        unsigned max = 0;
        if (!calls_.ask("nvmlDeviceGetMaxMigDeviceCount", api_.max_mig, [&] { return api_.max_mig(h_, &max); })) return;
        for (unsigned i = 0; i < max && i < 64; ++i) {
            nvmlDevice_t mig = nullptr;
            // NOT_FOUND marks an empty slot, not a failure.
            if (!calls_.ask("nvmlDeviceGetMigDeviceHandleByIndex", api_.mig_handle,
                            [&] { return api_.mig_handle(h_, i, &mig); }, NVML_ERROR_NOT_FOUND))
                continue;
            char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
            if (calls_.ask("nvmlDeviceGetUUID", api_.uuid, [&] { return api_.uuid(mig, buf, sizeof buf); }))
                dev_.mig_uuids.push_back(library_string(buf, sizeof buf));
        }
    }

    void query_memory_health() {
        if (!read_memory_health_fields()) query_memory_health_call_by_call();
    }

    // ECC mode and counts, pending retirements and remapped rows in one nvmlDeviceGetFieldValues: on an H200 that
    // costs 3.9 ms where the five calls cost 5.6 (device/nvml_cost.cpp). Recorded under the names of the calls
    // it replaces, so a snapshot reads the same either way. False when the call itself failed: then the calls
    // are asked one by one, and each reports its own answer.
    bool read_memory_health_fields() {
        if (!api_.field_values) return false;
        constexpr std::array kIds{NVML_FI_DEV_ECC_CURRENT,  NVML_FI_DEV_ECC_DBE_VOL_TOTAL, NVML_FI_DEV_ECC_DBE_AGG_TOTAL,
                                  NVML_FI_DEV_RETIRED_PENDING, NVML_FI_DEV_REMAPPED_COR, NVML_FI_DEV_REMAPPED_UNC,
                                  NVML_FI_DEV_REMAPPED_PENDING, NVML_FI_DEV_REMAPPED_FAILURE,
                                  NVML_FI_DEV_GET_GPU_RECOVERY_ACTION};
        std::array<nvmlFieldValue_t, kIds.size()> v{};
        for (size_t i = 0; i < kIds.size(); ++i) v[i].fieldId = kIds[i];
        calls_.announce("nvmlDeviceGetFieldValues");
        if (api_.field_values(h_, static_cast<int>(v.size()), v.data()) != NVML_SUCCESS) return false;
        // The value, or nullopt after filing the field's failure under `call`.
        auto take = [&](const nvmlFieldValue_t& f, const char* call) -> std::optional<unsigned long long> {
            if (f.nvmlReturn == NVML_SUCCESS)
                if (auto n = field_number(f)) return n;
            if (f.nvmlReturn == NVML_ERROR_NOT_SUPPORTED) {
                if (std::find(dev_.unsupported.begin(), dev_.unsupported.end(), call) == dev_.unsupported.end())
                    dev_.unsupported.push_back(call);
            } else {
                dev_.errors.push_back(fmt::format("{} (field {}): {}", call, f.fieldId,
                                                  f.nvmlReturn == NVML_SUCCESS ? "value of an unknown type"
                                                                               : api_.describe(f.nvmlReturn)));
            }
            return std::nullopt;
        };
        if (auto on = take(v[0], "nvmlDeviceGetEccMode")) dev_.ecc_enabled = *on != 0;
        if (dev_.ecc_enabled.value_or(false)) {
            dev_.ecc_uncorrected_volatile = take(v[1], "nvmlDeviceGetTotalEccErrors");
            dev_.ecc_uncorrected_aggregate = take(v[2], "nvmlDeviceGetTotalEccErrors");
        }
        if (auto pending = take(v[3], "nvmlDeviceGetRetiredPagesPendingStatus"))
            dev_.retired_pages_pending = static_cast<unsigned>(*pending != 0);
        // One call answers the four remapping values: all of them, or the first failure.
        std::array<std::optional<unsigned long long>, 4> rows;
        for (size_t i = 0; i < rows.size(); ++i)
            if (!(rows[i] = take(v[4 + i], "nvmlDeviceGetRemappedRows"))) break;
        if (rows[3]) {
            dev_.remapped_rows_correctable = static_cast<unsigned>(*rows[0]);
            dev_.remapped_rows_uncorrectable = static_cast<unsigned>(*rows[1]);
            dev_.remapped_rows_pending = *rows[2] != 0;
            dev_.remapped_rows_failure = *rows[3] != 0;
        }
        // A driver older than the field answers it Not Supported or, not knowing the id, Invalid Argument: both
        // mean "this driver does not say", not an error of the GPU.
        nvmlFieldValue_t& recovery = v[8];
        if (recovery.nvmlReturn == NVML_ERROR_INVALID_ARGUMENT) recovery.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        if (auto action = take(recovery, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"))
            dev_.gpu_recovery_action = static_cast<unsigned>(*action);
        return true;
    }

    void query_memory_health_call_by_call() {
        nvmlEnableState_t current = 0, pending = 0;
        if (calls_.ask("nvmlDeviceGetEccMode", api_.ecc_mode, [&] { return api_.ecc_mode(h_, &current, &pending); }))
            dev_.ecc_enabled = current != 0;
        if (dev_.ecc_enabled.value_or(false)) {
            unsigned long long n = 0;
            if (calls_.ask("nvmlDeviceGetTotalEccErrors", api_.ecc_total, [&] {
                    return api_.ecc_total(h_, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &n);
                }))
                dev_.ecc_uncorrected_volatile = n;
            if (calls_.ask("nvmlDeviceGetTotalEccErrors", api_.ecc_total, [&] {
                    return api_.ecc_total(h_, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &n);
                }))
                dev_.ecc_uncorrected_aggregate = n;
        }
        nvmlEnableState_t retired = 0;
        if (calls_.ask("nvmlDeviceGetRetiredPagesPendingStatus", api_.retired_pending,
                [&] { return api_.retired_pending(h_, &retired); }))
            dev_.retired_pages_pending = static_cast<unsigned>(retired);
        unsigned corr = 0, unc = 0, is_pending = 0, failed = 0;
        if (calls_.ask("nvmlDeviceGetRemappedRows", api_.remapped,
                [&] { return api_.remapped(h_, &corr, &unc, &is_pending, &failed); })) {
            dev_.remapped_rows_correctable = corr;
            dev_.remapped_rows_uncorrectable = unc;
            dev_.remapped_rows_pending = is_pending != 0;
            dev_.remapped_rows_failure = failed != 0;
        }
    }

    void query_fabric() {
        if (api_.fabric_v) {
            nvmlGpuFabricInfo_v2_t info{};
            info.version = nvmlGpuFabricInfo_v2;
            if (calls_.ask("nvmlDeviceGetGpuFabricInfoV", true, [&] { return api_.fabric_v(h_, &info); })) {
                dev_.fabric_state = info.state;
                dev_.fabric_status = static_cast<unsigned>(info.status);
            }
            return;
        }
        nvmlGpuFabricInfo_t info{};
        if (calls_.ask("nvmlDeviceGetGpuFabricInfo", api_.fabric != nullptr, [&] { return api_.fabric(h_, &info); })) {
            dev_.fabric_state = info.state;
            dev_.fabric_status = static_cast<unsigned>(info.status);
        }
    }

    void query_nvlinks() {
        if (!api_.nvlink) {
            calls_.not_in_library("nvmlDeviceGetNvLinkState");
            return;
        }
        for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
            nvmlEnableState_t active = 0;
            calls_.announce("nvmlDeviceGetNvLinkState", fmt::format("link {}", link));
            nvmlReturn_t rc = api_.nvlink(h_, link, &active);
            if (rc == NVML_SUCCESS) {
                dev_.nvlinks.push_back({link, active != 0});
                continue;
            }
            // Links past the GPU's last one answer INVALID_ARGUMENT; a GPU without NVLink NOT_SUPPORTED.
            if (rc == NVML_ERROR_NOT_SUPPORTED && link == 0) dev_.unsupported.push_back("nvmlDeviceGetNvLinkState");
            else if (rc != NVML_ERROR_INVALID_ARGUMENT && rc != NVML_ERROR_NOT_SUPPORTED)
                dev_.errors.push_back(fmt::format("nvmlDeviceGetNvLinkState(link {}): {}", link, api_.describe(rc)));
            break;
        }
    }

    void query_processes() {
        if (!api_.processes) {
            calls_.not_in_library("nvmlDeviceGetComputeRunningProcesses");
            return;
        }
        std::vector<nvmlProcessInfo_t> infos(16);
        unsigned n = static_cast<unsigned>(infos.size());
        nvmlReturn_t rc = NVML_SUCCESS;
        for (int attempt = 0; attempt < 3; ++attempt) {
            calls_.announce("nvmlDeviceGetComputeRunningProcesses_v3");
            n = static_cast<unsigned>(infos.size());
            rc = api_.processes(h_, &n, infos.data());
            if (rc != NVML_ERROR_INSUFFICIENT_SIZE) break;
            infos.resize(std::max<size_t>(n, infos.size()) * 2);
        }
        if (!calls_.file("nvmlDeviceGetComputeRunningProcesses_v3", rc)) return;
        for (unsigned i = 0; i < n && i < infos.size(); ++i) {
            NvmlProcess p;
            p.pid = infos[i].pid;
            // NVML reports "not available" memory as all ones (NVML_VALUE_NOT_AVAILABLE).
            if (infos[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) p.used_memory = infos[i].usedGpuMemory;
            if (api_.process_name) {
                char name[256] = {};
                calls_.channel().progress(driver_call_label("nvmlSystemGetProcessName", std::nullopt, std::to_string(p.pid)));
                if (api_.process_name(p.pid, name, sizeof name) == NVML_SUCCESS) p.name = library_string(name, sizeof name);
            }
            dev_.processes.push_back(std::move(p));
        }
    }

    const NvmlApi& api_;
    DeviceCalls<Nvml, ProbeChannel::Lane> calls_;
    NvmlDevice& dev_;
    nvmlDevice_t h_;
};

// The GPUs are asked side by side, one lane (thread) each up to kMaxLanes: the driver serialises much of the
// work, but not all of it (2xH200, device/nvml_cost.cpp: the whole child 37 ms with lanes, 42 ms without).
// Each lane announces its own calls, so a GPU that hangs is named while the others still answer; the layer
// is sent again as each GPU finishes, in index order, with the GPUs answered so far.
void query_devices(const NvmlApi& api, ProbeChannel& ch, NvmlLayer& layer, unsigned count) {
    constexpr unsigned kMaxLanes = 16;
    std::vector<std::optional<NvmlDevice>> answered(count);
    std::mutex answered_mutex;
    std::atomic<unsigned> next{0};
    auto work = [&](unsigned lane_number) {
        auto lane = ch.lane(lane_number);
        for (unsigned i; (i = next.fetch_add(1)) < count;) {
            NvmlDevice dev;
            dev.index = i;
            nvmlDevice_t h = nullptr;
            lane.progress(driver_call_label("nvmlDeviceGetHandleByIndex_v2", i));
            nvmlReturn_t rc = api.handle_by_index ? api.handle_by_index(i, &h) : NVML_ERROR_FUNCTION_NOT_FOUND;
            if (rc != NVML_SUCCESS)
                dev.errors.push_back(fmt::format("nvmlDeviceGetHandleByIndex_v2: {}", api.describe(rc)));
            else
                NvmlDeviceQuery(api, lane, dev, h).run();
            std::lock_guard lock(answered_mutex);
            answered[i] = std::move(dev);
            NvmlLayer so_far = layer;
            for (auto& d : answered)
                if (d) so_far.devices.push_back(*d);
            send_layer(ch, so_far);
        }
        lane.finished();
    };
    unsigned lanes = std::min(count, kMaxLanes);
    std::vector<std::thread> threads;
    for (unsigned n = 1; n < lanes; ++n) {
        try {
            threads.emplace_back(work, n);
        } catch (const std::system_error&) {
            break;  // no more threads: the lanes already started share the GPUs
        }
    }
    if (count > 0) work(0);
    for (auto& t : threads) t.join();
    for (auto& d : answered)
        if (d) layer.devices.push_back(std::move(*d));
}

}  // namespace

void query_nvml(const NvmlQueryOptions& options, ProbeChannel& ch) {
    NvmlLayer layer;
    ch.progress("dlopen(libnvidia-ml.so.1)");
    auto opened = NvmlApi::open(options.library_dir);
    if (!opened) {
        layer.load_error = opened.error().message;
        send_layer(ch, layer);
        return;
    }
    const NvmlApi& api = *opened;
    layer.library_path = api.library.path();
    if (!api.init) {
        layer.load_error = "nvmlInit_v2 not found in " + api.library.path();
        send_layer(ch, layer);
        return;
    }
    ch.progress("nvmlInit_v2");
    nvmlReturn_t rc = api.init();
    layer.init_result = rc;
    if (rc != NVML_SUCCESS) {
        layer.init_error = api.describe(rc);
        send_layer(ch, layer);
        return;
    }
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    if (api.driver_version) {
        ch.progress("nvmlSystemGetDriverVersion");
        if (api.driver_version(buf, sizeof buf) == NVML_SUCCESS) layer.driver_version = library_string(buf, sizeof buf);
    }
    if (api.nvml_version) {
        ch.progress("nvmlSystemGetNVMLVersion");
        if (api.nvml_version(buf, sizeof buf) == NVML_SUCCESS) layer.nvml_version = library_string(buf, sizeof buf);
    }
    if (api.cuda_driver_version) {
        int v = 0;
        ch.progress("nvmlSystemGetCudaDriverVersion_v2");
        if (api.cuda_driver_version(&v) == NVML_SUCCESS) layer.cuda_driver_version = v;
    }
    unsigned count = 0;
    ch.progress("nvmlDeviceGetCount_v2");
    rc = api.count ? api.count(&count) : NVML_ERROR_FUNCTION_NOT_FOUND;
    if (rc != NVML_SUCCESS) {
        layer.init_error = "nvmlDeviceGetCount_v2: " + api.describe(rc);
        send_layer(ch, layer);
        return;
    }
    layer.device_count = count;
    send_layer(ch, layer);
    query_devices(api, ch, layer, std::min(count, 1024u));
}

}  // namespace gpudx
