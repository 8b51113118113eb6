#pragma once
// Small pure helpers for parsing kernel and driver text. No I/O here.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpudx {

std::string_view trim(std::string_view s);
std::vector<std::string_view> split(std::string_view s, char sep);
std::vector<std::string_view> split_ws(std::string_view s);  // runs of blanks, empty fields dropped
std::vector<std::string_view> split_lines(std::string_view s);  // without the trailing empty line
std::string to_lower(std::string_view s);

// Unsigned integer in the given base; base 0 accepts a 0x prefix for hex. Whole string must parse.
std::optional<uint64_t> parse_uint(std::string_view s, int base = 10);
std::optional<int64_t> parse_int(std::string_view s, int base = 10);
std::optional<double> parse_double(std::string_view s);

// "Key:  value" lines (procfs information files): key and value trimmed; lines without ':' skipped.
std::vector<std::pair<std::string, std::string>> parse_key_values(std::string_view text, char sep = ':');

// Invalid UTF-8 sequences replaced with U+FFFD so the text can go into JSON.
std::string sanitize_utf8(std::string_view s);
// For one value printed to a terminal (a process name, a path, a message): every C0 and C1 control
// character, DEL, newline and tab included, replaced by '?', invalid UTF-8 by U+FFFD. A process named
// "x\n\033[2J" can then neither move the cursor nor forge a line of the report.
std::string strip_control(std::string_view s);
// For a whole text report on its way out (app's write_output): as strip_control, except that the newlines the
// renderer wrote stay and, with keep_colours, so do colour sequences (SGR: ESC '[', digits and ';', 'm'), the only
// escape gpudx's renderers write, and only when writing to a terminal. The one place every text renderer's output
// passes, so a value that came from a log line or an input file cannot set the terminal's title (OSC), ring it
// (BEL), clear it or overwrite a line (CR) even where a renderer forgot to strip it.
std::string strip_terminal_controls(std::string_view text, bool keep_colours);

// The items with `sep` between them.
std::string join_strings(const std::vector<std::string>& items, std::string_view sep = ", ");

// Bytes as GiB for people: "141.0 GiB" (digits after the point as given).
std::string format_gib(uint64_t bytes, int decimals = 1);

// Shortens to at most n bytes on a UTF-8 boundary, marking the cut with "…" when it had to cut.
std::string fit(std::string_view text, size_t n);

}  // namespace gpudx
