#include "agent/spool.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace gpuledger::agent {
namespace {

constexpr std::string_view kSuffix = ".batch";

Status WriteFileDurably(const std::string& path, std::string_view data) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable(fmt::format("{}: {}", tmp, std::strerror(errno)));
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Unavailable(fmt::format("{}: {}", tmp, std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Unavailable(fmt::format("{}: fsync: {}", tmp, std::strerror(err)));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Unavailable(fmt::format("{}: rename: {}", path, std::strerror(err)));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Spool>> Spool::Open(std::string dir, uint64_t max_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Unavailable(fmt::format("spool {}: cannot create: {}", dir, ec.message()));
  std::unique_ptr<Spool> spool(new Spool(dir, max_bytes));
  std::vector<Spool::Item> items;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.ends_with(".tmp")) {
      std::filesystem::remove(entry.path(), ec);
      continue;
    }
    if (!name.ends_with(kSuffix)) continue;
    std::string_view digits = std::string_view(name).substr(0, name.size() - kSuffix.size());
    uint64_t seq = 0;
    auto [p, e] = std::from_chars(digits.data(), digits.data() + digits.size(), seq);
    if (e != std::errc() || p != digits.data() + digits.size()) continue;
    uint64_t size = entry.file_size(ec);
    if (ec) continue;
    items.push_back({seq, size});
  }
  if (ec) return Unavailable(fmt::format("spool {}: cannot list: {}", dir, ec.message()));
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.sequence < b.sequence; });
  for (const Item& it : items) {
    spool->entries_.push_back(it);
    spool->bytes_ += it.bytes;
    spool->next_sequence_ = it.sequence + 1;
  }
  return spool;
}

std::string Spool::PathOf(uint64_t sequence) const {
  return fmt::format("{}/{:020}{}", dir_, sequence, kSuffix);
}

Status Spool::Append(std::string_view document) {
  if (document.size() > max_bytes_) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("spool {}: a batch of {} bytes exceeds the spool's {} bytes", dir_,
                              document.size(), max_bytes_));
  }
  uint64_t dropped = 0, dropped_bytes = 0;
  while (!entries_.empty() && bytes_ + document.size() > max_bytes_) {
    dropped_bytes += entries_.front().bytes;
    GPULEDGER_RETURN_IF_ERROR(PopFront());
    ++dropped;
  }
  if (dropped > 0) {
    dropped_batches_ += dropped;
    if (on_drop_) {
      on_drop_(fmt::format("spool {} full ({} bytes max): dropped the {} oldest batches ({} bytes)",
                           dir_, max_bytes_, dropped, dropped_bytes));
    }
  }
  uint64_t seq = next_sequence_++;
  GPULEDGER_RETURN_IF_ERROR(WriteFileDurably(PathOf(seq), document));
  entries_.push_back({seq, document.size()});
  bytes_ += document.size();
  return Status::Ok();
}

Result<SpoolEntry> Spool::Front() const {
  if (entries_.empty()) return NotFound(fmt::format("spool {}: empty", dir_));
  const Item& it = entries_.front();
  std::ifstream in(PathOf(it.sequence), std::ios::binary);
  if (!in) return Unavailable(fmt::format("{}: cannot open", PathOf(it.sequence)));
  std::ostringstream buf;
  buf << in.rdbuf();
  return SpoolEntry{it.sequence, buf.str()};
}

Status Spool::PopFront() {
  if (entries_.empty()) return NotFound(fmt::format("spool {}: empty", dir_));
  Item it = entries_.front();
  if (::unlink(PathOf(it.sequence).c_str()) != 0 && errno != ENOENT) {
    return Unavailable(fmt::format("{}: {}", PathOf(it.sequence), std::strerror(errno)));
  }
  entries_.pop_front();
  bytes_ -= it.bytes;
  return Status::Ok();
}

}  // namespace gpuledger::agent
