#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "collect/collectors.hpp"
#include "collect/host.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
namespace fs = std::filesystem;

namespace {
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";

HostInfo collect(const fs::path& dir, CollectorStatus* status = nullptr) {
    Root root(dir);
    CollectOptions opts;
    CollectContext ctx{root, opts};
    HostInfo h;
    auto st = collect_host(ctx, h);
    if (status) *status = st;
    return h;
}
}  // namespace

TEST(HostParse, OsReleasePrettyName) {
    EXPECT_EQ(parse_os_release_pretty_name("NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\nID=ubuntu\n"),
              "Ubuntu 24.04.3 LTS");
    EXPECT_EQ(parse_os_release_pretty_name("# c\nNAME='Rocky Linux'\nVERSION=\"9.4 (Blue Onyx)\"\n"),
              "Rocky Linux 9.4 (Blue Onyx)");
    EXPECT_EQ(parse_os_release_pretty_name("PRETTY_NAME=\"say \\\"hi\\\"\"\n"), "say \"hi\"");
    EXPECT_EQ(parse_os_release_pretty_name(""), "");
}

TEST(HostParse, SecureBootVariable) {
    EXPECT_EQ(parse_secure_boot_efivar(std::string("\x06\x00\x00\x00\x01", 5)), true);
    EXPECT_EQ(parse_secure_boot_efivar(std::string("\x06\x00\x00\x00\x00", 5)), false);
    EXPECT_FALSE(parse_secure_boot_efivar(std::string("\x06\x00\x00", 3)));
}

TEST(HostParse, ProcVersion) {
    const char* v = "Linux version 6.18.44-fc-v657-gpu (builder@sandboxing) (gcc (GCC) 15.3.0, GNU ld (GNU Binutils) "
                    "2.46) #1 SMP PREEMPT_DYNAMIC @0\n";
    EXPECT_EQ(parse_kernel_release_from_proc_version(v), "6.18.44-fc-v657-gpu");
    EXPECT_EQ(parse_kernel_version_from_proc_version(v), "#1 SMP PREEMPT_DYNAMIC @0");
    EXPECT_EQ(parse_kernel_release_from_proc_version("garbage"), "");
}

TEST(HostCollect, ReadsTheH200Capture) {
    CollectorStatus st;
    auto h = collect(kH200, &st);
    EXPECT_EQ(st.state, CollectorState::ok);
    EXPECT_EQ(h.kernel_release, "6.18.44-fc-v657-gpu");
    EXPECT_EQ(h.kernel_version, "#1 SMP PREEMPT_DYNAMIC @0");  // from /proc/version: the capture has no kernel/version
    EXPECT_EQ(h.os_release, "Ubuntu 24.04.3 LTS");
    EXPECT_TRUE(h.cmdline.starts_with("mitigations=auto,no_guest_host"));
    EXPECT_FALSE(h.secure_boot);
    // The capture has no hostname and no boot id: both recorded as problems, the rest kept.
    EXPECT_EQ(h.hostname, "");
    ASSERT_EQ(st.problems.size(), 2u);
    EXPECT_EQ(st.problems[0].path, "/proc/sys/kernel/hostname");
    EXPECT_EQ(st.problems[1].path, "/proc/sys/kernel/random/boot_id");
}

TEST(HostCollect, SecureBootAndHostnameFromARoot) {
    auto dir = fs::temp_directory_path() / ("gpudx-host-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "proc/sys/kernel/random");
    fs::create_directories(dir / "sys/firmware/efi/efivars");
    std::ofstream(dir / "proc/sys/kernel/hostname") << "gpu-node-17\n";
    std::ofstream(dir / "proc/sys/kernel/osrelease") << "6.8.0-45-generic\n";
    std::ofstream(dir / "proc/sys/kernel/random/boot_id") << "0c5e9f0e-6b1f-4b8e-9d1b-0b9f8e6c1a2d\n";
    std::ofstream(dir / "proc/cmdline") << "BOOT_IMAGE=/vmlinuz ro\n";
    std::ofstream(dir / "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c", std::ios::binary)
        << std::string("\x06\x00\x00\x00\x01", 5);
    CollectorStatus st;
    auto h = collect(dir, &st);
    EXPECT_EQ(h.hostname, "gpu-node-17");
    EXPECT_EQ(h.boot_id, "0c5e9f0e-6b1f-4b8e-9d1b-0b9f8e6c1a2d");
    EXPECT_EQ(h.secure_boot, true);
    EXPECT_EQ(h.kernel_release, "6.8.0-45-generic");
    ASSERT_EQ(st.problems.size(), 1u);  // no os-release
    EXPECT_EQ(st.problems[0].path, "/etc/os-release");
    fs::remove_all(dir);
}

}  // namespace GPUDX_UNITY_ID
