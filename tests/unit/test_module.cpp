#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "rules/engine/check_context.hpp"
#include "collect/collectors.hpp"
#include "collect/kmod_loader.hpp"
#include "collect/module.hpp"

using namespace gpudx;
namespace fs = std::filesystem;

namespace gpudx {
void check_module(const CheckContext&, std::vector<Finding>&);
}

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

namespace {
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";
const std::string kRelease = "6.18.44-fc-v657-gpu";

struct FixtureCopy {
    fs::path dir;
    explicit FixtureCopy(const std::string& name, bool copy_capture = true) {
        dir = fs::temp_directory_path() / ("gpudx-module-" + name + "-" + std::to_string(::getpid()));
        fs::remove_all(dir);
        if (copy_capture) fs::copy(kH200, dir, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
        else fs::create_directories(dir);
    }
    ~FixtureCopy() { fs::remove_all(dir); }
    void write(const std::string& rel, const std::string& text) const {
        fs::create_directories((dir / rel).parent_path());
        std::ofstream(dir / rel, std::ios::binary) << text;
    }
};

// A minimal relocatable ELF with a .modinfo section, the way the scenarios build one; false when the
// assembler or objcopy is not installed.
bool make_module_file(const fs::path& out, const std::string& version, const std::string& vermagic) {
    fs::create_directories(out.parent_path());
    fs::path info = out.string() + ".modinfo", obj = out.string() + ".o";
    std::string modinfo = "name=nvidia" + std::string(1, '\0') + "version=" + version + std::string(1, '\0') +
                          "vermagic=" + vermagic + std::string(1, '\0') + "srcversion=0123456789ABCDEF0123456" +
                          std::string(1, '\0');
    std::ofstream(info, std::ios::binary) << modinfo;
    std::string cmd = "as -o '" + obj.string() + "' /dev/null 2>/dev/null && objcopy --add-section .modinfo='" +
                      info.string() + "' '" + obj.string() + "' '" + out.string() + "' 2>/dev/null";
    bool ok = std::system(cmd.c_str()) == 0;
    fs::remove(info);
    fs::remove(obj);
    return ok && fs::exists(out);
}

ModuleLayer collect(const fs::path& root_dir, CollectorStatus* status = nullptr) {
    Root root(root_dir);
    CollectOptions opts;
    CollectContext ctx{root, opts};
    ModuleLayer layer;
    auto st = collect_module(ctx, layer);
    if (status) *status = st;
    return layer;
}

Snapshot snapshot_of(const fs::path& root_dir) {
    Snapshot s;
    Root root(root_dir);
    CollectOptions opts;
    CollectContext ctx{root, opts};
    s.collectors.push_back(collect_pcie(ctx, s.pcie));
    s.collectors.push_back(collect_module(ctx, s.module));
    return s;
}

std::vector<Finding> run_checks(const Snapshot& s, std::optional<unsigned> expect = {}) {
    DiagnoseOptions o;
    o.expect_gpus = expect;
    CheckContext ctx{s, o};
    std::vector<Finding> out;
    check_module(ctx, out);
    return out;
}

const Finding* find(const std::vector<Finding>& f, std::string_view id) {
    for (auto& x : f)
        if (x.id == id) return &x;
    return nullptr;
}
// Severity of a finding, nullopt when absent (so a missing finding fails the test instead of crashing it).
std::optional<Severity> severity_of(const std::vector<Finding>& f, std::string_view id) {
    auto* x = find(f, id);
    return x ? std::optional<Severity>(x->severity) : std::nullopt;
}
}  // namespace

TEST(ModuleParse, ProcModules) {
    auto m = parse_proc_modules(
        "nvidia_uvm 1830912 - - Live 0xffffffffc080c000 (O)\n"
        "nvidia 14299136 2 nvidia_uvm, Live 0xffffffffc0400000 (POE)\n"
        "video 65536 0 - Live 0x0000000000000000\n"
        "broken line\n");
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m[0].name, "nvidia_uvm");
    EXPECT_EQ(m[0].size, 1830912u);
    EXPECT_EQ(m[0].state, "Live");
    EXPECT_EQ(m[1].taint, "(POE)");
    EXPECT_EQ(m[2].taint, "");
    EXPECT_TRUE(is_gpu_related_module("nvidia_uvm"));
    EXPECT_TRUE(is_gpu_related_module("amdgpu"));
    EXPECT_TRUE(is_gpu_related_module("nouveau"));
    EXPECT_FALSE(is_gpu_related_module("video"));
}

