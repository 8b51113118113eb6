// --since: the start of the kernel-log window, as seconds since boot or a wall time in any of the forms the
// logs write, and a line's wall time on the same nominal scale.
#include <string>

#include <fmt/format.h>

#include "collect/kernel_log/lexing.hpp"
#include "collect/kernel_log_parse.hpp"
#include "core/text.hpp"

namespace gpudx {

using namespace kernel_log_lexing;

std::optional<int64_t> parse_wall_time(std::string_view text, int default_year) {
    text = trim(text);
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
    int64_t offset_s = 0;
    if (size_t n = read_iso_time(text, 0); n > 0 && n == text.size()) {
        y = std::stoi(std::string(text.substr(0, 4)));
        mo = std::stoi(std::string(text.substr(5, 2)));
        d = std::stoi(std::string(text.substr(8, 2)));
        read_clock(text, 11, h, mi, s);
        size_t z = text.find_first_of("+-Z", 19);
        if (z != std::string_view::npos && text[z] != 'Z') {
            std::string digits;
            for (char c : text.substr(z + 1))
                if (is_digit(c)) digits += c;
            int oh = std::stoi(digits.substr(0, 2)), om = digits.size() >= 4 ? std::stoi(digits.substr(2, 2)) : 0;
            offset_s = (oh * 3600 + om * 60) * (text[z] == '-' ? -1 : 1);
        }
    } else if (text.size() == 10 && read_iso_time(std::string(text) + "T00:00:00", 0) == 19) {
        y = std::stoi(std::string(text.substr(0, 4)));
        mo = std::stoi(std::string(text.substr(5, 2)));
        d = std::stoi(std::string(text.substr(8, 2)));
    } else {
        auto tok = split_ws(text);
        size_t t0 = (!tok.empty() && is_weekday(tok[0])) ? 1 : 0;
        if (tok.size() < t0 + 3) return std::nullopt;
        mo = month_index(tok[t0]);
        uint64_t day = 0;
        if (mo == 0 || read_digits(tok[t0 + 1], 0, day, 2) != tok[t0 + 1].size() || day < 1 || day > 31)
            return std::nullopt;
        d = static_cast<int>(day);
        if (read_clock(tok[t0 + 2], 0, h, mi, s) != tok[t0 + 2].size()) return std::nullopt;
        if (tok.size() == t0 + 4) {
            uint64_t year = 0;
            if (read_digits(tok[t0 + 3], 0, year, 4) != 4 || tok[t0 + 3].size() != 4) return std::nullopt;
            y = static_cast<int>(year);
        } else if (tok.size() == t0 + 3) {
            y = default_year;
        } else {
            return std::nullopt;
        }
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31) return std::nullopt;
    return days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 + mi * 60 + s -
           offset_s;
}

Result<SinceSpec> parse_since(std::string_view text) {
    text = trim(text);
    SinceSpec spec;
    if (auto v = parse_double(text); v && *v >= 0) {
        spec.monotonic_s = *v;
        return spec;
    }
    // ISO forms start with the year and dmesg -T ends with it; journal-short has none and means this year.
    auto tok = split_ws(text);
    std::optional<int> year;
    uint64_t y = 0;
    if (text.size() >= 5 && read_digits(text, 0, y, 4) == 4 && text[4] == '-') year = static_cast<int>(y);
    else if (!tok.empty() && tok.back().size() == 4 && read_digits(tok.back(), 0, y, 4) == 4) year = static_cast<int>(y);
    int assumed = year.value_or(current_utc_year());
    if (auto w = parse_wall_time(text, assumed)) {
        spec.wall_s = *w;
        spec.year = assumed;
        return spec;
    }
    return fail(fmt::format("--since {}: not seconds since boot (\"3600\") nor a wall time (\"2026-11-30T06:28:08\", "
                            "\"Mon Nov 30 06:28:08 2026\", \"Nov 30 06:28:08\")",
                            text));
}

}  // namespace gpudx
