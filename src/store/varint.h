// LEB128 varints and zigzag, for the store's packed formats (sample chunks, minute blobs).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuledger::store {

inline void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
inline uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
inline int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// Reads varints off a byte string; every read fails (false) at a truncated or overlong one.
class VarintReader {
 public:
  explicit VarintReader(std::string_view data)
      : p_(reinterpret_cast<const uint8_t*>(data.data())), end_(p_ + data.size()) {}
  bool done() const { return p_ == end_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  // The next byte, left to be read.
  bool Peek(uint8_t& v) const {
    if (p_ == end_) return false;
    v = *p_;
    return true;
  }
  bool Byte(uint8_t& v) {
    if (p_ == end_) return false;
    v = *p_++;
    return true;
  }
  bool Varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      uint8_t b = *p_++;
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  // Reads past `count` varints without decoding them; false where Varint would be.
  bool Skip(size_t count) {
    for (; count > 0; --count) {
      // A varint has at most 10 bytes.
      const uint8_t* last = end_ - p_ > 10 ? p_ + 10 : end_;
      while (p_ < last && (*p_ & 0x80) != 0) ++p_;
      if (p_ == last) return false;
      ++p_;
    }
    return true;
  }
  // The next `n` bytes as they are; false when fewer are left.
  bool Take(size_t n, std::string_view& v) {
    if (remaining() < n) return false;
    v = std::string_view(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool Signed(int64_t& v) {
    uint64_t u;
    if (!Varint(u)) return false;
    v = UnZigZag(u);
    return true;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace gpuledger::store
