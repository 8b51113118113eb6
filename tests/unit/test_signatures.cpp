#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "collect/collectors.hpp"
#include "collect/kernel_log_parse.hpp"
#include "core/root.hpp"
#include "core/text.hpp"
#include "test_support.hpp"
#include "rules/engine/check_context.hpp"
#include "rules/reference/signatures.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";
const std::string kGpu0 = "0000:00:06.0";
const std::string kGpu0Uuid = "GPU-992cb470-9027-88f4-48a9-a9a329d6978d";

using test::read_all;
using test::run_gpudx;
using test::scratch;
using test::write_file;

const Signature& sig(const std::string& id) {
    for (auto& s : builtin_signature_catalogue().signatures)
        if (s.id == id) return s;
    ADD_FAILURE() << "no signature " << id;
    static Signature none;
    return none;
}

// Findings of the kernel-log family for a text scanned as `diagnose` scans it, on the h200x2 node or on none.
std::vector<Finding> findings_for(std::string_view text, bool on_h200 = false) {
    static Snapshot h200 = [] {
        Root root(kH200);
        CollectOptions o;
        o.probe_driver = false;
        return take_snapshot(root, o);
    }();
    Snapshot s = on_h200 ? h200 : Snapshot{};
    KernelLogScanOptions o;
    o.extra_words = kernel_log_text_words(builtin_signature_catalogue());
    auto log = scan_kernel_log(text, o, "test.log");
    EXPECT_TRUE(log);
    s.kernel_log = *log;
    std::erase_if(s.collectors, [](auto& c) { return c.name == "kernel_log"; });
    s.collectors.push_back(status_ok(Collector::kernel_log));
    DiagnoseOptions d;
    CheckContext ctx{s, d};
    std::vector<Finding> out;
    check_kernel_log_text(ctx, out, nullptr);
    return out;
}

const Finding* find(const std::vector<Finding>& fs, const std::string& id) {
    for (auto& f : fs)
        if (f.id == id) return &f;
    return nullptr;
}
}  // namespace

TEST(Signatures, BuiltinCatalogueParses) {
    auto c = parse_signature_catalogue(read_all(std::string(GPUDX_TEST_SOURCE_DIR) + "/../data/signatures.toml"),
                                       "data/signatures.toml");
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ(c->signatures.size(), builtin_signature_catalogue().signatures.size());
    EXPECT_GT(c->signatures.size(), 40u);
}

// Every example is run against its own templates when the catalogue is parsed; this runs them again here, and
// checks each one matches no signature listed before its own (which would take the line first).
TEST(Signatures, EveryExampleMatchesItsOwnSignatureFirst) {
    const auto& sigs = builtin_signature_catalogue().signatures;
    for (size_t i = 0; i < sigs.size(); ++i) {
        ASSERT_FALSE(sigs[i].examples.empty()) << sigs[i].id;
        for (auto& ex : sigs[i].examples) {
            EXPECT_TRUE(match_signature(sigs[i], ex)) << sigs[i].id << ": " << ex;
            for (size_t k = 0; k < i; ++k)
                EXPECT_FALSE(match_signature(sigs[k], ex) && sigs[k].id != sigs[i].id)
                    << sigs[k].id << " takes " << sigs[i].id << "'s example: " << ex;
        }
    }
}

// The same examples through the scan a text goes through, which tries a signature at a line only when the line
// holds the chunk the signature is filed under (a multi-line signature's longest chunk of its first literal): each
// example, fed a line at a time, has every line recognised and is its own signature's finding.
TEST(Signatures, TheScanFindsEveryExampleUnderTheChunkItIsFiledUnder) {
    const auto& sigs = builtin_signature_catalogue().signatures;
    Snapshot s;
    s.collectors.push_back(status_ok(Collector::kernel_log));
    DiagnoseOptions d;
    CheckContext ctx{s, d};
    for (const auto& sig : sigs)
        for (const auto& ex : sig.examples) {
            std::vector<std::pair<std::string, bool>> done;
            SignatureScan scan(builtin_signature_catalogue(),
                               [&](const KernelLogLine& l, bool recognised) { done.emplace_back(l.text, recognised); });
            for (auto line : split(ex, '\n')) scan.add({std::nullopt, "", std::string(line), LogTopic::catalogue});
            scan.finish();
            for (auto& [line, recognised] : done) EXPECT_TRUE(recognised) << sig.id << ": " << line;
            if (!sig.severity) continue;
            std::vector<Finding> out;
            scan.findings(ctx, "test.log", out);
            EXPECT_TRUE(find(out, sig.id)) << sig.id << " not found in its example: " << ex;
        }
}

