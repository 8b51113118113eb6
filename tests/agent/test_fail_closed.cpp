// Failing closed (issue 28): what could not be read is never health, a warning that becomes an error is news,
// the agent's memory survives a restart, and no line of a followed file is lost to a rotation or a rewrite.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sys/sysmacros.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include <gtest/gtest.h>

#include "agent/events.hpp"
#include "agent/follow.hpp"
#include "agent/store.hpp"
#include "collect/collectors.hpp"
#include "rules/engine/diagnose.hpp"
#include "follow_support.hpp"
#include "test_support.hpp"

namespace gpudx {
namespace {

using namespace std::chrono_literals;

Finding xid(Severity sev, std::string message = "Xid") {
    Finding f;
    f.id = "kernel_log.xid";
    f.layer = Layer::kernel_log;
    f.severity = sev;
    f.subjects = {GpuRef{"GPU-63acd0f2-e950-182f-ae7d-ac246f19966d", "0000:00:06.0"}};
    f.message = std::move(message);
    return f;
}

Finding link_degraded() {
    Finding f;
    f.id = "pcie.link_degraded";
    f.layer = Layer::pcie;
    f.severity = Severity::warning;
    f.subjects = {GpuRef{"GPU-63acd0f2-e950-182f-ae7d-ac246f19966d", "0000:00:06.0"}};
    f.message = "Gen5 x8 of x16";
    return f;
}

// ---- the ledger of open findings

TEST(AgentLedger, AWarningThatBecomesAnErrorIsAnEvent) {
    FindingLedger ledger;
    ASSERT_EQ(ledger.advance({xid(Severity::warning, "Xid 13")}, {}, 1000).size(), 1u);
    auto events = ledger.advance({xid(Severity::error, "Xid 13, Xid 79")}, {}, 2000);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kind, AgentEventKind::changed);
    EXPECT_EQ(events[0].severity, "error");
    EXPECT_NE(events[0].message.find("was warning, now error"), std::string::npos) << events[0].message;
    // And back down is news too.
    auto down = ledger.advance({xid(Severity::warning)}, {}, 3000);
    ASSERT_EQ(down.size(), 1u);
    EXPECT_EQ(down[0].kind, AgentEventKind::changed);
}

TEST(AgentLedger, AFindingOfALayerThatCouldNotBeReadStaysOpenAndIsCarried) {
    FindingLedger ledger;
    ledger.advance({xid(Severity::error), link_degraded()}, {}, 1000);
    std::map<Layer, std::string> unread = {{Layer::kernel_log, "cannot open kern.log: Permission denied"}};
    auto carried = ledger.carried(unread);
    ASSERT_EQ(carried.size(), 1u);
    EXPECT_EQ(carried[0].id, "kernel_log.xid");
    EXPECT_EQ(carried[0].severity, Severity::error);
    ASSERT_FALSE(carried[0].evidence.empty());
    EXPECT_NE(carried[0].evidence.back().value.find("Permission denied"), std::string::npos);
    // The diagnosis judged the carried copy beside what was read: no event, nothing cleared.
    EXPECT_TRUE(ledger.advance({carried[0], link_degraded()}, unread, 2000).empty());
    // Even a diagnosis that left the carried copy out clears nothing of the unread layer.
    EXPECT_TRUE(ledger.advance({link_degraded()}, unread, 3000).empty());
    // Read again, and without it: cleared then.
    auto events = ledger.advance({link_degraded()}, {}, 4000);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].kind, AgentEventKind::cleared);
    EXPECT_EQ(events[0].finding, "kernel_log.xid");
}

TEST(AgentLedger, ARestoredLedgerRecordsNothingAgain) {
    FindingLedger ledger;
    ledger.advance({xid(Severity::error), link_degraded()}, {}, 1000);
    // What the agent saves is an entry per open finding, with its key.
    std::vector<std::pair<std::string, std::string>> saved;
    ledger.save_entries([&](const std::string& key, const std::string& entry) { saved.emplace_back(key, entry); });
    ASSERT_EQ(saved.size(), 2u);
    nlohmann::json tree = nlohmann::json::array();
    for (const auto& [key, o] : ledger.open()) {
        nlohmann::json entry = {{"read_ms", o.read_ms}, {"finding", finding_to_json(o.finding())}};
        EXPECT_EQ(saved[tree.size()], std::pair(key, json_text(entry)));
        tree.push_back(entry);
    }
    FindingLedger::Restoring restoring;
    for (const auto& [key, entry] : saved) restoring.add(nlohmann::json::parse(entry));
    auto restored = std::move(restoring).finish();
    EXPECT_EQ(restored.open().size(), 2u);
    EXPECT_EQ(restored.open().at(finding_key(link_degraded())).read_ms, 1000);
    EXPECT_TRUE(restored.advance({xid(Severity::error, "2 Xid 79 events"), link_degraded()}, {}, 2000).empty());
    // The one array a gpudx before the open_findings table saved reads back the same.
    EXPECT_EQ(FindingLedger::from_json(tree).open().size(), 2u);
    // What cannot be read back is skipped, not a crash.
    EXPECT_TRUE(FindingLedger::from_json(nlohmann::json::parse(R"([1, {"finding": {"id": "x"}}, "y"])")).open().empty());
    EXPECT_TRUE(FindingLedger::from_json(nlohmann::json()).open().empty());
}

