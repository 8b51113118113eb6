#include <gtest/gtest.h>

#include "core/pci_address.hpp"
#include "core/text.hpp"
#include "core/version.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

TEST(PciAddress, ParsesEverySourcesSpelling) {
    for (auto s : {"0000:00:06.0", "00000000:00:06.0", "0000:00:06.0\n", "00:06.0", " 0000:00:06.0 "}) {
        auto a = PciAddress::parse(s);
        ASSERT_TRUE(a) << s;
        EXPECT_EQ(a->str(), "0000:00:06.0") << s;
    }
    EXPECT_EQ(normalize_pci("0000:1B:00.0"), "0000:1b:00.0");
    EXPECT_EQ(normalize_pci("00000001:C1:1F.7"), "0001:c1:1f.7");
    EXPECT_EQ(PciAddress::parse("0000.00.06.0")->str(), "0000:00:06.0");  // old procfs dot form
    EXPECT_EQ(PciAddress::parse("0000:00:06")->str(), "0000:00:06.0");    // no function: function 0
}

TEST(PciAddress, RejectsGarbage) {
    for (auto s : {"", "zz:00.0", "0000:00:20.0", "0000:00:06.8", "0000:000:06.0", "GPU-1234",
                   "0000:00:06.0.1", "1:2:3:4:5"})
        EXPECT_FALSE(PciAddress::parse(s)) << s;
}

TEST(PciAddress, ComparesParsedNotAsText) {
    EXPECT_EQ(*PciAddress::parse("0000:00:06.0"), *PciAddress::parse("00000000:00:06.0"));
    EXPECT_LT(*PciAddress::parse("0000:00:06.0"), *PciAddress::parse("0000:00:07.0"));
}

TEST(Text, ParsesNumbersStrictly) {
    EXPECT_EQ(parse_uint("0x10de", 0), 0x10deu);
    EXPECT_EQ(parse_uint("0x10de", 16), 0x10deu);
    EXPECT_EQ(parse_uint("42\n"), 42u);
    EXPECT_FALSE(parse_uint("42x"));
    EXPECT_FALSE(parse_uint(""));
    EXPECT_EQ(parse_int("-1"), -1);
    EXPECT_EQ(parse_double("32.0"), 32.0);
}

TEST(Text, KeyValuesKeepEveryField) {
    auto kv = parse_key_values("Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-992c\nno colon here\n");
    ASSERT_EQ(kv.size(), 2u);
    EXPECT_EQ(kv[0].first, "Model");
    EXPECT_EQ(kv[0].second, "NVIDIA H200");
    EXPECT_EQ(kv[1].second, "GPU-992c");
}

TEST(Text, SanitizesInvalidUtf8AndControlCharacters) {
    EXPECT_EQ(sanitize_utf8("ok\xff"), "ok\xEF\xBF\xBD");
    EXPECT_EQ(sanitize_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
    EXPECT_EQ(strip_control("a\033[31mb"), "a?[31mb");
}

// The pass every text report takes on its way out: lines stay lines, nothing else reaches the terminal but the
// colours gpudx chose to paint, and only when it paints.
TEST(Text, TerminalControlsLeaveAReportWithItsLinesAndOnlyItsColours) {
    std::string report = "title \033]0;owned\a\n\033[1mbold\033[0m x\033[2J\ry\tz\x7f \xC2\x9B" "31m\xff\n";
    EXPECT_EQ(strip_terminal_controls(report, false), "title ?]0;owned?\n?[1mbold?[0m x?[2J?y?z? ?31m\xEF\xBF\xBD\n");
    EXPECT_EQ(strip_terminal_controls(report, true),
              "title ?]0;owned?\n\033[1mbold\033[0m x?[2J?y?z? ?31m\xEF\xBF\xBD\n");
    // Only the colour form of CSI is kept: cursor moves, erases and private modes are not.
    EXPECT_EQ(strip_terminal_controls("\033[31;1m\033[H\033[?25l\033[", true), "\033[31;1m?[H?[?25l?[");
    EXPECT_EQ(strip_terminal_controls("plain\n", true), "plain\n");
}

TEST(Versions, CompareComponentByComponentAsNumbers) {
    EXPECT_LT(compare_versions("580.159.04", "580.172.08"), 0);
    EXPECT_GT(compare_versions("580.159.04", "580.95.05"), 0);  // 159 > 95, not as text
    EXPECT_EQ(compare_versions("580.159.04", "580.159.04"), 0);
    EXPECT_LT(compare_versions("580", "580.159.04"), 0);
    EXPECT_GT(compare_versions("590.44.01", "580.172.08"), 0);
}

TEST(Versions, AShorterVersionIsCompatibleWithItsLongerForm) {
    EXPECT_TRUE(versions_compatible("13", "13.1.80"));
    EXPECT_TRUE(versions_compatible("13.1.80", "13.1"));
    EXPECT_TRUE(versions_compatible("13.1.80", "13.1.80"));
    EXPECT_FALSE(versions_compatible("12", "13.1.80"));
    EXPECT_FALSE(versions_compatible("13.1.80", "13.1.81"));
    EXPECT_FALSE(versions_compatible("1", "13"));  // components, not characters
    EXPECT_FALSE(versions_compatible("", "13"));
}

}  // namespace GPUDX_UNITY_ID
