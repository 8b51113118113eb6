#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "collect/collectors.hpp"
#include "collect/kernel_log/lexing.hpp"
#include "collect/kernel_log/prefilter.hpp"
#include "collect/kernel_log_parse.hpp"
#include "core/root.hpp"
#include "core/text.hpp"

// Each file's tests and helpers in a namespace of their own: one per file in a unity build (tests/CMakeLists.txt).
namespace GPUDX_UNITY_ID {

using namespace gpudx;

namespace {
const std::string kH200 = std::string(GPUDX_TEST_FIXTURES) + "/h200x2";
const char* kXid79 = "NVRM: Xid (PCI:0000:00:06): 79, pid=1234, name=python3, GPU has fallen off the bus.";

std::filesystem::path scratch(const std::string& name) {
    auto p = std::filesystem::temp_directory_path() / ("gpudx-test-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(p);
    std::filesystem::create_directories(p);
    return p;
}

void write_file(const std::filesystem::path& p, std::string_view text) {
    std::ofstream out(p, std::ios::binary);
    out << text;
}

KernelLog scan_ok(std::string_view text, KernelLogScanOptions o = {}) {
    auto r = scan_kernel_log(text, o);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? *r : KernelLog{};
}

// The scanner fed in pieces of the given sizes, cycling, to cross every chunk boundary case.
KernelLog scan_in_chunks(std::string_view text, std::vector<size_t> sizes, KernelLogScanOptions o = {}) {
    KernelLogScanner s(o);
    size_t at = 0, k = 0;
    while (at < text.size()) {
        size_t n = std::min(sizes[k++ % sizes.size()], text.size() - at);
        s.feed(text.substr(at, n));
        at += n;
    }
    auto r = s.finish("<chunks>");
    EXPECT_TRUE(r);
    return r ? *r : KernelLog{};
}
}  // namespace

// ---- one line in each format --------------------------------------------------------------------

TEST(KernelLogFormat, RawKmsgRecordWithContinuationLines) {
    // The parsed line holds views into its text: the text must outlive it.
    const std::string record = std::string("6,1234,5678901,-;") + kXid79;
    auto p = parse_log_line(record, KernelLogFormat::kmsg);
    ASSERT_TRUE(p.recognised);
    EXPECT_DOUBLE_EQ(*p.monotonic_s, 5.678901);
    EXPECT_EQ(p.message, kXid79);
    auto cont = parse_log_line(" SUBSYSTEM=pci", KernelLogFormat::kmsg);
    EXPECT_TRUE(cont.recognised);
    EXPECT_TRUE(cont.continuation);
    EXPECT_EQ(detect_line_format("4,1889,1190373,-,caller=T1;pcieport 0000:00:01.0: AER: enabled"),
              KernelLogFormat::kmsg);

    auto log = scan_ok(std::string("6,1234,5678901,-;") + kXid79 + "\n SUBSYSTEM=pci\n DEVICE=+pci:0000:00:06.0\n" +
                       "6,1235,5679000,-;usb 1-1: new high-speed USB device\n");
    EXPECT_EQ(log.format, KernelLogFormat::kmsg);
    EXPECT_EQ(log.lines_read, 4u);
    ASSERT_EQ(log.lines.size(), 1u);  // the dictionary lines are metadata, not messages
    EXPECT_EQ(log.lines[0].topic, LogTopic::xid);
    ASSERT_EQ(log.xids.size(), 1u);
    EXPECT_EQ(log.xids[0].pci, "0000:00:06.0");
    EXPECT_DOUBLE_EQ(*log.xids[0].monotonic_s, 5.678901);
}

TEST(KernelLogFormat, Dmesg) {
    auto p = parse_log_line("[  123.456789] NVRM: loading NVIDIA UNIX Open Kernel Module", KernelLogFormat::dmesg);
    ASSERT_TRUE(p.recognised);
    EXPECT_DOUBLE_EQ(*p.monotonic_s, 123.456789);
    EXPECT_EQ(p.message, "NVRM: loading NVIDIA UNIX Open Kernel Module");
    auto caller = parse_log_line("[    0.550032] [    T1] NVRM: loading", KernelLogFormat::dmesg);
    EXPECT_EQ(caller.message, "NVRM: loading");
    auto raw = parse_log_line("<4>[   12.5] pcieport 0000:00:01.0: AER: enabled", KernelLogFormat::dmesg);
    ASSERT_TRUE(raw.recognised);
    EXPECT_DOUBLE_EQ(*raw.monotonic_s, 12.5);
    EXPECT_FALSE(parse_log_line("Nov 30 06:28:08 host kernel: x", KernelLogFormat::dmesg).recognised);
}

TEST(KernelLogFormat, DmesgT) {
    auto line = std::string("[Mon Nov 30 06:28:08 2026] ") + kXid79;
    EXPECT_EQ(detect_line_format(line), KernelLogFormat::dmesg_t);
    auto p = parse_log_line(line, KernelLogFormat::dmesg_t);
    ASSERT_TRUE(p.recognised);
    EXPECT_EQ(p.wall_time, "Mon Nov 30 06:28:08 2026");
    EXPECT_FALSE(p.monotonic_s);
    EXPECT_EQ(p.message, kXid79);
    auto padded = parse_log_line("[Tue Dec  1 00:00:01 2026] NVRM: x", KernelLogFormat::dmesg_t);
    EXPECT_TRUE(padded.recognised);
    EXPECT_EQ(padded.wall_time, "Tue Dec  1 00:00:01 2026");
}

TEST(KernelLogFormat, JournalctlShort) {
    auto line = std::string("Nov 30 06:28:08 gpu-node-17 kernel: ") + kXid79;
    EXPECT_EQ(detect_line_format(line), KernelLogFormat::journal_short);
    auto p = parse_log_line(line, KernelLogFormat::journal_short);
    ASSERT_TRUE(p.recognised);
    EXPECT_TRUE(p.from_kernel);
    EXPECT_EQ(p.wall_time, "Nov 30 06:28:08");
    EXPECT_EQ(p.message, kXid79);
    auto other = parse_log_line("Nov  3 06:28:08 gpu-node-17 nvidia-persistenced[812]: NVRM: x",
                                KernelLogFormat::journal_short);
    ASSERT_TRUE(other.recognised);
    EXPECT_FALSE(other.from_kernel);  // not a kernel message: ignored
}

TEST(KernelLogFormat, JournalctlShortIso) {
    auto line = std::string("2026-11-30T06:28:08+0000 gpu-node-17 kernel: ") + kXid79;
    EXPECT_EQ(detect_line_format(line), KernelLogFormat::journal_iso);
    auto p = parse_log_line(line, KernelLogFormat::journal_iso);
    ASSERT_TRUE(p.recognised);
    EXPECT_EQ(p.wall_time, "2026-11-30T06:28:08+0000");
    EXPECT_EQ(p.message, kXid79);
    EXPECT_TRUE(parse_log_line("2026-11-30T06:28:08.123456+01:00 h kernel: NVRM: x", KernelLogFormat::journal_iso)
                    .recognised);
}

TEST(KernelLogFormat, SyslogKernLogWithMonotonicStamp) {
    auto line = std::string("Nov 30 06:28:08 gpu-node-17 kernel: [  123.4] ") + kXid79;
    EXPECT_EQ(detect_line_format(line), KernelLogFormat::syslog);
    auto p = parse_log_line(line, KernelLogFormat::syslog);
    ASSERT_TRUE(p.recognised);
    EXPECT_DOUBLE_EQ(*p.monotonic_s, 123.4);
    EXPECT_EQ(p.wall_time, "Nov 30 06:28:08");
    EXPECT_EQ(p.message, kXid79);
    auto log = scan_ok(line + "\nNov 30 06:28:09 gpu-node-17 kernel: [  124.0] usb 1-1: reset\n");
    EXPECT_EQ(log.format, KernelLogFormat::syslog);
    EXPECT_EQ(log.xids.size(), 1u);
}

// A line gpudx cannot date is still a line: `journalctl -o cat`, "kernel:" with the time cut off, pasted text.
TEST(KernelLogFormat, UnknownFormatIsStillReadLineByLine) {
    KernelLogScanner s;
    s.feed("hello world\nthis is not a kernel log\nNVRM appears here\nkernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1, "
           "name=python3, Ch 00000001\n");
    auto r = s.finish("/tmp/notes.txt");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->format, KernelLogFormat::unknown);
    EXPECT_EQ(r->lines_read, 4u);
    ASSERT_EQ(r->lines.size(), 2u);
    EXPECT_EQ(r->lines[0].text, "NVRM appears here");
    EXPECT_FALSE(r->lines[0].monotonic_s);
    ASSERT_EQ(r->xids.size(), 1u);
    EXPECT_EQ(r->xids[0].pci, "0000:dc:00.0");
    ASSERT_EQ(s.notes().size(), 1u);
    EXPECT_NE(s.notes()[0].find("time left unknown"), std::string::npos);
    std::string binary(4096, '\0');
    for (size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<char>((i * 131) & 0xff);
    auto b = scan_kernel_log(binary);
    ASSERT_TRUE(b);
    for (auto& l : b->lines) EXPECT_EQ(sanitize_utf8(l.text), l.text);
}

TEST(KernelLogXid, FormWithoutPciTag) {
    auto ev = parse_xid("NVRM: Xid 13, pid=3057, name=cosmic-comp, Graphics Exception: channel 0x00000003");
    ASSERT_TRUE(ev);
    EXPECT_EQ(ev->code, 13);
    EXPECT_EQ(ev->pci, "");
    EXPECT_EQ(ev->pid, 3057);
    EXPECT_EQ(ev->process, "cosmic-comp");
    EXPECT_FALSE(parse_xid("nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal"));
    EXPECT_FALSE(parse_xid("NVRM: Xid 13 without a comma"));
}

TEST(KernelLogScan, CatalogueWordsKeepLinesFromAnyProgram) {
    KernelLogScanOptions o;
    o.extra_words = {"could not insert", "Unknown symbol"};
    auto log = scan_ok("Mar 06 15:10:43 host gdm3[7055]: modprobe: ERROR: could not insert 'nvidia': Key was rejected by "
                       "service\nMar 06 15:10:44 host kernel: nv_peer_mem: Unknown symbol ib_register_peer_memory_client "
                       "(err 0)\nMar 06 15:10:45 host gdm3[7056]: unrelated\n",
                       o);
    ASSERT_EQ(log.lines.size(), 2u);
    EXPECT_EQ(log.lines[0].topic, LogTopic::catalogue);
    EXPECT_EQ(log.lines[1].text, "nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)");
}

TEST(KernelLogFormat, RealCaptureIsDmesgOfOneBoot) {
    std::ifstream in(kH200 + "/_commands/dmesg.txt", std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    auto log = scan_ok(text);
    EXPECT_EQ(log.format, KernelLogFormat::dmesg);
    EXPECT_EQ(log.lines_read, 371u);
    EXPECT_EQ(log.boots_seen, 1u);
    EXPECT_TRUE(log.xids.empty());
    bool nvrm_load = false, lockdown = false;
    for (auto& l : log.lines) {
        if (l.topic == LogTopic::nvrm && l.text.starts_with("NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04"))
        {
            nvrm_load = true;
            EXPECT_DOUBLE_EQ(*l.monotonic_s, 0.550032);
        }
        if (l.topic == LogTopic::lockdown && l.text.starts_with("Kernel is locked down from Kernel configuration")) lockdown = true;
    }
    EXPECT_TRUE(nvrm_load);
    EXPECT_TRUE(lockdown);
    // Nothing the grep of the operations guide would call a fault: no tallies at all.
    EXPECT_TRUE(log.tallies.empty());
}

// ---- robustness -----------------------------------------------------------------------------------

TEST(KernelLogScan, OneMegabyteLineIsSkippedAndCounted) {
    std::string huge = "[    1.000000] NVRM: " + std::string(1 << 20, 'x');
    std::string text = "[    0.500000] NVRM: before\n" + huge + "\n[    2.000000] NVRM: after\n";
    for (auto chunks : std::vector<std::vector<size_t>>{{text.size()}, {4096}, {1 << 20}, {7, 65536, 3}}) {
        auto log = scan_in_chunks(text, chunks);
        EXPECT_EQ(log.lines_read, 3u);
        EXPECT_EQ(log.lines_skipped, 1u);
        ASSERT_EQ(log.lines.size(), 2u);
        EXPECT_EQ(log.lines[0].text, "NVRM: before");
        EXPECT_EQ(log.lines[1].text, "NVRM: after");
    }
    // Unterminated at the end of the input, and a long line without any topic word.
    auto tail = scan_ok("[    0.5] NVRM: before\n" + huge);
    EXPECT_EQ(tail.lines_skipped, 1u);
    EXPECT_EQ(tail.lines.size(), 1u);
    auto plain = scan_ok("[    0.5] NVRM: before\n" + std::string(70000, 'a') + "\n");
    EXPECT_EQ(plain.lines_skipped, 1u);
}

TEST(KernelLogScan, InvalidUtf8IsReplaced) {
    auto log = scan_ok("[    1.000000] NVRM: GPU name \xff\xfe\xc3 garbage\n");
    ASSERT_EQ(log.lines.size(), 1u);
    EXPECT_EQ(log.lines[0].text, "NVRM: GPU name \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD garbage");
}

TEST(KernelLogScan, CrLfLineEndings) {
    auto log = scan_ok(std::string("[    1.0] ") + kXid79 + "\r\n[    2.0] usb reset\r\n");
    ASSERT_EQ(log.xids.size(), 1u);
    EXPECT_EQ(log.lines[0].text, kXid79);
}

// The vector prefilter must keep exactly the lines a plain per-line classification keeps, wherever the
// words fall relative to 16- and 32-byte blocks and chunk boundaries.
TEST(KernelLogScan, PrefilterKeepsExactlyWhatAPlainScanKeeps) {
    const std::vector<std::string> words = {"NVRM: x", "Xid (PCI:0000:00:06): 13, y", "amdgpu 0000:03:00.0: z",
                                            "kfd kfd: amdgpu: added", "pcieport 0000:00:01.0: AER: enabled",
                                            "DMAR: IOMMU enabled", "AMD-Vi: Interrupt remapping enabled",
                                            "iommu: Default domain type: Translated", "PCIe Bus Error: severity=Corrected",
                                            "Lockdown: modprobe: unsigned module loading is restricted",
                                            "nvidia: module verification failed: signature missing",
                                            "Key was rejected by service", "GPU has fallen off the bus",
                                            "aerial view (no word)", "xidx no", "usb 1-1: new device", "EXT4-fs mounted",
                                            "pci 0000:00:06.0: BAR 0", "docker0: port 1 entered blocking state",
                                            "key was accepted", "nvr", "pci", "AEr:", "iommU fault", "KFD."};
    std::mt19937 rng(42);
    std::string text;
    size_t expected = 0;
    for (int i = 0; i < 5000; ++i) {
        std::string pad(rng() % 40, 'a' + static_cast<char>(rng() % 26));
        std::string msg = (rng() % 2 ? pad + " " : std::string()) + words[rng() % words.size()] + " " + pad;
        std::string line = "[" + std::to_string(10 + i) + ".000000] " + msg;
        if (classify_topic(msg)) ++expected;
        text += line + "\n";
    }
    auto whole = scan_ok(text);
    EXPECT_EQ(whole.lines.size(), expected);
    EXPECT_EQ(whole.lines_read, 5000u);
    auto chunked = scan_in_chunks(text, {1, 13, 4096, 31, 65537});
    EXPECT_EQ(chunked.lines.size(), expected);
    EXPECT_EQ(chunked.lines_read, 5000u);
}

// Every block scanner this CPU runs (AVX2, SSSE3, portable) keeps exactly the lines a plain search for each word
// keeps, with the catalogue's kind of extra words too: phrases with punctuation, two- and three-byte words,
// upper case, words that share their rarest triples, a word at the very start and end of a block.
TEST(KernelLogScan, EveryBlockScannerKeepsWhatAPlainSearchKeeps) {
    namespace pf = kernel_log_prefilter;
    const std::vector<std::string> extra = {": ring",          "*ERROR* amdgpu: ring", "CUDA",      "nccl",
                                            "NVML_",           "ok",                   "hipError", ": not ready",
                                            "warning: event",  "Q9",                   "(0x",       "[drm] gpu hang",
                                            "segfault at",     "out of memory",        "-- ",       "ring"};
    std::vector<std::string> words = kernel_log_scanner_words(extra);
    pf::Prefilter prefilter(extra);
    const std::vector<std::string> builtin_whole = {"kfd", "xid", "sxid", "aer"};
    auto plain_keeps = [&](std::string_view line) {
        for (auto& w : words) {
            std::string lw;
            for (char c : w) lw += kernel_log_lexing::lower(c);
            bool whole = std::find(builtin_whole.begin(), builtin_whole.end(), lw) != builtin_whole.end();
            if (whole ? contains_word_ci(line, lw) : contains_ci(line, lw))
                return true;
        }
        return false;
    };
    const std::vector<std::string> pieces = {"CUDA", "cuda", "nCcL", "nvml_", "NVML", ": Ring", ":ring", "OK", "o",
                                             "k", "HIPERROR", "hip", ": not read", "Warning: Event", "q9", "Q",
                                             "(0X", "(0", "[DRM] GPU HANG", "segfault at", "out of mem", "-- ", "--",
                                             "xid", "Xid5", "aerial", "AER:", "kfd", "nvrm", "r", "in", "g ",
                                             "\t", "0000:3b:00.0", "warning", "ring"};
    std::mt19937 rng(7);
    std::string text;
    for (int i = 0; i < 6000; ++i) {
        std::string line;
        for (int k = static_cast<int>(rng() % 6); k > 0; --k) {
            line += pieces[rng() % pieces.size()];
            if (rng() % 3) line += std::string(rng() % 4, rng() % 2 ? ' ' : 'x');
        }
        text += line + "\n";
    }
    std::vector<std::string> lines;
    std::vector<size_t> starts;  // each line's offset in text
    for (size_t at = 0; at < text.size();) {
        size_t nl = text.find('\n', at);
        starts.push_back(at);
        lines.push_back(text.substr(at, nl - at));
        at = nl + 1;
    }
    std::vector<size_t> expected;
    for (size_t i = 0; i < lines.size(); ++i)
        if (plain_keeps(lines[i])) expected.push_back(i);
    ASSERT_GT(expected.size(), 100u);
    ASSERT_LT(expected.size(), lines.size() - 100u);
    auto scanners = pf::usable_block_scanners();
    ASSERT_FALSE(scanners.empty());
    for (size_t s = 0; s < scanners.size(); ++s) {
        pf::ScanTotals totals;
        std::vector<pf::LineRange> hits;
        scanners[s](prefilter, text.data(), text.size(), 0, 64 * 1024, totals, hits);
        std::vector<size_t> kept;
        for (auto& h : hits)
            kept.push_back(static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), h.begin) - starts.begin()) - 1);
        EXPECT_EQ(kept, expected) << "block scanner " << s << " of " << scanners.size();
        EXPECT_EQ(totals.newlines, lines.size());
    }
}