TEST(AgentLedger, OpenFindingsAreHeldWhereTheDiagnosisHoldsThemAndAnUnreadLayersAreCopiedOut) {
    FindingLedger ledger;
    auto first = std::make_shared<const PackedFindings>(std::vector<Finding>{xid(Severity::error), link_degraded()});
    ledger.advance(first, {}, 1000);
    ASSERT_EQ(ledger.open().size(), 2u);
    // No copy: both are the diagnosis's, which the ledger keeps alive.
    for (const auto& [key, o] : ledger.open()) {
        EXPECT_EQ(o.pack, first) << key;
        EXPECT_EQ(finding_key(o.finding()), key);
        EXPECT_FALSE(o.owned) << key;
    }
    std::weak_ptr<const PackedFindings> first_alive = first;
    first.reset();
    EXPECT_FALSE(first_alive.expired());
    // The next diagnosis cannot read the kernel log: its finding is copied out, the PCIe one moves to the new
    // diagnosis, and the first diagnosis is let go.
    std::map<Layer, std::string> unread = {{Layer::kernel_log, "cannot open kern.log: Permission denied"}};
    auto second = std::make_shared<const PackedFindings>(std::vector<Finding>{link_degraded()});
    EXPECT_TRUE(ledger.advance(second, unread, 2000).empty());
    EXPECT_TRUE(first_alive.expired());
    const auto& xid_open = ledger.open().at(finding_key(xid(Severity::error)));
    EXPECT_TRUE(xid_open.owned);
    EXPECT_EQ(xid_open.finding().message, "Xid");
    EXPECT_EQ(xid_open.read_ms, 1000);
    EXPECT_EQ(ledger.open().at(finding_key(link_degraded())).pack, second);
    // Carried from the copy, as before.
    ASSERT_EQ(ledger.carried(unread).size(), 1u);
}

// The findings of a layer that could not be read are copied out together: one pack of their own, not one each.
TEST(AgentLedger, AnUnreadLayersFindingsAreCopiedOutIntoOnePack) {
    FindingLedger ledger;
    Finding other_gpu = xid(Severity::error, "Xid on the second GPU");
    other_gpu.subjects = {GpuRef{"GPU-5bd41b7c-8a07-7c1a-30c4-3c5f4cc3b8a1", "0000:00:07.0"}};
    auto first = std::make_shared<const PackedFindings>(
        std::vector<Finding>{xid(Severity::error), other_gpu, link_degraded()});
    ledger.advance(first, {}, 1000);
    std::map<Layer, std::string> unread = {{Layer::kernel_log, "cannot open kern.log: Permission denied"}};
    EXPECT_TRUE(ledger.advance(std::vector<Finding>{link_degraded()}, unread, 2000).empty());
    const auto& a = ledger.open().at(finding_key(xid(Severity::error)));
    const auto& b = ledger.open().at(finding_key(other_gpu));
    EXPECT_TRUE(a.owned && b.owned);
    EXPECT_EQ(a.pack, b.pack);
    EXPECT_NE(a.pack, first);
    EXPECT_EQ(a.pack->size(), 2u);
    EXPECT_EQ(a.finding().message, "Xid");
    EXPECT_EQ(b.finding().message, "Xid on the second GPU");
    EXPECT_EQ(b.read_ms, 1000);
    EXPECT_EQ(ledger.carried(unread).size(), 2u);
    // Copied once: a second diagnosis that still cannot read the layer keeps the same copies.
    auto copies = a.pack;
    EXPECT_TRUE(ledger.advance(std::vector<Finding>{link_degraded()}, unread, 3000).empty());
    EXPECT_EQ(ledger.open().at(finding_key(xid(Severity::error))).pack, copies);
}

// ---- the agent's state in the event store

