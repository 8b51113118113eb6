#pragma once
// Counters judged by how they grow (PCIe AER, InfiniBand port errors): a count since boot says what happened once,
// growth says what is happening now. Each collector reads its counters once; only when that first reading shows
// errors does it read them again, options.counter_interval later, so a healthy node pays nothing.
#include <optional>

#include "collect/context.hpp"

namespace gpudx {

// Waits for the later reading: the interval on the live machine, nothing on a replayed root (its later reading was
// recorded, Root::read_sample). Returns the interval the later reading stands for in milliseconds, or nullopt when
// no later reading is to be taken (--health-interval 0).
std::optional<double> wait_for_later_sample(const CollectContext& ctx);

}  // namespace gpudx
