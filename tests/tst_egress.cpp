// The host filter's ruleset and the resolver list are pure functions: check
// what nft will read (and let nft itself check the syntax, without loading
// it), and what is taken from a resolv.conf. The check of a loaded table
// compares nft's JSON listing whole: a rule or element added, changed or
// taken away is a difference; handles, counters and element order are not.
// And the engine refuses a data dir that passt's and QEMU's users cannot
// reach, naming the culprit.
#include "network/egress.h"
#include "sandbox/engine.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <unistd.h>

using namespace sandcastle;

namespace {

// `nft -j list table inet sandcastle` as nft 1.0.6 (Debian 12) printed it
// for a loaded filter (uid 995), one entry a line.
const char kListing[] =
    R"({"nftables":[
{"metainfo":{"version":"1.0.6","release_name":"Lester Gooch #5","json_schema_version":1}},
{"table":{"family":"inet","name":"sandcastle","handle":11}},
{"set":{"family":"inet","name":"dns4","table":"sandcastle","type":"ipv4_addr","handle":1,"elem":["10.255.255.53","198.51.100.2"]}},
{"chain":{"family":"inet","table":"sandcastle","name":"output","handle":2,"type":"filter","hook":"output","prio":0,"policy":"accept"}},
{"chain":{"family":"inet","table":"sandcastle","name":"sandbox","handle":3}},
{"rule":{"family":"inet","table":"sandcastle","chain":"output","handle":34,"expr":[{"match":{"op":"==","left":{"meta":{"key":"skuid"}},"right":995}},{"jump":{"target":"sandbox"}}]}},
{"rule":{"family":"inet","table":"sandcastle","chain":"sandbox","handle":35,"expr":[{"match":{"op":"==","left":{"payload":{"protocol":"ip","field":"daddr"}},"right":"@dns4"}},{"match":{"op":"==","left":{"payload":{"protocol":"udp","field":"dport"}},"right":53}},{"counter":{"packets":0,"bytes":0}},{"accept":null}]}},
{"rule":{"family":"inet","table":"sandcastle","chain":"sandbox","handle":36,"expr":[{"match":{"op":"==","left":{"payload":{"protocol":"ip","field":"daddr"}},"right":"@dns4"}},{"match":{"op":"==","left":{"payload":{"protocol":"tcp","field":"dport"}},"right":53}},{"counter":{"packets":0,"bytes":0}},{"accept":null}]}},
{"rule":{"family":"inet","table":"sandcastle","chain":"sandbox","handle":37,"expr":[{"match":{"op":"==","left":{"fib":{"result":"type","flags":["daddr"]}},"right":"local"}},{"counter":{"packets":0,"bytes":0}},{"reject":{"type":"icmpx","expr":"admin-prohibited"}}]}},
{"rule":{"family":"inet","table":"sandcastle","chain":"sandbox","handle":39,"expr":[{"match":{"op":"==","left":{"payload":{"protocol":"ip","field":"daddr"}},"right":{"set":[{"prefix":{"addr":"0.0.0.0","len":8}},{"prefix":{"addr":"10.0.0.0","len":8}},{"prefix":{"addr":"100.64.0.0","len":10}},{"prefix":{"addr":"127.0.0.0","len":8}},{"prefix":{"addr":"169.254.0.0","len":16}},{"prefix":{"addr":"172.16.0.0","len":12}},{"prefix":{"addr":"192.168.0.0","len":16}},{"prefix":{"addr":"224.0.0.0","len":3}}]}}},{"counter":{"packets":0,"bytes":0}},{"reject":{"type":"icmpx","expr":"admin-prohibited"}}]}},
{"rule":{"family":"inet","table":"sandcastle","chain":"sandbox","handle":41,"expr":[{"match":{"op":"==","left":{"payload":{"protocol":"ip6","field":"daddr"}},"right":{"set":["::1",{"prefix":{"addr":"::ffff:0.0.0.0","len":96}},{"prefix":{"addr":"fc00::","len":7}},{"prefix":{"addr":"fe80::","len":10}},{"prefix":{"addr":"ff00::","len":8}}]}}},{"counter":{"packets":0,"bytes":0}},{"reject":{"type":"icmpx","expr":"admin-prohibited"}}]}},
{"rule":{"family":"inet","table":"sandcastle","chain":"sandbox","handle":43,"expr":[{"match":{"op":"==","left":{"payload":{"protocol":"tcp","field":"dport"}},"right":{"set":[25,465,587]}}},{"counter":{"packets":0,"bytes":0}},{"reject":{"type":"tcp reset"}}]}}
]})";