TEST(AgentStoreState, StateIsCommittedWithTheEventsAndReadBackAfterAReopen) {
    auto dir = test::scratch("store-state");
    EventStoreOptions o;
    o.path = (dir / "events.db").string();
    {
        auto store = EventStore::open(o);
        ASSERT_TRUE(store) << store.error().message;
        EXPECT_FALSE((*store)->state("open_findings"));
        std::vector<AgentEvent> events = {agent_note("one", 1)};
        ASSERT_TRUE((*store)->append(events, {{"open_findings", "[1]"}, {"drain_intent", "{}"}}));
        std::vector<AgentEvent> none;
        ASSERT_TRUE((*store)->append(none, {{"drain_intent", ""}}));
    }
    auto store = EventStore::open(o);
    ASSERT_TRUE(store);
    EXPECT_EQ((*store)->state("open_findings"), "[1]");
    EXPECT_EQ((*store)->state("drain_intent"), "");
    std::filesystem::remove_all(dir);
}

// The open findings table's rows, in key order.
std::vector<std::string> open_rows(EventStore& store) {
    std::vector<std::string> rows;
    auto visited = store.visit_open_findings([&](std::string_view entry) { rows.emplace_back(entry); });
    EXPECT_TRUE(visited) << visited.error().message;
    EXPECT_EQ(visited.value_or(0), rows.size());
    return rows;
}

EventStore::OpenFindingsWriter rows_of(std::vector<std::pair<std::string, std::string>> rows) {
    return [rows](const EventStore::RowPut& put) {
        for (const auto& [key, entry] : rows) put(key, entry);
    };
}

TEST(AgentStoreState, OpenFindingsAreARowEachCommittedWithTheEventsAndWrittenAnewEachTime) {
    auto dir = test::scratch("store-open-findings");
    EventStoreOptions o;
    o.path = (dir / "events.db").string();
    {
        auto store = EventStore::open(o);
        ASSERT_TRUE(store) << store.error().message;
        // The table is made by the first write that puts rows (not at open, which must not need to write).
        EXPECT_TRUE(open_rows(**store).empty());
        // A store written by an earlier gpudx: the open findings as one state value.
        std::vector<AgentEvent> none;
        ASSERT_TRUE((*store)->append(none, {{EventStore::kLegacyOpenFindingsKey, "[]"}}));
        std::vector<AgentEvent> events = {agent_note("appeared", 1)};
        ASSERT_TRUE((*store)->append(events, {}, rows_of({{"b", R"({"n":2})"}, {"a", R"({"n":1})"}})));
        EXPECT_EQ(open_rows(**store), (std::vector<std::string>{R"({"n":1})", R"({"n":2})"}));
        // Written with the table, the legacy value is gone: no later agent reads the older findings back.
        EXPECT_FALSE((*store)->state(EventStore::kLegacyOpenFindingsKey));
    }
    auto store = EventStore::open(o);
    ASSERT_TRUE(store);
    EXPECT_EQ(open_rows(**store), (std::vector<std::string>{R"({"n":1})", R"({"n":2})"}));
    EXPECT_EQ((*store)->status().stored, 1u);
    // Each write is the whole ledger: a finding no longer put is gone.
    std::vector<AgentEvent> cleared = {agent_note("cleared", 2)};
    ASSERT_TRUE((*store)->append(cleared, {}, rows_of({{"b", R"({"n":3})"}})));
    EXPECT_EQ(open_rows(**store), (std::vector<std::string>{R"({"n":3})"}));
    // Events alone leave the table as it is.
    std::vector<AgentEvent> note = {agent_note("note", 3)};
    ASSERT_TRUE((*store)->append(note));
    EXPECT_EQ(open_rows(**store), (std::vector<std::string>{R"({"n":3})"}));
    std::filesystem::remove_all(dir);
}

TEST(AgentStoreState, OpenFindingsTheDiskRefusedWaitAndTheNewestAreWrittenWithTheNextCommit) {
    auto dir = test::scratch("store-open-findings-full");
    auto path = (dir / "events.db").string();
    // In a child: a file size limit stands for a full disk, and this process keeps its own.
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails (EFBIG) instead of killing the process
        auto store = EventStore::open({.path = path});
        if (!store) ::_exit(2);
        rlimit limit{};
        ::getrlimit(RLIMIT_FSIZE, &limit);
        rlimit full = limit;
        full.rlim_cur = 0;
        if (::setrlimit(RLIMIT_FSIZE, &full) != 0) ::_exit(3);
        std::string big(64 * 1024, 'x');
        std::vector<AgentEvent> events = {agent_note("refused", 1)};
        if ((*store)->append(events, {}, rows_of({{"a", big}}))) ::_exit(4);  // the disk took it after all
        std::vector<AgentEvent> none;
        if ((*store)->append(none, {}, rows_of({{"b", "newest"}}))) ::_exit(5);
        if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(6);
        // Room again: the next commit, even one of nothing, writes what waited, the newest rows among it.
        if (!(*store)->append(none)) ::_exit(7);
        ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0) << "see the exit codes in the child above";
    auto store = EventStore::open({.path = path});
    ASSERT_TRUE(store);
    EXPECT_EQ(open_rows(**store), std::vector<std::string>{"newest"});
    EXPECT_EQ((*store)->status().stored, 1u);
    std::filesystem::remove_all(dir);
}

