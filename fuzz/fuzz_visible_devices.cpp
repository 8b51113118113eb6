// CUDA_VISIBLE_DEVICES and its relatives (identity/visible_devices.hpp), matched against a node's GPUs.
#include "fuzz.hpp"
#include "identity/visible_devices.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    static const std::vector<NodeGpu> gpus = {
        {"GPU-992cb470-9027-88f4-48a9-a9a329d6978d", "0000:00:06.0", 0, 0,
         {"MIG-1f2e3d4c-5b6a-7988-a1b2-c3d4e5f60718", "MIG-1f2e3d4c-5b6a-7988-a1b2-c3d4e5f60719"}},
        {"GPU-40cd403d-66ba-4608-72b9-5be5031085dc", "0000:00:07.0", 1, 1, {}},
        {"GPU-40cd403d-0000-4608-72b9-5be5031085dd", "0000:00:08.0", 2, std::nullopt, {}},
    };
    auto v = parse_visible_devices(std::string(fuzz::text(data, size)));
    (void)to_string(v.kind);
    (void)v.has_indices();
    (void)v.has_uuids();
    auto eff = v.effective();
    if (v.first_invalid) FUZZ_REQUIRE(*v.first_invalid < v.entries.size() && eff.size() == *v.first_invalid);
    for (auto meaning : {IndexMeaning::pci_order, IndexMeaning::device_minor}) {
        for (auto& m : match_visible_devices(v, gpus, meaning)) {
            for (size_t g : m.gpus) FUZZ_REQUIRE(g < gpus.size());
            fuzz::require_printable(nlohmann::json(m.entry.text));
        }
    }
    return 0;
}