TEST(Signatures, ExampleThatDoesNotMatchItsTemplatesIsRefused) {
    auto c = parse_signature_catalogue(R"(version = "t"
[[signature]]
id = "kernel_log.test"
layer = "kernel_log"
severity = "error"
summary = "s"
meaning = "m"
message = "GPU {pci}"
next_step = "n"
match = "NVRM: GPU {pci:pci}: RmInitAdapter failed!"
examples = ["NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0"]
)",
                                       "site.toml");
    ASSERT_FALSE(c);
    EXPECT_NE(c.error().message.find("site.toml:2"), std::string::npos) << c.error().message;
    EXPECT_NE(c.error().message.find("does not match"), std::string::npos) << c.error().message;
}

TEST(Signatures, SyntaxErrorNamesFileAndLine) {
    auto dir = scratch("syntax");
    auto path = write_file(dir / "site.toml", "version = \"1\"\n\n[[signature]]\nid = \"x\nlayer = \"module\"\n");
    auto c = load_signature_catalogue_file(path);
    ASSERT_FALSE(c);
    EXPECT_NE(c.error().message.find(path + ":4"), std::string::npos) << c.error().message;
    auto [rc, out] = run_gpudx("explain --text 'x' --signatures " + path);
    EXPECT_EQ(rc, 64);
    EXPECT_NE(out.find(path + ":4"), std::string::npos) << out;
    std::filesystem::remove_all(dir);
}

TEST(Signatures, TemplatesRefuseWhatTheScanCannotFind) {
    auto parse = [](const std::string& match) {
        return parse_signature_catalogue("version = \"t\"\n[[signature]]\nid = \"a.b\"\nlayer = \"module\"\nseverity = "
                                         "\"error\"\nsummary = \"s\"\nmeaning = \"m\"\nmessage = \"m\"\nnext_step = "
                                         "\"n\"\nmatch = \"" + match + "\"\nexamples = [\"abc\"]\n",
                                         "t.toml");
    };
    EXPECT_NE(parse("ab{x:int}").error().message.find("shorter than 4"), std::string::npos);
    EXPECT_NE(parse("{x:int} failed").error().message.find("must start with a literal"), std::string::npos);
    EXPECT_NE(parse("failed {x:float}").error().message.find("field type `float`"), std::string::npos);
    EXPECT_NE(parse("failed {x:int}{y:int}").error().message.find("two fields in a row"), std::string::npos);
    EXPECT_NE(parse("failed {x:int").error().message.find("without"), std::string::npos);
    // {...} may follow a typed field, which ends by itself; never a text field, nor lead a template.
    EXPECT_EQ(parse("failed {x:int}{...} done").error().message.find("two fields in a row"), std::string::npos);
    EXPECT_NE(parse("failed {x:text}{...} done").error().message.find("two fields in a row"), std::string::npos);
    EXPECT_NE(parse("{x:name}{...} failed").error().message.find("must start with a literal"), std::string::npos);
}

