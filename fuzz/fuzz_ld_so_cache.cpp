// /etc/ld.so.cache read without glibc (collect/ld_so_cache.hpp): old, new and combined layouts.
#include "collect/ld_so_cache.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto cache = parse_ld_so_cache(fuzz::text(data, size));
    if (!cache) return 0;
    nlohmann::json j = nlohmann::json::array();
    for (auto& e : cache->entries) {
        FUZZ_REQUIRE(!e.name.empty() && !e.path.empty());
        j.push_back({e.name, e.path, describe_ld_cache_flags(e.flags), ld_cache_entry_is_x86_64(e.flags)});
    }
    for (auto& p : cache->problems) j.push_back(p);
    fuzz::require_printable(j);
    return 0;
}