TEST(KernelLogScan, KeepsTheMostRecentLinesAboveTheCapButCountsEverything) {
    std::string text;
    for (int i = 0; i < 250; ++i)
        text += "[" + std::to_string(100 + i) + ".000000] NVRM: Xid (PCI:0000:00:07): 13, pid=" + std::to_string(i) +
                ", name=train, Graphics Exception\n";
    KernelLogScanOptions o;
    o.max_kept_lines = 100;
    o.max_kept_xids = 100;
    auto log = scan_ok(text, o);
    EXPECT_EQ(log.lines.size(), 100u);
    EXPECT_EQ(log.lines_over_cap, 150u);
    EXPECT_EQ(log.xids.size(), 100u);
    // The newest 100, oldest first, as the log wrote them.
    for (size_t i = 0; i < log.xids.size(); ++i) {
        EXPECT_EQ(log.xids[i].pid, static_cast<int>(150 + i));
        EXPECT_NE(log.lines[i].text.find("pid=" + std::to_string(150 + i) + ","), std::string::npos) << log.lines[i].text;
    }
    ASSERT_EQ(log.tallies.size(), 1u);
    EXPECT_EQ(log.tallies[0].count, 250u);
    EXPECT_DOUBLE_EQ(*log.tallies[0].first_monotonic_s, 100.0);
    EXPECT_DOUBLE_EQ(*log.tallies[0].last_monotonic_s, 349.0);
    EXPECT_EQ(log.tallies[0].processes, std::vector<std::string>{"train"});
}