// PyTorch prints the driver's CUDA version as cudaDriverGetVersion encodes it; the finding says the version.
TEST(Signatures, CudaVersionFieldReadsTheDriverApiEncoding) {
    auto c = parse_signature_catalogue(R"T(version = "t"
[[signature]]
id = "driver.test"
layer = "driver"
severity = "error"
summary = "s"
meaning = "m"
message = "CUDA {v}"
next_step = "n"
match = "found version {v:cuda_version})"
examples = ["(found version 11040)."]
)T",
                                       "t.toml");
    ASSERT_TRUE(c) << c.error().message;
    const Signature& s = c->signatures.front();
    EXPECT_EQ(match_signature(s, "(found version 11040).")->fields["v"], "11.4");
    EXPECT_EQ(match_signature(s, "(found version 9000).")->fields["v"], "9.0");
    EXPECT_EQ(match_signature(s, "(found version 12020).")->fields["v"], "12.2");
    EXPECT_FALSE(match_signature(s, "(found version 470).")) << "not an encoded CUDA version";
    auto fs = findings_for("RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please "
                           "update your GPU driver\n");
    const Finding* f = find(fs, "driver.cuda_insufficient_driver");
    ASSERT_TRUE(f);
    EXPECT_NE(f->message.find("CUDA 11.4"), std::string::npos) << f->message;
}

// amdgpu prints a page fault over several lines that repeat its device prefix and indent what follows it: they
// are one message, whose process, PASID and address the finding names.
TEST(Signatures, AmdgpuPageFaultJoinsItsIndentedDeviceLines) {
    const std::string text =
        "[ 4778.915423] amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32769)\n"
        "[ 4778.916081] amdgpu 0000:c6:00.0: amdgpu:  for process pt_main_thread pid 12924 thread pt_main_thread pid 12924)\n"
        "[ 4778.916571] amdgpu 0000:c6:00.0: amdgpu:   in page starting at address 0x0000ae8570611000 from IH client 0x1b (UTCL2)\n"
        "[ 4778.917054] amdgpu 0000:c6:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00301031\n"
        "[ 4778.917532] amdgpu 0000:c6:00.0: amdgpu: \t Faulty UTCL2 client ID: TCP (0x8)\n";
    auto fs = findings_for(text);
    const Finding* f = find(fs, "kernel_log.amdgpu_page_fault");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, Severity::warning);
    for (const char* fact : {"gfxhub0", "0x0000ae8570611000", "PASID 32769", "pt_main_thread pid 12924", "0000:c6:00.0"})
        EXPECT_NE(f->message.find(fact), std::string::npos) << fact << ": " << f->message;
    EXPECT_EQ(std::count_if(fs.begin(), fs.end(), [](auto& x) { return x.id == "kernel_log.amdgpu_page_fault"; }), 1);
    // A line of another message of the same device (not indented) is not joined to it.
    auto m = match_signature(sig("kernel_log.amdgpu_page_fault"),
                             "amdgpu 0000:c6:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:3 "
                             "pasid:32769)\namdgpu 0000:c6:00.0: amdgpu: for process other pid 1 thread other pid 1)");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->fields.count("process"), 0u);
}

TEST(Signatures, FieldsAndBlanks) {
    auto m = match_signature(sig("libs.api_mismatch"),
                             "NVRM: API mismatch: the client has the version 570.153.02, but\n"
                             "NVRM: this kernel module has the version 570.144.  Please\n"
                             "NVRM: make sure that this kernel module and all NVIDIA driver\n"
                             "NVRM: components have the same version.");
    ASSERT_TRUE(m);
    EXPECT_EQ(m->fields["client_version"], "570.153.02");
    EXPECT_EQ(m->fields["module_version"], "570.144");
    auto r = match_signature(sig("kernel_log.rm_init_adapter"),
                             "NVRM: GPU 0000:07:00.0: RmInitAdapter failed! (0x61:0x56:1770)");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->fields["pci"], "0000:07:00.0");
    EXPECT_EQ(r->fields["code"], "0x61:0x56:1770");
    auto s = match_signature(sig("module.unknown_symbol"), "[  +0.000031] nvidia_fs: Unknown symbol nvidia_p2p_get_pages (err -2)");
    ASSERT_TRUE(s);
    EXPECT_EQ(s->fields["module"], "nvidia_fs");
    EXPECT_EQ(s->fields["symbol"], "nvidia_p2p_get_pages");
    EXPECT_EQ(s->fields["err"], "-2");
    auto p = match_signature(sig("pcie.device_inaccessible"),
                             "nvidia 0000:01:00.0: Unable to change power state from D3cold to D0, device inaccessible");
    ASSERT_TRUE(p);
    EXPECT_EQ(p->fields["pci"], "0000:01:00.0");
    EXPECT_EQ(p->fields["from"], "D3cold");
    // The healthy "module uses symbols from proprietary module nvidia, inheriting taint" is not the GPL-only refusal.
    EXPECT_FALSE(match_signature(sig("module.gpl_only_symbols"),
                                 "nvidia_uvm: module uses symbols from proprietary module nvidia, inheriting taint."));
}

