// The fleet report's SAX reader of snapshot files (fleet/fleet.hpp): thousands of files from other nodes,
// truncated ones included.
#include "fuzz.hpp"
#include "fleet/fleet.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto n = parse_fleet_snapshot(fuzz::text(data, size));
    if (!n) return 0;
    fuzz::require_json_writable(node_record_to_json(n->record));
    nlohmann::json x = nlohmann::json::array();
    for (auto& e : n->xids) x.push_back({e.pci, e.code});
    x.push_back(n->collected_at);
    fuzz::require_json_writable(x);
    return 0;
}
