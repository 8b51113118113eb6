// Where pasted text was run decides the first question of a "no GPU" finding (rules/reference/job_context.hpp).
#include <gtest/gtest.h>

#include "model/kernel_log.hpp"
#include "rules/reference/job_context.hpp"

using namespace gpudx;

namespace {

std::vector<KernelLogLine> lines(std::initializer_list<const char*> texts) {
    std::vector<KernelLogLine> out;
    for (auto t : texts) out.push_back({std::nullopt, "", t, LogTopic::catalogue});
    return out;
}

// As explain does: the first command's line, if the text has one (the one the rest of the text came from).
void add_steps(const std::vector<KernelLogLine>& text, std::vector<Finding>& fs) {
    for (auto& l : text)
        if (is_job_context_line(l.text)) return add_job_context_steps(l.text, fs);
}

std::vector<Finding> no_device_and_other() {
    Finding a;
    a.id = "driver.cuda_no_device";
    a.next_step = "Check CUDA_VISIBLE_DEVICES.";
    Finding b;
    b.id = "libs.nvml_version_mismatch";
    b.next_step = "Reboot after a driver upgrade.";
    return {a, b};
}

}  // namespace

TEST(JobContext, SrunPutsTheGresQuestionFirst) {
    auto fs = no_device_and_other();
    add_steps(lines({"user@login1:~$ srun -N1 --pty nvidia-smi", "No devices were found"}), fs);
    EXPECT_TRUE(fs[0].next_step.starts_with("This ran under Slurm (`user@login1:~$ srun -N1 --pty nvidia-smi`)"));
    EXPECT_NE(fs[0].next_step.find("--gres=gpu:N"), std::string::npos);
    EXPECT_TRUE(fs[0].next_step.ends_with("Then: Check CUDA_VISIBLE_DEVICES."));
    EXPECT_EQ(fs[1].next_step, "Reboot after a driver upgrade.");  // not a "no GPU" finding
}

TEST(JobContext, ContainerAndPodContexts) {
    auto fs = no_device_and_other();
    add_steps(lines({"$ docker run --rm nvidia/cuda:12.4.0-base nvidia-smi"}), fs);
    EXPECT_TRUE(fs[0].next_step.starts_with("This ran in a container"));
    fs = no_device_and_other();
    add_steps(lines({"# kubectl logs pod/train-0"}), fs);
    EXPECT_TRUE(fs[0].next_step.starts_with("This ran in a Kubernetes pod"));
}

TEST(JobContext, NoCommandNoQuestion) {
    auto fs = no_device_and_other();
    // A host named after the command, or the word inside a message, is not a command line.
    add_steps(lines({"srun-node01 kernel: nvidia: loaded", "error: srunning out", "sbatchx job"}), fs);
    EXPECT_EQ(fs[0].next_step, "Check CUDA_VISIBLE_DEVICES.");
    EXPECT_TRUE(is_job_context_line("$ sbatch train.sh"));
    EXPECT_FALSE(is_job_context_line("srun-node01: kernel"));
}
