#pragma once
// The GPU libraries' result codes as programs print them: CUDA's driver (CUresult) and runtime (cudaError_t),
// NVML (nvmlReturn_t), NCCL (ncclResult_t), HIP (hipError_t) and HSA (hsa_status_t). Each code has its name,
// number, the text the library's error-string function returns, the layer of the node it points at, a meaning
// and a next step: versioned data in data/error-codes/*.toml (its README cites the public headers and sources),
// compiled into the binary like the signature catalogue.
//
// A line is matched by a code's name ("CUDA_ERROR_SYSTEM_NOT_READY", "cudaErrorMemoryAllocation",
// "hipErrorNoBinaryForGpu"), by a CUDA code's text after what programs print before it ("CUDA error: out of
// memory", "Cuda failure 'invalid argument'"), and by a CUDA code's number where the line speaks of CUDA
// ("error 802", "(803 vs. 0)", "code=2(").
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "model/finding.hpp"

namespace gpudx {

struct CheckContext;  // rules/engine/check_context.hpp

struct ResultCode {
    std::string name;  // "CUDA_ERROR_SYSTEM_NOT_READY"
    long long number = 0;
    std::string text;  // the library's own string; empty where no public source confirmed it
    Layer layer = Layer::driver;
    // nullopt: a success or benign code (cudaSuccess, cudaErrorNotReady), never a finding.
    std::optional<Severity> severity;
    // The code says the program itself erred (an invalid argument, a bad handle), not the node: its finding is
    // a warning at most, so a pasted traceback of a program's bug does not fail a node.
    bool program_error = false;
    std::string meaning, next_step;
    std::vector<std::string> aliases;  // other spellings programs print
    int line = 0;                      // where it is declared, for errors and --list
};

struct ResultCodeTable {
    std::string table;    // "CUresult", "cudaError_t", "nvmlReturn_t", "ncclResult_t", "hipError_t", "hsa_status_t"
    std::string version;  // "2026.12.1"
    std::string origin;   // "built-in data/error-codes/cuda-driver.toml" or a site file
    std::vector<ResultCode> codes;
};

// Parses one table. Errors name "ORIGIN:LINE": a table gpudx does not know, a duplicate name or number, a layer
// or severity gpudx does not know, a key it does not know.
Result<ResultCodeTable> parse_result_code_table(std::string_view text, const std::string& origin);
// The six tables compiled into the binary (data/error-codes/).
const std::vector<ResultCodeTable>& builtin_result_code_tables();

// The finding id of a code: "cuda.CUDA_ERROR_SYSTEM_NOT_READY", "cudart.cudaErrorMemoryAllocation",
// "nvml.NVML_ERROR_DRIVER_NOT_LOADED", "nccl.ncclSystemError", "hip.hipErrorNoBinaryForGpu", "hsa.HSA_STATUS_...".
std::string result_code_id(const ResultCodeTable& table, const ResultCode& code);

struct ResultCodeMatch {
    const ResultCodeTable* table = nullptr;
    const ResultCode* code = nullptr;
    std::string how;  // "name", "text", "number"
};
// The codes one line names, at most one per code.
std::vector<ResultCodeMatch> match_result_codes(std::string_view line, const std::vector<ResultCodeTable>& tables);
// The words the kernel-log scanner keeps a line for, so that program output reaches the match.
std::vector<std::string> result_code_gate_words();

// One finding per code named in the kernel log's kept lines (with its count), skipping lines a signature
// already explained (`explained`, indexed like the log's lines; may be shorter), and marking the lines it explains.
void check_result_codes(const CheckContext& ctx, const std::vector<ResultCodeTable>& tables,
                        std::vector<bool>& explained, std::vector<Finding>& out);

}  // namespace gpudx