TEST(Signatures, GatesAreWhatTheScannerKeeps) {
    auto gates = catalogue_gate_words(builtin_signature_catalogue());
    EXPECT_NE(std::find(gates.begin(), gates.end(), "Direct firmware load for nvidia/"), gates.end());
    for (auto& g : gates) EXPECT_GE(g.size(), 4u) << g;
    KernelLogScanOptions o;
    o.extra_words = gates;
    auto log = scan_kernel_log("[   38.1] nvidia 0000:3b:00.0: Direct firmware load for nvidia/580.95.05/gsp_ga10x.bin failed with error -2\n"
                               "[   38.2] unrelated line\n"
                               // NVSwitch SXids are the parser's own topic now (the Xid policy's SXid catalogue).
                               "[   38.3] nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44\n",
                               o);
    ASSERT_TRUE(log);
    ASSERT_EQ(log->lines.size(), 2u);
    EXPECT_EQ(log->lines[0].topic, LogTopic::catalogue);
    EXPECT_EQ(log->lines[1].topic, LogTopic::sxid);
}

TEST(Signatures, FindingNamesTheFactsAndTheGpu) {
    auto fs = findings_for("[   87.473074] NVRM: GPU 0000:00:06.0: RmInitAdapter failed! (0x22:0x56:667)\n"
                           "[   87.473112] NVRM: GPU 0000:00:06.0: rm_init_adapter failed, device minor number 0\n",
                           true);
    const Finding* f = find(fs, "kernel_log.rm_init_adapter");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_NE(f->message.find("0x22:0x56:667"), std::string::npos) << f->message;
    ASSERT_EQ(f->subjects.size(), 1u);
    EXPECT_EQ(f->subjects[0].pci, kGpu0);
    EXPECT_EQ(f->subjects[0].uuid, kGpu0Uuid);
    EXPECT_NE(f->message.find(kGpu0Uuid), std::string::npos);
    // The minor-number line says less about the same GPU: left out beside it.
    EXPECT_FALSE(find(fs, "kernel_log.gpu_init_failed"));
}

TEST(Signatures, UuidFromTheTextWhenTheNodeDoesNotKnowIt) {
    auto fs = findings_for("[1.0] NVRM: GPU at PCI:0000:02:00: GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df\n"
                           "[1.1] NVRM: GPU 0000:02:00.0: RmInitAdapter failed! (0x62:0x40:2168)\n");
    const Finding* f = find(fs, "kernel_log.rm_init_adapter");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->subjects[0].uuid, "GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df");
}

TEST(Signatures, RepeatsAreCountedAndDistinctValuesListed) {
    auto fs = findings_for("[1.0] nv_peer_mem: Unknown symbol nvidia_p2p_get_pages (err -22)\n"
                           "[1.1] nv_peer_mem: Unknown symbol nvidia_p2p_put_pages (err -22)\n"
                           "[1.2] nv_peer_mem: Unknown symbol nvidia_p2p_get_pages (err -22)\n");
    const Finding* f = find(fs, "module.unknown_symbol");
    ASSERT_TRUE(f);
    EXPECT_NE(f->message.find("nvidia_p2p_get_pages, nvidia_p2p_put_pages"), std::string::npos) << f->message;
    EXPECT_NE(f->message.find("3 times"), std::string::npos) << f->message;
    EXPECT_EQ(std::count_if(fs.begin(), fs.end(), [](auto& x) { return x.id == "module.unknown_symbol"; }), 1);
}