TEST(KernelLogScan, ABootAfterTheCapWasReachedKeepsOnlyItsOwnLinesInOrder) {
    auto xid = [](int t, int pid) {
        return "[" + std::to_string(t) + ".000000] NVRM: Xid (PCI:0000:00:07): 13, pid=" + std::to_string(pid) +
               ", name=train, Graphics Exception\n";
    };
    std::string text;
    for (int i = 0; i < 130; ++i) text += xid(100 + i, i);
    text += "[0.000000] Linux version 6.8.0-45-generic (buildd@lcy02-amd64-115)\n";
    for (int i = 0; i < 70; ++i) text += xid(10 + i, 1000 + i);
    KernelLogScanOptions o;
    o.max_kept_lines = 50;
    o.max_kept_xids = 50;
    auto log = scan_ok(text, o);
    ASSERT_EQ(log.xids.size(), 50u);
    ASSERT_EQ(log.lines.size(), 50u);
    for (size_t i = 0; i < 50; ++i) {
        EXPECT_EQ(log.xids[i].pid, static_cast<int>(1020 + i));
        EXPECT_NE(log.lines[i].text.find("pid=" + std::to_string(1020 + i) + ","), std::string::npos) << log.lines[i].text;
    }
    EXPECT_EQ(log.lines_over_cap, 20u);
    EXPECT_EQ(log.boots_seen, 2u);
}

