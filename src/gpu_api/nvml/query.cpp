// Runs in the NVML probe child: every call announced on the channel first, so a hang names it.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <span>
#include <system_error>
#include <thread>
#include <vector>
#include <string>

#include <fmt/format.h>

#include "core/pci_address.hpp"
#include "gpu_api/health_sampling.hpp"
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

// What the second sample must leave of the deadline for the calls after it (the processes, the other GPUs).
constexpr std::chrono::milliseconds kNvmlSecondSampleMargin{500};

// ECC counts by location as field values: which location and which count each id fills. The uncorrected totals
// are the memory-health call's own fields (ecc_uncorrected_volatile/aggregate), copied into the total's entry.
struct EccField {
    unsigned id;
    EccLocation location;
    std::optional<unsigned long long> EccLocationCounts::*member;
};
using E = EccLocationCounts;
constexpr std::array kEccFields{
    EccField{NVML_FI_DEV_ECC_SBE_VOL_TOTAL, EccLocation::total, &E::corrected_volatile},
    EccField{NVML_FI_DEV_ECC_SBE_AGG_TOTAL, EccLocation::total, &E::corrected_aggregate},
    EccField{NVML_FI_DEV_ECC_SBE_VOL_DEV, EccLocation::device_memory, &E::corrected_volatile},
    EccField{NVML_FI_DEV_ECC_DBE_VOL_DEV, EccLocation::device_memory, &E::uncorrected_volatile},
    EccField{NVML_FI_DEV_ECC_SBE_AGG_DEV, EccLocation::device_memory, &E::corrected_aggregate},
    EccField{NVML_FI_DEV_ECC_DBE_AGG_DEV, EccLocation::device_memory, &E::uncorrected_aggregate},
    EccField{NVML_FI_DEV_ECC_SBE_VOL_L1, EccLocation::l1_cache, &E::corrected_volatile},
    EccField{NVML_FI_DEV_ECC_DBE_VOL_L1, EccLocation::l1_cache, &E::uncorrected_volatile},
    EccField{NVML_FI_DEV_ECC_SBE_AGG_L1, EccLocation::l1_cache, &E::corrected_aggregate},
    EccField{NVML_FI_DEV_ECC_DBE_AGG_L1, EccLocation::l1_cache, &E::uncorrected_aggregate},
    EccField{NVML_FI_DEV_ECC_SBE_VOL_L2, EccLocation::l2_cache, &E::corrected_volatile},
    EccField{NVML_FI_DEV_ECC_DBE_VOL_L2, EccLocation::l2_cache, &E::uncorrected_volatile},
    EccField{NVML_FI_DEV_ECC_SBE_AGG_L2, EccLocation::l2_cache, &E::corrected_aggregate},
    EccField{NVML_FI_DEV_ECC_DBE_AGG_L2, EccLocation::l2_cache, &E::uncorrected_aggregate},
    EccField{NVML_FI_DEV_ECC_SBE_VOL_REG, EccLocation::register_file, &E::corrected_volatile},
    EccField{NVML_FI_DEV_ECC_DBE_VOL_REG, EccLocation::register_file, &E::uncorrected_volatile},
    EccField{NVML_FI_DEV_ECC_SBE_AGG_REG, EccLocation::register_file, &E::corrected_aggregate},
    EccField{NVML_FI_DEV_ECC_DBE_AGG_REG, EccLocation::register_file, &E::uncorrected_aggregate},
    EccField{NVML_FI_DEV_ECC_SBE_VOL_TEX, EccLocation::texture_memory, &E::corrected_volatile},
    EccField{NVML_FI_DEV_ECC_DBE_VOL_TEX, EccLocation::texture_memory, &E::uncorrected_volatile},
    EccField{NVML_FI_DEV_ECC_SBE_AGG_TEX, EccLocation::texture_memory, &E::corrected_aggregate},
    EccField{NVML_FI_DEV_ECC_DBE_AGG_TEX, EccLocation::texture_memory, &E::uncorrected_aggregate},
    EccField{NVML_FI_DEV_ECC_DBE_VOL_CBU, EccLocation::cbu, &E::uncorrected_volatile},
    EccField{NVML_FI_DEV_ECC_DBE_AGG_CBU, EccLocation::cbu, &E::uncorrected_aggregate},
};
// Read with the memory health, in this order (read_static_health_fields); the last one with scopeId 0 (link 0).
// The corrected totals come first: the locations are asked only when a total is not zero (or was not read), since
// on an H200 asking the 24 location fields costs 5.5 ms of a 40 ms diagnose and every one of them is zero or Not
// Supported on a healthy GPU (device/gpu_health.cpp).
constexpr size_t kEccTotalFields = 2;
static_assert(kEccFields[0].location == EccLocation::total && kEccFields[1].location == EccLocation::total &&
              kEccFields[kEccTotalFields].location != EccLocation::total);
