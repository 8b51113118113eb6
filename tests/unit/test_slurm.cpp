#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "actions/slurm.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
namespace fs = std::filesystem;

namespace {

// What Slurm 22.05 printed for a node drained by an admin (captured from a single-node test cluster).
constexpr const char* kShowDrained =
    "NodeName=vm Arch=x86_64 CoresPerSocket=1 \n"
    "   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=2.67\n"
    "   AvailableFeatures=(null)\n"
    "   Gres=gpu:2\n"
    "   NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8\n"
    "   RealMemory=1000 AllocMem=0 FreeMem=18128 Sockets=2 Boards=1\n"
    "   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
    "   Partitions=debug \n"
    "   Reason=admin maintenance: State=x [root@2026-11-30T10:06:26]\n";

SlurmNodeState node(std::string state, std::string reason) {
    SlurmNodeState n;
    n.name = "vm";
    n.state = state;
    n.reason = reason;
    n.drain = state.find("DRAIN") != std::string::npos;
    n.down = state.starts_with("DOWN");
    return n;
}

const SlurmReason kDrainReason{"pcie.fell_off_bus", "GPU-40cd403d-66ba-4608-72b9-5be5031085dc 0000:00:07.0"};
const std::string kReason = "gpudx: pcie.fell_off_bus GPU-40cd403d-66ba-4608-72b9-5be5031085dc 0000:00:07.0";
const std::optional<SlurmReason> kNoReason;

}  // namespace

TEST(Slurm, ParsesStateAndReasonWithoutTheWhoAndWhenSuffix) {
    auto n = parse_scontrol_show_node(kShowDrained);
    ASSERT_TRUE(n);
    EXPECT_EQ(n->name, "vm");
    EXPECT_EQ(n->state, "IDLE+DRAIN");
    // The reason keeps its blanks and '=' and loses only " [user@time]".
    EXPECT_EQ(n->reason, "admin maintenance: State=x");
    EXPECT_TRUE(n->drain);
    EXPECT_FALSE(n->down);
}

TEST(Slurm, ParsesANodeWithoutReasonAndDownFlags) {
    auto n = parse_scontrol_show_node("NodeName=n1 Arch=x86_64\n   State=IDLE ThreadsPerCore=1\n");
    ASSERT_TRUE(n);
    EXPECT_EQ(n->reason, "");
    EXPECT_FALSE(n->drain);
    auto d = parse_scontrol_show_node("NodeName=n1\n   State=DOWN*+DRAIN+NOT_RESPONDING X=1\n   Reason=Not responding [slurm@2026-01-01T00:00:00]\n");
    ASSERT_TRUE(d);
    EXPECT_TRUE(d->down);
    EXPECT_TRUE(d->drain);
    EXPECT_EQ(d->reason, "Not responding");
    EXPECT_FALSE(parse_scontrol_show_node("Node n1 not found\n"));
    EXPECT_FALSE(parse_scontrol_show_node(""));
}

TEST(Slurm, DrainsOnErrorAndResumesOnlyItsOwnDrain) {
    ASSERT_EQ(kDrainReason.format(), kReason);
    // An error on a node in service: drain.
    EXPECT_EQ(decide_slurm_action(1, kDrainReason, node("IDLE", "")), SlurmAction::drain);
    EXPECT_EQ(decide_slurm_action(1, kDrainReason, node("MIXED", "")), SlurmAction::drain);
    // Already drained by gpudx for the same reason: nothing; for another gpudx reason: the reason is updated.
    EXPECT_EQ(decide_slurm_action(1, kDrainReason, node("IDLE+DRAIN", kReason)), SlurmAction::none);
    EXPECT_EQ(decide_slurm_action(1, kDrainReason, node("IDLE+DRAIN", "gpudx: module.not_loaded")), SlurmAction::drain);
    // Someone else's drain or down, for any reason: never touched, error or not.
    EXPECT_EQ(decide_slurm_action(1, kDrainReason, node("IDLE+DRAIN", "admin maintenance")), SlurmAction::leave_foreign);
    EXPECT_EQ(decide_slurm_action(1, kDrainReason, node("DOWN*", "Not responding")), SlurmAction::leave_foreign);
    EXPECT_EQ(decide_slurm_action(0, kNoReason, node("IDLE+DRAIN", "admin maintenance")), SlurmAction::none);
    // A reason that merely mentions gpudx is not gpudx's.
    EXPECT_EQ(decide_slurm_action(0, kNoReason, node("IDLE+DRAIN", "waiting for gpudx: GPU swap")), SlurmAction::none);
    // Healthy (or warnings only) and drained by gpudx: resume.
    EXPECT_EQ(decide_slurm_action(0, kNoReason, node("IDLE+DRAIN", kReason)), SlurmAction::resume);
    EXPECT_EQ(decide_slurm_action(2, kNoReason, node("MIXED+DRAIN", kReason)), SlurmAction::resume);
    EXPECT_EQ(decide_slurm_action(0, kNoReason, node("IDLE", "")), SlurmAction::none);
    // Could not evaluate: neither drain nor resume.
    EXPECT_EQ(decide_slurm_action(3, kNoReason, node("IDLE+DRAIN", kReason)), SlurmAction::unknown);
    EXPECT_EQ(decide_slurm_action(3, kNoReason, node("IDLE", "")), SlurmAction::unknown);
}

