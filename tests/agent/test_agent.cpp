// The agent's parts without the agent: the kernel-log followers, the finding diff, event times, the event store.
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "agent/agent.hpp"
#include "agent/events.hpp"
#include "agent/follow.hpp"
#include "agent/nvml_watch.hpp"
#include "agent/store.hpp"
#include "follow_support.hpp"
#include "test_support.hpp"
#include "gpu_api/nvml/events.hpp"
#include "model/agent_status.hpp"
#include "render/agent_metrics.hpp"

namespace gpudx {
namespace {

using namespace std::chrono_literals;

// ---- kmsg sequence numbers

TEST(AgentKmsg, SequenceNumberIsTheSecondField) {
    EXPECT_EQ(KmsgSequence::parse("4,358,3449929,c;NVRM: Persistence mode is deprecated"), 358u);
    EXPECT_EQ(KmsgSequence::parse("6,1,0,-;Linux version 6.8.0"), 1u);
    EXPECT_FALSE(KmsgSequence::parse("[  12.5] NVRM: not a kmsg record"));
    EXPECT_FALSE(KmsgSequence::parse("4,,3449929,c;empty sequence"));
}

TEST(AgentKmsg, AGapAfterAnOverrunCountsTheLostRecords) {
    KmsgSequence seq;
    EXPECT_EQ(seq.advance(100), 0u);  // the first record seen: nothing known before it
    EXPECT_EQ(seq.advance(101), 0u);
    EXPECT_EQ(seq.advance(105), 3u);  // 102, 103, 104 overwritten before they were read
    EXPECT_EQ(seq.advance(106), 0u);
}

// ---- lines

TEST(AgentLines, PartialLinesWaitForTheirNewline) {
    LineSplitter split(64);
    std::vector<std::string> lines;
    auto sink = [&](std::string_view l) { lines.emplace_back(l); };
    split.feed("first\nsec", sink);
    ASSERT_EQ(lines, std::vector<std::string>{"first"});
    split.feed("ond\nthird", sink);
    EXPECT_EQ(lines, (std::vector<std::string>{"first", "second"}));
    split.flush(sink);
    EXPECT_EQ(lines.back(), "third");
    split.feed(std::string(150, 'x'), sink);  // longer than the limit: in pieces
    EXPECT_EQ(lines.size(), 5u);
}

TEST(AgentLines, KernelLinesThatMatterAreTheDiagnosisTopics) {
    std::vector<std::string> words = {"Uncorrectable ECC"};
    EXPECT_TRUE(kernel_line_matters(
        "4,400,5000000,-;NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.", words));
    EXPECT_TRUE(kernel_line_matters("[ 5.0] nvidia 0000:00:06.0: uncorrectable ecc error seen", words));
    EXPECT_FALSE(kernel_line_matters("6,401,5000001,-;usb 1-1: new high-speed USB device number 2", words));
    EXPECT_FALSE(kernel_line_matters(" SUBSYSTEM=pci", words));
}

// ---- following a file like tail -F

// Collects what a follower hands over, and lets a test wait for it (a deadline only as a safety net).
class Collected {
public:
    FollowSink sink() {
        FollowSink s;
        s.line = [this](std::string_view l) { add(lines_, std::string(l)); };
        s.note = [this](std::string n) { add(notes_, std::move(n)); };
        s.lost = [](uint64_t) {};
        return s;
    }
    bool wait_line(const std::string& text, std::chrono::milliseconds within = 30s) { return wait(lines_, text, within); }
    bool wait_note(const std::string& part) { return wait(notes_, part); }
    std::vector<std::string> lines() {
        std::lock_guard lock(m_);
        return lines_;
    }

private:
    void add(std::vector<std::string>& v, std::string s) {
        {
            std::lock_guard lock(m_);
            v.push_back(std::move(s));
        }
        cv_.notify_all();
    }
    bool wait(std::vector<std::string>& v, const std::string& part, std::chrono::milliseconds within = 30s) {
        std::unique_lock lock(m_);
        return cv_.wait_for(lock, within, [&] {
            for (const auto& s : v)
                if (s.find(part) != std::string::npos) return true;
            return false;
        });
    }
    std::mutex m_;
    std::condition_variable cv_;
    std::vector<std::string> lines_, notes_;
};

void append(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out << text;
}

class AgentFollowFile : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = test::scratch("follow");
        path_ = (dir_ / "kern.log").string();
        test::write_file(path_, "old line, already there\n");
        follower_.emplace(path_, collected_.sink());
        // The follower is at the file's end once an appended line comes through; one appended before it got
        // there is behind it, so append until one is seen (the wait is the rendezvous, not a measure).
        bool ready = false;
        for (int i = 0; i < 600 && !ready; ++i) {
            append(path_, "ready\n");
            ready = collected_.wait_line("ready", 50ms);
        }
        ASSERT_TRUE(ready);
    }
    void TearDown() override {
        follower_.reset();
        std::filesystem::remove_all(dir_);
    }
    std::filesystem::path dir_;
    std::string path_;
    Collected collected_;
    std::optional<test::FollowerThread> follower_;
};

