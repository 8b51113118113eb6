// Text the library layer reads beside the binary cache (collect/ld_so_cache.hpp): `ldconfig -p` output as
// captures record it, /etc/ld.so.conf, versions from library file names, and a driver library's version from its
// bytes (collect/library_version.hpp).
#include "collect/ld_so_cache.hpp"
#include "collect/library_version.hpp"
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

    auto rodata = elf_rodata(in);
    FUZZ_REQUIRE(rodata.data() >= in.data() && rodata.data() + rodata.size() <= in.data() + in.size());
    auto driver = driver_version_in_bytes(rodata);
    FUZZ_REQUIRE(driver.empty() || (driver.size() >= 5 && driver[3] == '.' &&
                                    driver.find_first_not_of("0123456789.") == std::string::npos &&
                                    in.find(std::string(1, '\0') + driver + '\0') != std::string_view::npos));
    return 0;
}
