#include <gtest/gtest.h>

#include "model/slurm_reason.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

TEST(SlurmReason, FormatAndParseRoundTrip) {
    for (const SlurmReason& r : {SlurmReason{"pcie.fell_off_bus", "GPU-40cd403d-66ba-4608-72b9-5be5031085dc 0000:00:07.0"},
                                 SlurmReason{"module.not_loaded", ""},
                                 SlurmReason{"kernel_log.xid_79", "GPU-992cb470 0000:00:06.0 (+more)"},
                                 SlurmReason{"driver.hung", "(+more)"}}) {
        ASSERT_TRUE(r.fits());
        auto back = SlurmReason::parse(r.format());
        ASSERT_TRUE(back) << r.format();
        EXPECT_EQ(*back, r) << r.format();
    }
    EXPECT_EQ((SlurmReason{"module.not_loaded", ""}.format()), "gpudx: module.not_loaded");
    EXPECT_EQ((SlurmReason{"pcie.fell_off_bus", "0000:00:07.0"}.format()), "gpudx: pcie.fell_off_bus 0000:00:07.0");
}

TEST(SlurmReason, FormatIsAsciiAndAtMost80Bytes) {
    SlurmReason r{std::string(100, 'x'), "caf\xC3\xA9\n"};
    EXPECT_FALSE(r.fits());
    auto text = r.format();
    EXPECT_EQ(text.size(), kSlurmReasonMaxBytes);
    EXPECT_EQ(text.rfind("gpudx: xxx", 0), 0u);
    EXPECT_EQ(text.substr(text.size() - 3), "...");
    EXPECT_EQ((SlurmReason{"a.b", "caf\xC3\xA9"}.format()), "gpudx: a.b caf??");
    // What is cut off is gone: the finding survives, the rest is what Slurm kept.
    auto back = SlurmReason::parse(text);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->finding, text.substr(7));
    EXPECT_EQ(back->rest, "");
}

TEST(SlurmReason, ReasonsWrittenByOthersAreNotGpudxs) {
    for (const char* foreign : {"", "admin maintenance", "Not responding", "waiting for gpudx: GPU swap",
                                " gpudx: indented", "GPUDX: shouted", "gpu swap (ticket 4711)", "Kill task failed"})
        EXPECT_FALSE(SlurmReason::parse(foreign)) << foreign;
}

TEST(SlurmReason, ParsesWhatSlurmHandsBack) {
    // No rest, blanks doubled or missing after the prefix (an admin who copied gpudx's style by hand).
    auto bare = SlurmReason::parse("gpudx: module.not_loaded");
    ASSERT_TRUE(bare);
    EXPECT_EQ(bare->finding, "module.not_loaded");
    EXPECT_EQ(bare->rest, "");
    auto spaced = SlurmReason::parse("gpudx:   pcie.fell_off_bus   0000:00:07.0  (+more) ");
    ASSERT_TRUE(spaced);
    EXPECT_EQ(spaced->finding, "pcie.fell_off_bus");
    EXPECT_EQ(spaced->rest, "0000:00:07.0  (+more)");
    auto tight = SlurmReason::parse("gpudx:pcie.fell_off_bus");
    ASSERT_TRUE(tight);
    EXPECT_EQ(tight->finding, "pcie.fell_off_bus");
    auto empty = SlurmReason::parse("gpudx:");
    ASSERT_TRUE(empty);
    EXPECT_EQ(empty->finding, "");
    EXPECT_EQ(empty->rest, "");
}

}  // namespace GPUDX_UNITY_ID