TEST(ModuleParse, NvidiaVersionOpenAndProprietary) {
    EXPECT_EQ(parse_nvidia_version("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release "
                                   "Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC)\n"),
              "580.159.04");
    EXPECT_EQ(parse_nvidia_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 "
                                   "UTC 2023\n"),
              "535.104.05");
    EXPECT_FALSE(parse_nvidia_version("GCC version:  gcc version 15.3.0 (GCC)\n"));
    EXPECT_FALSE(parse_nvidia_version(""));
}

TEST(ModuleParse, GpuInformationNewAndOldForms) {
    auto g = parse_nvidia_gpu_information(
        "Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t GPU-992cb470-9027-88f4-48a9-a9a329d6978d\n"
        "Video BIOS: \t 96.00.a5.00.1a\nBus Type: \t PCIe\nBus Location: \t 0000:00:06.0\nDevice Minor: \t 0\n"
        "GPU Firmware: \t 580.159.04\nGPU Excluded:\t Yes\n",
        "0000:00:06.0");
    EXPECT_EQ(g.address, "0000:00:06.0");
    EXPECT_EQ(g.uuid, "GPU-992cb470-9027-88f4-48a9-a9a329d6978d");
    EXPECT_EQ(g.vbios, "96.00.a5.00.1a");
    EXPECT_EQ(g.minor, 0u);
    EXPECT_EQ(g.excluded, true);
    EXPECT_EQ(g.fields.at("IRQ"), "41");
    // Old drivers: a dot in the location, a directory name that is not an address, no Excluded line.
    auto old = parse_nvidia_gpu_information("Model: \t\t Tesla K80\nBus Location: \t 0000:85.00.0\nDevice Minor: \t 3\n",
                                            "gpu3");
    EXPECT_EQ(old.address, "0000:85:00.0");
    EXPECT_EQ(old.minor, 3u);
    EXPECT_FALSE(old.excluded);
}

TEST(ModuleParse, ModuleFilesAndIndexes) {
    EXPECT_TRUE(is_module_file_for("nvidia-uvm.ko", "nvidia_uvm"));
    EXPECT_TRUE(is_module_file_for("nvidia.ko.zst", "nvidia"));
    EXPECT_FALSE(is_module_file_for("nvidia-uvm.ko", "nvidia"));
    EXPECT_FALSE(is_module_file_for("nvidia.o", "nvidia"));
    EXPECT_EQ(find_in_modules_dep("kernel/drivers/video/fbdev/core/fb.ko:\nupdates/dkms/nvidia-uvm.ko.zst: "
                                  "updates/dkms/nvidia.ko.zst\nupdates/dkms/nvidia.ko.zst:\n",
                                  "nvidia"),
              "updates/dkms/nvidia.ko.zst");
    EXPECT_EQ(find_in_modules_dep("kernel/fs/ext4.ko:\n", "nvidia"), "");
    EXPECT_EQ(vermagic_release("6.8.0-45-generic SMP preempt mod_unload modversions "), "6.8.0-45-generic");
    auto f = module_file_from_modinfo("nvidia", "/lib/modules/x/nvidia.ko",
                                      {{"version", "580.95.05"}, {"vermagic", "6.8.0 SMP"}, {"signer", "DKMS key"}});
    EXPECT_EQ(f.version, "580.95.05");
    EXPECT_EQ(f.signer, "DKMS key");
    auto [k, a] = parse_dkms_make_log_header("DKMS (dkms-3.0.11) make.log for nvidia/580.95.05 for kernel "
                                             "6.8.0-45-generic (x86_64)\nThu ...\n");
    EXPECT_EQ(k, "6.8.0-45-generic");
    EXPECT_EQ(a, "x86_64");
    EXPECT_EQ(parse_dkms_make_log_header("garbage").first, "");
}