// ---- followed files: every generation's lines

class Generations {
public:
    FollowSink sink() {
        FollowSink s;
        s.line = [this](std::string_view l) { add("line:" + std::string(l)); };
        s.initial_line = [this](std::string_view l) { add("initial:" + std::string(l)); };
        s.note = [this](std::string n) { add("note:" + n); };
        s.lost = [](uint64_t) {};
        s.generation_ended = [this] { add("ended"); };
        return s;
    }
    // Waits until `entry` has been seen (a deadline only as a safety net).
    bool wait(const std::string& entry) {
        std::unique_lock lock(m_);
        return cv_.wait_for(lock, 30s, [&] { return std::find(seen_.begin(), seen_.end(), entry) != seen_.end(); });
    }
    std::vector<std::string> seen() {
        std::lock_guard lock(m_);
        return seen_;
    }

private:
    void add(std::string s) {
        {
            std::lock_guard lock(m_);
            seen_.push_back(std::move(s));
        }
        cv_.notify_all();
    }
    std::mutex m_;
    std::condition_variable cv_;
    std::vector<std::string> seen_;
};

void append_to(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out << text;
}

size_t position(const std::vector<std::string>& v, const std::string& entry) {
    return static_cast<size_t>(std::find(v.begin(), v.end(), entry) - v.begin());
}

class AgentGenerations : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = test::scratch("generations");
        path_ = (dir_ / "kern.log").string();
        test::write_file(path_, "[    1.0] first line of the log\n[    2.0] NVRM: Xid (PCI:0000:00:06): 13, pid=1\n");
        follower_.emplace(path_, seen_.sink());
        ASSERT_TRUE(seen_.wait("initial:[    2.0] NVRM: Xid (PCI:0000:00:06): 13, pid=1"));
    }
    void TearDown() override {
        follower_.reset();
        std::filesystem::remove_all(dir_);
    }
    std::filesystem::path dir_;
    std::string path_;
    Generations seen_;
    std::optional<test::FollowerThread> follower_;
};

TEST_F(AgentGenerations, ARotatedGenerationEndsAfterItsLastLine) {
    // Written just before the rotation, and into the renamed-away file after it.
    append_to(path_, "[    3.0] before the rename\n");
    std::filesystem::rename(path_, path_ + ".1");
    append_to(path_ + ".1", "[    4.0] into the renamed-away file\n");
    test::write_file(path_, "[    5.0] the new file\n");
    ASSERT_TRUE(seen_.wait("line:[    5.0] the new file"));
    auto v = seen_.seen();
    auto ended = position(v, "ended");
    std::string all;
    for (auto& e : v) all += e + "\n";
    SCOPED_TRACE(all);
    ASSERT_LT(ended, v.size());
    EXPECT_LT(position(v, "line:[    3.0] before the rename"), ended);
    EXPECT_LT(position(v, "line:[    4.0] into the renamed-away file"), ended);
    EXPECT_GT(position(v, "line:[    5.0] the new file"), ended);
}

TEST_F(AgentGenerations, ACopytruncateFollowedAtOnceByALargerWriteIsANewGeneration) {
    // Longer than what was read: the size alone does not show the truncation.
    std::string bigger = "[   10.0] after the copytruncate " + std::string(200, 'x') + "\n";
    { std::ofstream rewrite(path_, std::ios::trunc | std::ios::binary); rewrite << bigger; }
    bool seen = seen_.wait("line:" + bigger.substr(0, bigger.size() - 1));
    auto v = seen_.seen();
    std::string all;
    for (auto& e : v) all += e.substr(0, 60) + "\n";
    ASSERT_TRUE(seen) << all;
    EXPECT_LT(position(v, "ended"), position(v, "line:" + bigger.substr(0, bigger.size() - 1)));
}

