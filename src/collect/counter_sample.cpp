#include "collect/counter_sample.hpp"

#include <thread>

namespace gpudx {

std::optional<double> wait_for_later_sample(const CollectContext& ctx) {
    auto interval = ctx.options.counter_interval;
    if (interval.count() <= 0) return std::nullopt;
    // A replayed tree does not change: waiting would only slow every test and every `--root` diagnosis.
    if (ctx.root.is_live()) std::this_thread::sleep_for(interval);
    return static_cast<double>(interval.count());
}

}  // namespace gpudx
