// Errors as values: Status and Result<T>, used on every path fed by users, files,
// the network or NVML. Exceptions are caught where a third-party library throws them
// and converted into a Status there.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace gpuledger {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the input is malformed; the message names what and where
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kOutOfRange,
  kUnavailable,  // a dependency (database, server, driver) cannot be reached now
  kPermissionDenied,
  kUnauthenticated,
  kResourceExhausted,
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid argument: batch b-17: samples[3].sm_active: must be within 0..1"
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context` and ": ".
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Result<T> holds either a value or a non-OK Status. Accessing the value of an error
// result is a programming error (asserted), never a way to handle input.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result built from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace gpuledger

#define GPULEDGER_CONCAT_INNER(a, b) a##b
#define GPULEDGER_CONCAT(a, b) GPULEDGER_CONCAT_INNER(a, b)

// Returns early from the enclosing function with the status of `expr` if it failed.
// The local's name carries the line, so that nested uses (a lambda inside a lambda)
// do not shadow each other.
#define GPULEDGER_RETURN_IF_ERROR(expr)                                    \
  do {                                                                     \
    ::gpuledger::Status GPULEDGER_CONCAT(_st_, __LINE__) = (expr);         \
    if (!GPULEDGER_CONCAT(_st_, __LINE__).ok())                            \
      return GPULEDGER_CONCAT(_st_, __LINE__);                             \
  } while (false)
// GPULEDGER_ASSIGN_OR_RETURN(auto x, Foo()); declares x from Foo()'s value, or returns
// Foo()'s status.
#define GPULEDGER_ASSIGN_OR_RETURN(lhs, expr)                                  \
  auto GPULEDGER_CONCAT(_res_, __LINE__) = (expr);                             \
  if (!GPULEDGER_CONCAT(_res_, __LINE__).ok())                                 \
    return GPULEDGER_CONCAT(_res_, __LINE__).status();                         \
  lhs = std::move(GPULEDGER_CONCAT(_res_, __LINE__)).value()