// ---- boots and windows ----------------------------------------------------------------------------

TEST(KernelLogWindow, OnlyTheLastBootByDefault) {
    std::string text =
        "[    0.000000] Linux version 6.8.0 (builder@host)\n"
        "[ 5000.000000] NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=a, GPU has fallen off the bus.\n"
        "[    0.000000] Linux version 6.8.0 (builder@host)\n"
        "[    0.550000] NVRM: loading NVIDIA UNIX Open Kernel Module\n"
        "[  100.000000] NVRM: Xid (PCI:0000:00:07): 13, pid=2, name=b, Graphics Exception\n";
    auto log = scan_ok(text);
    EXPECT_EQ(log.boots_seen, 2u);
    EXPECT_EQ(log.lines_dropped, 1u);
    ASSERT_EQ(log.xids.size(), 1u);
    EXPECT_EQ(log.xids[0].code, 13);
    EXPECT_EQ(log.window, "current boot");
}

TEST(KernelLogWindow, MonotonicClockGoingBackMarksANewBoot) {
    std::string text =
        "[ 7200.000000] NVRM: Xid (PCI:0000:00:06): 48, pid=1, name=a, DBE\n"
        "[ 7200.500000] NVRM: Xid (PCI:0000:00:06): 48, pid=1, name=a, DBE\n"
        "[   42.000000] NVRM: Xid (PCI:0000:00:06): 94, pid=3, name=c, Contained\n"
        "[   41.800000] pcieport 0000:00:01.0: AER: enabled\n";  // small reorderings are not a reboot
    auto log = scan_ok(text);
    EXPECT_EQ(log.boots_seen, 2u);
    ASSERT_EQ(log.xids.size(), 1u);
    EXPECT_EQ(log.xids[0].code, 94);
    EXPECT_EQ(log.lines.size(), 2u);
}

