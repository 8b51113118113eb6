// A live host mounted under --root (the Kubernetes DaemonSet's /host): no capture's _commands/, real device
// nodes. gpudx must then read the host's /dev/kmsg rather than report "the capture has no kernel log".
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>

#include "collect/collectors.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
namespace fs = std::filesystem;

TEST(MountedRoot, KernelLogComesFromTheHostsKmsgDevice) {
    auto dir = fs::path(GPUDX_TEST_BINARY_DIR) / "mounted-root";
    fs::remove_all(dir);
    fs::create_directories(dir / "dev");
    // /dev/null's numbers stand in for /dev/kmsg: a real character device that reads as an empty log.
    if (::mknod((dir / "dev/kmsg").c_str(), S_IFCHR | 0644, makedev(1, 3)) != 0)
        GTEST_SKIP() << "mknod not permitted here (needs root)";
    Root root(dir);
    CollectOptions o;
    KernelLog log;
    auto st = collect_kernel_log(CollectContext{root, o}, log);
    EXPECT_EQ(st.path, "/dev/kmsg") << st.message;
    EXPECT_EQ(st.message, "the kernel log is empty");

    // A capture (recorded device node, _commands/dmesg.txt) is still read as a capture.
    fs::create_directories(dir / "_commands");
    {
        std::FILE* f = std::fopen((dir / "_commands/dmesg.txt").c_str(), "w");
        std::fputs("[    1.000000] Linux version 6.8.0\n", f);
        std::fclose(f);
    }
    KernelLog captured;
    auto st2 = collect_kernel_log(CollectContext{root, o}, captured);
    EXPECT_EQ(captured.source, "/_commands/dmesg.txt") << st2.message;
}

}  // namespace GPUDX_UNITY_ID
