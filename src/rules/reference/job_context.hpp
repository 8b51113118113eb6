#pragma once
// Where pasted text was run: under Slurm (an srun, sbatch or salloc line), in a container (docker or podman run) or
// in a Kubernetes pod (kubectl). A program that finds no GPU there most often was not given one, and the next step
// starts with that question rather than with the node's driver.
#include <string>
#include <string_view>
#include <vector>

#include "model/finding.hpp"

namespace gpudx {

struct SignatureCatalogue;

// The words whose lines `gpudx explain` keeps to see the context (added to the scanner's words).
std::vector<std::string> job_context_words();
// The words `gpudx explain` asks the kernel-log scanner for: the catalogue's, then the context's. One list, so the
// build places its prefilter once (tools/compile_catalogues.cpp) and explain finds it compiled in.
std::vector<std::string> explain_scan_words(const SignatureCatalogue& catalogue);
// Whether a line is a command that sets the context (such lines are context, not unrecognised text).
bool is_job_context_line(std::string_view line);
// Puts the context's question first in the next step of every "no GPU visible" finding, citing the line (a line that
// sets no context changes nothing).
void add_job_context_steps(std::string_view context_line, std::vector<Finding>& findings);

}  // namespace gpudx
