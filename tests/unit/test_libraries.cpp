#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "rules/engine/diagnose.hpp"
#include "collect/collectors.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;
namespace fs = std::filesystem;

namespace {
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";

fs::path scratch(const std::string& name) {
    auto p = fs::temp_directory_path() / ("gpudx-test-libs-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

// An empty file carrying the version in its name, and the soname link to it.
void install(const fs::path& dir, const std::string& soname, const std::string& real) {
    fs::create_directories(dir);
    write(dir / real, "");
    fs::create_symlink(real, dir / soname);
}

const ResolvedLibrary* find(const LibrariesLayer& l, std::string_view soname) {
    for (auto& lib : l.libraries)
        if (lib.soname == soname) return &lib;
    return nullptr;
}

LibrariesLayer collect(const fs::path& dir, std::map<std::string, std::string> env, CollectorStatus* status = nullptr) {
    Root root(dir);
    CollectOptions opts;
    opts.environment = std::move(env);
    CollectContext ctx{root, opts};
    LibrariesLayer layer;
    auto st = collect_libraries(ctx, layer);
    if (status) *status = st;
    return layer;
}
}  // namespace

TEST(Libraries, CaptureFallsBackToLdconfigPAndPicksTheFirstCopy) {
    CollectorStatus st;
    auto l = collect(kH200, {}, &st);
    EXPECT_EQ(st.state, CollectorState::ok);
    EXPECT_EQ(l.ld_so_cache_format, "ldconfig -p");
    EXPECT_EQ(l.ld_so_cache_source, "/_commands/ldconfig-p.txt");
    auto* cuda = find(l, "libcuda.so.1");
    ASSERT_NE(cuda, nullptr);
    ASSERT_TRUE(cuda->chosen);
    EXPECT_EQ(cuda->chosen->path, "/usr/local/nvidia/lib64/libcuda.so.1");
    EXPECT_EQ(cuda->chosen->found_by, "ld.so.cache");
    EXPECT_FALSE(cuda->chosen->present);  // the capture holds no libraries
    ASSERT_EQ(cuda->copies.size(), 2u);
    EXPECT_EQ(cuda->copies[1].path, "/lib/libcuda.so.1");
    EXPECT_NE(cuda->reason.find("first libc6,x86-64 entry"), std::string::npos);
    auto* nvml = find(l, "libnvidia-ml.so.1");
    ASSERT_NE(nvml, nullptr);
    ASSERT_TRUE(nvml->chosen);
    EXPECT_EQ(nvml->chosen->path, "/usr/local/nvidia/lib64/libnvidia-ml.so.1");
    auto* cudart = find(l, "libcudart.so.13");
    ASSERT_NE(cudart, nullptr);
    ASSERT_TRUE(cudart->chosen);
    EXPECT_EQ(cudart->chosen->version, "13");
    auto* hip = find(l, "libamdhip64.so.5");
    ASSERT_NE(hip, nullptr);
    EXPECT_EQ(l.ld_so_conf_dirs.size(), 0u);  // ld.so.conf only includes a folder the capture lacks
}

TEST(Libraries, LdLibraryPathWinsOverTheCacheAndVersionsComeFromLinkTargets) {
    auto dir = scratch("ldpath");
    install(dir / "opt/app/lib", "libcuda.so.1", "libcuda.so.535.104.05");
    install(dir / "usr/lib/x86_64-linux-gnu", "libcuda.so.1", "libcuda.so.580.159.04");
    install(dir / "usr/local/cuda-12.4/targets/x86_64-linux/lib", "libcudart.so.12", "libcudart.so.12.4.127");
    fs::create_directory_symlink("cuda-12.4", dir / "usr/local/cuda");
    write(dir / "etc/ld.so.conf", "include ld.so.conf.d/*.conf\n");
    write(dir / "etc/ld.so.conf.d/cuda.conf", "/usr/local/cuda-12.4/targets/x86_64-linux/lib\n");
    auto l = collect(dir, {{"LD_LIBRARY_PATH", "/opt/app/lib::/nonexistent"}});
    EXPECT_EQ(l.ld_library_path, (std::vector<std::string>{"/opt/app/lib", "/nonexistent"}));
    EXPECT_EQ(l.ld_so_conf_dirs, (std::vector<std::string>{"/usr/local/cuda-12.4/targets/x86_64-linux/lib"}));
    ASSERT_TRUE(l.cuda_symlink_target);
    EXPECT_EQ(*l.cuda_symlink_target, "cuda-12.4");
    auto* cuda = find(l, "libcuda.so.1");
    ASSERT_NE(cuda, nullptr);
    ASSERT_TRUE(cuda->chosen);
    EXPECT_EQ(cuda->chosen->path, "/opt/app/lib/libcuda.so.1");
    EXPECT_EQ(cuda->chosen->version, "535.104.05");
    EXPECT_EQ(cuda->chosen->found_by, "LD_LIBRARY_PATH");
    EXPECT_NE(cuda->reason.find("LD_LIBRARY_PATH"), std::string::npos);
    ASSERT_EQ(cuda->copies.size(), 2u);
    EXPECT_EQ(cuda->copies[1].version, "580.159.04");
    EXPECT_EQ(cuda->copies[1].real_path, "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04");
    auto* cudart = find(l, "libcudart.so.12");
    ASSERT_NE(cudart, nullptr);
    EXPECT_FALSE(cudart->chosen);  // only an ld.so.conf folder holds it and no cache was built
    ASSERT_EQ(cudart->copies.size(), 1u);
    EXPECT_EQ(cudart->copies[0].version, "12.4.127");
    fs::remove_all(dir);
}

TEST(Libraries, LinksRecordedAsFilesHoldingABareNameGiveTheVersion) {
    auto dir = scratch("recorded");
    write(dir / "usr/lib64/libnvidia-ml.so.1", "libnvidia-ml.so.575.57.08\n");
    auto l = collect(dir, {});
    auto* nvml = find(l, "libnvidia-ml.so.1");
    ASSERT_NE(nvml, nullptr);
    ASSERT_TRUE(nvml->chosen);
    EXPECT_EQ(nvml->chosen->found_by, "default dir");
    EXPECT_EQ(nvml->chosen->version, "575.57.08");
    fs::remove_all(dir);
}

TEST(Libraries, MalformedCacheIsAProblemNotACrash) {
    auto dir = scratch("badcache");
    write(dir / "etc/ld.so.cache", std::string("glibc-ld.so.cache1.1\xff\xff\xff\xff", 24));
    install(dir / "lib64", "libcuda.so.1", "libcuda.so.580.159.04");
    CollectorStatus st;
    auto l = collect(dir, {}, &st);
    EXPECT_EQ(st.state, CollectorState::ok);
    ASSERT_FALSE(st.problems.empty());
    EXPECT_EQ(st.problems[0].path, "/etc/ld.so.cache");
    EXPECT_EQ(l.ld_so_cache_format, "");
    auto* cuda = find(l, "libcuda.so.1");
    ASSERT_TRUE(cuda && cuda->chosen);
    EXPECT_EQ(cuda->chosen->path, "/lib64/libcuda.so.1");
    fs::remove_all(dir);
}

// The rules, on snapshots built by hand.
namespace {
Snapshot with_libcuda(const std::string& module_version, std::vector<LibraryCopy> copies) {
    Snapshot s;
    s.collectors.push_back(status_ok(Collector::libraries));
    s.module.nvidia_driver_version = module_version;
    ResolvedLibrary lib;
    lib.soname = "libcuda.so.1";
    lib.copies = copies;
    lib.chosen = copies.front();
    lib.reason = "first libc6,x86-64 entry";
    s.libraries.libraries.push_back(lib);
    return s;
}

std::vector<Finding> run_libraries(const Snapshot& s) {
    DiagnoseOptions o;
    CheckContext ctx{s, o};
    std::vector<Finding> out;
    for (auto& fam : check_families())
        if (std::string_view(fam.name) == "libraries") fam.run(ctx, out);
    return out;
}

const Finding* by_id(const std::vector<Finding>& fs, std::string_view id) {
    for (auto& f : fs)
        if (f.id == id) return &f;
    return nullptr;
}
}  // namespace

TEST(LibraryRules, VersionMismatchIsAnErrorNamingBothVersions) {
    auto s = with_libcuda("580.159.04", {{"/usr/lib64/libcuda.so.1", "/usr/lib64/libcuda.so.575.57.08", "575.57.08",
                                          "ld.so.cache", true}});
    auto out = run_libraries(s);
    auto* f = by_id(out, "libs.version_mismatch");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_EQ(f->layer, Layer::libraries);
    EXPECT_NE(f->message.find("575.57.08"), std::string::npos);
    EXPECT_NE(f->message.find("580.159.04"), std::string::npos);
    auto ok = run_libraries(with_libcuda("580.159.04", {{"/usr/lib64/libcuda.so.1", "x", "580.159.04", "ld.so.cache", true}}));
    EXPECT_EQ(by_id(ok, "libs.version_mismatch"), nullptr);
}

TEST(LibraryRules, CopiesWithDifferentVersionsAndStrayCopies) {
    auto s = with_libcuda("580.159.04",
                          {{"/usr/local/nvidia/lib64/libcuda.so.1", "a", "580.159.04", "ld.so.cache", true},
                           {"/usr/local/lib/libcuda.so.1", "b", "535.104.05", "other", true}});
    auto out = run_libraries(s);
    auto* m = by_id(out, "libs.multiple_copies");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->severity, Severity::warning);
    EXPECT_NE(m->message.find("/usr/local/nvidia/lib64/libcuda.so.1 (580.159.04)"), std::string::npos);
    auto* stray = by_id(out, "libs.stray_libcuda");
    ASSERT_NE(stray, nullptr);
    EXPECT_NE(stray->message.find("/usr/local/lib"), std::string::npos);
}

TEST(LibraryRules, RuntimeNewerThanTheDriverBranch) {
    Snapshot s = with_libcuda("535.104.05", {{"/usr/lib64/libcuda.so.1", "a", "535.104.05", "ld.so.cache", true}});
    ResolvedLibrary rt;
    rt.soname = "libcudart.so.13";
    rt.copies = {{"/usr/local/cuda/lib64/libcudart.so.13", "b", "13.0.96", "ld.so.cache", true}};
    rt.chosen = rt.copies[0];
    s.libraries.libraries.push_back(rt);
    auto out = run_libraries(s);
    auto* f = by_id(out, "libs.runtime_too_new");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_NE(f->message.find("12.2"), std::string::npos);
    // 12.4 on branch 535 (12.2) runs through minor version compatibility: a warning.
    s.libraries.libraries[1].chosen->version = "12.4.127";
    out = run_libraries(s);
    f = by_id(out, "libs.runtime_too_new");
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->severity, Severity::warning);
    s.libraries.libraries[1].chosen->version = "12.2.140";
    EXPECT_EQ(by_id(run_libraries(s), "libs.runtime_too_new"), nullptr);
}

TEST(LibraryRules, SonameMajorAndFullVersionOfOneReleaseAreNotDifferentCopies) {
    // libcudart.so.13 known only by its soname's "13" in one place and as 13.1.80 in another: one release.
    Snapshot s;
    s.collectors.push_back(status_ok(Collector::libraries));
    ResolvedLibrary rt;
    rt.soname = "libcudart.so.13";
    rt.copies = {{"/opt/conda/lib/libcudart.so.13", "/opt/conda/lib/libcudart.so.13", "13", "LD_LIBRARY_PATH", true},
                 {"/usr/local/cuda/lib64/libcudart.so.13", "/usr/local/cuda/lib64/libcudart.so.13.1.80", "13.1.80",
                  "ld.so.cache", true}};
    rt.chosen = rt.copies[0];
    s.libraries.libraries.push_back(rt);
    EXPECT_EQ(by_id(run_libraries(s), "libs.multiple_copies"), nullptr);
    // 12 and 13.1.80 contradict each other: still a warning.
    s.libraries.libraries[0].copies[0].version = "12";
    auto out = run_libraries(s);
    auto* m = by_id(out, "libs.multiple_copies");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->severity, Severity::warning);
}

}  // namespace GPUDX_UNITY_ID
