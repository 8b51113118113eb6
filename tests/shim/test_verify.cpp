// gpudx verify's parsers and verdicts, from literal text (no process, no shim needed).
#include <gtest/gtest.h>

#include "identity/verify.hpp"

using namespace gpudx;

namespace {
const char* kState =
    "gpudx-shim-state 1\npid 4242\nstart_ticks 777\nmode correct\nproc_root /\nupdated_unix_ms 1000\n"
    "nvml not-needed\nnvml_translations 1\n"
    "ordinal 0 uuid=GPU-40cd403d-66ba-4608-72b9-5be5031085dc driver_bus=0000:00:06.0 current_bus=0000:00:07.0 "
    "source=procfs corrected=12 uuid_changes=1 handed=0000:00:06.0,0000:00:07.0\n"
    "ordinal 1 uuid=GPU-992cb470-9027-88f4-48a9-a9a329d6978d driver_bus=0000:00:07.0 current_bus=0000:00:06.0 "
    "source=procfs corrected=0 uuid_changes=1 handed=-\n"
    "end\n";
const char* kMaps =
    "7f00-7f10 r-xp 00000000 08:01 123 /usr/lib/gpudx/libgpudx_shim.so\n"
    "7f20-7f30 r-xp 00000000 08:01 124 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\n"
    "7f40-7f50 r-xp 00000000 08:01 125 /opt/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2\n"
    "7ffd-7ffe rw-p 00000000 00:00 0 [stack]\n";
const std::map<std::string, std::string> kNode = {{"gpu-992cb470-9027-88f4-48a9-a9a329d6978d", "0000:00:06.0"},
                                                  {"gpu-40cd403d-66ba-4608-72b9-5be5031085dc", "0000:00:07.0"}};
}  // namespace

TEST(ShimState, ParsesEveryField) {
    auto s = parse_shim_state(kState);
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->pid, 4242);
    EXPECT_EQ(s->start_ticks, 777u);
    EXPECT_EQ(s->mode, "correct");
    EXPECT_EQ(s->nvml_translations, 1u);
    ASSERT_EQ(s->ordinals.size(), 2u);
    EXPECT_EQ(s->ordinals[0].uuid, "GPU-40cd403d-66ba-4608-72b9-5be5031085dc");
    EXPECT_EQ(s->ordinals[0].driver_bus, "0000:00:06.0");
    EXPECT_EQ(s->ordinals[0].current_bus, "0000:00:07.0");
    EXPECT_EQ(s->ordinals[0].corrected, 12u);
    EXPECT_EQ(s->ordinals[0].handed_out, (std::vector<std::string>{"0000:00:06.0", "0000:00:07.0"}));
    EXPECT_TRUE(s->ordinals[1].handed_out.empty());
}

TEST(ShimState, RejectsForeignAndTornFiles) {
    EXPECT_FALSE(parse_shim_state("hello\n"));
    std::string torn = kState;
    torn.resize(torn.find("ordinal 1"));
    auto r = parse_shim_state(torn);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("truncated"), std::string::npos);
    EXPECT_FALSE(parse_shim_state("gpudx-shim-state 1\nordinal x uuid=a\nend\n"));
}

TEST(VerifyParsers, MapsStatusStatEnviron) {
    EXPECT_EQ(shim_mapping(kMaps).value_or(""), "/usr/lib/gpudx/libgpudx_shim.so");
    EXPECT_FALSE(shim_mapping("7f20-7f30 r-xp 00000000 08:01 124 /usr/lib/libcuda.so.1\n"));
    EXPECT_EQ(identity_caching_libraries(kMaps),
              (std::vector<std::string>{"libcuda.so.580.159.04", "libnccl.so.2"}));
    EXPECT_EQ(parse_nspid("Name:\tpython\nNSpid:\t81234\t17\n").value_or(0), 17);
    EXPECT_FALSE(parse_nspid("Name:\tpython\n"));
    EXPECT_EQ(parse_start_ticks("42 (a (b) c) S 1 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0").value_or(0),
              98765u);
    std::string env("A=1\0GPUDX_SHIM_STATE_DIR=/run/x\0B=2\0", 35);
    EXPECT_EQ(environ_value(env, "GPUDX_SHIM_STATE_DIR").value_or(""), "/run/x");
    EXPECT_FALSE(environ_value(env, "GPUDX_SHIM"));
}

// The path is what follows the fifth field, spaces and all; split on blanks it lost its first part, and a
// deleted shim (replaced by an upgrade under the running process) was not found at all.
TEST(VerifyParsers, AShimPathWithSpacesOrDeletedIsFoundWhole) {
    EXPECT_EQ(shim_mapping("7f00-7f10 r-xp 00000000 08:01 123 /opt/gpudx build/lib/libgpudx_shim.so\n").value_or(""),
              "/opt/gpudx build/lib/libgpudx_shim.so");
    EXPECT_EQ(shim_mapping("7f00-7f10 r-xp 00000000 08:01 123 /usr/lib/gpudx/libgpudx_shim.so (deleted)\n").value_or(""),
              "/usr/lib/gpudx/libgpudx_shim.so");
    EXPECT_EQ(identity_caching_libraries("7f40-7f50 r-xp 00000000 08:01 125 /opt/my env/lib/libnccl.so.2 (deleted)\n"),
              (std::vector<std::string>{"libnccl.so.2"}));
}

