#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/root.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";

std::filesystem::path scratch(const std::string& name) {
    auto p = std::filesystem::temp_directory_path() / ("gpudx-test-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p;
}
}  // namespace

TEST(Root, FollowsLinksRecordedAsFilesInTheCapture) {
    Root root(kH200);
    auto vendor = root.read_file("/sys/bus/pci/devices/0000:00:06.0/vendor");
    ASSERT_TRUE(vendor) << vendor.error().message;
    EXPECT_EQ(*vendor, "0x10de\n");
    auto driver = root.read_link("/sys/bus/pci/devices/0000:00:06.0/driver");
    ASSERT_TRUE(driver);
    EXPECT_EQ(link_basename(*driver), "nvidia");
    auto canon = root.canonical("/sys/bus/pci/devices/0000:00:07.0");
    ASSERT_TRUE(canon);
    EXPECT_EQ(*canon, "/sys/devices/pci0000:00/0000:00:07.0");
}

TEST(Root, ListsDevnodeRecordsUnderTheirDeviceName) {
    Root root(kH200);
    auto names = root.list_dir("/dev");
    ASSERT_TRUE(names);
    EXPECT_NE(std::find(names->begin(), names->end(), "nvidia0"), names->end());
    auto st = root.stat("/dev/nvidia0");
    ASSERT_TRUE(st);
    EXPECT_EQ(st->type, FileType::char_device);
    EXPECT_EQ(st->mode & 0777, 0666u);
    EXPECT_TRUE(st->recorded_devnode);
}

TEST(Root, ListsADirectoryReachedThroughARecordedLink) {
    Root root(kH200);
    auto names = root.list_dir("/sys/bus/pci/devices/0000:00:06.0");
    ASSERT_TRUE(names);
    EXPECT_NE(std::find(names->begin(), names->end(), "vendor"), names->end());
}

TEST(Root, MissingFileIsAnErrorNamingThePath) {
    Root root(kH200);
    auto r = root.read_file("/sys/bus/pci/devices/0000:00:09.0/vendor");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().path, "/sys/bus/pci/devices/0000:00:09.0/vendor");
    EXPECT_EQ(r.error().sys_errno, ENOENT);
}

TEST(Root, LinksNeverEscapeTheRoot) {
    auto dir = scratch("escape");
    std::filesystem::create_directories(dir / "etc");
    std::ofstream(dir / "etc" / "hostname") << "inside\n";
    std::filesystem::create_directory_symlink("/../../../../", dir / "up");
    Root root(dir);
    auto r = root.read_file("/up/etc/hostname");
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, "inside\n");
    std::filesystem::remove_all(dir);
}

TEST(Root, OversizedFileIsRefusedNotTruncated) {
    auto dir = scratch("big");
    std::ofstream(dir / "big") << std::string(10000, 'x');
    Root root(dir);
    auto r = root.read_file("/big", 4096);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().sys_errno, EFBIG);
    auto ok = root.read_file("/big", 20000);
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->size(), 10000u);
    std::filesystem::remove_all(dir);
}

TEST(Root, DirectoryReadAsFileIsAnError) {
    Root root(kH200);
    auto r = root.read_file("/proc/driver");
    ASSERT_FALSE(r);
}

TEST(Root, LinkLoopIsAnErrorNotAHang) {
    auto dir = scratch("loop");
    std::filesystem::create_symlink("b", dir / "a");
    std::filesystem::create_symlink("a", dir / "b");
    Root root(dir);
    auto r = root.read_file("/a/x");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().sys_errno, ELOOP);
    std::filesystem::remove_all(dir);
}

}  // namespace GPUDX_UNITY_ID