TEST(ModuleCollect, ReadsTheH200Capture) {
    CollectorStatus st;
    auto m = collect(kH200, &st);
    EXPECT_EQ(st.state, CollectorState::ok);
    EXPECT_EQ(m.kernel_release, kRelease);
    ASSERT_EQ(m.loaded.size(), 2u);
    EXPECT_EQ(m.loaded[1].name, "nvidia");
    EXPECT_EQ(m.loaded[1].version, "580.159.04");
    EXPECT_EQ(m.nvidia_driver_version, "580.159.04");
    EXPECT_TRUE(m.nvidia_gpus_listed);
    ASSERT_EQ(m.nvidia_gpus.size(), 2u);
    EXPECT_EQ(m.nvidia_gpus[0].address, "0000:00:06.0");
    EXPECT_EQ(m.nvidia_gpus[0].uuid, "GPU-992cb470-9027-88f4-48a9-a9a329d6978d");
    EXPECT_EQ(m.nvidia_gpus[1].minor, 1u);
    EXPECT_EQ(m.nvidia_gpus[1].excluded, false);
    // No module tree in the capture: said in the status, no file examined, no finding.
    EXPECT_NE(m.files_unavailable.find("/lib/modules/" + kRelease), std::string::npos);
    EXPECT_EQ(st.message, m.files_unavailable);
    EXPECT_TRUE(m.files.empty());
    auto s = snapshot_of(kH200);
    EXPECT_TRUE(run_checks(s, 2u).empty());
}

TEST(ModuleCollect, ModuleFileThroughLibkmod) {
    std::string why;
    if (!kmod_available(&why)) GTEST_SKIP() << why;
    FixtureCopy fx("kofile");
    auto ko = fx.dir / "lib/modules" / kRelease / "updates/dkms/nvidia.ko";
    if (!make_module_file(ko, "580.172.08", kRelease + " SMP preempt mod_unload modversions "))
        GTEST_SKIP() << "as/objcopy not available";
    CollectorStatus st;
    auto m = collect(fx.dir, &st);
    EXPECT_EQ(m.files_unavailable, "");
    ASSERT_EQ(m.files.size(), 1u);
    EXPECT_EQ(m.files[0].path, "/lib/modules/" + kRelease + "/updates/dkms/nvidia.ko");
    EXPECT_EQ(m.files[0].version, "580.172.08");
    EXPECT_EQ(m.files[0].srcversion, "0123456789ABCDEF0123456");
    EXPECT_EQ(m.files[0].found_by, "search");
    fx.write("lib/modules/" + kRelease + "/modules.dep", "updates/dkms/nvidia.ko:\n");
    EXPECT_EQ(collect(fx.dir).files.at(0).found_by, "modules.dep");

    auto s = snapshot_of(fx.dir);
    auto f = run_checks(s);
    auto* upd = find(f, "module.updated_not_rebooted");
    ASSERT_TRUE(upd);
    EXPECT_EQ(upd->severity, Severity::warning);
    EXPECT_EQ(upd->subjects.size(), 2u);
    EXPECT_FALSE(find(f, "module.vermagic_mismatch"));

    // User space already at the file's version: the stale loaded module is now an error.
    ResolvedLibrary lib;
    lib.soname = "libnvidia-ml.so.1";
    lib.chosen = LibraryCopy{"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "", "580.172.08", "ld.so.cache"};
    s.libraries.libraries.push_back(lib);
    EXPECT_EQ(severity_of(run_checks(s), "module.updated_not_rebooted"), Severity::error);
}

TEST(ModuleCollect, VermagicMismatchAndMissingFile) {
    std::string why;
    if (!kmod_available(&why)) GTEST_SKIP() << why;
    FixtureCopy fx("vermagic");
    auto ko = fx.dir / "lib/modules" / kRelease / "extra/nvidia.ko";
    if (!make_module_file(ko, "580.159.04", "6.8.0-45-generic SMP preempt mod_unload modversions "))
        GTEST_SKIP() << "as/objcopy not available";
    auto f = run_checks(snapshot_of(fx.dir));
    auto* vm = find(f, "module.vermagic_mismatch");
    ASSERT_TRUE(vm);
    EXPECT_EQ(vm->severity, Severity::error);
    EXPECT_NE(vm->message.find("6.8.0-45-generic"), std::string::npos);
    EXPECT_FALSE(find(f, "module.updated_not_rebooted"));

    fs::remove(ko);
    auto s = snapshot_of(fx.dir);
    auto no_file = run_checks(s);
    auto* miss = find(no_file, "module.missing_for_kernel");
    ASSERT_TRUE(miss);
    EXPECT_EQ(miss->severity, Severity::warning);  // loaded: this boot still works
}

TEST(ModuleCollect, DkmsTree) {
    FixtureCopy fx("dkms", false);
    fx.write("var/lib/dkms/nvidia/580.95.05/6.8.0-45-generic/x86_64/module/nvidia.ko.zst", "x");
    fx.write("var/lib/dkms/nvidia/kernel-6.8.0-45-generic-x86_64", "580.95.05/6.8.0-45-generic/x86_64\n");
    fx.write("var/lib/dkms/nvidia/580.95.05/6.8.0-50-generic/x86_64/module/nvidia.ko.zst", "x");
    fx.write("var/lib/dkms/nvidia/580.95.05/build/make.log",
             "DKMS make.log for nvidia-580.95.05 for kernel 6.11.0-1-generic (x86_64)\nerror: ...\n");
    std::vector<ReadProblem> problems;
    auto e = read_dkms_tree(Root(fx.dir), problems);
    ASSERT_EQ(e.size(), 3u);
    EXPECT_EQ(e[0].kernel, "6.8.0-45-generic");
    EXPECT_EQ(e[0].state, "installed");
    EXPECT_EQ(e[1].state, "built");
    EXPECT_EQ(e[2].kernel, "6.11.0-1-generic");
    EXPECT_EQ(e[2].state, "failed");
    EXPECT_EQ(e[2].log, "/var/lib/dkms/nvidia/580.95.05/build/make.log");

    Snapshot s;
    s.collectors.push_back(status_ok(Collector::module));
    s.module.kernel_release = "6.11.0-1-generic";
    s.module.files_unavailable = "no module tree";
    s.module.dkms = e;
    auto findings = run_checks(s);
    auto* f = find(findings, "module.dkms_build_failed");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, Severity::error);
    s.module.kernel_release = "6.8.0-45-generic";
    EXPECT_EQ(severity_of(run_checks(s), "module.dkms_build_failed"), Severity::warning);
}

