// The kernel-log scanner (collect/kernel_log_parse.hpp) over every format, fed in arbitrary chunks: raw
// /dev/kmsg records, dmesg, dmesg -T, journalctl -k short and short-iso, syslog kern.log.
// Controls come from the end of the input (FuzzedDataProvider), so a plain log file is a good seed. The kernel-log
// rules find the same in the log whether its lines are kept (diagnose) or streamed through them (explain).
#include <fuzzer/FuzzedDataProvider.h>

#include "collect/collectors.hpp"
#include "collect/kernel_log_parse.hpp"
#include "fuzz.hpp"
#include "model/layer_json.hpp"
#include "rules/engine/check_context.hpp"
#include "rules/reference/signatures.hpp"

namespace {

nlohmann::json scan(std::string_view log, const gpudx::KernelLogScanOptions& o, std::optional<gpudx::KernelLogFormat> format,
                    size_t chunk) {
    gpudx::KernelLogScanner scanner(o);
    if (format) scanner.set_format(*format);
    for (size_t i = 0; i < log.size(); i += chunk) scanner.feed(log.substr(i, chunk));
    auto r = scanner.finish("fuzz");
    if (!r) return nlohmann::json{{"error", r.error().message}};
    nlohmann::json j;
    gpudx::layer_to_json(j, *r);
    return j;
}

// The kernel-log family's findings on the log read whole, every boot of it: its lines kept and fed to the rules after
// the scan (diagnose), or streamed through them as they are read and none kept (explain).
nlohmann::json findings(std::string_view log, std::optional<gpudx::KernelLogFormat> format, bool streamed) {
    using namespace gpudx;
    DiagnoseOptions d;
    KernelLogLineRules rules(d, true);
    KernelLogScanOptions o;
    o.extra_words = kernel_log_text_words(builtin_signature_catalogue());
    o.every_boot = true;
    o.max_kept_lines = o.max_kept_xids = 0;  // every one
    if (streamed) o.line_sink = [&](KernelLogLine&& l) { rules.add(std::move(l)); };
    KernelLogScanner scanner(o);
    if (format) scanner.set_format(*format);
    scanner.feed(log);
    auto r = scanner.finish("fuzz");
    if (!r) return nlohmann::json{{"error", r.error().message}};
    Snapshot s;
    s.kernel_log = std::move(*r);
    if (streamed) {
        for (auto& x : s.kernel_log.xids) rules.add_borrowed_xid(x);
        rules.finish();
    }
    s.collectors.push_back(status_ok(Collector::kernel_log));
    CheckContext ctx{s, d};
    std::vector<Finding> out;
    std::vector<std::string> unrecognised;
    check_kernel_log_text(ctx, out, &unrecognised, streamed ? &rules : nullptr);
    nlohmann::json j{{"unrecognised", unrecognised}, {"findings", nlohmann::json::array()}};
    for (auto& f : out) j["findings"].push_back(finding_to_json(f));
    return j;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    FuzzedDataProvider fdp(data, size);
    unsigned format_pick = fdp.ConsumeIntegralInRange<unsigned>(0, 7);
    size_t chunk = fdp.ConsumeIntegralInRange<size_t>(1, 512);
    KernelLogScanOptions o;
    o.max_line_bytes = fdp.ConsumeIntegralInRange<size_t>(16, 300);
    o.max_kept_lines = fdp.ConsumeIntegralInRange<size_t>(0, 6);
    o.max_kept_xids = fdp.ConsumeIntegralInRange<size_t>(0, 6);
    switch (fdp.ConsumeIntegralInRange<int>(0, 3)) {
        case 1: o.since = "12.5"; break;
        case 2: o.since = "2026-11-30 06:28:08"; break;
        case 3: o.since = "Nov 30 06:28:08"; break;
        default: break;
    }
    std::string log = fdp.ConsumeRemainingBytesAsString();

    std::optional<KernelLogFormat> format;
    if (format_pick <= static_cast<unsigned>(KernelLogFormat::syslog)) format = static_cast<KernelLogFormat>(format_pick);

    // The result must not depend on how the bytes arrive (the collector reads /dev/kmsg record by record
    // and files in blocks), and must be writable as JSON.
    auto whole = scan(log, o, format, log.size() + 1);
    auto pieces = scan(log, o, format, chunk);
    fuzz::require_printable(whole);
    if (whole != pieces) {
        std::fprintf(stderr, "whole:  %s\npieces: %s\n", whole.dump().c_str(), pieces.dump().c_str());
        FUZZ_REQUIRE(whole == pieces);
    }
    // explain reads what diagnose reads: the same findings and unrecognised lines, streamed or kept.
    auto kept = findings(log, format, false);
    auto streamed = findings(log, format, true);
    if (kept != streamed) {
        std::fprintf(stderr, "kept:     %s\nstreamed: %s\n", kept.dump().c_str(), streamed.dump().c_str());
        FUZZ_REQUIRE(kept == streamed);
    }
    return 0;
}