TEST_F(AgentFollowFile, StartsAtTheEndAndSeesAppends) {
    append(path_, "one\ntwo\n");
    ASSERT_TRUE(collected_.wait_line("two"));
    auto lines = collected_.lines();
    ASSERT_GE(lines.size(), 3u);
    EXPECT_EQ(std::vector<std::string>(lines.end() - 3, lines.end()), (std::vector<std::string>{"ready", "one", "two"}));
    EXPECT_EQ(std::count(lines.begin(), lines.end(), "old line, already there"), 0) << "read what was there before";
}

TEST_F(AgentFollowFile, ATruncatedFileIsReadAgainFromItsStart) {
    { std::ofstream truncate(path_, std::ios::trunc); }
    ASSERT_TRUE(collected_.wait_note("truncated"));
    append(path_, "after truncation\n");
    EXPECT_TRUE(collected_.wait_line("after truncation"));
}

TEST_F(AgentFollowFile, ARotatedFileIsFollowedUnderItsName) {
    std::filesystem::rename(path_, path_ + ".1");
    append(path_ + ".1", "last line of the old file\n");
    test::write_file(path_, "first line of the new file\n");
    ASSERT_TRUE(collected_.wait_line("first line of the new file"));
    EXPECT_TRUE(collected_.wait_note("rotated") || collected_.wait_note("again"));
    append(path_, "second line of the new file\n");
    EXPECT_TRUE(collected_.wait_line("second line of the new file"));
}

TEST_F(AgentFollowFile, AVanishedFileIsSaidAndFollowedWhenItReturns) {
    std::filesystem::remove(path_);
    ASSERT_TRUE(collected_.wait_note("No such file"));
    test::write_file(path_, "back again\n");
    EXPECT_TRUE(collected_.wait_line("back again"));
}

// ---- findings that appear and clear

Finding finding(std::string id, Severity sev, std::string pci, std::string message = "m") {
    Finding f;
    f.id = std::move(id);
    f.layer = Layer::kernel_log;
    f.severity = sev;
    f.subjects = {GpuRef{"GPU-7e37a1f2-0000-4000-8000-000000000001", std::move(pci)}};
    f.message = std::move(message);
    return f;
}

// The event a finding makes when it first appears.
AgentEvent appeared_event(const Finding& f, int64_t time_ms) { return FindingLedger().advance({f}, {}, time_ms).at(0); }

TEST(AgentEvents, AFindingThatAppearsOrClearsIsAnEvent) {
    std::vector<Finding> before = {finding("kernel_log.xid", Severity::error, "0000:00:06.0"),
                                   finding("pcie.link_degraded", Severity::warning, "0000:00:07.0")};
    std::vector<Finding> after = {finding("kernel_log.xid", Severity::error, "0000:00:06.0", "2 Xid 79 events"),
                                  finding("kernel_log.xid", Severity::error, "0000:00:08.0"),
                                  finding("kernel_log.summary", Severity::info, "")};
    FindingLedger ledger;
    ledger.advance(before, {}, 500);
    auto events = ledger.advance(after, {}, 1000);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].kind, AgentEventKind::appeared);
    EXPECT_EQ(events[0].gpu_pci, "0000:00:08.0");
    EXPECT_EQ(events[0].severity, "error");
    EXPECT_EQ(events[1].kind, AgentEventKind::cleared);
    EXPECT_EQ(events[1].finding, "pcie.link_degraded");
    EXPECT_TRUE(ledger.advance(after, {}, 2000).empty());
}

