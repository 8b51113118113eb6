#pragma once
// The Prometheus text exposition's pieces (https://prometheus.io/docs/instrumenting/exposition_formats/), shared by
// every renderer of it (render/formats.cpp for a diagnosis, render/agent_metrics.cpp for the agent), so each
// family's header and each label value is written one way.
#include <string>
#include <string_view>

namespace gpudx {

// "# HELP name help\n# TYPE name type\n": a family's header, before its samples.
void prometheus_family(std::string& out, std::string_view name, std::string_view type, std::string_view help);
// A label value: valid UTF-8, with backslash, double quote and newline escaped.
std::string escape_prometheus_label(std::string_view value);

}  // namespace gpudx
