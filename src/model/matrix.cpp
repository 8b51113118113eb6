// The matrix's dates.
#include "model/matrix.hpp"

#include <chrono>
#include <ctime>

#include <fmt/format.h>

#include "core/text.hpp"

namespace gpudx {

std::string CalendarDate::str() const { return fmt::format("{:04}-{:02}-{:02}", year, month, day); }

std::optional<CalendarDate> CalendarDate::parse(std::string_view t) {
    t = trim(t);
    if (t.size() != 10 || t[4] != '-' || t[7] != '-') return std::nullopt;
    auto y = parse_uint(t.substr(0, 4)), m = parse_uint(t.substr(5, 2)), d = parse_uint(t.substr(8, 2));
    if (!y || !m || !d || *m < 1 || *m > 12 || *d < 1 || *d > 31) return std::nullopt;
    return CalendarDate{static_cast<int>(*y), static_cast<int>(*m), static_cast<int>(*d)};
}

CalendarDate today_utc() {
    auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm tm{};
    gmtime_r(&t, &tm);
    return {tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday};
}

}  // namespace gpudx