TEST(AgentEvents, EventTimesAreUnixSecondsIsoOrAnAge) {
    int64_t now = 1'764'634'443'000;
    EXPECT_EQ(parse_event_time("1764634443", now), 1'764'634'443'000);
    EXPECT_EQ(parse_event_time("1764634443.5", now), 1'764'634'443'500);
    EXPECT_EQ(parse_event_time("2025-12-02T00:14:03Z", now), 1'764'634'443'000);
    EXPECT_EQ(parse_event_time("2025-12-02T00:14:03.250Z", now), 1'764'634'443'250);
    EXPECT_EQ(parse_event_time("2025-12-02T01:14:03+01:00", now), 1'764'634'443'000);
    EXPECT_EQ(parse_event_time("15m", now), now - 900'000);
    EXPECT_EQ(parse_event_time("2h", now), now - 7'200'000);
    EXPECT_FALSE(parse_event_time("yesterday", now));
    EXPECT_EQ(utc_iso8601_ms(1'764'634'443'250), "2025-12-02T00:14:03.250Z");
    auto e = event_from_json(event_to_json(appeared_event(finding("a.b", Severity::error, "0000:00:06.0"), 5)));
    EXPECT_EQ(e.finding, "a.b");
    EXPECT_EQ(e.gpu_pci, "0000:00:06.0");
    EXPECT_EQ(e.time_ms, 5);
}

// 1e300, inf and nan converted to milliseconds were undefined behaviour, and answered every event.
TEST(AgentEvents, EventTimesBeyondAnyEventAreRefused) {
    int64_t now = 1'764'634'443'000;
    for (const char* bad : {"1e300", "-1e300", "inf", "-inf", "nan", "1e300s", "1e300d", "infh", "nanm", "-5", "-5m",
                            "253402300800", "1e18"})
        EXPECT_FALSE(parse_event_time(bad, now)) << bad;
    EXPECT_EQ(parse_event_time("0", now), 0);
    EXPECT_EQ(parse_event_time("253402300799", now), 253'402'300'799'000);
    EXPECT_EQ(parse_event_time("30d", 0), -2'592'000'000);  // --retain's age
    auto [rc, out] = test::run_gpudx("events --since 1e300 --url http://127.0.0.1:1");
    EXPECT_EQ(rc, 64) << out;
    EXPECT_NE(out.find("--since 1e300"), std::string::npos) << out;
}

// ---- the event store

std::vector<AgentEvent> some_events(int n, int64_t t0) {
    std::vector<AgentEvent> v;
    for (int i = 0; i < n; ++i) {
        auto e = appeared_event(finding("kernel_log.xid", Severity::error, "0000:00:06.0", std::string(200, 'e')), t0 + i);
        v.push_back(e);
    }
    return v;
}

TEST(AgentStore, StoresAndQueriesEventsInOrder) {
    auto dir = test::scratch("store");
    auto store = EventStore::open({.path = (dir / "events.db").string()});
    ASSERT_TRUE(store) << store.error().message;
    auto batch = some_events(5, now_ms());
    ASSERT_TRUE((*store)->append(batch));
    EXPECT_GT(batch[4].id, batch[0].id);
    auto all = (*store)->query(0, 0, 100);
    ASSERT_EQ(all.size(), 5u);
    EXPECT_EQ(all[0].finding, "kernel_log.xid");
    EXPECT_EQ((*store)->query(0, batch[2].id, 100).size(), 2u);
    EXPECT_EQ((*store)->query(batch[3].time_ms, 0, 100).size(), 2u);
    EXPECT_EQ((*store)->integrity_check(), "ok");
    std::filesystem::remove_all(dir);
}

// The store's rows and /v1/events' answers are read through read_event_kind: a kind a newer gpudx wrote stays listed.
TEST(AgentEvents, AKindThisGpudxDoesNotKnowIsSaidNotTakenForAnother) {
    std::string message = "went away";
    EXPECT_EQ(read_event_kind("quarantined", message), AgentEventKind::agent);
    EXPECT_EQ(message, "an event of kind \"quarantined\", which this gpudx does not know: went away");
    message = "x";
    EXPECT_EQ(read_event_kind("drain_failed", message), AgentEventKind::drain_failed);
    EXPECT_EQ(message, "x");
    auto e = event_from_json({{"kind", "quarantined"}, {"message", "m"}, {"time_ms", 5}});
    EXPECT_EQ(e.kind, AgentEventKind::agent);
    EXPECT_EQ(e.message, "an event of kind \"quarantined\", which this gpudx does not know: m");
    EXPECT_EQ(event_from_json(event_to_json(some_events(1, 7)[0])).kind, some_events(1, 7)[0].kind);
}

TEST(AgentNames, EachKindAndTriggerHasOneNameThatReadsBack) {
    std::vector<std::string_view> kinds, triggers;
    for (auto k : kAllAgentEventKinds) {
        kinds.push_back(to_string(k));
        EXPECT_EQ(parse_agent_event_kind(to_string(k)), k);
    }
    for (auto t : kAllDiagnosisTriggers) {
        triggers.push_back(to_string(t));
        EXPECT_EQ(parse_diagnosis_trigger(to_string(t)), t);
    }
    // The names /metrics, /v1/events and the store have always used, in this order.
    EXPECT_EQ(kinds, (std::vector<std::string_view>{"appeared", "changed", "cleared", "drained", "resumed",
                                                    "drain_failed", "nvml", "agent"}));
    EXPECT_EQ(triggers, (std::vector<std::string_view>{"start", "interval", "kernel_log", "nvml_event"}));
    EXPECT_FALSE(parse_agent_event_kind("Appeared"));
    EXPECT_FALSE(parse_diagnosis_trigger(""));
    for (auto t : kAllNvmlEventTypes) {
        EXPECT_EQ(parse_nvml_event_type(to_string(t)), t);
        EXPECT_EQ(nvml_event_type_of_bit(nvml_event_bit(t)), t);
    }
    EXPECT_FALSE(parse_nvml_event_type("0x40000000"));
    EXPECT_FALSE(nvml_event_type_of_bit(0x40000000ull));
}

AgentStatus some_status() {
    AgentStatus s;
    s.version = "1.2.3";
    s.started_ms = 1'764'634'443'250;
    s.uptime_s = 12.5;
    s.serving = {"127.0.0.1:9400", "/run/gpudx/agent.sock"};
    s.nvml_events = {.watching = true, .received = 3};
    s.kernel_log = {.source = "/dev/kmsg", .lines_read = 100, .lines_matched = 4, .kmsg_records_lost = 1};
    s.last_diagnosis = AgentStatus::LastDiagnosis{1'764'634'450'001, DiagnosisTrigger::kernel_log, 812.5};
    s.store = {.database = true, .writable = true, .stored = 42, .pending = 0, .dropped = 0, .write_failures = 1,
               .problem = "", .moved_aside = ""};
    s.drain = AgentStatus::Drain{"node17", "drained Slurm node node17", false};
    s.notes = {{1'764'634'443'300, "gpudx agent started"}};
    return s;
}

TEST(AgentStatusJson, WhatTheAgentServesReadsBack) {
    auto s = some_status();
    auto j = agent_status_to_json(s);
    EXPECT_EQ(j["started"], "2025-12-02T00:14:03.250Z");
    EXPECT_EQ(j["last_diagnosis"]["trigger"], "kernel_log");
    auto back = agent_status_from_json(nlohmann::json::parse(j.dump()));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(agent_status_to_json(*back), j);
    EXPECT_EQ(back->last_diagnosis->time_ms, s.last_diagnosis->time_ms);
    EXPECT_EQ(back->drain->node, "node17");
    // Without a database the store says four things, and reads back the same.
    s.store = {.database = false, .writable = false, .stored = 0, .pending = 7, .problem = "no room"};
    s.drain.reset();
    s.last_diagnosis.reset();
    j = agent_status_to_json(s);
    EXPECT_EQ(j["store"].size(), 4u);
    EXPECT_FALSE(j.contains("drain"));
    back = agent_status_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(agent_status_to_json(*back), j);
    EXPECT_FALSE(back->store.database);
}

TEST(AgentStatusJson, WhatItCannotReadIsSaid) {
    auto j = agent_status_to_json(some_status());
    auto trigger = j;
    trigger["last_diagnosis"]["trigger"] = "cron";
    auto r = agent_status_from_json(trigger);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("cron"), std::string::npos) << r.error().message;
    auto time = j;
    time["started"] = "yesterday";
    EXPECT_FALSE(agent_status_from_json(time));
    auto missing = j;
    missing.erase("kernel_log");
    r = agent_status_from_json(missing);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("kernel_log"), std::string::npos) << r.error().message;
    EXPECT_FALSE(agent_status_from_json(nlohmann::json::array()));
}