constexpr std::array kStaticHealthFields{NVML_FI_DEV_RETIRED_SBE, NVML_FI_DEV_RETIRED_DBE, NVML_FI_DEV_NVLINK_LINK_COUNT,
                                         NVML_FI_DEV_POWER_CURRENT_LIMIT, NVML_FI_DEV_NVLINK_GET_VERSION};
// Each sample, in this order (read_sample_fields); then per link kLinkFacts and its error counters.
constexpr std::array kSampleFields{NVML_FI_DEV_MEMORY_TEMP, NVML_FI_DEV_POWER_INSTANT, NVML_FI_DEV_PCIE_REPLAY_COUNTER};
constexpr std::array kLinkFacts{NVML_FI_DEV_NVLINK_GET_STATE, NVML_FI_DEV_NVLINK_GET_VERSION, NVML_FI_DEV_NVLINK_GET_SPEED};

struct CounterField {
    unsigned id;
    std::optional<unsigned long long> NvlinkErrorCounters::*member;
    const char* call;  // what an unsupported or failed counter is filed under
};
using N = NvlinkErrorCounters;
constexpr std::array kNvlinkCounters{
    CounterField{NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, &N::replay, "nvmlDeviceGetNvLinkErrorCounter"},
    CounterField{NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, &N::recovery, "nvmlDeviceGetNvLinkErrorCounter"},
    CounterField{NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, &N::crc_flit, "nvmlDeviceGetNvLinkErrorCounter"},
    CounterField{NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, &N::crc_data, "nvmlDeviceGetNvLinkErrorCounter"},
    CounterField{NVML_FI_DEV_NVLINK_ECC_DATA_ERROR_COUNT_TOTAL, &N::ecc_data, "nvmlDeviceGetNvLinkErrorCounter"},
};
constexpr std::array kNvlink5Counters{
    CounterField{NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS, &N::recovery_failed, "NVML_FI_DEV_NVLINK_COUNT_*"},
    CounterField{NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS, &N::recovery_events, "NVML_FI_DEV_NVLINK_COUNT_*"},
    CounterField{NVML_FI_DEV_NVLINK_COUNT_RCV_ERRORS, &N::receive_errors, "NVML_FI_DEV_NVLINK_COUNT_*"},
    CounterField{NVML_FI_DEV_NVLINK_COUNT_LOCAL_LINK_INTEGRITY_ERRORS, &N::link_integrity, "NVML_FI_DEV_NVLINK_COUNT_*"},
};
static_assert(kNvlinkCounters.size() == 5 && kNvlink5Counters.size() == 4);

// "01234567-89ab-..." of a fabric cluster, or "" when all zero (the GPU is in no cluster).
std::string cluster_uuid_text(const unsigned char (&uuid)[16]) {
    if (std::all_of(std::begin(uuid), std::end(uuid), [](unsigned char b) { return b == 0; })) return {};
    std::string out;
    for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
        out += fmt::format("{:02x}", uuid[i]);
    }
    return out;
}