TEST(Signatures, ApiMismatchIsCheckedAgainstTheNode) {
    // h200x2 runs module 580.159.04 (its capture lacks the libcuda file): the client's version, so a mismatch
    // in an old log is over on this node.
    const std::string text = "[ 8957.1] NVRM: API mismatch: the client has the version 580.159.04, but\n"
                             "[ 8957.1] NVRM: this kernel module has the version 570.148.06.  Please\n";
    auto alone = findings_for(text);
    const Finding* a = find(alone, "libs.api_mismatch");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->severity, Severity::error);
    EXPECT_NE(a->message.find("580.159.04"), std::string::npos);
    EXPECT_NE(a->message.find("570.148.06"), std::string::npos);
    auto here = findings_for(text, true);
    const Finding* h = find(here, "libs.api_mismatch");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->severity, Severity::info) << h->message;
    EXPECT_NE(h->message.find("the mismatch is over"), std::string::npos) << h->message;
}

TEST(Signatures, XidChainTakesTheCauseFromThePolicy) {
    auto fs = findings_for("kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by "
                           "previous Xid 149\n");
    const Finding* f = find(fs, "kernel_log.xid_caused_by");
    ASSERT_TRUE(f);
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_NE(f->message.find("caused by Xid 149"), std::string::npos) << f->message;
    EXPECT_TRUE(find(fs, "kernel_log.xid"));
}

TEST(Signatures, UnrecognisedVendorLinesAreListed) {
    Snapshot s;
    KernelLogScanOptions o;
    o.extra_words = catalogue_gate_words(builtin_signature_catalogue());
    s.kernel_log = *scan_kernel_log("[1.0] NVRM: GPU0 _kgspRpcGspEventPmuHalted: Received signal from GSP that PMU has "
                                    "halted.\n[1.1] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.148.06\n"
                                    "[1.2] amdgpu 0000:01:00.0: amdgpu: something new\n",
                                    o);
    s.collectors.push_back(status_ok(Collector::kernel_log));
    DiagnoseOptions d;
    CheckContext ctx{s, d};
    std::vector<Finding> out;
    std::vector<std::string> unrecognised;
    check_kernel_log_text(ctx, out, &unrecognised);
    ASSERT_EQ(unrecognised.size(), 2u);
    EXPECT_NE(unrecognised[0].find("PMU has halted"), std::string::npos);
    EXPECT_NE(unrecognised[1].find("something new"), std::string::npos);
}

// A message joined over several kept lines is matched when its last line has come: the scan hands each line back
// in order, once, after every signature that may take it was tried, and holds no more lines than a joined message
// may need (the longest signature joins 8).
TEST(Signatures, TheScanHandsEachLineBackInOrderOnceItIsMatched) {
    const std::vector<std::string> message = {
        "NVRM: The NVIDIA GPU 0000:af:00.0 (PCI ID: 10de:1db5)", "NVRM: installed in this system is not supported by open",
        "NVRM: nvidia.ko because it does not include the required GPU", "NVRM: System Processor (GSP)."};
    std::vector<std::pair<std::string, bool>> done;
    SignatureScan scan(builtin_signature_catalogue(),
                       [&](const KernelLogLine& l, bool recognised) { done.emplace_back(l.text, recognised); });
    for (auto& m : message) scan.add({std::nullopt, "", m, LogTopic::nvrm});
    EXPECT_TRUE(done.empty()) << "a line was judged before the lines a joined message may need had come";
    // 3,000 more lines, every other one recognised, past the batches in which matched lines are dropped.
    std::vector<std::string> more;
    for (int i = 0; i < 3000; ++i)
        more.push_back(i % 2 ? fmt::format("NVRM: something new {}", i)
                             : fmt::format("NVRM: GPU 0000:0{}:00.0 is already bound to vfio-pci", i % 10));
    for (auto& m : more) scan.add({std::nullopt, "", m, LogTopic::nvrm});
    EXPECT_GT(done.size(), 2990u);  // all but the last few, before the end
    scan.finish();
    ASSERT_EQ(done.size(), 3004u);
    for (size_t i = 0; i < message.size(); ++i) {
        EXPECT_EQ(done[i].first, message[i]);
        EXPECT_TRUE(done[i].second) << "line " << i << " is part of the joined message";
    }
    for (int i = 0; i < 3000; ++i) {
        EXPECT_EQ(done[4 + i].first, more[i]);
        EXPECT_EQ(done[4 + i].second, i % 2 == 0) << done[4 + i].first;
    }
    Snapshot s;
    s.collectors.push_back(status_ok(Collector::kernel_log));
    DiagnoseOptions d;
    CheckContext ctx{s, d};
    std::vector<Finding> out;
    scan.findings(ctx, "test.log", out);
    ASSERT_TRUE(find(out, "module.gpu_unsupported_by_open_module"));
    auto* bound = find(out, "module.gpu_bound_elsewhere");
    ASSERT_TRUE(bound);
    EXPECT_NE(bound->message.find("vfio-pci"), std::string::npos) << bound->message;
}