TEST(AgentMetrics, EveryKindAndTriggerHasItsSeries) {
    auto s = some_status();
    s.events_by_kind[static_cast<size_t>(AgentEventKind::drained)] = 2;
    s.diagnoses_by_trigger[static_cast<size_t>(DiagnosisTrigger::interval)] = 9;
    auto text = render_agent_metrics(s);
    EXPECT_EQ(text.rfind("# HELP gpudx_agent_events_total Events the agent recorded since it started, by kind.\n"
                         "# TYPE gpudx_agent_events_total counter\n"
                         "gpudx_agent_events_total{kind=\"appeared\"} 0\n",
                         0),
              0u);
    EXPECT_NE(text.find("gpudx_agent_events_total{kind=\"drained\"} 2\n"), std::string::npos);
    EXPECT_NE(text.find("gpudx_agent_diagnoses_total{trigger=\"interval\"} 9\n"), std::string::npos);
    EXPECT_NE(text.find("gpudx_agent_diagnoses_total{trigger=\"nvml_event\"} 0\n"), std::string::npos);
    EXPECT_NE(text.find("gpudx_agent_store_writable 1\n"), std::string::npos);
    EXPECT_NE(text.find("gpudx_agent_last_diagnosis_timestamp_seconds 1764634450.001\n"), std::string::npos);
    s.last_diagnosis.reset();
    EXPECT_EQ(render_agent_metrics(s).find("last_diagnosis"), std::string::npos);
}

