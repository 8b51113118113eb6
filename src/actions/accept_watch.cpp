// The watched run: the acceptance in a supervised child, each sub-test under its own deadline, so a hung GPU
// becomes a failed sub-test and the rest of the record, not a hung command.
#include "actions/accept.hpp"

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actions/accept_support.hpp"
#include "core/supervisor.hpp"
#include "core/text.hpp"

namespace gpudx {

using namespace accept_internal;

// ---- the watched run -----------------------------------------------------------------------------

namespace {

class PipeObserver : public AcceptObserver {
public:
    explicit PipeObserver(int fd) : fd_(fd) {}
    void send(const nlohmann::json& j) { write_all(fd_, json_line(j)); }
    void header(const AcceptReport& r) override { send({{"type", "header"}, {"report", accept_report_to_json(r)}}); }
    void planned(const std::vector<SubTest>& tests) override {
        nlohmann::json arr = nlohmann::json::array();
        for (auto& t : tests) arr.push_back(sub_test_to_json(t));
        send({{"type", "plan"}, {"tests", arr}});
    }
    void started(const SubTest& t, ms deadline) override {
        send({{"type", "start"}, {"key", t.key()}, {"deadline_ms", deadline.count()}});
    }
    void finished(const SubTest& t) override { send({{"type", "done"}, {"test", sub_test_to_json(t)}}); }

private:
    int fd_;
};

// A run that could not start: one failed driver.init sub-test says why.
AcceptReport report_not_started(AcceptReport report, const std::string& why, Clock::time_point t0) {
    SubTest t;
    t.id = "driver.init";
    t.status = TestStatus::fail;
    t.reason = why;
    report.tests = {t};
    apply_verdict(report);
    report.wall_ms = ms_since(t0);
    return report;
}

// The run as the child's lines tell it (PipeObserver writes them): the plan with each result so far, the sub-test
// in progress and its deadline, and the final report once the child sends it. The watchdog names the hung
// sub-test from these lines: past one it cannot read it could only guess, so it stops the run there and says why.
class WatchedRun {
public:
    WatchedRun(AcceptReport& report, const WatchOptions& watch) : report_(report), watch_(watch) {}

    bool over() const { return final_report || !stop_reason.empty(); }

    void apply_line(std::string_view line) {
        if (over()) return;  // the run is over: the final report is whole
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) return unreadable(line, "a line that is not a JSON object");
        if (!j.contains("type") || !j["type"].is_string()) return unreadable(line, "a line without a type");
        auto type = j["type"].get<std::string>();
        if (type == "header") take_header(j, line);
        else if (type == "plan") take_plan(j, line);
        else if (type == "start") take_start(j);
        else if (type == "done") take_result(j, line);
        else if (type == "final") take_final_report(j, line);
        else unreadable(line, "a line of an unknown type");
    }

    std::vector<SubTest> tests;
    std::optional<AcceptReport> final_report;
    std::string running;  // key of the sub-test in progress
    Clock::time_point running_deadline = Clock::time_point::max();
    std::string stop_reason;

private:
    void unreadable(std::string_view line, std::string_view what) {
        stop_reason = fmt::format("the acceptance process wrote {} ({}): gpudx stopped it there", what, excerpt(line));
    }

    void take_header(const nlohmann::json& j, std::string_view line) {
        auto r = accept_report_from_json(j["report"]);
        if (!r) return unreadable(line, "a malformed header: " + r.error().message);
        report_.gpus = r->gpus;
        report_.driver_version = r->driver_version;
        report_.cuda_driver_version = r->cuda_driver_version;
        report_.driver_library = r->driver_library;
    }

    // A new plan keeps the results already in for the sub-tests it still holds.
    void take_plan(const nlohmann::json& j, std::string_view line) {
        std::map<std::string, SubTest> known;
        for (auto& t : tests) known[t.key()] = t;
        std::vector<SubTest> next;
        for (auto& tj : j["tests"]) {
            auto t = sub_test_from_json(tj);
            if (!t) return unreadable(line, "a plan with a malformed sub-test: " + t.error().message);
            auto it = known.find(t->key());
            next.push_back(it != known.end() && it->second.status != TestStatus::not_run ? it->second : *t);
        }
        tests = std::move(next);
    }

    void take_start(const nlohmann::json& j) {
        running = j.value("key", std::string());
        double scaled = j.value("deadline_ms", 60000.0) * watch_.deadline_scale;
        running_deadline = Clock::now() + ms(static_cast<long>(std::max(scaled, 1.0)));
        if (watch_.progress)
            for (auto& t : tests)
                if (t.key() == running) watch_.progress(t, done_count_, tests.size());
    }

    void take_result(const nlohmann::json& j, std::string_view line) {
        auto t = sub_test_from_json(j["test"]);
        if (!t) return unreadable(line, "a malformed result: " + t.error().message);
        ++done_count_;
        bool placed = false;
        for (auto& x : tests)
            if (x.key() == t->key()) {
                x = *t;
                placed = true;
            }
        if (!placed) tests.push_back(*t);
        if (running == t->key()) {
            running.clear();
            running_deadline = Clock::time_point::max();
        }
    }

