#include "core/toml.hpp"

#include <fmt/format.h>

namespace gpudx {

Result<toml::table> parse_toml(std::string_view text, const std::string& origin) {
    // Fault-isolation boundary: a reader of a third-party format (toml++ reports a syntax error by throwing).
    try {
        return toml::parse(text, origin);
    } catch (const toml::parse_error& e) {
        return fail(fmt::format("{}:{}:{}: {}", origin, e.source().begin.line, e.source().begin.column,
                                e.description()),
                    origin);
    }
}

std::string toml_where(const std::string& origin, const toml::source_region& r) {
    return r.begin.line > 0 ? fmt::format("{}:{}", origin, r.begin.line) : origin;
}

}  // namespace gpudx
