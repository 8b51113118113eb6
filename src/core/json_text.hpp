#pragma once
// JSON as text with invalid UTF-8 (a file name, a log line, a process name) replaced instead of thrown on:
// nlohmann's dump() throws on one stray byte, which would lose a whole answer or report.
#include <string>

#include <nlohmann/json.hpp>

namespace gpudx {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gpudx