TEST(AgentStore, OldEventsAndEventsPastTheSizeGo) {
    auto dir = test::scratch("store-bounds");
    auto store = EventStore::open({.path = (dir / "events.db").string(), .max_age_ms = 60'000, .max_bytes = 256 * 1024});
    ASSERT_TRUE(store);
    int64_t now = now_ms();
    auto old = some_events(3, now - 120'000);
    (*store)->append(old);
    (*store)->prune(now);
    EXPECT_EQ((*store)->query(0, 0, 100000).size(), 0u);
    for (int i = 0; i < 20; ++i) {
        auto batch = some_events(200, now);
        (*store)->append(batch);
        (*store)->prune(now);
    }
    auto kept = (*store)->query(0, 0, 100000).size();
    EXPECT_LT(kept, 4000u);  // 4000 appended, about 1 KiB of pages each: most went
    EXPECT_GT(kept, 0u);
    auto size = std::filesystem::file_size(dir / "events.db");
    EXPECT_LT(size, 512u * 1024) << "the file grew past its bound";
    std::filesystem::remove_all(dir);
}

TEST(AgentStore, ACorruptDatabaseIsMovedAsideAndANewOneStarted) {
    auto dir = test::scratch("store-corrupt");
    auto path = (dir / "events.db").string();
    test::write_file(path, std::string(8192, 'x'));
    auto store = EventStore::open({.path = path});
    ASSERT_TRUE(store) << store.error().message;
    auto st = (*store)->status();
    EXPECT_TRUE(st.writable);
    EXPECT_NE(st.problem.find("moved aside"), std::string::npos) << st.problem;
    ASSERT_FALSE(st.moved_aside.empty());
    EXPECT_TRUE(std::filesystem::exists(st.moved_aside));
    auto events = (*store)->query(0, 0, 10);
    ASSERT_EQ(events.size(), 1u);  // the store says so as its first event
    EXPECT_EQ(events[0].kind, AgentEventKind::agent);
    EXPECT_EQ((*store)->integrity_check(), "ok");
    std::filesystem::remove_all(dir);
}

TEST(AgentStore, ADirectoryThatCannotHoldADatabaseIsAnError) {
    auto store = EventStore::open({.path = "/nonexistent-gpudx-dir/events.db"});
    ASSERT_FALSE(store);
    EXPECT_NE(store.error().message.find("/nonexistent-gpudx-dir/events.db"), std::string::npos);
}

// A child writes events in a loop and tells the parent after each commit; the parent kills it with SIGKILL
// while it is writing, then checks the database and opens it again.
TEST(AgentStore, IntactAfterKillMinus9MidWrite) {
    auto dir = test::scratch("store-kill");
    auto path = (dir / "events.db").string();
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::close(ready[0]);
        auto store = EventStore::open({.path = path});
        if (!store) ::_exit(2);
        for (int i = 0;; ++i) {
            auto batch = some_events(20, now_ms());
            if (!(*store)->append(batch)) ::_exit(3);
            char c = 'w';
            if (i == 50) (void)!::write(ready[1], &c, 1);  // 1000 events committed; writing goes on
        }
    }
    ::close(ready[1]);
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the writer died before committing";
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(ready[0]);
    ASSERT_TRUE(WIFSIGNALED(status));
    // sqlite3's own check (when the sqlite3 program is there), then the store's.
    std::string check = "sqlite3 '" + path + "' 'PRAGMA integrity_check' 2>&1";
    if (FILE* f = ::popen(check.c_str(), "r")) {
        char buf[256] = {};
        size_t n = std::fread(buf, 1, sizeof buf - 1, f);
        int rc = ::pclose(f);
        if (WEXITSTATUS(rc) != 127) {
            EXPECT_EQ(std::string(buf, n), "ok\n");
        }
    }
    auto store = EventStore::open({.path = path});
    ASSERT_TRUE(store) << store.error().message;
    EXPECT_EQ((*store)->integrity_check(), "ok");
    EXPECT_TRUE((*store)->status().moved_aside.empty()) << (*store)->status().problem;
    EXPECT_GE((*store)->query(0, 0, 1000000).size(), 1020u);
    std::filesystem::remove_all(dir);
}


// ---- NVML events: the watcher's lines, and the watcher over a stand-in child

TEST(AgentNvml, EventTypeNamesRoundTripAndTheHealthMaskLeavesOutTheBusyGpusLife) {
    for (const auto& name : nvml_event_type_names(nvml_all_event_mask())) {
        auto bit = nvml_event_type_bit(name);
        ASSERT_TRUE(bit) << name;
        EXPECT_EQ(nvml_event_type_name(*bit), name);
    }
    auto health = nvml_event_type_names(nvml_health_event_mask());
    for (const char* busy : {"pstate", "clock", "power_source", "mig_config", "single_bit_ecc"})
        EXPECT_EQ(std::count(health.begin(), health.end(), busy), 0) << busy;
    for (const char* failing : {"xid", "double_bit_ecc", "recovery_action", "gpu_unavailable", "fatal_poison"})
        EXPECT_EQ(std::count(health.begin(), health.end(), failing), 1) << failing;
    EXPECT_EQ(nvml_event_type_name(0x40000000ull), "0x40000000");
}

TEST(AgentNvml, EachLineOfTheWatcherIsRead) {
    using K = NvmlWatchLine::Kind;
    auto e = parse_nvml_watch_line(R"({"line":"event","time":"2026-12-02T06:00:00Z","index":1,"uuid":"GPU-40cd403d",)"
                                   R"("pci":"0000:00:07.0","type":"xid","mask":8,"data":79,"gpu_instance":5})");
    ASSERT_EQ(e.kind, K::event);
    EXPECT_EQ(e.event.index, 1u);
    EXPECT_EQ(e.event.pci, "0000:00:07.0");
    EXPECT_EQ(e.event.type, NvmlEventType::xid);
    EXPECT_EQ(e.event.data, 79u);
    EXPECT_EQ(e.event.gpu_instance, 5u);
    EXPECT_FALSE(e.event.compute_instance);
    auto r = parse_nvml_watch_line(R"({"line":"ready","devices":[{"index":0,"uuid":"GPU-992cb470","pci":"0000:00:06.0",)"
                                   R"("registered":["xid","double_bit_ecc"]},{"index":1,"uuid":"GPU-x","registered":[]}]})");
    ASSERT_EQ(r.kind, K::ready);
    ASSERT_EQ(r.watching.size(), 1u);  // a GPU registered for nothing is not watched
    EXPECT_EQ(r.watching[0], "GPU-992cb470 (0000:00:06.0): xid, double_bit_ecc");
    auto c = parse_nvml_watch_line(R"({"line":"call","call":"nvmlDeviceRegisterEvents","index":1})");
    EXPECT_EQ(c.kind, K::call);
    EXPECT_EQ(c.call, "nvmlDeviceRegisterEvents(1)");
    EXPECT_EQ(parse_nvml_watch_line(R"({"line":"unavailable","reason":"no GPU"})").reason, "no GPU");
    EXPECT_EQ(parse_nvml_watch_line(R"({"line":"alive"})").kind, K::alive);
    // An event of a type gpudx does not know (a newer watcher's, a bit without a name) is said, never read as another.
    for (const char* bad : {"not json", R"({"line":"bogus"})", R"({"line":"event","data":1})", "[1,2]",
                            R"({"line":"event","type":"0x40000000","mask":1073741824,"data":0})",
                            R"({"line":"event","type":"xid_storm","mask":8,"data":79})"}) {
        auto b = parse_nvml_watch_line(bad);
        EXPECT_EQ(b.kind, K::unreadable) << bad;
        EXPECT_FALSE(b.reason.empty()) << bad;
    }
}

// What `gpudx nvml-events --types all` wrote on the 1xH200 machine while a workload ran (driver 580.159.04):
// every line is read, and the events are the GPU's real clock events.
TEST(AgentNvml, EveryLineTheRealH200WroteIsRead) {
    std::ifstream in(std::string(GPUDX_SOURCE_DIR) + "/docs/device-runs/2026-12-02-h200x1-session7/all.jsonl");
    ASSERT_TRUE(in);
    std::map<NvmlWatchLine::Kind, int> kinds;
    std::string line;
    while (std::getline(in, line)) {
        auto l = parse_nvml_watch_line(line);
        ASSERT_NE(l.kind, NvmlWatchLine::Kind::unreadable) << l.reason;
        ++kinds[l.kind];
        if (l.kind == NvmlWatchLine::Kind::event) {
            EXPECT_EQ(l.event.type, NvmlEventType::clock);
            EXPECT_EQ(l.event.mask, 0x10u);
            EXPECT_EQ(l.event.uuid, "GPU-8f88c2fb-1183-539a-8a15-2d59ee85952c");
            EXPECT_EQ(l.event.pci, "0000:00:06.0");
            EXPECT_FALSE(l.event.gpu_instance);
        }
        if (l.kind == NvmlWatchLine::Kind::ready) {
            ASSERT_EQ(l.watching.size(), 1u);
            EXPECT_NE(l.watching[0].find("recovery_action"), std::string::npos) << l.watching[0];
        }
    }
    EXPECT_EQ(kinds[NvmlWatchLine::Kind::call], 8);
    EXPECT_EQ(kinds[NvmlWatchLine::Kind::ready], 1);
    EXPECT_EQ(kinds[NvmlWatchLine::Kind::event], 194);
}

// A stand-in watcher: a shell script printing the protocol's lines.
NvmlWatchOptions script_watcher(const std::filesystem::path& dir, const std::string& body,
                                std::chrono::milliseconds quiet = 60s) {
    auto script = dir / "watcher.sh";
    std::ofstream(script) << body;
    NvmlWatchOptions o;
    o.command = {"/bin/sh", script.string()};
    o.quiet_limit = quiet;
    o.restart_after = 3600s;
    return o;
}

// Checks the watcher until `done` holds (a safety net of 30 s, never a measure).
template <class Done>
std::vector<NvmlEventWatcher::Outcome> check_until(NvmlEventWatcher& w, Done&& done) {
    std::vector<NvmlEventWatcher::Outcome> seen;
    auto give_up = std::chrono::steady_clock::now() + 30s;
    while (!done(seen) && std::chrono::steady_clock::now() < give_up) {
        seen.push_back(w.check(std::chrono::steady_clock::now()));
        std::this_thread::sleep_for(10ms);
    }
    return seen;
}

bool noted(const std::vector<NvmlEventWatcher::Outcome>& seen, std::string_view words) {
    for (auto& o : seen)
        for (auto& n : o.notes)
            if (n.find(words) != std::string::npos) return true;
    return false;
}

TEST(AgentNvml, TheWatchersEventsAndNotesReachTheAgent) {
    auto dir = test::scratch("nvml-watch");
    NvmlEventWatcher w(script_watcher(dir, R"(echo '{"line":"ready","devices":[{"uuid":"GPU-1","pci":"0000:00:06.0","registered":["xid"]}]}'
echo '{"line":"event","time":"t","uuid":"GPU-1","pci":"0000:00:06.0","type":"xid","mask":8,"data":79}'
echo 'garbage'
sleep 600
)"));
    auto seen = check_until(w, [](auto& s) { return !s.empty() && noted(s, "garbage"); });
    size_t events = 0;
    for (auto& o : seen) events += o.events.size();
    EXPECT_EQ(events, 1u);
    EXPECT_TRUE(noted(seen, "NVML events: watching GPU-1 (0000:00:06.0): xid"));
    EXPECT_TRUE(noted(seen, "the watcher wrote not JSON: \"garbage\""));
    EXPECT_GE(w.fd(), 0);  // still running: quiet, but within its limit
    std::filesystem::remove_all(dir);
}

TEST(AgentNvml, AQuietWatcherIsKilledNamingItsCallAndOneThatEndsIsSaid) {
    auto dir = test::scratch("nvml-watch-hung");
    NvmlEventWatcher hung(script_watcher(dir, R"(echo '{"line":"call","call":"nvmlDeviceRegisterEvents","index":1}'
exec sleep 600
)", 300ms));
    auto seen = check_until(hung, [](auto& s) { return noted(s, "hung"); });
    EXPECT_TRUE(noted(seen, "the watcher hung in nvmlDeviceRegisterEvents(1) (no line for 0.3 s) and was killed"));
    EXPECT_EQ(hung.fd(), -1);
    ASSERT_TRUE(hung.next_check());  // started again later (restart_after)

    NvmlEventWatcher ends(script_watcher(dir, "echo '{\"line\":\"ready\",\"devices\":[]}'\nexit 7\n"));
    seen = check_until(ends, [](auto& s) { return noted(s, "exited 7"); });
    EXPECT_TRUE(noted(seen, "NVML events: the watcher exited 7; starting it again in 3600.0 s"));

    // Nothing to watch: said once, and the child's exit 3 is no news of its own.
    NvmlEventWatcher none(script_watcher(dir, "echo '{\"line\":\"unavailable\",\"reason\":\"no driver\"}'\nexit 3\n"));
    seen = check_until(none, [&](auto& s) { return noted(s, "no driver") && none.fd() == -1; });
    EXPECT_TRUE(noted(seen, "NVML events: nothing to watch: no driver"));
    EXPECT_FALSE(noted(seen, "exited"));
    std::filesystem::remove_all(dir);
}

TEST(AgentNvml, SnapshotsCarryTheEventsOnlyWhenThereAreSome) {
    Snapshot s;
    EXPECT_FALSE(snapshot_to_json(s).contains("nvml_events"));
    NvmlEvent e;
    e.time = "2026-12-02T06:00:00Z";
    e.uuid = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";
    e.pci = "0000:00:06.0";
    e.type = NvmlEventType::xid;
    e.mask = 8;
    e.data = 79;
    e.gpu_instance = 3;
    s.nvml_events.push_back(e);
    auto j = snapshot_to_json(s);
    ASSERT_TRUE(j.contains("nvml_events"));
    auto back = snapshot_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    ASSERT_EQ(back->nvml_events.size(), 1u);
    EXPECT_EQ(back->nvml_events[0].pci, e.pci);
    EXPECT_EQ(back->nvml_events[0].data, 79u);
    EXPECT_EQ(back->nvml_events[0].gpu_instance, 3u);
    EXPECT_FALSE(back->nvml_events[0].compute_instance);
}

}  // namespace
}  // namespace gpudx

namespace gpudx {
namespace {

// An NVML Xid storm is recorded as a change: its first event, then one event per interval with the count since the
// last one recorded, and the storm's tail once it is due, whether or not more events come.
TEST(NvmlEventCoalescer, AStormIsItsFirstEventThenCounts) {
    NvmlEventCoalescer c(60'000);
    NvmlEvent x95{.time = "2026-12-01T00:00:00Z", .index = 0, .uuid = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d",
                  .pci = "0000:00:06.0", .type = NvmlEventType::xid, .mask = 0, .data = 95};
    NvmlEvent x48 = x95;
    x48.data = 48;
    std::vector<NvmlEvent> burst(10000, x95);
    burst.push_back(x48);
    auto first = c.take(burst, 1'000);
    ASSERT_EQ(first.size(), 2u) << "one event per GPU and code";
    EXPECT_NE(first[0].message.find("Xid 95 on GPU-992cb470"), std::string::npos) << first[0].message;
    EXPECT_NE(first[1].message.find("Xid 48"), std::string::npos);
    EXPECT_TRUE(c.take(std::vector<NvmlEvent>(5000, x95), 30'000).empty()) << "within the interval: counted only";
    auto due = c.take({}, 61'000);
    ASSERT_EQ(due.size(), 1u);
    EXPECT_NE(due[0].message.find("repeated: 14999 more since the last one recorded, 15000 in all"), std::string::npos)
        << due[0].message;
    EXPECT_TRUE(c.take({}, 200'000).empty()) << "nothing new: nothing recorded";
    auto again = c.take({x95}, 200'001);
    ASSERT_EQ(again.size(), 1u) << "the interval passed: the next one is recorded with its count";
    EXPECT_NE(again[0].message.find("1 more"), std::string::npos) << again[0].message;
    // Another GPU's same code is its own first event.
    NvmlEvent other = x95;
    other.uuid = "GPU-5fc0bcec-c2e1-38dc-8994-2a9f9f3b709e";
    other.pci = "0000:48:00.0";
    EXPECT_EQ(c.take({other}, 200'002).size(), 1u);
}

}  // namespace
}  // namespace gpudx
