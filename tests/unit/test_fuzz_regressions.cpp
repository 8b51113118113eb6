// Inputs the fuzz targets (fuzz/, docs/reliability.md) found breaking gpudx, kept as regression tests. Each
// test names the target and the crash file it came from; the input is that file's bytes.
//
// All but the last came from one cause: sanitize_utf8 let through sequences that are not well-formed UTF-8
// (overlong forms, surrogates, code points past U+10FFFF, lead bytes F5..F7), so text "repaired" from a
// node's file still made nlohmann::json::dump() throw, and `gpudx snapshot` lost the whole report.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rules/reference/xid_policy.hpp"
#include "collect/kernel_log_parse.hpp"
#include "collect/ld_so_cache.hpp"
#include "collect/module.hpp"
#include "collect/pci_ids.hpp"
#include "collect/pcie.hpp"
#include "core/text.hpp"
#include "core/toml.hpp"
#include "model/json_support.hpp"
#include "model/layer_json.hpp"
#include "model/snapshot.hpp"
#include "actions/accept.hpp"
#include "rules/comparisons/baseline.hpp"
#include "rules/comparisons/matrix.hpp"
#include "identity/verify.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {

template <size_t N>
std::string bytes(const char (&literal)[N]) {
    return std::string(literal, N - 1);  // embedded NULs kept
}

// As the snapshot prints it: dump() must not throw.
void expect_printable(const nlohmann::json& j) {
    std::string text;
    EXPECT_NO_THROW(text = j.dump());
    EXPECT_FALSE(text.empty());
}

}  // namespace

// fuzz_text, crash-109f9379: an overlong "/" (C0 AF), a surrogate (ED A0 80), a code point past U+10FFFF
// (F4 90 80 80) and FF.
TEST(FuzzRegressions, SanitizeUtf8RejectsOverlongSurrogatesAndOutOfRange) {
    std::string in = bytes("\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80\xff");
    std::string out = sanitize_utf8(in);
    EXPECT_NO_THROW((void)nlohmann::json(out).dump());
    EXPECT_EQ(out.find('\xed'), std::string::npos);
    EXPECT_EQ(sanitize_utf8(out), out);
    // Well-formed text is left alone, the edges of each range included.
    for (std::string ok : {"caf\xc3\xa9", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80", "\xf0\x90\x80\x80",
                           "\xf4\x8f\xbf\xbf", "\xef\xbf\xbd"})
        EXPECT_EQ(sanitize_utf8(ok), ok);
    // Ill-formed: each byte becomes one U+FFFD.
    for (std::string bad : {"\xe0\x9f\xbf", "\xed\xa0\x80", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80",
                            "\xc1\xbf"}) {
        std::string want;
        for (size_t i = 0; i < bad.size(); ++i) want += "\xEF\xBF\xBD";
        EXPECT_EQ(sanitize_utf8(bad), want) << bad.size() << " bytes";
    }
}

// fuzz_kernel_log_line, crash-a60a1415: an Xid line whose text ends in an overlong three-byte sequence.
TEST(FuzzRegressions, XidTextWithOverlongSequencePrints) {
    std::string line = bytes(
        "DMAR: [DMA Read\x00\x00\x00\x00\x00\x00\x00[ NO_PASID] 4210.118741] NVRMNVRM: Xid(0 C:PI000:00:07 GPU-I:05): "
        "48, pid='<unknoid (PCI:0000:00:07 Gn0] fault\xe0\x9e\x9b\x9b\x8d\xdf\xcf\x87" "0");
    auto x = parse_xid(line);
    ASSERT_TRUE(x);
    expect_printable(nlohmann::json{x->process, x->text});
}

