// The watched run: the acceptance in a supervised child, each sub-test under its own deadline, so a hung GPU
// becomes a failed sub-test and the rest of the record, not a hung command.
#include "actions/accept.hpp"

#include <cerrno>
#include <cstring>

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

}  // namespace

AcceptReport run_acceptance_watched(const std::function<std::unique_ptr<AcceptDriver>()>& make_driver,
                                    const AcceptOptions& options, const WatchOptions& watch) {
    auto t0 = Clock::now();
    AcceptReport report = new_accept_report(options);

    auto give_up = [&](const std::string& why) {
        SubTest t;
        t.id = "driver.init";
        t.status = TestStatus::fail;
        t.reason = why;
        report.tests = {t};
        apply_verdict(report);
        report.wall_ms = ms_since(t0);
        return report;
    };

    auto child = Child::start([&](int fd) {
        PipeObserver obs(fd);
        auto driver = make_driver();
        auto r = run_acceptance(*driver, options, &obs);
        obs.send({{"type", "final"}, {"report", accept_report_to_json(r)}});
        return 0;
    });
    if (!child) {
        const Error& e = child.error();
        return give_up(e.path == "fork" ? "cannot fork the acceptance process: " + e.message
                                        : "cannot create a pipe: " + e.message);
    }
    const pid_t pid = child->pid();

    std::vector<SubTest> tests;
    std::optional<AcceptReport> final_report;
    std::string running;  // key of the sub-test in progress
    Clock::time_point running_deadline = Clock::time_point::max();
    auto overall_end = t0 + watch.overall;
    std::string stop_reason;
    bool child_gone = false;
    size_t done_count = 0;

    // The watchdog names the hung sub-test from these lines: past one it cannot read it could only guess, so it
    // stops the run there and says why.
    auto unreadable = [&](std::string_view line, std::string_view what) {
        stop_reason = fmt::format("the acceptance process wrote {} ({}): gpudx stopped it there", what, excerpt(line));
    };
    auto apply_line = [&](std::string_view line) {
        if (!stop_reason.empty() || final_report) return;  // the run is over: the final report is whole
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) return unreadable(line, "a line that is not a JSON object");
        if (!j.contains("type") || !j["type"].is_string()) return unreadable(line, "a line without a type");
        auto type = j["type"].get<std::string>();
        if (type == "header") {
            auto r = accept_report_from_json(j["report"]);
            if (!r) return unreadable(line, "a malformed header: " + r.error().message);
            report.gpus = r->gpus;
            report.driver_version = r->driver_version;
            report.cuda_driver_version = r->cuda_driver_version;
            report.driver_library = r->driver_library;
        } else if (type == "plan") {
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
        } else if (type == "start") {
            running = j.value("key", std::string());
            double scaled = j.value("deadline_ms", 60000.0) * watch.deadline_scale;
            running_deadline = Clock::now() + ms(static_cast<long>(std::max(scaled, 1.0)));
            if (watch.progress)
                for (auto& t : tests)
                    if (t.key() == running) watch.progress(t, done_count, tests.size());
        } else if (type == "done") {
            auto t = sub_test_from_json(j["test"]);
            if (!t) return unreadable(line, "a malformed result: " + t.error().message);
            ++done_count;
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
        } else if (type == "final") {
            auto r = accept_report_from_json(j["report"]);
            if (!r) return unreadable(line, "a malformed final report: " + r.error().message);
            final_report = std::move(*r);
        } else {
            unreadable(line, "a line of an unknown type");
        }
    };

    while (!final_report && stop_reason.empty()) {
        auto now = Clock::now();
        auto until = std::min(overall_end, running_deadline);
        if (now >= until) {
            stop_reason = now >= overall_end && (running.empty() || overall_end <= running_deadline)
                              ? fmt::format("the whole acceptance ran past its {} s limit", watch.overall.count() / 1000)
                              : "no answer from the driver within the sub-test's deadline: a driver call hung";
            break;
        }
        auto got = child->read_until(until);
        if (got == Child::Read::nothing) continue;
        if (got == Child::Read::failed) {
            stop_reason = child->error();
            break;
        }
        if (got == Child::Read::closed) {
            child_gone = true;
            break;
        }
        split_lines(child->received(), apply_line);
    }
    // A child that died while writing a line leaves part of it: said beside how it died.
    std::string cut_off;
    if (child_gone && !child->received().empty())
        cut_off = fmt::format("; its last line was cut off after {} bytes ({})", child->received().size(),
                              excerpt(child->received()));

    auto ended = final_report || child_gone ? child->finish(ms(final_report ? 5000 : 2000)) : child->kill();
    bool reaped = ended.reaped();

    if (final_report) {
        report = std::move(*final_report);
    } else {
        std::string died;
        if (child_gone && reaped) {
            if (ended.signaled())
                died = fmt::format("the acceptance process died (signal {}: {})", ended.signal(), strsignal(ended.signal()));
            else died = fmt::format("the acceptance process exited ({}) without finishing", ended.exit_code());
        }
        if (!died.empty()) died += cut_off;
        std::string why = !stop_reason.empty() ? stop_reason : died;
        if (!stop_reason.empty() && !reaped)
            why += fmt::format("; process {} did not exit after SIGKILL (stuck in the kernel driver)", pid);
        if (tests.empty()) {
            SubTest t;
            t.id = "driver.init";
            tests.push_back(t);
            running = t.key();
        }
        std::string after;
        for (auto& t : tests) {
            if (t.key() == running) {
                t.status = TestStatus::fail;
                t.reason = why.empty() ? "the acceptance process stopped during this test" : why;
                after = t.key();
            } else if (t.reason == "not reached") {
                t.status = TestStatus::not_run;
                t.reason = after.empty() ? "not reached: " + (why.empty() ? std::string("the acceptance stopped") : why)
                                         : "not reached: the acceptance stopped at " + after;
            }
        }
        report.tests = std::move(tests);
    }
    apply_verdict(report);
    report.wall_ms = ms_since(t0);
    return report;
}

}  // namespace gpudx