TEST(ModuleChecks, NotLoadedExcludedAndNotInDriver) {
    auto s = snapshot_of(kH200);
    s.module.nvidia_gpus[1].excluded = true;
    auto f = run_checks(s);
    ASSERT_TRUE(find(f, "module.gpu_excluded"));
    EXPECT_EQ(find(f, "module.gpu_excluded")->severity, Severity::warning);
    EXPECT_EQ(find(f, "module.gpu_excluded")->subjects[0].uuid, "GPU-40cd403d-66ba-4608-72b9-5be5031085dc");
    EXPECT_EQ(severity_of(run_checks(s, 2u), "module.gpu_excluded"), Severity::error);

    s.module.nvidia_gpus.pop_back();
    s.module.nvidia_gpus[0].excluded = false;
    auto after_drop = run_checks(s);
    auto* nid = find(after_drop, "module.gpu_not_in_driver");
    ASSERT_TRUE(nid);
    EXPECT_EQ(nid->subjects[0].pci, "0000:00:07.0");

    s.module.loaded.clear();
    auto unloaded = run_checks(s);
    auto* nl = find(unloaded, "module.not_loaded");
    ASSERT_TRUE(nl);
    EXPECT_EQ(nl->severity, Severity::error);
    EXPECT_EQ(nl->subjects.size(), 2u);
    EXPECT_EQ(nl->subjects[0].uuid, "GPU-992cb470-9027-88f4-48a9-a9a329d6978d");
}

TEST(ModuleChecks, FailedUpgradeBuildIsReportedWhileAnOlderVersionIsInstalled) {
    // The upgrade to 580.172.08 failed to build for the running kernel; 580.159.04 is still installed for it.
    // The older install does not settle the failure: the next boot keeps the old driver (or none).
    Snapshot s;
    s.collectors.push_back(status_ok(Collector::module));
    s.module.kernel_release = kRelease;
    s.module.files_unavailable = "no module tree";
    s.module.dkms = {{"nvidia", "580.159.04", kRelease, "x86_64", "installed", ""},
                     {"nvidia", "580.172.08", kRelease, "x86_64", "failed",
                      "/var/lib/dkms/nvidia/580.172.08/build/make.log"}};
    auto f = run_checks(s);
    auto* failed = find(f, "module.dkms_build_failed");
    ASSERT_TRUE(failed);
    EXPECT_EQ(failed->severity, Severity::error);
    EXPECT_NE(failed->message.find("nvidia/580.172.08"), std::string::npos) << failed->message;
    // A newer (or the same) version built for that kernel does settle it.
    s.module.dkms[0].version = "580.172.08";
    EXPECT_EQ(find(run_checks(s), "module.dkms_build_failed"), nullptr);
    s.module.dkms[0].version = "590.44.01";
    EXPECT_EQ(find(run_checks(s), "module.dkms_build_failed"), nullptr);
    // An install for another kernel does not.
    s.module.dkms[0].kernel = "6.8.0-45-generic";
    EXPECT_NE(find(run_checks(s), "module.dkms_build_failed"), nullptr);
}

}  // namespace GPUDX_UNITY_ID
