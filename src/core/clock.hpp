#pragma once
// Durations for reports (how long a step took) and the UTC timestamps records carry.
#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace gpudx {

using SteadyClock = std::chrono::steady_clock;

// Elapsed time since `start` on the monotonic clock, which wall-clock changes do not move.
double ms_since(SteadyClock::time_point start);
double seconds_since(SteadyClock::time_point start);

// "2026-12-01T09:30:00Z": RFC 3339 in UTC, to the second, as every gpudx record writes it.
std::string utc_iso8601(std::time_t t);
std::string utc_now_iso8601();
// "2026-12-02T00:14:03.127Z": to the millisecond, as the agent writes its events' and its own times.
std::string utc_iso8601_ms(int64_t unix_ms);
// Reads back exactly what utc_iso8601_ms writes; nullopt for anything else.
std::optional<int64_t> parse_utc_iso8601_ms(std::string_view text);

}  // namespace gpudx