// fuzz_pci_ids, crash-7aaf0d3a: a vendor name with an F5 lead byte.
TEST(FuzzRegressions, PciIdsNameWithF5LeadBytePrints) {
    std::string ids = bytes(
        "#=pci.ids excerpt\n excerpt\n10de  N\x14i.ids exc# pci.ids ex\x81\x81\x81\x81\x81\x81\xa1\x81\x81\x81\x81\x81"
        "\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81"
        "\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81\x81" "ceds "
        "\xce\xcf\x86r\xf5\x8b\x9a\x8d\x9en/MIde de  NVIDIA   KCn");
    auto names = parse_pci_ids(ids, {{0x10de, 0x2335}});
    ASSERT_EQ(names.vendors.count(0x10de), 1u);
    expect_printable(nlohmann::json(names.vendors.at(0x10de)));
}

// fuzz_proc_modules, crash-38c3f1b9: a module state field holding an F5 sequence.
TEST(FuzzRegressions, ProcModulesWithF5SequencePrints) {
    auto mods = parse_proc_modules(
        bytes("nvidia_uvm 1830912 - - L\xe0\xd7\xb0\xd6\xf5\x91\x90\x93veau 3096576 0 - Live 0xfive 0xffffffffc\n"));
    ModuleLayer layer;
    layer.loaded = mods;
    nlohmann::json j;
    layer_to_json(j, layer);
    expect_printable(j);
}

// fuzz_proc_nvidia, crash-9eed2bd1: an information file whose Bus Location ends in an F6 sequence.
TEST(FuzzRegressions, NvidiaInformationWithF6SequencePrints) {
    auto g = parse_nvidia_gpu_information(
        bytes("Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t GPU-992cb470-9027-88f4-48a9-a9a329d6978d\n"
              "Video BIOS: \t 92\xd0" "00.a5.00.1a\nBus Type: \t PCSeDIM\n Aize: \t 52 bits\nDMA Mask: \t "
              "0xfffffffffffff\nBus Location: \t 0000:00:06.0\xf6\xbb\x9a\x89\x96\x9c\x9a\xe2Minor: \t 0\n"
              "GPU Firmware: \t 580.159.04\nGPU Excluded:\t No\n"),
        "0000:00:06.0");
    ModuleLayer layer;
    layer.nvidia_gpus.push_back(g);
    nlohmann::json j;
    layer_to_json(j, layer);
    expect_printable(j);
    EXPECT_EQ(g.address, "0000:00:06.0");
}

// fuzz_sysfs, crash-1f0647a2: an AER counter name with an F4 lead byte and no continuation. Counter names
// become JSON keys: they are repaired where they are parsed.
TEST(FuzzRegressions, AerCounterNameWithInvalidByteIsRepaired) {
    auto counters = parse_aer_counters(bytes("RxErr 0\nBadTLP 2\nTOTAL_ERR_\xf4" "COR 2\n"));
    ASSERT_EQ(counters.size(), 3u);
    EXPECT_EQ(counters.count("TOTAL_ERR_\xEF\xBF\xBD" "COR"), 1u);
    PcieLayer layer;
    layer.devices.emplace_back().aer_correctable = counters;
    nlohmann::json j;
    layer_to_json(j, layer);
    expect_printable(j);
}

// fuzz_ldconfig_text, crash-479d0190: an ld.so.conf line with a broken two-byte sequence. Directories and
// include patterns keep their bytes (they are looked up on disk); the printed snapshot repairs them.
TEST(FuzzRegressions, LdSoConfWithInvalidBytesKeepsThemAndPrints) {
    auto conf = parse_ld_so_conf(bytes("include /etc/ld.so.conf.d/*.\xd1onf\n/opt/\xd1lib\n\n"));
    ASSERT_EQ(conf.includes.size(), 1u);
    ASSERT_EQ(conf.dirs.size(), 1u);
    EXPECT_EQ(conf.dirs[0], "/opt/\xd1lib");
    Snapshot s;
    s.libraries.ld_so_conf_dirs = conf.dirs;
    expect_printable(snapshot_to_json(s));
}

