// The agent protocol's framing, as both sides use it: whole frames, frames
// split anywhere, truncated frames, garbage and hostile lengths.
#include "agent/protocol.h"

#include <QTest>

using namespace sandcastle::proto;

class TestProtocol : public QObject {
    Q_OBJECT
private slots:
    void roundTrip() {
        std::string bytes = encodeFrame(Type::Exec, 42, "payload");
        QCOMPARE(bytes.size(), kHeaderSize + 7);
        FrameReader r;
        r.feed(bytes.data(), bytes.size());
        Frame f;
        QVERIFY(r.next(f));
        QCOMPARE(int(f.type), int(Type::Exec));
        QCOMPARE(f.id, 42u);
        QCOMPARE(f.version, kVersion);
        QCOMPARE(f.payload, std::string("payload"));
        QVERIFY(!r.next(f));
        QCOMPARE(r.skippedBytes(), 0u);
    }

    void splitAtEveryByte() {
        std::string bytes = encodeFrame(Type::Stdout, 1, "abc") + encodeFrame(Type::Exited, 2, "");
        FrameReader r;
        std::vector<Frame> got;
        for (char c : bytes) {
            r.feed(&c, 1);
            Frame f;
            while (r.next(f))
                got.push_back(f);
        }
        QCOMPARE(got.size(), size_t(2));
        QCOMPARE(got[0].payload, std::string("abc"));
        QCOMPARE(got[1].id, 2u);
    }

    void truncatedFrameWaits() {
        std::string bytes = encodeFrame(Type::Stdout, 9, std::string(1000, 'x'));
        FrameReader r;
        r.feed(bytes.data(), bytes.size() - 1);
        Frame f;
        QVERIFY(!r.next(f));
        QCOMPARE(r.buffered(), bytes.size() - 1);
        r.feed(bytes.data() + bytes.size() - 1, 1);
        QVERIFY(r.next(f));
        QCOMPARE(f.payload.size(), size_t(1000));
    }

    void garbageIsSkipped() {
        std::string garbage = "\x01\x02not a frame at all SCA";
        std::string bytes = garbage + encodeFrame(Type::Ping, 5);
        FrameReader r;
        r.feed(bytes.data(), bytes.size());
        Frame f;
        QVERIFY(r.next(f));
        QCOMPARE(int(f.type), int(Type::Ping));
        QCOMPARE(f.id, 5u);
        QCOMPARE(r.skippedBytes(), uint64_t(garbage.size()));
    }

    void hostileLengthIsGarbage() {
        // A header that claims a 4 GiB payload must not make the reader wait
        // (or allocate) for it: it is skipped, and the next frame is found.
        std::string bad = encodeFrame(Type::Stdout, 1, "");
        bad[12] = bad[13] = bad[14] = bad[15] = '\xff';
        std::string bytes = bad + encodeFrame(Type::Pong, 7);
        FrameReader r;
        r.feed(bytes.data(), bytes.size());
        Frame f;
        QVERIFY(r.next(f));
        QCOMPARE(int(f.type), int(Type::Pong));
        QCOMPARE(r.skippedBytes(), uint64_t(bad.size()));
    }

    void randomBytesNeverCrash() {
        // Pure noise, then a real frame: the reader survives and resyncs.
        std::string noise;
        uint32_t x = 12345;
        for (int i = 0; i < 100000; ++i) {
            x = x * 1103515245 + 12345;
            noise.push_back(char(x >> 16));
        }
        std::string bytes = noise + encodeFrame(Type::Ping, 77);
        FrameReader r;
        r.feed(bytes.data(), bytes.size());
        Frame f;
        bool found = false;
        while (r.next(f))
            found = found || (f.type == Type::Ping && f.id == 77);
        QVERIFY(found);
    }

    void payloadFields() {
        PayloadWriter w;
        w.u8(7).u32(0xdeadbeef).i32(-5).u64(1ull << 40).bytes("hello");
        PayloadReader r(w.data());
        QCOMPARE(r.u8(), uint8_t(7));
        QCOMPARE(r.u32(), 0xdeadbeefu);
        QCOMPARE(r.i32(), -5);
        QCOMPARE(r.u64(), 1ull << 40);
        QCOMPARE(r.bytes(), std::string("hello"));
        QVERIFY(r.ok());
        QVERIFY(r.atEnd());
    }

    void shortPayloadIsDetected() {
        PayloadWriter w;
        w.u32(100); // a length prefix that promises 100 bytes that never come
        PayloadReader r(w.data());
        QCOMPARE(r.bytes(), std::string());
        QVERIFY(!r.ok());
        QCOMPARE(r.u32(), 0u); // stays failed
    }
};

QTEST_GUILESS_MAIN(TestProtocol)
#include "tst_protocol.moc"
