#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "actuators/actuators.h"

namespace gpuledger::actuators {

namespace {

class Slurm final : public Actuator {
 public:
  Slurm(CommandRunner run, SlurmOptions options) : run_(std::move(run)), options_(std::move(options)) {}
  // The cancels still waiting out their grace run now: no job is left with only its SIGTERM.
  ~Slurm() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (canceller_.joinable()) canceller_.join();
  }

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
        if (options_.term_grace_ms <= 0) {
          GPULEDGER_RETURN_IF_ERROR(Cancel(id));
          return std::string("SIGTERM, then cancelled");
        }
        ScheduleCancel(id);
        int64_t grace = options_.term_grace_ms;
        return grace % kMsPerSecond == 0 ? fmt::format("SIGTERM; scancel follows in {} s", grace / kMsPerSecond)
                                         : fmt::format("SIGTERM; scancel follows in {} ms", grace);
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

  // `scancel ID`; a job that ended on its SIGTERM is already gone: that is the stop wanted.
  Status Cancel(const std::string& id) {
    Status cancelled = Run({options_.scancel, id});
    if (!cancelled.ok() && cancelled.message().find("already completing or completed") == std::string::npos &&
        cancelled.message().find("Invalid job id") == std::string::npos) {
      return cancelled;
    }
    return Status::Ok();
  }

  // The cancel after the grace runs on the actuator's own thread, so that the caller (the
  // objectives loop) goes on evaluating meanwhile; the thread starts with the first stop.
  void ScheduleCancel(const std::string& id) {
    std::lock_guard lock(mu_);
    due_.emplace(Steady::now() + std::chrono::milliseconds(options_.term_grace_ms), id);
    if (!canceller_.joinable()) canceller_ = std::thread([this] { RunCancels(); });
    cv_.notify_all();
  }

  void RunCancels() {
    std::unique_lock lock(mu_);
    while (true) {
      if (due_.empty()) {
        if (stop_) return;
        cv_.wait(lock, [&] { return stop_ || !due_.empty(); });
        continue;
      }
      auto next = due_.begin();
      if (!stop_ && cv_.wait_until(lock, next->first, [&] { return stop_ || due_.begin() != next; })) continue;
      if (!stop_ && Steady::now() < next->first) continue;
      std::string id = next->second;
      due_.erase(next);
      lock.unlock();
      Status st = Cancel(id);
      if (st.ok()) {
        spdlog::info("event=slurm_cancel job={:?} result=\"cancelled after its SIGTERM grace\"", id);
      } else {
        spdlog::error("event=slurm_cancel job={:?} error={:?}", id, st.message());
      }
      lock.lock();
    }
  }

  using Steady = std::chrono::steady_clock;
  CommandRunner run_;
  SlurmOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Steady::time_point, std::string> due_;  // GUARDED_BY(mu_): cancels by when they are due
  bool stop_ = false;                                    // GUARDED_BY(mu_)
  std::thread canceller_;
};

}  // namespace

std::unique_ptr<Actuator> SlurmActuator(CommandRunner run, SlurmOptions options) {
  return std::make_unique<Slurm>(std::move(run), std::move(options));
}

}  // namespace gpuledger::actuators