TEST_F(AgentGenerations, ASameSizeRewriteIsANewGeneration) {
    std::string old_text = test::read_all(path_);
    std::string same_size = old_text;
    same_size.replace(same_size.find("13, pid=1"), 9, "79, pid=2");
    ASSERT_EQ(same_size.size(), old_text.size());
    { std::ofstream rewrite(path_, std::ios::trunc | std::ios::binary); rewrite << same_size; }
    ASSERT_TRUE(seen_.wait("line:[    2.0] NVRM: Xid (PCI:0000:00:06): 79, pid=2"));
    auto v = seen_.seen();
    EXPECT_LT(position(v, "ended"), position(v, "line:[    2.0] NVRM: Xid (PCI:0000:00:06): 79, pid=2"));
}

// ---- /dev/kmsg records the agent read before the ring lost them

TEST(AgentKmsgCarry, RecordsTheRingNoLongerHoldsAreJudged) {
    // A mounted host's /dev/kmsg: /dev/null's numbers stand in for a ring that holds nothing any more.
    auto dir = test::scratch("kmsg-carry");
    std::filesystem::create_directories(dir / "dev");
    if (::mknod((dir / "dev/kmsg").c_str(), S_IFCHR | 0644, makedev(1, 3)) != 0)
        GTEST_SKIP() << "mknod not permitted here (needs root)";
    Root root(dir);
    CollectOptions o;
    o.kernel_log_earlier_lines = [](const std::function<void(std::string_view)>& take) {
        take("3,812,6000000000,-;NVRM: Xid (PCI:0000:00:06): 79, pid=4242, name=python3, GPU has fallen off the bus.");
    };
    KernelLog log;
    auto st = collect_kernel_log(CollectContext{root, o}, log);
    EXPECT_EQ(st.state, CollectorState::ok) << st.message;
    ASSERT_EQ(log.xids.size(), 1u);
    EXPECT_EQ(log.xids[0].code, 79);
    // Without them, the empty ring is no evidence at all.
    KernelLog empty;
    EXPECT_EQ(collect_kernel_log(CollectContext{root, CollectOptions{}}, empty).state, CollectorState::no_data);
    std::filesystem::remove_all(dir);
}

// ---- the verdict

TEST(FailClosed, ARootWithNothingReadableIsNotHealthy) {
    auto dir = test::scratch("empty-root");
    Root root(dir);
    CollectOptions o;
    o.probe_driver = false;
    auto d = diagnose(take_snapshot(root, o), {});
    EXPECT_EQ(d.exit_code, kExitUnknown) << name_of(d.verdict);
    for (auto l : {Layer::pcie, Layer::module, Layer::kernel_log}) {
        auto it = std::find_if(d.layers.begin(), d.layers.end(), [&](auto& r) { return r.layer == l; });
        ASSERT_NE(it, d.layers.end());
        EXPECT_TRUE(it->unreadable) << to_string(l);
    }
    std::filesystem::remove_all(dir);
}

TEST(FailClosed, AKernelLogThatCannotBeReadIsNotHealthyOnAHealthyCapture) {
    auto fixture = std::string(GPUDX_SOURCE_DIR) + "/tests/fixtures/h200x2";
    auto [healthy_rc, healthy] = test::run_gpudx("diagnose --root " + fixture + " --no-driver");
    ASSERT_EQ(healthy_rc, 0) << healthy;
    // A regular file that opens but fails to read (EIO), as a log on a failing disk does, whoever runs it.
    auto [rc, out] = test::run_gpudx("diagnose --root " + fixture + " --no-driver --kernel-log /proc/self/mem");
    EXPECT_EQ(rc, 3) << out;
    EXPECT_NE(out.find("Could not evaluate: kernel_log"), std::string::npos) << out;
}

TEST(FailClosed, AnEmptyLogTheUserNamedIsReadButAnEmptyKernelRingIsNot) {
    auto fixture = std::string(GPUDX_SOURCE_DIR) + "/tests/fixtures/h200x2";
    auto dir = test::scratch("empty-log");
    auto log = test::write_file(dir / "empty.log", "");
    auto [rc, out] = test::run_gpudx("diagnose --root " + fixture + " --no-driver --kernel-log " + log);
    EXPECT_EQ(rc, 0) << out;
    // A capture whose dmesg.txt is empty: a running kernel's log always holds its boot.
    auto copy = dir / "root";
    std::filesystem::copy(fixture, copy, std::filesystem::copy_options::recursive);
    test::write_file(copy / "_commands/dmesg.txt", "");
    auto [rc2, out2] = test::run_gpudx("diagnose --root " + copy.string() + " --no-driver");
    EXPECT_EQ(rc2, 3) << out2;
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpudx
