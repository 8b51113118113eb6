// `-o FILE` (core/output_file.hpp): what is replaced atomically, what is written in place, what is refused.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/output_file.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
    auto p = fs::temp_directory_path() / ("gpudx-test-output-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

struct stat lstat_of(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st;
}

std::string read_available(int fd) {
    char buf[256];
    ssize_t n = ::read(fd, buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

TEST(OutputFile, ReplacesARegularFileByRenamingANewOneOverIt) {
    auto dir = scratch("regular");
    auto file = dir / "gpudx.prom";
    std::ofstream(file) << "old\n";
    ino_t before = lstat_of(file).st_ino;
    ASSERT_TRUE(write_output_file(file.string(), "new\n"));
    EXPECT_EQ(slurp(file), "new\n");
    EXPECT_NE(lstat_of(file).st_ino, before);  // a new file under the name: no reader saw it half-written
    EXPECT_EQ(lstat_of(file).st_mode & 07777, 0644u);
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);  // no temporary left
}

TEST(OutputFile, CreatesAMissingFile) {
    auto dir = scratch("missing");
    ASSERT_TRUE(write_output_file((dir / "report.json").string(), "{}\n"));
    EXPECT_EQ(slurp(dir / "report.json"), "{}\n");
}

TEST(OutputFile, ALinkKeepsPointingWhereItDidAndItsTargetIsReplaced) {
    auto dir = scratch("link");
    fs::create_directories(dir / "data");
    std::ofstream(dir / "data" / "x.json") << "old\n";
    fs::create_symlink("data/x.json", dir / "current");
    fs::create_symlink(dir / "current", dir / "chain");
    ino_t before = lstat_of(dir / "data" / "x.json").st_ino;
    ASSERT_TRUE(write_output_file((dir / "chain").string(), "new\n"));
    EXPECT_TRUE(fs::is_symlink(dir / "chain"));
    EXPECT_TRUE(fs::is_symlink(dir / "current"));
    EXPECT_EQ(fs::read_symlink(dir / "current"), "data/x.json");
    EXPECT_EQ(slurp(dir / "data" / "x.json"), "new\n");
    EXPECT_NE(lstat_of(dir / "data" / "x.json").st_ino, before);
}

TEST(OutputFile, ADanglingLinkGetsItsTargetCreated) {
    auto dir = scratch("dangling");
    fs::create_directories(dir / "data");
    fs::create_symlink("data/later.json", dir / "out");
    ASSERT_TRUE(write_output_file((dir / "out").string(), "made\n"));
    EXPECT_TRUE(fs::is_symlink(dir / "out"));
    EXPECT_EQ(slurp(dir / "data" / "later.json"), "made\n");
}

TEST(OutputFile, AFifoIsWrittenInPlace) {
    auto dir = scratch("fifo");
    auto fifo = dir / "pipe";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    fs::create_symlink(fifo, dir / "to-pipe");
    int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);  // a writer's open then never waits
    ASSERT_GE(reader, 0);
    ASSERT_TRUE(write_output_file(fifo.string(), "one\n"));
    EXPECT_EQ(read_available(reader), "one\n");
    ASSERT_TRUE(write_output_file((dir / "to-pipe").string(), "two\n"));
    EXPECT_EQ(read_available(reader), "two\n");
    ::close(reader);
    EXPECT_TRUE(S_ISFIFO(lstat_of(fifo).st_mode));
    EXPECT_TRUE(fs::is_symlink(dir / "to-pipe"));
}

TEST(OutputFile, ACharacterDeviceIsWrittenInPlace) {
    if (::geteuid() != 0) GTEST_SKIP() << "making a device node needs root";
    auto dir = scratch("chardev");
    auto node = dir / "null";  // a private /dev/null: the machine's own is never put at risk by this test
    ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
    ASSERT_TRUE(write_output_file(node.string(), "discarded\n"));
    auto st = lstat_of(node);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
    EXPECT_EQ(st.st_rdev, makedev(1, 3));
}

TEST(OutputFile, TheProcesssOwnDescriptorsAreWrittenThroughTheDescriptor) {
    EXPECT_EQ(own_descriptor_path("/dev/stdout"), 1);
    EXPECT_EQ(own_descriptor_path("/dev/stderr"), 2);
    EXPECT_EQ(own_descriptor_path("/dev/fd/7"), 7);
    EXPECT_EQ(own_descriptor_path("/proc/self/fd/12"), 12);
    EXPECT_EQ(own_descriptor_path("/proc/self/fd/"), std::nullopt);
    EXPECT_EQ(own_descriptor_path("/dev/fd/3x"), std::nullopt);
    EXPECT_EQ(own_descriptor_path("/tmp/stdout"), std::nullopt);

    // A file the caller opened and already wrote to: appended at its offset, the same file kept.
    auto dir = scratch("descriptor");
    auto file = dir / "log";
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "head\n", 5), 5);
    ino_t before = lstat_of(file).st_ino;
    ASSERT_TRUE(write_output_file("/dev/fd/" + std::to_string(fd), "body\n"));
    ::close(fd);
    EXPECT_EQ(slurp(file), "head\nbody\n");
    EXPECT_EQ(lstat_of(file).st_ino, before);
}

TEST(OutputFile, ALinkOfProcIsOpenedByTheKernelNotFollowedByName) {
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    // /proc/PID/fd/N reads as "pipe:[…]", which names nothing on disk.
    std::string path = "/proc/" + std::to_string(::getpid()) + "/fd/" + std::to_string(fds[1]);
    ASSERT_TRUE(write_output_file(path, "through the pipe\n"));
    EXPECT_EQ(read_available(fds[0]), "through the pipe\n");
    ::close(fds[0]);
    ::close(fds[1]);
}

TEST(OutputFile, RefusesADirectoryAndALinkLoop) {
    auto dir = scratch("refused");
    auto is_dir = write_output_file(dir.string(), "x");
    ASSERT_FALSE(is_dir);
    EXPECT_EQ(is_dir.error().sys_errno, EISDIR);
    EXPECT_TRUE(fs::is_directory(dir));
    fs::create_symlink("b", dir / "a");
    fs::create_symlink("a", dir / "b");
    auto loop = write_output_file((dir / "a").string(), "x");
    ASSERT_FALSE(loop);
    EXPECT_EQ(loop.error().sys_errno, ELOOP);
    EXPECT_NE(loop.error().message.find("cannot write"), std::string::npos);
}

TEST(OutputFile, AReplacedFileKeepsItsModeOwnerAndGroup) {
    auto dir = scratch("mode");
    auto file = dir / "private.json";
    std::ofstream(file) << "old\n";
    ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
    ASSERT_TRUE(write_output_file(file.string(), "new\n"));
    EXPECT_EQ(slurp(file), "new\n");
    EXPECT_EQ(lstat_of(file).st_mode & 07777, 0600u);  // never widened to 0644

    // Set-id bits are not carried to new content; the permission bits are, narrower or wider.
    ASSERT_EQ(::chmod(file.c_str(), 04664), 0);
    ASSERT_TRUE(write_output_file(file.string(), "newer\n"));
    EXPECT_EQ(lstat_of(file).st_mode & 07777, 0664u);

    if (::geteuid() != 0) GTEST_SKIP() << "giving a file to another user needs root";
    ASSERT_EQ(::chown(file.c_str(), 65534, 65534), 0);
    ASSERT_TRUE(write_output_file(file.string(), "theirs\n"));
    EXPECT_EQ(lstat_of(file).st_uid, 65534u);
    EXPECT_EQ(lstat_of(file).st_gid, 65534u);
}

// fs.protected_symlinks, as gpudx applies it: it resolves the link itself, so the kernel's check never runs.
TEST(OutputFile, ALinkAnotherUserPlantedInAStickyWorldWritableDirectoryIsNotFollowed) {
    auto dir = scratch("sticky");
    auto shared = dir / "shared";
    fs::create_directories(shared);
    ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
    auto secret = dir / "secret";
    std::ofstream(secret) << "secret\n";
    ASSERT_EQ(::chmod(secret.c_str(), 0600), 0);
    auto link = shared / "gpudx.prom";
    fs::create_symlink(secret, link);

    // The caller's own link there is followed, and the file it names is replaced with its mode.
    ASSERT_TRUE(write_output_file(link.string(), "mine\n"));
    EXPECT_EQ(slurp(secret), "mine\n");
    EXPECT_EQ(lstat_of(secret).st_mode & 07777, 0600u);

    if (::geteuid() != 0) GTEST_SKIP() << "planting a link of another user needs root";
    ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);
    auto refused = write_output_file(link.string(), "planted\n");
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().sys_errno, EACCES);
    EXPECT_NE(refused.error().message.find("sticky, world-writable"), std::string::npos) << refused.error().message;
    EXPECT_NE(refused.error().message.find(link.string()), std::string::npos) << refused.error().message;
    EXPECT_EQ(slurp(secret), "mine\n");
    EXPECT_TRUE(fs::is_symlink(link));

    // The directory's owner's link is trusted as the kernel trusts it; so is any link in a directory that is
    // not both sticky and world-writable.
    ASSERT_EQ(::chown(shared.c_str(), 65534, 65534), 0);
    EXPECT_TRUE(write_output_file(link.string(), "owner's\n"));
    EXPECT_EQ(slurp(secret), "owner's\n");
    ASSERT_EQ(::chown(shared.c_str(), 0, 0), 0);
    ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
    EXPECT_TRUE(write_output_file(link.string(), "not sticky\n"));
    EXPECT_EQ(slurp(secret), "not sticky\n");
}

}  // namespace GPUDX_UNITY_ID