/// The listing's entries, to change one as `nft` commands would.
QJsonArray entries() {
    return QJsonDocument::fromJson(kListing).object().value(QLatin1String("nftables")).toArray();
}

QByteArray listing(const QJsonArray &entries) {
    return QJsonDocument(QJsonObject{{QStringLiteral("nftables"), entries}}).toJson();
}

/// The listing with `entries`, normalised, compared with the sample's.
QString differenceWith(const QJsonArray &changed) {
    auto expected = egress::normalisedTable(kListing);
    auto listed = egress::normalisedTable(listing(changed));
    if (!expected || !listed)
        return QStringLiteral("unreadable");
    return egress::tableDifference(*expected, *listed);
}

/// Replaces the value at `path` (keys, and indexes into arrays) in `root`.
QJsonValue replaced(const QJsonValue &root, QStringList path, const QJsonValue &value) {
    if (path.isEmpty())
        return value;
    const QString step = path.takeFirst();
    if (root.isArray()) {
        QJsonArray array = root.toArray();
        array[step.toInt()] = replaced(array.at(step.toInt()), path, value);
        return array;
    }
    QJsonObject object = root.toObject();
    object[step] = replaced(object.value(step), path, value);
    return object;
}

/// A rule as `nft insert rule inet sandcastle sandbox ip daddr 10.99.0.2
/// accept` makes it: first in the chain, before every reject.
QJsonObject acceptRule() {
    return QJsonDocument::fromJson(
               R"({"rule":{"family":"inet","table":"sandcastle","chain":"sandbox","handle":44,
               "expr":[{"match":{"op":"==","left":{"payload":{"protocol":"ip","field":"daddr"}},
               "right":"10.99.0.2"}},{"accept":null}]}})")
        .object();
}

} // namespace

class TestEgress : public QObject {
    Q_OBJECT
private slots:
    void rulesetNamesTheUserAndEveryRange() {
        const QString rules = egress::hostRuleset(995, {QStringLiteral("192.168.1.1")});
        QVERIFY(rules.contains(QStringLiteral("meta skuid 995 jump sandbox")));
        QVERIFY(rules.contains(QStringLiteral("add element inet sandcastle dns4 { 192.168.1.1 }")));
        QVERIFY(rules.contains(QStringLiteral("fib daddr type local")));
        for (const QString &range : egress::blockedRanges4() + egress::blockedRanges6())
            QVERIFY2(rules.contains(range), qPrintable(range));
        QVERIFY(rules.contains(QStringLiteral("tcp dport { 25, 465, 587 }")));
        QVERIFY(egress::blockedRanges4().contains(QStringLiteral("169.254.0.0/16")));
        // DNS is let through before anything is refused.
        QVERIFY(rules.indexOf(QStringLiteral("@dns4 udp dport 53")) <
                rules.indexOf(QStringLiteral("fib daddr")));
        QVERIFY(!egress::hostRuleset(995, {}).contains(QStringLiteral("add element")));
    }

    void nftAcceptsTheRuleset() {
        if (geteuid() != 0)
            QSKIP("nft --check needs root");
        QProcess nft;
        nft.start(QStringLiteral("nft"),
                  {QStringLiteral("--check"), QStringLiteral("-f"), QStringLiteral("-")});
        QVERIFY(nft.waitForStarted());
        nft.write(egress::hostRuleset(995, {QStringLiteral("10.0.0.53")}).toUtf8());
        nft.closeWriteChannel();
        QVERIFY(nft.waitForFinished());
        QCOMPARE(nft.readAllStandardError(), QByteArray());
        QCOMPARE(nft.exitCode(), 0);
    }