TEST(VerifyStateFileTrust, OnlyTheProcesssUserOrRootAndWritableByTheOwnerAlone) {
    EXPECT_EQ(parse_status_uids("Name:\tpython\nUid:\t1000\t1001\t1002\t1003\nGid:\t5\t5\t5\t5\n"),
              (std::vector<uint32_t>{1000, 1001, 1002, 1003}));
    EXPECT_TRUE(parse_status_uids("Name:\tpython\n").empty());
    std::vector<uint32_t> process{1000, 1000, 1000, 1000};
    EXPECT_EQ(state_file_distrust({true, 1000, 0100644}, process), "");
    EXPECT_EQ(state_file_distrust({true, 0, 0100644}, process), "");  // root may write any process's state
    EXPECT_EQ(state_file_distrust({true, 1000, 0100600}, process), "");
    EXPECT_EQ(state_file_distrust({true, 2000, 0100644}, process),
              "owned by uid 2000, which is neither the process's user nor root");
    EXPECT_EQ(state_file_distrust({true, 1000, 0100666}, process),
              "writable by users other than its owner (mode 0666)");
    EXPECT_EQ(state_file_distrust({true, 1000, 0100664}, process),
              "writable by users other than its owner (mode 0664)");
    EXPECT_EQ(state_file_distrust({false, 1000, 0010644}, process), "not a regular file");
    EXPECT_NE(state_file_distrust({true, 1000, 0100644}, {}), "");  // unknown process: only root's is believed
}

TEST(VerifyVerdict, CorrectedSwapIsConsistentButListsStaleCopies) {
    auto s = parse_shim_state(kState);
    ASSERT_TRUE(s);
    VerifyReport r = evaluate_identity(4242, kMaps, *s, kNode, 3000);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.verdict, IdentityVerdict::corrected);
    ASSERT_EQ(r.ordinals.size(), 2u);
    EXPECT_EQ(r.ordinals[0].verdict, IdentityVerdict::corrected);
    EXPECT_EQ(r.ordinals[1].verdict, IdentityVerdict::corrected);
    EXPECT_DOUBLE_EQ(r.state_age_s, 2.0);
    bool stale_copy = false, nccl = false;
    for (const auto& c : r.cannot_correct) {
        stale_copy |= c.find("ordinal 0 was given bus id 0000:00:06.0") != std::string::npos;
        nccl |= c.find("NCCL is loaded") != std::string::npos;
    }
    EXPECT_TRUE(stale_copy);
    EXPECT_TRUE(nccl);
}

TEST(VerifyVerdict, ObserveModeMismatchIsInconsistent) {
    std::string text = kState;
    text.replace(text.find("mode correct"), 12, "mode observe");
    auto s = parse_shim_state(text);
    ASSERT_TRUE(s);
    VerifyReport r = evaluate_identity(4242, kMaps, *s, kNode, 3000);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.ordinals[0].verdict, IdentityVerdict::inconsistent);
    EXPECT_NE(r.ordinals[0].explanation.find("GPU-992cb470"), std::string::npos);  // names the card at 06
}

TEST(VerifyVerdict, StateFromBeforeAMoveIsUnknown) {
    auto s = parse_shim_state(kState);
    ASSERT_TRUE(s);
    // On this node GPU-40cd… sits at 0000:63:00.0, not where the shim last saw it.
    std::map<std::string, std::string> node = {{"gpu-40cd403d-66ba-4608-72b9-5be5031085dc", "0000:63:00.0"}};
    VerifyReport r = evaluate_identity(4242, kMaps, *s, node, 3000);
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_NE(r.ordinals[0].explanation.find("predates a move"), std::string::npos);
}

TEST(VerifyVerdict, NoShimOrNoStateCannotBeEvaluated) {
    VerifyReport r = evaluate_identity(7, "7f20-7f30 r-xp 00000000 08:01 124 /usr/lib/libcuda.so.1\n", std::nullopt,
                                       kNode, 0);
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_FALSE(r.shim_loaded);
    EXPECT_NE(r.summary.find("LD_PRELOAD"), std::string::npos);
    r = evaluate_identity(7, kMaps, std::nullopt, kNode, 0);
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_TRUE(r.shim_loaded);
    EXPECT_NE(r.summary.find("no state yet"), std::string::npos);
}

TEST(VerifyNode, ReadsTheH200FixtureThroughRoot) {
    auto node = node_gpus_by_uuid(Root(std::string(GPUDX_TEST_FIXTURES) + "/h200x2"));
    ASSERT_EQ(node.size(), 2u);
    EXPECT_EQ(node.at("gpu-992cb470-9027-88f4-48a9-a9a329d6978d"), "0000:00:06.0");
    EXPECT_EQ(node.at("gpu-40cd403d-66ba-4608-72b9-5be5031085dc"), "0000:00:07.0");
}