// explain names a GPU by the UUID its text gives ("NVRM: GPU at PCI:...: GPU-..."), read a line at a time; a line
// without "GPU-" names none.
TEST(Signatures, TheTextNamesItsGpusByUuid) {
    GpuUuidsInText uuids(builtin_signature_catalogue());
    uuids.add({std::nullopt, "", "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.148.06", LogTopic::nvrm});
    EXPECT_TRUE(uuids.found().empty());
    uuids.add({std::nullopt, "", "NVRM: GPU at PCI:0000:00:06: " + kGpu0Uuid, LogTopic::nvrm});
    uuids.add({std::nullopt, "", "NVRM: Xid (PCI:0000:00:07): 79, GPU-00000000 named in passing", LogTopic::xid});
    ASSERT_EQ(uuids.found().size(), 1u);
    EXPECT_EQ(uuids.found().at(kGpu0), kGpu0Uuid);
}

// What `gpudx explain` reads with its lines streamed through the rules (none kept) is what diagnose reads from the
// same text's kept lines: the same findings, in the same order, and the same unrecognised lines.
TEST(Signatures, StreamingTheLinesReadsWhatKeepingThemReads) {
    std::string text =
        "[   1.0] NVRM: The NVIDIA GPU 0000:af:00.0 (PCI ID: 10de:1db5)\n"
        "[   1.0] NVRM: installed in this system is not supported by open\n"
        "[   1.0] NVRM: nvidia.ko because it does not include the required GPU\n"
        "[   1.0] NVRM: System Processor (GSP).\n"
        "[   2.0] NVRM: GPU at PCI:0000:00:06: GPU-992cb470-9027-88f4-48a9-a9a329d6978d\n"
        "[   3.0] NVRM: GPU0 nvAssertFailedNoLog: Assertion failed: 0 @ kernel_gsp.c:1446\n"
        "[   4.0] NVRM: GPU0 _kgspRpcGspEventPmuHalted: Received signal from GSP that PMU has halted.\n"
        "[   5.0] NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.\n"
        "[   6.0] NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.\n"
        "[   7.0] Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7\n"
        "[   8.0] RuntimeError: CUDA error: CUDA_ERROR_NO_DEVICE\n";
    for (int i = 0; i < 40; ++i) text += fmt::format("[  {}.0] NVRM: Xid (PCI:0000:00:06): 13, pid={}, name=x\n", 10 + i, i);
    KernelLogScanOptions o;
    o.extra_words = kernel_log_text_words(builtin_signature_catalogue());
    o.every_boot = true;
    auto run = [&](bool streamed) {
        Snapshot s;
        DiagnoseOptions d;
        KernelLogLineRules rules(d, true);
        KernelLogScanOptions opts = o;
        if (streamed) opts.line_sink = [&](KernelLogLine&& l) { rules.add(std::move(l)); };
        s.kernel_log = *scan_kernel_log(text, opts, "test.log");
        EXPECT_EQ(s.kernel_log.xids.size(), 42u);
        if (streamed) {
            EXPECT_TRUE(s.kernel_log.lines.empty()) << "streamed lines were kept";
            for (auto& x : s.kernel_log.xids) rules.add_borrowed_xid(x);
            rules.finish();
        }
        s.collectors.push_back(status_ok(Collector::kernel_log));
        CheckContext ctx{s, d};
        std::vector<Finding> out;
        std::vector<std::string> unrecognised;
        check_kernel_log_text(ctx, out, &unrecognised, streamed ? &rules : nullptr);
        nlohmann::json j = nlohmann::json::array();
        for (auto& f : out) j.push_back(finding_to_json(f));
        return std::make_pair(j, unrecognised);
    };
    auto [kept, kept_unrecognised] = run(false);
    auto [streamed, streamed_unrecognised] = run(true);
    EXPECT_EQ(streamed.dump(1), kept.dump(1));
    EXPECT_EQ(streamed_unrecognised, kept_unrecognised);
    ASSERT_EQ(kept_unrecognised.size(), 2u);  // the assertion and the PMU lines
    EXPECT_NE(kept_unrecognised[1].find("PMU has halted"), std::string::npos);
    for (auto id : {"module.gpu_unsupported_by_open_module", "kernel_log.xid_repeated", "kernel_log.gpu_component_error",
                    "kernel_log.xid"})
        EXPECT_NE(kept.dump().find(id), std::string::npos) << id << " missing: " << kept.dump(1);
}