TEST(KernelLogWindow, JournalBootSeparator) {
    std::string text =
        "Nov 29 10:00:00 n kernel: NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=a, GPU has fallen off the bus.\n"
        "-- Boot 2f7c1b0e8a7d4c1e9b0a --\n"
        "Nov 30 06:28:08 n kernel: NVRM: loading NVIDIA UNIX Open Kernel Module\n";
    auto log = scan_ok(text);
    EXPECT_EQ(log.format, KernelLogFormat::journal_short);
    EXPECT_EQ(log.boots_seen, 2u);
    EXPECT_TRUE(log.xids.empty());
    EXPECT_EQ(log.lines.size(), 1u);
}

TEST(KernelLogWindow, SinceSecondsAfterBoot) {
    std::string text =
        "[   10.000000] NVRM: Xid (PCI:0000:00:06): 13, pid=1, name=a, x\n"
        "[ 3599.000000] NVRM: Xid (PCI:0000:00:06): 31, pid=1, name=a, x\n"
        "[ 3600.000000] NVRM: Xid (PCI:0000:00:06): 43, pid=1, name=a, x\n";
    KernelLogScanOptions o;
    o.since = "3600";
    auto log = scan_ok(text, o);
    ASSERT_EQ(log.xids.size(), 1u);
    EXPECT_EQ(log.xids[0].code, 43);
    EXPECT_EQ(log.lines_dropped, 2u);
    EXPECT_EQ(log.window, "since 3600");
}

