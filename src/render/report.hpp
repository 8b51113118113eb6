#pragma once
// Renderers over one report model: the snapshot and its diagnosis.
#include <string>

#include "model/diagnosis.hpp"
#include "model/snapshot.hpp"

namespace gpudx {

struct RenderOptions {
    bool color = false;    // ANSI colour; only when writing to a terminal
    bool verbose = false;  // text: also info findings and collector timings
};

std::string render_diagnosis_text(const Snapshot& s, const Diagnosis& d, const RenderOptions& o);
std::string render_snapshot_text(const Snapshot& s);
// Each GPU's health in one or two lines (NVML, AER on its path, the nearest InfiniBand/RoCE adapters) and one line
// for the node's InfiniBand/RoCE ports; empty when the node has neither GPUs nor adapters. render/health_text.cpp.
std::string render_health_text(const Snapshot& s);

}  // namespace gpudx
