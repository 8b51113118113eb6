#pragma once
// The kernel-log parser's lexing, shared by its sections (line formats, events, --since, the scanner): ASCII
// character classes and case folding (kernel messages are bytes, and the locale must not change results),
// digit runs, and the tokens of the logs' time prefixes (clock, month, weekday, ISO date). Internal to
// collect/kernel_log/; collect/kernel_log_parse.hpp is the parser's interface.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string_view>
#include <utility>
#include <vector>
#include <string>

#include "core/key_set_16.hpp"
#include "core/text.hpp"


namespace gpudx::kernel_log_lexing {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_alnum(char c) { return is_digit(c) || is_alpha(c); }
inline bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
inline char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

// Many words (the signature catalogue's gates, some hundreds) looked for in one line at once: each word filed under
// its first two bytes, so a line costs one pass over its positions, whatever the number of words. Any case.
class WordSetCi {
public:
    WordSetCi() = default;
    // Many words at once, each folded and filed with one sort of (first two bytes, word) pairs; a repeat filed next
    // to its twin is dropped (one left over costs a comparison, never a different answer). add() one word at a time
    // looks every earlier word over (quadratic), and a scanner is built from some hundreds at every start.
    explicit WordSetCi(const std::vector<std::string>& words) {
        words_.reserve(words.size());
        by_pair_.reserve(words.size());
        for (const auto& word : words) {
            if (word.empty()) continue;
            std::string& w = words_.emplace_back(word);
            for (char& c : w) c = lower(c);
            auto index = static_cast<uint32_t>(words_.size() - 1);
            if (w.size() == 1) {
                if (std::none_of(single_.begin(), single_.end(), [&](uint32_t i) { return words_[i] == w; }))
                    single_.push_back(index);
                continue;
            }
            uint16_t key = pair_key(w[0], w[1]);
            present_.insert(key);
            by_pair_.emplace_back(key, index);
        }
        std::sort(by_pair_.begin(), by_pair_.end());
        auto repeat = [&](const auto& a, const auto& b) {
            return a.first == b.first && words_[a.second] == words_[b.second];
        };
        by_pair_.erase(std::unique(by_pair_.begin(), by_pair_.end(), repeat), by_pair_.end());
    }
    void add(std::string_view word) {
        std::string w;
        for (char c : word) w += lower(c);
        if (w.empty() || std::find(words_.begin(), words_.end(), w) != words_.end()) return;
        words_.push_back(std::move(w));
        const std::string& added = words_.back();
        auto index = static_cast<uint32_t>(words_.size() - 1);
        if (added.size() == 1) {
            single_.push_back(index);
            return;
        }
        uint16_t key = pair_key(added[0], added[1]);
        present_.insert(key);
        by_pair_.insert(std::upper_bound(by_pair_.begin(), by_pair_.end(), std::pair{key, index}), {key, index});
    }
    bool empty() const { return words_.empty(); }
    bool any_in(std::string_view hay) const {
        for (uint32_t i : single_)
            if (find_ci(hay, words_[i]) != std::string_view::npos) return true;
        for (size_t at = 0; at + 1 < hay.size(); ++at) {
            uint16_t key = pair_key(hay[at], hay[at + 1]);
            if (!present_.contains(key)) continue;
            auto first = std::lower_bound(by_pair_.begin(), by_pair_.end(), std::pair<uint16_t, uint32_t>{key, 0});
            for (auto it = first; it != by_pair_.end() && it->first == key; ++it) {
                const std::string& w = words_[it->second];
                if (w.size() > hay.size() - at) continue;
                size_t k = 2;
                while (k < w.size() && lower(hay[at + k]) == w[k]) ++k;
                if (k == w.size()) return true;
            }
        }
        return false;
    }

private:
    static uint16_t pair_key(char a, char b) {
        return static_cast<uint16_t>(static_cast<uint8_t>(lower(a)) << 8 | static_cast<uint8_t>(lower(b)));
    }
    std::vector<std::string> words_;
    std::vector<uint32_t> single_;                       // one-byte words, looked for directly
    std::vector<std::pair<uint16_t, uint32_t>> by_pair_;  // (first two bytes, word), sorted
    KeySet16 present_;                                   // which first-two-bytes any word has
};

inline bool starts_with_ci(std::string_view s, std::string_view lower_prefix) {
    if (s.size() < lower_prefix.size()) return false;
    for (size_t i = 0; i < lower_prefix.size(); ++i)
        if (lower(s[i]) != lower_prefix[i]) return false;
    return true;
}

// Reads digits at s[i...]; returns the count read (0 when none).
inline size_t read_digits(std::string_view s, size_t i, uint64_t& value, size_t max_digits = 19) {
    size_t n = 0;
    value = 0;
    while (i + n < s.size() && n < max_digits && is_digit(s[i + n])) value = value * 10 + (s[i + n++] - '0');
    return n;
}

inline constexpr std::array<std::string_view, 12> kMonths = {"jan", "feb", "mar", "apr", "may", "jun",
                                                             "jul", "aug", "sep", "oct", "nov", "dec"};
inline constexpr std::array<std::string_view, 7> kWeekdays = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};

