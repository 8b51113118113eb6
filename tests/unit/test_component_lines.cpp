#include <gtest/gtest.h>

#include <string>

#include "rules/reference/component_lines.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

// Real lines (tests/corpus/real/) that no signature names: the fallback must name their component, device and word.
TEST(ComponentLines, NamesTheComponentTheDeviceAndTheWord) {
    auto a = component_failure_line("amdgpu 0000:03:00.0: amdgpu: Failed to disable gfxoff!");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->component, "amdgpu");
    EXPECT_EQ(a->pci, "0000:03:00.0");
    EXPECT_EQ(a->word, "failed");

    auto n = component_failure_line("NVRM: GPU0 nvAssertFailedNoLog: Assertion failed: 0 @ kernel_gsp.c:1446");
    ASSERT_TRUE(n);
    EXPECT_EQ(n->component, "NVRM");
    EXPECT_EQ(n->pci, "");

    auto p = component_failure_line(
        "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->component, "nvidia-peermem");
    EXPECT_EQ(p->word, "error");

    auto m = component_failure_line("nvidia 0000:2c:00.0: probe with driver nvidia failed with error -1");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->component, "nvidia");
    EXPECT_EQ(m->pci, "0000:2c:00.0");

    // NVRM's own spelling of an address, and NVML's eight-digit domain.
    auto r = component_failure_line("NVRM: GPU at PCI:0000:02:00: GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df timeout");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->pci, "0000:02:00.0");
    auto v = component_failure_line("NVRM: GPU 00000000:3B:00.0 failed to respond");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->pci, "0000:3b:00.0");
}

TEST(ComponentLines, ANegativeErrnoIsAFailureWord) {
    auto e = component_failure_line("amdgpu 0000:48:00.0: amdgpu: smu returned -110");
    ASSERT_TRUE(e);
    EXPECT_EQ(e->word, "-110");
    EXPECT_EQ(e->pci, "0000:48:00.0");
    auto paren = component_failure_line("kfd kfd: amdgpu: queue creation (-12)");
    ASSERT_TRUE(paren);
    EXPECT_EQ(paren->word, "-12");
    // A UUID's digits after a dash, a range, a version: none is an errno.
    EXPECT_FALSE(component_failure_line("NVRM: GPU at PCI:0000:02:00: GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df"));
    EXPECT_FALSE(component_failure_line("amdgpu: ATOM BIOS: 113-D1631400-X11 range 0-3"));
}

// Healthy lines stay healthy: no failure word, or the H200 machine's boot lines (those are `ignore` signatures, and
// this function alone does not flag them either), or words the component prints on success.
TEST(ComponentLines, HealthyLinesAreNotFailures) {
    for (const char* line : {
             "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.148.06  Mon May  5 11:36:21 UTC 2025",
             "NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. Clearing it.",
             "NVRM: Persistence mode is deprecated and will be removed in a future release. Please use "
             "nvidia-persistenced instead.",
             "[drm] Initialized nvidia-drm 0.0.0 20160202 for 0000:00:06.0 on minor 1",
             "kfd kfd: amdgpu: added device 1002:74a1",
             "nvidia-uvm: Loaded the UVM driver, major device number 510.",
         })
        EXPECT_FALSE(component_failure_line(line)) << line;
}

// What the kernel-log parser reports by its own rules is not the fallback's: an Xid, an SXid, AER, a GPU off the bus.
TEST(ComponentLines, TheParsersOwnLinesAreLeftToIt) {
    for (const char* line : {
             "NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.",
             "nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 46 egress non-posted PRIV error",
             "amdgpu 0000:03:00.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer",
             "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
             "nvidia: module verification failed: signature and/or required key missing - tainting kernel",
             // An AER report's detail lines under the GPU driver's name (the aer-in-log scenario's form).
             "nvidia 0000:00:07.0:   device [10de:2335] error status/mask=00004000/00400000",
             "nvidia 0000:00:07.0:    [14] CmpltTO                (First)",
             "amdgpu 0000:03:00.0:    [12] Timeout               ",
         })
        EXPECT_FALSE(component_failure_line(line)) << line;
}

// Not the component speaking: a path that names it, or a product name.
TEST(ComponentLines, APathOrAProductNameIsNotTheComponent) {
    EXPECT_FALSE(component_failure_line("docker: Error response from daemon: error gathering device information while "
                                        "adding custom device \"/dev/kfd\": no such file or directory."));
    EXPECT_FALSE(component_failure_line("The NVIDIA GPU driver failed to start"));
    EXPECT_FALSE(component_failure_line("nvidia-smi failed"));
}

TEST(ComponentLines, GateWordsReachTheCompanionsLines) {
    auto words = component_gate_words();
    for (const char* w : {"nvidia-peermem", "nvidia-nvswitch", "nv-fabricmanager", "nvidia:"})
        EXPECT_NE(std::find(words.begin(), words.end(), w), words.end()) << w;
}

}  // namespace GPUDX_UNITY_ID
