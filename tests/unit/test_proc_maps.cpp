// core/proc_maps.hpp: the one parser of /proc/PID/maps, from literal text.
#include <gtest/gtest.h>

#include <string>

#include "core/proc_maps.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

TEST(ProcMappings, APathKeepsItsSpaces) {
    auto m = parse_proc_mappings("7f1c00000000-7f1c00200000 r--p 00000000 fd:01 1234   /opt/my app/lib/libcuda.so.1\n");
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].path, "/opt/my app/lib/libcuda.so.1");
    EXPECT_EQ(m[0].file_name(), "libcuda.so.1");
    EXPECT_FALSE(m[0].deleted);
}

TEST(ProcMappings, TheDeletedSuffixIsAFlagNotPartOfThePath) {
    auto m = parse_proc_mappings(
        "7f1c10000000-7f1c10100000 r--p 00000000 fd:01 99 /usr/lib/my libs/libnvidia-ml.so.580.95.05 (deleted)\n");
    ASSERT_EQ(m.size(), 1u);
    EXPECT_EQ(m[0].path, "/usr/lib/my libs/libnvidia-ml.so.580.95.05");
    EXPECT_EQ(m[0].file_name(), "libnvidia-ml.so.580.95.05");
    EXPECT_TRUE(m[0].deleted);
}

TEST(ProcMappings, EachLineInOrderPseudoPathsIncludedAnonymousOnesNot) {
    auto m = parse_proc_mappings(
        "7f00-7f01 r--p 00000000 fd:01 5 /app/libcuda.so.1\n"
        "7f01-7f02 r-xp 00001000 fd:01 5 /app/libcuda.so.1\n"
        "7f50-7f51 rw-p 00000000 00:00 0 \n"
        "7f60-7f61 rw-p 00000000 00:00 0\n"
        "7ffd0000-7ffd0021 rw-p 00000000 00:00 0                          [stack]\r\n");
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m[0].path, "/app/libcuda.so.1");
    EXPECT_EQ(m[1].path, "/app/libcuda.so.1");
    EXPECT_EQ(m[2].path, "[stack]");
    EXPECT_EQ(m[2].file_name(), "[stack]");
}

TEST(ProcMappings, GarbageLinesAreSkippedAndTheRestStillRead) {
    std::string text = "garbage\n\n   \n(deleted)\na b c d\na b c d e  (deleted)\n";
    text += std::string("\0\xff\xfe", 3) + "\n";
    text += "7f00-7f01 r--p 00000000 fd:01 5 /lib/libnccl.so.2\n";
    text += "7f00-7f01 r--p 00000000 fd:01 5";  // cut off: no newline, no path
    auto m = parse_proc_mappings(text);
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].path, "(deleted)");  // five fields, then a file named "(deleted)": as the kernel would write it
    EXPECT_FALSE(m[0].deleted);
    EXPECT_EQ(m[1].path, "/lib/libnccl.so.2");
    EXPECT_TRUE(parse_proc_mappings("").empty());
}

}  // namespace GPUDX_UNITY_ID
