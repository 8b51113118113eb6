#pragma once
// What the HTML pages share (render/html.hpp): the page's frame with its style sheet and security policy, and the
// small pieces the sections are built of. Internal to render/.
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "render/html.hpp"

namespace gpudx::html {

inline std::string esc(std::string_view s) { return html_escape(s); }

// <!doctype html> ... <body>: title escaped here; refresh_s > 0 reloads the page (the agent's) without a script.
std::string page_begin(std::string_view title, int refresh_s = 0);
std::string page_end();

// A state's CSS class and colour, shared by the tables and the drawings.
inline constexpr const char* kRed = "#c62828";
inline constexpr const char* kAmber = "#b26a00";
inline constexpr const char* kGreen = "#2e7d32";
inline constexpr const char* kGrey = "#757575";
inline constexpr const char* kBlue = "#1565c0";

// "2026-12-02 00:14:03Z" of Unix milliseconds.
std::string utc_time(int64_t ms);
// "GPU-6914f93a" of a UUID, "?" when empty.
std::string short_id(std::string_view uuid);
// A number for a page: "397", "52.4", "0.18".
std::string number(double v);

// The sections of the node page, each a function of render/html_*.cpp.
std::string topology_section(const NodePage& page);
// `reference`: an earlier run whose figures each bar is drawn against; may be null.
std::string accept_section(const AcceptReport& r, std::string_view source, const AcceptReport* reference,
                           std::string_view reference_source);
std::string events_section(const NodePage& page);

}  // namespace gpudx::html