// One device's queries. Not Supported is an answer (recorded in `unsupported`), not an error.
class NvmlDeviceQuery {
public:
    NvmlDeviceQuery(const NvmlApi& api, ProbeChannel::Lane& ch, NvmlDevice& dev, nvmlDevice_t h,
                    const HealthSampling& sampling)
        : api_(api), calls_(api, ch, dev.index, dev.unsupported, dev.errors), dev_(dev), h_(h), sampling_(sampling) {}

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
        query_health_limits();
        take_health_sample();
        query_nvlink_remotes();
        if (auto why = second_sample_wanted(dev_)) {
            if (sampling_.interval.count() == 0) {
                // The user asked for one sample: judged on it alone.
            } else if (!sampling_.leaves(kNvmlSecondSampleMargin)) {
                dev_.health.second_sample_skipped =
                    fmt::format("{}; no second sample: it would not finish inside the driver deadline", *why);
            } else {
                std::this_thread::sleep_for(sampling_.interval);
                take_health_sample();
            }
        }
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
        // The health facts that do not change from one second to the next ride in the same call
        // (docs/gpu-health.md): ECC by location, retired pages, the link count and the first link's NVLink
        // version (which error counters the links answer), the enforced power limit.
        std::vector<nvmlFieldValue_t> v(kIds.size() + kEccTotalFields + kStaticHealthFields.size());
        for (size_t i = 0; i < kIds.size(); ++i) v[i].fieldId = kIds[i];
        for (size_t i = 0; i < kEccTotalFields; ++i) v[kIds.size() + i].fieldId = kEccFields[i].id;
        for (size_t i = 0; i < kStaticHealthFields.size(); ++i)
            v[kIds.size() + kEccTotalFields + i].fieldId = kStaticHealthFields[i];
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
        auto health = std::span(v).subspan(kIds.size());
        read_ecc_fields(health.first(kEccTotalFields), 0);
        read_static_health_fields(health.subspan(kEccTotalFields));
        if (ecc_locations_wanted()) read_ecc_locations();
        return true;
    }

    // Whether a total says there is something to place: a count above zero, or a total that did not answer (then
    // nothing rules the locations out). ECC off: no counts to place.
    bool ecc_locations_wanted() const {
        if (!dev_.ecc_enabled.value_or(false)) return false;
        const EccLocationCounts* total = nullptr;
        for (auto& e : dev_.health.ecc)
            if (e.location == EccLocation::total) total = &e;
        auto above_zero_or_unread = [](const std::optional<unsigned long long>& n) { return !n || *n > 0; };
        return !total || above_zero_or_unread(total->corrected_volatile) ||
               above_zero_or_unread(total->corrected_aggregate) ||
               above_zero_or_unread(dev_.ecc_uncorrected_volatile) ||
               above_zero_or_unread(dev_.ecc_uncorrected_aggregate);
    }

    void read_ecc_locations() {
        std::vector<nvmlFieldValue_t> v(kEccFields.size() - kEccTotalFields);
        for (size_t i = 0; i < v.size(); ++i) v[i].fieldId = kEccFields[kEccTotalFields + i].id;
        calls_.announce("nvmlDeviceGetFieldValues(ECC by location)");
        if (auto rc = api_.field_values(h_, static_cast<int>(v.size()), v.data()); rc != NVML_SUCCESS) {
            dev_.errors.push_back(fmt::format("nvmlDeviceGetFieldValues (ECC by location): {}", api_.describe(rc)));
            return;
        }
        read_ecc_fields(v, kEccTotalFields);
    }

    // ECC counts answered for kEccFields[first ...], in that order.
    void read_ecc_fields(std::span<const nvmlFieldValue_t> v, size_t first) {
        auto& h = dev_.health;
        for (size_t i = 0; i < v.size(); ++i) {
            auto n = health_field(v[i], "ECC counts by location");
            if (!n) continue;
            const auto& f = kEccFields[first + i];
            auto it = std::find_if(h.ecc.begin(), h.ecc.end(), [&](auto& e) { return e.location == f.location; });
            if (it == h.ecc.end()) it = h.ecc.insert(h.ecc.end(), EccLocationCounts{f.location});
            (*it).*(f.member) = *n;
        }
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

    // The static health fields of the memory-health call, in the order they were asked.
    void read_static_health_fields(std::span<const nvmlFieldValue_t> rest) {
        auto& h = dev_.health;
        if (dev_.ecc_uncorrected_volatile || dev_.ecc_uncorrected_aggregate) {
            auto it = std::find_if(h.ecc.begin(), h.ecc.end(), [](auto& e) { return e.location == EccLocation::total; });
            if (it == h.ecc.end()) it = h.ecc.insert(h.ecc.begin(), EccLocationCounts{EccLocation::total});
            it->uncorrected_volatile = dev_.ecc_uncorrected_volatile;
            it->uncorrected_aggregate = dev_.ecc_uncorrected_aggregate;
        }
        if (auto n = health_field(rest[0], "nvmlDeviceGetRetiredPages")) h.retired_pages_single_bit = static_cast<unsigned>(*n);
        if (auto n = health_field(rest[1], "nvmlDeviceGetRetiredPages")) h.retired_pages_double_bit = static_cast<unsigned>(*n);
        if (auto n = health_field(rest[2], "NVML_FI_DEV_NVLINK_LINK_COUNT")) h.nvlink_count = static_cast<unsigned>(*n);
        if (auto n = health_field(rest[3], "nvmlDeviceGetEnforcedPowerLimit")) h.power_limit_mw = static_cast<unsigned>(*n);
        if (rest[4].nvmlReturn == NVML_SUCCESS)
            if (auto n = field_number(rest[4])) nvlink_version0_ = static_cast<unsigned>(*n);
    }

    // A health field's value; Not Supported (or an id this driver does not know, Invalid Argument) is filed once
    // under `call` in `unsupported`, any other failure in `errors`. The ECC locations are many and most GPUs
    // answer only some: their absence is not filed (nothing is judged on a location that did not answer).
    std::optional<unsigned long long> health_field(const nvmlFieldValue_t& f, std::string_view call) {
        if (f.nvmlReturn == NVML_SUCCESS) {
            if (auto n = field_number(f)) return n;
            dev_.errors.push_back(fmt::format("{} (field {}): value of an unknown type", call, f.fieldId));
            return std::nullopt;
        }
        if (f.nvmlReturn == NVML_ERROR_NOT_SUPPORTED || f.nvmlReturn == NVML_ERROR_INVALID_ARGUMENT) {
            if (call != "ECC counts by location") note_unsupported(call);
            return std::nullopt;
        }
        dev_.errors.push_back(fmt::format("{} (field {}{}): {}", call, f.fieldId,
                                          f.scopeId ? fmt::format(", link {}", f.scopeId) : std::string(),
                                          api_.describe(f.nvmlReturn)));
        return std::nullopt;
    }

    void note_unsupported(std::string_view call) {
        if (std::find(dev_.unsupported.begin(), dev_.unsupported.end(), call) == dev_.unsupported.end())
            dev_.unsupported.emplace_back(call);
    }

    // The GPU's own thresholds and the row remapper's spare rows: read once.
    void query_health_limits() {
        auto& h = dev_.health;
        unsigned t = 0;
        if (calls_.ask("nvmlDeviceGetTemperatureThreshold", api_.temperature_threshold != nullptr,
                       [&] { return api_.temperature_threshold(h_, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &t); }))
            h.temperature_slowdown_c = t;
        if (calls_.ask("nvmlDeviceGetTemperatureThreshold", api_.temperature_threshold != nullptr,
                       [&] { return api_.temperature_threshold(h_, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &t); }))
            h.temperature_shutdown_c = t;
        if (!h.power_limit_mw && api_.enforced_power_limit) {
            unsigned mw = 0;
            if (calls_.ask("nvmlDeviceGetEnforcedPowerLimit", true, [&] { return api_.enforced_power_limit(h_, &mw); }))
                h.power_limit_mw = mw;
        }
        nvmlRowRemapperHistogramValues_t hist{};
        if (calls_.ask("nvmlDeviceGetRowRemapperHistogram", api_.row_remap_histogram != nullptr,
                       [&] { return api_.row_remap_histogram(h_, &hist); }))
            h.row_remap_histogram = RowRemapHistogram{hist.max, hist.high, hist.partial, hist.low, hist.none};
    }

    // One sample of what changes: clock event reasons, temperature, and one nvmlDeviceGetFieldValues for the
    // memory temperature, power, PCIe replays and every link's state, version, speed and error counters (the
    // link in each field's scopeId). The first sample also fills the links themselves.
    void take_health_sample() {
        auto& h = dev_.health;
        const bool first = h.samples.empty();
        GpuHealthSample sample;
        // The interval the probe waited (the calls around it take microseconds to a few ms): a recorded snapshot
        // replays to the same answers.
        if (!first) sample.after_ms = static_cast<unsigned>(sampling_.interval.count());
        unsigned long long reasons = 0;
        if (calls_.ask("nvmlDeviceGetCurrentClocksEventReasons", api_.clocks_event_reasons != nullptr,
                       [&] { return api_.clocks_event_reasons(h_, &reasons); }))
            sample.clock_event_reasons = reasons;
        unsigned t = 0;
        if (calls_.ask("nvmlDeviceGetTemperature", api_.temperature != nullptr,
                       [&] { return api_.temperature(h_, NVML_TEMPERATURE_GPU, &t); }))
            sample.temperature_c = t;
        if (!read_sample_fields(sample, first) && first) query_nvlinks_call_by_call();
        h.samples.push_back(std::move(sample));
    }

    // False when nvmlDeviceGetFieldValues itself failed (then the links are asked one call at a time).
    bool read_sample_fields(GpuHealthSample& sample, bool first) {
        if (!api_.field_values) return false;
        // Links past the GPU's last answer Invalid Argument; without a link count, every link NVML can have is
        // asked and the answers say which exist.
        const unsigned links = std::min(dev_.health.nvlink_count.value_or(NVML_NVLINK_MAX_LINKS), NVML_NVLINK_MAX_LINKS);
        const std::span<const CounterField> counters =
            nvlink5() ? std::span<const CounterField>(kNvlink5Counters) : std::span<const CounterField>(kNvlinkCounters);
        std::vector<nvmlFieldValue_t> v(kSampleFields.size() + links * (kLinkFacts.size() + counters.size()));
        for (size_t i = 0; i < kSampleFields.size(); ++i) v[i].fieldId = kSampleFields[i];
        size_t at = kSampleFields.size();
        for (unsigned link = 0; link < links; ++link) {
            for (unsigned id : kLinkFacts) v[at].fieldId = id, v[at++].scopeId = link;
            for (auto& c : counters) v[at].fieldId = c.id, v[at++].scopeId = link;
        }
        calls_.announce("nvmlDeviceGetFieldValues", first ? "health" : "health, second sample");
        nvmlReturn_t rc = api_.field_values(h_, static_cast<int>(v.size()), v.data());
        if (rc != NVML_SUCCESS) {
            calls_.file("nvmlDeviceGetFieldValues", rc);
            return false;
        }
        if (auto n = health_field(v[0], "NVML_FI_DEV_MEMORY_TEMP")) sample.memory_temperature_c = static_cast<unsigned>(*n);
        if (auto n = health_field(v[1], "nvmlDeviceGetPowerUsage")) sample.power_mw = static_cast<unsigned>(*n);
        if (auto n = health_field(v[2], "nvmlDeviceGetPcieReplayCounter")) sample.pcie_replays = *n;
        if (!sample.power_mw && api_.power_usage) {
            unsigned mw = 0;
            if (calls_.ask("nvmlDeviceGetPowerUsage", true, [&] { return api_.power_usage(h_, &mw); })) sample.power_mw = mw;
        }
        if (!sample.pcie_replays && api_.pcie_replays) {
            unsigned n = 0;
            if (calls_.ask("nvmlDeviceGetPcieReplayCounter", true, [&] { return api_.pcie_replays(h_, &n); }))
                sample.pcie_replays = n;
        }
        at = kSampleFields.size();
        bool state_unsupported = false;
        for (unsigned link = 0; link < links; ++link) {
            const nvmlFieldValue_t* f = &v[at];
            at += kLinkFacts.size() + counters.size();
            const nvmlFieldValue_t& state = f[0];
            // A link past the GPU's last one; a GPU without NVLink answers Not Supported for its first.
            if (state.nvmlReturn == NVML_ERROR_INVALID_ARGUMENT || state.nvmlReturn == NVML_ERROR_NOT_FOUND) break;
            if (state.nvmlReturn == NVML_ERROR_NOT_SUPPORTED) {
                if (link == 0) state_unsupported = true;
                break;
            }
            auto active = health_field(state, "nvmlDeviceGetNvLinkState");
            if (!active) continue;
            if (first) {
                NvlinkState l{link, *active != 0};
                if (auto n = health_field(f[1], "NVML_FI_DEV_NVLINK_GET_VERSION")) l.version = static_cast<unsigned>(*n);
                if (auto n = health_field(f[2], "NVML_FI_DEV_NVLINK_GET_SPEED")) l.speed_mbps = static_cast<unsigned>(*n);
                dev_.nvlinks.push_back(l);
            }
            if (*active == 0) continue;  // an inactive link's counters say nothing of its health now
            NvlinkErrorCounters e{link};
            bool any = false;
            for (size_t c = 0; c < counters.size(); ++c)
                if (auto n = health_field(f[kLinkFacts.size() + c], counters[c].call)) {
                    e.*(counters[c].member) = *n;
                    any = true;
                }
            if (any) sample.nvlink_errors.push_back(e);
        }
        if (first && state_unsupported) note_unsupported("nvmlDeviceGetNvLinkState");
        return true;
    }

    // Blackwell's links (NVLink 5) answer other error counters than Hopper's.
    bool nvlink5() const {
        auto version = !dev_.nvlinks.empty() ? dev_.nvlinks[0].version : nvlink_version0_;
        return version && *version >= 5;
    }

    // The remote end of every active link: which device (by PCI address) and what kind.
    void query_nvlink_remotes() {
        for (auto& l : dev_.nvlinks) {
            if (!l.active) continue;
            nvmlPciInfo_t pci{};
            if (api_.nvlink_remote_pci) {
                calls_.announce("nvmlDeviceGetNvLinkRemotePciInfo_v2", fmt::format("link {}", l.link));
                nvmlReturn_t rc = api_.nvlink_remote_pci(h_, l.link, &pci);
                if (rc == NVML_SUCCESS) l.remote_pci = normalize_pci(library_string(pci.busId, sizeof pci.busId));
                else if (rc == NVML_ERROR_NOT_SUPPORTED) note_unsupported("nvmlDeviceGetNvLinkRemotePciInfo_v2");
                else calls_.file(fmt::format("nvmlDeviceGetNvLinkRemotePciInfo_v2(link {})", l.link), rc);
            } else {
                note_unsupported("nvmlDeviceGetNvLinkRemotePciInfo_v2 (not in this libnvidia-ml)");
            }
            int type = 0;
            if (api_.nvlink_remote_type) {
                calls_.announce("nvmlDeviceGetNvLinkRemoteDeviceType", fmt::format("link {}", l.link));
                nvmlReturn_t rc = api_.nvlink_remote_type(h_, l.link, &type);
                if (rc == NVML_SUCCESS)
                    l.remote_type = type == NVML_NVLINK_DEVICE_TYPE_GPU      ? NvlinkRemote::gpu
                                    : type == NVML_NVLINK_DEVICE_TYPE_SWITCH ? NvlinkRemote::nvswitch
                                    : type == NVML_NVLINK_DEVICE_TYPE_IBMNPU ? NvlinkRemote::ibmnpu
                                                                             : NvlinkRemote::unknown;
                else if (rc == NVML_ERROR_NOT_SUPPORTED) note_unsupported("nvmlDeviceGetNvLinkRemoteDeviceType");
                else calls_.file(fmt::format("nvmlDeviceGetNvLinkRemoteDeviceType(link {})", l.link), rc);
            } else {
                note_unsupported("nvmlDeviceGetNvLinkRemoteDeviceType (not in this libnvidia-ml)");
            }
        }
    }

    void query_fabric() {
        if (api_.fabric_v) {
            nvmlGpuFabricInfo_v2_t info{};
            info.version = nvmlGpuFabricInfo_v2;
            if (calls_.ask("nvmlDeviceGetGpuFabricInfoV", true, [&] { return api_.fabric_v(h_, &info); })) {
                dev_.fabric_state = info.state;
                dev_.fabric_status = static_cast<unsigned>(info.status);
                dev_.fabric_clique_id = info.cliqueId;
                dev_.fabric_cluster_uuid = cluster_uuid_text(info.clusterUuid);
            }
            return;
        }
        nvmlGpuFabricInfo_t info{};
        if (calls_.ask("nvmlDeviceGetGpuFabricInfo", api_.fabric != nullptr, [&] { return api_.fabric(h_, &info); })) {
            dev_.fabric_state = info.state;
            dev_.fabric_status = static_cast<unsigned>(info.status);
            dev_.fabric_clique_id = info.cliqueId;
            dev_.fabric_cluster_uuid = cluster_uuid_text(info.clusterUuid);
        }
    }

    // Only when nvmlDeviceGetFieldValues is missing or failed: each link's state, one call each.
    void query_nvlinks_call_by_call() {
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
    const HealthSampling& sampling_;
    std::optional<unsigned> nvlink_version0_;  // link 0's NVLink version, from the memory-health call
};

// The GPUs are asked side by side, one lane (thread) each up to kMaxLanes: the driver serialises much of the
// work, but not all of it (2xH200, device/nvml_cost.cpp: the whole child 37 ms with lanes, 42 ms without).
// Each lane announces its own calls, so a GPU that hangs is named while the others still answer; the layer
// is sent again as each GPU finishes, in index order, with the GPUs answered so far.
void query_devices(const NvmlApi& api, ProbeChannel& ch, NvmlLayer& layer, unsigned count,
                   const HealthSampling& sampling) {
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
                NvmlDeviceQuery(api, lane, dev, h, sampling).run();
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
    const HealthSampling sampling{std::chrono::milliseconds(options.health_interval_ms),
                                  std::chrono::steady_clock::now() + std::chrono::milliseconds(options.deadline_ms)};
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
    query_devices(api, ch, layer, std::min(count, 1024u), sampling);
}

}  // namespace gpudx
