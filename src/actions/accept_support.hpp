#pragma once
// What the acceptance files share (accept_*.cpp): clocks, a sub-test's reasons, the report's header. Internal to
// gpudx accept; nothing else includes it.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "actions/accept.hpp"
#include "core/clock.hpp"
#include "core/text.hpp"

namespace gpudx::accept_internal {

inline constexpr double kGB = 1e9;
using ms = std::chrono::milliseconds;
using Clock = SteadyClock;

// pass < warn < not_run < fail: the order in which one outcome is worse than another.
inline int status_rank(TestStatus s) {
    switch (s) {
    case TestStatus::pass: return 0;
    case TestStatus::warn: return 1;
    case TestStatus::not_run: return 2;
    case TestStatus::fail: return 3;
    }
    return 3;
}

inline bool looks_like_uuid(std::string_view s) {
    auto l = to_lower(s);
    return l.starts_with("gpu-") || l.starts_with("mig-");
}

// Rounds down to a 2 MiB multiple, the allocation granularity that keeps every copy aligned.
inline uint64_t round_2mib(uint64_t bytes) { return bytes & ~((2ull << 20) - 1); }

// Applies a floor to one figure: records the floor, and worsens the test with a reason.
inline void hold_to_floor(SubTest& t, const std::string& figure, std::optional<double> floor,
                          const std::string& label) {
    if (!floor) return;
    t.thresholds[figure] = *floor;
    double v = t.figures.count(figure) ? t.figures[figure] : NAN;
    auto st = judge_floor(v, floor);
    if (st == TestStatus::pass) return;
    std::string why = st == TestStatus::fail
                          ? fmt::format("{} {:.1f} GB/s is below the floor of {:.1f} GB/s", label, v, *floor)
                          : fmt::format("{} {:.1f} GB/s is within 5 % of the floor of {:.1f} GB/s", label, v, *floor);
    t.status = worse(t.status, st);
    t.reason = t.reason.empty() ? why : t.reason + "; " + why;
}

inline void add_reason(SubTest& t, TestStatus st, const std::string& why) {
    t.status = worse(t.status, st);
    t.reason = t.reason.empty() ? why : t.reason + "; " + why;
}

inline double gbps(uint64_t bytes, unsigned reps, double seconds, double factor = 1.0) {
    if (seconds <= 0) return NAN;
    return factor * static_cast<double>(bytes) * reps / seconds / kGB;
}

// A report before any test ran: who, where, how, against which floors. Both the in-process run and the watched
// run start from it.
inline AcceptReport new_accept_report(const AcceptOptions& o) {
    AcceptReport r;
    r.gpudx_version = GPUDX_VERSION;
    r.started_at = utc_now_iso8601();
    r.node = o.node;
    r.kernel = o.kernel;
    r.module_version = o.module_version;
    r.image_digest = o.image_digest;
    r.mode = o.long_mode ? "long" : "quick";
    r.thresholds = o.thresholds;
    r.thresholds_source = o.thresholds_source;
    return r;
}

}  // namespace gpudx::accept_internal