TEST(KernelLogWindow, SinceWallTimeSpansBoots) {
    std::string text =
        "2026-11-29T23:00:00+0000 n kernel: NVRM: Xid (PCI:0000:00:06): 13, pid=1, name=a, x\n"
        "2026-11-30T05:00:00+0000 n kernel: NVRM: Xid (PCI:0000:00:06): 79, pid=1, name=a, GPU has fallen off the bus.\n"
        "-- Boot 2f7c1b0e8a7d4c1e9b0a --\n"
        "2026-11-30T06:28:08+0000 n kernel: NVRM: Xid (PCI:0000:00:07): 48, pid=2, name=b, DBE\n";
    KernelLogScanOptions o;
    o.since = "2026-11-30T00:00:00";
    auto log = scan_ok(text, o);
    ASSERT_EQ(log.xids.size(), 2u);  // both boots, from midnight on
    EXPECT_EQ(log.xids[0].code, 79);
    EXPECT_EQ(log.xids[1].code, 48);
    // dmesg -T times and an offset written in the window both count.
    std::string t2 =
        "[Mon Nov 30 06:28:08 2026] NVRM: Xid (PCI:0000:00:06): 13, pid=1, name=a, x\n"
        "[Mon Nov 30 08:00:00 2026] NVRM: Xid (PCI:0000:00:06): 31, pid=1, name=a, x\n";
    o.since = "2026-11-30T08:30:00+0100";  // 07:30 UTC
    auto log2 = scan_ok(t2, o);
    ASSERT_EQ(log2.xids.size(), 1u);
    EXPECT_EQ(log2.xids[0].code, 31);
}

TEST(KernelLogWindow, SinceParsing) {
    EXPECT_DOUBLE_EQ(*parse_since("12.5")->monotonic_s, 12.5);
    EXPECT_EQ(*parse_since("2026-11-30T06:28:08+0000")->wall_s, *parse_wall_time("Mon Nov 30 06:28:08 2026", 0));
    EXPECT_EQ(*parse_since("2026-11-30 06:28:08")->wall_s, *parse_wall_time("Nov 30 06:28:08", 2026));
    EXPECT_EQ(parse_since("2026-11-30")->year, 2026);
    EXPECT_FALSE(parse_since("yesterday"));
    EXPECT_FALSE(parse_since("-5"));
    // An unusable --since is a note, and the current boot is kept.
    KernelLogScanOptions o;
    o.since = "last tuesday";
    KernelLogScanner s(o);
    s.feed("[    1.0] NVRM: x\n");
    auto r = s.finish("<t>");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->lines.size(), 1u);
    ASSERT_EQ(s.notes().size(), 1u);
    EXPECT_NE(s.notes()[0].find("last tuesday"), std::string::npos);
}

// ---- Xid lines ------------------------------------------------------------------------------------

TEST(XidParse, CurrentFormWithPidAndName) {
    auto x = parse_xid(kXid79);
    ASSERT_TRUE(x);
    EXPECT_EQ(x->pci, "0000:00:06.0");
    EXPECT_EQ(x->code, 79);
    EXPECT_EQ(x->pid, 1234);
    EXPECT_EQ(x->process, "python3");
    EXPECT_EQ(x->text, kXid79);
}

TEST(XidParse, Variants) {
    auto unknown_pid = parse_xid("NVRM: Xid (PCI:0000:3b:00): 119, pid='<unknown>', name=<unknown>, Timeout after 6s "
                                 "of waiting for RPC response from GPU1 GSP!");
    ASSERT_TRUE(unknown_pid);
    EXPECT_EQ(unknown_pid->pci, "0000:3b:00.0");
    EXPECT_EQ(unknown_pid->code, 119);
    EXPECT_FALSE(unknown_pid->pid);
    EXPECT_EQ(unknown_pid->process, "");

    auto bare = parse_xid("NVRM: Xid (PCI:0000:C1:00): 79, GPU has fallen off the bus.");
    ASSERT_TRUE(bare);
    EXPECT_EQ(bare->pci, "0000:c1:00.0");
    EXPECT_EQ(bare->code, 79);
    EXPECT_FALSE(bare->pid);

    auto old = parse_xid("NVRM: Xid (0000:03:00): 13, 0003 00000000 0000a1c0 000001a0 00000000 00000000");
    ASSERT_TRUE(old);
    EXPECT_EQ(old->pci, "0000:03:00.0");
    EXPECT_EQ(old->code, 13);

    auto older = parse_xid("NVRM: Xid (PCI:0000:02:00): 62, 0cb7(2d50) 00000000 00000000");
    ASSERT_TRUE(older);
    EXPECT_EQ(older->code, 62);

    auto mig = parse_xid("NVRM: Xid (PCI:0000:c1:00 GPU-I:05): 94, pid=991, name=app, Contained: SM (0x1). RST: No");
    ASSERT_TRUE(mig);
    EXPECT_EQ(mig->pci, "0000:c1:00.0");
    EXPECT_EQ(mig->gpu_instance, 5);
    EXPECT_EQ(mig->code, 94);
    EXPECT_EQ(mig->pid, 991);

    auto nvc = parse_xid("NVRM: Xid (PCI:0000:c6:00): 79, pid=1101234, name=nvc:[driver], GPU has fallen off the bus.");
    ASSERT_TRUE(nvc);
    EXPECT_EQ(nvc->process, "nvc:[driver]");

    EXPECT_FALSE(parse_xid("NVRM: GPU at PCI:0000:00:06: GPU-992cb470-9027-88f4-48a9-a9a329d6978d"));
    EXPECT_FALSE(parse_xid("NVRM: Xid (PCI:0000:00:06): no code here"));
}

