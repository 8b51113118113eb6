// The Xid policy TOML (rules/reference/xid_policy.hpp): a site's file replaces built-in rules code by code.
#include "rules/reference/xid_policy.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto in = fuzz::text(data, size);
    auto p = parse_xid_policy(in, "fuzz.toml");
    if (!p) {
        // Errors name the file, so an operator can find the line.
        FUZZ_REQUIRE(p.error().message.find("fuzz.toml") != std::string::npos);
        return 0;
    }
    nlohmann::json j = nlohmann::json::array();
    for (int code : {0, 13, 31, 48, 79, 94, 95, 119, 154, 99999}) {
        auto& r = p->rule(code);
        j.push_back({r.meaning, r.action, r.note, r.origin, to_string(r.severity)});
    }
    j.push_back(p->version);
    fuzz::require_json_writable(j);
    (void)parse_severity(in);
    return 0;
}
