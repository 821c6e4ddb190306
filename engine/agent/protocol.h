// The wire protocol between Sandcastle (host) and its agent in the guest.
//
// Shared by both sides, so it uses only the C++ standard library: the agent
// is a static binary without Qt. Every message is a frame:
//
//   offset 0  u32 magic   'S','C','A','G'
//          4  u8  version (kVersion)
//          5  u8  type    (Type)
//          6  u16 reserved, zero
//          8  u32 id      request id chosen by the host; replies carry it
//         12  u32 length  payload bytes that follow, at most kMaxPayload
//
// Integers are little-endian. Payload fields are written with PayloadWriter
// and read with PayloadReader (u8/u32/u64/i32 and u32-length-prefixed bytes).
// A reader that meets bytes that are not a frame skips to the next magic and
// counts what it skipped, so one corrupt frame costs one request, not the
// connection.
//
// Request ids are only unique within one host session: a host that
// reconnects numbers from 1 again. So every Hello names its session (a
// random nonce), the agent ends the previous session's work when a new one
// says Hello, and the host ignores everything before the Ready that names
// its own session. Version 2 added the session; docs/protocol.md says what
// becomes of an ended session's work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace sandcastle::proto {

constexpr uint32_t kMagic = 0x47414353; // "SCAG" read as little-endian bytes
constexpr uint8_t kVersion = 2;
constexpr size_t kHeaderSize = 16;
constexpr uint32_t kMaxPayload = 1u << 20;
constexpr size_t kChunkSize = 64 * 1024; // data frames carry at most this much
constexpr const char *kPortName = "org.sandcastle.agent.0";

enum class Type : uint8_t {
    Hello = 1, // host -> guest: u64 session (random, not 0); answered by Ready
    // guest -> host: u32 protocol version, bytes agent version, u64 session
    // (the Hello's; 0 in the announcement the agent sends when it starts)
    Ready = 2,
    Ping = 3, // host -> guest, empty
    Pong = 4, // guest -> host, empty

    // host -> guest: u32 timeout_ms, u32 output cap per stream, bytes command,
    // bytes cwd, u32 n, n x (bytes name, bytes value)
    Exec = 10,
    Stdout = 11, // guest -> host: raw bytes
    Stderr = 12, // guest -> host: raw bytes
    // guest -> host: i32 exit code, u8 timed out, u32 duration ms,
    // u64 stdout bytes produced, u64 stderr bytes produced
    Exited = 13,
    // host -> guest, empty: kill the exec's process group, or abandon the
    // upload or download; never answered
    Cancel = 14,

    WriteOpen = 20,  // host -> guest: bytes path, u32 mode
    WriteData = 21,  // host -> guest: raw bytes
    WriteClose = 22, // host -> guest, empty; answered by Done
    ReadOpen = 23,   // host -> guest: bytes path, u64 size limit
    ReadData = 24,   // guest -> host: raw bytes

    Done = 30,  // guest -> host: u64 bytes written or read
    Error = 31, // guest -> host: u32 ErrorCode, bytes message
};

enum class ErrorCode : uint32_t {
    Malformed = 1,
    UnsupportedVersion = 2,
    UnknownType = 3,
    NotFound = 4,
    PermissionDenied = 5,
    InvalidArgument = 6,
    TooLarge = 7,
    Io = 8,
    NoSpace = 9,
};

struct Frame {
    uint8_t version = kVersion;
    Type type = Type::Ping;
    uint32_t id = 0;
    std::string payload;
};

inline void putU32(std::string &out, uint32_t v) {
    char b[4] = {char(v), char(v >> 8), char(v >> 16), char(v >> 24)};
    out.append(b, 4);
}

inline uint32_t getU32(const char *p) {
    const auto *u = reinterpret_cast<const unsigned char *>(p);
    return uint32_t(u[0]) | uint32_t(u[1]) << 8 | uint32_t(u[2]) << 16 | uint32_t(u[3]) << 24;
}