// The fallback: a GPU component's failure line that nothing explains is a warning naming the component, the GPU
// and the line, one per component and device with the count; a line a signature explains, or one catalogued as
// harmless, is not reported again.
TEST(Signatures, UnexplainedComponentFailuresAreWarningsWithTheLine) {
    auto fs = findings_for("[  10.1] NVRM: GPU0 nvAssertFailedNoLog: Assertion failed: 0 @ kernel_gsp.c:1446\n"
                           "[  10.2] NVRM: GPU0 nvAssertFailedNoLog: Assertion failed: 0 @ kernel_gsp.c:1446\n"
                           "[  11.0] NVRM: GPU 0000:00:06.0: kbusFlushSingle: flush timed out after 2000 us\n"
                           "[  12.0] NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. "
                           "Clearing it.\n"
                           "[  13.0] NVRM: GPU 0000:00:06.0: RmInitAdapter failed! (0x62:0x65:1792)\n",
                           true);
    std::vector<const Finding*> fallback;
    for (auto& f : fs)
        if (f.id == "kernel_log.gpu_component_error") fallback.push_back(&f);
    ASSERT_EQ(fallback.size(), 2u);
    EXPECT_EQ(fallback[0]->severity, Severity::warning);
    EXPECT_NE(fallback[0]->message.find("NVRM reported a failure"), std::string::npos) << fallback[0]->message;
    EXPECT_NE(fallback[0]->message.find("2 such lines"), std::string::npos) << fallback[0]->message;
    EXPECT_NE(fallback[0]->message.find("Assertion failed"), std::string::npos);
    ASSERT_EQ(fallback[1]->subjects.size(), 1u);
    EXPECT_EQ(fallback[1]->subjects[0].pci, kGpu0);
    EXPECT_EQ(fallback[1]->subjects[0].uuid, kGpu0Uuid);
    EXPECT_TRUE(find(fs, "kernel_log.rm_init_adapter"));  // the signature's, not the fallback's
}

TEST(Signatures, TheH200BootLinesStayHealthy) {
    auto fs = findings_for("[   9.1] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.148.06\n"
                           "[  10.0] NVRM: gpuClearFbhubPoisonIntrForBug2924523_GA100: FBHUB Interrupt detected. "
                           "Clearing it.\n"
                           "[  11.0] NVRM: Persistence mode is deprecated and will be removed in a future release. "
                           "Please use nvidia-persistenced instead.\n",
                           true);
    EXPECT_TRUE(fs.empty()) << fs.front().id;
}

