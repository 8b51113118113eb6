#include "render/prometheus.hpp"

#include <fmt/format.h>

#include "core/text.hpp"

namespace gpudx {

void prometheus_family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

std::string escape_prometheus_label(std::string_view value) {
    std::string out;
    for (char c : sanitize_utf8(value)) {
        if (c == '\\') out += "\\\\";
        else if (c == '"') out += "\\\"";
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

}  // namespace gpudx