TEST(Slurm, NodeNameFromSlurmdElseShortHostName) {
    EXPECT_EQ(default_slurm_node_name({{"SLURMD_NODENAME", "gpu-a17"}}), "gpu-a17");
    auto h = default_slurm_node_name({});
    EXPECT_FALSE(h.empty());
    EXPECT_EQ(h.find('.'), std::string::npos);
}

TEST(Slurm, RunProcessReportsExitOutputAndTimeout) {
    auto ok = run_process({"sh", "-c", "echo out; echo err >&2; exit 3"}, std::chrono::seconds(10));
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->exit_status, 3);
    EXPECT_NE(ok->output.find("out"), std::string::npos);
    EXPECT_NE(ok->output.find("err"), std::string::npos);
    auto missing = run_process({"/nonexistent/scontrol", "show"}, std::chrono::seconds(10));
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().path, "/nonexistent/scontrol");
    auto t0 = std::chrono::steady_clock::now();
    auto slow = run_process({"sleep", "30"}, std::chrono::milliseconds(200));
    ASSERT_FALSE(slow);
    EXPECT_NE(slow.error().message.find("did not finish"), std::string::npos);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

class SlurmFake : public ::testing::Test {
protected:
    void SetUp() override {
        dir = fs::path(GPUDX_TEST_BINARY_DIR) / "slurm-fake" /
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
        fs::remove_all(dir);
        fs::create_directories(dir);
        ::setenv("FAKE_SCONTROL_STATE", dir.c_str(), 1);
        write("node", "vm");
        opts.node = "vm";
        opts.scontrol = std::string(GPUDX_TEST_SOURCE_DIR) + "/slurm/fake_scontrol.sh";
    }
    void write(const std::string& name, const std::string& text) { std::ofstream(dir / name) << text; }
    std::string read(const std::string& name) {
        std::ifstream in(dir / name);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    fs::path dir;
    SlurmDrainOptions opts;
};

TEST_F(SlurmFake, DrainThenResumeThroughScontrol) {
    auto r = apply_slurm_drain(opts, 1, kDrainReason);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->action, SlurmAction::drain);
    EXPECT_EQ(read("state"), "IDLE+DRAIN\n");
    EXPECT_EQ(read("reason"), kReason);
    // The reason went to scontrol as one argument, blanks and all.
    EXPECT_NE(read("calls").find("update nodename=vm state=drain reason=" + kReason), std::string::npos);
    auto again = apply_slurm_drain(opts, 1, kDrainReason);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->action, SlurmAction::none);
    auto healed = apply_slurm_drain(opts, 0, kNoReason);
    ASSERT_TRUE(healed);
    EXPECT_EQ(healed->action, SlurmAction::resume);
    EXPECT_EQ(read("state"), "IDLE\n");
}

TEST_F(SlurmFake, NeverResumesSomeoneElsesDrain) {
    write("state", "IDLE+DRAIN");
    write("reason", "admin maintenance");
    auto healthy = apply_slurm_drain(opts, 0, kNoReason);
    ASSERT_TRUE(healthy);
    EXPECT_EQ(healthy->action, SlurmAction::none);
    auto broken = apply_slurm_drain(opts, 1, kDrainReason);
    ASSERT_TRUE(broken);
    EXPECT_EQ(broken->action, SlurmAction::leave_foreign);
    EXPECT_NE(broken->message.find("admin maintenance"), std::string::npos);
    EXPECT_EQ(read("reason"), "admin maintenance");
    EXPECT_EQ(read("calls").find("update"), std::string::npos);
}

TEST_F(SlurmFake, ScontrolFailuresAreErrorsThatSayWhat) {
    opts.node = "nosuch";
    auto unknown = apply_slurm_drain(opts, 1, kDrainReason);
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("Node nosuch not found"), std::string::npos) << unknown.error().message;
    opts.node = "vm";
    write("fail", "slurm_load_node error: Unable to contact slurm controller (connect failure)");
    auto down = apply_slurm_drain(opts, 1, kDrainReason);
    ASSERT_FALSE(down);
    EXPECT_NE(down.error().message.find("Unable to contact slurm controller"), std::string::npos);
    fs::remove(dir / "fail");
    write("hang", "");
    opts.timeout = std::chrono::milliseconds(300);
    auto hung = apply_slurm_drain(opts, 1, kDrainReason);
    ASSERT_FALSE(hung);
    EXPECT_NE(hung.error().message.find("did not finish"), std::string::npos);
    opts.scontrol = "/nonexistent/scontrol";
    auto missing = apply_slurm_drain(opts, 1, kDrainReason);
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("cannot run"), std::string::npos);
}

}  // namespace GPUDX_UNITY_ID