    void listingIsReducedToWhatTheFilterDoes() {
        auto table = egress::normalisedTable(kListing);
        QVERIFY(table);
        QCOMPARE(table->size(), 11); // the metainfo is left out
        const QByteArray text = QJsonDocument(*table).toJson(QJsonDocument::Compact);
        QVERIFY(!text.contains("handle"));
        QVERIFY(!text.contains("packets"));
        QVERIFY(!text.contains("metainfo"));
        QVERIFY(text.contains(R"("counter":null)"));
        QCOMPARE(egress::dnsSetElements(*table),
                 QStringList({QStringLiteral("10.255.255.53"), QStringLiteral("198.51.100.2")}));
        // Not a listing of nft's: no table to compare with.
        for (const char *bad : {"", "not json", "{}", R"({"nftables":3})", R"({"nftables":[1]})"})
            QVERIFY2(!egress::normalisedTable(bad), bad);
    }

    void theSameFilterLoadedAgainIsNoDifference() {
        // Another load (new handles), traffic (counters), another nft
        // (metainfo), the kernel's hash order of set elements.
        QJsonArray again = entries();
        for (qsizetype i = 0; i < again.size(); ++i) {
            QJsonObject entry = again.at(i).toObject();
            const QString kind = entry.keys().constFirst();
            QJsonObject inner = entry.value(kind).toObject();
            if (inner.contains(QLatin1String("handle")))
                inner[QStringLiteral("handle")] =
                    inner.value(QLatin1String("handle")).toInt() + 100;
            entry[kind] = inner;
            again[i] = entry;
        }
        again[0] = replaced(again.at(0), {"metainfo", "version"}, QStringLiteral("1.0.7"));
        again[2] =
            replaced(again.at(2), {"set", "elem"},
                     QJsonArray{QStringLiteral("198.51.100.2"), QStringLiteral("10.255.255.53")});
        again[6] = replaced(again.at(6), {"rule", "expr", "2", "counter"},
                            QJsonObject{{"packets", 12}, {"bytes", 900}});
        QCOMPARE(differenceWith(again), QString());
        QCOMPARE(differenceWith(entries()), QString());
    }

    void anAddedAcceptRuleIsNoticed() {
        QJsonArray tampered = entries();
        tampered.insert(6, acceptRule());
        const QString difference = differenceWith(tampered);
        QVERIFY2(difference.startsWith(QLatin1String("added: ")), qPrintable(difference));
        QVERIFY2(difference.contains(QLatin1String("10.99.0.2")), qPrintable(difference));
        // At the end of the chain, too (after the rejects it changes
        // nothing today, but it is not the filter that was loaded).
        tampered = entries();
        tampered.append(acceptRule());
        QVERIFY(differenceWith(tampered).startsWith(QLatin1String("added: ")));
        // And a chain of someone else's in the table.
        tampered = entries();
        tampered.insert(5, QJsonObject{{"chain", QJsonObject{{"family", "inet"},
                                                             {"table", "sandcastle"},
                                                             {"name", "extra"},
                                                             {"handle", 50}}}});
        QVERIFY(differenceWith(tampered).startsWith(QLatin1String("added: ")));
    }

    void aRemovedRuleIsNoticed() {
        QJsonArray tampered = entries();
        tampered.removeAt(11); // no more SMTP reset
        QVERIFY(differenceWith(tampered).startsWith(QLatin1String("removed: ")));
        tampered = entries();
        tampered.removeAt(5); // the jump from output: nothing is filtered
        QVERIFY(differenceWith(tampered).startsWith(QLatin1String("removed: ")));
    }

    void aChangedRuleOrSetElementIsNoticed() {
        // An address added to the DNS set: port 53 to a private address.
        QJsonArray tampered = entries();
        tampered[2] = replaced(tampered.at(2), {"set", "elem"},
                               QJsonArray{"10.255.255.53", "10.99.0.2", "198.51.100.2"});
        QString difference = differenceWith(tampered);
        QVERIFY2(difference.startsWith(QLatin1String("changed: ")), qPrintable(difference));
        QVERIFY(difference.contains(QLatin1String("10.99.0.2")));
        // A resolver taken out of it.
        tampered = entries();
        tampered[2] = replaced(tampered.at(2), {"set", "elem"}, QJsonArray{"10.255.255.53"});
        QVERIFY(differenceWith(tampered).startsWith(QLatin1String("changed: ")));
        // 10.0.0.0/8 narrowed to 10.0.0.0/9 in the blocked ranges.
        tampered = entries();
        tampered[9] =
            replaced(tampered.at(9),
                     {"rule", "expr", "0", "match", "right", "set", "1", "prefix", "len"}, 9);
        QVERIFY(differenceWith(tampered).startsWith(QLatin1String("changed: ")));
        // A reject turned into an accept; the jump made for another uid.
        tampered = entries();
        tampered[8] = replaced(tampered.at(8), {"rule", "expr", "2"},
                               QJsonObject{{"accept", QJsonValue::Null}});
        QVERIFY(differenceWith(tampered).startsWith(QLatin1String("changed: ")));
        tampered = entries();
        tampered[5] = replaced(tampered.at(5), {"rule", "expr", "0", "match", "right"}, 996);
        QVERIFY(differenceWith(tampered).startsWith(QLatin1String("changed: ")));
        // The output chain's hook priority or policy.
        tampered = entries();
        tampered[3] = replaced(tampered.at(3), {"chain", "prio"}, 10);
        QVERIFY(differenceWith(tampered).startsWith(QLatin1String("changed: ")));
    }

