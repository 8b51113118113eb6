// The state file the shim publishes and `gpudx verify` reads (identity/verify.hpp): written by another process,
// possibly torn by a crash mid-write.
#include "fuzz.hpp"
#include "identity/verify.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto s = parse_shim_state(fuzz::text(data, size));
    if (!s) return 0;
    nlohmann::json j = nlohmann::json::array({s->mode, s->proc_root, s->nvml});
    for (auto& o : s->ordinals) {
        j.push_back({o.uuid, o.driver_bus, o.current_bus, o.source});
        for (auto& h : o.handed_out) j.push_back(h);
    }
    fuzz::require_printable(j);
    return 0;
}