// ---- events ---------------------------------------------------------------------------------------

TEST(KernelLogEvents, AerIommuFallenOffAndSignatures) {
    auto aer = classify_events("nvidia 0000:21:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), "
                               "type=Transaction Layer, (Requester ID)");
    ASSERT_EQ(aer.size(), 1u);
    EXPECT_EQ(aer[0].kind, TallyKind::aer_nonfatal);
    EXPECT_EQ(aer[0].device, "0000:21:00.0");
    EXPECT_EQ(classify_events("pcieport 0000:00:01.0: PCIe Bus Error: severity=Corrected, type=Physical Layer")[0].kind,
              TallyKind::aer_corrected);
    EXPECT_EQ(classify_events("pcieport 0000:00:01.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Inaccessible")[0]
                  .kind,
              TallyKind::aer_fatal);

    auto dmar = classify_events("DMAR: [DMA Read NO_PASID] Request device [3b:00.0] fault addr 0x7f5e3000 "
                                "[fault reason 0x06] PTE Read access is not set");
    ASSERT_EQ(dmar.size(), 1u);
    EXPECT_EQ(dmar[0].kind, TallyKind::iommu_fault);
    EXPECT_EQ(dmar[0].device, "0000:3b:00.0");
    auto amd = classify_events("AMD-Vi: Event logged [IO_PAGE_FAULT device=c1:00.0 domain=0x000e address=0x1000 flags=0x0000]");
    ASSERT_EQ(amd.size(), 1u);
    EXPECT_EQ(amd[0].device, "0000:c1:00.0");
    auto amd_new = classify_events("nvidia 0000:41:00.0: AMD-Vi: Event logged [IO_PAGE_FAULT domain=0x000e address=0x0 flags=0x0020]");
    ASSERT_EQ(amd_new.size(), 1u);
    EXPECT_EQ(amd_new[0].device, "0000:41:00.0");
    EXPECT_TRUE(classify_events("AMD-Vi: Interrupt remapping enabled").empty());

    auto fell = classify_events("NVRM: The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:2330) installed in this system has "
                                "fallen off the bus and is not responding to commands.");
    ASSERT_EQ(fell.size(), 1u);
    EXPECT_EQ(fell[0].kind, TallyKind::fallen_off_bus);
    EXPECT_EQ(fell[0].device, "0000:3b:00.0");
    EXPECT_EQ(classify_events("NVRM: GPU 0000:00:06.0: GPU has fallen off the bus.")[0].device, "0000:00:06.0");
    EXPECT_TRUE(classify_events(kXid79).empty());  // the Xid is its own finding

    auto refused = classify_events("Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7");
    ASSERT_EQ(refused.size(), 1u);
    EXPECT_EQ(refused[0].kind, TallyKind::module_refused);
    EXPECT_EQ(classify_events("Loading of unsigned module is rejected")[0].kind, TallyKind::module_refused);
    auto unsigned_ok = classify_events("nvidia: module verification failed: signature and/or required key missing - "
                                       "tainting kernel");
    ASSERT_EQ(unsigned_ok.size(), 1u);
    EXPECT_EQ(unsigned_ok[0].kind, TallyKind::module_unsigned);
    EXPECT_EQ(unsigned_ok[0].module, "nvidia");
    EXPECT_TRUE(classify_events("Kernel is locked down from Kernel configuration; see man kernel_lockdown.7").empty());
}

TEST(KernelLogEvents, Topics) {
    EXPECT_EQ(classify_topic(kXid79), LogTopic::xid);
    EXPECT_EQ(classify_topic("NVRM: loading"), LogTopic::nvrm);
    EXPECT_EQ(classify_topic("amdgpu 0000:03:00.0: amdgpu: ring gfx timeout"), LogTopic::amdgpu);
    EXPECT_EQ(classify_topic("kfd kfd: amdgpu: added device"), LogTopic::kfd);
    EXPECT_EQ(classify_topic("pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0"), LogTopic::aer);
    EXPECT_EQ(classify_topic("DMAR: DRHD: handling fault status reg 2"), LogTopic::iommu);
    EXPECT_EQ(classify_topic("Lockdown: modprobe: unsigned module loading is restricted"), LogTopic::signature);
    EXPECT_EQ(classify_topic("LSM: initializing lsm=lockdown,capability"), LogTopic::lockdown);
    EXPECT_EQ(classify_topic("pci 0000:00:06.0: [10de:2335] type 00 class 0x030200 PCIe Endpoint"), LogTopic::pcie);
    EXPECT_EQ(classify_topic("aerial view"), std::nullopt);
    EXPECT_EQ(classify_topic("usb 1-1: new high-speed USB device"), std::nullopt);
}