inline int month_index(std::string_view s) {  // 1..12, 0 when not a month abbreviation
    if (s.size() != 3) return 0;
    for (size_t i = 0; i < kMonths.size(); ++i)
        if (starts_with_ci(s, kMonths[i])) return static_cast<int>(i) + 1;
    return 0;
}

inline bool is_weekday(std::string_view s) {
    if (s.size() != 3) return false;
    return std::any_of(kWeekdays.begin(), kWeekdays.end(), [&](auto w) { return starts_with_ci(s, w); });
}

// "HH:MM:SS" optionally followed by ".frac"; returns the length consumed, 0 when not a time.
inline size_t read_clock(std::string_view s, size_t i, int& h, int& m, int& sec) {
    if (i + 8 > s.size()) return 0;
    if (!is_digit(s[i]) || !is_digit(s[i + 1]) || s[i + 2] != ':' || !is_digit(s[i + 3]) || !is_digit(s[i + 4]) ||
        s[i + 5] != ':' || !is_digit(s[i + 6]) || !is_digit(s[i + 7]))
        return 0;
    h = (s[i] - '0') * 10 + (s[i + 1] - '0');
    m = (s[i + 3] - '0') * 10 + (s[i + 4] - '0');
    sec = (s[i + 6] - '0') * 10 + (s[i + 7] - '0');
    if (h > 23 || m > 59 || sec > 60) return 0;
    size_t n = 8;
    if (i + n < s.size() && (s[i + n] == '.' || s[i + n] == ',')) {
        size_t k = n + 1;
        while (i + k < s.size() && is_digit(s[i + k])) ++k;
        if (k > n + 1) n = k;
    }
    return n;
}

// "2026-11-30T06:28:08+0000" (and ".123456", "Z", "+00:00"): a journal's short-iso prefix and a --since time.
// Returns the length consumed, 0 when not such a time.
inline size_t read_iso_time(std::string_view s, size_t i) {
    if (i + 19 > s.size()) return 0;
    auto d = [&](size_t k) { return is_digit(s[i + k]); };
    if (!(d(0) && d(1) && d(2) && d(3) && s[i + 4] == '-' && d(5) && d(6) && s[i + 7] == '-' && d(8) && d(9) &&
          (s[i + 10] == 'T' || s[i + 10] == ' ')))
        return 0;
    int h, m, sec;
    size_t n = read_clock(s, i + 11, h, m, sec);
    if (n == 0) return 0;
    size_t k = i + 11 + n;
    if (k < s.size() && s[k] == 'Z') return k + 1 - i;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) {
        size_t z = k + 1;
        size_t digits = 0;
        while (z < s.size() && (is_digit(s[z]) || s[z] == ':') && z - k <= 6) {
            if (is_digit(s[z])) ++digits;
            ++z;
        }
        if (digits == 4 || digits == 2) return z - i;
    }
    return k - i;
}

// Days since 1970-01-01 for a civil date (Howard Hinnant's algorithm).
inline int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

inline int current_utc_year() {
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    gmtime_r(&t, &tm);
    return tm.tm_year + 1900;
}

}  // namespace gpudx::kernel_log_lexing