    void everyServicesResolversAreKept() {
        QTemporaryDir dir;
        const QString list = dir.filePath(QStringLiteral("run/resolvers"));
        // The first load on this host: what the set held is kept.
        QCOMPARE(egress::recordResolvers(list, {QStringLiteral("1.1.1.1")},
                                         {QStringLiteral("10.0.0.53")}),
                 QStringList({QStringLiteral("10.0.0.53"), QStringLiteral("1.1.1.1")}));
        // Another service adds its own; a seed no longer counts (an address
        // added to the set by hand is not taken for a resolver).
        QCOMPARE(egress::recordResolvers(list,
                                         {QStringLiteral("9.9.9.9"), QStringLiteral("1.1.1.1")},
                                         {QStringLiteral("10.99.0.2")}),
                 QStringList({QStringLiteral("10.0.0.53"), QStringLiteral("1.1.1.1"),
                              QStringLiteral("9.9.9.9")}));
        // Only addresses reach nft's input, whatever the file says.
        QFile f(list);
        QVERIFY(f.open(QIODevice::Append));
        f.write("1.2.3.4 }\nadd rule inet sandcastle sandbox accept\n::1\n 8.8.8.8 \n");
        f.close();
        QCOMPARE(egress::recordResolvers(list, {}),
                 QStringList({QStringLiteral("10.0.0.53"), QStringLiteral("1.1.1.1"),
                              QStringLiteral("9.9.9.9"), QStringLiteral("8.8.8.8")}));
        // The ruleset replaces the table whole, the set with it.
        const QString rules = egress::hostRuleset(995, {QStringLiteral("1.1.1.1")});
        QVERIFY(rules.startsWith(QLatin1String("add table inet sandcastle\n"
                                               "delete table inet sandcastle\n")));
    }

    void resolversComeFromResolvConf() {
        QTemporaryDir dir;
        QFile f(dir.filePath(QStringLiteral("resolv.conf")));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("# comment\nsearch example.org\nnameserver 127.0.0.53\n"
                "nameserver 192.168.1.1\n  nameserver\t9.9.9.9 \nnameserver ::1\n"
                "nameserver 2001:db8::1\nnameserver 1.2.3.4; rm -rf /\nnameserver not-an-ip\n");
        f.close();
        // Loopback (a stub resolver), IPv6 and anything malformed are left out.
        QCOMPARE(egress::nameServers(f.fileName()),
                 QStringList({QStringLiteral("192.168.1.1"), QStringLiteral("9.9.9.9")}));
        QCOMPARE(egress::nameServers(dir.filePath(QStringLiteral("missing"))), QStringList());
    }

    void anUnreachableDataDirIsNamed() {
        if (geteuid() != 0)
            QSKIP("QEMU and passt run as other users only when Sandcastle is root");
        QTemporaryDir dir; // mode 0700: nobody else may enter
        EngineConfig config = EngineConfig::defaults();
        config.dataDir = dir.filePath(QStringLiteral("inner/data"));
        Engine engine(config);
        auto opened = engine.open();
        QVERIFY(!opened);
        QVERIFY2(opened.error().message.contains(dir.path() + QStringLiteral(", which other")),
                 qPrintable(opened.error().message));
        // And a create says the same, at once.
        auto created = engine.create({}).result();
        QVERIFY(!created);
        QCOMPARE(created.error().message, opened.error().message);
    }
};

QTEST_GUILESS_MAIN(TestEgress)
#include "tst_egress.moc"
