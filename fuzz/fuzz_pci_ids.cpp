// The pci.ids database (collect/pci_ids.hpp), searched for the ids a node has.
#include "collect/pci_ids.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    static const std::vector<std::pair<uint16_t, uint16_t>> wanted = {
        {0x10de, 0x2335}, {0x10de, 0x22a3}, {0x1002, 0x74a1}, {0x8086, 0x1237}, {0x0000, 0x0000}, {0xffff, 0xffff}};
    auto names = parse_pci_ids(fuzz::text(data, size), wanted);
    nlohmann::json j = nlohmann::json::array();
    for (auto& [id, name] : names.vendors) j.push_back(name);
    for (auto& [id, name] : names.devices) {
        FUZZ_REQUIRE(std::find(wanted.begin(), wanted.end(), id) != wanted.end());
        j.push_back(name);
    }
    fuzz::require_printable(j);
    return 0;
}