    void take_final_report(const nlohmann::json& j, std::string_view line) {
        auto r = accept_report_from_json(j["report"]);
        if (!r) return unreadable(line, "a malformed final report: " + r.error().message);
        final_report = std::move(*r);
    }

    AcceptReport& report_;
    const WatchOptions& watch_;
    size_t done_count_ = 0;
};

// Reads the child's lines into the run until it is over, the child closes its end (true), reading fails, or
// the sub-test's deadline or the whole run's passes (a stop reason says which).
bool read_until_over(Child& child, WatchedRun& run, Clock::time_point overall_end, const WatchOptions& watch) {
    while (!run.over()) {
        auto now = Clock::now();
        auto until = std::min(overall_end, run.running_deadline);
        if (now >= until) {
            run.stop_reason = now >= overall_end && (run.running.empty() || overall_end <= run.running_deadline)
                                  ? fmt::format("the whole acceptance ran past its {} s limit",
                                                watch.overall.count() / 1000)
                                  : "no answer from the driver within the sub-test's deadline: a driver call hung";
            return false;
        }
        auto got = child.read_until(until);
        if (got == Child::Read::nothing) continue;
        if (got == Child::Read::failed) {
            run.stop_reason = child.error();
            return false;
        }
        if (got == Child::Read::closed) return true;
        split_lines(child.received(), [&](std::string_view line) { run.apply_line(line); });
    }
    return false;
}

// Why a run without a final report ended: the stop reason, else how the child died (with the part of a line it
// was writing), and a child the kernel would not let go.
std::string why_stopped(const WatchedRun& run, bool child_gone, const ChildExit& ended, const std::string& cut_off,
                        pid_t pid) {
    std::string died;
    if (child_gone && ended.reaped()) {
        if (ended.signaled())
            died = fmt::format("the acceptance process died (signal {}: {})", ended.signal(), strsignal(ended.signal()));
        else died = fmt::format("the acceptance process exited ({}) without finishing", ended.exit_code());
    }
    if (!died.empty()) died += cut_off;
    std::string why = !run.stop_reason.empty() ? run.stop_reason : died;
    if (!run.stop_reason.empty() && !ended.reaped())
        why += fmt::format("; process {} did not exit after SIGKILL (stuck in the kernel driver)", pid);
    return why;
}

// The sub-test in progress fails with `why` (driver.init when none was planned yet); those not reached after
// it are not run.
std::vector<SubTest> fail_at_running_test(WatchedRun& run, const std::string& why) {
    if (run.tests.empty()) {
        SubTest t;
        t.id = "driver.init";
        run.tests.push_back(t);
        run.running = t.key();
    }
    std::string after;
    for (auto& t : run.tests) {
        if (t.key() == run.running) {
            t.status = TestStatus::fail;
            t.reason = why.empty() ? "the acceptance process stopped during this test" : why;
            after = t.key();
        } else if (t.reason == "not reached") {
            t.status = TestStatus::not_run;
            t.reason = after.empty() ? "not reached: " + (why.empty() ? std::string("the acceptance stopped") : why)
                                     : "not reached: the acceptance stopped at " + after;
        }
    }
    return std::move(run.tests);
}

}  // namespace

AcceptReport run_acceptance_watched(const std::function<std::unique_ptr<AcceptDriver>()>& make_driver,
                                    const AcceptOptions& options, const WatchOptions& watch) {
    auto t0 = Clock::now();
    AcceptReport report = new_accept_report(options);

    auto child = Child::start([&](int fd) {
        PipeObserver obs(fd);
        auto driver = make_driver();
        auto r = run_acceptance(*driver, options, &obs);
        obs.send({{"type", "final"}, {"report", accept_report_to_json(r)}});
        return 0;
    });
    if (!child) {
        const Error& e = child.error();
        return report_not_started(std::move(report),
                                  e.path == "fork" ? "cannot fork the acceptance process: " + e.message
                                                   : "cannot create a pipe: " + e.message,
                                  t0);
    }

    const pid_t pid = child->pid();  // the child's id is gone from it once ended
    WatchedRun run(report, watch);
    bool child_gone = read_until_over(*child, run, t0 + watch.overall, watch);
    // A child that died while writing a line leaves part of it: said beside how it died.
    std::string cut_off;
    if (child_gone && !child->received().empty())
        cut_off = fmt::format("; its last line was cut off after {} bytes ({})", child->received().size(),
                              excerpt(child->received()));

    bool finished = run.final_report.has_value();
    auto ended = finished || child_gone ? child->finish(ms(finished ? 5000 : 2000)) : child->kill();
    if (finished) report = std::move(*run.final_report);
    else report.tests = fail_at_running_test(run, why_stopped(run, child_gone, ended, cut_off, pid));
    apply_verdict(report);
    report.wall_ms = ms_since(t0);
    return report;
}

}  // namespace gpudx
