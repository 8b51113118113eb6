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

}  // namespace gpudx
