// The on-disk spool: batches waiting to be sent, oldest first, bounded in bytes. Each
// batch is one file `<sequence>.batch` (20 digits, so names sort as numbers), written
// to a temp name, fsynced and renamed, so a crash leaves whole batches only. A
// restarted agent reopens the folder and resends what is there, in order.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuledger::agent {

struct SpoolEntry {
  uint64_t sequence = 0;
  std::string document;
};

class Spool {
 public:
  // Opens (creating) `dir`, removes leftover temp files and indexes the batches there.
  // Fails naming the folder when it cannot be created or read.
  static Result<std::unique_ptr<Spool>> Open(std::string dir, uint64_t max_bytes);

  // Stores a batch document after the others. When the spool would exceed max_bytes,
  // the oldest batches are dropped first (counted, and reported through the drop
  // callback); a document larger than max_bytes alone is refused (kResourceExhausted).
  Status Append(std::string_view document);
  // The oldest batch; kNotFound when the spool is empty.
  Result<SpoolEntry> Front() const;
  // Removes the oldest batch (sent, or refused for good).
  Status PopFront();

  size_t size() const { return entries_.size(); }
  uint64_t bytes() const { return bytes_; }
  uint64_t max_bytes() const { return max_bytes_; }
  uint64_t dropped_batches() const { return dropped_batches_; }
  const std::string& dir() const { return dir_; }
  // Called with a line naming what was dropped and why (for the log).
  void set_drop_callback(std::function<void(const std::string&)> cb) { on_drop_ = std::move(cb); }

 private:
  struct Item {
    uint64_t sequence;
    uint64_t bytes;
  };
  Spool(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}
  std::string PathOf(uint64_t sequence) const;

  std::string dir_;
  uint64_t max_bytes_;
  std::deque<Item> entries_;
  uint64_t bytes_ = 0;
  uint64_t next_sequence_ = 1;
  uint64_t dropped_batches_ = 0;
  std::function<void(const std::string&)> on_drop_;
};

}  // namespace gpuledger::agent
