#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "actuators/actuators.h"

namespace gpuledger::actuators {

namespace {

class Slurm final : public Actuator {
 public:
  Slurm(CommandRunner run, SlurmOptions options) : run_(std::move(run)), options_(std::move(options)) {}

  Result<std::string> Apply(const objectives::Decision& d) override {
    const std::string& id = d.job.id;
    if (id.empty() || id.find_first_not_of("0123456789_.") != std::string::npos) {
      return InvalidArgument(fmt::format("job \"{}\": not a Slurm job id", id));
    }
    switch (d.action) {
      case InterventionAction::kNotify: return std::string("nothing to run: the alert sinks notify");
      case InterventionAction::kHold:
        GPULEDGER_RETURN_IF_ERROR(Run({options_.scontrol, "hold", id}));
        return std::string("held");
      case InterventionAction::kReprioritize:
        GPULEDGER_RETURN_IF_ERROR(
            Run({options_.scontrol, "update", "JobId=" + id, fmt::format("Priority={}", d.new_priority)}));
        return fmt::format("priority {}", d.new_priority);
      case InterventionAction::kStop: {
        GPULEDGER_RETURN_IF_ERROR(Run({options_.scancel, "--signal=TERM", id}));
        std::this_thread::sleep_for(std::chrono::milliseconds(options_.term_grace_ms));
        Status cancelled = Run({options_.scancel, id});
        // A job that ended on its SIGTERM is already gone: that is the stop we wanted.
        if (!cancelled.ok() && cancelled.message().find("already completing or completed") == std::string::npos &&
            cancelled.message().find("Invalid job id") == std::string::npos) {
          return cancelled;
        }
        return fmt::format("SIGTERM, then cancelled {} s later", options_.term_grace_ms / kMsPerSecond);
      }
      case InterventionAction::kRequeue:
        GPULEDGER_RETURN_IF_ERROR(Run({options_.scontrol, "requeue", id}));
        return std::string("requeued");
    }
    return Internal("unknown action");
  }

 private:
  Status Run(const std::vector<std::string>& argv) {
    auto out = run_(argv);
    if (!out.ok()) return out.status();
    return Status::Ok();
  }

  CommandRunner run_;
  SlurmOptions options_;
};

}  // namespace

std::unique_ptr<Actuator> SlurmActuator(CommandRunner run, SlurmOptions options) {
  return std::make_unique<Slurm>(std::move(run), std::move(options));
}

}  // namespace gpuledger::actuators