TEST(Signatures, SiteCatalogueReplacesAndAdds) {
    auto dir = scratch("site");
    auto path = write_file(dir / "site.toml", R"(version = "site 1"
[[signature]]
id = "kernel_log.site_specific"
layer = "kernel_log"
severity = "warning"
summary = "our BMC's message"
meaning = "m"
message = "BMC says {what}"
next_step = "call the vendor"
match = "bmc-agent: thermal event {what:name}"
examples = ["bmc-agent: thermal event GPU3"]
)");
    auto c = load_signature_catalogue_file(path);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_NE(c->version.find("site 1"), std::string::npos);
    EXPECT_EQ(c->signatures.size(), builtin_signature_catalogue().signatures.size() + 1);
    auto [rc, out] = run_gpudx("explain --text 'bmc-agent: thermal event GPU3' --signatures " + path);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_NE(out.find("BMC says GPU3"), std::string::npos) << out;
    std::filesystem::remove_all(dir);
}

TEST(Signatures, DeclarationsCoverEveryEmittedId) {
    auto decl = signature_declarations(builtin_signature_catalogue());
    std::set<std::string> ids;
    for (auto& d : decl) EXPECT_TRUE(ids.insert(d.id).second) << "declared twice: " << d.id;
    for (auto& s : builtin_signature_catalogue().signatures)
        if (s.severity) {
            EXPECT_TRUE(ids.count(s.id)) << s.id;
        }
    // The docs list every signature.
    std::string docs = read_all(std::string(GPUDX_TEST_SOURCE_DIR) + "/../docs/signatures.md");
    for (auto& id : ids) EXPECT_NE(docs.find("`" + id + "`"), std::string::npos) << id << " is not in docs/signatures.md";
}

// ---- gpudx explain on bad input ---------------------------------------------------------------------

TEST(Explain, EmptyInputIsAUsageError) {
    auto dir = scratch("empty");
    auto path = write_file(dir / "empty.txt", "");
    auto [rc, out] = run_gpudx("explain " + path);
    EXPECT_EQ(rc, 64) << out;
    EXPECT_NE(out.find("empty"), std::string::npos) << out;
    auto [rc2, out2] = run_gpudx("explain - < /dev/null");
    EXPECT_EQ(rc2, 64) << out2;
    std::filesystem::remove_all(dir);
}

TEST(Explain, BinaryGarbageAndInvalidUtf8AreReadSafely) {
    auto dir = scratch("garbage");
    std::string bytes;
    for (int i = 0; i < 200000; ++i) bytes += static_cast<char>((i * 7919) & 0xff);
    bytes += "\nNVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:\xff\xfe:667)\n";
    auto path = write_file(dir / "garbage.bin", bytes);
    auto [rc, out] = run_gpudx("explain --format json " + path);
    EXPECT_EQ(rc, 1) << out;
    auto j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << out.substr(0, 400);
    bool found = false;
    for (auto& f : j["findings"]) found |= f["id"] == "kernel_log.rm_init_adapter";
    EXPECT_TRUE(found);
    std::filesystem::remove_all(dir);
}

TEST(Explain, TenMegabyteLineIsSkippedAndTheRestRead) {
    auto dir = scratch("longline");
    std::string text(10 * 1024 * 1024, 'x');
    text += "\nFailed to initialize NVML: Driver/library version mismatch\n";
    auto path = write_file(dir / "long.txt", text);
    auto [rc, out] = run_gpudx("explain " + path);
    EXPECT_EQ(rc, 1) << out.substr(0, 400);
    EXPECT_NE(out.find("libs.nvml_version_mismatch"), std::string::npos);
    EXPECT_NE(out.find("longer than"), std::string::npos) << out.substr(0, 400);
    std::filesystem::remove_all(dir);
}

TEST(Explain, ExitCodesAndList) {
    EXPECT_EQ(run_gpudx("explain --text 'all is well'").first, 0);
    EXPECT_EQ(run_gpudx("explain --text 'LnkSta: Speed 2.5GT/s (downgraded)'").first, 2);
    EXPECT_EQ(run_gpudx("explain --text 'CUDA driver version is insufficient for CUDA runtime version'").first, 1);
    EXPECT_EQ(run_gpudx("explain --bogus").first, 64);
    auto [rc, out] = run_gpudx("explain --list");
    EXPECT_EQ(rc, 0);
    EXPECT_NE(out.find("libs.api_mismatch"), std::string::npos);
    EXPECT_NE(out.find("next step:"), std::string::npos);
}

}  // namespace GPUDX_UNITY_ID
