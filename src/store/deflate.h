// Raw deflate for the store's packed formats (sample chunks, serving chunks): small bodies,
// many of them, so the streams are sized to the body and the inflating one is kept per
// thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpuledger::store {

// `body` as a raw deflate stream (level 6: 9 gave 0.3% less on the demo fleet's samples,
// for more time); empty when zlib fails.
std::string Deflate(const std::string& body);

// Inflates exactly `size` bytes from all of `in` into `out`; false when `in` is not such
// a stream.
bool Inflate(std::string_view in, size_t size, std::string& out);

}  // namespace gpuledger::store
