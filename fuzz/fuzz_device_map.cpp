// The checkpoint device map (actions/device_map.hpp): "OLD=NEW,…" and "swap:A,B", resolved against a node.
// A plan that comes out must be a permutation of the node's GPUs: the driver restores onto exactly it.
#include <set>

#include "fuzz.hpp"
#include "actions/device_map.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    static const std::vector<CheckpointGpu> gpus = {
        {0, "GPU-992cb470-9027-88f4-48a9-a9a329d6978d", "0000:00:06.0", "NVIDIA H200 NVL", 140ull << 30, 141ull << 30},
        {1, "GPU-40cd403d-66ba-4608-72b9-5be5031085dc", "0000:00:07.0", "NVIDIA H200 NVL", 1ull << 30, 141ull << 30},
        {2, "GPU-5a6b7c8d-0000-4608-72b9-5be5031085dd", "", "NVIDIA H100", std::nullopt, std::nullopt},
    };
    auto in = fuzz::text(data, size);
    (void)parse_device_map(in);
    (void)resolve_gpu(in, gpus);
    MemoryHeld held = std::map<std::string, uint64_t>{{gpus[0].uuid, 100ull << 30}};
    for (const MemoryHeld* h : {static_cast<const MemoryHeld*>(&held), static_cast<const MemoryHeld*>(nullptr)}) {
        auto plan = h ? plan_device_map(in, gpus, *h) : plan_device_map(in, gpus);
        if (!plan) continue;
        FUZZ_REQUIRE(plan->pairs.size() == gpus.size());
        std::set<std::string> olds, news, all;
        for (auto& g : gpus) all.insert(g.uuid);
        for (auto& p : plan->pairs) {
            olds.insert(p.old_uuid);
            news.insert(p.new_uuid);
        }
        FUZZ_REQUIRE(olds == all && news == all);
        (void)plan->remaps();
    }
    for (auto& g : gpus) (void)describe_gpu(g);
    return 0;
}