// ---- the collector --------------------------------------------------------------------------------

TEST(KernelLogCollector, ReadsTheCapturesDmesgThroughRoot) {
    Root root(kH200);
    CollectOptions opts;
    KernelLog log;
    auto st = collect_kernel_log({root, opts}, log);
    EXPECT_EQ(st.state, CollectorState::ok) << st.message;
    EXPECT_EQ(log.source, "/_commands/dmesg.txt");
    EXPECT_EQ(log.lines_read, 371u);
}

TEST(KernelLogCollector, ReadsAFileNamedByTheUserFromTheRealPath) {
    auto dir = scratch("kernlog-file");
    write_file(dir / "kern.log", std::string("Nov 30 06:28:08 n kernel: [  12.0] ") + kXid79 + "\n");
    Root root(kH200);  // the file is outside the root and still read
    CollectOptions opts;
    opts.kernel_log_file = (dir / "kern.log").string();
    KernelLog log;
    auto st = collect_kernel_log({root, opts}, log);
    ASSERT_EQ(st.state, CollectorState::ok) << st.message;
    EXPECT_EQ(log.source, (dir / "kern.log").string());
    EXPECT_EQ(log.format, KernelLogFormat::syslog);
    ASSERT_EQ(log.xids.size(), 1u);

    write_file(dir / "notes.txt", "shopping list\nmilk\n");
    opts.kernel_log_file = (dir / "notes.txt").string();
    st = collect_kernel_log({root, opts}, log);
    // A file in no known format is still read line by line, and the status says the times are unknown.
    EXPECT_EQ(st.state, CollectorState::ok);
    EXPECT_EQ(log.lines_read, 2u);
    ASSERT_EQ(st.problems.size(), 1u);
    EXPECT_NE(st.problems[0].message.find("time left unknown"), std::string::npos);

    opts.kernel_log_file = (dir / "missing.log").string();
    st = collect_kernel_log({root, opts}, log);
    EXPECT_EQ(st.state, CollectorState::error);
    EXPECT_EQ(st.path, (dir / "missing.log").string());

    write_file(dir / "empty.log", "");
    opts.kernel_log_file = (dir / "empty.log").string();
    st = collect_kernel_log({root, opts}, log);
    // The user's own empty file was read: it holds nothing (a kernel's ring never reads empty; see FailClosed).
    EXPECT_EQ(st.state, CollectorState::ok);
    EXPECT_EQ(st.message, "the kernel log is empty");
    std::filesystem::remove_all(dir);
}

TEST(KernelLogCollector, CaptureWithoutDmesgHasNoData) {
    auto dir = scratch("kernlog-nodmesg");
    Root root(dir);
    CollectOptions opts;
    KernelLog log;
    auto st = collect_kernel_log({root, opts}, log);
    EXPECT_EQ(st.state, CollectorState::no_data);
    EXPECT_NE(st.message.find("dmesg.txt"), std::string::npos);
    std::filesystem::remove_all(dir);
}

// The scanner's many-word lookup says what a word-by-word search says, for words of any length and case.
TEST(KernelLogScanner, WordSetFindsWhatAWordByWordSearchFinds) {
    const std::vector<std::string> words = {"NVRM", "nvidia-peermem", "x", "Failed to initialize NVML", "kfd",
                                            "nvidia:", "CUDA", "cudaErrorNoDevice", "hsa_status_error", "ab"};
    kernel_log_lexing::WordSetCi set;
    for (auto& w : words) set.add(w);
    set.add("NVRM");  // a repeat is one word
    std::vector<std::string> with_repeats = words;
    with_repeats.push_back("nvrm");
    with_repeats.push_back("");
    const kernel_log_lexing::WordSetCi built_at_once(with_repeats);  // the scanner's way: one sort, not one add each
    std::mt19937 rng(7);
    const std::string alphabet = "abxNVRMnvrmkfdCUDA:-_ errolsi";
    for (int n = 0; n < 20000; ++n) {
        std::string line;
        for (size_t len = rng() % 40; line.size() < len;) line += alphabet[rng() % alphabet.size()];
        if (n % 7 == 0) line.insert(rng() % (line.size() + 1), words[rng() % words.size()]);
        bool expected = false;
        for (auto& w : words) expected = expected || to_lower(line).find(to_lower(w)) != std::string::npos;
        ASSERT_EQ(set.any_in(line), expected) << line;
        ASSERT_EQ(built_at_once.any_in(line), expected) << line;
    }
    EXPECT_FALSE(kernel_log_lexing::WordSetCi{}.any_in("anything"));
}

}  // namespace GPUDX_UNITY_ID
