#pragma once
// Durations for reports (how long a step took) and the UTC timestamps records carry.
#include <chrono>
#include <ctime>
#include <string>

namespace gpudx {

using SteadyClock = std::chrono::steady_clock;

// Elapsed time since `start` on the monotonic clock, which wall-clock changes do not move.
double ms_since(SteadyClock::time_point start);
double seconds_since(SteadyClock::time_point start);

// "2026-12-01T09:30:00Z": RFC 3339 in UTC, to the second, as every gpudx record writes it.
std::string utc_iso8601(std::time_t t);
std::string utc_now_iso8601();

}  // namespace gpudx
