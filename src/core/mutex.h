// A mutex and its scoped lock that clang's thread-safety analysis understands
// (-Wthread-safety, on in every clang build: the fuzz targets' build in CI checks the
// libraries it compiles). Annotate state with GUARDED_BY(mu_) and functions with
// REQUIRES(mu_) / EXCLUDES(mu_); with other compilers the annotations are empty.
//
// std::mutex carries no capability attribute in libstdc++, so it cannot be named in a
// GUARDED_BY that clang checks: use Mutex where the analysis should see the lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define GPULEDGER_TSA(x) __attribute__((x))
#else
#define GPULEDGER_TSA(x)
#endif

#define CAPABILITY(x) GPULEDGER_TSA(capability(x))
#define SCOPED_CAPABILITY GPULEDGER_TSA(scoped_lockable)
#define GUARDED_BY(x) GPULEDGER_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) GPULEDGER_TSA(pt_guarded_by(x))
#define REQUIRES(...) GPULEDGER_TSA(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) GPULEDGER_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) GPULEDGER_TSA(release_capability(__VA_ARGS__))
#define EXCLUDES(...) GPULEDGER_TSA(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS GPULEDGER_TSA(no_thread_safety_analysis)

namespace gpuledger {

class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// A condition variable for Mutex. Wait releases `mu` while it sleeps and holds it again
// when it returns, as std::condition_variable does.
class CondVar {
 public:
  template <class Pred>
  void Wait(Mutex& mu, Pred pred) REQUIRES(mu) {
    cv_.wait(mu, pred);
  }
  // Returns pred() at the end: false when the time ran out first.
  template <class Rep, class Period, class Pred>
  bool WaitFor(Mutex& mu, std::chrono::duration<Rep, Period> d, Pred pred) REQUIRES(mu) {
    return cv_.wait_for(mu, d, pred);
  }
  // Returns pred() at the end: false when `deadline` passed first.
  template <class Clock, class Duration, class Pred>
  bool WaitUntil(Mutex& mu, std::chrono::time_point<Clock, Duration> deadline, Pred pred) REQUIRES(mu) {
    return cv_.wait_until(mu, deadline, pred);
  }
  void NotifyAll() { cv_.notify_all(); }
  void NotifyOne() { cv_.notify_one(); }

 private:
  std::condition_variable_any cv_;
};

}  // namespace gpuledger
