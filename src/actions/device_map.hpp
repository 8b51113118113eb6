#pragma once
// The device map of a checkpoint restore: which GPU each checkpointed GPU comes back on.
// Users name GPUs by UUID, PCI address or index; the driver wants UUID pairs covering every GPU
// the process can see (cuda-checkpoint: "must contain all checkpointed devices"), so a partial
// map is expanded with identity pairs and then checked to be a permutation.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "model/device_map.hpp"

namespace gpudx {

// One "old=new" item as the user wrote it, before it is resolved against the node.
struct DeviceMapItem {
    std::string old_spec, new_spec;
    bool operator==(const DeviceMapItem&) const = default;
};

// "OLD=NEW,OLD=NEW,…" and the shorthand "swap:A,B" (= "A=B,B=A"), freely mixed. Checks everything
// that does not need the node: the shape, and that each side can name a GPU (UUID, PCI address, index),
// so a mistyped map is refused before any driver is loaded.
Result<std::vector<DeviceMapItem>> parse_device_map(std::string_view text);

// The node GPU a spec names: a UUID ("GPU-…", any case), a PCI address in any spelling, or an index.
// Returns its position in `gpus`.
Result<size_t> resolve_gpu(std::string_view spec, const std::vector<CheckpointGpu>& gpus);

struct DeviceMapPlan {
    std::vector<GpuPair> pairs;      // one per node GPU, in index order; unmapped GPUs map to themselves
    std::vector<std::string> notes;  // checks that could not be made, for the report
    bool remaps() const;             // any pair whose old and new differ
};

// Bytes the processes being moved hold on each GPU, keyed by UUID; nullopt when unknown.
using MemoryHeld = std::optional<std::map<std::string, uint64_t>>;

// Resolves, expands and validates a map against this node: every GPU exists, each is a source at most
// once, the result is a permutation, source and target are the same model, and each target has room
// for what arrives (its free memory plus what the moved processes release there).
Result<DeviceMapPlan> plan_device_map(std::string_view text, const std::vector<CheckpointGpu>& gpus,
                                      const MemoryHeld& held = std::nullopt);

}  // namespace gpudx
