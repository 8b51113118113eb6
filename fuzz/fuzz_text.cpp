// The text helpers every parser uses (core/text.hpp): UTF-8 repair, control-character stripping, numbers.
#include <cctype>

#include "core/text.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gpudx;
    auto in = fuzz::text(data, size);

    // Repaired text must be valid UTF-8 by JSON's rules (nlohmann refuses to write anything else), and
    // repairing twice changes nothing.
    std::string clean = sanitize_utf8(in);
    fuzz::require_json_writable(nlohmann::json(clean));
    FUZZ_REQUIRE(sanitize_utf8(clean) == clean);

    // Nothing a terminal acts on survives: no C0 control (newline included), no DEL, no C1 control.
    std::string shown = strip_control(in);
    for (size_t i = 0; i < shown.size(); ++i) {
        auto u = static_cast<unsigned char>(shown[i]);
        FUZZ_REQUIRE(u >= 0x20 && u != 0x7f);
        FUZZ_REQUIRE(!(u == 0xC2 && i + 1 < shown.size() && static_cast<unsigned char>(shown[i + 1]) <= 0x9F));
    }
    fuzz::require_json_writable(nlohmann::json(shown));

    // A whole report on its way out: the same, except newlines, and the colour sequences (ESC [ digits ; m)
    // when asked to keep them; no other ESC.
    for (bool colours : {false, true}) {
        std::string report = strip_terminal_controls(in, colours);
        for (size_t i = 0; i < report.size(); ++i) {
            auto u = static_cast<unsigned char>(report[i]);
            if (u == 0x1b) {
                FUZZ_REQUIRE(colours && i + 1 < report.size() && report[i + 1] == '[');
                size_t k = i + 2;
                auto in_sequence = [&](char c) { return std::isdigit(static_cast<unsigned char>(c)) || c == ';'; };
                while (k < report.size() && in_sequence(report[k])) ++k;
                FUZZ_REQUIRE(k < report.size() && report[k] == 'm');
                i = k;
                continue;
            }
            FUZZ_REQUIRE((u >= 0x20 || u == '\n') && u != 0x7f);
            FUZZ_REQUIRE(!(u == 0xC2 && i + 1 < report.size() && static_cast<unsigned char>(report[i + 1]) <= 0x9F));
        }
        FUZZ_REQUIRE(strip_terminal_controls(report, colours) == report);
    }

    (void)parse_uint(in);
    (void)parse_uint(in, 16);
    (void)parse_uint(in, 0);
    (void)parse_int(in);
    (void)parse_double(in);
    (void)split_ws(in);
    for (auto line : split_lines(in)) (void)trim(line);
    (void)parse_key_values(in);
    (void)parse_key_values(in, '=');
    return 0;
}
