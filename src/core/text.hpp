#pragma once
// Small pure helpers for parsing kernel and driver text. No I/O here.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace gpudx {

inline bool ascii_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool ascii_alnum(char c) { return ascii_alpha(c) || (c >= '0' && c <= '9'); }
inline char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

// ASCII case-insensitive search; `needle` is lower case. The kernel-log parser and the rules ask a dozen words of
// every line a log keeps, so this is on a hot path: 16 starts at a time (SSE2, in every x86-64) are tested on the
// needle's first two bytes, letters folded with |0x20 (only 'A' and 'a' fold onto 'a'), and only those starts
// compared whole.
inline size_t find_ci(std::string_view hay, std::string_view needle, size_t from = 0) {
    if (needle.empty()) return from <= hay.size() ? from : std::string_view::npos;
    if (hay.size() < needle.size() || from > hay.size() - needle.size()) return std::string_view::npos;
    const size_t last = hay.size() - needle.size();  // the last start that fits
    auto rest_equal = [&](size_t at) {
        for (size_t k = 1; k < needle.size(); ++k)
            if (ascii_lower(hay[at + k]) != needle[k]) return false;
        return true;
    };
    size_t i = from;
#ifdef __SSE2__
    if (needle.size() >= 2) {
        auto fold = [](char c) { return static_cast<char>(ascii_alpha(c) ? 0x20 : 0); };
        const __m128i c0 = _mm_set1_epi8(needle[0]), c1 = _mm_set1_epi8(needle[1]);
        const __m128i f0 = _mm_set1_epi8(fold(needle[0])), f1 = _mm_set1_epi8(fold(needle[1]));
        for (; i + 17 <= hay.size(); i += 16) {
            const char* at = hay.data() + i;
            __m128i a = _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)), f0);
            __m128i b = _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at + 1)), f1);
            auto m = static_cast<unsigned>(_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, c0), _mm_cmpeq_epi8(b, c1))));
            while (m) {
                size_t start = i + static_cast<size_t>(__builtin_ctz(m));
                m &= m - 1;
                if (start > last) return std::string_view::npos;
                if (rest_equal(start)) return start;
            }
        }
    }
#endif
    for (; i <= last; ++i)
        if (ascii_lower(hay[i]) == needle[0] && rest_equal(i)) return i;
    return std::string_view::npos;
}

inline bool contains_ci(std::string_view hay, std::string_view needle) {
    return find_ci(hay, needle) != std::string_view::npos;
}

// A whole word: no letter or digit on either side.
inline bool contains_word_ci(std::string_view hay, std::string_view needle) {
    for (size_t at = find_ci(hay, needle); at != std::string_view::npos; at = find_ci(hay, needle, at + 1)) {
        bool left = at == 0 || !ascii_alnum(hay[at - 1]);
        size_t end = at + needle.size();
        bool right = end >= hay.size() || !ascii_alnum(hay[end]);
        if (left && right) return true;
    }
    return false;
}

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
