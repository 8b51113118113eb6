// A driver library's version from its bytes, for a copy whose name carries none (collect/library_version.hpp), and
// its use by the libraries collector and the per-process view.
#include <gtest/gtest.h>

#include <filesystem>

#include "collect/collectors.hpp"
#include "collect/library_version.hpp"
#include "collect/process.hpp"
#include "test_support.hpp"

namespace gpudx {
namespace GPUDX_UNITY_ID {
namespace fs = std::filesystem;
using namespace std::string_literals;
using test::read_all;
using test::scratch;
using test::write_file;

// The strings around the version in libcuda.so.580.159.04's .rodata on the 1xH200 node, as
// device/lib_version_probe.py printed them (docs/device-runs/2026-12-03-h200x1-process-view/summary.txt): its own
// version once, after the MIG format strings; older releases' twice each, in a table between binary data.
// (Each version is a literal of its own: "\0" followed by a digit would be read as an octal escape.)
const std::string kLibcuda580Rodata =
    "rintfBufLen\0 MIG %ug.%llugb\0 MIG %uc.%ug.%llugb\0" "580.159.04\0"
    "\x05\x0eq\xfb\xf9\rq\xfb\0\0\0\0\0\0\0\0\0\0\0\0\x03\0\0\0\x01\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\x04\0\x02\0\x01\0\x03\0"
    "535.54.02\0" "535.54.02\0" "-a\0channel%d\0" "550.54.09\0" "550.54.09\0" "CreateImexChannel0: %d\n\0" "565.40\0"
    "570.86.09\0" "570.86.09\0" "575.57.07\0" "575.57.07\0" "580.65.05\0" "580.65.05\0"
    "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01" "9.0\0" "10.0\0" "10.3\0"s;

TEST(DriverVersionInBytes, TheHighestReleaseIsTheLibrarysOwn) {
    EXPECT_EQ(driver_version_in_bytes(kLibcuda580Rodata), "580.159.04");
    // libnvidia-ml.so.580.159.04 holds one, its own.
    EXPECT_EQ(driver_version_in_bytes("\x1b\0\0\0Y\0\0\0Y\0\0\0\x1f\0\0\0\x1a\0\0\0\0\0\0\0" "580.159.04\0\0\0"s),
              "580.159.04");
    // Components compare as numbers, not as text: 580.159 is later than 580.65.
    EXPECT_EQ(driver_version_in_bytes("\0" "580.65.05\0" "580.159.04\0" "580.9\0"s), "580.159.04");
    EXPECT_EQ(driver_version_in_bytes("\0" "565.40\0"s), "565.40");
}

TEST(DriverVersionInBytes, OnlyAWholeNulBoundedDriverVersionCounts) {
    for (std::string bytes : {"\0" "10.0\0"s,          // CUDA versions: a major of two digits
                              "\0" "299.1\0"s,         // below any driver release
                              "\0" "1580.159.04\0"s,   // four-digit major
                              "x580.159.04\0"s,        // not the start of a string
                              "\0" "580.159.04x\0"s,   // not the end of one
                              "\0" "580.159.04"s,      // unterminated at the end of the bytes
                              "\0" "580\0"s, "\0" "580.\0"s, "\0" "580..1\0"s, "\0" "580.1234.1\0"s,
                              "\0" "580.1.2.3\0"s, "\0" ".580.1\0"s, "580.159.04\0"s, ""s})
        EXPECT_EQ(driver_version_in_bytes(bytes), "") << testing::PrintToString(bytes);
}

TEST(ElfRodata, IsASectionOfAnElfFileAndTheWholeOfAnythingElse) {
    std::string self = read_all("/proc/self/exe");
    auto rodata = elf_rodata(self);
    EXPECT_GT(rodata.data(), self.data());
    EXPECT_LT(rodata.size(), self.size());
    EXPECT_NE(rodata.find("a string literal only this test holds"), std::string_view::npos);
    std::string text = "not an ELF file";
    EXPECT_EQ(elf_rodata(text).size(), text.size());
    // Section headers past the end of a truncated file: the whole of it, never a read outside.
    std::string truncated = self.substr(0, 4096);
    EXPECT_EQ(elf_rodata(truncated).size(), truncated.size());
}

TEST(DriverVersionInFile, ReadsThroughTheRootAndKeepsNothingOpen) {
    auto dir = scratch("libversion-file");
    fs::create_directories(dir / "app");
    write_file(dir / "app/libcuda.so.1", kLibcuda580Rodata);
    Root root(dir);
    EXPECT_EQ(driver_version_in_file(root, "/app/libcuda.so.1"), "580.159.04");
    EXPECT_EQ(driver_version_in_file(root, "/app/missing.so"), "");
    EXPECT_EQ(driver_version_in_file(root, "/app"), "");  // a directory
    fs::remove_all(dir);
}

TEST(DriverVersionInFile, ARewrittenFileIsReadAgain) {
    // Versions are remembered per file for the rest of the gpudx process: a file replaced in place must not keep
    // its old one.
    auto dir = scratch("libversion-rewritten");
    write_file(dir / "libcuda.so.1", "\0" "470.57.02\0"s);
    EXPECT_EQ(driver_version_in_file(Root(dir), "/libcuda.so.1"), "470.57.02");
    EXPECT_EQ(driver_version_in_file(Root(dir), "/libcuda.so.1"), "470.57.02");
    write_file(dir / "libcuda.so.1", "\0" "535.104.05\0"s);
    EXPECT_EQ(driver_version_in_file(Root(dir), "/libcuda.so.1"), "535.104.05");
    fs::remove_all(dir);
}

TEST(DriverVersionInFile, AVersionAcrossTwoChunksIsFound) {
    // The file is read a MiB at a time: this version starts five bytes before the first MiB ends.
    auto dir = scratch("libversion-chunks");
    std::string bytes(size_t{1} << 20, 'x');
    bytes.replace(100, 11, "\0" "470.57.02\0"s);
    bytes.replace(bytes.size() - 5, 5, "\0" "535."s);
    bytes += "104.05"s + '\0' + std::string(4096, 'y');
    write_file(dir / "libcuda.so.1", bytes);
    EXPECT_EQ(driver_version_in_file(Root(dir), "/libcuda.so.1"), "535.104.05");
    fs::remove_all(dir);
}

TEST(DriverVersionInFile, TheLibrariesCollectorGivesACopyWithoutAVersionedNameTheVersionOfItsBytes) {
    auto dir = scratch("libversion-collect");
    fs::create_directories(dir / "opt/app/lib");
    write_file(dir / "opt/app/lib/libcuda.so.1", "\0" "535.104.05\0"s);  // a `cp -L` of a 535 libcuda
    Root root(dir);
    CollectOptions options;
    options.environment["LD_LIBRARY_PATH"] = "/opt/app/lib";
    CollectContext ctx{root, options};
    LibrariesLayer layer;
    collect_libraries(ctx, layer);
    auto lib = std::find_if(layer.libraries.begin(), layer.libraries.end(),
                            [](auto& l) { return l.soname == "libcuda.so.1"; });
    ASSERT_NE(lib, layer.libraries.end());
    ASSERT_TRUE(lib->chosen);
    EXPECT_EQ(lib->chosen->path, "/opt/app/lib/libcuda.so.1");
    EXPECT_EQ(lib->chosen->version, "535.104.05");
    EXPECT_EQ(lib->chosen->version_from, kVersionFromContents);
    EXPECT_EQ(version_shown(*lib->chosen), "535.104.05 by its contents");
    fs::remove_all(dir);
}

TEST(DriverVersionInFile, AProcessThatMappedSuchACopyGetsItsVersionFromItsRoot) {
    // A capture of a process (gather --pid) that mapped a `cp -L` copy: gather keeps the copy's version bytes.
    auto dir = scratch("libversion-process");
    fs::create_directories(dir / "proc/4242/fd");
    fs::create_directories(dir / "opt/app/lib");
    write_file(dir / "proc/4242/status", "Name:\tpython3\nState:\tS (sleeping)\nUid:\t1000\t1000\t1000\t1000\n");
    write_file(dir / "proc/4242/environ", "LD_LIBRARY_PATH=/opt/app/lib\0"s);
    write_file(dir / "proc/4242/maps", "7f00-7f01 r--p 00000000 fd:01 5 /opt/app/lib/libcuda.so.1\n");
    // gpudx's mount namespace and root, and the process's, recorded as gather writes them: the same.
    for (auto pid : {"self", "4242"}) {
        fs::create_directories(dir / "proc" / pid / "ns");
        fs::create_symlink("mnt:[4026531841]", dir / "proc" / pid / "ns/mnt");
        write_file(dir / "proc" / pid / "root", "/");
    }
    write_file(dir / "opt/app/lib/libcuda.so.1", "\0" "535.104.05\0"s);
    auto view = collect_process(Root(dir), 4242);
    ASSERT_EQ(view.state, ProcessViewState::read) << view.problem;
    ASSERT_EQ(view.mapped.size(), 1u);
    EXPECT_EQ(view.mapped[0].version, "535.104.05");
    EXPECT_EQ(view.mapped[0].version_from, kVersionFromContents);
    fs::remove_all(dir);
}

}  // namespace GPUDX_UNITY_ID
}  // namespace gpudx
