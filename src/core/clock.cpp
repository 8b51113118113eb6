#include "core/clock.hpp"

#include <fmt/compile.h>
#include <fmt/format.h>

namespace gpudx {

double ms_since(SteadyClock::time_point start) {
    return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

double seconds_since(SteadyClock::time_point start) {
    return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

std::string utc_iso8601(std::time_t t) {
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string utc_iso8601_ms(int64_t unix_ms) {
    std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    // The format compiled at build time: /v1/events writes a time per event, and parsing it at run time at every
    // call cost more than the formatting.
    return fmt::format(FMT_COMPILE("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z"), tm.tm_year + 1900, tm.tm_mon + 1,
                       tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(unix_ms % 1000));
}

std::optional<int64_t> parse_utc_iso8601_ms(std::string_view text) {
    // Fixed width: YYYY-MM-DDTHH:MM:SS.mmmZ.
    constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd.dddZ";
    if (text.size() != kShape.size()) return std::nullopt;
    for (size_t i = 0; i < kShape.size(); ++i)
        if (kShape[i] == 'd' ? (text[i] < '0' || text[i] > '9') : text[i] != kShape[i]) return std::nullopt;
    auto number = [&](size_t at, size_t width) {
        int n = 0;
        for (size_t i = at; i < at + width; ++i) n = n * 10 + (text[i] - '0');
        return n;
    };
    std::tm tm{};
    tm.tm_year = number(0, 4) - 1900;
    tm.tm_mon = number(5, 2) - 1;
    tm.tm_mday = number(8, 2);
    tm.tm_hour = number(11, 2);
    tm.tm_min = number(14, 2);
    tm.tm_sec = number(17, 2);
    if (tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
        return std::nullopt;
    return static_cast<int64_t>(timegm(&tm)) * 1000 + number(20, 3);
}

std::string utc_now_iso8601() { return utc_iso8601(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())); }

}  // namespace gpudx
