// The node record as JSON, and reading a saved record back.
#include "model/node_record.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/input_file.hpp"
#include "core/pci_address.hpp"
#include "model/json_support.hpp"

namespace gpudx {

GPUDX_JSON(RecordedLink, speed_gts, width)
GPUDX_JSON(RecordedNvlink, link, active, remote_pci, remote_type)
GPUDX_JSON(RecordedGpu, uuid, pci, slot, model, vbios, link_max, link_current, numa_node, minor, nvlinks, nvlink_count)
GPUDX_JSON(RecordedIbPort, device, pci, port, active, state, phys_state, link_layer, rate, rate_gbps)
GPUDX_JSON(RecordedLibrary, soname, path, version)
GPUDX_JSON(RecordedXid, uuid, pci, code, recovery, count, last_text)

nlohmann::json node_record_to_json(const NodeRecord& r) {
    nlohmann::json j;
    j["kind"] = kNodeRecordKind;
    j["schema_version"] = r.schema_version;
    j["recorded_at"] = r.recorded_at;
    j["snapshot_taken_at"] = r.snapshot_taken_at;
    j["gpudx_version"] = r.gpudx_version;
    j["hostname"] = r.hostname;
    j["kernel_release"] = r.kernel_release;
    j["driver_version"] = r.driver_version;
    j["driver_branch"] = r.driver_branch;
    j["module_file"] = r.module_file;
    j["module_file_version"] = r.module_file_version;
    j["libraries"] = r.libraries;
    j["fabric_manager"] = r.fabric_manager;
    j["cuda_driver_version"] = r.cuda_driver_version;
    j["cuda_version"] = cuda_version_text(r.cuda_driver_version);
    j["gpus"] = r.gpus;
    j["boot_id"] = r.boot_id;
    j["recovery_xids"] = r.recovery_xids;
    j["ib_ports"] = r.ib_ports;
    repair_utf8(j);
    return j;
}

Result<NodeRecord> node_record_from_json(const nlohmann::json& input) {
    nlohmann::json j = input;
    if (auto bad = normalise_numbers(j)) return fail("node record does not match the schema: " + *bad);
    if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string() ||
        j["kind"].get<std::string>() != kNodeRecordKind)
        return fail("not a gpudx node record (no \"kind\": \"gpudx-node-record\"); make one with `gpudx baseline save`");
    if (!j.contains("schema_version") || !j["schema_version"].is_number_integer())
        return fail("node record has no integer schema_version");
    int version = j["schema_version"].get<int>();
    if (version > kNodeRecordSchemaVersion)
        return fail(fmt::format("node record schema version {} is newer than this gpudx understands ({}); upgrade gpudx",
                                version, kNodeRecordSchemaVersion));
    NodeRecord r;
    // Fault-isolation boundary: a reader of a third-party format (nlohmann's get<> throws on a wrong type).
    try {
        r.schema_version = version;
        r.recorded_at = j.value("recorded_at", "");
        r.snapshot_taken_at = j.value("snapshot_taken_at", "");
        r.gpudx_version = j.value("gpudx_version", "");
        r.hostname = j.value("hostname", "");
        r.kernel_release = j.value("kernel_release", "");
        r.driver_version = j.value("driver_version", "");
        r.driver_branch = j.value("driver_branch", driver_branch_of(r.driver_version));
        r.module_file = j.value("module_file", "");
        r.module_file_version = j.value("module_file_version", "");
        if (j.contains("libraries")) r.libraries = j["libraries"].get<std::vector<RecordedLibrary>>();
        r.fabric_manager = j.value("fabric_manager", "");
        if (j.contains("cuda_driver_version")) r.cuda_driver_version = j["cuda_driver_version"].get<std::optional<int>>();
        if (j.contains("gpus")) r.gpus = j["gpus"].get<std::vector<RecordedGpu>>();
        r.boot_id = j.value("boot_id", "");
        if (j.contains("recovery_xids")) r.recovery_xids = j["recovery_xids"].get<std::vector<RecordedXid>>();
        if (j.contains("ib_ports")) r.ib_ports = j["ib_ports"].get<std::optional<std::vector<RecordedIbPort>>>();
    } catch (const nlohmann::json::exception& e) {
        return fail(std::string("node record does not match the schema: ") + e.what());
    }
    for (auto& g : r.gpus) {
        g.pci = normalize_pci(g.pci);
        if (g.nvlinks)
            for (auto& l : *g.nvlinks)
                if (!l.remote_pci.empty()) l.remote_pci = normalize_pci(l.remote_pci);
    }
    return r;
}

Result<NodeRecord> load_node_record(const std::string& path) {
    auto text = read_input_file(path, 64u << 20);
    if (!text) return fail("cannot read the node record: " + text.error().message, path, text.error().sys_errno);
    nlohmann::json j;
    // Fault-isolation boundary: a reader of a third-party format; only the exception carries where the
    // JSON went wrong.
    try {
        j = nlohmann::json::parse(*text);
    } catch (const nlohmann::json::parse_error& e) {
        return fail(std::string("not valid JSON: ") + e.what(), path);
    }
    auto r = node_record_from_json(j);
    if (!r) {
        auto e = r.error();
        e.path = path;
        return std::unexpected(e);
    }
    return r;
}

}  // namespace gpudx
