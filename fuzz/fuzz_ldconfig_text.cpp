// Text the library layer reads beside the binary cache (collect/ld_so_cache.hpp): `ldconfig -p` output as
// captures record it, /etc/ld.so.conf, and versions from library file names.
#include "collect/ld_so_cache.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto in = fuzz::text(data, size);

    nlohmann::json j = nlohmann::json::array();
    if (auto cache = parse_ldconfig_p(in)) {
        for (auto& e : cache->entries) {
            FUZZ_REQUIRE(!e.name.empty() && !e.path.empty());
            j.push_back({e.name, e.path, describe_ld_cache_flags(e.flags)});
        }
        for (auto& p : cache->problems) j.push_back(p);
    }
    auto conf = parse_ld_so_conf(in);
    for (auto& d : conf.dirs) {
        FUZZ_REQUIRE(!d.empty());
        j.push_back(d);
    }
    for (auto& i : conf.includes) j.push_back(i);
    fuzz::require_printable(j);

    auto [file, soname] = fuzz::split2(in);
    for (bool keep : {false, true}) {
        auto v = library_version_from_name(file, soname, keep);
        FUZZ_REQUIRE(v.find_first_not_of("0123456789.") == std::string::npos);
    }
    return 0;
}