// fuzz_shim_state, crash-a9609692: a torn state file with F8 bytes and an overlong sequence in its fields.
TEST(FuzzRegressions, ShimStateWithInvalidBytesPrints) {
    std::string f8(95, '\xf8');
    auto state = parse_shim_state(
        "gpudx-shim-state 1\npid 4242\nstart_ticks 777\nmode correct\nproc_root /\nupdated_unix_ms 0500\n"
        "nvent_bus=0000:00:07.0 source=procfs corrected=12 uuid_changes=1 handed=0000:00:06.0,0000:00:07.0\n"
        "ordinal 1 uuid=GPU-992cb470-9027-88f4-48a9-a9a329d6978d driver_bus=0000:00:07.0 cu" + f8 +
        "rrent_bus=0000:00:06.0 source=procfs" + bytes("\xe0\x9c\x90\x8d\x8d\x9a\x9c\x92" "ed=0 uuid_changes=1 "
                                                       "handed=-\nend\n"));
    if (!state) GTEST_SKIP() << "rejected as torn: " << state.error().message;
    nlohmann::json j = nlohmann::json::array();
    for (auto& o : state->ordinals) j.push_back({o.uuid, o.driver_bus, o.current_bus, o.source});
    repair_utf8(j);  // as verify_report_to_json does
    expect_printable(j);
}

// fuzz_kernel_log, crash-2e7cbee3 (21 KB of kmsg-like records read with max_line_bytes 16): 287 lines were
// counted as oversized when the log came in one buffer and 288 when it came in pieces. The vector scanner
// checks one line end per 64 bytes, so a limit below 64 is raised to it; the same log now counts the same
// however it is chunked. (Built here from lines of 1 to 60 bytes, which showed 271 against 293.)
TEST(FuzzRegressions, OversizedLineCountDoesNotDependOnChunking) {
    std::string log;
    for (int i = 0; i < 400; ++i) log += std::string(static_cast<size_t>((i * 7) % 60) + 1, char('a' + i % 26)) + "\n";
    log += std::string(100, 'z') + "\n";  // one line over the raised limit
    KernelLogScanOptions o;
    o.max_line_bytes = 16;
    std::vector<uint64_t> skipped;
    for (size_t chunk : {log.size(), size_t(1), size_t(5), size_t(64)}) {
        KernelLogScanner s(o);
        s.set_format(KernelLogFormat::kmsg);
        for (size_t i = 0; i < log.size(); i += chunk) s.feed(std::string_view(log).substr(i, chunk));
        auto r = s.finish("chunked");
        ASSERT_TRUE(r);
        EXPECT_EQ(r->lines_read, 401u);
        skipped.push_back(r->lines_skipped);
    }
    for (auto n : skipped) EXPECT_EQ(n, 1u);
}

