#pragma once
// Shared by the fuzz targets. Besides "no crash, no sanitizer report", each target checks properties the
// rest of gpudx relies on; a broken property aborts with its message, which libFuzzer saves as a crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/json_support.hpp"

namespace gpudx::fuzz {

inline std::string_view text(const uint8_t* data, size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

[[noreturn]] inline void violated(const char* what, const char* file, int line) {
    std::fprintf(stderr, "fuzz property violated at %s:%d: %s\n", file, line, what);
    std::abort();
}

// nlohmann::json::dump() throws on invalid UTF-8, which would lose the whole report. A document that gpudx
// writes without repairing it (matrix, fleet, accept, xid: their strings come from TOML and JSON, valid by
// construction) must be writable as it is.
inline void require_json_writable(const nlohmann::json& j) {
    try {
        (void)j.dump();
    } catch (const nlohmann::json::exception& e) {
        violated(e.what(), __FILE__, __LINE__);
    }
}

// What a parser of node files keeps reaches a printed document (snapshot, diagnosis, ids, verify) through
// repair_utf8, as those documents are printed: the repaired document must be writable.
inline void require_printable(nlohmann::json j) {
    repair_utf8(j);
    require_json_writable(j);
}

// Splits the input at the first NUL (or newline when there is none) into two independent strings.
inline std::pair<std::string_view, std::string_view> split2(std::string_view in) {
    auto cut = in.find('\0');
    if (cut == std::string_view::npos) cut = in.find('\n');
    if (cut == std::string_view::npos) return {in, {}};
    return {in.substr(0, cut), in.substr(cut + 1)};
}

}  // namespace gpudx::fuzz

#define FUZZ_REQUIRE(cond) \
    do {                   \
        if (!(cond)) ::gpudx::fuzz::violated(#cond, __FILE__, __LINE__); \
    } while (0)