/// Encodes one frame. The caller keeps payloads within kMaxPayload.
inline std::string encodeFrame(Type type, uint32_t id, std::string_view payload = {}) {
    std::string out;
    out.reserve(kHeaderSize + payload.size());
    putU32(out, kMagic);
    out.push_back(char(kVersion));
    out.push_back(char(type));
    out.append(2, '\0');
    putU32(out, id);
    putU32(out, uint32_t(payload.size()));
    out.append(payload);
    return out;
}

class PayloadWriter {
public:
    PayloadWriter &u8(uint8_t v) {
        buf_.push_back(char(v));
        return *this;
    }
    PayloadWriter &u32(uint32_t v) {
        putU32(buf_, v);
        return *this;
    }
    PayloadWriter &i32(int32_t v) { return u32(uint32_t(v)); }
    PayloadWriter &u64(uint64_t v) {
        putU32(buf_, uint32_t(v));
        putU32(buf_, uint32_t(v >> 32));
        return *this;
    }
    PayloadWriter &bytes(std::string_view s) {
        putU32(buf_, uint32_t(s.size()));
        buf_.append(s);
        return *this;
    }
    const std::string &data() const { return buf_; }

private:
    std::string buf_;
};

/// Reads fields in order; any read past the end sets ok() to false and
/// returns zero values, so a short or hostile payload is detected once, at
/// the end, instead of at every field.
class PayloadReader {
public:
    explicit PayloadReader(std::string_view data)
        : data_(data) {}
    uint8_t u8() {
        if (!need(1))
            return 0;
        return uint8_t(data_[pos_++]);
    }
    uint32_t u32() {
        if (!need(4))
            return 0;
        uint32_t v = getU32(data_.data() + pos_);
        pos_ += 4;
        return v;
    }
    int32_t i32() { return int32_t(u32()); }
    uint64_t u64() {
        uint64_t lo = u32();
        uint64_t hi = u32();
        return lo | hi << 32;
    }
    std::string bytes() {
        uint32_t n = u32();
        if (!need(n))
            return {};
        std::string s(data_.substr(pos_, n));
        pos_ += n;
        return s;
    }
    bool ok() const { return ok_; }
    bool atEnd() const { return pos_ == data_.size(); }

private:
    bool need(size_t n) {
        if (!ok_ || data_.size() - pos_ < n) {
            ok_ = false;
            return false;
        }
        return true;
    }
    std::string_view data_;
    size_t pos_ = 0;
    bool ok_ = true;
};

/// Splits a byte stream into frames. Feed it whatever arrived; take frames
/// out with next() until it returns false.
class FrameReader {
public:
    void feed(const char *data, size_t n) { buf_.append(data, n); }

    /// Takes the next complete frame. Bytes that cannot start a frame (bad
    /// magic, oversized length) are skipped and added to skippedBytes().
    bool next(Frame &out) {
        for (;;) {
            if (buf_.size() - pos_ < kHeaderSize) {
                compact();
                return false;
            }
            const char *h = buf_.data() + pos_;
            if (getU32(h) != kMagic || getU32(h + 12) > kMaxPayload) {
                resync();
                continue;
            }
            uint32_t len = getU32(h + 12);
            if (buf_.size() - pos_ < kHeaderSize + len) {
                compact();
                return false;
            }
            out.version = uint8_t(h[4]);
            out.type = Type(uint8_t(h[5]));
            out.id = getU32(h + 8);
            out.payload.assign(h + kHeaderSize, len);
            pos_ += kHeaderSize + len;
            return true;
        }
    }

    uint64_t skippedBytes() const { return skipped_; }
    size_t buffered() const { return buf_.size() - pos_; }

private:
    void resync() {
        // Look for the next magic after the current position.
        static const char magic[4] = {'S', 'C', 'A', 'G'};
        size_t found = buf_.find(std::string_view(magic, 4), pos_ + 1);
        size_t to = found == std::string::npos ? buf_.size() - 3 : found;
        if (to <= pos_)
            to = pos_ + 1;
        skipped_ += to - pos_;
        pos_ = to;
    }
    void compact() {
        if (pos_ > 0 && (pos_ == buf_.size() || pos_ > 64 * 1024)) {
            buf_.erase(0, pos_);
            pos_ = 0;
        }
    }
    std::string buf_;
    size_t pos_ = 0;
    uint64_t skipped_ = 0;
};

} // namespace sandcastle::proto
