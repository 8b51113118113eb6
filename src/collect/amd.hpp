#pragma once
// AMD GPUs in the module layer: amdgpu's DRM cards (/sys/class/drm) and the KFD topology
// (/sys/class/kfd/kfd/topology). Pure parsers exposed for unit tests; formats in docs/amd.md.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/root.hpp"
#include "model/collector_status.hpp"
#include "model/module.hpp"

namespace gpudx {

// nodes/N/properties: one "name value" pair per line (kfd_topology.c writes "%s %u" / "%s %llu"). Lines that are
// not exactly two words, or whose value is not a decimal number, are skipped.
std::map<std::string, std::string> parse_kfd_properties(std::string_view text);
// PCI address of a KFD node: `location_id` is the PCI device id (bus << 8 | devfn, devfn = device << 3 | function)
// and `domain` the PCI domain. "0000:05:00.0" for domain 0 and location_id 1280.
std::string kfd_location_to_pci(uint32_t domain, uint32_t location_id);
// A KFD node from its directory number and files; gpu_id_text and name_text as read (nullopt: absent).
KfdNode kfd_node_from(unsigned node, const std::map<std::string, std::string>& properties,
                      const std::optional<std::string>& gpu_id_text, const std::optional<std::string>& name_text);
// A unique id as 16 lower-case hex digits: from sysfs device/unique_id ("a5e3b7c4d2f1e09a", with or without 0x),
// or from KFD's decimal property. Empty for 0 (no unique id on this ASIC) or text that is neither.
std::string unique_id_from_hex(std::string_view text);
std::string unique_id_from_decimal(std::string_view text);
// ROCm's UUID for a unique id ("GPU-" + the 16 hex digits), as ROCR_VISIBLE_DEVICES and rocminfo write it.
std::string amd_uuid(std::string_view unique_id);
// device/fw_version/<name>_fw_version holds "0x%08x": the value, or nullopt when the text is not that.
std::optional<uint32_t> parse_amd_fw_version(std::string_view text);
// "card1" -> 1, "renderD128" -> 128 (prefix "card" or "renderD" given); nullopt for "card1-DP-1" and the like.
std::optional<uint32_t> drm_index(std::string_view name, std::string_view prefix);
// gfx_target_version 90402 -> "gfx942" (major*10000 + minor*100 + stepping, the last two in hex digits).
std::string gfx_name_from_target_version(uint32_t v);

// Reads /sys/class/drm and the KFD topology into layer.amd_gpus, kfd_nodes and kfd_topology_listed.
void read_amd_gpus(const Root& root, ModuleLayer& layer, std::vector<ReadProblem>& problems);

}  // namespace gpudx