// toml++ 3.3 reached __builtin_unreachable() in its whitespace test for most non-ASCII code points where
// whitespace may stand (its bugs 190 and 295); core/toml.hpp compiles that test to answer "no" instead. Each
// text below reached it: fuzz_matrix's crash-ae4605f2 (U+0488 where a key begins), crash-a4bab9fd (U+0152
// after a number that a quote follows, on toml++'s error path), a non-ASCII character first after a
// line-ending backslash. Each is now a parse error with its line, or loads; the sanitizer builds (make
// test-sanitize, make fuzz) report the undefined behaviour if it comes back.
TEST(FuzzRegressions, TomlWithNonAsciiWhereWhitespaceMayStandIsAParseErrorNotUndefinedBehaviour) {
    auto key = parse_matrix("\xd2\x88ttttt|ttJtttttttttttttt", "fuzz.toml");
    ASSERT_FALSE(key);
    EXPECT_TRUE(key.error().message.starts_with("fuzz.toml:1:1: ")) << key.error().message;
    auto after_number = parse_matrix("\n[[class]]\nname = 2\"hpat\xc5\x92\"\nowner = \"x\"\n", "fuzz.toml");
    ASSERT_FALSE(after_number);
    EXPECT_TRUE(after_number.error().message.starts_with("fuzz.toml:3:")) << after_number.error().message;
    // U+00A7, U+00E9, U+2C60 and U+FC00: one from each range of the table that reached the unreachable.
    for (std::string_view c : {"\xc2\xa7", "\xc3\xa9", "\xe2\xb1\xa0", "\xef\xb0\x80"}) {
        auto bad = parse_toml(fmt::format("name = 1{}\n", c), "site.toml");
        ASSERT_FALSE(bad) << c;
        EXPECT_TRUE(bad.error().message.starts_with("site.toml:1:")) << bad.error().message;
    }
    auto backslash = parse_toml("v = \"\"\"\\\n\xc2\xa7\"\"\"\n", "site.toml");
    ASSERT_TRUE(backslash) << backslash.error().message;
    EXPECT_EQ((*backslash)["v"].value_or(std::string()), "\xc2\xa7");
    auto strings = parse_toml("# r\xc3\xa9sum\xc3\xa9\nname = \"2\xc3\x97 H200\" # \xc2\xa7\ns = '''\xc2\xa7'''\n",
                              "x.toml");
    ASSERT_TRUE(strings) << strings.error().message;
    EXPECT_EQ((*strings)["name"].value_or(std::string()), "2\xc3\x97 H200");
    EXPECT_EQ((*strings)["s"].value_or(std::string()), "\xc2\xa7");
}

// fuzz_baseline_json, crash-e05526f3: a node record whose numa_node is an 80-digit negative integer, which
// nlohmann parses as the double -1e79 and then casts to int: undefined behaviour (UBSan). Numbers are now
// normalised before the model reads them: whole floats become integers, other floats must fit (-1, 2^31).
TEST(FuzzRegressions, OutOfRangeNumbersAreRefusedNotCast) {
    std::string huge = "-1" + std::string(79, '0');
    auto record = nlohmann::json::parse(R"({"kind":"gpudx-node-record","schema_version":1,"gpus":[{"pci":"0000:00:06.0",)"
                                        R"("numa_node":)" + huge + "}]}");
    ASSERT_TRUE(record.at("gpus")[0].at("numa_node").is_number_float());
    auto r = node_record_from_json(record);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("out of range"), std::string::npos) << r.error().message;
    // A whole number written as a float is read as that integer; a fraction stays a double.
    auto ok = node_record_from_json(nlohmann::json::parse(
        R"({"kind":"gpudx-node-record","schema_version":1,"gpus":[{"pci":"0000:00:06.0","numa_node":1.0,)"
        R"("minor":3e0,"link_max":{"speed_gts":32.5,"width":16.0}}]})"));
    ASSERT_TRUE(ok) << ok.error().message;
    EXPECT_EQ(ok->gpus[0].numa_node, 1);
    EXPECT_EQ(ok->gpus[0].minor, 3u);
    EXPECT_EQ(ok->gpus[0].link_max.speed_gts, 32.5);
    // A fraction no integer field can take, anywhere in a snapshot: refused.
    auto snap = snapshot_from_json(nlohmann::json::parse(R"({"schema_version":1,"pcie":{"devices":[{"vendor_id":-5.5}]}})"));
    ASSERT_FALSE(snap);
    // The kind of a record that is not a string: refused, not thrown.
    EXPECT_FALSE(node_record_from_json(nlohmann::json::parse(R"({"kind":7})")));
    EXPECT_FALSE(accept_report_from_json(nlohmann::json::parse(R"({"kind":["gpudx-accept"]})")));
    EXPECT_FALSE(accept_report_from_json(nlohmann::json::parse(R"({"kind":"gpudx-accept","schema_version":"1"})")));
}

}  // namespace GPUDX_UNITY_ID
